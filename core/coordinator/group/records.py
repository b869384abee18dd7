"""Records of ``__consumer_offsets``: Kafka's group-coordinator message schemas and their codec.

Kafka's ``CoordinatorRecordSerde`` writes a record key as ``int16 version`` + key struct and a
value as ``int16 version`` + value struct; the key version names the record type
(OffsetCommitKey 0/1, GroupMetadataKey 2, ConsumerGroupMetadataKey 3, ... CurrentMemberAssignment
8) and a null value is a tombstone. The schemas are transcribed from
``group-coordinator/src/main/resources/common/message/*.json`` as :class:`F` tuples of the
generic metadata codec (:mod:`strom.core.metadata.records`). That codec only speaks the
flexible format; these records also use the older non-flexible one (int16-length strings,
int32-length arrays and bytes, no tagged fields) for keys and for values below their first
flexible version, so the walker here handles both and adds the ``bytes`` and ``[]string`` types.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

from strom.core.exceptions import CorruptMessageError
from strom.core.metadata.records import ALL, F, Message, Reader, write_uvarint

NEVER = 32767  # "flexibleVersions": "none"
ZERO_UUID = uuid.UUID(int=0)

_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_PRIM: dict[str, struct.Struct] = {"int8": _I8, "int16": _I16, "int32": _I32, "int64": _I64,
                                   "bool": struct.Struct(">?"), "uint16": struct.Struct(">H")}


class CoordinatorMessage(Message):
    """A group-coordinator schema: ``FLEXIBLE`` is its first flexible version (``NEVER`` = none)."""

    FLEXIBLE: ClassVar[int] = 0

    def encode(self, version: int | None = None) -> bytes:
        v = self.VERSIONS[1] if version is None else version
        if not self.VERSIONS[0] <= v <= self.VERSIONS[1]:
            raise ValueError(f"{type(self).__name__} has no version {v}")
        out = bytearray()
        _write_struct(out, self, v, v >= self.FLEXIBLE)
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, version: int) -> Any:
        if not cls.VERSIONS[0] <= version <= cls.VERSIONS[1]:
            raise CorruptMessageError(f"{cls.__name__} version {version} is not supported")
        r = Reader(bytes(data))
        msg = _read_struct(r, cls, version, version >= cls.FLEXIBLE)
        if r.remaining:
            raise CorruptMessageError(f"{r.remaining} byte(s) of garbage after {cls.__name__}")
        return msg


# -- codec: both wire formats ------------------------------------------------------------------


def _write_len(out: bytearray, n: int | None, flexible: bool, wide: bool) -> None:
    """Length prefix: compact uvarint (n+1, 0 = null) or int16/int32 (-1 = null)."""
    if flexible:
        write_uvarint(out, 0 if n is None else n + 1)
    else:
        out += (_I32 if wide else _I16).pack(-1 if n is None else n)


def _read_len(r: Reader, flexible: bool, wide: bool) -> int:
    if flexible:
        return r.uvarint() - 1
    return int(r.unpack(_I32 if wide else _I16))


def _write_value(out: bytearray, f: F, value: Any, version: int, flexible: bool) -> None:
    t = f.type
    if value is None and (f.array or t in ("string", "bytes") or (isinstance(t, str) and t.startswith("[]"))):
        if not f.is_nullable(version):
            raise ValueError(f"field {f.attr} is not nullable in version {version}")
        _write_len(out, None, flexible, wide=t != "string")
        return
    if f.array or (isinstance(t, str) and t.startswith("[]")):
        _write_len(out, len(value), flexible, wide=True)
        if f.array:
            for item in value:
                _write_struct(out, item, version, flexible)
        elif t == "[]int32":
            out += struct.pack(f">{len(value)}i", *value)
        elif t == "[]uuid":
            for u in value:
                out += u.bytes
        elif t == "[]string":
            for s in value:
                data = s.encode()
                _write_len(out, len(data), flexible, wide=False)
                out += data
        else:
            raise TypeError(t)
    elif t == "string":
        data = value.encode()
        _write_len(out, len(data), flexible, wide=False)
        out += data
    elif t == "bytes":
        _write_len(out, len(value), flexible, wide=True)
        out += value
    elif t == "uuid":
        out += value.bytes
    elif isinstance(t, str):
        out += _PRIM[t].pack(value)
    else:
        _write_struct(out, value, version, flexible)


def _read_value(r: Reader, f: F, version: int, flexible: bool) -> Any:
    t = f.type
    if f.array or (isinstance(t, str) and t.startswith("[]")):
        n = _read_len(r, flexible, wide=True)
        if n < 0:
            if not f.is_nullable(version):
                raise CorruptMessageError(f"non-nullable field {f.attr} is null")
            return None
        if n > r.remaining:
            raise CorruptMessageError(f"array {f.attr} claims {n} elements, more than the bytes left")
        if f.array:
            assert not isinstance(t, str)
            return [_read_struct(r, t, version, flexible) for _ in range(n)]
        if t == "[]int32":
            return list(struct.unpack(f">{n}i", r.take(4 * n)))
        if t == "[]uuid":
            return [uuid.UUID(bytes=r.take(16)) for _ in range(n)]
        out = []
        for _ in range(n):
            size = _read_len(r, flexible, wide=False)
            if size < 0:
                raise CorruptMessageError(f"null element in {f.attr}")
            out.append(_decode_utf8(r.take(size), f))
        return out
    if t in ("string", "bytes"):
        n = _read_len(r, flexible, wide=t == "bytes")
        if n < 0:
            if not f.is_nullable(version):
                raise CorruptMessageError(f"non-nullable field {f.attr} is null")
            return None
        data = r.take(n)
        return data if t == "bytes" else _decode_utf8(data, f)
    if t == "uuid":
        return uuid.UUID(bytes=r.take(16))
    if isinstance(t, str):
        return r.unpack(_PRIM[t])
    return _read_struct(r, t, version, flexible)


def _decode_utf8(data: bytes, f: F) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise CorruptMessageError(f"field {f.attr} is not valid UTF-8") from None


def _write_struct(out: bytearray, msg: Message, version: int, flexible: bool) -> None:
    cls = type(msg)
    tagged: list[tuple[int, bytes]] = []
    for f in cls.SCHEMA:
        if not f.present(version):
            continue
        value = getattr(msg, f.attr)
        if f.tag is not None:
            if flexible and value != _default(cls, f.attr):  # Kafka omits defaults
                buf = bytearray()
                _write_value(buf, f, value, version, flexible)
                tagged.append((f.tag, bytes(buf)))
            continue
        _write_value(out, f, value, version, flexible)
    if flexible:
        tagged.sort()
        write_uvarint(out, len(tagged))
        for tag, data in tagged:
            write_uvarint(out, tag)
            write_uvarint(out, len(data))
            out += data


def _read_struct(r: Reader, cls: type[Message], version: int, flexible: bool) -> Any:
    values: dict[str, Any] = {}
    by_tag: dict[int, F] = {}
    for f in cls.SCHEMA:
        if not f.present(version):
            continue
        if f.tag is not None:
            by_tag[f.tag] = f
            continue
        values[f.attr] = _read_value(r, f, version, flexible)
    if flexible:
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            if r.pos + size > r.end:
                raise CorruptMessageError(f"tagged field {tag} overruns the record")
            f_tagged = by_tag.get(tag)
            if f_tagged is not None:
                values[f_tagged.attr] = _read_value(Reader(r.buf, r.pos, r.pos + size), f_tagged, version, flexible)
            r.pos += size
    return cls(**values)


_DEFAULTS: dict[tuple[type, str], Any] = {}


def _default(cls: type, attr: str) -> Any:
    key = (cls, attr)
    if key not in _DEFAULTS:
        for fld in cls.__dataclass_fields__.values():  # type: ignore[attr-defined]
            if fld.name == attr:
                _DEFAULTS[key] = fld.default_factory() if callable(fld.default_factory) else fld.default
    return _DEFAULTS.get(key)


# -- classic groups and offsets ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitKey(CoordinatorMessage):
    group: str = ""
    topic: str = ""
    partition: int = 0
    VERSIONS: ClassVar[tuple[int, int]] = (0, 1)
    FLEXIBLE: ClassVar[int] = NEVER
    SCHEMA: ClassVar[tuple[F, ...]] = (F("group", "string"), F("topic", "string"), F("partition", "int32"))


@dataclass(frozen=True, slots=True)
class OffsetCommitValue(CoordinatorMessage):
    offset: int = 0
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int = -1
    VERSIONS: ClassVar[tuple[int, int]] = (0, 4)
    FLEXIBLE: ClassVar[int] = 4
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("offset", "int64"),
        F("leader_epoch", "int32", versions=(3, NEVER)),
        F("metadata", "string"),
        F("commit_timestamp", "int64"),
        F("expire_timestamp", "int64", versions=(1, 1)),
    )


@dataclass(frozen=True, slots=True)
class GroupMetadataKey(CoordinatorMessage):
    group: str = ""
    VERSIONS: ClassVar[tuple[int, int]] = (2, 2)
    FLEXIBLE: ClassVar[int] = NEVER
    SCHEMA: ClassVar[tuple[F, ...]] = (F("group", "string"),)


@dataclass(frozen=True, slots=True)
class MemberMetadata(CoordinatorMessage):
    member_id: str = ""
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout: int = 0
    session_timeout: int = 0
    subscription: bytes = b""
    assignment: bytes = b""
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("member_id", "string"),
        F("group_instance_id", "string", versions=(3, NEVER), nullable=(3, NEVER)),
        F("client_id", "string"),
        F("client_host", "string"),
        F("rebalance_timeout", "int32", versions=(1, NEVER)),
        F("session_timeout", "int32"),
        F("subscription", "bytes"),
        F("assignment", "bytes"),
    )


@dataclass(frozen=True, slots=True)
class GroupMetadataValue(CoordinatorMessage):
    protocol_type: str = ""
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    current_state_timestamp: int = -1
    members: list[MemberMetadata] = field(default_factory=list)
    VERSIONS: ClassVar[tuple[int, int]] = (0, 4)
    FLEXIBLE: ClassVar[int] = 4
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("protocol_type", "string"),
        F("generation", "int32"),
        F("protocol", "string", nullable=ALL),
        F("leader", "string", nullable=ALL),
        F("current_state_timestamp", "int64", versions=(2, NEVER)),
        F("members", MemberMetadata, array=True),
    )


# -- KIP-848 consumer groups -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey(CoordinatorMessage):
    group_id: str = ""
    VERSIONS: ClassVar[tuple[int, int]] = (3, 3)
    FLEXIBLE: ClassVar[int] = NEVER
    SCHEMA: ClassVar[tuple[F, ...]] = (F("group_id", "string"),)


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue(CoordinatorMessage):
    epoch: int = 0
    metadata_hash: int = 0  # Kafka 4.1 (KIP-1101), tagged
    SCHEMA: ClassVar[tuple[F, ...]] = (F("epoch", "int32"), F("metadata_hash", "int64", tag=0))


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey(CoordinatorMessage):
    group_id: str = ""
    VERSIONS: ClassVar[tuple[int, int]] = (4, 4)
    FLEXIBLE: ClassVar[int] = NEVER
    SCHEMA: ClassVar[tuple[F, ...]] = (F("group_id", "string"),)


@dataclass(frozen=True, slots=True)
class PartitionMetadata(CoordinatorMessage):
    partition: int = 0
    racks: list[str] = field(default_factory=list)
    SCHEMA: ClassVar[tuple[F, ...]] = (F("partition", "int32"), F("racks", "[]string"))


@dataclass(frozen=True, slots=True)
class TopicMetadata(CoordinatorMessage):
    topic_id: uuid.UUID = ZERO_UUID
    topic_name: str = ""
    num_partitions: int = 0
    partition_metadata: list[PartitionMetadata] = field(default_factory=list)
    SCHEMA: ClassVar[tuple[F, ...]] = (F("topic_id", "uuid"), F("topic_name", "string"),
                                       F("num_partitions", "int32"),
                                       F("partition_metadata", PartitionMetadata, array=True))


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue(CoordinatorMessage):
    topics: list[TopicMetadata] = field(default_factory=list)
    SCHEMA: ClassVar[tuple[F, ...]] = (F("topics", TopicMetadata, array=True),)


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey(CoordinatorMessage):
    group_id: str = ""
    member_id: str = ""
    VERSIONS: ClassVar[tuple[int, int]] = (5, 5)
    FLEXIBLE: ClassVar[int] = NEVER
    SCHEMA: ClassVar[tuple[F, ...]] = (F("group_id", "string"), F("member_id", "string"))


@dataclass(frozen=True, slots=True)
class ClassicProtocol(CoordinatorMessage):
    name: str = ""
    metadata: bytes = b""
    SCHEMA: ClassVar[tuple[F, ...]] = (F("name", "string"), F("metadata", "bytes"))


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata(CoordinatorMessage):
    session_timeout_ms: int = 0
    supported_protocols: list[ClassicProtocol] = field(default_factory=list)
    SCHEMA: ClassVar[tuple[F, ...]] = (F("session_timeout_ms", "int32"),
                                       F("supported_protocols", ClassicProtocol, array=True))


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue(CoordinatorMessage):
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("instance_id", "string", nullable=ALL),
        F("rack_id", "string", nullable=ALL),
        F("client_id", "string"),
        F("client_host", "string"),
        F("subscribed_topic_names", "[]string"),
        F("subscribed_topic_regex", "string", nullable=ALL),
        F("rebalance_timeout_ms", "int32"),
        F("server_assignor", "string", nullable=ALL),
        F("classic_member_metadata", ClassicMemberMetadata, nullable=ALL, tag=0),
    )


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey(CoordinatorMessage):
    group_id: str = ""
    VERSIONS: ClassVar[tuple[int, int]] = (6, 6)
    FLEXIBLE: ClassVar[int] = NEVER
    SCHEMA: ClassVar[tuple[F, ...]] = (F("group_id", "string"),)


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue(CoordinatorMessage):
    assignment_epoch: int = 0
    SCHEMA: ClassVar[tuple[F, ...]] = (F("assignment_epoch", "int32"),)


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey(CoordinatorMessage):
    group_id: str = ""
    member_id: str = ""
    VERSIONS: ClassVar[tuple[int, int]] = (7, 7)
    FLEXIBLE: ClassVar[int] = NEVER
    SCHEMA: ClassVar[tuple[F, ...]] = (F("group_id", "string"), F("member_id", "string"))


@dataclass(frozen=True, slots=True)
class TopicPartitions(CoordinatorMessage):
    topic_id: uuid.UUID = ZERO_UUID
    partitions: list[int] = field(default_factory=list)
    SCHEMA: ClassVar[tuple[F, ...]] = (F("topic_id", "uuid"), F("partitions", "[]int32"))


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue(CoordinatorMessage):
    topic_partitions: list[TopicPartitions] = field(default_factory=list)
    SCHEMA: ClassVar[tuple[F, ...]] = (F("topic_partitions", TopicPartitions, array=True),)


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey(CoordinatorMessage):
    group_id: str = ""
    member_id: str = ""
    VERSIONS: ClassVar[tuple[int, int]] = (8, 8)
    FLEXIBLE: ClassVar[int] = NEVER
    SCHEMA: ClassVar[tuple[F, ...]] = (F("group_id", "string"), F("member_id", "string"))


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue(CoordinatorMessage):
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = 0
    assigned_partitions: list[TopicPartitions] = field(default_factory=list)
    partitions_pending_revocation: list[TopicPartitions] = field(default_factory=list)
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("member_epoch", "int32"),
        F("previous_member_epoch", "int32"),
        F("state", "int8"),
        F("assigned_partitions", TopicPartitions, array=True),
        F("partitions_pending_revocation", TopicPartitions, array=True),
    )


# -- record framing ----------------------------------------------------------------------------

# Key version -> (key type, value type, value version strom writes).
RECORD_TYPES: dict[int, tuple[type[CoordinatorMessage], type[CoordinatorMessage], int]] = {
    0: (OffsetCommitKey, OffsetCommitValue, 3),
    1: (OffsetCommitKey, OffsetCommitValue, 3),
    2: (GroupMetadataKey, GroupMetadataValue, 3),
    3: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue, 0),
    4: (ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue, 0),
    5: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue, 0),
    6: (ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue, 0),
    7: (ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue, 0),
    8: (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue, 0),
}
_KEY_VERSION: dict[type, int] = {OffsetCommitKey: 1, GroupMetadataKey: 2, ConsumerGroupMetadataKey: 3,
                                 ConsumerGroupPartitionMetadataKey: 4, ConsumerGroupMemberMetadataKey: 5,
                                 ConsumerGroupTargetAssignmentMetadataKey: 6,
                                 ConsumerGroupTargetAssignmentMemberKey: 7,
                                 ConsumerGroupCurrentMemberAssignmentKey: 8}


def encode_key(key: CoordinatorMessage) -> bytes:
    """``int16 version`` + key struct (the version is the record type)."""
    version = _KEY_VERSION[type(key)]
    return _I16.pack(version) + key.encode(version)


def encode_value(value: CoordinatorMessage | None, key: CoordinatorMessage) -> bytes | None:
    """``int16 version`` + value struct at the version strom writes; ``None`` = tombstone."""
    if value is None:
        return None
    version = RECORD_TYPES[_KEY_VERSION[type(key)]][2]
    return _I16.pack(version) + value.encode(version)


def encode_record(key: CoordinatorMessage, value: CoordinatorMessage | None) -> tuple[bytes, bytes | None]:
    return encode_key(key), encode_value(value, key)


def decode_key(data: bytes | bytearray | memoryview) -> tuple[int, CoordinatorMessage] | None:
    """(record type, key) or ``None`` for a record type this build does not know."""
    if len(data) < 2:
        raise CorruptMessageError("coordinator record key is shorter than its version")
    version = _I16.unpack_from(data, 0)[0]
    types = RECORD_TYPES.get(version)
    if types is None:
        return None
    return version, types[0].decode(bytes(data[2:]), version)


def decode_value(record_type: int, data: bytes | bytearray | memoryview | None) -> CoordinatorMessage | None:
    """The value of a record of ``record_type``; ``None`` for a tombstone."""
    if data is None:
        return None
    if len(data) < 2:
        raise CorruptMessageError("coordinator record value is shorter than its version")
    version = _I16.unpack_from(data, 0)[0]
    return RECORD_TYPES[record_type][1].decode(bytes(data[2:]), version)
