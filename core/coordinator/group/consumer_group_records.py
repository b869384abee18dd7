"""Builders for the KIP-848 records a consumer group writes to ``__consumer_offsets``.

One function per record of Kafka's ``GroupCoordinatorRecordHelpers`` (``newConsumerGroup*``):
each returns a ``(key, value)`` pair of the schema classes in :mod:`.records`, ``value`` being
``None`` for a tombstone. The group coordinator shell persists them and hands each one back
to :meth:`ConsumerGroup.replay`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from strom.core.coordinator.group import records as R
from strom.core.coordinator.group.consumer_group_member import ConsumerGroupMember, Partitions, normalize

Record = tuple[R.CoordinatorMessage, R.CoordinatorMessage | None]


def to_topic_partitions(parts: Partitions) -> list[R.TopicPartitions]:
    """Partitions map -> the records' ``TopicPartitions`` list (sorted, so records are stable)."""
    return [R.TopicPartitions(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(parts.items(), key=lambda kv: str(kv[0])) if ps]


def from_topic_partitions(items: Iterable[R.TopicPartitions]) -> dict[uuid.UUID, frozenset[int]]:
    out: dict[uuid.UUID, set[int]] = {}
    for tp in items:
        out.setdefault(tp.topic_id, set()).update(tp.partitions)
    return normalize(out)


def group_epoch(group_id: str, epoch: int) -> Record:
    return R.ConsumerGroupMetadataKey(group_id=group_id), R.ConsumerGroupMetadataValue(epoch=epoch)


def group_tombstone(group_id: str) -> Record:
    return R.ConsumerGroupMetadataKey(group_id=group_id), None


def subscription_metadata(group_id: str, topics: Mapping[str, tuple[uuid.UUID, int]]) -> Record:
    value = R.ConsumerGroupPartitionMetadataValue(topics=[
        R.TopicMetadata(topic_id=tid, topic_name=name, num_partitions=n)
        for name, (tid, n) in sorted(topics.items())])
    return R.ConsumerGroupPartitionMetadataKey(group_id=group_id), value


def subscription_metadata_tombstone(group_id: str) -> Record:
    return R.ConsumerGroupPartitionMetadataKey(group_id=group_id), None


def member_metadata(group_id: str, m: ConsumerGroupMember) -> Record:
    value = R.ConsumerGroupMemberMetadataValue(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=sorted(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex,
        rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor)
    return R.ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=m.member_id), value


def member_metadata_tombstone(group_id: str, member_id: str) -> Record:
    return R.ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member_id), None


def target_member(group_id: str, member_id: str, parts: Partitions) -> Record:
    return (R.ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id),
            R.ConsumerGroupTargetAssignmentMemberValue(topic_partitions=to_topic_partitions(parts)))


def target_member_tombstone(group_id: str, member_id: str) -> Record:
    return R.ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), None


def target_epoch(group_id: str, epoch: int) -> Record:
    return (R.ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id),
            R.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch))


def target_epoch_tombstone(group_id: str) -> Record:
    return R.ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id), None


def current_assignment(group_id: str, m: ConsumerGroupMember) -> Record:
    value = R.ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=int(m.state),
        assigned_partitions=to_topic_partitions(m.assigned),
        partitions_pending_revocation=to_topic_partitions(m.pending_revocation))
    return R.ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=m.member_id), value


def current_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return R.ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id), None


def member_removal(group_id: str, member_id: str) -> list[Record]:
    """Kafka's order for a leaving member: current assignment, target, then subscription."""
    return [current_assignment_tombstone(group_id, member_id), target_member_tombstone(group_id, member_id),
            member_metadata_tombstone(group_id, member_id)]
