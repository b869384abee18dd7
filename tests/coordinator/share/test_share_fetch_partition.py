"""SharePartition cases found by the ShareFetch path (strom.core.share): no broker, no clock."""

from __future__ import annotations

import pytest

from strom.core.coordinator.share.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    FetchedBatch,
    RecordState,
    SharePartition,
    SharePartitionConfig,
)
from strom.core.errors import InvalidRecordStateError, InvalidRequestError

A, B = "member-a", "member-b"


def test_lock_limit_mid_batch_archives_nothing() -> None:
    """The record-lock window fills in the middle of a batch: the batches after it must not be
    read as a hole over the rest of that batch (its records were archived unseen, so lost)."""
    p = SharePartition(SharePartitionConfig(max_record_locks=100), 0)
    got = p.acquire(A, [FetchedBatch(0, 59), FetchedBatch(60, 119), FetchedBatch(120, 179)],
                    max_records=1000, now_ms=0)
    assert got == [AcquiredRecords(0, 99, 1)]
    assert p.end_offset == 99
    assert p.in_flight(100) is None  # never taken in, so not archived
    p.acknowledge(A, [AcknowledgementBatch(0, 99, (AcknowledgeType.ACCEPT,))], now_ms=1)
    got = p.acquire(B, [FetchedBatch(60, 119), FetchedBatch(120, 179)], max_records=1000, now_ms=2)
    assert got == [AcquiredRecords(100, 179, 1)]
    st = p.in_flight(100)
    assert st is not None and st.state is RecordState.ACQUIRED


def test_delivery_complete_count_counts_finished_offsets_past_the_start() -> None:
    p = SharePartition(SharePartitionConfig(), 0)
    p.acquire(A, [FetchedBatch(0, 9)], max_records=100, now_ms=0)
    # 0-1 accepted (the start moves past them), 4 accepted, 5 rejected: 2 finished past the start.
    p.acknowledge(A, [AcknowledgementBatch(0, 1, (AcknowledgeType.ACCEPT,)),
                      AcknowledgementBatch(4, 4, (AcknowledgeType.ACCEPT,)),
                      AcknowledgementBatch(5, 5, (AcknowledgeType.REJECT,))], now_ms=1)
    assert p.start_offset == 2
    assert p.delivery_complete_count() == 2


def test_acknowledging_past_the_end_or_below_the_start() -> None:
    """As Kafka 4.3.1 answers (probed): offsets past the acquired records are INVALID_REQUEST, a
    batch wholly below the start offset INVALID_RECORD_STATE, and a batch the start offset moved
    into acknowledges its part from the start on."""
    p = SharePartition(SharePartitionConfig(delivery_count_limit=1), 0)
    p.acquire(A, [FetchedBatch(0, 4)], max_records=100, now_ms=0)
    with pytest.raises(InvalidRequestError):
        p.acknowledge(A, [AcknowledgementBatch(5, 5, (AcknowledgeType.ACCEPT,))], now_ms=1)
    # The locks expire at the delivery limit: 0-4 archived, the start offset moves to 5.
    p.expire_locks(30_001)
    assert p.start_offset == 5
    with pytest.raises(InvalidRecordStateError):
        p.acknowledge(A, [AcknowledgementBatch(0, 4, (AcknowledgeType.ACCEPT,))], now_ms=30_002)
    p.acquire(A, [FetchedBatch(5, 9)], max_records=100, now_ms=30_003)
    p.acknowledge(A, [AcknowledgementBatch(3, 9, (AcknowledgeType.ACCEPT,))], now_ms=30_004)
    assert p.start_offset == 10
