"""One partition's remote segment metadata in memory (Kafka's ``RemoteLogMetadataCache`` with its
``RemoteLogLeaderEpochState`` folded in), built by applying records in log order.

The state machine of :class:`~strom.plugins.hookspecs.storage.RemoteLogSegmentState` is enforced
here: a segment enters as COPY_SEGMENT_STARTED; an update must name a known segment and a valid
transition; DELETE_SEGMENT_FINISHED removes the segment. Only COPY_SEGMENT_FINISHED segments serve
reads (:meth:`segment_for`); a copy in progress or being deleted is listed but never read.

Not thread-safe: the owner serializes access.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

from strom.plugins.hookspecs.storage import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from strom.tiered.exceptions import RemoteSegmentUnknownError, RemoteStateTransitionError

FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED


def epoch_end_offset(metadata: RemoteLogSegmentMetadata, epoch: int) -> int | None:
    """The last offset of ``epoch`` in the segment (``None`` if the segment has no record of it)."""
    if epoch not in metadata.segment_leader_epochs:
        return None
    later = [start for e, start in metadata.segment_leader_epochs.items() if e > epoch]
    return min(later) - 1 if later else metadata.end_offset


class RemoteLogMetadataCache:
    """The remote segments of one partition, and the partition's deletion state."""

    def __init__(self, topic_id_partition: TopicIdPartition) -> None:
        self.topic_id_partition = topic_id_partition
        self._segments: dict[uuid.UUID, RemoteLogSegmentMetadata] = {}  # segment id -> metadata
        # Kafka's RemoteLogLeaderEpochState.highestLogOffset: raised when a segment's copy finishes,
        # never lowered by deletion.
        self._highest_offset: dict[int, int] = {}
        self.delete_state: RemotePartitionDeleteState | None = None

    def check_add(self, metadata: RemoteLogSegmentMetadata) -> None:
        if metadata.topic_id_partition != self.topic_id_partition:
            raise ValueError(f"{metadata.segment_id} is not of {self.topic_id_partition}")
        if not RemoteLogSegmentState.is_valid_transition(None, metadata.state):
            raise RemoteStateTransitionError(
                f"a new remote segment must be COPY_SEGMENT_STARTED, not {metadata.state.name} ({metadata.segment_id})")
        existing = self._segments.get(metadata.segment_id.id)
        if existing is not None and existing != metadata:
            raise RemoteStateTransitionError(f"remote segment {metadata.segment_id} is already recorded "
                                             f"({existing.state.name})")

    def add_copy_in_progress_segment(self, metadata: RemoteLogSegmentMetadata) -> None:
        self.check_add(metadata)
        self._segments[metadata.segment_id.id] = metadata

    def check_update(self, update: RemoteLogSegmentMetadataUpdate) -> RemoteLogSegmentMetadata:
        existing = self._segments.get(update.segment_id.id)
        if existing is None:
            raise RemoteSegmentUnknownError(f"no remote segment {update.segment_id} in {self.topic_id_partition}")
        if not RemoteLogSegmentState.is_valid_transition(existing.state, update.state):
            raise RemoteStateTransitionError(f"remote segment {update.segment_id} cannot go from "
                                             f"{existing.state.name} to {update.state.name}")
        return existing

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        existing = self.check_update(update)
        if update.state is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
            del self._segments[update.segment_id.id]
            return
        updated = existing.create_with_update(update)
        self._segments[update.segment_id.id] = updated
        if update.state is FINISHED:
            for epoch in updated.segment_leader_epochs:
                end = epoch_end_offset(updated, epoch)
                if end is not None and end > self._highest_offset.get(epoch, -1):
                    self._highest_offset[epoch] = end

    def check_partition_delete(self, metadata: RemotePartitionDeleteMetadata) -> None:
        if not RemotePartitionDeleteState.is_valid_transition(self.delete_state, metadata.state):
            before = self.delete_state.name if self.delete_state else "no deletion"
            raise RemoteStateTransitionError(f"remote partition {self.topic_id_partition} cannot go from "
                                             f"{before} to {metadata.state.name}")

    def put_partition_delete(self, metadata: RemotePartitionDeleteMetadata) -> None:
        self.check_partition_delete(metadata)
        self.delete_state = metadata.state

    # -- reads ------------------------------------------------------------------------------

    def segment_for(self, epoch: int, offset: int) -> RemoteLogSegmentMetadata | None:
        """Kafka's ``remoteLogSegmentMetadata(leaderEpoch, offset)``: of the finished segments holding
        ``epoch``, the one whose epoch range starts last at or below ``offset``, if it reaches it."""
        best: RemoteLogSegmentMetadata | None = None
        for m in self._segments.values():
            start = m.segment_leader_epochs.get(epoch)
            if m.state is FINISHED and start is not None and start <= offset and \
                    (best is None or start > best.segment_leader_epochs[epoch]):
                best = m
        if best is None:
            return None
        end = epoch_end_offset(best, epoch)
        return best if end is not None and offset <= end else None

    def highest_offset_for_epoch(self, epoch: int) -> int | None:
        return self._highest_offset.get(epoch)

    def next_segment_with_txn_index(self, epoch: int, offset: int) -> RemoteLogSegmentMetadata | None:
        """The first finished segment holding records of ``epoch`` at or after ``offset`` whose
        transaction index is not empty."""
        candidates = []
        for m in self._segments.values():
            end = epoch_end_offset(m, epoch)
            if m.state is FINISHED and not m.txn_index_empty and end is not None and end >= offset:
                candidates.append(m)
        return min(candidates, key=lambda m: m.start_offset, default=None)

    def segments(self, epoch: int | None = None) -> Iterator[RemoteLogSegmentMetadata]:
        """Every recorded segment (any state but deleted), by start offset; with ``epoch``, those
        holding records of that epoch."""
        chosen = [m for m in self._segments.values() if epoch is None or epoch in m.segment_leader_epochs]
        return iter(sorted(chosen, key=lambda m: (m.start_offset, m.end_offset)))

    def remote_log_size(self, epoch: int) -> int:
        return sum(m.segment_size_in_bytes for m in self.segments(epoch))
