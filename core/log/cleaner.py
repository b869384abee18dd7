"""LogCleaner: compaction of ``cleanup.policy=compact`` logs (Kafka's LogCleaner, one thread's worth).

One pass over a log:

1. The *cleanable* section is the whole non-active segments below the first uncleanable offset
   (min of the active segment's base, the high watermark and the first segment younger than
   ``min.compaction.lag.ms``). Its *dirty* part starts at the first dirty offset (persisted
   per log dir in ``cleaner-offset-checkpoint``, Kafka's file). The log is cleaned when
   dirty / cleanable bytes > ``min.cleanable.dirty.ratio``, or when a tombstone's delete horizon
   has passed.
2. An offset map ``key -> last offset`` is built over the dirty part (records are decoded:
   compaction is one of the places the design allows per-record work).
3. The cleanable segments are grouped as Kafka's ``groupSegmentsBySize`` does: consecutive
   segments whose sizes add up to at most ``segment.bytes``, whose offset and time indexes add
   up to at most ``segment.index.bytes`` each, and whose offsets fit one segment's 32-bit
   relative offsets. Each group is rewritten into one ``<first base>.log.cleaned``, so segments
   that compaction shrank (or emptied) are merged on the next pass instead of being left behind
   small or empty. A record survives if it has a key and is the latest for it. Batches whose records all survive are copied verbatim;
   others are rebuilt with the retained records, keeping base offset, last offset delta,
   producer id/epoch/base sequence, leader epoch, codec and timestamp type (offsets keep their
   gaps). Batches left empty are dropped (they are never transactional here: transactional and
   control batches are copied as they are).
4. Tombstones (null values) follow KIP-534: the first pass that rewrites a batch holding
   tombstones stamps it with a delete horizon = now + ``delete.retention.ms`` (attribute bit 6,
   base timestamp = horizon); a later pass after the horizon drops them.
5. The cleaned segment replaces its group via ``.cleaned`` -> ``.swap`` -> the other old
   segments to ``.deleted`` -> rename over the first (:meth:`UnifiedLog.replace_segments`);
   loading a log completes a swap whose ``.log.swap`` exists (removing the segments its offsets
   cover) and discards ``.cleaned`` and ``.deleted`` files.

Thread-safety: a ``LogCleaner`` may be called from one maintenance thread at a time (its
bookkeeping has a lock; concurrent ``clean`` calls on the same log are not supported). The log
itself is only locked briefly: segment reads happen on immutable non-active segments and the
swap checks under the log's lock that the group's segments are still in place and unchanged,
one group per lock acquisition.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from strom.core.log.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    CheckpointError,
    TopicPartition,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from strom.core.log.index import OffsetIndex, TimeIndex
from strom.core.log.log import Log
from strom.core.log.segment import CLEANED_SUFFIX, LogSegment
from strom.core.records.batch import TIMESTAMP_LOG_APPEND_TIME, BatchHeader, read_header
from strom.core.records.builder import Record, build_batch, decode_batch

logger = logging.getLogger(__name__)

_WRITE_CHUNK = 1024 * 1024
_MAX_RELATIVE_OFFSET = 2**31 - 1  # Java's Int.MaxValue: an index entry's relative offset


class CleanResult(NamedTuple):
    first_dirty_offset: int
    end_offset: int  # the new first dirty offset
    segments_cleaned: int
    bytes_before: int
    bytes_after: int
    records_removed: int


def _now_ms() -> int:
    return int(time.time() * 1000)


class LogCleaner:
    """Compacts logs on request (:meth:`clean`), remembering first dirty offsets and delete horizons."""

    def __init__(self, clock: Callable[[], int] = _now_ms) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        self._horizons: dict[Path, int] = {}  # log dir -> earliest pending tombstone delete horizon

    # -- bookkeeping --------------------------------------------------------------------------

    def _dir_checkpoint(self, parent: Path) -> dict[TopicPartition, int]:
        cp = self._checkpoints.get(parent)
        if cp is None:
            try:
                cp = read_offset_checkpoint(parent / CLEANER_OFFSET_CHECKPOINT)
            except CheckpointError as e:
                logger.warning("Ignoring corrupt cleaner checkpoint: %s", e)
                cp = {}
            self._checkpoints[parent] = cp
        return cp

    def first_dirty_offset(self, log: Log) -> int:
        with self._lock:
            stored = self._dir_checkpoint(log.dir.parent).get((log.topic, log.partition))
        start = log.log_start_offset
        if stored is None or stored < start or stored > log.log_end_offset:
            return start
        return stored

    def _set_first_dirty(self, log: Log, offset: int) -> None:
        with self._lock:
            cp = self._dir_checkpoint(log.dir.parent)
            cp[(log.topic, log.partition)] = offset
            write_offset_checkpoint(log.dir.parent / CLEANER_OFFSET_CHECKPOINT, cp)

    def forget(self, log: Log) -> None:
        """Drop a deleted log's state."""
        with self._lock:
            cp = self._dir_checkpoint(log.dir.parent)
            if cp.pop((log.topic, log.partition), None) is not None:
                write_offset_checkpoint(log.dir.parent / CLEANER_OFFSET_CHECKPOINT, cp)
            self._horizons.pop(log.dir, None)

    # -- cleaning -----------------------------------------------------------------------------

    def cleanable_segments(self, log: Log, now: int) -> list[LogSegment]:
        """The whole non-active segments below the first uncleanable offset."""
        segments = log.log_segments()
        if len(segments) < 2:
            return []
        first_uncleanable = min(segments[-1].base_offset, log.high_watermark)
        lag = log.config.min_compaction_lag_ms
        out = []
        for seg, nxt in itertools.pairwise(segments):
            if nxt.base_offset > first_uncleanable:
                break
            if lag > 0 and seg.largest_timestamp > now - lag:
                break
            out.append(seg)
        return out

    def dirty_ratio(self, log: Log, now: int | None = None) -> float:
        now = self._clock() if now is None else now
        segs = self.cleanable_segments(log, now)
        total = sum(s.size for s in segs)
        if not total:
            return 0.0
        return self._dirty_bytes(log, segs, self.first_dirty_offset(log)) / total

    @staticmethod
    def _dirty_bytes(log: Log, segs: list[LogSegment], first_dirty: int) -> int:
        """Bytes of the cleanable segments that hold offsets >= ``first_dirty``."""
        all_segs = log.log_segments()
        ends = {s.base_offset: nxt.base_offset for s, nxt in itertools.pairwise(all_segs)}
        return sum(s.size for s in segs if ends.get(s.base_offset, log.log_end_offset) > first_dirty)

    def clean(self, log: Log, now_ms: int | None = None, *, force: bool = False) -> CleanResult | None:
        """One cleaning pass if the log is due (or ``force``); None when nothing was done."""
        now = self._clock() if now_ms is None else now_ms
        cfg = log.config
        segs = self.cleanable_segments(log, now)
        if not segs:
            return None
        first_dirty = self.first_dirty_offset(log)
        total = sum(s.size for s in segs)
        dirty = self._dirty_bytes(log, segs, first_dirty)
        horizon = self._horizons.get(log.dir)
        horizon_due = horizon is not None and horizon <= now
        ratio = dirty / total if total else 0.0
        if not force and not horizon_due and (dirty == 0 or ratio <= cfg.min_cleanable_dirty_ratio):
            return None
        end_offset = log.log_segments()[len(segs)].base_offset
        offset_map = self._build_offset_map(segs, first_dirty)
        removed = 0
        after = 0
        pending_horizon: int | None = None
        cleaned_count = 0
        for group in group_segments_by_size(segs, cfg.segment_bytes, cfg.segment_index_bytes, end_offset):
            result = self._clean_group(log, group, offset_map, now)
            if result is None:
                continue  # a segment changed under us (truncation/retention): skip the group
            seg_removed, seg_size, seg_horizon = result
            removed += seg_removed
            after += seg_size
            cleaned_count += len(group)
            if seg_horizon is not None:
                pending_horizon = seg_horizon if pending_horizon is None else min(pending_horizon, seg_horizon)
        if pending_horizon is None:
            self._horizons.pop(log.dir, None)
        else:
            self._horizons[log.dir] = pending_horizon
        self._set_first_dirty(log, end_offset)
        logger.info("Cleaned %s: %d segment(s), %d -> %d bytes, %d record(s) removed", log.dir.name,
                    cleaned_count, total, after, removed)
        return CleanResult(first_dirty, end_offset, cleaned_count, total, after, removed)

    @staticmethod
    def _batches(seg: LogSegment) -> list[tuple[BatchHeader, bytes]]:
        return [(h, os.pread(seg.fd, h.batch_length + 12, pos)) for pos, h in seg.iter_headers()]

    def _build_offset_map(self, segs: list[LogSegment], first_dirty: int) -> dict[bytes, int]:
        offset_map: dict[bytes, int] = {}
        for seg in segs:
            for header, data in self._batches(seg):
                if header.last_offset < first_dirty or header.is_control:
                    continue
                base = header.base_offset
                for rec in decode_batch(data).records:
                    off = base + rec.offset_delta
                    if rec.key is not None and off >= first_dirty:
                        offset_map[rec.key] = off
        return offset_map

    def _clean_group(self, log: Log, group: list[LogSegment], offset_map: dict[bytes, int],
                     now: int) -> tuple[int, int, int | None] | None:
        """Rewrite a group of segments into one ``.cleaned`` segment at the group's first base
        offset and swap it in for them; (removed, new size, horizon), None if one changed."""
        sizes_before = [seg.size for seg in group]
        try:
            per_segment = [self._batches(seg) for seg in group]
        except (OSError, ValueError):
            return None  # closed meanwhile
        cfg = log.config
        base = group[0].base_offset
        for ext in (".log", ".index", ".timeindex", ".txnindex"):
            (log.dir / f"{base:020d}{ext}{CLEANED_SUFFIX}").unlink(missing_ok=True)
        cleaned = LogSegment(log.dir, base, index_interval_bytes=cfg.index_interval_bytes,
                             max_index_size=cfg.segment_index_bytes, suffix=CLEANED_SUFFIX, now_ms=now)
        # Transactional and control batches are copied whole, so the aborted-transaction
        # entries of the segments stay true; read_committed fetches need them after the swap.
        for seg in group:
            for txn in list(seg.txn_index.all_aborted()):
                cleaned.txn_index.append(txn)
        out = bytearray()
        out_batches: list[tuple[int, BatchHeader]] = []
        removed = 0
        pending_horizon: int | None = None
        for header, data in itertools.chain.from_iterable(per_segment):
            if header.is_control or header.is_transactional:
                new: bytes | None = data
            else:
                new, n_removed, horizon = self._filter_batch(header, data, offset_map, now,
                                                             cfg.delete_retention_ms)
                removed += n_removed
                if horizon is not None:
                    pending_horizon = horizon if pending_horizon is None else min(pending_horizon, horizon)
            if new is None:
                continue
            out_batches.append((len(out), read_header(new)))
            out += new
            if len(out) >= _WRITE_CHUNK:
                cleaned.append(out, out_batches)
                out, out_batches = bytearray(), []
        cleaned.append(out, out_batches)
        new_size = cleaned.size
        cleaned.on_become_inactive()
        cleaned.flush()  # fsync before taking the log's lock: appends never wait for it
        # The log checks, under its lock, that the group is still live and unchanged; it holds
        # the lock for this one group's renames only.
        if not log.replace_segments(group, cleaned, expected_sizes=sizes_before):
            cleaned.delete()
            return None
        return removed, new_size, pending_horizon

    @staticmethod
    def _filter_batch(header: BatchHeader, data: bytes, offset_map: dict[bytes, int], now: int,
                      delete_retention_ms: int) -> tuple[bytes | None, int, int | None]:
        """(new batch bytes or None if empty, records removed, pending tombstone horizon)."""
        records = decode_batch(data).records
        base = header.base_offset
        horizon = header.base_timestamp if header.has_delete_horizon else None
        drop_tombstones = horizon is not None and now >= horizon
        keep: list[Record] = []
        tombstones = False
        for rec in records:
            if rec.key is None:
                continue  # a compacted log keeps keyed records only (Kafka counts these invalid)
            latest = offset_map.get(rec.key)
            if latest is not None and latest > base + rec.offset_delta:
                continue
            if rec.value is None:
                if drop_tombstones:
                    continue
                tombstones = True
            keep.append(rec)
        removed = len(records) - len(keep)
        if not keep:
            return None, removed, None
        set_horizon = tombstones and horizon is None
        if removed == 0 and not set_horizon:
            return data, 0, horizon if tombstones else None
        new_base_ts = now + delete_retention_ms if set_horizon else header.base_timestamp
        shift = header.base_timestamp - new_base_ts
        rebuilt = [Record(r.offset_delta, r.timestamp_delta + shift, r.key, r.value, r.headers) for r in keep]
        log_append = header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
        new = build_batch(
            rebuilt, base_offset=base, compression=header.compression, producer_id=header.producer_id,
            producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
            partition_leader_epoch=header.partition_leader_epoch, timestamp_type=header.timestamp_type,
            base_timestamp=new_base_ts, max_timestamp=header.max_timestamp if log_append else None,
            last_offset_delta=header.last_offset_delta, delete_horizon=tombstones or horizon is not None)
        pending = (new_base_ts if set_horizon else horizon) if tombstones else None
        return new, removed, pending


def group_segments_by_size(segments: list[LogSegment], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[LogSegment]]:
    """Kafka's ``Cleaner.groupSegmentsBySize``: consecutive segments whose log sizes total at most
    ``max_size`` and whose offset and time index sizes each total at most ``max_index_size``,
    and whose offsets stay within 2**31 - 1 of the group's base (an index holds 32-bit relative
    offsets). An empty segment joins a group without the offset check."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size = segments[i].size
        index_size = _index_bytes(segments[i])
        time_index_size = _time_index_bytes(segments[i])
        i += 1
        while i < len(segments):
            seg = segments[i]
            # Kafka's lastOffsetForFirstSegment: the next segment's base - 1 bounds this one's last
            # offset without reading it; for the last one, the first uncleanable offset does.
            last_offset = (segments[i + 1].base_offset if i + 1 < len(segments) else first_uncleanable_offset) - 1
            if (log_size + seg.size > max_size
                    or index_size + _index_bytes(seg) > max_index_size
                    or time_index_size + _time_index_bytes(seg) > max_index_size
                    or (seg.size != 0 and last_offset - group[0].base_offset > _MAX_RELATIVE_OFFSET)):
                break
            group.append(seg)
            log_size += seg.size
            index_size += _index_bytes(seg)
            time_index_size += _time_index_bytes(seg)
            i += 1
        groups.append(group)
    return groups


def _index_bytes(seg: LogSegment) -> int:
    return seg.offset_index.entries * OffsetIndex.ENTRY_SIZE


def _time_index_bytes(seg: LogSegment) -> int:
    return seg.time_index.entries * TimeIndex.ENTRY_SIZE
