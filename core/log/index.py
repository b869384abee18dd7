"""A segment's sidecar indexes: OffsetIndex (.index), TimeIndex (.timeindex), TransactionIndex (.txnindex).

Formats are Kafka's, big endian:

* ``.index``: 8-byte entries ``(relative_offset int32, position int32)``: the last offset of a
  batch (relative to the segment's base offset) -> byte position of that batch in the ``.log``.
* ``.timeindex``: 12-byte entries ``(timestamp int64, relative_offset int32)``: the largest
  timestamp seen so far -> the offset of the batch that carried it.
* ``.txnindex``: 34-byte entries ``(version int16, producer_id int64, first_offset int64,
  last_offset int64, last_stable_offset int64)``: one per aborted transaction.

Both sparse indexes are **memory-mapped**, as in Kafka: the file is preallocated to
``segment.index.bytes`` (a sparse file, so no disk is used for the empty tail), appends are
plain memory stores and a lookup is a binary search with ``struct.unpack_from`` over the map,
without one syscall per probe. **No store goes to a page that is not allocated**: a store into
a hole of a sparse file on a full disk cannot be refused, the kernel kills the process with
SIGBUS. So before an append reaches a new page, that page is reserved with
``os.posix_fallocate`` (one call per 4 KiB of entries), where a full disk is an ordinary
ENOSPC that the log turns into KAFKA_STORAGE_ERROR; reads only touch slots already written.
On roll / close / recovery the file is trimmed to its entries (Kafka's ``trimToValidSize``) so a reopened index
knows its length from the file size; an index left preallocated by a crash is recognised on
open: its entries are the slots before the first empty one (found with a binary search of
``pread`` probes, which read holes without allocating). The transaction index is append-rare
and read-rare, so it uses plain file I/O.

Thread-safety: none of these classes is thread-safe. Only their segment touches them, through
:class:`~strom.core.log.local_log.LocalLog` under the :class:`~strom.core.log.log.UnifiedLog`'s
lock (or the :class:`~strom.core.log.loader.LogLoader` before the log is shared).
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path
from typing import ClassVar, NamedTuple

from strom.core.exceptions import BrokerError

INT32_MAX = 2**31 - 1
# RecordBatch.NO_TIMESTAMP: a batch without timestamps; also the empty time index's sentinel.
NO_TIMESTAMP = -1
_PAGE = 4096


def _create_if_missing(path: Path) -> None:
    """Create an empty file, leaving an existing one untouched (``Path.touch`` would bump its
    mtime at every start, and an unchanged mtime is how an operator sees nothing was rewritten)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))


class CorruptIndexError(BrokerError):
    """An index file fails a sanity check; the caller rebuilds it from the log."""


class IndexOffsetError(BrokerError):
    """An append would break the index's ordering (a bug in the caller, as in Kafka)."""


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class _MappedIndex:
    """Shared machinery of the fixed-entry-size, memory-mapped indexes."""

    ENTRY_SIZE: ClassVar[int]
    _struct: ClassVar[struct.Struct]

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._map: mmap.mmap | None = None
        self._max_entries = 0  # slots in the map; kept with the map (appends check it every time)
        # Opened at the first allocation and closed when the index is trimmed (roll, close):
        # only the active segment's indexes hold a second descriptor.
        self._fd: int | None = None
        # Bytes from the start known to be backed by allocated blocks: every written slot is.
        # Appends below it are plain stores into the map; past it, _allocate reserves a page.
        self._allocated_to = 0
        _create_if_missing(path)
        size = path.stat().st_size
        self._corrupt_size = size % self.ENTRY_SIZE != 0
        if size == 0:
            self._entries = 0
            self._resize_file(self._round(max_index_size))
        else:
            self._entries = self._count_entries(size)
            self._resize_file(size)
        self._allocated_to = self._entries * self.ENTRY_SIZE

    def _count_entries(self, size: int) -> int:
        """Whole slots up to the first empty one: a trimmed file is all entries; a file still at
        its preallocated size (the active segment's after a crash) has an empty tail."""
        n = size // self.ENTRY_SIZE
        if n == 0 or self._corrupt_size:
            return n
        empty = bytes(self.ENTRY_SIZE)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            def is_empty(slot: int) -> bool:
                return os.pread(fd, self.ENTRY_SIZE, slot * self.ENTRY_SIZE) == empty

            if not is_empty(n - 1):
                return n  # trimmed: the usual case, one probe
            # Entries are a prefix of non-empty slots (an offset entry's position is never 0,
            # a time entry's timestamp grows), so the first empty slot is found by bisection.
            lo, hi = 0, n - 1
            while lo < hi:
                mid = (lo + hi) // 2
                if is_empty(mid):
                    hi = mid
                else:
                    lo = mid + 1
            return lo
        finally:
            os.close(fd)

    # -- file / map management ----------------------------------------------------------------

    def _round(self, n: int) -> int:
        return max(n // self.ENTRY_SIZE * self.ENTRY_SIZE, 0)

    def _resize_file(self, size: int) -> None:
        # The map keeps its own duplicate of the descriptor, so the file is opened only while
        # (re)mapping: one descriptor per index, not two.
        if self._map is not None:
            self._map.close()
            self._map = None
            self._max_entries = 0
        with open(self.path, "r+b") as f:
            if os.fstat(f.fileno()).st_size != size:
                f.truncate(size)
                # A shrink drops the blocks past the new end; regrowing leaves holes there.
                self._allocated_to = min(self._allocated_to, size)
            if size:
                self._map = mmap.mmap(f.fileno(), size)
                self._max_entries = size // self.ENTRY_SIZE

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def entries(self) -> int:
        return self._entries

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    def resize(self, new_size: int) -> None:
        """Grow/shrink the file (and map) to ``new_size`` rounded to whole entries (>= entries)."""
        self._resize_file(max(self._round(new_size), self._entries * self.ENTRY_SIZE))

    @property
    def has_slack(self) -> bool:
        """The file is larger than its entries (preallocated, not trimmed)."""
        return self._max_entries != self._entries

    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly its entries (on roll, close and recovery, as Kafka does)."""
        self._close_fd()
        self._resize_file(self._entries * self.ENTRY_SIZE)

    def _allocate(self, end: int) -> None:
        """Reserve the blocks up to ``end`` (rounded up to a page, within the map) before a store
        reaches them; a full disk raises ENOSPC here instead of SIGBUS in the store."""
        fd = self._fd
        if fd is None:
            fd = self._fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        start = self._allocated_to
        stop = min(-(-end // _PAGE) * _PAGE, self._max_entries * self.ENTRY_SIZE)
        if stop > start:
            os.posix_fallocate(fd, start, stop - start)
            self._allocated_to = stop

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def reset(self) -> None:
        """Drop every entry (before a rebuild from the log) and regrow to the max size."""
        self._entries = 0
        self._corrupt_size = False
        self._resize_file(self._round(self.max_index_size))

    def flush(self) -> None:
        if self._map is not None and self._entries:
            self._map.flush()

    def close(self) -> None:
        self.trim_to_valid_size()
        if self._map is not None:
            self._map.close()
            self._map = None
            self._max_entries = 0

    def close_handler(self) -> None:
        """Release the map and file without trimming (the file is about to be replaced/deleted)."""
        self._close_fd()
        if self._map is not None:
            self._map.close()
            self._map = None
            self._max_entries = 0

    def delete(self) -> None:
        self.close_handler()
        self.path.unlink(missing_ok=True)

    def rename_to(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = path

    # -- entries ------------------------------------------------------------------------------

    def _entry(self, n: int) -> tuple[int, int]:
        assert self._map is not None
        return self._struct.unpack_from(self._map, n * self.ENTRY_SIZE)

    def _key(self, n: int) -> int:
        raise NotImplementedError

    def _largest_lower_bound_slot(self, target: int) -> int:
        """Slot of the largest entry whose key <= target, or -1."""
        lo, hi = 0, self._entries - 1
        if hi < 0 or self._key(0) > target:
            return -1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._key(mid) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _check_size(self) -> None:
        if self._corrupt_size:
            raise CorruptIndexError(
                f"{self.path}: file size is not a multiple of the entry size {self.ENTRY_SIZE}")

    def _all_entries(self) -> list[tuple[int, int]]:
        if self._map is None or self._entries == 0:
            return []
        view = memoryview(self._map)[: self._entries * self.ENTRY_SIZE]
        try:
            return list(self._struct.iter_unpack(view))
        finally:
            view.release()


class OffsetIndex(_MappedIndex):
    """Sparse map from (batch last) offset to the byte position of that batch in the segment."""

    ENTRY_SIZE = 8
    _struct = struct.Struct(">ii")

    def _key(self, n: int) -> int:
        return self._entry(n)[0]

    def entry(self, n: int) -> OffsetPosition:
        rel, pos = self._entry(n)
        return OffsetPosition(self.base_offset + rel, pos)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self._entry(self._entries - 1)[0] if self._entries else self.base_offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The largest entry whose offset <= ``target_offset``, else ``(base_offset, 0)``."""
        slot = self._largest_lower_bound_slot(target_offset - self.base_offset)
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(slot)

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if not 0 <= rel <= INT32_MAX:
            raise IndexOffsetError(f"{self.path}: offset {offset} not relative to base {self.base_offset}")
        # The last entry and the free slot checked inline: a 16 KiB produced batch is indexed on every append.
        n = self._entries
        if n:
            assert self._map is not None
            if rel <= self._struct.unpack_from(self._map, (n - 1) * self.ENTRY_SIZE)[0]:
                raise IndexOffsetError(
                    f"{self.path}: offset {offset} is not larger than the last indexed offset {self.last_offset}")
        if n >= self._max_entries:  # is_full()
            raise IndexOffsetError(f"{self.path}: index is full ({n} entries)")
        pos = n * self.ENTRY_SIZE
        if pos + self.ENTRY_SIZE > self._allocated_to:
            self._allocate(pos + self.ENTRY_SIZE)
        assert self._map is not None
        self._struct.pack_into(self._map, pos, rel, position)
        self._entries = n + 1

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        slot = self._largest_lower_bound_slot(offset - self.base_offset)
        if slot < 0:
            self._entries = 0
        elif self._key(slot) == offset - self.base_offset:
            self._entries = slot
        else:
            self._entries = slot + 1

    def sanity_check(self) -> None:
        """Raise :class:`CorruptIndexError` if the entries are not strictly increasing and sane."""
        self._check_size()
        prev_rel, prev_pos = -1, -1
        for n, (rel, pos) in enumerate(self._all_entries()):
            if rel <= prev_rel or pos <= prev_pos or rel < 0:
                raise CorruptIndexError(
                    f"{self.path}: entry {n} ({rel}, {pos}) does not follow ({prev_rel}, {prev_pos})")
            prev_rel, prev_pos = rel, pos


class TimeIndex(_MappedIndex):
    """Sparse map from the largest timestamp so far to the offset of the batch that carried it."""

    ENTRY_SIZE = 12
    _struct = struct.Struct(">qi")

    def _key(self, n: int) -> int:
        return self._entry(n)[0]

    def entry(self, n: int) -> TimestampOffset:
        ts, rel = self._entry(n)
        return TimestampOffset(ts, self.base_offset + rel)

    def is_full(self) -> bool:
        # Kafka keeps one slot free so the final entry written on roll always fits.
        return self._entries >= self._max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when empty (Kafka's sentinel)."""
        return self.entry(self._entries - 1) if self._entries else TimestampOffset(NO_TIMESTAMP, self.base_offset)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The largest entry whose timestamp <= target, else ``(-1, base_offset)``."""
        slot = self._largest_lower_bound_slot(target_timestamp)
        if slot < 0:
            return TimestampOffset(-1, self.base_offset)
        return self.entry(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append if ``timestamp`` is larger than the last entry's, or than -1 when the index is
        empty (Kafka's rule)."""
        rel = offset - self.base_offset
        if not 0 <= rel <= INT32_MAX:
            raise IndexOffsetError(f"{self.path}: offset {offset} not relative to base {self.base_offset}")
        n = self._entries
        if n:
            assert self._map is not None  # _entry(n - 1), inline: every indexed append asks
            last_ts, last_rel = self._struct.unpack_from(self._map, (n - 1) * self.ENTRY_SIZE)
            if timestamp <= last_ts:
                return
            if rel < last_rel:
                raise IndexOffsetError(f"{self.path}: offset {offset} is below the last indexed offset")
        elif timestamp <= NO_TIMESTAMP:
            # Kafka compares with its empty-index sentinel (NO_TIMESTAMP, base offset), so an
            # empty segment closes with an empty .timeindex; an entry (-1, 0) is one that
            # `kafka-dump-log --verify-index-only` reports.
            return
        if not skip_full_check and n >= self._max_entries - 1:  # is_full()
            raise IndexOffsetError(f"{self.path}: time index is full")
        if n >= self._max_entries:
            raise IndexOffsetError(f"{self.path}: time index has no room")
        pos = n * self.ENTRY_SIZE
        if pos + self.ENTRY_SIZE > self._allocated_to:
            self._allocate(pos + self.ENTRY_SIZE)
        assert self._map is not None
        self._struct.pack_into(self._map, pos, timestamp, rel)
        self._entries = n + 1

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset`` (offsets are non-decreasing, so a suffix)."""
        rel = offset - self.base_offset
        n = self._entries
        while n > 0 and self._entry(n - 1)[1] >= rel:
            n -= 1
        self._entries = n

    def sanity_check(self) -> None:
        self._check_size()
        prev_ts, prev_rel = -(2**63), -1
        for n, (ts, rel) in enumerate(self._all_entries()):
            if ts <= prev_ts or rel < prev_rel or rel < 0:
                raise CorruptIndexError(
                    f"{self.path}: entry {n} ({ts}, {rel}) does not follow ({prev_ts}, {prev_rel})")
            prev_ts, prev_rel = ts, rel


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = 0


class TransactionIndex:
    """The aborted transactions whose markers live in one segment (``.txnindex``), plain file I/O."""

    ENTRY_SIZE = 34
    _struct = struct.Struct(">hqqqq")

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        _create_if_missing(path)
        self._last_offset: int | None = None
        # The entries, read once: read_committed fetches consult the index on every fetch.
        # Only this object writes the file, so the copy stays exact.
        self._cache: list[AbortedTxn] | None = None

    def append(self, txn: AbortedTxn) -> None:
        existing = self.all_aborted()
        if existing and txn.last_offset < existing[-1].last_offset:
            raise IndexOffsetError(
                f"{self.path}: aborted txn last offset {txn.last_offset} < previous {existing[-1].last_offset}")
        self._last_offset = txn.last_offset
        data = self._struct.pack(txn.version, txn.producer_id, txn.first_offset, txn.last_offset,
                                 txn.last_stable_offset)
        with open(self.path, "ab") as f:
            f.write(data)
        existing.append(txn)

    def all_aborted(self) -> list[AbortedTxn]:
        """The entries (a torn trailing partial entry is ignored); the list is the live cache."""
        if self._cache is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            whole = len(data) // self.ENTRY_SIZE * self.ENTRY_SIZE
            self._cache = [AbortedTxn(pid, first, last, lso, version)
                           for version, pid, first, last, lso in self._struct.iter_unpack(data[:whole])]
        return self._cache

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``."""
        return [t for t in self.all_aborted()
                if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset]

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Kafka's ``collectAbortedTxns``: the overlapping entries and whether the search is
        complete (an entry's last stable offset reaches the upper bound, so no later segment
        can hold an aborted transaction that started below it)."""
        out = []
        for t in self.all_aborted():
            if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset:
                out.append(t)
            if t.last_stable_offset >= upper_bound_offset:
                return out, True
        return out, False

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose (marker) last offset >= ``offset``."""
        keep = [t for t in self.all_aborted() if t.last_offset < offset]
        self._rewrite(keep)

    def reset(self) -> None:
        self._rewrite([])

    def _rewrite(self, txns: list[AbortedTxn]) -> None:
        with open(self.path, "wb") as f:
            for t in txns:
                f.write(self._struct.pack(t.version, t.producer_id, t.first_offset, t.last_offset,
                                          t.last_stable_offset))
        self._last_offset = txns[-1].last_offset if txns else None
        self._cache = list(txns)

    def sanity_check(self) -> None:
        size = self.path.stat().st_size if self.path.exists() else 0
        if size % self.ENTRY_SIZE:
            raise CorruptIndexError(f"{self.path}: size {size} is not a multiple of {self.ENTRY_SIZE}")

    def flush(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._cache = None

    def rename_to(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path
