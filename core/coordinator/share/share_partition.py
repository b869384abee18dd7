"""Kafka's ``SharePartition``: the in-flight records of one topic-partition in one share group.

A share group reads a partition cooperatively. The *share-partition start offset* (SPSO) is the
first offset not yet finished with; the *end offset* (SPEO) is the last offset the share
partition has taken into its cache. Every offset in ``[start, end]`` has an in-flight state:

    AVAILABLE --acquire--> ACQUIRED --ACCEPT--> ACKNOWLEDGED
                               |   \\--REJECT/GAP--> ARCHIVED
                               |--RELEASE / lock expiry--> AVAILABLE (ARCHIVED once the
                               |     delivery count reached group.share.delivery.count.limit)
                               \\--RENEW--> ACQUIRED, lock restarted

Acquiring a record increments its delivery count and locks it for
``group.share.record.lock.duration.ms`` to one member. The start offset moves over every leading
ACKNOWLEDGED/ARCHIVED record; at most ``group.share.partition.max.record.locks`` offsets past the
start offset are ever taken in flight.

No I/O and no clock: the caller passes ``now_ms`` and the fetched batches (their offsets and
transactional markers; the record bytes never reach this class), and persists
:meth:`SharePartition.state_batches` where Kafka's persister would. States are kept per run of
offsets (Kafka's ``InFlightBatch``): one entry per acquired batch, split only where an operation
treats part of it differently, so a fetch or an acknowledgement of thousands of records costs
O(1) per batch, not per record.
"""

from __future__ import annotations

import enum
import logging
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from strom.core.errors import InvalidRecordStateError, InvalidRequestError

logger = logging.getLogger(__name__)

# Kafka's Uuid.ZERO_UUID.toString(): the member of a record no member holds.
EMPTY_MEMBER_ID = "AAAAAAAAAAAAAAAAAAAAAA"

# Broker defaults of Kafka 4.3 (GroupConfig / ShareGroupConfig).
DEFAULT_RECORD_LOCK_DURATION_MS = 30_000
DEFAULT_DELIVERY_COUNT_LIMIT = 5
DEFAULT_PARTITION_MAX_RECORD_LOCKS = 2000


class RecordState(enum.IntEnum):
    """Kafka's ``RecordState``; the ids are the DeliveryState bytes of the persisted state."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """The AcknowledgeTypes of ShareFetch / ShareAcknowledge (GAP is wire-only: an offset with no record)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class IsolationLevel(enum.IntEnum):
    """``share.isolation.level``."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    """The group configs one share partition obeys (``group.share.*`` / ``share.*``)."""

    record_lock_duration_ms: int = DEFAULT_RECORD_LOCK_DURATION_MS
    delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT
    max_record_locks: int = DEFAULT_PARTITION_MAX_RECORD_LOCKS
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED

    def __post_init__(self) -> None:
        if self.record_lock_duration_ms <= 0:
            raise ValueError(f"group.share.record.lock.duration.ms must be > 0, got {self.record_lock_duration_ms}")
        if self.delivery_count_limit < 1:
            raise ValueError(f"group.share.delivery.count.limit must be >= 1, got {self.delivery_count_limit}")
        if self.max_record_locks < 1:
            raise ValueError(f"group.share.partition.max.record.locks must be >= 1, got {self.max_record_locks}")


@dataclass(frozen=True, slots=True)
class FetchedBatch:
    """What acquire needs of one record batch read from the log: its offsets and txn markers."""

    base_offset: int
    last_offset: int
    producer_id: int = -1
    is_transactional: bool = False
    is_control: bool = False
    # For a control batch: True for an ABORT marker, False for COMMIT.
    is_abort_marker: bool = False


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """FetchResponse's AbortedTransaction: a producer's aborted transaction starting at first_offset."""

    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """ShareFetchResponse's AcquiredRecords: a run of offsets handed to a member."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """One AcknowledgementBatch of ShareFetch / ShareAcknowledge.

    ``acknowledge_types`` holds one type for the whole range or one per offset, as on the wire.
    """

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[AcknowledgeType, ...]


@dataclass(frozen=True, slots=True)
class PersisterStateBatch:
    """A StateBatch of Write/ReadShareGroupState and of ShareSnapshot/ShareUpdate records."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(slots=True)
class InFlightState:
    """One offset's state: Kafka's ``InFlightState`` with the lock as a deadline."""

    state: RecordState
    delivery_count: int
    member_id: str = EMPTY_MEMBER_ID
    lock_deadline_ms: int = -1


class ShareAutoOffsetReset(enum.Enum):
    """``share.auto.offset.reset``: where a share partition with no state starts."""

    LATEST = "latest"
    EARLIEST = "earliest"
    BY_DURATION = "by_duration"


# java.time.Duration.parse's grammar (what Kafka validates by_duration:<duration> with).
_DURATION_RE = re.compile(
    r"^([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?$",
    re.IGNORECASE,
)


def parse_java_duration_ms(text: str) -> int:
    """Milliseconds of an ISO-8601 duration as ``java.time.Duration.parse`` reads it (``PT1H``, ``P1DT2.5S``)."""
    m = _DURATION_RE.match(text)
    # "P" and "PT" alone are not durations for Java either.
    if m is None or text.upper() in ("P", "PT", "-P", "+P") or text.upper().endswith("T"):
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    sign, days, hours, minutes, seconds, fraction = m.groups()
    total_ms = (int(days or 0) * 86_400_000 + int(hours or 0) * 3_600_000 + int(minutes or 0) * 60_000
                + int(seconds or 0) * 1000)
    if fraction:
        frac_ms = int((fraction + "000")[:3])
        total_ms += -frac_ms if (seconds or "").startswith("-") else frac_ms
    return -total_ms if sign == "-" else total_ms


@dataclass(frozen=True, slots=True)
class AutoOffsetReset:
    """A parsed ``share.auto.offset.reset`` value: ``latest``, ``earliest`` or ``by_duration:<ISO-8601>``."""

    strategy: ShareAutoOffsetReset
    duration_ms: int = 0

    @classmethod
    def parse(cls, value: str) -> AutoOffsetReset:
        v = value.strip().lower()
        if v == "latest":
            return cls(ShareAutoOffsetReset.LATEST)
        if v == "earliest":
            return cls(ShareAutoOffsetReset.EARLIEST)
        if v.startswith("by_duration:"):
            ms = parse_java_duration_ms(value.strip()[len("by_duration:"):])
            if ms < 0:
                raise ValueError(f"share.auto.offset.reset: the duration must not be negative: {value!r}")
            return cls(ShareAutoOffsetReset.BY_DURATION, ms)
        raise ValueError(f"Invalid value {value!r} for configuration share.auto.offset.reset: "
                         "must be latest, earliest or by_duration:<ISO-8601 duration>")

    def start_offset(self, *, log_start_offset: int, high_watermark: int, now_ms: int,
                     offset_for_timestamp: Callable[[int], int | None] | None = None) -> int:
        """The start offset of a share partition that has no state yet.

        ``offset_for_timestamp(ts)`` is the log's ListOffsets lookup (first offset whose timestamp
        is >= ts, None if none); by_duration falls back to the high watermark when no record is
        that recent, as Kafka's offsetForTimestamp does.
        """
        if self.strategy is ShareAutoOffsetReset.EARLIEST:
            return log_start_offset
        if self.strategy is ShareAutoOffsetReset.LATEST:
            return high_watermark
        if offset_for_timestamp is None:
            raise ValueError("by_duration needs the log's offset-for-timestamp lookup")
        found = offset_for_timestamp(now_ms - self.duration_ms)
        return high_watermark if found is None else max(found, log_start_offset)


@dataclass(slots=True)
class _Run:
    """Offsets [first, last] sharing one state: Kafka's ``InFlightBatch`` before it is split."""

    first: int
    last: int
    state: RecordState
    delivery_count: int
    member_id: str = EMPTY_MEMBER_ID
    lock_deadline_ms: int = -1

    def same_state(self, other: _Run) -> bool:
        return (self.state is other.state and self.delivery_count == other.delivery_count
                and self.member_id == other.member_id and self.lock_deadline_ms == other.lock_deadline_ms)


def _run_first(run: _Run) -> int:
    return run.first


_FINISHED = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class SharePartition:
    """The share-partition state machine of one (group, topic-partition). Event-loop only.

    The cached offsets ``[start, next_new)`` are tiled by ``self._runs``: sorted, contiguous,
    non-overlapping runs of one shared state (Kafka's ``cachedState`` of ``InFlightBatch``). An
    acquire adds one run per fetched batch; an operation on part of a run splits it at the
    edges of that part (Kafka's ``offsetState``), and neighbours that end up equal are merged
    again. Whole-run accept, release, lock expiry and moving the start offset cost O(1) per run.
    tests/coordinator/share/test_share_partition_model.py checks it against the per-offset model.
    """

    def __init__(self, config: SharePartitionConfig, start_offset: int,
                 state_batches: Iterable[PersisterStateBatch] = (), *, state_epoch: int = 0,
                 leader_epoch: int = -1) -> None:
        """Build from the persister's state (ReadShareGroupState): start offset and state batches.

        Acquired records of the state read back are AVAILABLE again (their member is gone), with
        the delivery count they had; offsets between state batches are AVAILABLE with count 0,
        as Kafka's initial-read gap handling.
        """
        if start_offset < 0:
            raise ValueError(f"start offset must be >= 0, got {start_offset}")
        self.config = config
        self.state_epoch = state_epoch
        self.leader_epoch = leader_epoch
        self._start = start_offset
        # Offsets [self._start, self._next_new) are cached; self._next_new is the first never seen.
        self._next_new = start_offset
        self._runs: list[_Run] = []
        for b in sorted(state_batches, key=lambda b: b.first_offset):
            if b.last_offset < self._start:
                continue
            if b.first_offset > self._next_new:
                self._append_new(_Run(self._next_new, b.first_offset - 1, RecordState.AVAILABLE, 0))
            state = RecordState(b.delivery_state)
            if state is RecordState.ACQUIRED or state is RecordState.ARCHIVING:
                state = RecordState.AVAILABLE if state is RecordState.ACQUIRED else RecordState.ARCHIVED
            first = max(b.first_offset, self._next_new)
            if first <= b.last_offset:
                self._append_new(_Run(first, b.last_offset, state, b.delivery_count))
        self._advance_start()

    # ---------------------------------------------------------------- offsets

    @property
    def start_offset(self) -> int:
        """The share-partition start offset (SPSO)."""
        return self._start

    @property
    def end_offset(self) -> int:
        """The share-partition end offset (SPEO): the last cached offset; the start offset when nothing is cached."""
        return max(self._start, self._next_new - 1)

    def next_fetch_offset(self) -> int:
        """The offset a fetch for this share partition starts reading the log at.

        The lowest AVAILABLE cached offset (a redelivery), else the first offset never cached.
        """
        for r in self._runs:
            if r.state is RecordState.AVAILABLE:
                return r.first
        return self._next_new

    def can_acquire_records(self) -> bool:
        """Whether an acquire could hand out anything: a redeliverable record, or room under the lock limit."""
        if self._next_new - self._start < self.config.max_record_locks:
            return True
        return any(r.state is RecordState.AVAILABLE for r in self._runs)

    def in_flight(self, offset: int) -> InFlightState | None:
        """The state of a cached offset (None below the start offset or past the end).

        A snapshot: the offset's run is shared with its neighbours, so it is not handed out.
        """
        if offset < self._start or offset >= self._next_new:
            return None
        r = self._runs[self._index(offset)]
        return InFlightState(r.state, r.delivery_count, r.member_id, r.lock_deadline_ms)

    def delivery_complete_count(self) -> int:
        """Offsets at or past the start offset whose delivery is complete (ACKNOWLEDGED or
        ARCHIVED): WriteShareGroupState's DeliveryCompleteCount, from which lag is computed."""
        return sum(r.last - r.first + 1 for r in self._runs if r.state in _FINISHED)

    def acquired_count(self) -> int:
        """How many records are ACQUIRED now (the locks held)."""
        return sum(r.last - r.first + 1 for r in self._runs if r.state is RecordState.ACQUIRED)

    # ---------------------------------------------------------------- acquire

    def in_flight_count(self) -> int:
        """How many offsets the cache spans, start offset to end offset (Kafka's numInFlightRecords)."""
        return max(0, self._next_new - self._start)

    def acquire(self, member_id: str, batches: Sequence[FetchedBatch], *, max_records: int, now_ms: int,
                aborted_transactions: Sequence[AbortedTransaction] = (),
                whole_batches: bool = False) -> list[AcquiredRecords]:
        """Acquire up to ``max_records`` records of ``batches`` (read from the log at next_fetch_offset).

        Cached AVAILABLE records are acquired again (delivery count + 1); records past the end
        offset enter the cache ACQUIRED with count 1, while the in-flight window stays under
        ``max_record_locks``. Offsets between batches (compacted away) enter ARCHIVED. Under
        read_committed the records of aborted transactions are ARCHIVED, never handed out
        (Kafka's filterAbortedTransactionalAcquiredRecords); control batches are handed out for
        the client to acknowledge as GAP. The caller reads the log only up to the last stable
        offset under read_committed.

        ``whole_batches`` (ShareFetch's batch-optimized mode): a new batch that starts inside the
        lock window is taken in whole, even past the window's end, as Kafka 4.3.1 does (it rounds
        the records it may acquire up to the end of the batch holding the last of them); the
        caller passes only the batches that fit what may be acquired. Otherwise the window cuts
        a batch at ``max_record_locks``.
        """
        if max_records <= 0:
            return []
        read_committed = self.config.isolation_level is IsolationLevel.READ_COMMITTED
        aborted = self._aborted_offsets(batches, aborted_transactions) if read_committed else set()
        deadline = now_ms + self.config.record_lock_duration_ms
        available, acquired_state, archived = RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ARCHIVED
        max_locks = self.config.max_record_locks
        runs: list[list[int]] = []  # [first, last, delivery count], contiguous offsets of one count

        def note(first: int, last: int, count: int) -> None:
            if runs and runs[-1][1] == first - 1 and runs[-1][2] == count:
                runs[-1][1] = last
            else:
                runs.append([first, last, count])

        taken = 0
        prev_last: int | None = None
        window_full = False
        for batch in batches:
            if window_full or taken >= max_records:
                # Stop at once: the rest of this batch was not taken in, so a later batch must not
                # see its offsets as a hole (they would be archived unseen).
                break
            if prev_last is not None and batch.base_offset > prev_last + 1:
                # A hole between batches: no record there, ever. Archive it if it is new.
                self._archive_new(max(prev_last + 1, self._next_new), batch.base_offset - 1)
            prev_last = max(prev_last if prev_last is not None else batch.last_offset, batch.last_offset)
            off = max(batch.base_offset, self._start)
            end = batch.last_offset
            while off <= end:
                if taken >= max_records:
                    break
                if off == self._next_new and not aborted:
                    # Fast path: the rest of the batch is new (the common case), taken in as one run.
                    if whole_batches:
                        window_end = end if off - self._start < max_locks else off - 1
                    else:
                        window_end = self._start + max_locks - 1
                    last = min(end, window_end, off + (max_records - taken) - 1)
                    if last < off:
                        window_full = True
                        break
                    self._append_new(_Run(off, last, acquired_state, 1, member_id, deadline))
                    note(off, last, 1)
                    taken += last - off + 1
                    off = last + 1
                    continue
                if off >= self._next_new:
                    # New offsets on the slow path: after a hole inside the fetched range, or with
                    # aborted transactions in the read (one offset at a time as to the window).
                    if off > self._next_new:
                        # Only reachable with a gap inside the fetched range: no record there.
                        self._archive_new(self._next_new, off - 1)
                    if off - self._start >= max_locks:
                        window_full = True
                        break
                    seg_last = off
                    if aborted:
                        ab = off in aborted
                        limit = min(end, self._start + max_locks - 1)
                        if not ab:
                            limit = min(limit, off + (max_records - taken) - 1)
                        while seg_last < limit and ((seg_last + 1) in aborted) == ab:
                            seg_last += 1
                    else:
                        ab = False
                    if ab:
                        self._append_new(_Run(off, seg_last, archived, 0))
                    else:
                        self._append_new(_Run(off, seg_last, acquired_state, 1, member_id, deadline))
                        note(off, seg_last, 1)
                        taken += seg_last - off + 1
                    off = seg_last + 1
                    continue
                # A cached offset: only AVAILABLE ones are (re)acquired.
                i = self._index(off)
                r = self._runs[i]
                seg_last = min(r.last, end)
                if r.state is not available:
                    off = seg_last + 1
                    continue
                ab = bool(aborted) and off in aborted
                if aborted:
                    o = off
                    while o < seg_last and ((o + 1) in aborted) == ab:
                        o += 1
                    seg_last = o
                if not ab:
                    seg_last = min(seg_last, off + (max_records - taken) - 1)
                i, j = self._slice(off, seg_last)
                for r in self._runs[i:j]:
                    if ab:
                        r.state = archived
                        r.member_id = EMPTY_MEMBER_ID
                    else:
                        r.state = acquired_state
                        r.delivery_count += 1
                        r.member_id = member_id
                        r.lock_deadline_ms = deadline
                        note(r.first, r.last, r.delivery_count)
                if not ab:
                    taken += seg_last - off + 1
                self._merge(i - 1, j)
                off = seg_last + 1
        self._advance_start()
        return [AcquiredRecords(a, b, c) for a, b, c in runs]

    def _archive_new(self, first: int, last: int) -> None:
        first = max(first, self._next_new)
        if first <= last:
            self._append_new(_Run(first, last, RecordState.ARCHIVED, 0))

    @staticmethod
    def _aborted_offsets(batches: Sequence[FetchedBatch], aborted: Sequence[AbortedTransaction]) -> set[int]:
        """The offsets of data batches that belong to aborted transactions (the consumer's read_committed walk)."""
        if not aborted:
            return set()
        pending = sorted(aborted, key=lambda a: a.first_offset)
        i = 0
        ongoing: set[int] = set()
        out: set[int] = set()
        for b in batches:
            while i < len(pending) and pending[i].first_offset <= b.last_offset:
                ongoing.add(pending[i].producer_id)
                i += 1
            if b.is_control:
                if b.is_abort_marker:
                    ongoing.discard(b.producer_id)
                continue
            if b.is_transactional and b.producer_id in ongoing:
                out.update(range(b.base_offset, b.last_offset + 1))
        return out

    # ---------------------------------------------------------------- acknowledge

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch], *, now_ms: int) -> list[int]:
        """Apply a member's acknowledgements atomically; return the offsets whose state changed.

        Every offset must be cached and ACQUIRED by ``member_id``, else nothing is applied and
        INVALID_RECORD_STATE is raised (a malformed batch, or offsets past the end offset, raise
        INVALID_REQUEST; the part of a batch below the start offset is skipped). ACCEPT
        acknowledges, REJECT and GAP archive, RELEASE makes the record available again (archived
        once its delivery count reached the limit), RENEW restarts its lock.
        """
        # Validate everything first (per run, not per offset), then apply.
        plan: list[tuple[int, int, tuple[AcknowledgeType, ...]]] = []
        acquired_state = RecordState.ACQUIRED
        for b in batches:
            first, last = b.first_offset, b.last_offset
            if first > last or first < 0:
                raise InvalidRequestError(f"bad acknowledgement batch {first}-{last}")
            n = last - first + 1
            if len(b.acknowledge_types) not in (1, n):
                raise InvalidRequestError(f"acknowledgement batch {first}-{last} has "
                                          f"{len(b.acknowledge_types)} types for {n} offsets")
            types = tuple(AcknowledgeType(t) for t in b.acknowledge_types)
            # As Kafka's SharePartition: offsets past the cached records are INVALID_REQUEST; a
            # batch wholly below the start offset is INVALID_RECORD_STATE; one the start offset
            # moved into (lock expiry, log start) acknowledges its part from the start on.
            if self._start == self._next_new:
                # Nothing in flight at all: Kafka finds no cached batch for it (INVALID_RECORD_STATE).
                raise InvalidRecordStateError(f"acknowledgement batch {first}-{last}: no records in flight")
            if last >= self._next_new:
                raise InvalidRequestError(f"acknowledgement batch {first}-{last}: offsets past the acquired records "
                                          f"(end offset {self.end_offset})")
            if first < self._start:
                if last < self._start:
                    raise InvalidRecordStateError(f"acknowledgement batch {first}-{last} is below the start offset "
                                                  f"{self._start}")
                if len(types) > 1:
                    types = types[self._start - first:]
                first = self._start
            runs = self._runs
            i = self._index(first)
            while i < len(runs) and runs[i].first <= last:
                r = runs[i]
                if r.state is not acquired_state or r.member_id != member_id:
                    raise InvalidRecordStateError(
                        f"offset {max(first, r.first)} is not acquired by member {member_id} ({r.state.name})")
                i += 1
            plan.append((first, last, types))
        plan.sort()
        for (_, prev_last, _), (first, _, _) in pairwise(plan):
            if first <= prev_last:
                raise InvalidRequestError(f"offset {first} acknowledged twice in one request")
        changed: list[int] = []
        renew_deadline = now_ms + self.config.record_lock_duration_ms
        for first, last, types in plan:
            if len(types) == 1:
                self._apply_ack(first, last, types[0], renew_deadline, changed)
                continue
            # One type per offset: apply each stretch of equal types as one range.
            k = 0
            n = len(types)
            while k < n:
                t = types[k]
                e = k
                while e + 1 < n and types[e + 1] is t:
                    e += 1
                self._apply_ack(first + k, first + e, t, renew_deadline, changed)
                k = e + 1
        self._advance_start()
        return changed

    def _apply_ack(self, first: int, last: int, ack: AcknowledgeType, renew_deadline: int,
                   changed: list[int]) -> None:
        i, j = self._slice(first, last)
        runs = self._runs
        if ack is AcknowledgeType.RENEW:
            for k in range(i, j):
                runs[k].lock_deadline_ms = renew_deadline
        else:
            for k in range(i, j):
                r = runs[k]
                if ack is AcknowledgeType.ACCEPT:
                    self._finish(r, RecordState.ACKNOWLEDGED)
                elif ack is AcknowledgeType.RELEASE:
                    self._make_available(r)
                else:  # REJECT, GAP
                    self._finish(r, RecordState.ARCHIVED)
            changed.extend(range(first, last + 1))
        self._merge(i - 1, j)

    def release_acquired_records(self, member_id: str, *, decrease_delivery_count: bool = False) -> list[int]:
        """Release every record ``member_id`` holds (it left the group, or its session closed).

        ``decrease_delivery_count`` undoes the acquire's count for records that never reached
        the member (Kafka's DeliveryCountOps.DECREASE); such records go back AVAILABLE.
        """
        changed: list[int] = []
        for r in self._runs:
            if r.state is RecordState.ACQUIRED and r.member_id == member_id:
                if decrease_delivery_count:
                    r.delivery_count = max(0, r.delivery_count - 1)
                    r.state = RecordState.AVAILABLE
                    r.member_id = EMPTY_MEMBER_ID
                    r.lock_deadline_ms = -1
                else:
                    self._make_available(r)
                changed.extend(range(r.first, r.last + 1))
        if changed:
            self._merge(0, len(self._runs))
        self._advance_start()
        return changed

    # ---------------------------------------------------------------- locks and log start

    def next_lock_deadline(self) -> int | None:
        """The earliest acquisition-lock deadline (ms), None when no record is acquired."""
        deadlines = [r.lock_deadline_ms for r in self._runs if r.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def expire_locks(self, now_ms: int) -> list[int]:
        """Time out every lock whose deadline is <= now_ms: AVAILABLE, or ARCHIVED at the delivery limit."""
        changed: list[int] = []
        for r in self._runs:
            if r.state is RecordState.ACQUIRED and r.lock_deadline_ms <= now_ms:
                self._make_available(r)
                changed.extend(range(r.first, r.last + 1))
        if changed:
            logger.debug("acquisition locks expired for %d records", len(changed))
            self._merge(0, len(self._runs))
        self._advance_start()
        return changed

    def update_log_start_offset(self, log_start_offset: int) -> None:
        """The log's start moved (retention, DeleteRecords): records below it are gone, so archived."""
        if log_start_offset <= self._start:
            return
        if log_start_offset >= self._next_new:
            self._runs.clear()
            self._start = self._next_new = log_start_offset
            return
        i, j = self._slice(self._start, log_start_offset - 1)
        for r in self._runs[i:j]:
            self._finish(r, RecordState.ARCHIVED)
        self._advance_start()

    # ---------------------------------------------------------------- persistence

    def state_batches(self) -> list[PersisterStateBatch]:
        """The cached state as Kafka's persister writes it: runs of equal (state, delivery count).

        ACQUIRED is written as AVAILABLE: a lock does not outlive the broker that granted it.
        """
        out: list[PersisterStateBatch] = []
        for r in self._runs:
            state = RecordState.AVAILABLE if r.state is RecordState.ACQUIRED else r.state
            if out and out[-1].delivery_state == state and out[-1].delivery_count == r.delivery_count:
                prev = out[-1]
                out[-1] = PersisterStateBatch(prev.first_offset, r.last, prev.delivery_state, prev.delivery_count)
            else:
                out.append(PersisterStateBatch(r.first, r.last, int(state), r.delivery_count))
        return out

    # ---------------------------------------------------------------- internals

    def _index(self, offset: int) -> int:
        """The index of the run holding a cached offset."""
        return bisect_right(self._runs, offset, key=_run_first) - 1

    def _split(self, offset: int) -> int:
        """Make a run start at ``offset`` (start <= offset <= next_new); its index."""
        runs = self._runs
        if offset >= self._next_new:
            return len(runs)
        i = self._index(offset)
        r = runs[i]
        if r.first == offset:
            return i
        runs.insert(i + 1, _Run(offset, r.last, r.state, r.delivery_count, r.member_id, r.lock_deadline_ms))
        r.last = offset - 1
        return i + 1

    def _slice(self, first: int, last: int) -> tuple[int, int]:
        """Split so that runs[i:j] hold exactly the cached offsets [first, last]."""
        j = self._split(last + 1)
        n = len(self._runs)
        i = self._split(first)
        # Cutting the run holding ``first`` inserted a run at or before runs[j].
        return i, j + len(self._runs) - n

    def _merge(self, i: int, j: int) -> None:
        """Merge equal neighbours among runs[i..j] (indices clamped), so that splits do not pile up."""
        runs = self._runs
        i = max(i, 0)
        j = min(j, len(runs) - 1)
        k = j
        while k > i:
            a, b = runs[k - 1], runs[k]
            if a.same_state(b):
                a.last = b.last
                del runs[k]
            k -= 1

    def _append_new(self, run: _Run) -> None:
        """Take never-seen offsets (run.first == next_new) into the cache."""
        runs = self._runs
        if runs and runs[-1].same_state(run):
            runs[-1].last = run.last
        else:
            runs.append(run)
        self._next_new = run.last + 1

    def _make_available(self, r: _Run) -> None:
        # Kafka's tryUpdateState: back to AVAILABLE unless the delivery limit is reached.
        if r.delivery_count >= self.config.delivery_count_limit:
            self._finish(r, RecordState.ARCHIVED)
            return
        r.state = RecordState.AVAILABLE
        r.member_id = EMPTY_MEMBER_ID
        r.lock_deadline_ms = -1

    @staticmethod
    def _finish(r: _Run, state: RecordState) -> None:
        r.state = state
        r.member_id = EMPTY_MEMBER_ID
        r.lock_deadline_ms = -1

    def _advance_start(self) -> None:
        runs = self._runs
        k = 0
        n = len(runs)
        while k < n and runs[k].state in _FINISHED:
            k += 1
        if k:
            del runs[:k]
            self._start = runs[0].first if runs else self._next_new


__all__ = [
    "EMPTY_MEMBER_ID", "AbortedTransaction", "AcknowledgeType", "AcknowledgementBatch", "AcquiredRecords",
    "AutoOffsetReset", "FetchedBatch", "InFlightState", "IsolationLevel", "PersisterStateBatch",
    "RecordState", "ShareAutoOffsetReset", "SharePartition", "SharePartitionConfig", "parse_java_duration_ms",
]
