"""Test-only reference model: strom's per-offset ``SharePartition`` as of commit
2a7ffaaef06e9a855bb72b716c3350fbd6ca7121 (core/coordinator/share/share_partition.py).

It keeps one ``InFlightState`` object per cached offset in ``self._cache`` - simple and slow.
The production class keeps batch-level runs (Kafka's ``InFlightBatch``) and splits them only
where an operation touches part of a run; tests/coordinator/share/test_share_partition_model.py
drives both with the same random operation sequences and requires the same results. Do not
optimize this file: its value is being obviously the old state machine. The value types
(configs, batches, states, errors) are imported from the production module so that results
compare directly.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from itertools import pairwise

from strom.core.coordinator.share.share_partition import (
    EMPTY_MEMBER_ID,
    AbortedTransaction,
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    FetchedBatch,
    InFlightState,
    IsolationLevel,
    PersisterStateBatch,
    RecordState,
    SharePartitionConfig,
)
from strom.core.errors import InvalidRecordStateError, InvalidRequestError

logger = logging.getLogger(__name__)


class ReferenceSharePartition:
    """Per-offset SharePartition of commit 2a7ffaa (one InFlightState per cached offset). Test-only."""

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
        self._cache: dict[int, InFlightState] = {}
        for b in sorted(state_batches, key=lambda b: b.first_offset):
            if b.last_offset < self._start:
                continue
            for off in range(self._next_new, b.first_offset):
                self._cache[off] = InFlightState(RecordState.AVAILABLE, 0)
            state = RecordState(b.delivery_state)
            if state is RecordState.ACQUIRED or state is RecordState.ARCHIVING:
                state = RecordState.AVAILABLE if state is RecordState.ACQUIRED else RecordState.ARCHIVED
            for off in range(max(b.first_offset, self._next_new), b.last_offset + 1):
                self._cache[off] = InFlightState(state, b.delivery_count)
            self._next_new = max(self._next_new, b.last_offset + 1)
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
        for off in range(self._start, self._next_new):
            if self._cache[off].state is RecordState.AVAILABLE:
                return off
        return self._next_new

    def can_acquire_records(self) -> bool:
        """Whether an acquire could hand out anything: a redeliverable record, or room under the lock limit."""
        if self._next_new - self._start < self.config.max_record_locks:
            return True
        return any(s.state is RecordState.AVAILABLE for s in self._cache.values())

    def in_flight(self, offset: int) -> InFlightState | None:
        """The state of a cached offset (None below the start offset or past the end)."""
        return self._cache.get(offset)

    def delivery_complete_count(self) -> int:
        """Offsets at or past the start offset whose delivery is complete (ACKNOWLEDGED or
        ARCHIVED): WriteShareGroupState's DeliveryCompleteCount, from which lag is computed."""
        done = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        return sum(1 for s in self._cache.values() if s.state in done)

    def acquired_count(self) -> int:
        """How many records are ACQUIRED now (the locks held)."""
        return sum(1 for s in self._cache.values() if s.state is RecordState.ACQUIRED)

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
        cache = self._cache
        available, acquired_state = RecordState.AVAILABLE, RecordState.ACQUIRED
        max_locks = self.config.max_record_locks
        runs: list[list[int]] = []  # [first, last, delivery count], contiguous offsets of one count
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
                self._archive_new(range(max(prev_last + 1, self._next_new), batch.base_offset))
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
                    for o in range(off, last + 1):
                        cache[o] = InFlightState(acquired_state, 1, member_id, deadline)
                    self._next_new = last + 1
                    if runs and runs[-1][1] == off - 1 and runs[-1][2] == 1:
                        runs[-1][1] = last
                    else:
                        runs.append([off, last, 1])
                    taken += last - off + 1
                    off = last + 1
                    continue
                st = cache.get(off)
                if st is None:
                    if off < self._next_new:
                        off += 1
                        continue  # below start: already finished with
                    if off > self._next_new:
                        # Only reachable with a gap inside the fetched range: no record there.
                        self._archive_new(range(self._next_new, off))
                    if off - self._start >= max_locks:
                        window_full = True
                        break
                    st = InFlightState(available, 0)
                    cache[off] = st
                    self._next_new = off + 1
                if st.state is available:
                    if off in aborted:
                        st.state = RecordState.ARCHIVED
                        st.member_id = EMPTY_MEMBER_ID
                    else:
                        st.state = acquired_state
                        st.delivery_count += 1
                        st.member_id = member_id
                        st.lock_deadline_ms = deadline
                        count = st.delivery_count
                        if runs and runs[-1][1] == off - 1 and runs[-1][2] == count:
                            runs[-1][1] = off
                        else:
                            runs.append([off, off, count])
                        taken += 1
                off += 1
        self._advance_start()
        return [AcquiredRecords(a, b, c) for a, b, c in runs]

    def _archive_new(self, offsets: range) -> None:
        for off in offsets:
            if off >= self._next_new:
                self._cache[off] = InFlightState(RecordState.ARCHIVED, 0)
                self._next_new = off + 1

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
        # Validate everything first (per batch, not per offset where a batch has one type: a
        # batch of thousands of records is the common case), then apply.
        plan: list[tuple[int, int, tuple[AcknowledgeType, ...]]] = []
        cache = self._cache
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
            for off in range(first, last + 1):
                st = cache.get(off)
                if st is None or st.state is not acquired_state or st.member_id != member_id:
                    raise InvalidRecordStateError(
                        f"offset {off} is not acquired by member {member_id} "
                        f"({'not in flight' if st is None else st.state.name})")
            plan.append((first, last, types))
        plan.sort()
        for (_, prev_last, _), (first, _, _) in pairwise(plan):
            if first <= prev_last:
                raise InvalidRequestError(f"offset {first} acknowledged twice in one request")
        changed: list[int] = []
        renew_deadline = now_ms + self.config.record_lock_duration_ms
        for first, last, types in plan:
            single = types[0] if len(types) == 1 else None
            for i, off in enumerate(range(first, last + 1)):
                ack = single if single is not None else types[i]
                st = cache[off]
                if ack is AcknowledgeType.RENEW:
                    st.lock_deadline_ms = renew_deadline
                    continue
                if ack is AcknowledgeType.ACCEPT:
                    st.state = RecordState.ACKNOWLEDGED
                    st.member_id = EMPTY_MEMBER_ID
                    st.lock_deadline_ms = -1
                elif ack is AcknowledgeType.RELEASE:
                    self._make_available(st)
                else:  # REJECT, GAP
                    self._finish(st, RecordState.ARCHIVED)
                changed.append(off)
        self._advance_start()
        return changed

    def release_acquired_records(self, member_id: str, *, decrease_delivery_count: bool = False) -> list[int]:
        """Release every record ``member_id`` holds (it left the group, or its session closed).

        ``decrease_delivery_count`` undoes the acquire's count for records that never reached
        the member (Kafka's DeliveryCountOps.DECREASE); such records go back AVAILABLE.
        """
        changed: list[int] = []
        for off, st in self._cache.items():
            if st.state is RecordState.ACQUIRED and st.member_id == member_id:
                if decrease_delivery_count:
                    st.delivery_count = max(0, st.delivery_count - 1)
                    st.state = RecordState.AVAILABLE
                    st.member_id = EMPTY_MEMBER_ID
                    st.lock_deadline_ms = -1
                else:
                    self._make_available(st)
                changed.append(off)
        self._advance_start()
        return changed

    # ---------------------------------------------------------------- locks and log start

    def next_lock_deadline(self) -> int | None:
        """The earliest acquisition-lock deadline (ms), None when no record is acquired."""
        deadlines = [s.lock_deadline_ms for s in self._cache.values() if s.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def expire_locks(self, now_ms: int) -> list[int]:
        """Time out every lock whose deadline is <= now_ms: AVAILABLE, or ARCHIVED at the delivery limit."""
        changed: list[int] = []
        for off, st in self._cache.items():
            if st.state is RecordState.ACQUIRED and st.lock_deadline_ms <= now_ms:
                self._make_available(st)
                changed.append(off)
        if changed:
            logger.debug("acquisition locks expired for %d records", len(changed))
        self._advance_start()
        return changed

    def update_log_start_offset(self, log_start_offset: int) -> None:
        """The log's start moved (retention, DeleteRecords): records below it are gone, so archived."""
        if log_start_offset <= self._start:
            return
        for off in range(self._start, min(log_start_offset, self._next_new)):
            st = self._cache.get(off)
            if st is not None:
                self._finish(st, RecordState.ARCHIVED)
        if log_start_offset >= self._next_new:
            self._cache.clear()
            self._start = self._next_new = log_start_offset
            return
        self._advance_start()

    # ---------------------------------------------------------------- persistence

    def state_batches(self) -> list[PersisterStateBatch]:
        """The cached state as Kafka's persister writes it: runs of equal (state, delivery count).

        ACQUIRED is written as AVAILABLE: a lock does not outlive the broker that granted it.
        """
        out: list[PersisterStateBatch] = []
        for off in range(self._start, self._next_new):
            st = self._cache[off]
            state = RecordState.AVAILABLE if st.state is RecordState.ACQUIRED else st.state
            if out and out[-1].last_offset == off - 1 and out[-1].delivery_state == state \
                    and out[-1].delivery_count == st.delivery_count:
                prev = out[-1]
                out[-1] = PersisterStateBatch(prev.first_offset, off, prev.delivery_state, prev.delivery_count)
            else:
                out.append(PersisterStateBatch(off, off, int(state), st.delivery_count))
        return out

    # ---------------------------------------------------------------- internals

    def _make_available(self, st: InFlightState) -> None:
        # Kafka's tryUpdateState: back to AVAILABLE unless the delivery limit is reached.
        if st.delivery_count >= self.config.delivery_count_limit:
            self._finish(st, RecordState.ARCHIVED)
            return
        st.state = RecordState.AVAILABLE
        st.member_id = EMPTY_MEMBER_ID
        st.lock_deadline_ms = -1

    @staticmethod
    def _finish(st: InFlightState, state: RecordState) -> None:
        st.state = state
        st.member_id = EMPTY_MEMBER_ID
        st.lock_deadline_ms = -1

    def _advance_start(self) -> None:
        while self._start < self._next_new:
            st = self._cache[self._start]
            if st.state is not RecordState.ACKNOWLEDGED and st.state is not RecordState.ARCHIVED:
                break
            del self._cache[self._start]
            self._start += 1
