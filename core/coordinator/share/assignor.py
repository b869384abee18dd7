"""Kafka's ``SimpleAssignor`` for share groups (KIP-932): the server-side assignment.

A share group's members read partitions cooperatively, so a partition may go to several members
and every member gets something when there are more members than partitions. Kafka 4.3.1's
``org.apache.kafka.coordinator.group.assignor.SimpleAssignor`` hands the work to
``SimpleHomogeneousAssignmentBuilder`` (every member subscribed to the same topics) or
``SimpleHeterogeneousAssignmentBuilder`` (per topic, over that topic's subscribers). Both balance
first and stick second:

* ``desiredSharing = ceil(members / partitions)`` members per partition, and each member (by its
  index in the group's member order) a desired count so that the counts differ by one at most;
* the current (target) assignment is kept, minus topics no longer subscribed, minus partitions
  of overfilled members, minus members of over-shared partitions;
* partitions still short of ``desiredSharing`` go to the members still short of their count.

Which member gets which partition depends on Java's ``HashMap``/``HashSet`` iteration order
(member ids, ``TopicIdPartition``s, partition and member indices), so this module walks its maps
in that order (:class:`_JavaHashSet`: buckets of ``hashCode ^ hashCode >>> 16`` over the table
size Java would have) and the result is Kafka's, member for member
(tests/coordinator/share/test_assignor_reference.py runs Kafka's class on the same inputs).
Only partitions the share coordinator has initialized are assignable (Kafka's
``GroupSpec.isPartitionAssignable``; :class:`ShareGroupSpec`). Pure: no I/O, no clock.

It is a plugin like the KIP-848 assignors: it satisfies the assignor hook's
``ConsumerGroupPartitionAssignor`` (``name()`` and ``assign(group_spec, topics)``, as Kafka's
``ShareGroupPartitionAssignor`` extends ``ConsumerGroupPartitionAssignor``) and this module,
registered as the built-in plugin ``simple_assignor``, offers it through ``strom_assignors``.
Share groups use the assignors named by ``group.share.assignors`` (Kafka's key; default
``simple``) that are :class:`ShareGroupPartitionAssignor`; consumer groups never pick it unless
``group.consumer.assignors`` names it.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar, runtime_checkable

from strom.core.coordinator.runtime import java_string_hashcode
from strom.plugins.hookspecs.assignors import (
    ConsumerGroupPartitionAssignor,
    GroupAssignment,
    GroupSpec,
    MemberAssignment,
    MemberSubscription,
    SubscribedTopicDescriber,
)
from strom.plugins.markers import hookimpl

SHARE_ASSIGNORS_CONFIG = "group.share.assignors"
DEFAULT_SHARE_ASSIGNORS = "simple"

TopicIdPartition = tuple[uuid.UUID, int]
# member id -> topic id -> partitions
Assignment = dict[str, dict[uuid.UUID, set[int]]]

K = TypeVar("K", bound=Hashable)


class PartitionAssignorError(Exception):
    """Kafka's PartitionAssignorException: the assignment cannot be computed."""


@runtime_checkable
class ShareGroupPartitionAssignor(ConsumerGroupPartitionAssignor, Protocol):
    """A share-group assignor (Kafka's ``ShareGroupPartitionAssignor``): an assignor whose
    result may give one partition to several members. ``share_group_assignor`` marks it, since a
    Protocol cannot tell the two apart by their methods."""

    share_group_assignor: bool


@dataclass(frozen=True, slots=True)
class ShareGroupSpec(GroupSpec):
    """A share group's :class:`GroupSpec`: ``assignable`` (topic id -> partitions) are the share
    partitions whose state is initialized (Kafka's ``topicPartitionAllowedMap``); None: all."""

    assignable: Mapping[uuid.UUID, Collection[int]] | None = field(default=None)

    def is_partition_assignable(self, topic_id: uuid.UUID, partition: int) -> bool:
        if self.assignable is None:
            return True
        return partition in self.assignable.get(topic_id, ())


def _is_assignable(spec: GroupSpec, topic_id: uuid.UUID, partition: int) -> bool:
    check = getattr(spec, "is_partition_assignable", None)
    return True if check is None else bool(check(topic_id, partition))


# --- Java's hash-table iteration order --------------------------------------------------------

def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _long(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def uuid_hashcode(topic_id: uuid.UUID) -> int:
    """``org.apache.kafka.common.Uuid.hashCode``."""
    h = _long(topic_id.int >> 64) ^ _long(topic_id.int)
    return _int32((h >> 32) ^ h)


def topic_partition_hashcode(tp: TopicIdPartition) -> int:
    """``org.apache.kafka.server.common.TopicIdPartition.hashCode`` (a record: 31 * h(topicId) + partition)."""
    return _int32(31 * uuid_hashcode(tp[0]) + tp[1])


def _int_hash(v: int) -> int:
    return v


def _table_size_for(cap: int) -> int:
    n = 1
    while n < cap:
        n <<= 1
    return n


def _helpers_capacity(expected: int) -> int:
    # AssignorHelpers.newHashMap/newHashSet: new HashMap((int) ((n + 1) / 0.75f + 1)).
    return int((expected + 1) / 0.75 + 1)


class _JavaHashSet(Generic[K]):
    """The keys of a ``java.util.HashMap``/``HashSet`` in Java's iteration order: bucket by
    bucket (spread hash & (table size - 1)), each bucket's list in order. ``put`` appends to its
    bucket, ``computeIfAbsent`` puts the new key at the bucket's head; a resize splits each list
    keeping its order (no bucket is treeified at these sizes)."""

    __slots__ = ("_buckets", "_hash", "_keys", "_table", "_threshold")

    def __init__(self, hash_fn: Callable[[K], int], initial_capacity: int | None = None) -> None:
        self._hash = hash_fn
        self._keys: set[K] = set()
        self._table = 16 if initial_capacity is None else _table_size_for(max(initial_capacity, 1))
        self._threshold = int(self._table * 0.75)
        self._buckets: dict[int, list[K]] = {}

    def _bucket(self, key: K, table: int) -> int:
        h = self._hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (table - 1)

    def add(self, key: K, *, at_head: bool = False) -> bool:
        """``put`` (or, ``at_head``, ``computeIfAbsent``) of a key; False if it was there."""
        if key in self._keys:
            return False
        self._keys.add(key)
        chain = self._buckets.setdefault(self._bucket(key, self._table), [])
        if at_head:
            chain.insert(0, key)
        else:
            chain.append(key)
        if len(self._keys) > self._threshold:
            self._table *= 2
            self._threshold = int(self._table * 0.75)
            old, self._buckets = self._buckets, {}
            for b in sorted(old):
                for k in old[b]:
                    self._buckets.setdefault(self._bucket(k, self._table), []).append(k)
        return True

    def remove(self, key: K) -> bool:
        if key not in self._keys:
            return False
        self._keys.remove(key)
        self._buckets[self._bucket(key, self._table)].remove(key)
        return True

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def ordered(self) -> list[K]:
        return [k for b in sorted(self._buckets) for k in self._buckets[b]]

    def __iter__(self) -> Iterator[K]:
        return iter(self.ordered())


class _JavaHashMap(Generic[K]):
    """A ``java.util.HashMap`` with Java's iteration order (values in a plain dict)."""

    __slots__ = ("_keys", "_values")

    def __init__(self, hash_fn: Callable[[K], int], initial_capacity: int | None = None) -> None:
        self._keys: _JavaHashSet[K] = _JavaHashSet(hash_fn, initial_capacity)
        self._values: dict[K, object] = {}

    def put(self, key: K, value: object, *, at_head: bool = False) -> None:
        self._keys.add(key, at_head=at_head)
        self._values[key] = value

    def get(self, key: K) -> object:
        return self._values.get(key)

    def ordered_keys(self) -> list[K]:
        return self._keys.ordered()


def _int_set(values: Collection[int] = (), capacity: int | None = None) -> _JavaHashSet[int]:
    s: _JavaHashSet[int] = _JavaHashSet(_int_hash, capacity)
    for v in values:
        s.add(v)
    return s


def _copy_set(values: Collection[int]) -> _JavaHashSet[int]:
    # new HashSet<>(Collection): HashMap(max((int) (size / .75f) + 1, 16)).
    return _int_set(list(values), max(int(len(values) / 0.75) + 1, 16))


def _java_member_order(member_ids: Collection[str]) -> list[str]:
    """``GroupSpec.memberIds()``: Kafka's TargetAssignmentBuilder puts the members in a
    ``new HashMap<>()`` in the group's order."""
    s: _JavaHashSet[str] = _JavaHashSet(java_string_hashcode)
    for m in member_ids:
        s.add(m)
    return s.ordered()


def _java_topic_order(topic_ids: Collection[uuid.UUID]) -> list[uuid.UUID]:
    s: _JavaHashSet[uuid.UUID] = _JavaHashSet(uuid_hashcode)
    for t in sorted(topic_ids):
        s.add(t)
    return s.ordered()


class MemberTopics:
    """A member's assignment as Kafka's assignors build it: a ``HashMap<Uuid, Set<Integer>>``
    whose topic order is Java's (the next assignment's input keeps it, as the coordinator's
    records do)."""

    __slots__ = ("_order", "_parts")

    def __init__(self, capacity: int | None = None) -> None:
        self._order: _JavaHashSet[uuid.UUID] = _JavaHashSet(uuid_hashcode, capacity)
        self._parts: dict[uuid.UUID, _JavaHashSet[int]] = {}

    def put(self, topic_id: uuid.UUID, partitions: _JavaHashSet[int]) -> None:
        self._order.add(topic_id)
        self._parts[topic_id] = partitions

    def get(self, topic_id: uuid.UUID) -> _JavaHashSet[int] | None:
        return self._parts.get(topic_id)

    def pop(self, topic_id: uuid.UUID) -> None:
        if self._parts.pop(topic_id, None) is not None:
            self._order.remove(topic_id)

    def add_partition(self, topic_id: uuid.UUID, partition: int) -> None:
        """``computeIfAbsent(topicId, k -> new HashSet<>()).add(partition)``."""
        if topic_id not in self._parts:
            self._order.add(topic_id, at_head=True)
            self._parts[topic_id] = _int_set()
        self._parts[topic_id].add(partition)

    def as_dict(self) -> dict[uuid.UUID, frozenset[int]]:
        return {t: frozenset(self._parts[t]) for t in self._order.ordered()}


def _deep_copy(assignment: Mapping[uuid.UUID, Collection[int]]) -> MemberTopics:
    # AssignorHelpers.deepCopyAssignment: new HashMap<>(size), each set a new HashSet<>(set).
    out = MemberTopics(len(assignment))
    for t in _ordered_topics(assignment):
        out.put(t, _copy_set(sorted(assignment[t])))
    return out


def _ordered_topics(assignment: Mapping[uuid.UUID, Collection[int]]) -> list[uuid.UUID]:
    """A member's current assignment as Kafka's coordinator holds it (a ``HashMap`` filled from
    its target-assignment record, in the order the mapping gives)."""
    s: _JavaHashSet[uuid.UUID] = _JavaHashSet(uuid_hashcode)
    for t in assignment:
        s.add(t)
    return s.ordered()


def _as_dict(assignment: Mapping[uuid.UUID, Collection[int]] | MemberTopics) -> dict[uuid.UUID, frozenset[int]]:
    if isinstance(assignment, MemberTopics):
        return assignment.as_dict()
    return {t: frozenset(assignment[t]) for t in _ordered_topics(assignment)}


def _ordered_partitions(partitions: Collection[int]) -> list[int]:
    if isinstance(partitions, _JavaHashSet):
        return partitions.ordered()
    return _int_set(sorted(partitions)).ordered()


def _desired_counts(sharing: int, partitions: int, members: int) -> list[int]:
    precise = sharing * partitions / members
    return [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(members)]


class _Homogeneous:
    """``SimpleHomogeneousAssignmentBuilder``."""

    def __init__(self, spec: GroupSpec, member_ids: list[str], topics: SubscribedTopicDescriber) -> None:
        self.member_ids = member_ids
        self.subscribed = _java_topic_order(spec.member_subscription(member_ids[0]).subscribed_topic_ids)
        n = len(member_ids)
        self.target: list[TopicIdPartition] = []
        for topic_id in self.subscribed:
            count = topics.num_partitions(topic_id)
            if count == -1:
                raise PartitionAssignorError(
                    f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata.")
            self.target.extend((topic_id, p) for p in range(count) if _is_assignable(spec, topic_id, p))
        p_count = len(self.target)
        self.sharing = 0 if p_count == 0 else (n + p_count - 1) // p_count
        self.desired = _desired_counts(self.sharing, p_count, n)
        self.old: dict[int, Mapping[uuid.UUID, Collection[int]]] = {
            i: spec.member_assignment(m).partitions for i, m in enumerate(member_ids)}
        self.new: dict[int, MemberTopics] = {}
        self.by_partition: _JavaHashMap[TopicIdPartition] = _JavaHashMap(topic_partition_hashcode,
                                                                          _helpers_capacity(p_count))
        self.by_member: dict[int, _JavaHashSet[TopicIdPartition]] = {}
        self.unfilled = _int_set(capacity=_helpers_capacity(n))
        self.overfilled = _int_set(capacity=_helpers_capacity(n))

    def _members_of(self, tp: TopicIdPartition) -> _JavaHashSet[int]:
        s = self.by_partition.get(tp)
        if s is None:
            s = _int_set()
            self.by_partition.put(tp, s, at_head=True)  # computeIfAbsent
        assert isinstance(s, _JavaHashSet)
        return s

    def _new_of(self, i: int) -> MemberTopics:
        if i not in self.new:
            self.new[i] = _deep_copy(self.old[i])
        return self.new[i]

    def build(self) -> dict[int, dict[uuid.UUID, frozenset[int]]]:
        if not self.subscribed:
            return {}
        self._revoke_unassignable()
        self._revoke_overfilled()
        self._revoke_overshared()
        for tp in self.target:
            self._members_of(tp)
        self._assign_remaining()
        return {i: _as_dict(self.new.get(i, self.old[i])) for i in range(len(self.member_ids))}

    def _revoke_unassignable(self) -> None:
        subscribed = set(self.subscribed)
        for i in range(len(self.member_ids)):  # newHashMap(n) of member indices: ascending
            old = self.old[i]
            copied = False
            count = 0
            desired = self.desired[i]
            for topic_id in _ordered_topics(old):
                if topic_id in subscribed:
                    for p in _ordered_partitions(old[topic_id]):
                        tp = (topic_id, p)
                        count += 1
                        self._members_of(tp).add(i)
                        self.by_member.setdefault(i, _JavaHashSet(topic_partition_hashcode)).add(tp)
                        if count >= desired and not copied:
                            self.new[i] = _deep_copy(old)
                            copied = True
                else:
                    if not copied:
                        self.new[i] = _deep_copy(old)
                        copied = True
                    self.new[i].pop(topic_id)
            if count < desired:
                self.unfilled.add(i)
            elif count > desired:
                self.overfilled.add(i)

    def _revoke_overfilled(self) -> None:
        for i in self.overfilled:
            desired = self.desired[i]
            held = self.by_member[i]
            if len(held) > desired:
                for tp in held.ordered():
                    self._new_of(i).get(tp[0]).remove(tp[1])  # type: ignore[union-attr]
                    self._members_of(tp).remove(i)
                    held.remove(tp)
                    if len(held) == desired:
                        break

    def _revoke_overshared(self) -> None:
        for tp in self.by_partition.ordered_keys():
            members = self._members_of(tp)
            count = len(members)
            if count > self.sharing:
                for i in members.ordered():
                    partitions = self._new_of(i).get(tp[0])
                    if partitions is not None and partitions.remove(tp[1]):
                        count -= 1
                        members.remove(i)
                        self.by_member[i].remove(tp)
                        self.unfilled.add(i)
                    if count <= self.sharing:
                        break

    def _assign_remaining(self) -> None:
        if not len(self.unfilled):
            return
        members = _MemberIterator(self.unfilled)
        assigned_this_pass = False
        for tp in self.by_partition.ordered_keys():
            holders = self._members_of(tp)
            to_make = self.sharing - len(holders)
            while to_make > 0:
                if not members.has_next():
                    if not assigned_this_pass:
                        break
                    members = _MemberIterator(self.unfilled)
                    assigned_this_pass = False
                    if not members.has_next():
                        break  # Java's next() would throw; all members are filled
                i = members.next()
                if i not in holders:
                    self._new_of(i).add_partition(tp[0], tp[1])
                    held = self.by_member.setdefault(i, _JavaHashSet(topic_partition_hashcode))
                    held.add(tp)
                    to_make -= 1
                    assigned_this_pass = True
                    if len(held) >= self.desired[i]:
                        members.remove()
            if not len(self.unfilled):
                break


class _MemberIterator:
    """A Java ``HashSet`` iterator over member indices with ``remove()``."""

    def __init__(self, members: _JavaHashSet[int]) -> None:
        self.members = members
        self.order = members.ordered()
        self.pos = 0

    def has_next(self) -> bool:
        return self.pos < len(self.order)

    def next(self) -> int:
        self.pos += 1
        return self.order[self.pos - 1]

    def remove(self) -> None:
        self.members.remove(self.order[self.pos - 1])


class _Heterogeneous:
    """``SimpleHeterogeneousAssignmentBuilder``: each subscribed topic over its subscribers."""

    def __init__(self, spec: GroupSpec, member_ids: list[str], topics: SubscribedTopicDescriber) -> None:
        self.member_ids = member_ids
        all_topics: _JavaHashSet[uuid.UUID] = _JavaHashSet(uuid_hashcode)
        for m in member_ids:
            for t in _java_topic_order(spec.member_subscription(m).subscribed_topic_ids):
                all_topics.add(t)
        self.subscribed = all_topics.ordered()
        self.targets: dict[uuid.UUID, list[int]] = {}
        for topic_id in self.subscribed:
            count = topics.num_partitions(topic_id)
            if count == -1:
                raise PartitionAssignorError(
                    f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata.")
            self.targets[topic_id] = [p for p in range(count) if _is_assignable(spec, topic_id, p)]
        self.subscribers: dict[uuid.UUID, list[int]] = {}
        for i, m in enumerate(member_ids):
            for t in _java_topic_order(spec.member_subscription(m).subscribed_topic_ids):
                self.subscribers.setdefault(t, []).append(i)
        self.old: dict[int, Mapping[uuid.UUID, Collection[int]]] = {
            i: spec.member_assignment(m).partitions for i, m in enumerate(member_ids)}
        self.new: dict[int, MemberTopics] = {}

    def build(self) -> dict[int, dict[uuid.UUID, frozenset[int]]]:
        if not self.subscribed:
            return {}
        for topic_id in self.subscribed:
            self._build_topic(topic_id, self.targets[topic_id], self.subscribers[topic_id])
        return {i: _as_dict(self.new.get(i, self.old[i])) for i in range(len(self.member_ids))}

    def _new_of(self, i: int) -> MemberTopics:
        if i not in self.new:
            self.new[i] = _deep_copy(self.old[i])
        return self.new[i]

    def _build_topic(self, topic_id: uuid.UUID, targets: list[int], subscribers: list[int]) -> None:
        n = len(self.member_ids)
        by_partition: _JavaHashMap[int] = _JavaHashMap(_int_hash, _helpers_capacity(len(targets)))
        by_member: _JavaHashMap[int] = _JavaHashMap(_int_hash, _helpers_capacity(len(subscribers)))
        sharing = 0 if not targets else (len(subscribers) + len(targets) - 1) // len(targets)
        desired = [0] * n
        for j, c in enumerate(_desired_counts(sharing, len(targets), len(subscribers))):
            desired[subscribers[j]] = c

        def holders(p: int, capacity: int | None = None) -> _JavaHashSet[int]:
            s = by_partition.get(p)
            if s is None:
                s = _int_set(capacity=capacity)
                by_partition.put(p, s, at_head=True)  # computeIfAbsent
            assert isinstance(s, _JavaHashSet)
            return s

        def held(i: int) -> _JavaHashSet[int]:
            s = by_member.get(i)
            if s is None:
                s = _int_set()
                by_member.put(i, s, at_head=True)  # computeIfAbsent
            assert isinstance(s, _JavaHashSet)
            return s

        # revokeUnassignablePartitions: gather the current holders of this topic's partitions.
        for i in range(n):
            old = self.old[i]
            if not old or topic_id not in old:
                continue
            for p in _ordered_partitions(old[topic_id]):
                holders(p).add(i)
                held(i).add(p)
        # revokeOverfilledMembers
        for i in by_member.ordered_keys():
            mine = held(i)
            if len(mine) > desired[i]:
                for p in mine.ordered():
                    if len(mine) <= desired[i]:
                        break
                    holders(p).remove(i)
                    mine.remove(p)
                    self._new_of(i).get(topic_id).remove(p)  # type: ignore[union-attr]
        # revokeOversharedPartitions
        for p in by_partition.ordered_keys():
            members = holders(p)
            count = len(members)
            if count > sharing:
                for i in members.ordered():
                    partitions = self._new_of(i).get(topic_id)
                    if partitions is not None and partitions.remove(p):
                        count -= 1
                        members.remove(i)
                        held(i).remove(p)
                    if count <= sharing:
                        break
        for p in targets:
            holders(p, _helpers_capacity(len(subscribers)))
        # assignRemainingPartitions
        unfilled = _int_set(capacity=_helpers_capacity(n))
        for i in subscribers:
            if (len(held(i)) if by_member.get(i) is not None else 0) < desired[i]:
                unfilled.add(i)
        it = _MemberIterator(unfilled)
        assigned_this_pass = False
        for p in by_partition.ordered_keys():
            members = holders(p)
            to_make = sharing - len(members)
            while to_make > 0:
                if not it.has_next():
                    if not assigned_this_pass:
                        break
                    it = _MemberIterator(unfilled)
                    assigned_this_pass = False
                    if not it.has_next():
                        break
                i = it.next()
                if i not in members:
                    self._new_of(i).add_partition(topic_id, p)
                    held(i).add(p)
                    to_make -= 1
                    assigned_this_pass = True
                    if len(held(i)) >= desired[i]:
                        it.remove()
            if not len(unfilled):
                break


class SimpleAssignor:
    """The share-group assignor Kafka names ``simple`` (``group.share.assignors`` default)."""

    share_group_assignor = True

    def name(self) -> str:
        return "simple"

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> GroupAssignment:
        """Kafka's ``SimpleAssignor.assign``: every member of the spec is in the result."""
        if not group_spec.members:
            return GroupAssignment({})
        member_ids = _java_member_order(list(group_spec.members))
        subscriptions = {group_spec.member_subscription(m).subscribed_topic_ids for m in member_ids}
        builder: _Homogeneous | _Heterogeneous
        if len(subscriptions) == 1:
            builder = _Homogeneous(group_spec, member_ids, topics)
        else:
            builder = _Heterogeneous(group_spec, member_ids, topics)
        result = builder.build()
        return GroupAssignment({m: MemberAssignment(result.get(i, {}))
                                for i, m in enumerate(member_ids)})

    def compute(self, subscriptions: Mapping[str, Collection[uuid.UUID]], topic_partitions: Mapping[uuid.UUID, int],
                current: Mapping[str, Mapping[uuid.UUID, Collection[int]]] | None = None,
                assignable: Mapping[uuid.UUID, Collection[int]] | None = None) -> Assignment:
        """The target assignment of every member, in plain types.

        ``subscriptions``: member id -> subscribed topic ids (members in the group's order);
        ``topic_partitions``: topic id -> partition count (a subscribed topic missing here is an
        error, as in Kafka); ``current``: member id -> its current target assignment;
        ``assignable``: the initialized share partitions (None: every partition).
        """
        current = current or {}
        spec = ShareGroupSpec(
            members={m: MemberSubscription(frozenset(ts)) for m, ts in subscriptions.items()},
            current={m: MemberAssignment({t: frozenset(ps) for t, ps in current.get(m, {}).items()})
                     for m in subscriptions},
            assignable=assignable)
        result = self.assign(spec, _Counts(topic_partitions))
        return {m: {t: set(ps) for t, ps in a.partitions.items() if ps} for m, a in result.members.items()}


class _Counts:
    def __init__(self, counts: Mapping[uuid.UUID, int]) -> None:
        self.counts = counts

    def num_partitions(self, topic_id: uuid.UUID) -> int:
        return self.counts.get(topic_id, -1)

    def racks_for_partition(self, topic_id: uuid.UUID, partition: int) -> frozenset[str]:
        return frozenset()


@hookimpl
def strom_assignors() -> Sequence[ConsumerGroupPartitionAssignor]:
    return [SimpleAssignor()]
