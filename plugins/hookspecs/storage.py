"""Extension point: storage tiers.

Two protocols:

* :class:`RemoteStorageManager` — KIP-405's remote tier SPI (Kafka's
  ``org.apache.kafka.server.log.remote.storage.RemoteStorageManager``): copy a closed local
  segment and its indexes out, read byte ranges and indexes back, delete them. The remote log
  manager calls it off the event loop (it may do network I/O).
* :class:`LocalTier` — the local-disk tier: where a partition's segment files live (Kafka's
  layout, 20-digit base-offset names) and how the remote log manager reads a closed segment's
  files to hand them to the remote tier.

Selection: ``remote.log.storage.manager.class.name`` (Kafka's key) names a remote storage
manager offered through :func:`strom_remote_storage_managers`; ``strom.local.tier`` names a
local tier offered through :func:`strom_local_tiers` (default: the built-in ``local``).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol, runtime_checkable

from strom.plugins.markers import hookspec

REMOTE_CONFIG_KEY = "remote.log.storage.manager.class.name"
LOCAL_CONFIG_KEY = "strom.local.tier"
DEFAULT_LOCAL_TIER = "local"


class IndexType(enum.Enum):
    """Kafka's ``RemoteStorageManager.IndexType``; values are the local file suffixes."""

    OFFSET = ".index"
    TIMESTAMP = ".timeindex"
    PRODUCER_SNAPSHOT = ".snapshot"
    TRANSACTION = ".txnindex"
    LEADER_EPOCH = ".leader-epoch-checkpoint"


class RemoteLogSegmentState(enum.IntEnum):
    """Kafka's ``RemoteLogSegmentState`` with its ids."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


@dataclass(frozen=True, slots=True)
class TopicIdPartition:
    topic_id: uuid.UUID
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentId:
    """A segment's identity in the remote tier: its partition + a random id per copy."""

    topic_id_partition: TopicIdPartition
    id: uuid.UUID


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    """What the remote log metadata manager records about one remote segment."""

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


@dataclass(frozen=True, slots=True)
class LogSegmentData:
    """A closed local segment's files, as handed to :meth:`RemoteStorageManager.copy_log_segment_data`."""

    log_segment: Path
    offset_index: Path
    time_index: Path
    transaction_index: Path | None
    producer_snapshot_index: Path
    leader_epoch_index: bytes  # the leader-epoch checkpoint content up to the segment's end


@runtime_checkable
class RemoteStorageManager(Protocol):
    """KIP-405's remote storage SPI. Every method may block: callers run it in a worker thread."""

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
LocalTierFactory = Callable[[Mapping[str, Any]], LocalTier]


@hookspec
def strom_remote_storage_managers() -> Mapping[str, RemoteStorageManagerFactory]:  # type: ignore[empty-body]
    """Offer remote storage managers by name; ``remote.log.storage.manager.class.name`` selects one.

    Each factory receives the broker configuration (Kafka property names -> values), including the
    ``rsm.config.*`` keys Kafka passes to its remote storage manager.
    """


@hookspec
def strom_local_tiers() -> Mapping[str, LocalTierFactory]:  # type: ignore[empty-body]
    """Offer local tiers by name; ``strom.local.tier`` selects one (default ``local``).

    Each factory receives the broker configuration; the built-in one uses ``log.dirs``.
    """
