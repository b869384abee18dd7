"""Log: the segments of one partition, its offsets (log start, LEO, HW, recovery point) and loading.

Append path (leader): already-validated batches get their offsets patched in place by
``records.validate.assign_offsets`` and are appended with one ``pwrite`` to the active segment,
which rolls on ``segment.bytes`` / ``segment.ms`` (minus jitter) / a full index. Read path:
bisect over the sorted segment base offsets, offset-index lookup, a forward scan of batch
headers, one ``pread`` of whole batches. Neither path does per-record Python work.

Loading: leftover ``.cleaned``/``.deleted``/``.tmp`` files are removed, a half-done compaction
swap (``.swap``) is completed, every segment's indexes are sanity-checked (missing or corrupt
indexes are rebuilt even after a clean shutdown) and, after an unclean shutdown, every segment
from the recovery point on is re-validated batch by batch (CRC-32C); the first torn or corrupt
batch truncates the log there (a WARNING names file, position and reason) and later segments
are deleted.

Producer state (idempotence, transactions; see :mod:`strom.core.log.producer_state`): every
batch with a producer id is checked before offsets are assigned (a duplicate of one of the
producer's last 5 batches is not written again; the append answers with the original offsets),
the state is updated after the write, an ABORT marker adds an entry to the ``.txnindex`` of
the segment holding it, and the ongoing transactions bound the last stable offset. Snapshots
of the state are written at every roll and on close; loading takes the newest snapshot at or
below the recovery point (the log end after a clean shutdown) and replays batch headers after
it (control batches also have their one record read), rebuilding the ``.txnindex`` entries of
the replayed range on the way.

Storage errors: an ``OSError`` while appending, rolling, flushing or reading is reported to the
LogManager's failure channel (``io_error_handler``), which takes the whole log dir offline; the
request answers KAFKA_STORAGE_ERROR. An offline log refuses appends and keeps serving reads; it
is closed without writing anything more into its dir.

Thread-safety: **this is the one locking layer of the storage engine.** A ``Log`` is safe to
use from several threads: one ``threading.RLock`` guards its segment list and offsets. Its
``LogSegment`` and index objects are not thread-safe and are only touched under that lock,
except ``fsync`` in :meth:`Log.flush`, which runs outside it so a slow disk never stalls the
event loop's appends (Kafka does the same).
"""

from __future__ import annotations

import bisect
import logging
import os
import random
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import crc32c
from kio.schema.errors import ErrorCode

from strom.core.config import LogConfig
from strom.core.exceptions import (
    BrokerError,
    CorruptMessageError,
    KafkaError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    for_code,
)
from strom.core.log.checkpoint import fsync_dir, read_partition_metadata, write_partition_metadata
from strom.core.log.epoch_cache import LeaderEpochFileCache
from strom.core.log.index import AbortedTxn, CorruptIndexError
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
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    segment_path,
)
from strom.core.records.batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    iter_headers,
    read_header,
)
from strom.core.records.builder import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    build_control_batch,
    read_control_record,
)
from strom.core.records.validate import assign_offsets

logger = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4

_SEGMENT_EXTS = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


InconsistentTopicIdError = for_code(ErrorCode.inconsistent_topic_id)


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


class FetchDataInfo(NamedTuple):
    """Whole batches read from the log; ``first_batch_offset`` is -1 when nothing was found."""

    records: bytes
    first_batch_offset: int


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


class Log:
    """One partition's log. Thread-safe: every public method takes the log's lock."""

    def __init__(self, dir_path: str | os.PathLike[str], config: LogConfig, *,
                 topic_id: uuid.UUID | None = None, recovery_point: int = 0, log_start_offset: int = 0,
                 high_watermark: int = 0, had_clean_shutdown: bool = True,
                 clock: Callable[[], int] = _now_ms,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 io_error_handler: IoErrorHandler | None = None) -> None:
        self.dir = Path(dir_path)
        self.topic, self.partition = parse_topic_partition(self.dir.name)
        self.config = config
        self._clock = clock
        self._lock = threading.RLock()
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._leo = 0
        self._log_start = log_start_offset
        self._hw = high_watermark
        self._recovery_point = recovery_point
        self._unflushed_messages = 0
        self._last_flush_ms = clock()
        # Base offset of the newest segment rolled to: Kafka flushes every segment below it
        # after a roll (asynchronously), which moves the recovery point, so a crash recovers
        # at most the active segment's worth of data, not everything since the last start.
        self._rolled_to = 0
        self._dir_dirty = False
        self.closed = False
        # Why appends are refused once the log dir went offline (an I/O error), else None.
        self.offline_reason: str | None = None
        # False once closed or offline: the append path checks one attribute.
        self._appendable = True
        self._io_error_handler = io_error_handler
        self.dir.mkdir(parents=True, exist_ok=True)
        self.topic_id = self._init_topic_id(topic_id)
        self.epoch_cache = LeaderEpochFileCache.in_dir(self.dir)
        self.producer_state = ProducerStateManager(self.dir, producer_id_expiration_ms=producer_id_expiration_ms)
        self._load(had_clean_shutdown)

    # ------------------------------------------------------------------------------------------
    # loading

    def _init_topic_id(self, topic_id: uuid.UUID | None) -> uuid.UUID | None:
        stored = read_partition_metadata(self.dir)
        if stored is not None and topic_id is not None and stored != topic_id:
            raise InconsistentTopicIdError(
                f"{self.dir}: partition.metadata holds topic id {stored}, expected {topic_id}")
        if stored is None and topic_id is not None:
            write_partition_metadata(self.dir, topic_id)
        return stored or topic_id

    def _new_segment(self, base_offset: int, suffix: str = "") -> LogSegment:
        cfg = self.config
        jitter = random.randrange(min(cfg.segment_jitter_ms, cfg.segment_ms)) if cfg.segment_jitter_ms else 0
        return LogSegment(self.dir, base_offset, index_interval_bytes=cfg.index_interval_bytes,
                          max_index_size=cfg.segment_index_bytes, rolling_jitter_ms=jitter, suffix=suffix,
                          now_ms=self._clock())

    def _load(self, clean: bool) -> None:
        checkpointed_recovery_point = self._recovery_point
        swaps: list[int] = []
        for path in list(self.dir.iterdir()):
            name = path.name
            if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, ".tmp")):
                path.unlink(missing_ok=True)
            elif name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                swaps.append(int(name.split(".", 1)[0]))
            elif name.endswith(SWAP_SUFFIX):
                pass  # index swap files: handled with their log swap file (or removed below)
        for base in sorted(swaps):
            self._complete_swap(base)
        for path in list(self.dir.iterdir()):
            if path.name.endswith(SWAP_SUFFIX):
                path.unlink(missing_ok=True)  # an index .swap without its .log.swap: incomplete
        bases = []
        for path in self.dir.iterdir():
            stem, _, ext = path.name.partition(".")
            if not stem.isdigit() or len(stem) != 20:
                continue
            if ext == LOG_SUFFIX[1:]:
                bases.append(int(stem))
            elif "." + ext in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX) and not (
                    segment_path(self.dir, int(stem), LOG_SUFFIX).exists()):
                logger.info("Deleting orphaned index file %s (no log file)", path)
                path.unlink(missing_ok=True)
        bases.sort()
        # After a crash, recovery rebuilds the offset and time indexes of the segments from the
        # recovery point on; the active one's preallocated index is full of zeros, which is
        # expected there, so only their transaction index is checked here (Kafka's rule too).
        recovered_from = len(bases) if clean else max(bisect.bisect_right(bases, self._recovery_point) - 1, 0)
        for i, base in enumerate(bases):
            seg = self._new_segment(base)
            try:
                if i < recovered_from or seg.indexes_missing:
                    seg.sanity_check()
                else:
                    seg.txn_index.sanity_check()
            except CorruptIndexError as e:
                logger.warning("Found a corrupt or missing index of %s (%s); rebuilding it", seg.log_path, e)
                seg.recover(None)
            if i < len(bases) - 1:
                # Left preallocated by a crash of an older version (or a roll cut short): trim
                # it now, so it is not probed again at every start.
                seg.trim_indexes_with_slack()
            self._segments.append(seg)
            self._bases.append(base)
        if not clean and self._segments:
            self._recover_unflushed()
        if not self._segments:
            seg = self._new_segment(max(self._log_start, 0))
            self._segments.append(seg)
            self._bases.append(seg.base_offset)
        active = self._segments[-1]
        active.resize_indexes(self.config.segment_index_bytes)
        self._leo = active.read_next_offset()
        self._log_start = min(max(self._log_start, self._segments[0].base_offset), self._leo)
        # After a clean shutdown everything was flushed; after recovery everything was checked.
        self._recovery_point = self._leo
        self._hw = min(max(self._hw, self._log_start), self._leo)
        self.epoch_cache.truncate_from_end(self._leo)
        self.epoch_cache.truncate_from_start(self._log_start)
        # Snapshots above the recovery point may describe data lost in the crash (Kafka's rule).
        self._rebuild_producer_state(self._leo if clean else min(checkpointed_recovery_point, self._leo))

    def _complete_swap(self, base: int) -> None:
        """Finish a compaction swap interrupted by a crash: the .swap segment replaces the old one."""
        swap = self._new_segment(base, SWAP_SUFFIX)
        swap.recover(None)
        next_offset = swap.read_next_offset()
        swap.close()
        for path in self.dir.iterdir():
            stem, _, ext = path.name.partition(".")
            if stem.isdigit() and "." + ext in _SEGMENT_EXTS and base <= int(stem) < max(next_offset, base + 1):
                path.unlink()
        for ext in _SEGMENT_EXTS:
            src = segment_path(self.dir, base, ext, SWAP_SUFFIX)
            if src.exists():
                os.replace(src, segment_path(self.dir, base, ext))
        logger.info("Completed an interrupted segment swap of %s", segment_path(self.dir, base, LOG_SUFFIX))

    def _recover_unflushed(self) -> None:
        """Re-validate the segments from the one holding the recovery point; cut at the first bad batch."""
        start = max(bisect.bisect_right(self._bases, self._recovery_point) - 1, 0)
        i = start
        while i < len(self._segments):
            seg = self._segments[i]
            truncated = seg.recover(self.epoch_cache)
            if truncated > 0 and i + 1 < len(self._segments):
                later = self._segments[i + 1:]
                logger.warning("Deleting %d segment(s) of %s after the corrupt batch in %s: %s",
                               len(later), self.dir.name, seg.log_path.name, [s.log_path.name for s in later])
                for s in later:
                    s.delete()
                del self._segments[i + 1:]
                del self._bases[i + 1:]
            i += 1
        # Drop empty trailing segments below their predecessor's data (cannot happen) and keep
        # the recovered data visible to flush accounting.
        self._dir_dirty = True

    # ------------------------------------------------------------------------------------------
    # producer state: rebuild from a snapshot + the log

    def _rebuild_producer_state(self, max_snapshot_offset: int) -> None:
        """Load the newest usable snapshot (<= ``max_snapshot_offset``) and replay the log after it."""
        ps = self.producer_state
        ps.truncate_and_reload(self._log_start, self._leo, max_snapshot_offset, self._clock())
        start = ps.map_end_offset
        if start < self._leo:
            logger.info("Rebuilding the producer state of %s from offset %d to %d", self.dir.name, start, self._leo)
            self._replay_producer_state(start)
        ps.update_map_end_offset(self._leo)

    def _replay_producer_state(self, start: int) -> None:
        """Apply every producer batch from ``start`` to the LEO, without validation (Kafka's
        origin REPLICATION); the ``.txnindex`` entries of markers at or after ``start`` are
        rewritten from what the replay finds, so an index torn by a crash is repaired."""
        ps = self.producer_state
        i = max(bisect.bisect_right(self._bases, start) - 1, 0)
        for seg in self._segments[i:]:
            txns = seg.txn_index.all_aborted()
            if txns and txns[-1].last_offset >= start:
                seg.txn_index.truncate_to(start)
            for pos, h in seg.iter_headers():
                if h.last_offset < start or h.producer_id < 0:
                    continue
                info = ps.prepare_update(h.producer_id, ORIGIN_REPLICATION)
                completed = None
                if h.is_control:
                    batch = os.pread(seg.fd, h.batch_length + 12, pos)
                    completed = self._apply_control_batch(info, batch, 0, h, h.base_offset)
                else:
                    info.append_data_batch(h.producer_epoch, h.base_sequence, h.last_sequence, h.max_timestamp,
                                           h.base_offset, h.last_offset, h.is_transactional)
                ps.update(info)
                if completed is not None:
                    self._complete_txn(seg, completed)

    @staticmethod
    def _apply_control_batch(info: ProducerAppendInfo, buf: bytes | bytearray | memoryview, pos: int,
                             h: BatchHeader, offset: int, transaction_version: int = 0) -> CompletedTxn | None:
        """Read a control batch's one record: a COMMIT/ABORT marker ends the producer's transaction."""
        marker = read_control_record(buf, pos, h)
        if marker is None:
            return None  # a marker emptied by the cleaner: its transaction is gone already
        if marker.type not in (CONTROL_ABORT, CONTROL_COMMIT):
            return None
        return info.append_end_txn_marker(marker.commit, h.producer_epoch, marker.coordinator_epoch, offset,
                                          h.max_timestamp, transaction_version)

    def _complete_txn(self, seg: LogSegment, txn: CompletedTxn) -> None:
        """Kafka: an aborted transaction goes into the .txnindex of the segment holding its marker."""
        ps = self.producer_state
        if txn.is_aborted:
            seg.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                            ps.last_stable_offset_after(txn)))
        ps.complete_txn(txn)

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
                txn = self._apply_control_batch(info, buf, pos, h, base, transaction_version)
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
        seg = self._segments[-1]  # the segment the batches (and so the markers) went to
        for txn in completed:
            self._complete_txn(seg, txn)
        ps.update_map_end_offset(self._leo)

    # ------------------------------------------------------------------------------------------
    # properties

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

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
            first = self.producer_state.first_unstable_offset
            if first is not None and first < self._hw:
                return max(first, self._log_start)
            return self._hw

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self._segments)

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def log_segments(self) -> list[LogSegment]:
        """A snapshot of the segment list (oldest first)."""
        with self._lock:
            return list(self._segments)

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            active = self._segments[-1]
            active.index_interval_bytes = config.index_interval_bytes

    def update_high_watermark(self, hw: int) -> int:
        """Set the high watermark, clamped to [log start, LEO]; returns the value set."""
        with self._lock:
            self._hw = min(max(hw, self._log_start), self._leo)
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
            config = self.config
            if len(buf) > config.segment_bytes:
                raise RecordListTooLargeError(
                    f"{len(buf)} bytes of batches exceed segment.bytes {config.segment_bytes}")
            first = self._leo
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
                if leader_epoch >= 0 and self.epoch_cache.latest_epoch != leader_epoch:
                    self.epoch_cache.assign(leader_epoch, first)
            except OSError as e:
                raise self._storage_error("appending records to", e) from None
            if updates or completed:
                self._commit_producer_state(updates, completed)
            else:
                self.producer_state.update_map_end_offset(self._leo)
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
            if first < self._leo:
                raise UnexpectedAppendOffsetError(
                    f"{self.dir.name}: follower append starts at {first}, below the log end offset {self._leo}")
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
        seg = self._segments[-1]
        cfg = self.config
        if seg.should_roll(len(buf), max_timestamp, last, now, cfg.segment_bytes, cfg.segment_ms):
            seg = self._roll(first)
        seg.append(buf, batches)
        self._leo = last + 1
        self._unflushed_messages += last - first + 1

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
            return self._roll(expected_next_offset)

    def _roll(self, expected_next_offset: int | None) -> LogSegment:
        new_base = max(expected_next_offset or 0, self._leo)
        active = self._segments[-1]
        if active.size == 0:
            if active.base_offset == new_base:
                return active
            # An empty active segment is replaced rather than left behind (as Kafka does).
            active.delete()
            self._segments.pop()
            self._bases.pop()
        else:
            active.on_become_inactive()
            self._rolled_to = new_base
        seg = self._new_segment(new_base)
        self._segments.append(seg)
        self._bases.append(new_base)
        self._dir_dirty = True
        # Kafka snapshots the producer state at every roll, named after the new segment's base.
        self.producer_state.update_map_end_offset(new_base)
        self.producer_state.take_snapshot()
        logger.debug("Rolled %s to a new segment at offset %d", self.dir.name, new_base)
        return seg

    # ------------------------------------------------------------------------------------------
    # read

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = True) -> FetchDataInfo:
        """Whole batches from the one containing ``offset``; only batches with base < ``max_offset``.

        Raises :class:`OffsetOutOfRangeError` outside ``[log_start_offset, log_end_offset]``.
        """
        with self._lock:
            if offset < self._log_start or offset > self._leo:
                raise OffsetOutOfRangeError(
                    f"{self.dir.name}: offset {offset} is outside [{self._log_start}, {self._leo}]")
            if offset == self._leo or (max_offset is not None and offset >= max_offset):
                return FetchDataInfo(b"", -1)
            i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
            segments = self._segments
            try:
                while i < len(segments):
                    got = segments[i].read(offset, max_bytes, max_offset, min_one_message)
                    if got is not None:
                        return FetchDataInfo(got.records, got.first_batch_offset)
                    i += 1
            except OSError as e:
                raise self._storage_error("reading from", e) from None
            return FetchDataInfo(b"", -1)

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """ListOffsets: ``(offset, timestamp, leader_epoch)`` for a timestamp or -1/-2/-3/-4."""
        with self._lock:
            if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                epoch = self.epoch_cache.epoch_for_offset(self._log_start)
                return self._log_start, -1, -1 if epoch is None else epoch
            if timestamp == LATEST_TIMESTAMP:
                epoch = self.epoch_cache.latest_epoch
                return self._leo, -1, -1 if epoch is None else epoch
            if timestamp == MAX_TIMESTAMP:
                best: LogSegment | None = None
                for seg in self._segments:
                    if seg.max_timestamp_so_far >= 0 and (
                            best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far):
                        best = seg
                if best is None:
                    return None
                return best.find_offset_by_timestamp(best.max_timestamp_so_far, self._log_start)
            if timestamp < 0:
                return None
            for seg in self._segments:
                if seg.largest_timestamp >= timestamp:
                    found = seg.find_offset_by_timestamp(timestamp, self._log_start)
                    if found is not None:
                        return found
            return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        with self._lock:
            return self.epoch_cache.end_offset_for_epoch(epoch, self._leo)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """``(producer_id, first_offset)`` of the aborted transactions overlapping
        ``[start_offset, upper_bound_offset)``, for read_committed fetches.

        Kafka's scan: the ``.txnindex`` of the segment holding ``start_offset``, then of later
        segments until an entry whose last stable offset reaches the upper bound.
        """
        with self._lock:
            out: list[tuple[int, int]] = []
            i = max(bisect.bisect_right(self._bases, start_offset) - 1, 0)
            for seg in self._segments[i:]:
                txns, complete = seg.txn_index.collect_aborted_txns(start_offset, upper_bound_offset)
                out.extend((t.producer_id, t.first_offset) for t in txns)
                if complete:
                    break
            return out

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
            self._delete_segments(self._deletable(lambda seg, nxt: nxt is not None and nxt.base_offset <= new_start))
            return True

    def _deletable(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> list[LogSegment]:
        """Kafka's ``deletableSegments``: a prefix of segments matching ``predicate``, below the HW."""
        out = []
        segments = self._segments
        for i, seg in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self._leo
            if nxt is None and seg.size == 0:
                break
            if self._hw >= upper and predicate(seg, nxt):
                out.append(seg)
            else:
                break
        return out

    def _delete_segments(self, segs: list[LogSegment]) -> int:
        if not segs:
            return 0
        if segs[-1] is self._segments[-1]:
            self._roll(None)  # Kafka rolls before deleting an expired active segment
        for seg in segs:
            i = self._segments.index(seg)
            del self._segments[i]
            del self._bases[i]
            seg.close_handlers()
            seg.change_suffix(DELETED_SUFFIX)
            seg.delete()
        self._log_start = max(self._log_start, self._segments[0].base_offset)
        self.epoch_cache.truncate_from_start(self._log_start)
        self.producer_state.delete_snapshots_before(self._log_start)
        self._dir_dirty = True
        return len(segs)

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention: by age (largest timestamp), by size, and below the log start; returns count."""
        with self._lock:
            if self.closed:
                return 0
            now = self._clock() if now_ms is None else now_ms
            cfg = self.config
            deleted = self._delete_segments(
                self._deletable(lambda seg, nxt: nxt is not None and nxt.base_offset <= self._log_start))
            if not cfg.delete:
                return deleted
            if cfg.retention_ms >= 0:
                deleted += self._delete_segments(
                    self._deletable(lambda seg, nxt: now - seg.largest_timestamp > cfg.retention_ms))
            if cfg.retention_bytes >= 0:
                diff = sum(s.size for s in self._segments) - cfg.retention_bytes

                def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
                    nonlocal diff
                    if diff - seg.size >= 0:
                        diff -= seg.size
                        return True
                    return False

                deleted += self._delete_segments(self._deletable(over_size))
            return deleted

    def truncate_to(self, offset: int) -> bool:
        """Follower truncation: remove everything at and above ``offset``. Returns True if it did."""
        with self._lock:
            self._check_open()
            if offset < 0:
                raise ValueError(f"cannot truncate to a negative offset {offset}")
            if offset >= self._leo:
                return False
            if offset < self._segments[0].base_offset:
                self._truncate_fully_and_start_at(offset)
                return True
            while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
                self._segments.pop().delete()
                self._bases.pop()
            active = self._segments[-1]
            found = active.translate_offset(offset)
            target = offset
            if found is not None and found.header.base_offset < offset:
                target = found.header.base_offset  # never keep half a batch
            active.truncate_to(target)
            active.resize_indexes(self.config.segment_index_bytes)
            self._leo = max(target, active.base_offset)
            self._hw = min(self._hw, self._leo)
            self._recovery_point = min(self._recovery_point, self._leo)
            self._rolled_to = min(self._rolled_to, self._leo)
            self._log_start = min(self._log_start, self._leo)
            self.epoch_cache.truncate_from_end(self._leo)
            self._rebuild_producer_state(self._leo)
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        with self._lock:
            self._check_open()
            self._truncate_fully_and_start_at(offset)

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        for seg in self._segments:
            seg.delete()
        seg = self._new_segment(offset)
        self._segments = [seg]
        self._bases = [offset]
        self._leo = self._log_start = self._hw = self._recovery_point = self._rolled_to = offset
        self._unflushed_messages = 0
        self.epoch_cache.clear()
        self.producer_state.truncate_fully_and_start_at(offset)
        self._dir_dirty = True

    # ------------------------------------------------------------------------------------------
    # flush

    @property
    def roll_flush_pending(self) -> bool:
        """Segments rolled away from are not flushed yet (the recovery point is below them)."""
        return self._rolled_to > self._recovery_point

    def flush_rolled_segments(self) -> None:
        """fsync the segments below the last roll and move the recovery point there (Kafka's
        ``flushUptoOffsetExclusive(newSegment.baseOffset)`` after a roll). From a worker thread."""
        with self._lock:
            target = self._rolled_to
            if target <= self._recovery_point or self.closed or self.offline_reason is not None:
                return
        self.flush(up_to=target)

    def needs_flush(self, now_ms: int | None = None) -> bool:
        """True when flush.messages or flush.ms is exceeded (the broker then calls :meth:`flush`)."""
        if not self.config.flushes:
            return False  # Kafka's defaults: the OS writes back, replication is the durability
        with self._lock:
            if self._leo <= self._recovery_point and not self._dir_dirty:
                return False
            now = self._clock() if now_ms is None else now_ms
            return (self._unflushed_messages >= self.config.flush_messages
                    or now - self._last_flush_ms >= self.config.flush_ms)

    def flush(self, up_to: int | None = None) -> None:
        """fsync the segments holding ``[recovery_point, up_to)`` (default LEO); advance the recovery point.

        The fsyncs run without the lock (appends keep going); call it from a worker thread.
        """
        with self._lock:
            target = self._leo if up_to is None else min(up_to, self._leo)
            if target <= self._recovery_point and not self._dir_dirty:
                return
            first = max(bisect.bisect_right(self._bases, self._recovery_point) - 1, 0)
            last = max(bisect.bisect_right(self._bases, max(target - 1, 0)) - 1, 0)
            to_flush = self._segments[first:last + 1]
            dir_dirty, self._dir_dirty = self._dir_dirty, False
            flushed_messages = self._unflushed_messages
            snapshots = self.producer_state.take_unsynced_snapshots()
        try:
            for path in snapshots:
                _fsync_file(path)
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
            if target > self._recovery_point:
                self._recovery_point = target
            self._unflushed_messages = max(self._unflushed_messages - flushed_messages, 0)
            self._last_flush_ms = self._clock()

    # ------------------------------------------------------------------------------------------
    # compaction support (see cleaner.py)

    def replace_segment(self, old: LogSegment, cleaned: LogSegment) -> None:
        """Swap a cleaned segment (suffix ``.cleaned``) in for ``old``, crash-safely.

        ``.cleaned`` -> ``.swap`` (the commit point: recovery completes the swap from here) ->
        the old files are replaced by rename. The caller has already trimmed and fsynced
        ``cleaned`` (outside the lock) and holds the lock, having checked ``old`` is still live.
        """
        # Index files first, the log file last: a .log.swap means the whole swap is complete.
        for ext in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX):
            src = segment_path(cleaned.dir, cleaned.base_offset, ext, CLEANED_SUFFIX)
            if src.exists():
                os.replace(src, segment_path(cleaned.dir, cleaned.base_offset, ext, SWAP_SUFFIX))
        fsync_dir(self.dir)
        cleaned.close_handlers()
        with self._lock:
            i = self._segments.index(old)
            old.close_handlers()
            for ext in _SEGMENT_EXTS:
                src = segment_path(self.dir, old.base_offset, ext, SWAP_SUFFIX)
                if src.exists():
                    os.replace(src, segment_path(self.dir, old.base_offset, ext))
            fsync_dir(self.dir)
            new = self._new_segment(old.base_offset)
            try:
                new.sanity_check()
            except CorruptIndexError:
                new.recover(None)
            new.offset_index.trim_to_valid_size()
            new.time_index.trim_to_valid_size()
            self._segments[i] = new

    # ------------------------------------------------------------------------------------------
    # lifecycle

    def close(self) -> None:
        """Close every segment (trimming indexes). Data stays on disk; no fsync (see :meth:`flush`)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._appendable = False
            if self.offline_reason is not None:
                # Nothing more is written into a failed dir: the restart recovers this log.
                for seg in self._segments:
                    seg.close_handlers()
                return
            try:
                self.producer_state.take_snapshot(sync=True)
            except OSError:
                logger.exception("Could not write the producer snapshot of %s; it will be rebuilt", self.dir.name)
            for seg in self._segments:
                seg.close()

    def delete(self) -> None:
        """Close and remove the partition directory."""
        with self._lock:
            for seg in self._segments:
                seg.close_handlers()
            self.closed = True
            self._appendable = False
            shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return (f"Log({self.dir.name}, start={self._log_start}, leo={self._leo}, hw={self._hw}, "
                f"segments={len(self._segments)})")
