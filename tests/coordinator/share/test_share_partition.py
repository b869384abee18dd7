"""The share-partition state machine (Kafka's SharePartition) on its own: no broker, no clock."""

from __future__ import annotations

import pytest

from strom.core.coordinator.share.share_partition import (
    EMPTY_MEMBER_ID,
    AbortedTransaction,
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    AutoOffsetReset,
    FetchedBatch,
    IsolationLevel,
    PersisterStateBatch,
    RecordState,
    ShareAutoOffsetReset,
    SharePartition,
    SharePartitionConfig,
    parse_java_duration_ms,
)
from strom.core.errors import InvalidRecordStateError, InvalidRequestError

LOCK = 1000
A, B = "member-a", "member-b"


def sp(start: int = 0, **kw: int | IsolationLevel) -> SharePartition:
    cfg = SharePartitionConfig(record_lock_duration_ms=LOCK, **kw)  # type: ignore[arg-type]
    return SharePartition(cfg, start)


def ack(first: int, last: int, *types: AcknowledgeType) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, tuple(types))


def batches(*ranges: tuple[int, int]) -> list[FetchedBatch]:
    return [FetchedBatch(a, b) for a, b in ranges]


def test_enum_ids_are_kafkas() -> None:
    assert [int(s) for s in RecordState] == [0, 1, 2, 3, 4]
    assert (AcknowledgeType.GAP, AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT,
            AcknowledgeType.RENEW) == (0, 1, 2, 3, 4)


def test_acquire_then_accept_moves_the_start_offset() -> None:
    p = sp()
    got = p.acquire(A, batches((0, 4), (5, 9)), max_records=100, now_ms=0)
    assert got == [AcquiredRecords(0, 9, 1)]
    assert (p.start_offset, p.end_offset, p.acquired_count()) == (0, 9, 10)
    # Accepting out of order leaves the start where the first unfinished record is.
    assert p.acknowledge(A, [ack(3, 9, AcknowledgeType.ACCEPT)], now_ms=1) == list(range(3, 10))
    assert p.start_offset == 0
    p.acknowledge(A, [ack(0, 2, AcknowledgeType.ACCEPT)], now_ms=1)
    assert (p.start_offset, p.next_fetch_offset(), p.acquired_count()) == (10, 10, 0)
    # Nothing acquired twice: the same fetch again yields nothing.
    assert p.acquire(B, batches((0, 9)), max_records=100, now_ms=2) == []


def test_max_records_and_redelivery_of_released_records() -> None:
    p = sp()
    assert p.acquire(A, batches((0, 9)), max_records=4, now_ms=0) == [AcquiredRecords(0, 3, 1)]
    assert p.next_fetch_offset() == 4
    assert p.acquire(B, batches((4, 9)), max_records=100, now_ms=0) == [AcquiredRecords(4, 9, 1)]
    p.acknowledge(A, [ack(0, 3, AcknowledgeType.RELEASE, AcknowledgeType.ACCEPT,
                          AcknowledgeType.RELEASE, AcknowledgeType.ACCEPT)], now_ms=1)
    st = p.in_flight(0)
    assert st is not None and st.state is RecordState.AVAILABLE and st.member_id == EMPTY_MEMBER_ID
    assert p.next_fetch_offset() == 0
    # Redelivery: the released records again, delivery count 2, to whoever fetches.
    got = p.acquire(B, batches((0, 9)), max_records=100, now_ms=2)
    assert got == [AcquiredRecords(0, 0, 2), AcquiredRecords(2, 2, 2)]


def test_reject_archives_and_gap_archives() -> None:
    p = sp()
    p.acquire(A, batches((0, 2)), max_records=10, now_ms=0)
    p.acknowledge(A, [ack(0, 2, AcknowledgeType.REJECT, AcknowledgeType.GAP, AcknowledgeType.ACCEPT)], now_ms=0)
    assert p.start_offset == 3
    assert p.acquire(B, batches((0, 2)), max_records=10, now_ms=0) == []


def test_acknowledging_what_one_does_not_hold_is_invalid_record_state_and_atomic() -> None:
    p = sp()
    p.acquire(A, batches((0, 4)), max_records=10, now_ms=0)
    with pytest.raises(InvalidRecordStateError):
        p.acknowledge(B, [ack(0, 0, AcknowledgeType.ACCEPT)], now_ms=0)
    # A batch that is half valid changes nothing; offsets past the acquired records are
    # INVALID_REQUEST (Kafka 4.3.1 answers so), not INVALID_RECORD_STATE.
    with pytest.raises(InvalidRequestError):
        p.acknowledge(A, [ack(0, 1, AcknowledgeType.ACCEPT), ack(4, 6, AcknowledgeType.ACCEPT)], now_ms=0)
    assert p.acquired_count() == 5 and p.start_offset == 0
    p.acknowledge(A, [ack(0, 0, AcknowledgeType.ACCEPT)], now_ms=0)
    with pytest.raises(InvalidRecordStateError):  # already acknowledged: below the start now
        p.acknowledge(A, [ack(0, 0, AcknowledgeType.ACCEPT)], now_ms=0)
    with pytest.raises(InvalidRequestError):
        p.acknowledge(A, [ack(1, 3, AcknowledgeType.ACCEPT, AcknowledgeType.ACCEPT)], now_ms=0)
    with pytest.raises(InvalidRequestError):
        p.acknowledge(A, [ack(3, 1, AcknowledgeType.ACCEPT)], now_ms=0)
    with pytest.raises(InvalidRequestError):
        p.acknowledge(A, [ack(1, 2, AcknowledgeType.ACCEPT), ack(2, 2, AcknowledgeType.ACCEPT)], now_ms=0)
    assert p.acquired_count() == 4


def test_lock_expiry_makes_records_available_and_renew_extends_the_lock() -> None:
    p = sp()
    p.acquire(A, batches((0, 3)), max_records=10, now_ms=0)
    assert p.next_lock_deadline() == LOCK
    assert p.expire_locks(LOCK - 1) == []
    p.acknowledge(A, [ack(2, 3, AcknowledgeType.RENEW)], now_ms=500)
    assert p.expire_locks(LOCK) == [0, 1]
    assert p.next_lock_deadline() == 500 + LOCK
    # A's late acknowledgement of an expired record is refused; B gets it with count 2.
    with pytest.raises(InvalidRecordStateError):
        p.acknowledge(A, [ack(0, 0, AcknowledgeType.ACCEPT)], now_ms=LOCK)
    assert p.acquire(B, batches((0, 3)), max_records=10, now_ms=LOCK) == [AcquiredRecords(0, 1, 2)]
    # Renewed records are still A's.
    p.acknowledge(A, [ack(2, 3, AcknowledgeType.ACCEPT)], now_ms=LOCK + 1)
    assert p.expire_locks(500 + LOCK) == []


def test_delivery_count_limit_archives_a_poison_record() -> None:
    p = sp(delivery_count_limit=3)
    for n in range(1, 4):
        assert p.acquire(A, batches((0, 0)), max_records=1, now_ms=n * LOCK) == [AcquiredRecords(0, 0, n)]
        if n % 2:
            p.acknowledge(A, [ack(0, 0, AcknowledgeType.RELEASE)], now_ms=n * LOCK)
        else:
            p.expire_locks(n * LOCK + LOCK)
    # The third delivery was the last: released/expired it is archived, and the start moves past it.
    assert p.start_offset == 1
    assert p.acquire(A, batches((0, 0)), max_records=1, now_ms=10 * LOCK) == []


def test_lock_expiry_at_the_limit_archives() -> None:
    p = sp(delivery_count_limit=2)
    p.acquire(A, batches((0, 1)), max_records=10, now_ms=0)
    p.expire_locks(LOCK)
    p.acquire(B, batches((0, 1)), max_records=10, now_ms=LOCK)
    p.acknowledge(B, [ack(1, 1, AcknowledgeType.ACCEPT)], now_ms=LOCK)
    p.expire_locks(2 * LOCK)
    assert p.start_offset == 2 and p.in_flight(0) is None


def test_max_record_locks_bounds_the_in_flight_window() -> None:
    p = sp(max_record_locks=5)
    assert p.acquire(A, batches((0, 19)), max_records=100, now_ms=0) == [AcquiredRecords(0, 4, 1)]
    assert not p.can_acquire_records()
    assert p.acquire(B, batches((5, 19)), max_records=100, now_ms=0) == []
    p.acknowledge(A, [ack(0, 1, AcknowledgeType.ACCEPT)], now_ms=0)
    assert p.can_acquire_records()
    assert p.acquire(B, batches((5, 19)), max_records=100, now_ms=0) == [AcquiredRecords(5, 6, 1)]
    # A released record inside a full window can still be redelivered.
    p.acknowledge(A, [ack(2, 2, AcknowledgeType.RELEASE)], now_ms=0)
    assert p.can_acquire_records()
    assert p.acquire(B, batches((2, 19)), max_records=100, now_ms=0) == [AcquiredRecords(2, 2, 2)]


def test_member_leaving_releases_its_records() -> None:
    p = sp()
    p.acquire(A, batches((0, 1)), max_records=10, now_ms=0)
    p.acquire(B, batches((2, 3)), max_records=10, now_ms=0)
    assert p.release_acquired_records(A) == [0, 1]
    assert p.acquired_count() == 2
    assert p.acquire(B, batches((0, 3)), max_records=10, now_ms=0) == [AcquiredRecords(0, 1, 2)]
    assert p.release_acquired_records(B, decrease_delivery_count=True) == [0, 1, 2, 3]
    st0, st2 = p.in_flight(0), p.in_flight(2)
    assert st0 is not None and st0.delivery_count == 1 and st2 is not None and st2.delivery_count == 0


def test_holes_between_batches_are_archived() -> None:
    # Compaction removed offsets 3..6: the start offset must not wait for them.
    p = sp()
    got = p.acquire(A, batches((0, 2), (7, 9)), max_records=100, now_ms=0)
    assert got == [AcquiredRecords(0, 2, 1), AcquiredRecords(7, 9, 1)]
    p.acknowledge(A, [ack(0, 2, AcknowledgeType.ACCEPT), ack(7, 9, AcknowledgeType.ACCEPT)], now_ms=0)
    assert p.start_offset == 10


def test_read_committed_archives_aborted_records_and_hands_out_markers() -> None:
    p = sp(isolation_level=IsolationLevel.READ_COMMITTED)
    fetched = [
        FetchedBatch(0, 1),                                               # plain
        FetchedBatch(2, 4, producer_id=7, is_transactional=True),         # aborted below
        FetchedBatch(5, 6, producer_id=8, is_transactional=True),         # committed
        FetchedBatch(7, 7, producer_id=7, is_control=True, is_abort_marker=True),
        FetchedBatch(8, 8, producer_id=8, is_control=True),
        FetchedBatch(9, 10, producer_id=7, is_transactional=True),        # a later, committed txn of 7
    ]
    got = p.acquire(A, fetched, max_records=100, now_ms=0,
                    aborted_transactions=[AbortedTransaction(producer_id=7, first_offset=2)])
    assert got == [AcquiredRecords(0, 1, 1), AcquiredRecords(5, 10, 1)]
    st = p.in_flight(3)
    assert st is not None and st.state is RecordState.ARCHIVED
    # read_uncommitted hands everything out.
    q = sp()
    assert q.acquire(A, fetched, max_records=100, now_ms=0,
                     aborted_transactions=[AbortedTransaction(7, 2)]) == [AcquiredRecords(0, 10, 1)]


def test_log_start_offset_moving_archives_what_is_gone() -> None:
    p = sp()
    p.acquire(A, batches((0, 9)), max_records=100, now_ms=0)
    p.update_log_start_offset(4)
    assert p.start_offset == 4 and p.acquired_count() == 6
    p.update_log_start_offset(50)
    assert (p.start_offset, p.end_offset, p.next_fetch_offset()) == (50, 50, 50)
    assert p.acquire(A, batches((50, 51)), max_records=10, now_ms=0) == [AcquiredRecords(50, 51, 1)]


def test_state_batches_round_trip_and_acquired_comes_back_available() -> None:
    p = sp(start=100)
    p.acquire(A, batches((100, 109)), max_records=100, now_ms=0)
    p.acknowledge(A, [ack(102, 103, AcknowledgeType.ACCEPT), ack(105, 105, AcknowledgeType.REJECT),
                      ack(106, 106, AcknowledgeType.RELEASE)], now_ms=0)
    state = p.state_batches()
    assert state == [
        PersisterStateBatch(100, 101, RecordState.AVAILABLE, 1),   # acquired: persisted AVAILABLE
        PersisterStateBatch(102, 103, RecordState.ACKNOWLEDGED, 1),
        PersisterStateBatch(104, 104, RecordState.AVAILABLE, 1),
        PersisterStateBatch(105, 105, RecordState.ARCHIVED, 1),
        PersisterStateBatch(106, 109, RecordState.AVAILABLE, 1),
    ]
    r = SharePartition(p.config, p.start_offset, state)
    assert (r.start_offset, r.end_offset, r.acquired_count()) == (100, 109, 0)
    got = r.acquire(B, batches((100, 112)), max_records=100, now_ms=0)
    assert got == [AcquiredRecords(100, 101, 2), AcquiredRecords(104, 104, 2),
                   AcquiredRecords(106, 109, 2), AcquiredRecords(110, 112, 1)]


def test_restore_fills_gaps_available_and_skips_finished_prefix() -> None:
    cfg = SharePartitionConfig(record_lock_duration_ms=LOCK)
    r = SharePartition(cfg, 10, [PersisterStateBatch(5, 11, RecordState.ACKNOWLEDGED, 1),
                                 PersisterStateBatch(15, 15, RecordState.ACQUIRED, 3)])
    # 10..11 acknowledged: the start moves to 12; 12..14 were never written: available, count 0.
    assert (r.start_offset, r.end_offset) == (12, 15)
    assert r.acquire(A, batches((12, 16)), max_records=10, now_ms=0) == [
        AcquiredRecords(12, 14, 1), AcquiredRecords(15, 15, 4), AcquiredRecords(16, 16, 1)]


def test_share_auto_offset_reset() -> None:
    def lookup(ts: int) -> int | None:
        return 40 if ts <= 5_000 else None

    kw = {"log_start_offset": 10, "high_watermark": 90, "now_ms": 10_000, "offset_for_timestamp": lookup}
    assert AutoOffsetReset.parse("latest").start_offset(**kw) == 90  # type: ignore[arg-type]
    assert AutoOffsetReset.parse("EARLIEST").start_offset(**kw) == 10  # type: ignore[arg-type]
    r = AutoOffsetReset.parse("by_duration:PT5S")
    assert (r.strategy, r.duration_ms) == (ShareAutoOffsetReset.BY_DURATION, 5000)
    assert r.start_offset(**kw) == 40  # type: ignore[arg-type]
    # No record that recent: the high watermark.
    assert AutoOffsetReset.parse("by_duration:PT1S").start_offset(**kw) == 90  # type: ignore[arg-type]
    for bad in ("none", "by_duration:", "by_duration:5s", "by_duration:-PT1S", "by_duration:PT"):
        with pytest.raises(ValueError):
            AutoOffsetReset.parse(bad)


def test_java_duration_parse() -> None:
    assert parse_java_duration_ms("PT1H") == 3_600_000
    assert parse_java_duration_ms("P1DT2M3.5S") == 86_400_000 + 120_000 + 3500
    assert parse_java_duration_ms("pt0.001s") == 1
    assert parse_java_duration_ms("-PT2S") == -2000
    for bad in ("P", "PT", "1H", "P1H", "PT1.5H"):
        with pytest.raises(ValueError):
            parse_java_duration_ms(bad)


def test_config_bounds() -> None:
    with pytest.raises(ValueError, match=r"delivery\.count\.limit"):
        SharePartitionConfig(delivery_count_limit=0)
    with pytest.raises(ValueError, match=r"lock\.duration"):
        SharePartitionConfig(record_lock_duration_ms=0)
    with pytest.raises(ValueError, match=r"max\.record\.locks"):
        SharePartitionConfig(max_record_locks=0)
