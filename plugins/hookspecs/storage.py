"""Extension point: storage tiers.

Three protocols:

* :class:`RemoteStorageManager` — KIP-405's remote tier SPI (Kafka's
  ``org.apache.kafka.server.log.remote.storage.RemoteStorageManager``): copy a closed local
  segment and its indexes out, read byte ranges and indexes back, delete them. The remote log
  manager calls it off the event loop (it may do network I/O).
* :class:`RemoteLogMetadataManager` — KIP-405's metadata SPI (Kafka's ``RemoteLogMetadataManager``):
  the record of which segments are remote, in which :class:`RemoteLogSegmentState`, and the
  deletion state of whole partitions. Kafka's default keeps it in the ``__remote_log_metadata``
  topic.
* :class:`LocalTier` — the local-disk tier: where a partition's segment files live (Kafka's
  layout, 20-digit base-offset names) and how the remote log manager reads a closed segment's
  files to hand them to the remote tier.

Selection: ``remote.log.storage.manager.class.name`` (Kafka's key) names a remote storage
manager offered through :func:`strom_remote_storage_managers`;
``remote.log.metadata.manager.class.name`` a metadata manager offered through
:func:`strom_remote_log_metadata_managers`. Both take strom's plugin name or, as an alias, the
Java class name a Kafka or Aiven deployment writes there (:data:`REMOTE_STORAGE_MANAGER_ALIASES`,
:data:`REMOTE_LOG_METADATA_MANAGER_ALIASES`). ``strom.local.tier`` names a local tier offered
through :func:`strom_local_tiers` (default: the built-in ``local``).

Kafka hands a manager only its own prefix of the broker config, stripped (``rsm.config.`` /
``rlmm.config.``, :func:`prefixed_configs`); strom's factories receive the whole broker config
and strip it themselves, so a manager can also read broker keys such as ``node.id``.
"""

from __future__ import annotations

import base64
import enum
import uuid
from collections.abc import Callable, Iterator, Mapping, Set
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO, Protocol, runtime_checkable

from strom.plugins.markers import hookspec

REMOTE_CONFIG_KEY = "remote.log.storage.manager.class.name"
REMOTE_METADATA_CONFIG_KEY = "remote.log.metadata.manager.class.name"
REMOTE_STORAGE_SYSTEM_ENABLE_KEY = "remote.log.storage.system.enable"
RSM_CONFIG_PREFIX_KEY = "remote.log.storage.manager.impl.prefix"
RLMM_CONFIG_PREFIX_KEY = "remote.log.metadata.manager.impl.prefix"
DEFAULT_RSM_CONFIG_PREFIX = "rsm.config."
DEFAULT_RLMM_CONFIG_PREFIX = "rlmm.config."
LOCAL_CONFIG_KEY = "strom.local.tier"
DEFAULT_LOCAL_TIER = "local"

S3_REMOTE_STORAGE_MANAGER = "s3"
TOPIC_BASED_REMOTE_LOG_METADATA_MANAGER = "topic-based"
DEFAULT_REMOTE_LOG_METADATA_MANAGER = TOPIC_BASED_REMOTE_LOG_METADATA_MANAGER

# Java class names a Kafka/Aiven server.properties carries -> strom's plugin names.
REMOTE_STORAGE_MANAGER_ALIASES: Mapping[str, str] = {
    "io.aiven.kafka.tieredstorage.RemoteStorageManager": S3_REMOTE_STORAGE_MANAGER,
}
REMOTE_LOG_METADATA_MANAGER_ALIASES: Mapping[str, str] = {
    "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager":
        TOPIC_BASED_REMOTE_LOG_METADATA_MANAGER,
}


def plugin_name(configured: str, aliases: Mapping[str, str]) -> str:
    """The plugin name a configured value selects: an alias's target, else the value itself."""
    name = configured.strip()
    return aliases.get(name, name)


def prefixed_configs(config: Mapping[str, object], prefix: str) -> dict[str, object]:
    """The keys under ``prefix`` with the prefix stripped, as Kafka's ``originalsWithPrefix``."""
    return {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}


def kafka_uuid_str(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, no padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def kafka_uuid_parse(text: str) -> uuid.UUID:
    """Inverse of :func:`kafka_uuid_str` (Kafka's ``Uuid.fromString``)."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a Kafka Uuid: {text!r}")
    return uuid.UUID(bytes=raw)


class IndexType(enum.Enum):
    """Kafka's ``RemoteStorageManager.IndexType``; values are the local file suffixes."""

    OFFSET = ".index"
    TIMESTAMP = ".timeindex"
    PRODUCER_SNAPSHOT = ".snapshot"
    TRANSACTION = ".txnindex"
    LEADER_EPOCH = ".leader-epoch-checkpoint"


class RemoteLogSegmentState(enum.IntEnum):
    """Kafka's ``RemoteLogSegmentState`` with its ids (the ``RemoteLogSegmentState`` int8 of
    ``__remote_log_metadata`` records)."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3

    @staticmethod
    def is_valid_transition(source: RemoteLogSegmentState | None, target: RemoteLogSegmentState) -> bool:
        """Kafka's ``RemoteLogSegmentState.isValidTransition``. A segment is born
        COPY_SEGMENT_STARTED; a self-transition is valid so that retries and failover stay
        idempotent; a copy that never finished may go straight to DELETE_SEGMENT_STARTED
        (cleaning up an upload that failed)."""
        if source is None:
            return target is RemoteLogSegmentState.COPY_SEGMENT_STARTED
        return source is target or target in _SEGMENT_TRANSITIONS[source]


_SEGMENT_TRANSITIONS: dict[RemoteLogSegmentState, frozenset[RemoteLogSegmentState]] = {
    RemoteLogSegmentState.COPY_SEGMENT_STARTED: frozenset(
        {RemoteLogSegmentState.COPY_SEGMENT_FINISHED, RemoteLogSegmentState.DELETE_SEGMENT_STARTED}),
    RemoteLogSegmentState.COPY_SEGMENT_FINISHED: frozenset({RemoteLogSegmentState.DELETE_SEGMENT_STARTED}),
    RemoteLogSegmentState.DELETE_SEGMENT_STARTED: frozenset({RemoteLogSegmentState.DELETE_SEGMENT_FINISHED}),
    RemoteLogSegmentState.DELETE_SEGMENT_FINISHED: frozenset(),
}


class RemotePartitionDeleteState(enum.IntEnum):
    """Kafka's ``RemotePartitionDeleteState`` with its ids."""

    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2

    @staticmethod
    def is_valid_transition(source: RemotePartitionDeleteState | None,
                            target: RemotePartitionDeleteState) -> bool:
        """Kafka's ``RemotePartitionDeleteState.isValidTransition``: MARKED -> STARTED -> FINISHED."""
        if source is None:
            return target is RemotePartitionDeleteState.DELETE_PARTITION_MARKED
        return source is target or target.value == source.value + 1


@dataclass(frozen=True, slots=True)
class TopicIdPartition:
    """Kafka's ``TopicIdPartition``: a partition named by its topic's id and name."""

    topic_id: uuid.UUID
    topic: str
    partition: int

    def __str__(self) -> str:  # Kafka's TopicIdPartition.toString
        return f"{kafka_uuid_str(self.topic_id)}:{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentId:
    """A segment's identity in the remote tier: its partition + a random id per copy attempt
    (a retried copy gets a new id, so a half-written earlier attempt never aliases it)."""

    topic_id_partition: TopicIdPartition
    id: uuid.UUID

    @classmethod
    def generate_new(cls, topic_id_partition: TopicIdPartition) -> RemoteLogSegmentId:
        """Kafka's ``RemoteLogSegmentId.generateNew``."""
        return cls(topic_id_partition, uuid.uuid4())


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    """What the remote log metadata manager records about one remote segment (Kafka's
    ``RemoteLogSegmentMetadata``). ``end_offset`` is inclusive, as in Kafka."""

    segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: Mapping[int, int]  # leader epoch -> its start offset in the segment
    custom_metadata: bytes | None = None  # what copy_log_segment_data returned
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED
    txn_index_empty: bool = False

    def __post_init__(self) -> None:
        if self.start_offset < 0 or self.end_offset < self.start_offset:
            raise ValueError(f"bad offsets [{self.start_offset}, {self.end_offset}] for {self.segment_id}")
        if not self.segment_leader_epochs:
            raise ValueError(f"segment {self.segment_id} has no leader epochs")

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.segment_id.topic_id_partition

    def create_with_update(self, update: RemoteLogSegmentMetadataUpdate) -> RemoteLogSegmentMetadata:
        """Kafka's ``createWithUpdates``: this segment in the update's state (the update's custom
        metadata, when it has any, replaces this one's)."""
        if update.segment_id != self.segment_id:
            raise ValueError(f"update of {update.segment_id} applied to {self.segment_id}")
        return replace(self, broker_id=update.broker_id, event_timestamp_ms=update.event_timestamp_ms,
                       state=update.state,
                       custom_metadata=(update.custom_metadata if update.custom_metadata is not None
                                        else self.custom_metadata))


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadataUpdate:
    """A state change of a remote segment (Kafka's ``RemoteLogSegmentMetadataUpdate``)."""

    segment_id: RemoteLogSegmentId
    event_timestamp_ms: int
    custom_metadata: bytes | None
    state: RemoteLogSegmentState
    broker_id: int

    def __post_init__(self) -> None:
        if self.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise ValueError("an update cannot set COPY_SEGMENT_STARTED: that is the segment's first state")


@dataclass(frozen=True, slots=True)
class RemotePartitionDeleteMetadata:
    """The deletion state of a whole partition's remote data (Kafka's ``RemotePartitionDeleteMetadata``)."""

    topic_id_partition: TopicIdPartition
    state: RemotePartitionDeleteState
    event_timestamp_ms: int
    broker_id: int


@dataclass(frozen=True, slots=True)
class LogSegmentData:
    """A closed local segment's files, as handed to :meth:`RemoteStorageManager.copy_log_segment_data`
    (Kafka's ``LogSegmentData``)."""

    log_segment: Path
    offset_index: Path
    time_index: Path
    transaction_index: Path | None
    producer_snapshot_index: Path
    leader_epoch_index: bytes  # the leader-epoch checkpoint content up to the segment's end


@runtime_checkable
class RemoteStorageManager(Protocol):
    """KIP-405's remote storage SPI. Every method may block: callers run it in a worker thread.

    Built by its factory from the broker config (already configured); :meth:`configure` exists
    for Kafka's contract (``Configurable``) and reconfigures from the stripped ``rsm.config.`` keys.
    """

    def configure(self, configs: Mapping[str, object]) -> None:
        """Apply the manager's own configs (the ``rsm.config.`` keys, prefix stripped). A bad or
        missing value raises :class:`~strom.core.exceptions.ConfigError` naming the key."""
        ...

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> bytes | None:
        """Copy the segment and its indexes; return custom metadata to store with it (or ``None``).

        Must be idempotent: a retry after a partial copy overwrites. Raises
        :class:`~strom.plugins.exceptions.RemoteStorageError` on failure.
        """
        ...

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> BinaryIO:
        """A stream of the segment's bytes from ``start_position`` to ``end_position`` *inclusive*
        (to the end when ``None``). The caller closes it. Raises
        :class:`~strom.plugins.exceptions.RemoteResourceNotFoundError` if the segment is gone."""
        ...

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        """A stream of one index of the segment. Raises
        :class:`~strom.plugins.exceptions.RemoteResourceNotFoundError` if it does not exist
        (e.g. a transaction index the segment never had)."""
        ...

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Delete the segment and its indexes; deleting what is already gone is not an error."""
        ...

    def close(self) -> None:
        """Release connections and threads; the manager is not used afterwards."""
        ...


@runtime_checkable
class RemoteLogMetadataManager(Protocol):
    """KIP-405's remote log metadata SPI (Kafka's ``RemoteLogMetadataManager``).

    Kafka returns futures from the writes; here every method blocks until the write is durable
    and visible to this manager's own reads (callers run it in a worker thread). The state
    machine of :class:`RemoteLogSegmentState` is enforced: an invalid transition raises
    :class:`~strom.plugins.exceptions.RemoteStorageError`.
    """

    def configure(self, configs: Mapping[str, object]) -> None:
        """Apply the manager's own configs (the ``rlmm.config.`` keys, prefix stripped)."""
        ...

    def add_remote_log_segment_metadata(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Record a new segment; its state must be COPY_SEGMENT_STARTED."""
        ...

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        """Move a known segment to the update's state (raises for an unknown segment)."""
        ...

    def remote_log_segment_metadata(self, topic_id_partition: TopicIdPartition, epoch_for_offset: int,
                                    offset: int) -> RemoteLogSegmentMetadata | None:
        """The COPY_SEGMENT_FINISHED segment holding ``offset`` written under leader epoch
        ``epoch_for_offset``, or ``None``."""
        ...

    def highest_offset_for_epoch(self, topic_id_partition: TopicIdPartition, leader_epoch: int) -> int | None:
        """The highest offset of ``leader_epoch`` held by COPY_SEGMENT_FINISHED segments, or ``None``."""
        ...

    def next_segment_with_txn_index(self, topic_id_partition: TopicIdPartition, epoch: int,
                                    offset: int) -> RemoteLogSegmentMetadata | None:
        """Kafka's ``nextSegmentWithTxnIndex``: the first COPY_SEGMENT_FINISHED segment of ``epoch``
        at or after ``offset`` whose transaction index is not empty (aborted transactions for a
        read_committed fetch), or ``None``."""
        ...

    def put_remote_partition_delete_metadata(self, metadata: RemotePartitionDeleteMetadata) -> None:
        """Record the deletion state of a whole partition's remote data."""
        ...

    def list_remote_log_segments(self, topic_id_partition: TopicIdPartition,
                                 leader_epoch: int | None = None) -> Iterator[RemoteLogSegmentMetadata]:
        """Every segment of the partition in every state, by start offset; with ``leader_epoch``,
        the segments holding records of that epoch (Kafka's two overloads)."""
        ...

    def on_partition_leadership_changes(self, leader_partitions: Set[TopicIdPartition],
                                        follower_partitions: Set[TopicIdPartition]) -> None:
        """This broker became leader/follower of these partitions: load (and then follow) their
        metadata."""
        ...

    def on_stopped_partitions(self, partitions: Set[TopicIdPartition]) -> None:
        """This broker no longer hosts these partitions: drop their metadata."""
        ...

    def remote_log_size(self, topic_id_partition: TopicIdPartition, leader_epoch: int) -> int:
        """Bytes of the partition's remote segments holding records of ``leader_epoch``."""
        ...

    def close(self) -> None:
        """Release clients and threads."""
        ...


@dataclass(frozen=True, slots=True)
class LocalSegment:
    """The files of one local segment (the index paths may not exist for the active segment)."""

    topic: str
    partition: int
    base_offset: int
    log: Path
    size: int
    offset_index: Path
    time_index: Path
    transaction_index: Path | None = field(default=None)


@runtime_checkable
class LocalTier(Protocol):
    """The local-disk tier: where partitions' segment files live, in Kafka's layout."""

    def log_dirs(self) -> list[Path]:
        """The log directories of this tier."""
        ...

    def partition_dir(self, topic: str, partition: int, *, create: bool = False) -> Path | None:
        """The directory of a partition (``<log.dir>/<topic>-<partition>``); ``None`` when it does
        not exist and ``create`` is false. A new one goes to the log dir with the fewest partitions."""
        ...

    def list_segments(self, topic: str, partition: int) -> list[LocalSegment]:
        """The partition's segments ordered by base offset (the last one is the active segment)."""
        ...

    def read(self, segment: LocalSegment, start_position: int, end_position: int) -> bytes:
        """Bytes ``[start_position, end_position)`` of the segment's log file."""
        ...

    def delete_segment(self, segment: LocalSegment) -> None:
        """Remove the segment's files (log and indexes)."""
        ...


RemoteStorageManagerFactory = Callable[[Mapping[str, Any]], RemoteStorageManager]
RemoteLogMetadataManagerFactory = Callable[[Mapping[str, Any]], RemoteLogMetadataManager]
LocalTierFactory = Callable[[Mapping[str, Any]], LocalTier]


@hookspec
def strom_remote_storage_managers() -> Mapping[str, RemoteStorageManagerFactory]:  # type: ignore[empty-body]
    """Offer remote storage managers by name; ``remote.log.storage.manager.class.name`` selects one.

    Each factory receives the broker configuration (Kafka property names -> values), including the
    ``rsm.config.*`` keys Kafka passes to its remote storage manager, and returns a configured
    manager. Kafka's and Aiven's class names select by :data:`REMOTE_STORAGE_MANAGER_ALIASES`.
    """


@hookspec
def strom_remote_log_metadata_managers() -> Mapping[str, RemoteLogMetadataManagerFactory]:  # type: ignore[empty-body]
    """Offer remote log metadata managers by name; ``remote.log.metadata.manager.class.name``
    selects one (default ``topic-based``, alias Kafka's ``TopicBasedRemoteLogMetadataManager``).

    Each factory receives the broker configuration, including the ``rlmm.config.*`` keys.
    """


@hookspec
def strom_local_tiers() -> Mapping[str, LocalTierFactory]:  # type: ignore[empty-body]
    """Offer local tiers by name; ``strom.local.tier`` selects one (default ``local``).

    Each factory receives the broker configuration; the built-in one uses ``log.dirs``.
    """
