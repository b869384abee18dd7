"""The built-in KIP-848 assignors: uniform (balanced, sticky) and range (co-partitioned ranges)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strom.plugins.builtin.range_assignor import RangeAssignor
from strom.plugins.builtin.uniform_assignor import UniformAssignor
from strom.plugins.hookspecs.assignors import (
    ConsumerGroupPartitionAssignor,
    GroupAssignment,
    GroupSpec,
    MemberAssignment,
    MemberSubscription,
    SubscribedTopicMetadata,
    SubscriptionType,
    TopicMetadata,
)

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))
MISSING = uuid.UUID(int=99)


def topics(**counts: int) -> SubscribedTopicMetadata:
    ids = {"t1": T1, "t2": T2, "t3": T3}
    return SubscribedTopicMetadata({ids[n]: TopicMetadata(ids[n], n, c) for n, c in counts.items()})


def spec(subs: Mapping[str, set[uuid.UUID]], current: GroupAssignment | None = None,
         instances: Mapping[str, str] | None = None) -> GroupSpec:
    members = {m: MemberSubscription(frozenset(t), instance_id=(instances or {}).get(m)) for m, t in subs.items()}
    cur = {m: a for m, a in (current.members.items() if current else ()) if m in members}
    return GroupSpec(members, cur)


def flat(assignment: MemberAssignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in assignment.partitions.items() for p in ps}


def loads(result: GroupAssignment) -> dict[str, int]:
    return {m: a.count() for m, a in result.members.items()}


def check_valid(result: GroupAssignment, group: GroupSpec, meta: SubscribedTopicMetadata) -> None:
    """Every partition of every subscribed, existing topic exactly once, to a subscriber."""
    assert set(result.members) == set(group.members)
    seen: list[tuple[uuid.UUID, int]] = []
    for m, a in result.members.items():
        for t, p in flat(a):
            assert t in group.members[m].subscribed_topic_ids, (m, t)
            seen.append((t, p))
    expected = {(t, p) for sub in group.members.values() for t in sub.subscribed_topic_ids
                for p in range(max(meta.num_partitions(t), 0))}
    assert sorted(seen, key=str) == sorted(expected, key=str)


# -- uniform ------------------------------------------------------------------------------------


def test_uniform_homogeneous_is_balanced() -> None:
    meta = topics(t1=7, t2=3)
    group = spec({"a": {T1, T2}, "b": {T1, T2}, "c": {T1, T2}})
    assert group.subscription_type() is SubscriptionType.HOMOGENEOUS
    result = UniformAssignor().assign(group, meta)
    check_valid(result, group, meta)
    assert sorted(loads(result).values()) == [3, 3, 4]
    # Each topic's partitions are spread, not piled on one member.
    assert all(len(a.partitions.get(T1, ())) in (2, 3) for a in result.members.values())


def test_uniform_member_joining_only_takes_what_balance_needs() -> None:
    meta = topics(t1=6, t2=6)
    subs = {"a": {T1, T2}, "b": {T1, T2}, "c": {T1, T2}}
    before = UniformAssignor().assign(spec(subs), meta)
    grown = spec({**subs, "d": {T1, T2}}, before)
    after = UniformAssignor().assign(grown, meta)
    check_valid(after, grown, meta)
    assert sorted(loads(after).values()) == [3, 3, 3, 3]
    for m in "abc":  # old members only lose partitions, never swap them
        assert flat(after.members[m]) <= flat(before.members[m])
    moved = sum(len(flat(before.members[m]) - flat(after.members[m])) for m in "abc")
    assert moved == 3  # the minimum: exactly what d gets


def test_uniform_member_leaving_keeps_everyone_elses_partitions() -> None:
    meta = topics(t1=5, t2=4)
    subs = {"a": {T1, T2}, "b": {T1, T2}, "c": {T1, T2}}
    before = UniformAssignor().assign(spec(subs), meta)
    shrunk = spec({"a": {T1, T2}, "c": {T1, T2}}, before)
    after = UniformAssignor().assign(shrunk, meta)
    check_valid(after, shrunk, meta)
    assert sorted(loads(after).values()) == [4, 5]
    for m in "ac":
        assert flat(before.members[m]) <= flat(after.members[m])


def test_uniform_is_a_fixpoint_of_its_own_result() -> None:
    meta = topics(t1=8, t2=5, t3=3)
    group = spec({"a": {T1, T2, T3}, "b": {T1, T2}, "c": {T3}, "d": {T1}})
    first = UniformAssignor().assign(group, meta)
    again = UniformAssignor().assign(spec({m: set(s.subscribed_topic_ids) for m, s in group.members.items()},
                                          first), meta)
    assert again == first


def test_uniform_drops_stale_current_assignment() -> None:
    meta = topics(t1=2, t2=2)
    current = GroupAssignment({
        "a": MemberAssignment({T1: frozenset({0, 1, 7}), T2: frozenset({0}), MISSING: frozenset({0})}),
        "b": MemberAssignment({T1: frozenset({0, 1})}),  # also claims a's partitions
    })
    group = spec({"a": {T1}, "b": {T1, T2}}, current)
    result = UniformAssignor().assign(group, meta)
    check_valid(result, group, meta)
    assert sorted(loads(result).values()) == [2, 2]
    assert T2 not in result.members["a"].partitions  # a no longer subscribes to t2


def test_uniform_heterogeneous_balances_across_subscriptions() -> None:
    meta = topics(t1=4, t2=2)
    group = spec({"a": {T1}, "b": {T1, T2}})
    assert group.subscription_type() is SubscriptionType.HETEROGENEOUS
    result = UniformAssignor().assign(group, meta)
    check_valid(result, group, meta)
    assert loads(result) == {"a": 3, "b": 3}
    assert result.members["b"].partitions[T2] == frozenset({0, 1})


def test_uniform_ignores_missing_topics_and_handles_idle_members() -> None:
    meta = topics(t1=2)
    group = spec({"a": {T1, MISSING}, "b": {T1}, "c": {T1}, "d": set()})
    result = UniformAssignor().assign(group, meta)
    check_valid(result, group, meta)
    assert sorted(loads(result).values()) == [0, 0, 1, 1]
    assert result.members["d"].count() == 0


group_strategy = st.integers(1, 6).flatmap(lambda n_members: st.tuples(
    st.lists(st.integers(0, 9), min_size=3, max_size=3),  # partition counts of t1..t3
    st.lists(st.sets(st.sampled_from([T1, T2, T3]), min_size=1), min_size=n_members, max_size=n_members),
))


@settings(max_examples=150, deadline=None)
@given(group_strategy, st.integers(1, 3))
def test_uniform_properties(case: tuple[list[int], list[set[uuid.UUID]]], churn: int) -> None:
    counts, member_subs = case
    meta = SubscribedTopicMetadata({t: TopicMetadata(t, str(t), c) for t, c in zip((T1, T2, T3), counts, strict=True)
                                    if c > 0})
    subs = {f"m{i}": s for i, s in enumerate(member_subs)}
    group = spec(subs)
    result = UniformAssignor().assign(group, meta)
    check_valid(result, group, meta)
    if group.subscription_type() is SubscriptionType.HOMOGENEOUS:
        assert max(loads(result).values()) - min(loads(result).values()) <= 1
    # No single move between subscribers of a partition's topic could narrow a gap of 2+.
    load = loads(result)
    for src, a in result.members.items():
        for t in a.partitions:
            for dst, sub in group.members.items():
                assert not (t in sub.subscribed_topic_ids and load[dst] <= load[src] - 2)
    # Stickiness under churn: when members leave and the rest share one subscription, the rest
    # were within one partition of each other, so each keeps everything it had.
    remaining = sorted(subs)[: max(1, len(subs) - churn)]
    staying = spec({m: subs[m] for m in remaining}, result)
    after = UniformAssignor().assign(staying, meta)
    check_valid(after, staying, meta)
    if staying.subscription_type() is SubscriptionType.HOMOGENEOUS:
        for m in remaining:
            assert flat(result.members[m]) <= flat(after.members[m])


# -- range --------------------------------------------------------------------------------------


def test_range_is_per_topic_and_co_partitioned() -> None:
    meta = topics(t1=5, t2=5)
    group = spec({"b": {T1, T2}, "a": {T1, T2}})
    result = RangeAssignor().assign(group, meta)
    check_valid(result, group, meta)
    assert result.members["a"].partitions == {T1: frozenset({0, 1, 2}), T2: frozenset({0, 1, 2})}
    assert result.members["b"].partitions == {T1: frozenset({3, 4}), T2: frozenset({3, 4})}


def test_range_extra_partitions_go_to_first_members_for_each_topic() -> None:
    # Like Kafka's range: imbalance adds up across topics (a gets the extra of both).
    meta = topics(t1=4, t2=7)
    group = spec({"a": {T1, T2}, "b": {T1, T2}, "c": {T1, T2}})
    result = RangeAssignor().assign(group, meta)
    check_valid(result, group, meta)
    assert result.members["a"].partitions == {T1: frozenset({0, 1}), T2: frozenset({0, 1, 2})}
    assert result.members["b"].partitions == {T1: frozenset({2}), T2: frozenset({3, 4})}
    assert result.members["c"].partitions == {T1: frozenset({3}), T2: frozenset({5, 6})}


def test_range_heterogeneous_uses_each_topics_subscribers() -> None:
    meta = topics(t1=4, t2=3)
    group = spec({"a": {T1}, "b": {T1, T2}, "c": {T2, MISSING}})
    result = RangeAssignor().assign(group, meta)
    check_valid(result, group, meta)
    assert result.members["a"].partitions == {T1: frozenset({0, 1})}
    assert result.members["b"].partitions == {T1: frozenset({2, 3}), T2: frozenset({0, 1})}
    assert result.members["c"].partitions == {T2: frozenset({2})}


def test_range_more_members_than_partitions() -> None:
    meta = topics(t1=2)
    group = spec({"a": {T1}, "b": {T1}, "c": {T1}})
    result = RangeAssignor().assign(group, meta)
    check_valid(result, group, meta)
    assert loads(result) == {"a": 1, "b": 1, "c": 0}


def test_range_static_members_keep_ranges_across_member_id_changes() -> None:
    meta = topics(t1=6)
    before = RangeAssignor().assign(spec({"z-1": {T1}, "a-1": {T1}}, instances={"z-1": "i0", "a-1": "i1"}), meta)
    # Both restart with new member ids; the instance ids order them, so the ranges stay.
    after = RangeAssignor().assign(spec({"b-2": {T1}, "y-2": {T1}}, instances={"y-2": "i0", "b-2": "i1"}), meta)
    assert after.members["y-2"] == before.members["z-1"]
    assert after.members["b-2"] == before.members["a-1"]
    assert before.members["z-1"].partitions == {T1: frozenset({0, 1, 2})}


@pytest.mark.parametrize("assignor", [UniformAssignor(), RangeAssignor()], ids=lambda a: a.name())
def test_builtins_satisfy_the_protocol(assignor: ConsumerGroupPartitionAssignor) -> None:
    assert isinstance(assignor, ConsumerGroupPartitionAssignor)
    empty = assignor.assign(GroupSpec({}), topics(t1=3))
    assert empty.members == {}
