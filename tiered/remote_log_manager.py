"""The remote log manager's copy path (Kafka's ``RemoteLogManager`` / ``RLMCopyTask``), written
against a narrow view of a partition's log so the broker can wire it in.

Per partition this broker leads, a copy round (:meth:`RemoteLogManager.copy_round`):

1. cleans up copies a crash or an error left in COPY_SEGMENT_STARTED (no reader ever sees such a
   segment): DELETE_SEGMENT_STARTED, delete from the remote store, DELETE_SEGMENT_FINISHED;
2. finds the highest offset already remote (COPY_SEGMENT_FINISHED, over every leader epoch);
3. copies, oldest first, each non-active segment that ends above it and wholly below the last
   stable offset: COPY_SEGMENT_STARTED with a fresh segment id, upload (segment, indexes, the
   producer snapshot at its end, its slice of the leader-epoch checkpoint), COPY_SEGMENT_FINISHED.
   A failed upload is cleaned up at once (as Kafka 3.8+ does) and retried next round.

Rounds run off the event loop: :meth:`RemoteLogManager.start` schedules one per leader partition
every ``remote.log.manager.task.interval.ms`` on a pool of
``remote.log.manager.copier.thread.pool.size`` threads, at most one round per partition at a time,
throttled to ``remote.log.manager.copy.max.bytes.per.second``.

The log is seen through :class:`TieredLog`; :class:`DirectoryTieredLog` implements it from a
partition directory in Kafka's layout (read-only), which is also what the broker's log exposes.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence, Set
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from strom.core.log.checkpoint import read_epoch_checkpoint
from strom.plugins.exceptions import RemoteStorageError
from strom.plugins.hookspecs.storage import (
    LogSegmentData,
    RemoteLogMetadataManager,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    RemoteStorageManager,
    TopicIdPartition,
)
from strom.tiered.config_values import ConfigReader

log = logging.getLogger(__name__)

S = RemoteLogSegmentState
LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ClosedSegment:
    """A non-active local segment: its files and offsets (``next_offset`` is the next segment's base)."""

    base_offset: int
    next_offset: int
    log: Path
    offset_index: Path
    time_index: Path
    transaction_index: Path | None
    max_timestamp_ms: int

    @property
    def end_offset(self) -> int:  # Kafka: nextSegment.baseOffset - 1
        return self.next_offset - 1


class TieredLog(Protocol):
    """What the remote log manager reads of a partition's log; every call is read-only."""

    def closed_segments(self) -> Sequence[ClosedSegment]:
        """The segments but the active one, by base offset."""
        ...

    def last_stable_offset(self) -> int:
        ...

    def leader_epoch_entries(self) -> Sequence[tuple[int, int]]:
        """(epoch, start offset) of the leader-epoch cache, ascending."""
        ...

    def producer_snapshot(self, offset: int) -> Path | None:
        """The producer-state snapshot taken at ``offset`` (a segment's end: the next one's base)."""
        ...

    def remote_copy_disabled(self) -> bool:
        """The topic's ``remote.log.copy.disable``."""
        ...

    def update_highest_offset_in_remote_storage(self, offset: int) -> None:
        """Everything up to ``offset`` is in remote storage (Kafka's
        ``updateHighestOffsetInRemoteStorage``): local retention may delete it."""
        ...

    def retention(self) -> tuple[int, int]:
        """The topic's total ``retention.ms`` and ``retention.bytes`` (-1: unlimited)."""
        ...

    def local_only_size(self, above: int) -> int:
        """Bytes of the local segments starting above offset ``above`` (not in remote storage)."""
        ...

    def increment_log_start_offset(self, offset: int) -> None:
        """Move the log start forward (before remote segments below it are deleted)."""
        ...


def leader_epoch_slice(entries: Sequence[tuple[int, int]], start: int, end: int) -> dict[int, int]:
    """The segment's ``segmentLeaderEpochs``: each epoch with records in ``[start, end]`` -> its first
    offset in the segment (Kafka's ``RemoteLogManager.getLeaderEpochEntries`` bounded to the segment)."""
    out: dict[int, int] = {}
    for i, (epoch, epoch_start) in enumerate(entries):
        epoch_end = entries[i + 1][1] - 1 if i + 1 < len(entries) else LONG_MAX
        if epoch_end >= start and epoch_start <= end and epoch_end >= epoch_start:
            out[epoch] = max(epoch_start, start)
    return out


def leader_epoch_checkpoint_bytes(entries: Sequence[tuple[int, int]], end: int) -> bytes:
    """The leader-epoch checkpoint file's content up to the segment's end (what Kafka uploads)."""
    kept = [(e, o) for e, o in entries if o <= end]
    return ("0\n" + f"{len(kept)}\n" + "".join(f"{e} {o}\n" for e, o in kept)).encode()


class DirectoryTieredLog:
    """A :class:`TieredLog` over a partition directory in Kafka's layout (read-only). The active
    segment is the last one; the last stable offset comes from the caller (the partition knows it)."""

    def __init__(self, partition_dir: Path, last_stable_offset: int, *, copy_disabled: bool = False) -> None:
        self.partition_dir = partition_dir
        self._lso = last_stable_offset
        self._copy_disabled = copy_disabled
        self.highest_offset_in_remote_storage = -1

    def _path(self, offset: int, suffix: str) -> Path:
        return self.partition_dir / f"{offset:020d}{suffix}"

    def closed_segments(self) -> list[ClosedSegment]:
        bases = sorted(int(p.name[:20]) for p in self.partition_dir.glob("*.log")
                       if len(p.name) == 24 and p.name[:20].isdigit())
        out = []
        for base, nxt in itertools.pairwise(bases):
            txn = self._path(base, ".txnindex")
            out.append(ClosedSegment(base, nxt, self._path(base, ".log"), self._path(base, ".index"),
                                     self._path(base, ".timeindex"), txn if txn.exists() else None,
                                     _max_timestamp(self._path(base, ".timeindex"))))
        return out

    def last_stable_offset(self) -> int:
        return self._lso

    def leader_epoch_entries(self) -> list[tuple[int, int]]:
        return read_epoch_checkpoint(self.partition_dir / "leader-epoch-checkpoint") or []

    def producer_snapshot(self, offset: int) -> Path | None:
        path = self._path(offset, ".snapshot")
        return path if path.exists() else None

    def remote_copy_disabled(self) -> bool:
        return self._copy_disabled

    def update_highest_offset_in_remote_storage(self, offset: int) -> None:
        self.highest_offset_in_remote_storage = max(self.highest_offset_in_remote_storage, offset)

    def retention(self) -> tuple[int, int]:
        return -1, -1  # a directory read-only: remote data never expires through it

    def local_only_size(self, above: int) -> int:
        return sum(s.log.stat().st_size for s in self.closed_segments() if s.base_offset > above)

    def increment_log_start_offset(self, offset: int) -> None:
        raise RemoteStorageError("a directory view cannot move the log start")


def _max_timestamp(time_index: Path) -> int:
    """The last entry's timestamp of a time index (12-byte entries: timestamp, relative offset)."""
    try:
        data = time_index.read_bytes()
    except FileNotFoundError:
        return -1
    usable = len(data) - len(data) % 12
    for pos in range(usable - 12, -1, -12):  # a preallocated index ends in zeros
        ts = int.from_bytes(data[pos:pos + 8], "big", signed=True)
        if ts > 0:
            return ts
    return -1


@dataclass
class CopyRound:
    """What one round did for a partition."""

    copied: list[RemoteLogSegmentMetadata] = field(default_factory=list)
    cleaned_up: list[RemoteLogSegmentId] = field(default_factory=list)
    expired: list[RemoteLogSegmentMetadata] = field(default_factory=list)
    failed: RemoteStorageError | None = None


class _CopyQuota:
    """Kafka's ``RLMQuotaManager`` for copies (``remote.log.manager.copy.max.bytes.per.second``),
    broker-wide: the rate is Kafka's ``Rate`` over ``remote.log.manager.copy.quota.window.num``
    windows of ``remote.log.manager.copy.quota.window.size.seconds`` (the bytes of the windows kept
    over their elapsed time, counted as at least ``window.num - 1`` whole windows). Before a
    segment is copied, its copier waits while the quota is violated, for Kafka's throttle time
    (``QuotaUtils.throttleTime``: (rate - bound) / bound * window), then records the segment's
    size, as ``RLMCopyTask`` does."""

    def __init__(self, bytes_per_second: int, stopped: threading.Event, window_num: int = 11,
                 window_size_s: float = 1.0) -> None:
        self.rate_bound = bytes_per_second
        self.window_num = window_num
        self.window_size_s = window_size_s
        self.stopped = stopped
        self.lock = threading.Lock()
        self._samples: deque[list[float]] = deque()  # [window start, bytes]
        self.throttled_ms = 0.0  # how long copiers waited for the quota, in all

    def _measure(self, now: float) -> tuple[float, float]:
        """(bytes per second, the window it is measured over); caller holds the lock."""
        horizon = now - self.window_num * self.window_size_s
        while self._samples and self._samples[0][0] + self.window_size_s <= horizon:
            self._samples.popleft()
        if not self._samples:
            return 0.0, self.window_size_s
        elapsed = now - self._samples[0][0]
        full = int(elapsed // self.window_size_s)
        if full < self.window_num - 1:
            elapsed += (self.window_num - 1 - full) * self.window_size_s
        elapsed = max(elapsed, self.window_size_s)
        return sum(s[1] for s in self._samples) / elapsed, elapsed

    def acquire(self, n: int) -> None:
        if self.rate_bound >= LONG_MAX:
            return
        while True:
            with self.lock:
                now = time.monotonic()
                rate, window = self._measure(now)
                if rate <= self.rate_bound:
                    if not self._samples or now - self._samples[-1][0] >= self.window_size_s:
                        self._samples.append([now, 0.0])
                    self._samples[-1][1] += n
                    return
                wait = max((rate - self.rate_bound) / self.rate_bound * window, 0.001)
                self.throttled_ms += wait * 1000
            if self.stopped.wait(wait):  # a quota wait, interrupted by close()
                raise RemoteStorageError("remote log manager closed while waiting for the copy quota")


class RemoteLogManager:
    """Copies closed segments of the partitions this broker leads to the remote tier."""

    def __init__(self, rsm: RemoteStorageManager, rlmm: RemoteLogMetadataManager, *, broker_id: int,
                 config: Mapping[str, object] | None = None) -> None:
        r = ConfigReader(config or {})
        self.task_interval_s = r.integer("remote.log.manager.task.interval.ms", 30_000, minimum=1) / 1000
        self.pool_size = r.integer("remote.log.manager.copier.thread.pool.size", 10, minimum=1)
        copy_rate = r.integer("remote.log.manager.copy.max.bytes.per.second", LONG_MAX, minimum=1)
        copy_windows = r.integer("remote.log.manager.copy.quota.window.num", 11, minimum=1)
        copy_window_s = r.integer("remote.log.manager.copy.quota.window.size.seconds", 1, minimum=1)
        # Kafka's RemoteLogManagerConfig retry keys: a partition whose round failed waits
        # backoff * 2^(failures-1), capped, with jitter, before its next round (S3 away stays quiet).
        self.retry_backoff_s = r.integer("remote.log.manager.task.retry.backoff.ms", 500, minimum=0) / 1000
        self.retry_backoff_max_s = r.integer("remote.log.manager.task.retry.backoff.max.ms", 30_000,
                                             minimum=0) / 1000
        jitter = r.string("remote.log.manager.task.retry.jitter", "0.2")
        try:
            self.retry_jitter = float(jitter)
        except ValueError:
            self.retry_jitter = -1.0
        if not 0 <= self.retry_jitter <= 1:
            raise ValueError(f"remote.log.manager.task.retry.jitter: {jitter!r} is not a number in [0, 1]")
        self.rsm, self.rlmm, self.broker_id = rsm, rlmm, broker_id
        self._stopped = threading.Event()
        self._quota = _CopyQuota(copy_rate, self._stopped, copy_windows, float(copy_window_s))
        self._lock = threading.Lock()
        self._leaders: dict[TopicIdPartition, TieredLog] = {}
        self._running: dict[TopicIdPartition, Future[CopyRound]] = {}
        self._copying: set[RemoteLogSegmentId] = set()  # copies in flight in this process
        self._failures: dict[TopicIdPartition, tuple[int, float]] = {}  # failed rounds in a row, retry time
        self._pool: ThreadPoolExecutor | None = None
        self._scheduler: threading.Thread | None = None

    # -- partitions -------------------------------------------------------------------------

    def on_leadership_change(self, leaders: Mapping[TopicIdPartition, TieredLog],
                             followers: Set[TopicIdPartition]) -> None:
        """Leaders get copy rounds; followers only follow the metadata. Blocks until the metadata
        of the new partitions is loaded (call it off the event loop)."""
        self.rlmm.on_partition_leadership_changes(set(leaders), set(followers))
        with self._lock:
            for tip in followers:
                self._leaders.pop(tip, None)
            self._leaders.update(leaders)

    def delete_remote_partition(self, tip: TopicIdPartition) -> int:
        """The partition's topic was deleted (Kafka's ``stopPartitions`` with ``deleteRemoteLog``):
        DELETE_PARTITION_MARKED, STARTED, every remote segment deleted, FINISHED. Blocking; returns
        how many segments were deleted."""
        with self._lock:
            self._leaders.pop(tip, None)
            running = self._running.pop(tip, None)
        if running is not None:
            try:  # a round in flight finishes its current segment first
                running.result(timeout=self.task_interval_s + 60)
            except Exception as e:
                log.info("copy round of deleted partition %s ended with %s", tip, e)
        self.rlmm.on_partition_leadership_changes(set(), {tip})  # its metadata loaded (no-op if it is)
        for state in (RemotePartitionDeleteState.DELETE_PARTITION_MARKED,
                      RemotePartitionDeleteState.DELETE_PARTITION_STARTED):
            self.rlmm.put_remote_partition_delete_metadata(
                RemotePartitionDeleteMetadata(tip, state, int(time.time() * 1000), self.broker_id))
        deleted = 0
        for m in list(self.rlmm.list_remote_log_segments(tip)):
            if m.state is not S.DELETE_SEGMENT_FINISHED:
                self._delete_remote_segment(m)
                deleted += 1
        self.rlmm.put_remote_partition_delete_metadata(RemotePartitionDeleteMetadata(
            tip, RemotePartitionDeleteState.DELETE_PARTITION_FINISHED, int(time.time() * 1000), self.broker_id))
        log.info("deleted %d remote segment(s) of deleted partition %s", deleted, tip)
        return deleted

    def on_stopped_partitions(self, partitions: Set[TopicIdPartition]) -> None:
        with self._lock:
            for tip in partitions:
                self._leaders.pop(tip, None)
        self.rlmm.on_stopped_partitions(set(partitions))

    # -- the copy round ---------------------------------------------------------------------

    def copy_round(self, tip: TopicIdPartition) -> CopyRound:
        """One round for a leader partition (blocking: run it in a worker thread)."""
        with self._lock:
            tiered_log = self._leaders.get(tip)
        result = CopyRound()
        if tiered_log is None:
            return result
        try:
            result.cleaned_up = self._clean_up_abandoned(tip)
            highest = self._highest_remote_offset(tip, tiered_log)
            tiered_log.update_highest_offset_in_remote_storage(highest)
            lso = tiered_log.last_stable_offset()
            # remote.log.copy.disable (KIP-950) stops the copies only: Kafka keeps the expiration
            # task (and remote reads) of such a partition running.
            copy_disabled = tiered_log.remote_copy_disabled()
            for seg in () if copy_disabled else tiered_log.closed_segments():
                if self._stopped.is_set():
                    break
                if seg.end_offset <= highest:
                    continue  # already remote
                if seg.next_offset > lso:
                    break  # not wholly below the last stable offset: neither it nor any later one
                result.copied.append(self._copy_segment(tip, tiered_log, seg))
                tiered_log.update_highest_offset_in_remote_storage(seg.end_offset)
            result.expired = self._expire(tip, tiered_log, highest if not result.copied
                                          else result.copied[-1].end_offset)
        except RemoteStorageError as e:
            result.failed = e
        with self._lock:
            if result.failed is None:
                self._failures.pop(tip, None)
            else:
                failures = self._failures.get(tip, (0, 0.0))[0] + 1
                backoff = min(self.retry_backoff_s * 2 ** (failures - 1), self.retry_backoff_max_s)
                backoff *= 1 + random.uniform(-self.retry_jitter, self.retry_jitter)
                self._failures[tip] = (failures, time.monotonic() + backoff)
                log.warning("copying %s to remote storage: %s (failed round %d, retried in %d ms)", tip,
                            result.failed, failures, backoff * 1000)
        return result

    def _expire(self, tip: TopicIdPartition, tiered_log: TieredLog, highest: int) -> list[RemoteLogSegmentMetadata]:
        """Kafka's RLMExpirationTask: the total retention (``retention.ms|bytes``, local plus
        remote) expires the oldest remote segments: the log start moves past them first, then
        each is deleted (DELETE_SEGMENT_STARTED, from the store, DELETE_SEGMENT_FINISHED)."""
        retention_ms, retention_bytes = tiered_log.retention()
        if retention_ms < 0 and retention_bytes < 0:
            return []
        finished = [m for m in self.rlmm.list_remote_log_segments(tip) if m.state is S.COPY_SEGMENT_FINISHED]
        now = int(time.time() * 1000)
        excess = (sum(m.segment_size_in_bytes for m in finished) + tiered_log.local_only_size(highest)
                  - retention_bytes) if retention_bytes >= 0 else 0
        expired = []
        for m in finished:  # oldest first; stop at the first one retention keeps
            too_old = retention_ms >= 0 and now - m.max_timestamp_ms > retention_ms
            too_big = retention_bytes >= 0 and excess - m.segment_size_in_bytes >= 0
            if not (too_old or too_big):
                break
            excess -= m.segment_size_in_bytes
            expired.append(m)
        if not expired:
            return []
        tiered_log.increment_log_start_offset(expired[-1].end_offset + 1)
        for m in expired:
            self._delete_remote_segment(m)
        log.info("%s: %d remote segment(s) past retention deleted, log start now %d", tip, len(expired),
                 expired[-1].end_offset + 1)
        return expired

    def _highest_remote_offset(self, tip: TopicIdPartition, tiered_log: TieredLog) -> int:
        highest = -1
        for epoch, _ in tiered_log.leader_epoch_entries():
            offset = self.rlmm.highest_offset_for_epoch(tip, epoch)
            if offset is not None and offset > highest:
                highest = offset
        return highest

    def _clean_up_abandoned(self, tip: TopicIdPartition) -> list[RemoteLogSegmentId]:
        with self._lock:
            in_flight = set(self._copying)
        cleaned = []
        for m in list(self.rlmm.list_remote_log_segments(tip)):
            if m.state in (S.COPY_SEGMENT_STARTED, S.DELETE_SEGMENT_STARTED) and m.segment_id not in in_flight:
                log.info("cleaning up remote segment %s left in %s", m.segment_id, m.state.name)
                self._delete_remote_segment(m)
                cleaned.append(m.segment_id)
        return cleaned

    def _delete_remote_segment(self, m: RemoteLogSegmentMetadata) -> None:
        if m.state is not S.DELETE_SEGMENT_STARTED:
            self.rlmm.update_remote_log_segment_metadata(self._update(m, S.DELETE_SEGMENT_STARTED))
        self.rsm.delete_log_segment_data(m)
        self.rlmm.update_remote_log_segment_metadata(self._update(m, S.DELETE_SEGMENT_FINISHED))

    def _update(self, m: RemoteLogSegmentMetadata, state: RemoteLogSegmentState,
                custom: bytes | None = None) -> RemoteLogSegmentMetadataUpdate:
        return RemoteLogSegmentMetadataUpdate(m.segment_id, int(time.time() * 1000), custom, state, self.broker_id)

    def _copy_segment(self, tip: TopicIdPartition, tiered_log: TieredLog, seg: ClosedSegment) -> RemoteLogSegmentMetadata:
        entries = list(tiered_log.leader_epoch_entries())
        epochs = leader_epoch_slice(entries, seg.base_offset, seg.end_offset)
        if not epochs:
            raise RemoteStorageError(f"{tip}: no leader epoch covers segment {seg.base_offset}")
        snapshot = tiered_log.producer_snapshot(seg.next_offset)
        if snapshot is None:
            raise RemoteStorageError(f"{tip}: no producer snapshot at offset {seg.next_offset} "
                                     f"(the end of segment {seg.base_offset})")
        size = seg.log.stat().st_size
        started = RemoteLogSegmentMetadata(
            RemoteLogSegmentId.generate_new(tip), seg.base_offset, seg.end_offset, seg.max_timestamp_ms,
            self.broker_id, int(time.time() * 1000), size, epochs,
            txn_index_empty=seg.transaction_index is None or seg.transaction_index.stat().st_size == 0)
        data = LogSegmentData(seg.log, seg.offset_index, seg.time_index, seg.transaction_index, snapshot,
                              leader_epoch_checkpoint_bytes(entries, seg.end_offset))
        with self._lock:
            self._copying.add(started.segment_id)
        try:
            self.rlmm.add_remote_log_segment_metadata(started)
            self._quota.acquire(size)
            try:
                custom = self.rsm.copy_log_segment_data(started, data)
            except RemoteStorageError:
                try:  # Kafka 3.8+: a failed copy is cleaned up at once
                    self._delete_remote_segment(started)
                except RemoteStorageError as cleanup:
                    log.info("cleanup of failed copy %s failed: %s (retried next round)", started.segment_id, cleanup)
                raise
            finished = self._update(started, S.COPY_SEGMENT_FINISHED, custom)
            self.rlmm.update_remote_log_segment_metadata(finished)
        finally:
            with self._lock:
                self._copying.discard(started.segment_id)
        log.info("copied %s segment [%d, %d] (%d bytes) as %s", tip, seg.base_offset, seg.end_offset, size,
                 started.segment_id.id)
        return started.create_with_update(finished)

    # -- scheduling -------------------------------------------------------------------------

    def start(self) -> None:
        """Run a copy round per leader partition every ``remote.log.manager.task.interval.ms``."""
        if self._scheduler is not None:
            return
        self._pool = ThreadPoolExecutor(self.pool_size, thread_name_prefix="remote-log-copier")
        self._scheduler = threading.Thread(target=self._schedule, name="remote-log-manager", daemon=True)
        self._scheduler.start()

    def _schedule(self) -> None:
        while not self._stopped.is_set():
            self.submit_rounds()
            self._stopped.wait(self.task_interval_s)  # the task interval, cut short by close()

    def submit_rounds(self) -> dict[TopicIdPartition, Future[CopyRound]]:
        """Submit a round for every leader partition that has none running."""
        assert self._pool is not None, "start() first"
        with self._lock:
            now = time.monotonic()
            for tip in list(self._leaders):
                running = self._running.get(tip)
                if tip in self._failures and now < self._failures[tip][1]:
                    continue  # backing off after a failed round
                if running is None or running.done():
                    self._running[tip] = self._pool.submit(self.copy_round, tip)
            return dict(self._running)

    def close(self) -> None:
        self._stopped.set()
        if self._scheduler is not None:
            self._scheduler.join(timeout=10)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
