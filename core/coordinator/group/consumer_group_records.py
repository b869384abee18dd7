"""Builders for the KIP-848 records a consumer group writes to ``__consumer_offsets``.

One function per record of Kafka's ``GroupCoordinatorRecordHelpers`` (``newConsumerGroup*``):
each returns a ``(key, value)`` pair of the schema classes in :mod:`.records`, ``value`` being
``None`` for a tombstone. The group coordinator shell persists them and hands each one back
to :meth:`ConsumerGroup.replay`.

ConsumerGroupCurrentMemberAssignmentValue carries, per topic, the partitions' assignment epochs
(Kafka 4.3, KIP-1251: ``TopicPartitions.assignment_epochs``). A record without them, as older
strom and Kafka builds wrote, still loads: its partitions get the member epoch, as Kafka's
loader gives them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping

from strom.core.coordinator.group import records as R
from strom.core.coordinator.group.consumer_group_member import (
    AssignmentEpochs,
    ConsumerGroupMember,
    Partitions,
    default_assignment_epoch,
    normalize,
)

log = logging.getLogger(__name__)

Record = tuple[R.CoordinatorMessage, R.CoordinatorMessage | None]

CURRENT_ASSIGNMENT_RECORD = 8  # the key version of ConsumerGroupCurrentMemberAssignment


def epoch_topic_partitions(parts: Partitions, epochs: AssignmentEpochs) -> list[R.TopicPartitions]:
    """Partitions with their assignment epochs -> the record's list (sorted, so records are stable)."""
    out = []
    for t, ps in sorted(parts.items(), key=lambda kv: str(kv[0])):
        if ps:
            ordered = sorted(ps)
            known = epochs.get(t, {})
            out.append(R.TopicPartitions(topic_id=t, partitions=ordered,
                                            assignment_epochs=[known[p] for p in ordered]))
    return out


def epochs_from_topic_partitions(group_id: str, member_id: str, items: Iterable[R.TopicPartitions],
                                 member_epoch: int) -> dict[uuid.UUID, dict[int, int]]:
    """The assignment epochs a record holds (Kafka's ``Utils.assignmentFromTopicPartitions``):
    a topic without epochs, or with a list of the wrong length, gets the member epoch (>= 0)."""
    fallback = default_assignment_epoch(member_epoch)
    out: dict[uuid.UUID, dict[int, int]] = {}
    for tp in items:
        epochs = tp.assignment_epochs
        row = out.setdefault(tp.topic_id, {})
        if epochs is not None and len(epochs) == len(tp.partitions):
            row.update(zip(tp.partitions, epochs, strict=True))
            continue
        if epochs is not None:
            log.error("group %s member %s: %d assignment epochs for %d partitions of topic %s; using epoch %d",
                      group_id, member_id, len(epochs), len(tp.partitions), tp.topic_id, fallback)
        row.update(dict.fromkeys(tp.partitions, fallback))
    return out


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
    # Every partition of the member has its epoch (with_assignment keeps them complete).
    epochs = m.with_assignment(m.assigned, m.pending_revocation).assignment_epochs
    value = R.ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=int(m.state),
        assigned_partitions=list(epoch_topic_partitions(m.assigned, epochs)),
        partitions_pending_revocation=list(epoch_topic_partitions(m.pending_revocation, epochs)))
    return R.ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=m.member_id), value


def current_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return R.ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id), None


def member_removal(group_id: str, member_id: str) -> list[Record]:
    """Kafka's order for a leaving member: current assignment, target, then subscription."""
    return [current_assignment_tombstone(group_id, member_id), target_member_tombstone(group_id, member_id),
            member_metadata_tombstone(group_id, member_id)]
