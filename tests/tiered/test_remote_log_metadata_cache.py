"""One partition's remote segment cache (Kafka's RemoteLogMetadataCache), without a broker."""

from __future__ import annotations

import uuid

import pytest

from strom.plugins.hookspecs.storage import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from strom.tiered.exceptions import RemoteSegmentUnknownError, RemoteStateTransitionError
from strom.tiered.remote_log_metadata_cache import RemoteLogMetadataCache, epoch_end_offset

S = RemoteLogSegmentState
TIP = TopicIdPartition(uuid.uuid4(), "t", 0)


def seg(start: int, end: int, epochs: dict[int, int]) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(TIP), start, end, 0, 1, 0, end - start + 1, epochs)


def up(m: RemoteLogSegmentMetadata, state: RemoteLogSegmentState) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(m.segment_id, 1, None, state, 1)


def test_only_finished_segments_serve_reads_and_deletion_removes() -> None:
    cache = RemoteLogMetadataCache(TIP)
    a, b = seg(0, 99, {0: 0, 2: 60}), seg(100, 199, {2: 100})
    for m in (a, b):
        cache.add_copy_in_progress_segment(m)
    assert cache.segment_for(0, 10) is None and cache.highest_offset_for_epoch(0) is None
    cache.update_remote_log_segment_metadata(up(a, S.COPY_SEGMENT_FINISHED))
    assert cache.segment_for(0, 59) is not None and cache.segment_for(0, 60) is None  # epoch 2 from 60
    assert cache.segment_for(2, 60) is not None and cache.segment_for(2, 150) is None  # b unfinished
    assert (cache.highest_offset_for_epoch(0), cache.highest_offset_for_epoch(2)) == (59, 99)
    assert epoch_end_offset(a, 0) == 59 and epoch_end_offset(a, 2) == 99 and epoch_end_offset(a, 1) is None
    cache.update_remote_log_segment_metadata(up(b, S.COPY_SEGMENT_FINISHED))
    assert [m.start_offset for m in cache.segments(2)] == [0, 100] and cache.remote_log_size(2) == 200
    cache.update_remote_log_segment_metadata(up(a, S.DELETE_SEGMENT_STARTED))
    assert cache.segment_for(0, 10) is None  # being deleted: listed, not read
    assert [m.start_offset for m in cache.segments()] == [0, 100]
    cache.update_remote_log_segment_metadata(up(a, S.DELETE_SEGMENT_FINISHED))
    assert [m.start_offset for m in cache.segments()] == [100]
    assert cache.highest_offset_for_epoch(0) == 59  # Kafka keeps the epoch's highest offset
    with pytest.raises(RemoteSegmentUnknownError):
        cache.update_remote_log_segment_metadata(up(a, S.DELETE_SEGMENT_FINISHED))


def test_transitions_are_enforced() -> None:
    cache = RemoteLogMetadataCache(TIP)
    a = seg(0, 9, {0: 0})
    with pytest.raises(RemoteStateTransitionError):
        cache.add_copy_in_progress_segment(RemoteLogSegmentMetadata(
            a.segment_id, 0, 9, 0, 1, 0, 10, {0: 0}, state=S.COPY_SEGMENT_FINISHED))
    cache.add_copy_in_progress_segment(a)
    cache.add_copy_in_progress_segment(a)  # the same record again (a replay) is idempotent
    with pytest.raises(RemoteStateTransitionError):
        cache.update_remote_log_segment_metadata(up(a, S.DELETE_SEGMENT_FINISHED))
    cache.update_remote_log_segment_metadata(up(a, S.COPY_SEGMENT_FINISHED))
    cache.update_remote_log_segment_metadata(up(a, S.COPY_SEGMENT_FINISHED))  # self-transition: retries
    with pytest.raises(RemoteStateTransitionError):
        cache.add_copy_in_progress_segment(a)  # re-adding a finished segment would roll it back
    P = RemotePartitionDeleteState
    with pytest.raises(RemoteStateTransitionError):
        cache.put_partition_delete(RemotePartitionDeleteMetadata(TIP, P.DELETE_PARTITION_STARTED, 1, 1))
    for state in (P.DELETE_PARTITION_MARKED, P.DELETE_PARTITION_STARTED, P.DELETE_PARTITION_FINISHED):
        cache.put_partition_delete(RemotePartitionDeleteMetadata(TIP, state, 1, 1))
    assert cache.delete_state is P.DELETE_PARTITION_FINISHED


def test_next_segment_with_txn_index() -> None:
    from dataclasses import replace

    cache = RemoteLogMetadataCache(TIP)
    plain = replace(seg(0, 99, {0: 0}), txn_index_empty=True)
    aborted = seg(100, 199, {0: 100})  # txn_index_empty defaults to False: it has entries
    later = seg(200, 299, {1: 200})
    for m in (plain, aborted, later):
        cache.add_copy_in_progress_segment(m)
    assert cache.next_segment_with_txn_index(0, 0) is None  # nothing finished yet
    for m in (plain, aborted, later):
        cache.update_remote_log_segment_metadata(up(m, S.COPY_SEGMENT_FINISHED))
    found = cache.next_segment_with_txn_index(0, 0)
    assert found is not None and found.start_offset == 100  # the empty one is skipped
    assert cache.next_segment_with_txn_index(0, 200) is None  # epoch 0 ends at 199
    found = cache.next_segment_with_txn_index(1, 0)
    assert found is not None and found.start_offset == 200
