"""LogSegment: one ``<base>.log`` file of record batches plus its ``.index``/``.timeindex``/``.txnindex``.

The segment appends already-offset-assigned batches with one ``pwrite``, adds a sparse index
entry every ``index.interval.bytes``, serves reads as whole batches (parsing only 61-byte batch
headers, never records) and, in :meth:`LogSegment.recover`, re-validates every batch (header +
CRC-32C), rebuilds the indexes and truncates the file at the first torn or corrupt batch.

Thread-safety: not thread-safe. A segment belongs to one
:class:`~strom.core.log.local_log.LocalLog`, used under its :class:`~strom.core.log.log.UnifiedLog`'s
lock (the loader opens and recovers segments before the log is shared).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import crc32c

from strom.core.log.index import INT32_MAX, CorruptIndexError, OffsetIndex, TimeIndex, TransactionIndex
from strom.core.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    CURRENT_MAGIC,
    HEADER_STRUCT,
    MIN_BATCH_LENGTH,
    BatchHeader,
    Buffer,
)
from strom.core.records.builder import decode_records

if TYPE_CHECKING:
    from strom.core.log.epoch_cache import LeaderEpochFileCache

logger = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
# A segment's files.
SEGMENT_EXTS = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

# Header scans read this much at a time: a bit more than the default index interval, so the
# scan that follows an index lookup usually costs one pread.
_SCAN_CHUNK = 16 * 1024
# Recovery reads the log in chunks this large (whole batches are CRC-checked from memory).
_RECOVER_CHUNK = 1024 * 1024

_unpack_header = HEADER_STRUCT.unpack_from
_make_header = BatchHeader._make


def file_stem(base_offset: int) -> str:
    """Kafka's 20-digit zero-padded base offset."""
    return f"{base_offset:020d}"


def segment_path(dir_path: Path, base_offset: int, ext: str, suffix: str = "") -> Path:
    return dir_path / f"{file_stem(base_offset)}{ext}{suffix}"


def rename_segment_files(dir_path: Path, base_offset: int, from_suffix: str, to_suffix: str,
                         exts: tuple[str, ...] = SEGMENT_EXTS) -> None:
    """Rename the files of a segment that exist from ``from_suffix`` to ``to_suffix`` ("" is the
    live name), in the order of ``exts`` (the compaction swap and its recovery both do this)."""
    for ext in exts:
        src = segment_path(dir_path, base_offset, ext, from_suffix)
        if src.exists():
            os.replace(src, segment_path(dir_path, base_offset, ext, to_suffix))


class LogOffsetPosition(NamedTuple):
    """Where a batch starts in the segment file, and its header."""

    position: int
    header: BatchHeader


class SegmentRead(NamedTuple):
    records: bytes
    first_batch_offset: int


def _write_all(fd: int, data: Buffer, position: int) -> None:
    written = os.pwrite(fd, data, position)
    if written == len(data):  # the usual case: one write, no view
        return
    position += written
    view = memoryview(data)[written:]
    while view:
        written = os.pwrite(fd, view, position)
        position += written
        view = view[written:]


class LogSegment:
    """One segment of a partition log. Not thread-safe: used under the UnifiedLog's lock."""

    def __init__(self, dir_path: Path, base_offset: int, *, index_interval_bytes: int, max_index_size: int,
                 rolling_jitter_ms: int = 0, suffix: str = "", now_ms: int | None = None) -> None:
        self.dir = dir_path
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.rolling_jitter_ms = rolling_jitter_ms
        self.suffix = suffix
        self.log_path = segment_path(dir_path, base_offset, LOG_SUFFIX, suffix)
        index_path = segment_path(dir_path, base_offset, INDEX_SUFFIX, suffix)
        time_index_path = segment_path(dir_path, base_offset, TIME_INDEX_SUFFIX, suffix)
        # Missing index files mean "rebuild me" to the loader (Kafka's LogLoader does the same).
        self.indexes_missing = not index_path.exists() or not time_index_path.exists()
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size
        self.offset_index = OffsetIndex(index_path, base_offset, max_index_size)
        self.time_index = TimeIndex(time_index_path, base_offset, max_index_size)
        self.txn_index = TransactionIndex(segment_path(dir_path, base_offset, TXN_INDEX_SUFFIX, suffix),
                                          base_offset)
        self.created_ms = now_ms if now_ms is not None else int(time.time() * 1000)
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        # The largest timestamp so far and the (batch last) offset that carried it; from the time
        # index on open (its last entry is written on roll/close), refined by appends.
        last = self.time_index.last_entry if not self.time_index._corrupt_size else None
        self.max_timestamp_so_far = last.timestamp if last else -1
        self.offset_of_max_timestamp_so_far = last.offset if last else base_offset
        self.closed = False

    # -- basic properties ---------------------------------------------------------------------

    @property
    def fd(self) -> int:
        return self._fd

    @property
    def largest_timestamp(self) -> int:
        """Largest record timestamp, or the file's mtime when no batch has one (Kafka's rule)."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return int(os.stat(self.log_path).st_mtime * 1000)

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Kafka's rule: with timestamps, the new batch's timestamp minus the first batch's."""
        if self._rolling_based_timestamp is None and self.size > 0:
            first = self.first_header()
            if first is not None:
                self._rolling_based_timestamp = first.max_timestamp
        rbt = self._rolling_based_timestamp
        if rbt is not None and rbt >= 0:
            return message_timestamp - rbt
        return now_ms - self.created_ms

    def should_roll(self, messages_size: int, max_timestamp: int, max_offset: int, now_ms: int,
                    segment_bytes: int, segment_ms: int) -> bool:
        size = self.size
        if size > segment_bytes - messages_size:
            return True
        # An empty segment never rolls on time (time_waited_for_roll changes nothing when empty).
        if size > 0 and self.time_waited_for_roll(now_ms, max_timestamp) > segment_ms - self.rolling_jitter_ms:
            return True
        return (self.offset_index.is_full()
                or self.time_index.is_full()
                or not self.can_convert_to_relative_offset(max_offset))

    # -- append -------------------------------------------------------------------------------

    def append(self, buf: Buffer, batches: Sequence[tuple[int, BatchHeader]]) -> None:
        """Write ``buf`` (whole batches with final offsets) at the end with one write.

        ``batches`` are ``(position in buf, header)``; they drive the sparse indexes only.
        """
        if not batches:
            return
        last_offset = batches[-1][1].last_offset
        if not self.can_convert_to_relative_offset(last_offset):
            raise ValueError(f"{self.log_path}: offset {last_offset} too far from base {self.base_offset}")
        physical = self.size
        try:
            _write_all(self._fd, buf, physical)
            self._index_batches(batches, physical)
        except OSError:
            # ENOSPC / EIO: the append is refused (KAFKA_STORAGE_ERROR), so none of it may stay
            # in the file for a restart to find. Shrinking needs no space; should it fail anyway, a
            # restart recovers the file (it cuts a torn batch; a whole one stays, unacknowledged).
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, physical)
            raise
        if physical == 0:
            self._rolling_based_timestamp = batches[0][1].max_timestamp
        self.size = physical + len(buf)

    def _index_batches(self, batches: Sequence[tuple[int, BatchHeader]], physical: int) -> None:
        interval = self.index_interval_bytes
        for pos, header in batches:
            last_offset = header.last_offset
            if header.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = header.max_timestamp
                self.offset_of_max_timestamp_so_far = last_offset
            if self._bytes_since_last_index_entry > interval:
                self.offset_index.append(last_offset, physical + pos)
                self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += header.batch_length + 12

    # -- header scans -------------------------------------------------------------------------

    def iter_headers(self, start: int = 0, end: int | None = None) -> Iterator[LogOffsetPosition]:
        """Yield every batch header from byte ``start``, reading headers only (chunked preads)."""
        end = self.size if end is None else min(end, self.size)
        pos = start
        while end - pos >= BATCH_OVERHEAD:
            chunk = os.pread(self._fd, min(_SCAN_CHUNK, end - pos), pos)
            off = 0
            n = len(chunk)
            if n < BATCH_OVERHEAD:
                return
            while n - off >= BATCH_OVERHEAD:
                header = _make_header(_unpack_header(chunk, off))
                if header.batch_length < MIN_BATCH_LENGTH:
                    raise CorruptIndexError(
                        f"{self.log_path}: batch at byte {pos + off} has batch_length {header.batch_length}")
                if pos + off + header.batch_length + 12 > end:
                    return
                yield LogOffsetPosition(pos + off, header)
                off += header.batch_length + 12
            pos += off

    def first_header(self) -> BatchHeader | None:
        if self.size < BATCH_OVERHEAD:
            return None
        return _make_header(_unpack_header(os.pread(self._fd, BATCH_OVERHEAD, 0), 0))

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The first batch whose last offset >= ``offset`` (index lookup, then a header scan)."""
        start = max(self.offset_index.lookup(offset).position, starting_position)
        for found in self.iter_headers(start):
            if found.header.base_offset + found.header.last_offset_delta >= offset:
                return found
        return None

    def read_next_offset(self) -> int:
        """The offset after the last batch (the base offset when the segment is empty)."""
        start = self.offset_index.lookup(2**62).position if self.offset_index.entries else 0
        last: BatchHeader | None = None
        for found in self.iter_headers(start):
            last = found.header
        return last.base_offset + last.last_offset_delta + 1 if last is not None else self.base_offset

    # -- read ---------------------------------------------------------------------------------

    def read(self, start_offset: int, max_size: int, max_offset: int | None = None,
             min_one_message: bool = False) -> SegmentRead | None:
        """Whole batches from the one containing ``start_offset``; None if it is past this segment.

        At most ``max_size`` bytes (but the whole first batch with ``min_one_message``); only
        batches whose base offset < ``max_offset``.
        """
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        start, first = found
        if max_offset is not None and first.base_offset >= max_offset:
            return SegmentRead(b"", first.base_offset)
        first_size = first.batch_length + 12
        want = max(max_size, first_size) if min_one_message else max_size
        want = min(want, self.size - start)
        if want < first_size:
            return SegmentRead(b"", first.base_offset)
        data = os.pread(self._fd, want, start)
        # Cut at the last whole batch (and at max_offset): header parsing only.
        cut = 0
        n = len(data)
        while n - cut >= BATCH_OVERHEAD:
            base_offset, batch_length = _unpack_header(data, cut)[:2]
            size = batch_length + 12
            if cut + size > n or (max_offset is not None and base_offset >= max_offset):
                break
            cut += size
        return SegmentRead(data if cut == n else data[:cut], first.base_offset)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> tuple[int, int, int] | None:
        """The first record with timestamp >= ``timestamp`` and offset >= ``starting_offset``.

        Returns ``(offset, timestamp, partition leader epoch)``. Time index, offset index, a
        header scan, then the records of the one batch found are decoded (ListOffsets only).
        """
        ts_entry = self.time_index.lookup(timestamp)
        start = self.offset_index.lookup(max(ts_entry.offset, starting_offset)).position
        for pos, header in self.iter_headers(start):
            if header.max_timestamp >= timestamp and header.last_offset >= starting_offset:
                data = os.pread(self._fd, header.batch_length + 12, pos)
                for rec in decode_records(data):
                    if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                        return rec.offset, rec.timestamp, header.partition_leader_epoch
        return None

    # -- truncation / recovery ----------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset >= ``offset``; return the bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position = found.position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.resize(self.max_index_size)
        self.time_index.resize(self.max_index_size)
        removed = self.size - position
        os.ftruncate(self._fd, position)
        self.size = position
        last = self.time_index.last_entry
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = last.timestamp, last.offset
        self._bytes_since_last_index_entry = 0
        if self.size == 0:
            self._rolling_based_timestamp = None
            self.created_ms = int(time.time() * 1000)
        return removed

    def recover(self, epoch_cache: LeaderEpochFileCache | None = None) -> int:
        """Re-validate every batch, rebuild the indexes, truncate at the first bad batch.

        Checks per batch: a whole header, batch_length, magic 2, the batch fits in the file,
        CRC-32C, offsets increasing and inside this segment. Returns the bytes truncated (0 if
        the file was sound) and logs a WARNING naming file, byte position and reason.
        """
        self.offset_index.reset()
        self.time_index.reset()
        # The .txnindex cannot be rebuilt from this segment alone (an entry needs the producer
        # state); its entries are kept, cut at the valid end below, and the Log's producer-state
        # replay rewrites the entries of the range it replays.
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp_so_far = self.base_offset
        self._bytes_since_last_index_entry = 0
        file_size = os.fstat(self._fd).st_size
        pos = 0
        buf = b""
        buf_start = 0
        next_offset = self.base_offset
        reason: str | None = None
        batches: list[tuple[int, BatchHeader]] = []
        while pos < file_size:
            left = file_size - pos
            if left < BATCH_OVERHEAD:
                reason = f"torn batch header ({left} bytes left, a header needs {BATCH_OVERHEAD})"
                break
            if pos + BATCH_OVERHEAD > buf_start + len(buf):
                buf, buf_start = os.pread(self._fd, min(_RECOVER_CHUNK, left), pos), pos
            header = _make_header(_unpack_header(buf, pos - buf_start))
            size = header.batch_length + 12
            if header.batch_length < MIN_BATCH_LENGTH:
                reason = f"batch_length {header.batch_length} is below the minimum {MIN_BATCH_LENGTH}"
                break
            if header.magic != CURRENT_MAGIC:
                reason = f"unsupported magic {header.magic}"
                break
            if size > left:
                reason = f"torn batch (batch_length {header.batch_length} needs {size} bytes, {left} left)"
                break
            if pos + size > buf_start + len(buf):
                buf, buf_start = os.pread(self._fd, min(max(_RECOVER_CHUNK, size), left), pos), pos
            rel = pos - buf_start
            computed = crc32c.crc32c(memoryview(buf)[rel + ATTRIBUTES_OFFSET:rel + size])
            if computed != header.crc:
                reason = f"CRC mismatch (stored 0x{header.crc:08x}, computed 0x{computed:08x})"
                break
            if header.last_offset_delta < 0 or header.base_offset < next_offset:
                reason = (f"offset {header.base_offset} (last offset delta {header.last_offset_delta}) "
                          f"is below the expected next offset {next_offset}")
                break
            if not self.can_convert_to_relative_offset(header.last_offset):
                reason = f"offset {header.last_offset} does not belong to a segment based at {self.base_offset}"
                break
            batches.append((pos, header))
            if len(batches) >= 1024:
                self._index_batches(batches, 0)
                batches.clear()
            if epoch_cache is not None and header.partition_leader_epoch >= 0:
                latest = epoch_cache.latest_epoch
                if latest is None or header.partition_leader_epoch > latest:
                    epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
            next_offset = header.last_offset + 1
            pos += size
        self._index_batches(batches, 0)
        self.size = pos
        self.txn_index.truncate_to(next_offset)  # also drops a torn trailing partial entry
        truncated = file_size - pos
        if reason is not None:
            logger.warning("Found invalid batch in %s at byte %d: %s; truncating %d bytes to %d",
                           self.log_path, pos, reason, truncated, pos)
            os.ftruncate(self._fd, pos)
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
                                     skip_full_check=True)
        # Kafka's recover() ends with trimToValidSize: a rebuilt index left at its preallocated
        # size would hold empty slots after its entries, and the next start would take that for
        # corruption and rebuild it again (every restart rebuilt every segment ever recovered).
        # The Log regrows the active segment's indexes.
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._rolling_based_timestamp = None
        self.indexes_missing = False
        return truncated

    def sanity_check(self) -> None:
        """Kafka's checks on open (stricter: every entry is checked), raising CorruptIndexError."""
        if self.indexes_missing:
            raise CorruptIndexError(f"{self.log_path}: index files are missing")
        self.offset_index.sanity_check()
        self.time_index.sanity_check()
        self.txn_index.sanity_check()
        if self.offset_index.entries and self.offset_index.entry(self.offset_index.entries - 1).position >= self.size:
            raise CorruptIndexError(f"{self.offset_index.path}: last entry points past the end of the log")

    # -- lifecycle ----------------------------------------------------------------------------

    def on_become_inactive(self) -> None:
        """On roll: write the final time-index entry and trim both indexes to their entries."""
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
                                     skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def trim_indexes_with_slack(self) -> None:
        """Trim indexes still at a preallocated size (a segment that is no longer active)."""
        if self.offset_index.has_slack:
            self.offset_index.trim_to_valid_size()
        if self.time_index.has_slack:
            self.time_index.trim_to_valid_size()

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def flush(self) -> None:
        """fsync the log file and the indexes (the caller runs this off the event loop)."""
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        if self.closed:
            return
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
                                     skip_full_check=True)
        self.offset_index.close()
        self.time_index.close()
        os.close(self._fd)
        self.closed = True

    def close_handlers(self) -> None:
        """Release descriptors without touching the files (they are about to be replaced)."""
        if self.closed:
            return
        self.offset_index.close_handler()
        self.time_index.close_handler()
        os.close(self._fd)
        self.closed = True

    def delete(self) -> None:
        self.close_handlers()
        for ext in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            segment_path(self.dir, self.base_offset, ext, self.suffix).unlink(missing_ok=True)

    def change_suffix(self, new_suffix: str) -> None:
        """Rename all four files from the current suffix to ``new_suffix`` (atomic per file)."""
        for ext in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            src = segment_path(self.dir, self.base_offset, ext, self.suffix)
            if src.exists():
                os.replace(src, segment_path(self.dir, self.base_offset, ext, new_suffix))
        self.suffix = new_suffix
        self.log_path = segment_path(self.dir, self.base_offset, LOG_SUFFIX, new_suffix)
        self.offset_index.path = segment_path(self.dir, self.base_offset, INDEX_SUFFIX, new_suffix)
        self.time_index.path = segment_path(self.dir, self.base_offset, TIME_INDEX_SUFFIX, new_suffix)
        self.txn_index.path = segment_path(self.dir, self.base_offset, TXN_INDEX_SUFFIX, new_suffix)

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path.name}, size={self.size})"
