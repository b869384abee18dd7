"""LocalLog: the segment list of one partition on local disk (Kafka's ``LocalLog``).

It owns the segments (sorted by base offset), the log end offset and the recovery point, and
does what touches segment files: append to the active segment, roll, read whole batches,
remove segments (retention, DeleteRecords), truncate, flush bookkeeping and the compaction
swap. It knows nothing of the high watermark, the log start offset's meaning, the leader
epoch cache or producer state: those belong to :class:`~strom.core.log.log.UnifiedLog`, which
calls every method here under its lock.

Thread-safety: **not thread-safe.** Every method and attribute is used under the owning
``UnifiedLog``'s lock, except the work that method docstrings hand back to the caller to do
outside it (:meth:`LocalLog.delete_segment_files`, the fsyncs of :meth:`LocalLog.segments_to_flush`).
"""

from __future__ import annotations

import bisect
import logging
import random
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from strom.core.config import LogConfig
from strom.core.log.index import CorruptIndexError
from strom.core.log.segment import (
    DELETED_SUFFIX,
    SWAP_SUFFIX,
    LogSegment,
    rename_segment_files,
)
from strom.core.records.batch import BatchHeader

logger = logging.getLogger(__name__)


# Kafka's UnknownOffsetMetadata: the segment / position of an offset that is not known.
UNKNOWN_SEGMENT = -1
UNKNOWN_POSITION = -1


def _now_ms() -> int:
    return int(time.time() * 1000)


class FetchDataInfo(NamedTuple):
    """Whole batches read from the log; ``first_batch_offset`` is -1 when nothing was found."""

    records: bytes
    first_batch_offset: int


class LogOffsetMetadata(NamedTuple):
    """Kafka's ``LogOffsetMetadata``: an offset and, when known, where it is on disk.

    ``segment_base_offset`` / ``relative_position`` are -1 when only the offset is known (a
    high watermark or last stable offset below the log end). Delayed fetches compare two of
    these instead of reading the log.
    """

    message_offset: int
    segment_base_offset: int = UNKNOWN_SEGMENT
    relative_position: int = UNKNOWN_POSITION

    @property
    def message_offset_only(self) -> bool:
        return self.segment_base_offset == UNKNOWN_SEGMENT or self.relative_position == UNKNOWN_POSITION

    def on_same_segment(self, other: LogOffsetMetadata) -> bool:
        return (not self.message_offset_only and not other.message_offset_only
                and self.segment_base_offset == other.segment_base_offset)

    def position_diff(self, other: LogOffsetMetadata) -> int:
        """Bytes between ``other`` and this one; both on the same segment (check first)."""
        return self.relative_position - other.relative_position


def new_segment(dir_path: Path, config: LogConfig, base_offset: int, clock: Callable[[], int],
                suffix: str = "") -> LogSegment:
    """Open (or create) the segment at ``base_offset`` with the topic's index settings."""
    jitter = (random.randrange(min(config.segment_jitter_ms, config.segment_ms))
              if config.segment_jitter_ms else 0)
    return LogSegment(dir_path, base_offset, index_interval_bytes=config.index_interval_bytes,
                      max_index_size=config.segment_index_bytes, rolling_jitter_ms=jitter, suffix=suffix,
                      now_ms=clock())


class LocalLog:
    """The segments of one partition, its log end offset and recovery point. Not thread-safe."""

    def __init__(self, dir_path: Path, config: LogConfig, segments: list[LogSegment], *,
                 recovery_point: int, next_offset: int, clock: Callable[[], int] = _now_ms,
                 dir_dirty: bool = False) -> None:
        self.dir = dir_path
        self.config = config
        self._clock = clock
        self.segments = segments
        self.bases = [s.base_offset for s in segments]
        self.log_end_offset = next_offset
        self.recovery_point = recovery_point
        self.unflushed_messages = 0
        self.last_flush_ms = clock()
        # Base offset of the newest segment rolled to: Kafka flushes every segment below it
        # after a roll (asynchronously), which moves the recovery point, so a crash recovers
        # at most the active segment's worth of data, not everything since the last start.
        self.rolled_to = 0
        # A file was created, renamed or removed in the dir since the last flush.
        self.dir_dirty = dir_dirty

    # -- segments -----------------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def num_segments(self) -> int:
        return len(self.segments)

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def floor_index(self, offset: int) -> int:
        """Index of the segment that would hold ``offset`` (0 below the first one)."""
        return max(bisect.bisect_right(self.bases, offset) - 1, 0)

    def new_segment(self, base_offset: int, suffix: str = "") -> LogSegment:
        return new_segment(self.dir, self.config, base_offset, self._clock, suffix)

    def end_offset_metadata(self) -> LogOffsetMetadata:
        """The log end offset with its place on disk: the end of the active segment."""
        active = self.segments[-1]
        return LogOffsetMetadata(self.log_end_offset, active.base_offset, active.size)

    # -- append / roll ------------------------------------------------------------------------

    def should_roll(self, size: int, max_timestamp: int, last_offset: int, now: int) -> bool:
        cfg = self.config
        return self.segments[-1].should_roll(size, max_timestamp, last_offset, now, cfg.segment_bytes, cfg.segment_ms)

    def append(self, buf: bytes | bytearray | memoryview, batches: Sequence[tuple[int, BatchHeader]],
               first: int, last: int) -> None:
        """Write offset-assigned batches to the active segment (the caller rolled if needed)."""
        self.segments[-1].append(buf, batches)
        self.log_end_offset = last + 1
        self.unflushed_messages += last - first + 1

    def roll(self, expected_next_offset: int | None) -> LogSegment:
        """Start a new active segment at max(``expected_next_offset``, LEO); returns it.

        An empty active segment is replaced rather than left behind (as Kafka does).
        """
        new_base = max(expected_next_offset or 0, self.log_end_offset)
        active = self.segments[-1]
        if active.size == 0:
            if active.base_offset == new_base:
                return active
            active.delete()
            self.segments.pop()
            self.bases.pop()
        else:
            active.on_become_inactive()
            self.rolled_to = new_base
        seg = self.new_segment(new_base)
        self.segments.append(seg)
        self.bases.append(new_base)
        self.dir_dirty = True
        logger.debug("Rolled %s to a new segment at offset %d", self.dir.name, new_base)
        return seg

    # -- read ---------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int | None, min_one_message: bool) -> FetchDataInfo:
        """Whole batches from the one holding ``offset`` (bounds checked by the caller). May raise OSError."""
        if offset == self.log_end_offset or (max_offset is not None and offset >= max_offset):
            return FetchDataInfo(b"", -1)
        segments = self.segments
        i = self.floor_index(offset)
        while i < len(segments):
            got = segments[i].read(offset, max_bytes, max_offset, min_one_message)
            if got is not None:
                return FetchDataInfo(got.records, got.first_batch_offset)
            i += 1
        return FetchDataInfo(b"", -1)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """Kafka's scan: the ``.txnindex`` of the segment holding ``start_offset``, then of later
        segments until an entry whose last stable offset reaches the upper bound."""
        out: list[tuple[int, int]] = []
        for seg in self.segments[self.floor_index(start_offset):]:
            txns, complete = seg.txn_index.collect_aborted_txns(start_offset, upper_bound_offset)
            out.extend((t.producer_id, t.first_offset) for t in txns)
            if complete:
                break
        return out

    # -- removal / truncation -----------------------------------------------------------------

    def remove_segment(self, seg: LogSegment) -> None:
        """Take ``seg`` out of the list and rename its files to ``.deleted`` (one rename per file).

        The files are removed by :meth:`delete_segment_files`, which the caller runs after
        releasing its lock (a restart removes leftover ``.deleted`` files, as Kafka's does).
        """
        i = self.segments.index(seg)
        del self.segments[i]
        del self.bases[i]
        seg.close_handlers()
        seg.change_suffix(DELETED_SUFFIX)
        self.dir_dirty = True

    @staticmethod
    def delete_segment_files(seg: LogSegment) -> None:
        """Remove the files of a segment :meth:`remove_segment` took out (no lock needed)."""
        seg.delete()

    def truncate_to(self, offset: int) -> int:
        """Remove everything at and above ``offset`` (which is >= the first base offset and
        < LEO); never keeps half a batch. Returns the new log end offset."""
        while len(self.segments) > 1 and self.segments[-1].base_offset > offset:
            self.segments.pop().delete()
            self.bases.pop()
        active = self.segments[-1]
        found = active.translate_offset(offset)
        target = offset
        if found is not None and found.header.base_offset < offset:
            target = found.header.base_offset
        active.truncate_to(target)
        active.resize_indexes(self.config.segment_index_bytes)
        self.log_end_offset = max(target, active.base_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.rolled_to = min(self.rolled_to, self.log_end_offset)
        return self.log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        for seg in self.segments:
            seg.delete()
        self.segments = [self.new_segment(offset)]
        self.bases = [offset]
        self.log_end_offset = self.recovery_point = self.rolled_to = offset
        self.unflushed_messages = 0
        self.dir_dirty = True

    # -- flush bookkeeping --------------------------------------------------------------------

    def segments_to_flush(self, target: int) -> list[LogSegment]:
        """The segments holding ``[recovery_point, target)``; the caller fsyncs them outside the lock."""
        first = self.floor_index(self.recovery_point)
        last = self.floor_index(max(target - 1, 0))
        return self.segments[first:last + 1]

    def mark_flushed(self, target: int, flushed_messages: int) -> None:
        if target > self.recovery_point:
            self.recovery_point = target
        self.unflushed_messages = max(self.unflushed_messages - flushed_messages, 0)
        self.last_flush_ms = self._clock()

    # -- compaction ---------------------------------------------------------------------------

    def swap_in_cleaned(self, old: LogSegment) -> LogSegment:
        """Replace ``old`` by its ``.swap`` files (renamed in by the caller before); returns the new segment.

        Renames the swap files over the old ones, then opens the result (rebuilding an index
        the sanity check refuses). The directory fsync is left to the caller, outside the lock.
        """
        i = self.segments.index(old)
        old.close_handlers()
        rename_segment_files(self.dir, old.base_offset, SWAP_SUFFIX, "")
        new = self.new_segment(old.base_offset)
        try:
            new.sanity_check()
        except CorruptIndexError:
            new.recover(None)
        new.offset_index.trim_to_valid_size()
        new.time_index.trim_to_valid_size()
        self.segments[i] = new
        return new

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        for seg in self.segments:
            seg.close()

    def close_handlers(self) -> None:
        for seg in self.segments:
            seg.close_handlers()

    def delete(self) -> None:
        """Close every segment and remove the partition directory."""
        self.close_handlers()
        shutil.rmtree(self.dir, ignore_errors=True)
