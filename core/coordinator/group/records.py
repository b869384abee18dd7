"""Records of ``__consumer_offsets``: Kafka's group-coordinator message schemas and their codec.

Kafka's ``CoordinatorRecordSerde`` writes a record key as ``int16 version`` + key struct and a
value as ``int16 version`` + value struct; the key version names the record type
(OffsetCommitKey 0/1, GroupMetadataKey 2, ConsumerGroupMetadataKey 3, ... CurrentMemberAssignment
8) and a null value is a tombstone. The schemas are transcribed from
``group-coordinator/src/main/resources/common/message/*.json`` as :class:`F` tuples of the
generic codec (:mod:`strom.core.protocol.message_codec`). Keys are never flexible and values are
flexible from the version ``FLEXIBLE`` names on (OffsetCommitValue and GroupMetadataValue from
v4, the KIP-848 values from v0); the codec picks the wire format per version.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from strom.core.errors import CorruptMessageError
from strom.core.protocol.message_codec import ALL, NEVER, F, Message

ZERO_UUID = uuid.UUID(int=0)
_I16 = struct.Struct(">h")


class CoordinatorMessage(Message):
    """A group-coordinator schema; ``FLEXIBLE`` (its first flexible version) is set per type."""


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
    """A topic's partitions; in ConsumerGroupCurrentMemberAssignmentValue also their assignment
    epochs (Kafka 4.3, KIP-1251: tagged, nullable, one per partition). Target-assignment records
    never set them, so their bytes are unchanged."""

    topic_id: uuid.UUID = ZERO_UUID
    partitions: list[int] = field(default_factory=list)
    assignment_epochs: list[int] | None = None
    SCHEMA: ClassVar[tuple[F, ...]] = (F("topic_id", "uuid"), F("partitions", "[]int32"),
                                       F("assignment_epochs", "[]int32", nullable=ALL, tag=0))


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


# -- KIP-932 share groups ----------------------------------------------------------------------
# Kafka 4.3.1's ShareGroup*{Key,Value}.json (record types 10..15). Share groups have no
# revocation, so the current assignment has no pending partitions; the group metadata carries
# the subscribed topics' hash (KIP-1101) instead of a separate partition-metadata record.


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataKey(CoordinatorMessage):
    group_id: str = ""
    member_id: str = ""
    VERSIONS: ClassVar[tuple[int, int]] = (10, 10)
    FLEXIBLE: ClassVar[int] = NEVER
    SCHEMA: ClassVar[tuple[F, ...]] = (F("group_id", "string"), F("member_id", "string"))


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataValue(CoordinatorMessage):
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("rack_id", "string", nullable=ALL),
        F("client_id", "string"),
        F("client_host", "string"),
        F("subscribed_topic_names", "[]string"),
    )


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataKey(CoordinatorMessage):
    group_id: str = ""
    VERSIONS: ClassVar[tuple[int, int]] = (11, 11)
    FLEXIBLE: ClassVar[int] = NEVER
    SCHEMA: ClassVar[tuple[F, ...]] = (F("group_id", "string"),)


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataValue(CoordinatorMessage):
    epoch: int = 0
    metadata_hash: int = 0  # not tagged here (unlike ConsumerGroupMetadataValue)
    SCHEMA: ClassVar[tuple[F, ...]] = (F("epoch", "int32"), F("metadata_hash", "int64"))


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataKey(CoordinatorMessage):
    group_id: str = ""
    VERSIONS: ClassVar[tuple[int, int]] = (12, 12)
    FLEXIBLE: ClassVar[int] = NEVER
    SCHEMA: ClassVar[tuple[F, ...]] = (F("group_id", "string"),)


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataValue(CoordinatorMessage):
    assignment_epoch: int = 0
    assignment_timestamp: int = 0
    SCHEMA: ClassVar[tuple[F, ...]] = (F("assignment_epoch", "int32"), F("assignment_timestamp", "int64", tag=0))


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberKey(CoordinatorMessage):
    group_id: str = ""
    member_id: str = ""
    VERSIONS: ClassVar[tuple[int, int]] = (13, 13)
    FLEXIBLE: ClassVar[int] = NEVER
    SCHEMA: ClassVar[tuple[F, ...]] = (F("group_id", "string"), F("member_id", "string"))


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberValue(CoordinatorMessage):
    topic_partitions: list[TopicPartitions] = field(default_factory=list)
    SCHEMA: ClassVar[tuple[F, ...]] = (F("topic_partitions", TopicPartitions, array=True),)


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentKey(CoordinatorMessage):
    group_id: str = ""
    member_id: str = ""
    VERSIONS: ClassVar[tuple[int, int]] = (14, 14)
    FLEXIBLE: ClassVar[int] = NEVER
    SCHEMA: ClassVar[tuple[F, ...]] = (F("group_id", "string"), F("member_id", "string"))


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentValue(CoordinatorMessage):
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = 0
    assigned_partitions: list[TopicPartitions] = field(default_factory=list)
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("member_epoch", "int32"),
        F("previous_member_epoch", "int32"),
        F("state", "int8"),
        F("assigned_partitions", TopicPartitions, array=True),
    )


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataKey(CoordinatorMessage):
    group_id: str = ""
    VERSIONS: ClassVar[tuple[int, int]] = (15, 15)
    FLEXIBLE: ClassVar[int] = NEVER
    SCHEMA: ClassVar[tuple[F, ...]] = (F("group_id", "string"),)


@dataclass(frozen=True, slots=True)
class TopicPartitionsInfo(CoordinatorMessage):
    topic_id: uuid.UUID = ZERO_UUID
    topic_name: str = ""
    partitions: list[int] = field(default_factory=list)
    SCHEMA: ClassVar[tuple[F, ...]] = (F("topic_id", "uuid"), F("topic_name", "string"), F("partitions", "[]int32"))


@dataclass(frozen=True, slots=True)
class TopicInfo(CoordinatorMessage):
    topic_id: uuid.UUID = ZERO_UUID
    topic_name: str = ""
    SCHEMA: ClassVar[tuple[F, ...]] = (F("topic_id", "uuid"), F("topic_name", "string"))


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataValue(CoordinatorMessage):
    initializing_topics: list[TopicPartitionsInfo] = field(default_factory=list)
    initialized_topics: list[TopicPartitionsInfo] = field(default_factory=list)
    deleting_topics: list[TopicInfo] = field(default_factory=list)
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("initializing_topics", TopicPartitionsInfo, array=True),
        F("initialized_topics", TopicPartitionsInfo, array=True),
        F("deleting_topics", TopicInfo, array=True),
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
    10: (ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue, 0),
    11: (ShareGroupMetadataKey, ShareGroupMetadataValue, 0),
    12: (ShareGroupTargetAssignmentMetadataKey, ShareGroupTargetAssignmentMetadataValue, 0),
    13: (ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMemberValue, 0),
    14: (ShareGroupCurrentMemberAssignmentKey, ShareGroupCurrentMemberAssignmentValue, 0),
    15: (ShareGroupStatePartitionMetadataKey, ShareGroupStatePartitionMetadataValue, 0),
}
_KEY_VERSION: dict[type, int] = {OffsetCommitKey: 1, GroupMetadataKey: 2, ConsumerGroupMetadataKey: 3,
                                 ConsumerGroupPartitionMetadataKey: 4, ConsumerGroupMemberMetadataKey: 5,
                                 ConsumerGroupTargetAssignmentMetadataKey: 6,
                                 ConsumerGroupTargetAssignmentMemberKey: 7,
                                 ConsumerGroupCurrentMemberAssignmentKey: 8,
                                 ShareGroupMemberMetadataKey: 10, ShareGroupMetadataKey: 11,
                                 ShareGroupTargetAssignmentMetadataKey: 12, ShareGroupTargetAssignmentMemberKey: 13,
                                 ShareGroupCurrentMemberAssignmentKey: 14, ShareGroupStatePartitionMetadataKey: 15}


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
