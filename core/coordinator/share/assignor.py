"""Kafka's ``SimpleAssignor`` for share groups (KIP-932): the server-side assignment.

A share group's members read partitions cooperatively, so a partition may go to several members
and every member gets something when there are more members than partitions. The rules, as
Kafka's ``org.apache.kafka.coordinator.group.assignor.SimpleAssignor``:

1. each member is hashed to one partition of its subscribed partitions
   (``abs(javaHash(memberId) % n)``);
2. partitions that step 1 left without a member and that nobody holds in the current
   assignment are dealt round-robin to the (subscribed) members;
3. the current assignment is kept (a member keeps what it holds while it is still subscribed to
   the topic), and the new assignments are added to it.

Homogeneous groups (every member subscribed to the same topics) use the group's member order
for step 2; heterogeneous groups deal each topic's leftovers to that topic's subscribers.
Difference from Kafka: the subscribed topics are taken in sorted topic-id order (Kafka iterates
a Java ``HashSet<Uuid>``), so which partition a hash lands on can differ, the balance does not.
Pure: no I/O, no clock.

It is a plugin like the KIP-848 assignors: it satisfies the assignor hook's
``ConsumerGroupPartitionAssignor`` (``name()`` and ``assign(group_spec, topics)``, as Kafka's
``ShareGroupPartitionAssignor`` extends ``ConsumerGroupPartitionAssignor``) and this module,
registered as the built-in plugin ``simple_assignor``, offers it through ``strom_assignors``.
Share groups use the assignors named by ``group.share.assignors`` (Kafka's key; default
``simple``) that are :class:`ShareGroupPartitionAssignor`; consumer groups never pick it unless
``group.consumer.assignors`` names it.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import Protocol, runtime_checkable

from strom.core.coordinator.runtime import java_string_hashcode
from strom.plugins.hookspecs.assignors import (
    ConsumerGroupPartitionAssignor,
    GroupAssignment,
    GroupSpec,
    MemberAssignment,
    SubscribedTopicDescriber,
)
from strom.plugins.markers import hookimpl

SHARE_ASSIGNORS_CONFIG = "group.share.assignors"
DEFAULT_SHARE_ASSIGNORS = "simple"

TopicIdPartition = tuple[uuid.UUID, int]
# member id -> topic id -> partitions
Assignment = dict[str, dict[uuid.UUID, set[int]]]


class PartitionAssignorError(Exception):
    """Kafka's PartitionAssignorException: the assignment cannot be computed."""


def _java_rem_abs(h: int, n: int) -> int:
    # Java's Math.abs(h % n): its % truncates toward zero, so this is |h| mod n (Python's % floors).
    return abs(h) % n


@runtime_checkable
class ShareGroupPartitionAssignor(ConsumerGroupPartitionAssignor, Protocol):
    """A share-group assignor (Kafka's ``ShareGroupPartitionAssignor``): an assignor whose
    result may give one partition to several members. ``share_group_assignor`` marks it, since a
    Protocol cannot tell the two apart by their methods."""

    share_group_assignor: bool


class SimpleAssignor:
    """The share-group assignor Kafka names ``simple`` (``group.share.assignors`` default)."""

    share_group_assignor = True

    def name(self) -> str:
        return "simple"

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> GroupAssignment:
        """The hook's form: :meth:`compute` over a :class:`GroupSpec`."""
        subscriptions = {m: sorted(s.subscribed_topic_ids) for m, s in group_spec.members.items()}
        counts: dict[uuid.UUID, int] = {}
        for ids in subscriptions.values():
            for topic_id in ids:
                n = topics.num_partitions(topic_id)
                if n >= 0:
                    counts[topic_id] = n
        current = {m: dict(group_spec.member_assignment(m).partitions) for m in group_spec.members}
        out = self.compute(subscriptions, counts, current)
        return GroupAssignment({m: MemberAssignment({t: frozenset(ps) for t, ps in parts.items()})
                                for m, parts in out.items()})

    def compute(self, subscriptions: Mapping[str, Collection[uuid.UUID]], topic_partitions: Mapping[uuid.UUID, int],
               current: Mapping[str, Mapping[uuid.UUID, Collection[int]]] | None = None) -> Assignment:
        """The target assignment of every member.

        ``subscriptions``: member id -> subscribed topic ids (members in the group's order);
        ``topic_partitions``: topic id -> partition count (a subscribed topic missing here is an
        error, as in Kafka); ``current``: member id -> what it is assigned now.
        """
        current = current or {}
        if not subscriptions:
            return {}
        members = list(subscriptions)
        current_by_partition: dict[TopicIdPartition, list[str]] = {}
        for member in members:
            for topic_id, held in current.get(member, {}).items():
                for p in held:
                    current_by_partition.setdefault((topic_id, p), []).append(member)
        subscribed = {m: set(subscriptions[m]) for m in members}
        homogeneous = all(s == subscribed[members[0]] for s in subscribed.values())
        new: dict[TopicIdPartition, list[str]] = {}
        final: dict[str, set[TopicIdPartition]] = {}
        if homogeneous:
            topics = subscribed[members[0]]
            if not topics:
                return {m: {} for m in members}
            target = self._target_partitions(topics, topic_partitions)
            self._hash_assign(target, members, new)
            leftovers = [tp for tp in target if tp not in new and tp not in current_by_partition]
            self._round_robin(members, leftovers, new)
            for tp, holders in current_by_partition.items():
                if tp[0] in topics:
                    for m in holders:
                        final.setdefault(m, set()).add(tp)
        else:
            member_targets = {m: self._target_partitions(s, topic_partitions) for m, s in subscribed.items() if s}
            all_targets: dict[TopicIdPartition, None] = {}
            for targets in member_targets.values():
                all_targets.update(dict.fromkeys(targets))
            topic_members: dict[uuid.UUID, list[str]] = {}
            for m, targets in member_targets.items():
                for tp in targets:
                    holders = topic_members.setdefault(tp[0], [])
                    if m not in holders:
                        holders.append(m)
            for m, targets in member_targets.items():
                self._hash_assign(targets, [m], new)
            leftovers_by_topic: dict[uuid.UUID, list[TopicIdPartition]] = {}
            for tp in all_targets:
                if tp not in new and tp not in current_by_partition:
                    leftovers_by_topic.setdefault(tp[0], []).append(tp)
            for topic_id, leftovers in leftovers_by_topic.items():
                self._round_robin(topic_members[topic_id], leftovers, new)
            for tp, holders in current_by_partition.items():
                for m in holders:
                    if m in topic_members.get(tp[0], ()):
                        final.setdefault(m, set()).add(tp)
        for tp, holders in new.items():
            for m in holders:
                final.setdefault(m, set()).add(tp)
        out: Assignment = {m: {} for m in members}
        for m, tps in final.items():
            for topic_id, index in tps:
                out[m].setdefault(topic_id, set()).add(index)
        return out

    @staticmethod
    def _target_partitions(topics: Collection[uuid.UUID], topic_partitions: Mapping[uuid.UUID, int]) -> list[TopicIdPartition]:
        out: list[TopicIdPartition] = []
        for topic_id in sorted(topics):
            n = topic_partitions.get(topic_id)
            if n is None:
                raise PartitionAssignorError(
                    f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata.")
            out.extend((topic_id, p) for p in range(n))
        return out

    @staticmethod
    def _hash_assign(target: list[TopicIdPartition], members: Collection[str],
                     assignment: dict[TopicIdPartition, list[str]]) -> None:
        if not target:
            return
        for m in members:
            tp = target[_java_rem_abs(java_string_hashcode(m), len(target))]
            assignment.setdefault(tp, []).append(m)

    @staticmethod
    def _round_robin(members: list[str], target: list[TopicIdPartition],
                     assignment: dict[TopicIdPartition, list[str]]) -> None:
        for i, tp in enumerate(target):
            assignment.setdefault(tp, []).append(members[i % len(members)])


@hookimpl
def strom_assignors() -> Sequence[ConsumerGroupPartitionAssignor]:
    return [SimpleAssignor()]
