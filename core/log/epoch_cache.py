"""LeaderEpochFileCache: leader epoch -> start offset, persisted as ``leader-epoch-checkpoint``.

Kafka's text format::

    0            <- version
    2            <- count
    0 0          <- epoch startOffset
    3 1500

The cache answers OffsetForLeaderEpoch (:meth:`end_offset_for_epoch`) and is the truncation
authority for followers.

Durability (Kafka 3.7+, KAFKA-15046 / KAFKA-16541): a change only updates memory and marks the
cache dirty; nothing is written under the log's lock, so the first append of a new epoch does
no file I/O on the event loop. The checkpoint is written whole and fsynced (tmp file, fsync,
rename, directory fsync: never a torn file, the corruption KAFKA-16541 fixed) by
:meth:`LeaderEpochFileCache.write_checkpoint`, which the log's flush runs off the event loop
*before* it moves the recovery point, and on close and load. So every entry starting below the
recovery point is durable, and the entries at or above it are re-assigned from the batches'
partition leader epochs by recovery after a crash (LogSegment.recover), which re-validates
exactly that range; a stale file is corrected by the truncations loading applies, as Kafka's
comment on ``truncateFromEndAsyncFlush`` argues.

Thread-safety: the entries are not thread-safe; the owning
:class:`~strom.core.log.log.UnifiedLog` reads and changes them under its lock.
:meth:`LeaderEpochFileCache.write_checkpoint` is thread-safe and is called without that lock:
its own lock only orders file writes, so a snapshot older than the one on disk is never
written over it.
"""

from __future__ import annotations

import bisect
import logging
import threading
from pathlib import Path

from strom.core.log.checkpoint import CheckpointError, read_epoch_checkpoint, write_epoch_checkpoint

logger = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochFileCache:
    """Epoch entries sorted by epoch (and start offset); the checkpoint file is written on demand."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            entries = read_epoch_checkpoint(path) or []
        except CheckpointError as e:
            # The cache can be rebuilt from batch headers during recovery; start empty.
            logger.warning("Ignoring corrupt leader epoch checkpoint: %s", e)
            entries = []
        self._epochs: list[int] = [e for e, _ in entries]
        self._offsets: list[int] = [o for _, o in entries]
        # Every change bumps the version; the file holds ``_written_version``.
        self._version = 0
        self._written_version = 0
        self._file_lock = threading.Lock()

    @classmethod
    def in_dir(cls, dir_path: Path) -> LeaderEpochFileCache:
        return cls(dir_path / LEADER_EPOCH_CHECKPOINT)

    # -- queries ------------------------------------------------------------------------------

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets, strict=True))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._offsets[0]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset`` (the latest entry with start <= offset)."""
        i = bisect.bisect_right(self._offsets, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def end_offset_for_epoch(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``: ``(largest epoch <= requested, start offset of the next epoch)``.

        The latest epoch ends at the log end offset; an epoch above the latest, or no entries,
        gives ``(-1, -1)``; an epoch below the first gives ``(requested, first start offset)``.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher >= len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._offsets[0]
        return self._epochs[higher - 1], self._offsets[higher]

    # -- updates ------------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (no-op if it is already the latest).

        As Kafka, entries with a greater-or-equal epoch or start offset are removed first, so
        the cache stays monotonic in both.
        """
        if epoch < 0:
            return
        if self._epochs and self._epochs[-1] == epoch and self._offsets[-1] <= start_offset:
            return
        keep = [(e, o) for e, o in zip(self._epochs, self._offsets, strict=True)
                if e < epoch and o < start_offset]
        keep.append((epoch, start_offset))
        self._set(keep)

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries starting at or after ``end_offset`` (log truncation)."""
        if self._offsets and self._offsets[-1] >= end_offset:
            self._set([(e, o) for e, o in zip(self._epochs, self._offsets, strict=True) if o < end_offset])

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop epochs wholly below ``start_offset``; the epoch holding it now starts there."""
        i = bisect.bisect_right(self._offsets, start_offset) - 1
        if i < 0 or (i == 0 and self._offsets[0] == start_offset):
            return
        entries = self.entries()[i:]
        entries[0] = (entries[0][0], start_offset)
        self._set(entries)

    def clear(self) -> None:
        self._set([])

    def _set(self, entries: list[tuple[int, int]]) -> None:
        self._epochs = [e for e, _ in entries]
        self._offsets = [o for _, o in entries]
        self._version += 1

    # -- the checkpoint file ------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        """The entries changed since the checkpoint was last written."""
        return self._version != self._written_version

    def snapshot(self) -> tuple[int, list[tuple[int, int]]]:
        """``(version, entries)`` to hand to :meth:`write_checkpoint` (under the owner's lock)."""
        return self._version, self.entries()

    def write_checkpoint(self, version: int, entries: list[tuple[int, int]]) -> None:
        """Write ``entries`` (taken by :meth:`snapshot`) atomically and fsynced, unless a newer
        snapshot is on disk already. Thread-safe; call it off the event loop. May raise OSError."""
        with self._file_lock:
            if version <= self._written_version:
                return
            write_epoch_checkpoint(self.path, entries)
            self._written_version = version

    def flush(self) -> None:
        """Write the checkpoint now if it is behind (loading, close, tests); blocking."""
        if self.dirty:
            self.write_checkpoint(*self.snapshot())
