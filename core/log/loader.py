"""LogLoader: opens a partition directory and brings it to a consistent state (Kafka's ``LogLoader``).

Loading: leftover ``.cleaned``/``.deleted``/``.tmp`` files are removed, a half-done compaction
swap (``.swap``) is completed, every segment's indexes are sanity-checked (missing or corrupt
indexes are rebuilt even after a clean shutdown) and, after an unclean shutdown, every segment
from the recovery point on is re-validated batch by batch (CRC-32C); the first torn or corrupt
batch truncates the log there (a WARNING names file, position and reason) and later segments
are deleted. Recovery re-assigns the leader epochs of the batches it checks, so the epoch
cache is whole again even where its checkpoint was not yet written (see
:class:`~strom.core.log.epoch_cache.LeaderEpochFileCache`).

Producer state: the newest snapshot at or below the recovery point (the log end after a clean
shutdown) is loaded and the batch headers after it are replayed (control batches also have
their one record read), rebuilding the ``.txnindex`` entries of the replayed range on the way.
:func:`rebuild_producer_state` is also what a truncation runs (Kafka's
``UnifiedLog.rebuildProducerState``).

Thread-safety: a loader is used once, by the thread constructing the log, before the log is
shared; :func:`rebuild_producer_state` runs under the owning ``UnifiedLog``'s lock.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from strom.core.config import LogConfig
from strom.core.log.epoch_cache import LeaderEpochFileCache
from strom.core.log.index import AbortedTxn, CorruptIndexError
from strom.core.log.local_log import new_segment
from strom.core.log.producer_state import (
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
    SEGMENT_EXTS,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    rename_segment_files,
    segment_path,
)
from strom.core.records.batch import BatchHeader
from strom.core.records.builder import CONTROL_ABORT, CONTROL_COMMIT, read_control_record

logger = logging.getLogger(__name__)


class LoadedLogOffsets(NamedTuple):
    """What loading found (Kafka's ``LoadedLogOffsets``), with the opened segments."""

    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    next_offset: int
    # Recovery changed files in the dir (truncated or deleted segments): the next flush
    # fsyncs the directory.
    dir_dirty: bool


class LogLoader:
    """Loads one partition directory; :meth:`load` is called once."""

    def __init__(self, dir_path: Path, config: LogConfig, *, recovery_point: int, log_start_offset: int,
                 had_clean_shutdown: bool, epoch_cache: LeaderEpochFileCache,
                 producer_state: ProducerStateManager, clock: Callable[[], int],
                 remote_log_enabled: bool = False, keep_epochs_below_local: bool = False) -> None:
        self.dir = dir_path
        self.remote_log_enabled = remote_log_enabled
        # On a broker with remote storage a log's topic config is not known yet at load: keep
        # the epochs of a remote part (from the checkpointed log start) for its remote reads.
        self.keep_epochs_below_local = keep_epochs_below_local
        self.config = config
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self.had_clean_shutdown = had_clean_shutdown
        self.epoch_cache = epoch_cache
        self.producer_state = producer_state
        self._clock = clock
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._dir_dirty = False

    def _new_segment(self, base_offset: int, suffix: str = "") -> LogSegment:
        return new_segment(self.dir, self.config, base_offset, self._clock, suffix)

    def load(self) -> LoadedLogOffsets:
        clean = self.had_clean_shutdown
        checkpointed_recovery_point = self.recovery_point
        self._remove_temp_files_and_complete_swaps()
        bases = self._segment_bases()
        # After a crash, recovery rebuilds the offset and time indexes of the segments from the
        # recovery point on; the active one's preallocated index is full of zeros, which is
        # expected there, so only their transaction index is checked here (Kafka's rule too).
        recovered_from = len(bases) if clean else max(bisect.bisect_right(bases, self.recovery_point) - 1, 0)
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
            seg = self._new_segment(max(self.log_start_offset, 0))
            self._segments.append(seg)
            self._bases.append(seg.base_offset)
        active = self._segments[-1]
        active.resize_indexes(self.config.segment_index_bytes)
        leo = active.read_next_offset()
        local_start = min(max(self.log_start_offset, self._segments[0].base_offset), leo)
        # A tiered log keeps its checkpointed log start below the local segments (Kafka's
        # LogLoader: the older data is in remote storage).
        checkpointed = min(max(self.log_start_offset, 0), leo)
        log_start = checkpointed if self.remote_log_enabled else local_start
        self.epoch_cache.truncate_from_end(leo)
        self.epoch_cache.truncate_from_start(checkpointed if self.keep_epochs_below_local else log_start)
        # Loading runs off the event loop: the checkpoint is made to match what was loaded now.
        self.epoch_cache.flush()
        # Snapshots above the recovery point may describe data lost in the crash (Kafka's rule).
        rebuild_producer_state(self.producer_state, self._segments, self._bases, local_start, leo,
                               leo if clean else min(checkpointed_recovery_point, leo), self._clock())
        # After a clean shutdown everything was flushed; after recovery everything was checked.
        return LoadedLogOffsets(self._segments, log_start, leo, leo, self._dir_dirty)

    def _remove_temp_files_and_complete_swaps(self) -> None:
        swaps: list[int] = []
        for path in list(self.dir.iterdir()):
            name = path.name
            if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, ".tmp")):
                path.unlink(missing_ok=True)
            elif name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                swaps.append(int(name.split(".", 1)[0]))
        for base in sorted(swaps):
            self._complete_swap(base)
        for path in list(self.dir.iterdir()):
            if path.name.endswith(SWAP_SUFFIX):
                path.unlink(missing_ok=True)  # an index .swap without its .log.swap: incomplete

    def _segment_bases(self) -> list[int]:
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
        return bases

    def _complete_swap(self, base: int) -> None:
        """Finish a compaction swap interrupted by a crash: the .swap segment replaces the old one."""
        swap = self._new_segment(base, SWAP_SUFFIX)
        swap.recover(None)
        next_offset = swap.read_next_offset()
        swap.close()
        for path in self.dir.iterdir():
            stem, _, ext = path.name.partition(".")
            if stem.isdigit() and "." + ext in SEGMENT_EXTS and base <= int(stem) < max(next_offset, base + 1):
                path.unlink()
        rename_segment_files(self.dir, base, SWAP_SUFFIX, "")
        logger.info("Completed an interrupted segment swap of %s", segment_path(self.dir, base, LOG_SUFFIX))

    def _recover_unflushed(self) -> None:
        """Re-validate the segments from the one holding the recovery point; cut at the first bad batch."""
        i = max(bisect.bisect_right(self._bases, self.recovery_point) - 1, 0)
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
        # Keep the recovered data visible to flush accounting.
        self._dir_dirty = True


# -- producer state: rebuild from a snapshot + the log ------------------------------------------


def rebuild_producer_state(ps: ProducerStateManager, segments: list[LogSegment], bases: list[int],
                           log_start: int, leo: int, max_snapshot_offset: int, now_ms: int) -> None:
    """Load the newest usable snapshot (<= ``max_snapshot_offset``) and replay the log after it."""
    ps.truncate_and_reload(log_start, leo, max_snapshot_offset, now_ms)
    start = ps.map_end_offset
    if start < leo:
        logger.info("Rebuilding the producer state of %s from offset %d to %d", ps.dir.name, start, leo)
        _replay_producer_state(ps, segments, bases, start)
    ps.update_map_end_offset(leo)


def _replay_producer_state(ps: ProducerStateManager, segments: list[LogSegment], bases: list[int],
                           start: int) -> None:
    """Apply every producer batch from ``start`` to the LEO, without validation (Kafka's
    origin REPLICATION); the ``.txnindex`` entries of markers at or after ``start`` are
    rewritten from what the replay finds, so an index torn by a crash is repaired."""
    i = max(bisect.bisect_right(bases, start) - 1, 0)
    for seg in segments[i:]:
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
                completed = apply_control_batch(info, batch, 0, h, h.base_offset)
            else:
                info.append_data_batch(h.producer_epoch, h.base_sequence, h.last_sequence, h.max_timestamp,
                                       h.base_offset, h.last_offset, h.is_transactional)
            ps.update(info)
            if completed is not None:
                complete_txn(ps, seg, completed)


def apply_control_batch(info: ProducerAppendInfo, buf: bytes | bytearray | memoryview, pos: int,
                        h: BatchHeader, offset: int, transaction_version: int = 0) -> CompletedTxn | None:
    """Read a control batch's one record: a COMMIT/ABORT marker ends the producer's transaction."""
    marker = read_control_record(buf, pos, h)
    if marker is None:
        return None  # a marker emptied by the cleaner: its transaction is gone already
    if marker.type not in (CONTROL_ABORT, CONTROL_COMMIT):
        return None
    return info.append_end_txn_marker(marker.commit, h.producer_epoch, marker.coordinator_epoch, offset,
                                      h.max_timestamp, transaction_version)


def complete_txn(ps: ProducerStateManager, seg: LogSegment, txn: CompletedTxn) -> None:
    """Kafka: an aborted transaction goes into the .txnindex of the segment holding its marker."""
    if txn.is_aborted:
        seg.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                        ps.last_stable_offset_after(txn)))
    ps.complete_txn(txn)
