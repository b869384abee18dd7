"""KRaft metadata records and their wire codec (Kafka's ``ApiMessageAndVersion`` framing).

A metadata record value in ``__cluster_metadata`` is::

    frame version  unsigned varint (1; Kafka rejects 0, the 2.8 preview format)
    api key        unsigned varint (TopicRecord = 2, PartitionRecord = 3, ...)
    version        unsigned varint
    body           the record in Kafka's flexible message format (compact strings/arrays,
                   tagged fields after every struct)

Each record type is a dataclass with a ``SCHEMA`` tuple of :class:`F` field specs transcribed
from Kafka's ``metadata/src/main/resources/common/metadata/*.json``; one generic codec walks the
schema, so versions, nullability and tagged fields follow the JSON exactly.
:func:`encode_record` / :func:`decode_record` are the public entry points. The raft control
messages (LeaderChangeMessage, SnapshotHeader/FooterRecord) use the same codec without the
frame (control record values are bare messages, Kafka's ``MessageUtil.toByteBuffer``).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar

from strom.core.exceptions import CorruptMessageError

FRAME_VERSION = 1
ZERO_UUID = uuid.UUID(int=0)

# ---------------------------------------------------------------------------------------------
# Primitive readers/writers
# ---------------------------------------------------------------------------------------------


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0:
        raise ValueError(f"unsigned varint cannot be negative: {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


class Reader:
    """Cursor over a bytes-like object; every read checks bounds (corrupt input is an error)."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.buf = bytes(buf) if isinstance(buf, memoryview) else buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise CorruptMessageError(f"metadata record truncated: need {n} bytes at {self.pos}")
        data = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return data

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            if self.pos >= self.end:
                raise CorruptMessageError("metadata record truncated inside a varint")
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise CorruptMessageError("unsigned varint is longer than 5 bytes")

    def unpack(self, st: struct.Struct) -> Any:
        return st.unpack(self.take(st.size))[0]

    @property
    def remaining(self) -> int:
        return self.end - self.pos


_PRIM: dict[str, struct.Struct] = {
    "int8": struct.Struct(">b"), "int16": struct.Struct(">h"), "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"), "uint16": struct.Struct(">H"), "bool": struct.Struct(">?"),
}

# ---------------------------------------------------------------------------------------------
# Schema-driven codec
# ---------------------------------------------------------------------------------------------

ALL = (0, 32767)


@dataclass(frozen=True, slots=True)
class F:
    """One field of a message schema, as in Kafka's JSON (versions are inclusive ranges)."""

    attr: str                      # Python attribute name
    type: str | type[Message]      # primitive name, "string", "uuid", "[]int32", "[]uuid" or a struct
    versions: tuple[int, int] = ALL
    nullable: tuple[int, int] | None = None
    tag: int | None = None         # tagged field (taggedVersions == versions here)
    array: bool = False            # array of ``type`` (for struct arrays)

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def is_nullable(self, version: int) -> bool:
        return self.nullable is not None and self.nullable[0] <= version <= self.nullable[1]


class Message:
    """Base of schema-described messages: dataclass subclasses set ``SCHEMA`` and ``VERSIONS``."""

    SCHEMA: ClassVar[tuple[F, ...]] = ()
    VERSIONS: ClassVar[tuple[int, int]] = (0, 0)
    API_KEY: ClassVar[int] = -1

    def encode(self, version: int | None = None) -> bytes:
        """The message body (no frame) at ``version`` (default: the highest)."""
        v = self.VERSIONS[1] if version is None else version
        if not self.VERSIONS[0] <= v <= self.VERSIONS[1]:
            raise ValueError(f"{type(self).__name__} has no version {v}")
        out = bytearray()
        _write_struct(out, self, v)
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, version: int) -> Message:
        r = Reader(data)
        msg = _read_struct(r, cls, version)
        if r.remaining:
            raise CorruptMessageError(f"{r.remaining} byte(s) of garbage after {cls.__name__}")
        return msg


_DEFAULTS: dict[type, dict[str, Any]] = {}


def _defaults(cls: type[Message]) -> dict[str, Any]:
    """Declared default of every dataclass field of ``cls`` (tagged fields compare against it)."""
    out = _DEFAULTS.get(cls)
    if out is None:
        out = {}
        for f in fields(cls):  # type: ignore[arg-type]
            out[f.name] = f.default_factory() if f.default_factory is not MISSING else f.default
        _DEFAULTS[cls] = out
    return out


def _write_value(out: bytearray, f: F, value: Any, version: int) -> None:
    t = f.type
    if f.array or (isinstance(t, str) and t.startswith("[]")):
        if value is None:
            if not f.is_nullable(version):
                raise ValueError(f"field {f.attr} is not nullable in version {version}")
            out.append(0)
            return
        write_uvarint(out, len(value) + 1)
        if f.array:
            assert not isinstance(t, str)
            for item in value:
                _write_struct(out, item, version)
        elif t == "[]int32":
            out += struct.pack(f">{len(value)}i", *value)
        elif t == "[]uuid":
            for u in value:
                out += u.bytes
        else:
            raise TypeError(t)
        return
    if t == "string":
        if value is None:
            if not f.is_nullable(version):
                raise ValueError(f"field {f.attr} is not nullable in version {version}")
            out.append(0)
            return
        data = value.encode()
        write_uvarint(out, len(data) + 1)
        out += data
    elif t == "uuid":
        out += value.bytes
    elif isinstance(t, str):
        out += _PRIM[t].pack(value)
    else:
        _write_struct(out, value, version)


def _read_value(r: Reader, f: F, version: int) -> Any:
    t = f.type
    if f.array or (isinstance(t, str) and t.startswith("[]")):
        n = r.uvarint() - 1
        if n < 0:
            if not f.is_nullable(version):
                raise CorruptMessageError(f"non-nullable field {f.attr} is null")
            return None
        if n > r.remaining:
            raise CorruptMessageError(f"array {f.attr} claims {n} elements, more than the bytes left")
        if f.array:
            assert not isinstance(t, str)
            return [_read_struct(r, t, version) for _ in range(n)]
        if t == "[]int32":
            return list(struct.unpack(f">{n}i", r.take(4 * n)))
        return [uuid.UUID(bytes=r.take(16)) for _ in range(n)]
    if t == "string":
        n = r.uvarint() - 1
        if n < 0:
            if not f.is_nullable(version):
                raise CorruptMessageError(f"non-nullable field {f.attr} is null")
            return None
        try:
            return r.take(n).decode()
        except UnicodeDecodeError:
            raise CorruptMessageError(f"field {f.attr} is not valid UTF-8") from None
    if t == "uuid":
        return uuid.UUID(bytes=r.take(16))
    if isinstance(t, str):
        return r.unpack(_PRIM[t])
    return _read_struct(r, t, version)


def _write_struct(out: bytearray, msg: Message, version: int) -> None:
    cls = type(msg)
    tagged: list[tuple[int, bytes]] = []
    for f in cls.SCHEMA:
        if not f.present(version):
            continue
        value = getattr(msg, f.attr)
        if f.tag is not None:
            # Kafka writes a tagged field only when it differs from its default.
            if value != _defaults(cls)[f.attr]:
                buf = bytearray()
                _write_value(buf, f, value, version)
                tagged.append((f.tag, bytes(buf)))
            continue
        _write_value(out, f, value, version)
    tagged.sort()
    write_uvarint(out, len(tagged))
    for tag, data in tagged:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data


def _read_struct(r: Reader, cls: type[Message], version: int) -> Any:
    values: dict[str, Any] = {}
    by_tag: dict[int, F] = {}
    for f in cls.SCHEMA:
        if not f.present(version):
            continue
        if f.tag is not None:
            by_tag[f.tag] = f
            continue
        values[f.attr] = _read_value(r, f, version)
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        size = r.uvarint()
        f_tagged = by_tag.get(tag)
        if f_tagged is None:
            r.take(size)  # unknown tagged fields are skipped, as Kafka does
            continue
        sub = Reader(r.buf, r.pos, r.pos + size)
        if r.pos + size > r.end:
            raise CorruptMessageError(f"tagged field {tag} overruns the record")
        values[f_tagged.attr] = _read_value(sub, f_tagged, version)
        r.pos += size
    return cls(**values)


# ---------------------------------------------------------------------------------------------
# Metadata record types (api keys from Kafka's JSON schemas)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerEndpoint(Message):
    name: str = ""
    host: str = ""
    port: int = 0
    security_protocol: int = 0
    SCHEMA: ClassVar[tuple[F, ...]] = (F("name", "string"), F("host", "string"), F("port", "uint16"),
                                       F("security_protocol", "int16"))


@dataclass(frozen=True, slots=True)
class BrokerFeature(Message):
    name: str = ""
    min_supported_version: int = 0
    max_supported_version: int = 0
    SCHEMA: ClassVar[tuple[F, ...]] = (F("name", "string"), F("min_supported_version", "int16"),
                                       F("max_supported_version", "int16"))


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord(Message):
    broker_id: int = 0
    is_migrating_zk_broker: bool = False
    incarnation_id: uuid.UUID = ZERO_UUID
    broker_epoch: int = 0
    end_points: list[BrokerEndpoint] = field(default_factory=list)
    features: list[BrokerFeature] = field(default_factory=list)
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: list[uuid.UUID] = field(default_factory=list)
    API_KEY: ClassVar[int] = 0
    VERSIONS: ClassVar[tuple[int, int]] = (0, 3)
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("broker_id", "int32"),
        F("is_migrating_zk_broker", "bool", versions=(2, 32767)),
        F("incarnation_id", "uuid"),
        F("broker_epoch", "int64"),
        F("end_points", BrokerEndpoint, array=True),
        F("features", BrokerFeature, array=True),
        F("rack", "string", nullable=ALL),
        F("fenced", "bool"),
        F("in_controlled_shutdown", "bool", versions=(1, 32767)),
        F("log_dirs", "[]uuid", versions=(3, 32767), tag=0),
    )


@dataclass(frozen=True, slots=True)
class TopicRecord(Message):
    name: str = ""
    topic_id: uuid.UUID = ZERO_UUID
    API_KEY: ClassVar[int] = 2
    SCHEMA: ClassVar[tuple[F, ...]] = (F("name", "string"), F("topic_id", "uuid"))


@dataclass(frozen=True, slots=True)
class PartitionRecord(Message):
    partition_id: int = -1
    topic_id: uuid.UUID = ZERO_UUID
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)
    adding_replicas: list[int] = field(default_factory=list)
    leader: int = -1
    leader_recovery_state: int = 0
    leader_epoch: int = -1
    partition_epoch: int = -1
    directories: list[uuid.UUID] = field(default_factory=list)
    eligible_leader_replicas: list[int] | None = None
    last_known_elr: list[int] | None = None
    API_KEY: ClassVar[int] = 3
    VERSIONS: ClassVar[tuple[int, int]] = (0, 2)
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("partition_id", "int32"),
        F("topic_id", "uuid"),
        F("replicas", "[]int32"),
        F("isr", "[]int32"),
        F("removing_replicas", "[]int32"),
        F("adding_replicas", "[]int32"),
        F("leader", "int32"),
        F("leader_recovery_state", "int8", tag=0),
        F("leader_epoch", "int32"),
        F("partition_epoch", "int32"),
        F("directories", "[]uuid", versions=(1, 32767)),
        F("eligible_leader_replicas", "[]int32", versions=(2, 32767), nullable=(2, 32767), tag=1),
        F("last_known_elr", "[]int32", versions=(2, 32767), nullable=(2, 32767), tag=2),
    )


@dataclass(frozen=True, slots=True)
class ConfigRecord(Message):
    resource_type: int = 0
    resource_name: str = ""
    name: str = ""
    value: str | None = None
    API_KEY: ClassVar[int] = 4
    SCHEMA: ClassVar[tuple[F, ...]] = (F("resource_type", "int8"), F("resource_name", "string"),
                                       F("name", "string"), F("value", "string", nullable=ALL))


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord(Message):
    partition_id: int = -1
    topic_id: uuid.UUID = ZERO_UUID
    isr: list[int] | None = None
    leader: int = -2                # -2: unchanged, -1: no leader
    replicas: list[int] | None = None
    removing_replicas: list[int] | None = None
    adding_replicas: list[int] | None = None
    leader_recovery_state: int = -1
    directories: list[uuid.UUID] | None = None
    eligible_leader_replicas: list[int] | None = None
    last_known_elr: list[int] | None = None
    API_KEY: ClassVar[int] = 5
    VERSIONS: ClassVar[tuple[int, int]] = (0, 2)
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("partition_id", "int32"),
        F("topic_id", "uuid"),
        F("isr", "[]int32", nullable=ALL, tag=0),
        F("leader", "int32", tag=1),
        F("replicas", "[]int32", nullable=ALL, tag=2),
        F("removing_replicas", "[]int32", nullable=ALL, tag=3),
        F("adding_replicas", "[]int32", nullable=ALL, tag=4),
        F("leader_recovery_state", "int8", tag=5),
        F("directories", "[]uuid", versions=(1, 32767), nullable=(1, 32767), tag=8),
        F("eligible_leader_replicas", "[]int32", versions=(2, 32767), nullable=(2, 32767), tag=6),
        F("last_known_elr", "[]int32", versions=(2, 32767), nullable=(2, 32767), tag=7),
    )


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord(Message):
    topic_id: uuid.UUID = ZERO_UUID
    API_KEY: ClassVar[int] = 9
    SCHEMA: ClassVar[tuple[F, ...]] = (F("topic_id", "uuid"),)


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord(Message):
    name: str = ""
    feature_level: int = 0
    API_KEY: ClassVar[int] = 12
    SCHEMA: ClassVar[tuple[F, ...]] = (F("name", "string"), F("feature_level", "int16"))


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord(Message):
    broker_id: int = 0
    broker_epoch: int = -1
    next_producer_id: int = 0
    API_KEY: ClassVar[int] = 15
    SCHEMA: ClassVar[tuple[F, ...]] = (F("broker_id", "int32"), F("broker_epoch", "int64"),
                                       F("next_producer_id", "int64"))


@dataclass(frozen=True, slots=True)
class NoOpRecord(Message):
    API_KEY: ClassVar[int] = 20
    SCHEMA: ClassVar[tuple[F, ...]] = ()


@dataclass(frozen=True, slots=True)
class BeginTransactionRecord(Message):
    name: str | None = None
    API_KEY: ClassVar[int] = 23
    SCHEMA: ClassVar[tuple[F, ...]] = (F("name", "string", nullable=ALL, tag=0),)


@dataclass(frozen=True, slots=True)
class EndTransactionRecord(Message):
    API_KEY: ClassVar[int] = 24
    SCHEMA: ClassVar[tuple[F, ...]] = ()


RECORD_TYPES: dict[int, type[Message]] = {
    c.API_KEY: c for c in (RegisterBrokerRecord, TopicRecord, PartitionRecord, ConfigRecord,
                           PartitionChangeRecord, RemoveTopicRecord, FeatureLevelRecord,
                           ProducerIdsRecord, NoOpRecord, BeginTransactionRecord, EndTransactionRecord)
}

# Versions strom writes: the highest each type has (Kafka 4.1 at metadata.version 27 writes
# PartitionRecord v1 without ELR, v2 with ELR; v2 is a superset that decodes identically).
WRITE_VERSIONS: dict[int, int] = {k: c.VERSIONS[1] for k, c in RECORD_TYPES.items()}


@dataclass(frozen=True, slots=True)
class UnknownRecord:
    """A metadata record of a type this build does not know; replay skips it."""

    api_key: int
    version: int
    body: bytes


def encode_record(record: Message, version: int | None = None) -> bytes:
    """``ApiMessageAndVersion`` serialization: frame version, api key, version, body."""
    v = WRITE_VERSIONS.get(record.API_KEY, record.VERSIONS[1]) if version is None else version
    out = bytearray()
    write_uvarint(out, FRAME_VERSION)
    write_uvarint(out, record.API_KEY)
    write_uvarint(out, v)
    out += record.encode(v)
    return bytes(out)


def decode_record(data: bytes | bytearray | memoryview) -> Message | UnknownRecord:
    """Parse one metadata record value; raise ``CorruptMessageError`` on malformed input."""
    r = Reader(data)
    frame = r.uvarint()
    if frame != FRAME_VERSION:
        raise CorruptMessageError(f"metadata record has unknown frame version {frame} (only 1 is supported)")
    api_key = r.uvarint()
    version = r.uvarint()
    cls = RECORD_TYPES.get(api_key)
    if cls is None:
        return UnknownRecord(api_key, version, r.take(r.remaining))
    if not cls.VERSIONS[0] <= version <= cls.VERSIONS[1]:
        raise CorruptMessageError(f"{cls.__name__} version {version} is not supported")
    msg = _read_struct(r, cls, version)
    if r.remaining:
        raise CorruptMessageError(f"found {r.remaining} byte(s) of garbage after {cls.__name__}")
    return msg


# ---------------------------------------------------------------------------------------------
# Raft control records (values of control batches; key = ControlRecordType v0)
# ---------------------------------------------------------------------------------------------

CONTROL_LEADER_CHANGE = 2
CONTROL_SNAPSHOT_HEADER = 3
CONTROL_SNAPSHOT_FOOTER = 4
CONTROL_KEY = struct.Struct(">hh")  # ControlRecordType key: version (0), type


def control_key(control_type: int) -> bytes:
    return CONTROL_KEY.pack(0, control_type)


@dataclass(frozen=True, slots=True)
class Voter(Message):
    voter_id: int = 0
    SCHEMA: ClassVar[tuple[F, ...]] = (F("voter_id", "int32"),)


@dataclass(frozen=True, slots=True)
class LeaderChangeMessage(Message):
    version: int = 0
    leader_id: int = -1
    voters: list[Voter] = field(default_factory=list)
    granting_voters: list[Voter] = field(default_factory=list)
    SCHEMA: ClassVar[tuple[F, ...]] = (F("version", "int16"), F("leader_id", "int32"),
                                       F("voters", Voter, array=True), F("granting_voters", Voter, array=True))


@dataclass(frozen=True, slots=True)
class SnapshotHeaderRecord(Message):
    version: int = 0
    last_contained_log_timestamp: int = 0
    SCHEMA: ClassVar[tuple[F, ...]] = (F("version", "int16"), F("last_contained_log_timestamp", "int64"))


@dataclass(frozen=True, slots=True)
class SnapshotFooterRecord(Message):
    version: int = 0
    SCHEMA: ClassVar[tuple[F, ...]] = (F("version", "int16"),)
