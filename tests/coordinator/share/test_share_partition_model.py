"""SharePartition against its per-offset reference model: the same random operations, the same results.

tests/coordinator/share/reference_share_partition.py is the per-offset implementation of commit
2a7ffaa (one InFlightState per offset). A hypothesis state machine drives it and the production
SharePartition with the same sequences - acquires of random batches (holes, control batches,
aborted transactions under read_committed, batch-optimized whole batches), acknowledgements with
one type or one per offset (valid and invalid ones), lock expiry at random clocks, releases,
log-start moves, reloads from the persisted state batches, a small delivery-count limit - and
compares every return value, every raised error class and, after each step, the offsets,
next_fetch_offset, the counters, in_flight(o) of every offset around the window and
state_batches(). Bounded (max_examples) to run in seconds.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from strom.core.coordinator.share.share_partition import (
    AbortedTransaction,
    AcknowledgementBatch,
    AcknowledgeType,
    FetchedBatch,
    IsolationLevel,
    PersisterStateBatch,
    SharePartition,
    SharePartitionConfig,
)
from tests.coordinator.share.reference_share_partition import ReferenceSharePartition

pytestmark = pytest.mark.unit

MEMBERS = ("m-a", "m-b")
LOCK_MS = 100


def _outcome(fn: Any) -> tuple[str, Any]:
    """A call's result, or the class of what it raised (messages may differ)."""
    try:
        return ("ok", fn())
    except Exception as e:  # the error class is what is compared
        return ("raise", type(e))


def _snap(s: Any) -> tuple[Any, ...] | None:
    return None if s is None else (s.state, s.delivery_count, s.member_id, s.lock_deadline_ms)


@st.composite
def _state_batches(draw: st.DrawFn) -> list[PersisterStateBatch]:
    out: list[PersisterStateBatch] = []
    off = draw(st.integers(0, 12))
    for _ in range(draw(st.integers(0, 5))):
        off += draw(st.integers(0, 4))
        n = draw(st.integers(1, 8))
        # AVAILABLE most often: a reload hands those out again (also through aborted transactions).
        state = draw(st.sampled_from((0, 0, 0, 1, 2, 3, 4)))
        out.append(PersisterStateBatch(off, off + n - 1, state, draw(st.integers(0, 4))))
        off += n
    return out


@st.composite
def _fetched(draw: st.DrawFn, start: int) -> tuple[list[FetchedBatch], list[AbortedTransaction]]:
    """Batches as a log read at ``start`` returns them: ascending, maybe holes, some transactional."""
    batches: list[FetchedBatch] = []
    off = start
    for _ in range(draw(st.integers(1, 5))):
        off += draw(st.sampled_from((0, 0, 0, 1, 3)))
        kind = draw(st.sampled_from(("plain", "plain", "txn", "control")))
        if kind == "control":
            batches.append(FetchedBatch(off, off, producer_id=draw(st.sampled_from((1, 2, 2))),
                                        is_transactional=True, is_control=True,
                                        is_abort_marker=draw(st.booleans())))
            off += 1
            continue
        n = draw(st.integers(1, 25))
        pid = draw(st.sampled_from((1, 1, 2))) if kind == "txn" else -1
        batches.append(FetchedBatch(off, off + n - 1, producer_id=pid, is_transactional=kind == "txn"))
        off += n
    aborted = [AbortedTransaction(draw(st.sampled_from((1, 1, 2))), draw(st.integers(start, off)))
               for _ in range(draw(st.sampled_from((0, 1, 1, 2))))]
    return batches, aborted


class SharePartitionModel(RuleBasedStateMachine):
    """The production class and the reference in lockstep."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.real: SharePartition
        self.ref: ReferenceSharePartition
        self.config: SharePartitionConfig

    def _both(self, call: Any) -> Any:
        got = _outcome(lambda: call(self.real))
        want = _outcome(lambda: call(self.ref))
        assert got == want
        return got

    @initialize(start=st.integers(0, 10), batches=_state_batches(), limit=st.integers(1, 4),
                locks=st.sampled_from((3, 10, 40, 200)),
                isolation=st.sampled_from(tuple(IsolationLevel)))
    def load(self, start: int, batches: list[PersisterStateBatch], limit: int, locks: int,
             isolation: IsolationLevel) -> None:
        self.config = SharePartitionConfig(record_lock_duration_ms=LOCK_MS, delivery_count_limit=limit,
                                           max_record_locks=locks, isolation_level=isolation)
        self.real = SharePartition(self.config, start, batches)
        self.ref = ReferenceSharePartition(self.config, start, batches)

    @rule(data=st.data(), member=st.sampled_from(MEMBERS), max_records=st.sampled_from((0, 1, 5, 30, 500)),
          whole=st.booleans(), shift=st.sampled_from((0, 0, 0, -3, 2)))
    def acquire(self, data: st.DataObject, member: str, max_records: int, whole: bool, shift: int) -> None:
        start = max(0, self.ref.next_fetch_offset() + shift)
        batches, aborted = data.draw(_fetched(start))
        now = self.now
        self._both(lambda p: p.acquire(member, batches, max_records=max_records, now_ms=now,
                                       aborted_transactions=aborted, whole_batches=whole))

    @rule(member=st.sampled_from(MEMBERS), sizes=st.lists(st.integers(1, 6), min_size=2, max_size=6),
          max_records=st.sampled_from((3, 500)))
    def acquire_through_aborted_txn(self, member: str, sizes: list[int], max_records: int) -> None:
        """Plain and aborted transactional batches alternating from next_fetch_offset on: what
        splits a redelivered (cached AVAILABLE) run under read_committed."""
        off = self.ref.next_fetch_offset()
        start = off
        batches: list[FetchedBatch] = []
        for k, n in enumerate(sizes):
            batches.append(FetchedBatch(off, off + n - 1, producer_id=1 if k % 2 else -1, is_transactional=k % 2 == 1))
            off += n
        aborted = [AbortedTransaction(1, start)]
        now = self.now
        self._both(lambda p: p.acquire(member, batches, max_records=max_records, now_ms=now,
                                       aborted_transactions=aborted))

    @rule(data=st.data(), member=st.sampled_from(MEMBERS))
    def acknowledge(self, data: st.DataObject, member: str) -> None:
        lo, hi = self.ref.start_offset - 3, self.ref.end_offset + 3
        batches: list[AcknowledgementBatch] = []
        for _ in range(data.draw(st.integers(1, 3))):
            first = data.draw(st.integers(max(-1, lo), hi))
            last = data.draw(st.integers(first - 1, hi + 1)) if data.draw(st.booleans()) \
                else data.draw(st.integers(first, min(hi, first + 40)))
            n = max(1, last - first + 1)
            per_offset = data.draw(st.booleans()) and n <= 60
            count = n if per_offset else 1
            if data.draw(st.integers(0, 20)) == 0:
                count += 1  # a type list that matches neither one type nor one per offset
            types = tuple(data.draw(st.lists(st.sampled_from(tuple(AcknowledgeType)), min_size=count,
                                             max_size=count)))
            if not per_offset and data.draw(st.booleans()):
                types = (AcknowledgeType.ACCEPT,)  # the common case: a whole batch accepted
            batches.append(AcknowledgementBatch(first, last, types))
        now = self.now
        self._both(lambda p: p.acknowledge(member, batches, now_ms=now))

    @rule(data=st.data(), member=st.sampled_from(MEMBERS))
    def acknowledge_acquired_run(self, data: st.DataObject, member: str) -> None:
        """Acknowledge exactly what ``member`` holds from some offset on (what valid clients send)."""
        held = [o for o in range(self.ref.start_offset, self.ref.end_offset + 1)
                if (s := self.ref.in_flight(o)) is not None and s.state.name == "ACQUIRED" and s.member_id == member]
        if not held:
            return
        first = data.draw(st.sampled_from(held))
        last = first
        while last + 1 in held and last - first < data.draw(st.integers(0, 50)):
            last += 1
        t = data.draw(st.sampled_from((AcknowledgeType.ACCEPT, AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE,
                                       AcknowledgeType.REJECT, AcknowledgeType.RENEW)))
        now = self.now
        self._both(lambda p: p.acknowledge(member, [AcknowledgementBatch(first, last, (t,))], now_ms=now))

    @rule(dt=st.integers(0, 150))
    def tick_and_expire(self, dt: int) -> None:
        self.now += dt
        now = self.now
        self._both(lambda p: p.expire_locks(now))

    @rule(member=st.sampled_from(MEMBERS), decrease=st.booleans())
    def release(self, member: str, decrease: bool) -> None:
        self._both(lambda p: p.release_acquired_records(member, decrease_delivery_count=decrease))

    @rule(delta=st.integers(-2, 30))
    def log_start(self, delta: int) -> None:
        target = max(0, self.ref.start_offset + delta)
        self._both(lambda p: p.update_log_start_offset(target))

    @rule()
    def reload(self) -> None:
        """A new leader reads the persisted state back."""
        start, batches = self.ref.start_offset, self.ref.state_batches()
        assert self.real.state_batches() == batches
        self.real = SharePartition(self.config, start, batches)
        self.ref = ReferenceSharePartition(self.config, start, batches)

    @invariant()
    def same_state(self) -> None:
        if not hasattr(self, "ref"):
            return
        real, ref = self.real, self.ref
        assert (real.start_offset, real.end_offset, real.next_fetch_offset(), real.in_flight_count()) == \
            (ref.start_offset, ref.end_offset, ref.next_fetch_offset(), ref.in_flight_count())
        assert (real.can_acquire_records(), real.delivery_complete_count(), real.acquired_count(),
                real.next_lock_deadline()) == \
            (ref.can_acquire_records(), ref.delivery_complete_count(), ref.acquired_count(),
             ref.next_lock_deadline())
        for o in range(max(0, ref.start_offset - 2), ref.end_offset + 3):
            assert _snap(real.in_flight(o)) == _snap(ref.in_flight(o)), o
        assert real.state_batches() == ref.state_batches()


SharePartitionModel.TestCase.settings = settings(
    max_examples=250, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
test_share_partition_matches_per_offset_model = SharePartitionModel.TestCase
