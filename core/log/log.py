"""UnifiedLog: one partition's log as the broker sees it (Kafka's ``UnifiedLog``; ``Log`` is an alias).

The storage engine in Kafka's three layers:

- :class:`~strom.core.log.loader.LogLoader` opens the directory once: removes leftovers,
  completes an interrupted compaction swap, checks or rebuilds indexes, recovers after an
  unclean shutdown (a torn tail is cut) and rebuilds the producer state.
- :class:`~strom.core.log.local_log.LocalLog` is the segment list: append, roll, read,
  remove, truncate, flush bookkeeping, the compaction swap. Not thread-safe.
- :class:`UnifiedLog` (here) owns **the lock** and what is replicated or validated on top of
  the segments: the log start offset, the high watermark, the leader-epoch cache, the producer
  state (idempotence, transactions), and the entry points: append as leader / follower,
  read, ListOffsets, retention, truncation, flush, the cleaner's swap.

Append path (leader): already-validated batches get their offsets patched in place by
``records.validate.assign_offsets`` and are appended with one ``pwrite`` to the active segment,
which rolls on ``segment.bytes`` / ``segment.ms`` (minus jitter) / a full index. Read path:
bisect over the sorted segment base offsets, offset-index lookup, a forward scan of batch
headers, one ``pread`` of whole batches. Neither path does per-record Python work.

Producer state (see :mod:`strom.core.log.producer_state`): every batch with a producer id is
checked before offsets are assigned (a duplicate of one of the producer's last 5 batches is not
written again; the append answers with the original offsets), the state is updated after the
write, an ABORT marker adds an entry to the ``.txnindex`` of the segment holding it, and the
ongoing transactions bound the last stable offset. Snapshots are written at every roll (fsynced
by the next flush, before the recovery point passes them) and on close.

No fsync under the lock: the leader-epoch checkpoint, producer snapshots and segments are
fsynced by :meth:`UnifiedLog.flush` outside it (a worker thread), before it moves the recovery
point; a crash recovers everything above the recovery point from the batches themselves.

Maintenance never holds the lock for more than one segment operation: retention removes one
segment per lock acquisition (the files are unlinked after the lock is released), the cleaner
swaps one segment per acquisition, flush only takes it to snapshot and to record the result.

Storage errors: an ``OSError`` while appending, rolling, flushing or reading is reported to the
LogManager's LogDirFailureChannel (``io_error_handler``), which takes the whole log dir
offline; the request answers KAFKA_STORAGE_ERROR. An offline log refuses appends and keeps
serving reads; it is closed without writing anything more into its dir.

Thread-safety: **this is the one locking layer of the storage engine.** A ``UnifiedLog`` is
safe to use from several threads: one ``threading.RLock`` guards its offsets, its ``LocalLog``
(segments, LEO, recovery point), epoch cache and producer state, none of which lock anything.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import crc32c

from strom.core.config import LogConfig
from strom.core.errors import (
    CorruptMessageError,
    InconsistentTopicIdError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from strom.core.exceptions import BrokerError, KafkaError
from strom.core.log.checkpoint import fsync_dir, read_partition_metadata, write_partition_metadata
from strom.core.log.epoch_cache import LeaderEpochFileCache
from strom.core.log.loader import LogLoader, apply_control_batch, complete_txn, rebuild_producer_state
from strom.core.log.local_log import FetchDataInfo, LocalLog, LogOffsetMetadata
from strom.core.log.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ORIGIN_CLIENT,
    ORIGIN_COORDINATOR,
    ORIGIN_REPLICATION,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateManager,
)
from strom.core.log.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    rename_segment_files,
)
from strom.core.records.batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    iter_headers,
    read_header,
)
from strom.core.records.builder import build_control_batch
from strom.core.records.validate import assign_offsets

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "FetchDataInfo",
    "IoErrorHandler",
    "Log",
    "LogAppendInfo",
    "LogOffsetMetadata",
    "LogOffsetSnapshot",
    "UnexpectedAppendOffsetError",
    "UnifiedLog",
    "parse_topic_partition",
]

logger = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


# (log dir, what was being done, the error): the LogManager's LogDirFailureChannel.
IoErrorHandler = Callable[[Path, str, OSError], object]


class UnexpectedAppendOffsetError(BrokerError):
    """A follower append does not start at or after the log end offset."""


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    offset_of_max_timestamp: int = -1
    valid_bytes: int = 0
    # True when the (single) producer batch duplicated one already in the log: nothing was
    # written and first/last offset are those of the batch appended before.
    duplicate: bool = False


_make_append_info = LogAppendInfo._make


class LogOffsetSnapshot(NamedTuple):
    """Kafka's ``LogOffsetSnapshot``: the log's offsets at one moment, read under the lock
    without touching a segment (what a delayed fetch compares its fetch offsets with)."""

    log_start_offset: int
    log_end_offset: LogOffsetMetadata
    high_watermark: LogOffsetMetadata
    last_stable_offset: LogOffsetMetadata


def parse_topic_partition(dir_name: str) -> tuple[str, int]:
    """``orders-3`` -> ``("orders", 3)``; raise ValueError for anything else."""
    topic, sep, part = dir_name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        raise ValueError(f"{dir_name!r} is not a <topic>-<partition> directory name")
    return topic, int(part)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _fsync_file(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return  # replaced or deleted meanwhile
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


SegmentPredicate = Callable[[LogSegment, "LogSegment | None"], bool]


class UnifiedLog:
    """One partition's log. Thread-safe: every public method takes the log's lock."""

    def __init__(self, dir_path: str | os.PathLike[str], config: LogConfig, *,
                 topic_id: uuid.UUID | None = None, recovery_point: int = 0, log_start_offset: int = 0,
                 high_watermark: int = 0, had_clean_shutdown: bool = True,
                 clock: Callable[[], int] = _now_ms,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 io_error_handler: IoErrorHandler | None = None,
                 remote_storage_system_enable: bool = False) -> None:
        self.dir = Path(dir_path)
        self.topic, self.partition = parse_topic_partition(self.dir.name)
        self._clock = clock
        self._lock = threading.RLock()
        self.closed = False
        # Why appends are refused once the log dir went offline (an I/O error), else None.
        self.offline_reason: str | None = None
        # False once closed or offline: the append path checks one attribute.
        self._appendable = True
        self._io_error_handler = io_error_handler
        self.dir.mkdir(parents=True, exist_ok=True)
        self.topic_id = self._init_topic_id(topic_id)
        self.epoch_cache = LeaderEpochFileCache.in_dir(self.dir)
        # KIP-405: remote.log.storage.system.enable of the broker; with the topic's
        # remote.storage.enable it makes the log tiered (remote_log_enabled).
        self._remote_system = remote_storage_system_enable
        # The end offset of the newest segment copied to remote storage (Kafka's
        # highestOffsetInRemoteStorage), set by the remote log manager; -1: none known.
        self._highest_remote_offset = -1
        self.producer_state = ProducerStateManager(self.dir, producer_id_expiration_ms=producer_id_expiration_ms)
        loaded = LogLoader(self.dir, config, recovery_point=recovery_point, log_start_offset=log_start_offset,
                           had_clean_shutdown=had_clean_shutdown, epoch_cache=self.epoch_cache,
                           producer_state=self.producer_state, clock=clock,
                           remote_log_enabled=self._remote_enabled(config),
                           keep_epochs_below_local=remote_storage_system_enable).load()
        self._local = LocalLog(self.dir, config, loaded.segments, recovery_point=loaded.recovery_point,
                               next_offset=loaded.next_offset, clock=clock, dir_dirty=loaded.dir_dirty)
        self._log_start = loaded.log_start_offset
        self._hw = min(max(high_watermark, self._log_start), loaded.next_offset)
        # Logs are loaded before the topics' configs are known (broker defaults): a tiered log's
        # checkpointed log start below its local segments comes back with its config, once.
        self._restore_log_start = (log_start_offset if remote_storage_system_enable
                                   and 0 <= log_start_offset < self._log_start else None)

    def _init_topic_id(self, topic_id: uuid.UUID | None) -> uuid.UUID | None:
        stored = read_partition_metadata(self.dir)
        if stored is not None and topic_id is not None and stored != topic_id:
            raise InconsistentTopicIdError(
                f"{self.dir}: partition.metadata holds topic id {stored}, expected {topic_id}")
        if stored is None and topic_id is not None:
            write_partition_metadata(self.dir, topic_id)
        return stored or topic_id

    # ------------------------------------------------------------------------------------------
    # producer state

    def _analyze_producer_state(self, buf: bytes | bytearray | memoryview,
                                batches: Sequence[tuple[int, BatchHeader]], first_offset: int, origin: str,
                                transaction_version: int = 0, *, base_offsets_given: bool = False,
                                ) -> tuple[list[ProducerAppendInfo], list[CompletedTxn], BatchHeader | None]:
        """Check every producer batch (offsets as they will be assigned from ``first_offset``).

        Returns the pending updates, the transactions the markers complete and, for a client
        duplicate, the header of the duplicate batch (then nothing must be written). Raises the
        Kafka error of the first bad batch; nothing is changed until the caller commits.
        ``base_offsets_given``: the batches carry their offsets already (follower appends).
        """
        producers = self.producer_state.producers
        updates: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        offset = first_offset
        for pos, h in batches:
            if base_offsets_given:
                offset = h.base_offset
            base, offset = offset, offset + h.last_offset_delta + 1
            pid = h.producer_id
            if pid < 0:
                continue
            # The header's properties, read once each (this runs for every producer batch).
            attributes = h.attributes
            last_seq = h.last_sequence
            entry = producers.get(pid)
            if origin == ORIGIN_CLIENT and entry is not None and \
                    entry.find_duplicate_batch(h.producer_epoch, h.base_sequence, last_seq) is not None:
                return [], [], h
            info = updates.get(pid)
            if info is None:
                info = updates[pid] = self.producer_state.prepare_update(pid, origin)
            if attributes & CONTROL_MASK:
                txn = apply_control_batch(info, buf, pos, h, base, transaction_version)
                if txn is not None:
                    completed.append(txn)
            else:
                info.append_data_batch(h.producer_epoch, h.base_sequence, last_seq, h.max_timestamp,
                                       base, offset - 1, bool(attributes & TRANSACTIONAL_MASK))
        return list(updates.values()), completed, None

    def _commit_producer_state(self, updates: list[ProducerAppendInfo], completed: list[CompletedTxn]) -> None:
        ps = self.producer_state
        for info in updates:
            ps.update(info)
        seg = self._local.active_segment  # the segment the batches (and so the markers) went to
        for txn in completed:
            complete_txn(ps, seg, txn)
        ps.update_map_end_offset(self._local.log_end_offset)

    def _rebuild_producer_state(self, max_snapshot_offset: int) -> None:
        local = self._local
        rebuild_producer_state(self.producer_state, local.segments, local.bases, self._log_start,
                               local.log_end_offset, max_snapshot_offset, self._clock())

    # ------------------------------------------------------------------------------------------
    # properties

    @property
    def config(self) -> LogConfig:
        return self._local.config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._local.config = config

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def local_log_start_offset(self) -> int:
        """The first offset on local disk (Kafka's localLogStartOffset): the log start offset unless
        the log is tiered and older segments live only in remote storage."""
        with self._lock:
            return self._local_log_start()

    def _local_log_start(self) -> int:
        return max(self._log_start, self._local.segments[0].base_offset)

    @staticmethod
    def _remote_enabled_by(system: bool, config: LogConfig) -> bool:
        return system and bool(config.get("remote.storage.enable")) and not config.compact

    def _remote_enabled(self, config: LogConfig) -> bool:
        return self._remote_enabled_by(self._remote_system, config)

    @property
    def remote_log_enabled(self) -> bool:
        """The broker's remote.log.storage.system.enable and the topic's remote.storage.enable."""
        return self._remote_enabled(self.config)

    @property
    def highest_offset_in_remote_storage(self) -> int:
        return self._highest_remote_offset

    def increment_log_start_for_remote(self, offset: int) -> None:
        """The remote log manager expired remote data below ``offset`` (total retention): the log
        start moves there (never past the highest remote offset + 1 nor the high watermark),
        with local segments wholly below it deleted as DeleteRecords does."""
        with self._lock:
            new_start = min(offset, self._highest_remote_offset + 1, self._hw)
            if new_start <= self._log_start:
                return
            self._log_start = new_start
            self.epoch_cache.truncate_from_start(new_start)
        self._delete_segments_while(lambda seg, nxt: nxt is not None and nxt.base_offset <= new_start)

    def update_highest_offset_in_remote_storage(self, offset: int) -> None:
        """The remote log manager copied (or found copied) everything up to ``offset``: local
        retention may delete segments ending at or below it."""
        with self._lock:
            if offset > self._highest_remote_offset:
                self._highest_remote_offset = offset

    @property
    def log_end_offset(self) -> int:
        return self._local.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest ongoing transaction, or None (Kafka's firstUnstableOffset)."""
        with self._lock:
            first = self.producer_state.first_unstable_offset
            return None if first is None else max(first, self._log_start)

    @property
    def last_stable_offset(self) -> int:
        """min(first unstable offset, high watermark): read_committed fetches stop here."""
        with self._lock:
            return self._last_stable_offset()

    def _last_stable_offset(self) -> int:
        first = self.producer_state.first_unstable_offset
        if first is not None and first < self._hw:
            return max(first, self._log_start)
        return self._hw

    def fetch_offset_snapshot(self) -> LogOffsetSnapshot:
        """Log start, LEO, HW and LSO with their place on disk where known; reads no segment."""
        with self._lock:
            end = self._local.end_offset_metadata()
            hw = end if self._hw == end.message_offset else LogOffsetMetadata(self._hw)
            lso_offset = self._last_stable_offset()
            lso = end if lso_offset == end.message_offset else LogOffsetMetadata(lso_offset)
            return LogOffsetSnapshot(self._log_start, end, hw, lso)

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return self._local.size_in_bytes

    @property
    def num_segments(self) -> int:
        return self._local.num_segments

    @property
    def active_segment(self) -> LogSegment:
        return self._local.active_segment

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def log_segments(self) -> list[LogSegment]:
        """A snapshot of the segment list (oldest first)."""
        with self._lock:
            return list(self._local.segments)

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            restore, self._restore_log_start = self._restore_log_start, None
            if restore is not None and self._remote_enabled(config):
                self._log_start = restore  # the older data is in remote storage
            self._local.config = config
            self._local.active_segment.index_interval_bytes = config.index_interval_bytes

    def update_high_watermark(self, hw: int) -> int:
        """Set the high watermark, clamped to [log start, LEO]; returns the value set."""
        with self._lock:
            self._hw = min(max(hw, self._log_start), self._local.log_end_offset)
            return self._hw

    # ------------------------------------------------------------------------------------------
    # append

    def append_as_leader(self, buf: bytearray, batches: list[tuple[int, BatchHeader]],
                         leader_epoch: int, *, origin: str = ORIGIN_CLIENT,
                         transaction_version: int = 0) -> LogAppendInfo:
        """Append validated batches (``(position, header)`` from ``validate_produce_batches``).

        Offsets (and, with LogAppendTime, timestamps) are patched into ``buf`` in place;
        ``batches`` is updated with the final headers. Producer batches are checked first
        (``origin`` "client": epoch + sequence, duplicates; "coordinator": epoch only, markers
        allowed): errors raise before anything is written, and a client duplicate writes
        nothing and returns the original offsets with ``duplicate=True``.
        ``transaction_version`` >= 2 applies KIP-890's stricter marker epoch check.
        """
        with self._lock:
            if not self._appendable:
                self._check_open()  # raises
            local = self._local
            config = local.config
            if len(buf) > config.segment_bytes:
                raise RecordListTooLargeError(
                    f"{len(buf)} bytes of batches exceed segment.bytes {config.segment_bytes}")
            first = local.log_end_offset
            updates: list[ProducerAppendInfo] = []
            completed: list[CompletedTxn] = []
            for _, h in batches:  # any producer batch (a loop: no generator per append)
                if h.producer_id >= 0:
                    updates, completed, dup = self._analyze_producer_state(buf, batches, first, origin,
                                                                           transaction_version)
                    if dup is not None:
                        return self._duplicate_info(dup)
                    break
            now = self._clock()
            log_append_time_ms = now if config.log_append_time else None
            result = assign_offsets(buf, batches, first, leader_epoch, log_append_time_ms)
            try:
                self._append(buf, batches, first, result.last_offset, result.max_timestamp, now)
            except OSError as e:
                raise self._storage_error("appending records to", e) from None
            if leader_epoch >= 0 and self.epoch_cache.latest_epoch != leader_epoch:
                # Memory only: the checkpoint is written (and fsynced) by the next flush, off
                # the event loop, before the recovery point passes this offset.
                self.epoch_cache.assign(leader_epoch, first)
            if updates or completed:
                self._commit_producer_state(updates, completed)
            else:
                self.producer_state.update_map_end_offset(local.log_end_offset)
            # _make: the namedtuple's Python __new__ skipped (every field given, duplicate False).
            return _make_append_info((first, result.last_offset, result.max_timestamp,
                                      -1 if log_append_time_ms is None else log_append_time_ms,
                                      self._log_start, result.shallow_offset_of_max_timestamp, len(buf), False))

    def _duplicate_info(self, h: BatchHeader) -> LogAppendInfo:
        entry = self.producer_state.last_entry(h.producer_id)
        assert entry is not None
        meta = entry.find_duplicate_batch(h.producer_epoch, h.base_sequence, h.last_sequence)
        assert meta is not None
        logger.debug("%s: duplicate batch of producer %d (sequences %d..%d) at offsets %d..%d",
                     self.dir.name, h.producer_id, h.base_sequence, h.last_sequence,
                     meta.first_offset, meta.last_offset)
        return LogAppendInfo(meta.first_offset, meta.last_offset, meta.timestamp, -1, self._log_start,
                             meta.last_offset, 0, duplicate=True)

    def append_control_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                              coordinator_epoch: int, leader_epoch: int, *,
                              transaction_version: int = 0, timestamp: int | None = None) -> LogAppendInfo:
        """Write a COMMIT/ABORT marker for ``producer_id`` (WriteTxnMarkers; origin coordinator).

        Raises InvalidProducerEpochError for an older producer epoch and
        TransactionCoordinatorFencedError for an older coordinator epoch. A marker for a
        producer without an open transaction is written too (Kafka does), but completes nothing.
        """
        buf = bytearray(build_control_batch(commit, producer_id, producer_epoch, coordinator_epoch,
                                            timestamp=self._clock() if timestamp is None else timestamp,
                                            partition_leader_epoch=leader_epoch))
        return self.append_as_leader(buf, [(0, read_header(buf))], leader_epoch, origin=ORIGIN_COORDINATOR,
                                     transaction_version=transaction_version)

    def append_as_follower(self, buf: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches replicated from the leader (offsets already set); CRCs are checked."""
        batches = list(iter_headers(buf))
        if not batches:
            return LogAppendInfo(-1, -1, -1, -1, self._log_start)
        view = memoryview(buf)
        expected = -1
        max_ts, offset_of_max = -1, -1
        for pos, h in batches:
            end = pos + h.batch_length + 12
            if crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET:end]) != h.crc:
                raise CorruptMessageError(f"replicated batch at byte {pos}: CRC mismatch")
            if h.base_offset < expected or h.last_offset_delta < 0:
                raise CorruptMessageError(f"replicated batch at byte {pos}: offsets go backwards")
            expected = h.last_offset + 1
            if h.max_timestamp > max_ts:
                max_ts, offset_of_max = h.max_timestamp, h.last_offset
        last_pos, last = batches[-1]
        valid = last_pos + last.batch_length + 12
        data = view[:valid]
        first = batches[0][1].base_offset
        with self._lock:
            self._check_open()
            if first < self._local.log_end_offset:
                raise UnexpectedAppendOffsetError(
                    f"{self.dir.name}: follower append starts at {first}, below the log end offset "
                    f"{self._local.log_end_offset}")
            updates: list[ProducerAppendInfo] = []
            completed: list[CompletedTxn] = []
            if any(h.producer_id >= 0 for _, h in batches):
                updates, completed, _ = self._analyze_producer_state(
                    data, batches, first, ORIGIN_REPLICATION, base_offsets_given=True)
            try:
                self._append(data, batches, first, last.last_offset, max_ts, self._clock())
            except OSError as e:
                raise self._storage_error("appending replicated records to", e) from None
            self._commit_producer_state(updates, completed)
            for _, h in batches:
                latest = self.epoch_cache.latest_epoch
                if h.partition_leader_epoch >= 0 and (latest is None or h.partition_leader_epoch > latest):
                    self.epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
            return LogAppendInfo(first, last.last_offset, max_ts, -1, self._log_start, offset_of_max, valid)

    def _append(self, buf: bytes | bytearray | memoryview, batches: Sequence[tuple[int, BatchHeader]],
                first: int, last: int, max_timestamp: int, now: int) -> None:
        local = self._local
        if local.should_roll(len(buf), max_timestamp, last, now):
            self._roll(first)
        local.append(buf, batches, first, last)

    def _check_open(self) -> None:
        if self.offline_reason is not None:
            raise KafkaStorageError(f"{self.dir.name}: log dir {self.dir.parent} is offline ({self.offline_reason})")
        if self.closed:
            raise BrokerError(f"log {self.dir.name} is closed")

    # ------------------------------------------------------------------------------------------
    # storage errors

    def mark_offline(self, reason: str) -> None:
        """Refuse appends from now on (the log dir failed); reads of what is on disk go on."""
        with self._lock:
            if self.offline_reason is None:
                self.offline_reason = reason
            self._appendable = False

    @property
    def offline(self) -> bool:
        return self.offline_reason is not None

    def _storage_error(self, doing: str, error: OSError) -> KafkaError:
        """Report an I/O error to the failure channel (which takes the dir offline, this log
        included) and return the KAFKA_STORAGE_ERROR the request answers with."""
        message = f"Error while {doing} {self.dir.name} in dir {self.dir.parent}"
        self.mark_offline(f"{message}: {error.strerror or error}")
        if self._io_error_handler is not None:
            self._io_error_handler(self.dir.parent, message, error)
        else:
            logger.error("%s: %s", message, error)
        return KafkaStorageError(f"{message}: {error.strerror or error}")

    # ------------------------------------------------------------------------------------------
    # roll

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        with self._lock:
            self._check_open()
            try:
                return self._roll(expected_next_offset)
            except OSError as e:
                raise self._storage_error("rolling", e) from None

    def _roll(self, expected_next_offset: int | None) -> LogSegment:
        seg = self._local.roll(expected_next_offset)
        # Kafka snapshots the producer state at every roll, named after the new segment's base;
        # the snapshot is fsynced by the next flush (KAFKA-15046), not here under the lock.
        self.producer_state.update_map_end_offset(seg.base_offset)
        self.producer_state.take_snapshot()
        return seg

    # ------------------------------------------------------------------------------------------
    # read

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = True) -> FetchDataInfo:
        """Whole batches from the one containing ``offset``; only batches with base < ``max_offset``.

        Raises :class:`OffsetOutOfRangeError` outside ``[log_start_offset, log_end_offset]``.
        """
        with self._lock:
            leo = self._local.log_end_offset
            start = self._local_log_start()
            if offset < start or offset > leo:
                raise OffsetOutOfRangeError(
                    f"{self.dir.name}: offset {offset} is outside [{start}, {leo}]")
            try:
                return self._local.read(offset, max_bytes, max_offset, min_one_message)
            except OSError as e:
                raise self._storage_error("reading from", e) from None

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """ListOffsets: ``(offset, timestamp, leader_epoch)`` for a timestamp or -1/-2/-3/-4."""
        with self._lock:
            if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                # KIP-1005: -4 is the first offset on local disk, below which a tiered log's data
                # is in remote storage only; -2 is the log start, remote included.
                start = self._log_start if timestamp == EARLIEST_TIMESTAMP else self._local_log_start()
                epoch = self.epoch_cache.epoch_for_offset(start)
                return start, -1, -1 if epoch is None else epoch
            if timestamp == LATEST_TIERED_TIMESTAMP:
                if not self.remote_log_enabled or self._highest_remote_offset < 0:
                    return -1, -1, -1
                epoch = self.epoch_cache.epoch_for_offset(self._highest_remote_offset)
                return self._highest_remote_offset, -1, -1 if epoch is None else epoch
            if timestamp == LATEST_TIMESTAMP:
                latest = self.epoch_cache.latest_epoch
                return self._local.log_end_offset, -1, -1 if latest is None else latest
            segments = self._local.segments
            if timestamp == MAX_TIMESTAMP:
                best: LogSegment | None = None
                for seg in segments:
                    if seg.max_timestamp_so_far >= 0 and (
                            best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far):
                        best = seg
                if best is None:
                    return None
                return best.find_offset_by_timestamp(best.max_timestamp_so_far, self._log_start)
            if timestamp < 0:
                return None
            for seg in segments:
                if seg.largest_timestamp >= timestamp:
                    found = seg.find_offset_by_timestamp(timestamp, self._log_start)
                    if found is not None:
                        return found
            return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        with self._lock:
            return self.epoch_cache.end_offset_for_epoch(epoch, self._local.log_end_offset)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """``(producer_id, first_offset)`` of the aborted transactions overlapping
        ``[start_offset, upper_bound_offset)``, for read_committed fetches."""
        with self._lock:
            return self._local.collect_aborted_transactions(start_offset, upper_bound_offset)

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget producers idle longer than ``producer.id.expiration.ms`` (no open transaction)."""
        with self._lock:
            return self.producer_state.remove_expired_producers(self._clock() if now_ms is None else now_ms)

    # ------------------------------------------------------------------------------------------
    # log start, retention, truncation

    def maybe_increment_log_start_offset(self, new_start: int) -> bool:
        """DeleteRecords: move the log start (<= HW) and delete segments wholly below it."""
        with self._lock:
            self._check_open()
            if new_start > self._hw:
                raise OffsetOutOfRangeError(
                    f"{self.dir.name}: cannot move log start to {new_start}, above the high watermark {self._hw}")
            if new_start <= self._log_start:
                return False
            self._log_start = new_start
            self.epoch_cache.truncate_from_start(new_start)
        self._delete_segments_while(lambda seg, nxt: nxt is not None and nxt.base_offset <= new_start)
        return True

    def _first_deletable(self, predicate: SegmentPredicate) -> LogSegment | None:
        """Kafka's ``deletableSegments``, one at a time: the oldest segment if it is wholly below
        the HW and matches ``predicate`` (an empty active segment never is). Under the lock."""
        segments = self._local.segments
        seg = segments[0]
        nxt = segments[1] if len(segments) > 1 else None
        upper = nxt.base_offset if nxt is not None else self._local.log_end_offset
        if nxt is None and seg.size == 0:
            return None
        if self._hw >= upper and predicate(seg, nxt):
            return seg
        return None

    def _delete_segments_while(self, predicate: SegmentPredicate) -> int:
        """Delete the oldest segment while it is deletable; returns how many were deleted.

        The lock is taken once per segment: appends and reads go on between two deletions, and
        the files are unlinked after the lock is released (Kafka renames to ``.deleted`` under
        the lock and deletes later). ``predicate`` is asked about each segment once, oldest
        first, as Kafka's ``deletableSegments`` does.
        """
        deleted = 0
        tiered = self.remote_log_enabled
        try:
            while True:
                with self._lock:
                    if self.closed or self.offline_reason is not None:
                        return deleted
                    seg = self._first_deletable(predicate)
                    if seg is None:
                        break
                    if seg is self._local.active_segment:
                        self._roll(None)  # Kafka rolls before deleting an expired active segment
                    self._local.remove_segment(seg)
                    if not tiered:  # a tiered log keeps its log start: the data is in remote storage
                        self._log_start = max(self._log_start, self._local.segments[0].base_offset)
                        self.epoch_cache.truncate_from_start(self._log_start)
                self._local.delete_segment_files(seg)
                deleted += 1
            if deleted:
                with self._lock:
                    # Once per pass: it lists the directory (loading ignores snapshots below
                    # the log start meanwhile).
                    self.producer_state.delete_snapshots_before(self._local_log_start())
        except OSError as e:
            raise self._storage_error("deleting segments of", e) from None
        return deleted

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention: by age (largest timestamp), by size, and below the log start; returns count."""
        if self.closed:
            return 0
        now = self._clock() if now_ms is None else now_ms
        cfg = self.config
        deleted = self._delete_segments_while(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self._log_start)
        if not cfg.delete:
            return deleted
        retention_ms, retention_bytes = cfg.retention_ms, cfg.retention_bytes
        tiered = self.remote_log_enabled
        if tiered:
            # KIP-405: local retention (-2: the total one) deletes only segments already copied;
            # the total retention is the remote log manager's (it moves the log start).
            local_ms, local_bytes = int(cfg.get("local.retention.ms")), int(cfg.get("local.retention.bytes"))
            retention_ms = retention_ms if local_ms == -2 else local_ms
            retention_bytes = retention_bytes if local_bytes == -2 else local_bytes

        def copied(seg: LogSegment, nxt: LogSegment | None) -> bool:
            return not tiered or (nxt is not None and nxt.base_offset - 1 <= self._highest_remote_offset)
        if retention_ms >= 0:
            deleted += self._delete_segments_while(
                lambda seg, nxt: copied(seg, nxt) and now - seg.largest_timestamp > retention_ms)
        if retention_bytes >= 0:
            diff = self.size_in_bytes - retention_bytes

            def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
                nonlocal diff
                if copied(seg, nxt) and diff - seg.size >= 0:
                    diff -= seg.size
                    return True
                return False

            deleted += self._delete_segments_while(over_size)
        return deleted

    def truncate_to(self, offset: int) -> bool:
        """Follower truncation: remove everything at and above ``offset``. Returns True if it did."""
        with self._lock:
            self._check_open()
            if offset < 0:
                raise ValueError(f"cannot truncate to a negative offset {offset}")
            local = self._local
            if offset >= local.log_end_offset:
                return False
            if offset < local.segments[0].base_offset:
                self._truncate_fully_and_start_at(offset)
                return True
            try:
                leo = local.truncate_to(offset)
            except OSError as e:
                raise self._storage_error("truncating", e) from None
            self._hw = min(self._hw, leo)
            self._log_start = min(self._log_start, leo)
            # Memory only (Kafka's truncateFromEndAsyncFlush): loading truncates a stale
            # checkpoint the same way, and the next flush writes it.
            self.epoch_cache.truncate_from_end(leo)
            self._rebuild_producer_state(leo)
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        with self._lock:
            self._check_open()
            self._truncate_fully_and_start_at(offset)
            snapshot = self.epoch_cache.snapshot()
        # Kafka's clearAndFlush: an emptied cache is written at once (a stale file could give an
        # old epoch to the new start offset), but outside the lock.
        try:
            self.epoch_cache.write_checkpoint(*snapshot)
        except OSError as e:
            raise self._storage_error("writing the leader epoch checkpoint of", e) from None

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        try:
            self._local.truncate_fully_and_start_at(offset)
        except OSError as e:
            raise self._storage_error("truncating", e) from None
        self._log_start = self._hw = offset
        self.epoch_cache.clear()
        self.producer_state.truncate_fully_and_start_at(offset)

    # ------------------------------------------------------------------------------------------
    # flush

    @property
    def roll_flush_pending(self) -> bool:
        """Segments rolled away from are not flushed yet (the recovery point is below them)."""
        return self._local.rolled_to > self._local.recovery_point

    def flush_rolled_segments(self) -> None:
        """fsync the segments below the last roll and move the recovery point there (Kafka's
        ``flushUptoOffsetExclusive(newSegment.baseOffset)`` after a roll). From a worker thread."""
        with self._lock:
            target = self._local.rolled_to
            if target <= self._local.recovery_point or self.closed or self.offline_reason is not None:
                return
        self.flush(up_to=target)

    def needs_flush(self, now_ms: int | None = None) -> bool:
        """True when flush.messages or flush.ms is exceeded (the broker then calls :meth:`flush`)."""
        if not self.config.flushes:
            return False  # Kafka's defaults: the OS writes back, replication is the durability
        with self._lock:
            local = self._local
            if local.log_end_offset <= local.recovery_point and not local.dir_dirty:
                return False
            now = self._clock() if now_ms is None else now_ms
            return (local.unflushed_messages >= local.config.flush_messages
                    or now - local.last_flush_ms >= local.config.flush_ms)

    def flush(self, up_to: int | None = None) -> None:
        """fsync the segments holding ``[recovery_point, up_to)`` (default LEO); advance the recovery point.

        The producer snapshots and the leader-epoch checkpoint are made durable first, then the
        segments, then the directory, and only then does the recovery point move: everything
        below it survives a crash, everything above it is recovered from the batches. The
        fsyncs run without the lock (appends keep going); call it from a worker thread.
        """
        with self._lock:
            local = self._local
            target = local.log_end_offset if up_to is None else min(up_to, local.log_end_offset)
            if target <= local.recovery_point and not local.dir_dirty:
                return
            to_flush = local.segments_to_flush(target)
            dir_dirty, local.dir_dirty = local.dir_dirty, False
            flushed_messages = local.unflushed_messages
            snapshots = self.producer_state.take_unsynced_snapshots()
            epochs = self.epoch_cache.snapshot() if self.epoch_cache.dirty else None
        try:
            for path in snapshots:
                _fsync_file(path)
            if epochs is not None:
                self.epoch_cache.write_checkpoint(*epochs)
            for seg in to_flush:
                try:
                    seg.flush()
                except (OSError, ValueError):
                    if not seg.closed:  # a segment deleted meanwhile needs no fsync
                        raise
            if dir_dirty:
                fsync_dir(self.dir)
        except OSError as e:
            if self.closed:
                return  # deleted meanwhile
            raise self._storage_error("flushing", e) from None
        with self._lock:
            self._local.mark_flushed(target, flushed_messages)

    # ------------------------------------------------------------------------------------------
    # compaction support (see cleaner.py)

    def replace_segments(self, olds: Sequence[LogSegment], cleaned: LogSegment, *,
                         expected_sizes: Sequence[int] | None = None) -> bool:
        """Swap a cleaned segment (suffix ``.cleaned``, based at ``olds[0]``'s base offset) in for
        the consecutive segments ``olds`` (Kafka's ``replaceSegments`` of a cleaned group),
        crash-safely; False if any of ``olds`` is no longer a live, non-active segment of its
        expected size, or they are not consecutive (nothing done).

        ``.cleaned`` -> ``.swap`` (the commit point: recovery completes the swap from here and
        removes the segments its offsets cover) -> the other old segments are renamed
        ``.deleted`` -> the first one's files are replaced by rename. The caller has already
        trimmed and fsynced ``cleaned`` outside the lock. The check and the renames run under the
        lock (a swap must not commit for a segment that changed meanwhile, even across a crash);
        the ``.deleted`` files are removed and the final directory fsync runs after it is released
        (a crash before leaves ``.swap``/``.deleted`` files, which loading completes/removes).
        """
        with self._lock:
            local = self._local
            if self.closed or not olds or any(old.closed or old is local.active_segment for old in olds):
                return False
            if any(old not in local.segments for old in olds):
                return False
            first = local.segments.index(olds[0])
            if local.segments[first:first + len(olds)] != list(olds):
                return False
            if expected_sizes is not None and [old.size for old in olds] != list(expected_sizes):
                return False
            # Index files first, the log file last: a .log.swap means the whole swap is complete.
            rename_segment_files(cleaned.dir, cleaned.base_offset, CLEANED_SUFFIX, SWAP_SUFFIX,
                                 (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX))
            fsync_dir(self.dir)
            cleaned.close_handlers()
            for merged in olds[1:]:
                local.remove_segment(merged)
            local.swap_in_cleaned(olds[0])
        try:
            for merged in olds[1:]:
                local.delete_segment_files(merged)
        except OSError as e:
            raise self._storage_error("deleting segments of", e) from None
        fsync_dir(self.dir)
        return True

    # ------------------------------------------------------------------------------------------
    # lifecycle

    def close(self) -> None:
        """Close every segment (trimming indexes), writing the producer snapshot and the epoch
        checkpoint. Data stays on disk; no fsync of segments (see :meth:`flush`)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._appendable = False
            if self.offline_reason is not None:
                # Nothing more is written into a failed dir: the restart recovers this log.
                self._local.close_handlers()
                return
            try:
                self.producer_state.take_snapshot(sync=True)
            except OSError:
                logger.exception("Could not write the producer snapshot of %s; it will be rebuilt", self.dir.name)
            try:
                self.epoch_cache.flush()
            except OSError as e:
                # Through the failure channel: the dir gets no clean-shutdown marker, so the
                # next start recovers this log and rebuilds the cache from its batches.
                self._storage_error("writing the leader epoch checkpoint of", e)
            self._local.close()

    def delete(self) -> None:
        """Close and remove the partition directory."""
        with self._lock:
            self.closed = True
            self._appendable = False
            self._local.delete()

    def __repr__(self) -> str:
        return (f"UnifiedLog({self.dir.name}, start={self._log_start}, leo={self._local.log_end_offset}, "
                f"hw={self._hw}, segments={self._local.num_segments})")


# The name the rest of strom has used; Kafka's class is UnifiedLog.
Log = UnifiedLog
