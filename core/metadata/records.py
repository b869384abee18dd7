"""KRaft metadata records and their wire codec (Kafka's ``ApiMessageAndVersion`` framing).

A metadata record value in ``__cluster_metadata`` is::

    frame version  unsigned varint (1; Kafka rejects 0, the 2.8 preview format)
    api key        unsigned varint (TopicRecord = 2, PartitionRecord = 3, ...)
    version        unsigned varint
    body           the record in Kafka's flexible message format (compact strings/arrays,
                   tagged fields after every struct)

Each record type is a dataclass with a ``SCHEMA`` tuple of :class:`F` field specs transcribed
from Kafka's ``metadata/src/main/resources/common/metadata/*.json``; the generic codec of
:mod:`strom.core.protocol.message_codec` walks the schema (every metadata record version is flexible).
:func:`encode_record` / :func:`decode_record` are the public entry points. The raft control
messages (LeaderChangeMessage, SnapshotHeader/FooterRecord) are the raft layer's own
(:mod:`strom.core.raft.control_records`): the replicated log knows nothing of these types.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from strom.core.errors import CorruptMessageError
from strom.core.protocol.message_codec import ALL, F, Message, Reader, read_struct, write_uvarint

FRAME_VERSION = 1
ZERO_UUID = uuid.UUID(int=0)


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
    msg = read_struct(r, cls, version, True)
    if r.remaining:
        raise CorruptMessageError(f"found {r.remaining} byte(s) of garbage after {cls.__name__}")
    return msg
