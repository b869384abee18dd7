"""Kafka's ``SharePartitionManager``: the share partitions this broker leads, fetched and acknowledged.

One :class:`~strom.core.coordinator.share.share_partition.SharePartition` per (group, topic id,
partition), created on the first ShareFetch that names it and initialized from the share
coordinator's state (``__share_group_state``): its start offset and state batches, or, when the
state is absent or its start offset is -1 (a group coordinator initialized it without an offset),
the group's ``share.auto.offset.reset`` (earliest, latest, by_duration) applied to the log.

* **Fetch** (``DelayedShareFetch``): for each partition of the session, read whole batches from
  the local log at the share partition's next fetch offset (up to the high watermark, or the last
  stable offset under ``share.isolation.level=read_committed``, with the log's aborted-transaction
  list), acquire records for the member under the acquisition lock, and return only the batches
  that hold acquired records. With nothing to acquire the fetch waits in the broker's fetch
  purgatory on the partitions' keys (an append wakes it) and on this manager's keys (a release,
  an expired lock or an acknowledgement that frees a lock slot wakes it), until ``max_wait``.
* **Acknowledge**: applied atomically per partition, then the partition's state is written to the
  share coordinator before the answer, so an acknowledged record is never redelivered after a
  restart; a crash loses only acquisitions (those records are delivered again, as Kafka allows).
* **Lock expiry**: one timer per share partition at its earliest lock deadline; expired records
  become AVAILABLE again (ARCHIVED at ``share.delivery.count.limit``), the state is written and
  waiting fetches are woken.
* **Release**: a closed share session (epoch -1, or its connection dropped) or a member that left
  the group gives back every record it holds (Kafka's ``releaseSession`` / the group
  coordinator's member-left callback).
* **Re-read**: a share partition whose stored state was re-initialized at another state epoch
  (AlterShareGroupOffsets) or deleted (DeleteShareGroupOffsets) is dropped and initialized again
  from the store on its next fetch.

Event-loop only.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol

from kio.schema.errors import ErrorCode

from strom.core.coordinator.share.share_partition import (
    AbortedTransaction,
    AcknowledgementBatch,
    AcquiredRecords,
    AutoOffsetReset,
    FetchedBatch,
    IsolationLevel,
    SharePartition,
    SharePartitionConfig,
)
from strom.core.errors import KafkaError, OffsetOutOfRangeError, UnknownTopicOrPartitionError
from strom.core.group_config import GROUP_RESOURCE, effective_group_config
from strom.core.records.batch import iter_headers
from strom.core.records.builder import read_control_record

if TYPE_CHECKING:
    from strom.core.config import BrokerConfig
    from strom.core.coordinator.share.coordinator import ShareCoordinator
    from strom.core.metadata.image import MetadataImage
    from strom.core.replica.manager import ReplicaManager
    from strom.core.replica.partition import Partition

logger = logging.getLogger(__name__)

CONTROL_ABORT = 0
# A share partition reads at most this much of its log per fetch: acquisition is bounded by the
# record-lock limit anyway, so reading the client's whole max_bytes would mostly be thrown away.
PARTITION_READ_BYTES = 1 << 20
# Once the partition's bytes per record are known, a read asks for what the records it may
# acquire take (with this much to spare), at least MIN_READ_BYTES (a whole batch always comes).
READ_ESTIMATE_SLACK = 1.25
MIN_READ_BYTES = 16 << 10
# ShareFetch's share_acquire_mode.
BATCH_OPTIMIZED = 0
RECORD_LIMIT = 1

SharePartitionKey = tuple[str, uuid.UUID, int]


def _now_ms() -> int:
    # Lock deadlines live only in memory, so a monotonic clock: a wall-clock jump expires no lock.
    return time.monotonic_ns() // 1_000_000


class ShareHost(Protocol):
    """What the manager needs of the broker."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def image(self) -> MetadataImage: ...
    @property
    def replica_manager(self) -> ReplicaManager: ...
    @property
    def share_coordinator(self) -> ShareCoordinator: ...


class FetchTarget(NamedTuple):
    """A partition a ShareFetch reads: its topic's id and name."""

    topic_id: uuid.UUID
    topic: str
    partition: int


@dataclass(slots=True)
class FetchedPartition:
    """One partition's share-fetch answer: the batches holding acquired records, and which."""

    error_code: int = 0
    error_message: str | None = None
    records: bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)


@dataclass(slots=True)
class _Entry:
    """A share partition with what runs around it: its timer, its write lock, its purgatory key."""

    key: SharePartitionKey
    topic: str
    sp: SharePartition
    wake_key: Hashable
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    timer: asyncio.TimerHandle | None = None
    timer_deadline: int | None = None
    # Bytes per record of the batches last read (0: not read yet), to size the next read.
    bytes_per_record: float = 0.0


def share_config(config: BrokerConfig, overrides: Mapping[str, str]) -> tuple[SharePartitionConfig, AutoOffsetReset]:
    """The group's share-partition configs (``share.*`` group configs over ``group.share.*``)."""
    values = effective_group_config(config, overrides)

    def int_of(name: str, default: int) -> int:
        v = values.get(name)
        return v if isinstance(v, int) else default

    spc = SharePartitionConfig(
        record_lock_duration_ms=int_of("share.record.lock.duration.ms", 30_000),
        delivery_count_limit=int_of("share.delivery.count.limit", 5),
        max_record_locks=int_of("share.partition.max.record.locks", 2000),
        isolation_level=(IsolationLevel.READ_COMMITTED
                         if str(values.get("share.isolation.level") or "").lower() == "read_committed"
                         else IsolationLevel.READ_UNCOMMITTED))
    reset = str(values.get("share.auto.offset.reset") or "latest")
    try:
        auto_reset = AutoOffsetReset.parse(reset)
    except ValueError:
        auto_reset = AutoOffsetReset.parse("latest")
    return spc, auto_reset


class SharePartitionManager:
    """Every share partition of this broker and the ShareFetch / ShareAcknowledge operations on them."""

    def __init__(self, host: ShareHost) -> None:
        self.host = host
        self._entries: dict[SharePartitionKey, _Entry] = {}
        self._initializing: dict[SharePartitionKey, asyncio.Future[_Entry]] = {}
        # group -> (overrides mapping seen, parsed configs, share.renew.acknowledge.enable):
        # re-parsed only when the overrides change.
        self._configs: dict[str, tuple[Mapping[str, str], SharePartitionConfig, AutoOffsetReset, bool]] = {}
        self._background: set[asyncio.Task[None]] = set()

    # ---------------------------------------------------------------- configs and entries

    def group_config(self, group_id: str) -> tuple[SharePartitionConfig, AutoOffsetReset]:
        overrides = self.host.image.resource_configs(GROUP_RESOURCE, group_id)
        cached = self._configs.get(group_id)
        if cached is None or cached[0] is not overrides:
            spc, reset = share_config(self.host.config, overrides)
            renew = effective_group_config(self.host.config, overrides).get("share.renew.acknowledge.enable")
            cached = self._configs[group_id] = (overrides, spc, reset, renew is not False)
        return cached[1], cached[2]

    def renew_acknowledge_enabled(self, group_id: str) -> bool:
        """``share.renew.acknowledge.enable`` of the group (KIP-1222's RENEW; on by default)."""
        self.group_config(group_id)
        return self._configs[group_id][3]

    def record_lock_duration_ms(self, group_id: str) -> int:
        return self.group_config(group_id)[0].record_lock_duration_ms

    def share_partition(self, group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        """The in-memory share partition (None until a fetch created it)."""
        entry = self._entries.get((group_id, topic_id, partition))
        return None if entry is None else entry.sp

    async def _entry(self, group_id: str, target: FetchTarget) -> _Entry:
        key = (group_id, target.topic_id, target.partition)
        entry = self._entries.get(key)
        spc, _ = self.group_config(group_id)
        if entry is not None:
            stored = self.host.share_coordinator.read_state(group_id, target.topic_id, target.partition)
            if stored is None or stored.state_epoch != entry.sp.state_epoch:
                # The state was re-initialized (AlterShareGroupOffsets: a new state epoch) or
                # deleted (DeleteShareGroupOffsets) behind this share partition: start again from it.
                logger.info("share partition %s %s-%d: its state was %s; reading it again", group_id, target.topic,
                            target.partition, "deleted" if stored is None else "re-initialized")
                self._drop(entry)
                entry = None
        if entry is not None:
            if entry.sp.config != spc:
                entry.sp.config = spc  # a group config changed: it applies from the next acquire
            return entry
        pending = self._initializing.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[_Entry] = asyncio.get_running_loop().create_future()
        self._initializing[key] = fut
        try:
            entry = await self._initialize(group_id, target)
            self._entries[key] = entry
            fut.set_result(entry)
            return entry
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # retrieved: a lone initializer's failure is raised below, not logged
            raise
        finally:
            del self._initializing[key]

    async def _initialize(self, group_id: str, target: FetchTarget) -> _Entry:
        """Kafka's ``SharePartition.maybeInitialize``: read the persisted state, or start afresh."""
        part = self.host.replica_manager.get_partition(target.topic, target.partition)
        coordinator = self.host.share_coordinator
        spc, reset = self.group_config(group_id)
        state = coordinator.read_state(group_id, target.topic_id, target.partition)
        if state is not None and state.start_offset >= 0:
            sp = SharePartition(spc, state.start_offset, state.state_batches, state_epoch=state.state_epoch)
            sp.update_log_start_offset(part.log_start_offset)
            logger.info("share partition %s %s-%d initialized from its state: start offset %d", group_id,
                        target.topic, target.partition, sp.start_offset)
        else:
            log = part.log

            def by_timestamp(ts: int) -> int | None:
                found = log.fetch_offset_by_timestamp(ts)
                return None if found is None or found[0] < 0 else found[0]

            start = reset.start_offset(log_start_offset=part.log_start_offset, high_watermark=part.high_watermark,
                                       now_ms=time.time_ns() // 1_000_000, offset_for_timestamp=by_timestamp)
            if state is None:
                await coordinator.initialize_state(group_id, target.topic_id, target.partition, state_epoch=0,
                                                   start_offset=start)
                state_epoch = 0
            else:
                state_epoch = state.state_epoch
                await coordinator.write_state(group_id, target.topic_id, target.partition, state_epoch=state_epoch,
                                              leader_epoch=-1, start_offset=start, state_batches=())
            sp = SharePartition(spc, start, state_epoch=state_epoch)
            logger.info("share partition %s %s-%d initialized by share.auto.offset.reset=%s: start offset %d",
                        group_id, target.topic, target.partition, reset.strategy.value, start)
        return _Entry((group_id, target.topic_id, target.partition), target.topic, sp,
                      ("share-partition", group_id, target.topic, target.partition))

    # ---------------------------------------------------------------- fetch

    async def fetch(self, group_id: str, member_id: str, targets: Sequence[FetchTarget], *, max_records: int,
                    max_bytes: int, max_wait_ms: int, acquire_mode: int = BATCH_OPTIMIZED
                    ) -> dict[FetchTarget, FetchedPartition]:
        """Acquire records of ``targets`` for ``member_id``; wait up to ``max_wait_ms`` when there are none."""
        out: dict[FetchTarget, FetchedPartition] = {}
        entries: list[tuple[FetchTarget, _Entry]] = []
        for t in targets:
            try:
                entries.append((t, await self._entry(group_id, t)))
            except KafkaError as e:
                out[t] = FetchedPartition(int(e.code), e.message or None)
            except Exception as e:
                logger.exception("initializing share partition %s %s-%d failed", group_id, t.topic, t.partition)
                out[t] = FetchedPartition(int(ErrorCode.unknown_server_error), f"{type(e).__name__}: {e}")
        if not entries:
            return out
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(max_wait_ms, 0) / 1000
        rm = self.host.replica_manager
        keys: list[Hashable] = [k for t, e in entries for k in ((t.topic, t.partition), e.wake_key)]
        while True:
            got = self._acquire_all(member_id, entries, out, max_records, max_bytes, acquire_mode)
            remaining = deadline - loop.time()
            if got or remaining <= 0:
                break
            # Wait for a change since this attempt: a condition that held already (an acquire that
            # found nothing where _acquirable hoped) would otherwise spin without yielding the loop.
            if not await rm.fetch_purgatory.wait_until(keys, self._changed_and_acquirable(entries), remaining):
                break
        return out

    def _changed_and_acquirable(self, entries: Sequence[tuple[FetchTarget, _Entry]]) -> Callable[[], bool]:
        seen = self._positions(entries)
        return lambda: self._positions(entries) != seen and self._acquirable(entries)

    def _positions(self, entries: Sequence[tuple[FetchTarget, _Entry]]) -> list[tuple[int, int, int, int]]:
        """Where each partition stands (start, next fetch offset, end offset, the log's readable
        end): what an acquire depends on."""
        rm = self.host.replica_manager
        out = []
        for t, e in entries:
            sp = e.sp
            part = rm.partitions.get((t.topic, t.partition))
            end = -1 if part is None else (part.last_stable_offset
                                           if sp.config.isolation_level is IsolationLevel.READ_COMMITTED
                                           else part.high_watermark)
            out.append((sp.start_offset, sp.next_fetch_offset(), sp.end_offset, end))
        return out

    def _acquirable(self, entries: Sequence[tuple[FetchTarget, _Entry]]) -> bool:
        """The purgatory condition: could an acquire hand out anything now? (No log read.)"""
        rm = self.host.replica_manager
        for t, e in entries:
            sp = e.sp
            off = sp.next_fetch_offset()
            if off <= sp.end_offset and sp.in_flight(off) is not None:
                return True  # a record to redeliver
            try:
                part = rm.get_partition(t.topic, t.partition)
            except KafkaError:
                return True  # the read reports it
            end = part.last_stable_offset if sp.config.isolation_level is IsolationLevel.READ_COMMITTED \
                else part.high_watermark
            if off < end and off - sp.start_offset < sp.config.max_record_locks:
                return True
        return False

    def _acquire_all(self, member_id: str, entries: Sequence[tuple[FetchTarget, _Entry]],
                     out: dict[FetchTarget, FetchedPartition], max_records: int, max_bytes: int,
                     acquire_mode: int) -> bool:
        rm = self.host.replica_manager
        records_left = max(max_records, 1)
        bytes_left = max(max_bytes, 1)
        got = False
        for t, e in entries:
            if records_left <= 0 or bytes_left <= 0:
                break
            try:
                part = rm.get_partition(t.topic, t.partition)
                fetched = self._acquire_one(member_id, part, e, records_left, min(bytes_left, PARTITION_READ_BYTES),
                                            acquire_mode)
            except KafkaError as err:
                out[t] = FetchedPartition(int(err.code), err.message or None)
                got = True  # an error answers at once, as a read error does in Fetch
                continue
            if fetched is None:
                continue
            out[t] = fetched
            got = True
            records_left -= sum(a.last_offset - a.first_offset + 1 for a in fetched.acquired)
            bytes_left -= len(fetched.records)
        return got

    def _acquire_one(self, member_id: str, part: Partition, e: _Entry, max_records: int, budget: int,
                     acquire_mode: int) -> FetchedPartition | None:
        sp = e.sp
        if part.log_start_offset > sp.start_offset:
            sp.update_log_start_offset(part.log_start_offset)
        if not sp.can_acquire_records():
            return None
        offset = sp.next_fetch_offset()
        # Kafka's lastOffsetAndMaxRecordsToAcquire: in batch-optimized mode at most the lock
        # window's room (or, the window full, what is cached, to redeliver), rounded up to a
        # batch's end; in record-limit mode exactly max_records, cut by the window.
        room = sp.config.max_record_locks - sp.in_flight_count()
        wanted = (min(max_records, room) if room > 0 else max_records) if acquire_mode == BATCH_OPTIMIZED else 0
        full_budget = budget
        if e.bytes_per_record > 0:
            estimate = min(max_records, sp.config.max_record_locks)
            budget = min(budget, max(MIN_READ_BYTES, int(e.bytes_per_record * estimate * READ_ESTIMATE_SLACK)))
        read_committed = sp.config.isolation_level is IsolationLevel.READ_COMMITTED
        try:
            result = part.read_records(offset, budget, min_one_message=True, isolation_level=1 if read_committed else 0)
            data = result.records
            scan = _scan(data, offset, wanted, acquire_mode)
            if scan.short and budget < full_budget and data and scan.next_offset < result.high_watermark:
                # The estimate stopped inside the batch the acquisition rounds up to: read again,
                # as far as a partition may read.
                result = part.read_records(offset, full_budget, min_one_message=True,
                                           isolation_level=1 if read_committed else 0)
                data = result.records
                scan = _scan(data, offset, wanted, acquire_mode)
        except OffsetOutOfRangeError:
            # Below the log start (retention) or past the end (truncation): nothing to hand out now.
            sp.update_log_start_offset(part.log_start_offset)
            return None
        if not data:
            return None
        positions, batches = scan.positions, scan.batches
        read_bytes, read_records = scan.read_bytes, scan.read_records
        if read_records:
            e.bytes_per_record = read_bytes / read_records
        aborted = [AbortedTransaction(pid, first) for pid, first in (result.aborted_transactions or ())]
        limit = 0x7FFFFFFF if acquire_mode == BATCH_OPTIMIZED else max_records
        now = _now_ms()
        acquired = sp.acquire(member_id, batches, max_records=limit, now_ms=now,
                              aborted_transactions=aborted, whole_batches=acquire_mode == BATCH_OPTIMIZED)
        if not acquired:
            if sp.can_acquire_records() and sp.next_fetch_offset() > offset:
                # Everything read was archived (aborted, compacted away): waiters may go on.
                self._wake(e)
            return None
        self._schedule_expiry(e, now + sp.config.record_lock_duration_ms)
        return FetchedPartition(records=_slice(data, positions, batches, acquired), acquired=acquired)

    # ---------------------------------------------------------------- acknowledge and release

    async def acknowledge(self, group_id: str, member_id: str,
                          acknowledgements: Mapping[FetchTarget, Sequence[AcknowledgementBatch]]
                          ) -> dict[FetchTarget, tuple[int, str | None]]:
        """Apply a member's acknowledgements per partition and persist them before answering."""
        out: dict[FetchTarget, tuple[int, str | None]] = {}
        changed: list[tuple[FetchTarget, _Entry]] = []
        now = _now_ms()
        for t, batches in acknowledgements.items():
            entry = self._entries.get((group_id, t.topic_id, t.partition))
            if entry is None:
                err = UnknownTopicOrPartitionError(f"no share partition {t.topic}-{t.partition} in group {group_id}")
                out[t] = (int(err.code), err.message)
                continue
            try:
                entry.sp.acknowledge(member_id, batches, now_ms=now)
            except KafkaError as err:
                out[t] = (int(err.code), err.message or None)
                continue
            out[t] = (0, None)
            changed.append((t, entry))
        for t, entry in changed:
            try:
                await self._persist(entry)
            except KafkaError as err:
                out[t] = (int(err.code), err.message or None)
            self._wake(entry)
            self._schedule_expiry(entry)
        return out

    def release(self, group_id: str, member_id: str, partitions: Iterable[tuple[uuid.UUID, int]] | None = None) -> None:
        """Give back every record ``member_id`` holds (in ``partitions``, or in the whole group)."""
        if partitions is None:
            entries = [e for k, e in self._entries.items() if k[0] == group_id]
        else:
            entries = [e for tid, p in partitions if (e := self._entries.get((group_id, tid, p))) is not None]
        for entry in entries:
            if entry.sp.release_acquired_records(member_id):
                self._persist_later(entry)
                self._wake(entry)
                self._schedule_expiry(entry)

    def on_share_member_left(self, group_id: str, member_id: str) -> None:
        """The group coordinator's callback: a member left (or was fenced) — release its records."""
        self.release(group_id, member_id)

    # ---------------------------------------------------------------- locks, persistence, wakes

    def _schedule_expiry(self, e: _Entry, added_deadline: int | None = None) -> None:
        """Keep the partition's timer at (or before) its earliest lock deadline.

        A timer already set fires no later than any deadline added since, unless an acquire
        added an earlier one (``added_deadline``: a shorter lock duration after a group config
        change); one that fires early finds nothing expired and sets itself again. So the scan
        of the window for the earliest deadline runs once per expiry, not once per request.
        """
        if e.timer is not None and (added_deadline is None or e.timer_deadline is None
                                    or e.timer_deadline <= added_deadline):
            return
        deadline = e.sp.next_lock_deadline()
        if deadline == e.timer_deadline:
            return
        if e.timer is not None:
            e.timer.cancel()
            e.timer = None
        e.timer_deadline = deadline
        if deadline is not None:
            delay = max(deadline - _now_ms(), 0) / 1000
            e.timer = asyncio.get_running_loop().call_later(delay, self._expire, e)

    def _expire(self, e: _Entry) -> None:
        e.timer = None
        e.timer_deadline = None
        if self._entries.get(e.key) is not e:
            return  # dropped meanwhile
        if e.sp.expire_locks(_now_ms()):
            self._persist_later(e)
            self._wake(e)
        self._schedule_expiry(e)

    def _wake(self, e: _Entry) -> None:
        self.host.replica_manager.fetch_purgatory.check_and_complete(e.wake_key)

    async def _persist(self, e: _Entry) -> None:
        """WriteShareGroupState of the share partition's whole in-flight window (Kafka's persister write)."""
        async with e.write_lock:
            sp = e.sp
            group_id, topic_id, partition = e.key
            try:
                await self.host.share_coordinator.write_state(
                    group_id, topic_id, partition, state_epoch=sp.state_epoch, leader_epoch=-1,
                    start_offset=sp.start_offset, state_batches=sp.state_batches(),
                    delivery_complete_count=sp.delivery_complete_count())
            except KafkaError as exc:
                # The stored state moved on without us (re-initialized, deleted) or could not be
                # written (a full disk): forget the in-memory partition so the next fetch
                # initializes it from what is stored. A Kafka error is an answer, not a bug: its
                # name and text, no traceback.
                logger.warning("writing the state of share partition %s %s-%d failed (%s: %s); it is read again "
                               "on the next fetch", group_id, e.topic, partition, type(exc).__name__, exc)
                self._drop(e)
                raise

    def _persist_later(self, e: _Entry) -> None:
        async def run() -> None:
            try:
                await self._persist(e)
            except KafkaError:
                pass  # logged by _persist
            except Exception:
                logger.exception("writing the state of share partition %s failed", e.key)
        task = asyncio.get_running_loop().create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _drop(self, e: _Entry) -> None:
        if self._entries.get(e.key) is e:
            del self._entries[e.key]
        if e.timer is not None:
            e.timer.cancel()
            e.timer = None

    async def close(self) -> None:
        for e in list(self._entries.values()):
            if e.timer is not None:
                e.timer.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)


@dataclass
class _Scan:
    """The batches of one log read that an acquisition looks at."""

    positions: list[tuple[int, int]]
    batches: list[FetchedBatch]
    read_bytes: int
    read_records: int
    next_offset: int  # the offset after the last batch scanned
    short: bool  # batch-optimized and the read ended before the records wanted


def _scan(data: bytes, offset: int, wanted: int, acquire_mode: int) -> _Scan:
    """The batches of ``data`` (read at ``offset``) up to the one holding the ``wanted``-th record
    (batch-optimized mode; all of them in record-limit mode)."""
    positions: list[tuple[int, int]] = []
    batches: list[FetchedBatch] = []
    read_bytes = read_records = 0
    next_offset = offset
    for pos, h in iter_headers(data):
        read_bytes += h.size
        read_records += h.last_offset_delta + 1
        is_abort = False
        if h.is_control:
            control = read_control_record(data, pos, h)
            is_abort = control is not None and control.type == CONTROL_ABORT
        positions.append((pos, pos + h.size))
        batches.append(FetchedBatch(h.base_offset, h.last_offset, h.producer_id, h.is_transactional,
                                    h.is_control, is_abort))
        next_offset = h.last_offset + 1
        if acquire_mode == BATCH_OPTIMIZED:
            # Kafka's batch-optimized mode acquires whole batches: what may be acquired is met at
            # a batch boundary, so a batch is never split between two members.
            wanted -= h.last_offset - max(h.base_offset, offset) + 1
            if wanted <= 0:
                break
    return _Scan(positions, batches, read_bytes, read_records, next_offset,
                 acquire_mode == BATCH_OPTIMIZED and wanted > 0)


def _slice(data: bytes, positions: Sequence[tuple[int, int]], batches: Sequence[FetchedBatch],
           acquired: Sequence[AcquiredRecords]) -> bytes:
    """The batches of ``data`` that hold an acquired offset (Kafka's maybeSliceFetchRecords)."""
    view = memoryview(data)
    parts: list[memoryview] = []
    i = 0
    run_start = run_end = -1
    for (start, end), b in zip(positions, batches, strict=True):
        while i < len(acquired) and acquired[i].last_offset < b.base_offset:
            i += 1
        if i == len(acquired):
            break
        if acquired[i].first_offset <= b.last_offset:
            if start == run_end:
                run_end = end
            else:
                if run_end > run_start >= 0:
                    parts.append(view[run_start:run_end])
                run_start, run_end = start, end
    if run_end > run_start >= 0:
        parts.append(view[run_start:run_end])
    if len(parts) == 1 and run_start == 0 and run_end == len(data):
        return data
    return b"".join(parts)


__all__ = ["BATCH_OPTIMIZED", "RECORD_LIMIT", "FetchTarget", "FetchedPartition", "SharePartitionManager",
           "share_config"]
