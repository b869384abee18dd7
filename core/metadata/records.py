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
    cordoned_log_dirs: list[uuid.UUID] | None = None
    API_KEY: ClassVar[int] = 0
    VERSIONS: ClassVar[tuple[int, int]] = (0, 4)
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
        F("cordoned_log_dirs", "[]uuid", versions=(4, 32767), nullable=(4, 32767), tag=1),
    )


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord(Message):
    broker_id: int = 0
    broker_epoch: int = 0
    API_KEY: ClassVar[int] = 1
    SCHEMA: ClassVar[tuple[F, ...]] = (F("broker_id", "int32"), F("broker_epoch", "int64"))


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
class FenceBrokerRecord(Message):
    """Fences a broker (written by metadata versions before BrokerRegistrationChangeRecord)."""

    id: int = 0
    epoch: int = 0
    API_KEY: ClassVar[int] = 7
    SCHEMA: ClassVar[tuple[F, ...]] = (F("id", "int32"), F("epoch", "int64"))


@dataclass(frozen=True, slots=True)
class UnfenceBrokerRecord(Message):
    id: int = 0
    epoch: int = 0
    API_KEY: ClassVar[int] = 8
    SCHEMA: ClassVar[tuple[F, ...]] = (F("id", "int32"), F("epoch", "int64"))


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord(Message):
    topic_id: uuid.UUID = ZERO_UUID
    API_KEY: ClassVar[int] = 9
    SCHEMA: ClassVar[tuple[F, ...]] = (F("topic_id", "uuid"),)


@dataclass(frozen=True, slots=True)
class DelegationTokenRecord(Message):
    owner: str = ""
    requester: str = ""
    renewers: list[str] = field(default_factory=list)
    issue_timestamp: int = 0
    max_timestamp: int = 0
    expiration_timestamp: int = 0
    token_id: str = ""
    API_KEY: ClassVar[int] = 10
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("owner", "string"), F("requester", "string"), F("renewers", "[]string"),
        F("issue_timestamp", "int64"), F("max_timestamp", "int64"), F("expiration_timestamp", "int64"),
        F("token_id", "string"),
    )


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord(Message):
    """A SCRAM credential (mechanism 1: SCRAM-SHA-256, 2: SCRAM-SHA-512, Kafka's ScramMechanism)."""

    name: str = ""
    mechanism: int = 0
    salt: bytes = b""
    stored_key: bytes = b""
    server_key: bytes = b""
    iterations: int = 0
    API_KEY: ClassVar[int] = 11
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("name", "string"), F("mechanism", "int8"), F("salt", "bytes"), F("stored_key", "bytes"),
        F("server_key", "bytes"), F("iterations", "int32"),
    )


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord(Message):
    name: str = ""
    feature_level: int = 0
    API_KEY: ClassVar[int] = 12
    SCHEMA: ClassVar[tuple[F, ...]] = (F("name", "string"), F("feature_level", "int16"))


@dataclass(frozen=True, slots=True)
class EntityData(Message):
    """One (entity type, name) of a client quota entity; a null name is the default entity."""

    entity_type: str = ""
    entity_name: str | None = None
    SCHEMA: ClassVar[tuple[F, ...]] = (F("entity_type", "string"), F("entity_name", "string", nullable=ALL))


@dataclass(frozen=True, slots=True)
class ClientQuotaRecord(Message):
    entity: list[EntityData] = field(default_factory=list)
    key: str = ""
    value: float = 0.0
    remove: bool = False
    API_KEY: ClassVar[int] = 14
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("entity", EntityData, array=True), F("key", "string"), F("value", "float64"), F("remove", "bool"),
    )


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord(Message):
    broker_id: int = 0
    broker_epoch: int = -1
    next_producer_id: int = 0
    API_KEY: ClassVar[int] = 15
    SCHEMA: ClassVar[tuple[F, ...]] = (F("broker_id", "int32"), F("broker_epoch", "int64"),
                                       F("next_producer_id", "int64"))


# BrokerRegistrationChangeRecord.fenced (Kafka's BrokerRegistrationFencingChange) and
# .in_controlled_shutdown (BrokerRegistrationInControlledShutdownChange) values.
FENCING_UNFENCE, FENCING_NONE, FENCING_FENCE = -1, 0, 1
CONTROLLED_SHUTDOWN_NONE, CONTROLLED_SHUTDOWN_IN = 0, 1


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord(Message):
    broker_id: int = 0
    broker_epoch: int = 0
    fenced: int = FENCING_NONE
    in_controlled_shutdown: int = CONTROLLED_SHUTDOWN_NONE
    log_dirs: list[uuid.UUID] = field(default_factory=list)
    cordoned_log_dirs: list[uuid.UUID] | None = None
    API_KEY: ClassVar[int] = 17
    VERSIONS: ClassVar[tuple[int, int]] = (0, 3)
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("broker_id", "int32"),
        F("broker_epoch", "int64"),
        F("fenced", "int8", tag=0),
        F("in_controlled_shutdown", "int8", versions=(1, 32767), tag=1),
        F("log_dirs", "[]uuid", versions=(2, 32767), tag=2),
        F("cordoned_log_dirs", "[]uuid", versions=(3, 32767), nullable=(3, 32767), tag=3),
    )


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord(Message):
    """One ACL binding; codes are Kafka's (ResourceType, PatternType, AclOperation, AclPermissionType)."""

    id: uuid.UUID = ZERO_UUID
    resource_type: int = 0
    resource_name: str = ""
    pattern_type: int = 0
    principal: str = ""
    host: str = ""
    operation: int = 0
    permission_type: int = 0
    API_KEY: ClassVar[int] = 18
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("id", "uuid"), F("resource_type", "int8"), F("resource_name", "string"), F("pattern_type", "int8"),
        F("principal", "string"), F("host", "string"), F("operation", "int8"), F("permission_type", "int8"),
    )


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord(Message):
    id: uuid.UUID = ZERO_UUID
    API_KEY: ClassVar[int] = 19
    SCHEMA: ClassVar[tuple[F, ...]] = (F("id", "uuid"),)


@dataclass(frozen=True, slots=True)
class NoOpRecord(Message):
    API_KEY: ClassVar[int] = 20
    SCHEMA: ClassVar[tuple[F, ...]] = ()


@dataclass(frozen=True, slots=True)
class ZkMigrationStateRecord(Message):
    """ZooKeeper migration state (0 NONE, 1 PRE_MIGRATION, 2 MIGRATION, 3 POST_MIGRATION); KRaft-only
    clusters write NONE. Kafka 4 replays it as nothing."""

    zk_migration_state: int = 0
    API_KEY: ClassVar[int] = 21
    SCHEMA: ClassVar[tuple[F, ...]] = (F("zk_migration_state", "int8"),)


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord(Message):
    name: str = ""
    mechanism: int = 0
    API_KEY: ClassVar[int] = 22
    SCHEMA: ClassVar[tuple[F, ...]] = (F("name", "string"), F("mechanism", "int8"))


@dataclass(frozen=True, slots=True)
class BeginTransactionRecord(Message):
    name: str | None = None
    API_KEY: ClassVar[int] = 23
    SCHEMA: ClassVar[tuple[F, ...]] = (F("name", "string", nullable=ALL, tag=0),)


@dataclass(frozen=True, slots=True)
class EndTransactionRecord(Message):
    API_KEY: ClassVar[int] = 24
    SCHEMA: ClassVar[tuple[F, ...]] = ()


@dataclass(frozen=True, slots=True)
class AbortTransactionRecord(Message):
    reason: str | None = None
    API_KEY: ClassVar[int] = 25
    SCHEMA: ClassVar[tuple[F, ...]] = (F("reason", "string", nullable=ALL, tag=0),)


@dataclass(frozen=True, slots=True)
class RemoveDelegationTokenRecord(Message):
    token_id: str = ""
    API_KEY: ClassVar[int] = 26
    SCHEMA: ClassVar[tuple[F, ...]] = (F("token_id", "string"),)


@dataclass(frozen=True, slots=True)
class ControllerEndpoint(Message):
    name: str = ""
    host: str = ""
    port: int = 0
    security_protocol: int = 0
    SCHEMA: ClassVar[tuple[F, ...]] = (F("name", "string"), F("host", "string"), F("port", "uint16"),
                                       F("security_protocol", "int16"))


@dataclass(frozen=True, slots=True)
class ControllerFeature(Message):
    name: str = ""
    min_supported_version: int = 0
    max_supported_version: int = 0
    SCHEMA: ClassVar[tuple[F, ...]] = (F("name", "string"), F("min_supported_version", "int16"),
                                       F("max_supported_version", "int16"))


@dataclass(frozen=True, slots=True)
class RegisterControllerRecord(Message):
    controller_id: int = 0
    incarnation_id: uuid.UUID = ZERO_UUID
    zk_migration_ready: bool = False
    end_points: list[ControllerEndpoint] = field(default_factory=list)
    features: list[ControllerFeature] = field(default_factory=list)
    API_KEY: ClassVar[int] = 27
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("controller_id", "int32"), F("incarnation_id", "uuid"), F("zk_migration_ready", "bool"),
        F("end_points", ControllerEndpoint, array=True), F("features", ControllerFeature, array=True),
    )


@dataclass(frozen=True, slots=True)
class ClearElrRecord(Message):
    """Clears the ELR of one topic's partitions (empty name: of every topic); Kafka 4.3 writes it
    when min.insync.replicas is set or deleted while eligible.leader.replicas.version is on (a
    topic's: that topic; a broker's or the cluster's: every topic), not on the feature's downgrade."""

    topic_name: str = ""
    API_KEY: ClassVar[int] = 28
    SCHEMA: ClassVar[tuple[F, ...]] = (F("topic_name", "string"),)


# Every type of Kafka 4.3.1's MetadataRecordType (api keys 6, 13 and 16 were never used).
RECORD_TYPES: dict[int, type[Message]] = {
    c.API_KEY: c for c in (
        RegisterBrokerRecord, UnregisterBrokerRecord, TopicRecord, PartitionRecord, ConfigRecord,
        PartitionChangeRecord, FenceBrokerRecord, UnfenceBrokerRecord, RemoveTopicRecord,
        DelegationTokenRecord, UserScramCredentialRecord, FeatureLevelRecord, ClientQuotaRecord,
        ProducerIdsRecord, BrokerRegistrationChangeRecord, AccessControlEntryRecord,
        RemoveAccessControlEntryRecord, NoOpRecord, ZkMigrationStateRecord, RemoveUserScramCredentialRecord,
        BeginTransactionRecord, EndTransactionRecord, AbortTransactionRecord, RemoveDelegationTokenRecord,
        RegisterControllerRecord, ClearElrRecord)
}

# Versions strom writes when no metadata.version is given: the highest each type has.
WRITE_VERSIONS: dict[int, int] = {k: c.VERSIONS[1] for k, c in RECORD_TYPES.items()}


def write_version(record: Message, metadata_version: int) -> int:
    """The version Kafka 4.3.1 writes ``record`` in at ``metadata_version`` (its MetadataVersion's
    registerBrokerRecordVersion / partitionRecordVersion / partitionChangeRecordVersion; a
    BrokerRegistrationChangeRecord takes the lowest version that carries the fields it sets)."""
    mv = metadata_version
    if isinstance(record, RegisterBrokerRecord):
        return 4 if mv >= 30 else 3 if mv >= 17 else 2 if mv >= 8 else 1
    if isinstance(record, (PartitionRecord, PartitionChangeRecord)):
        return 2 if mv >= 23 else 1 if mv >= 17 else 0
    if isinstance(record, BrokerRegistrationChangeRecord):
        if record.cordoned_log_dirs is not None:
            return 3
        if record.log_dirs:
            return 2
        return 1 if record.in_controlled_shutdown != CONTROLLED_SHUTDOWN_NONE else 0
    return WRITE_VERSIONS.get(record.API_KEY, record.VERSIONS[1])


class UnknownMetadataRecordError(CorruptMessageError):
    """A metadata record whose type or version this build does not know.

    Kafka's ``MetadataRecordSerde`` refuses such a record (``MetadataParseException``): no header
    bit marks a metadata record as safe to skip, and replaying a log without a record it does not
    understand would build a wrong image. (Unknown tagged fields inside a known record are
    skipped; unknown *control* record types are skipped by the raft layer with a warning, as
    Kafka's ``ControlRecordType.UNKNOWN``.)
    """


def encode_record(record: Message, version: int | None = None, *, metadata_version: int | None = None) -> bytes:
    """``ApiMessageAndVersion`` serialization: frame version, api key, version, body.

    The version is ``version``, else the one Kafka writes at ``metadata_version``, else the highest.
    """
    if version is not None:
        v = version
    elif metadata_version is not None:
        v = write_version(record, metadata_version)
    else:
        v = WRITE_VERSIONS.get(record.API_KEY, record.VERSIONS[1])
    out = bytearray()
    write_uvarint(out, FRAME_VERSION)
    write_uvarint(out, record.API_KEY)
    write_uvarint(out, v)
    out += record.encode(v)
    return bytes(out)


def decode_record(data: bytes | bytearray | memoryview) -> Message:
    """Parse one metadata record value; raise ``CorruptMessageError`` on malformed input."""
    r = Reader(data)
    frame = r.uvarint()
    if frame != FRAME_VERSION:
        raise CorruptMessageError(f"metadata record has unknown frame version {frame} (only 1 is supported)")
    api_key = r.uvarint()
    version = r.uvarint()
    cls = RECORD_TYPES.get(api_key)
    if cls is None:
        raise UnknownMetadataRecordError(
            f"metadata record type {api_key} (version {version}) is unknown: this broker reads the record "
            f"types of Kafka 4.3 (api keys {min(RECORD_TYPES)}-{max(RECORD_TYPES)}); the log was written by a "
            "newer Kafka, whose metadata.version this broker cannot run")
    if not cls.VERSIONS[0] <= version <= cls.VERSIONS[1]:
        raise UnknownMetadataRecordError(
            f"{cls.__name__} version {version} is not supported (this broker reads versions "
            f"{cls.VERSIONS[0]}-{cls.VERSIONS[1]}, as Kafka 4.3); the log was written by a newer Kafka")
    msg = read_struct(r, cls, version, True)
    if r.remaining:
        raise CorruptMessageError(f"found {r.remaining} byte(s) of garbage after {cls.__name__}")
    return msg
