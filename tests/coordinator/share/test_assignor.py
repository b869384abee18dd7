"""The share-group SimpleAssignor (KIP-932's server-side assignment), as Kafka's rules state it."""

from __future__ import annotations

import uuid

import pytest

from strom.core.coordinator.share.assignor import PartitionAssignorError, SimpleAssignor

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def holders(assignment: dict[str, dict[uuid.UUID, set[int]]], topic: uuid.UUID) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for member, topics in assignment.items():
        for p in topics.get(topic, ()):
            out.setdefault(p, set()).add(member)
    return out


def test_more_members_than_partitions_shares_each_partition_evenly() -> None:
    members = [f"member-{i}" for i in range(5)]
    a = SimpleAssignor().compute({m: [T1] for m in members}, {T1: 2})
    # desiredSharing = ceil(5 / 2) = 3 members per partition, 6 slots: every member reads a
    # partition, one of them both.
    assert sorted(len(a[m][T1]) for m in members) == [1, 1, 1, 1, 2]
    assert sorted(len(ms) for ms in holders(a, T1).values()) == [3, 3]


def test_members_get_partition_counts_differing_by_one_at_most() -> None:
    for n_members, n_parts in [(4, 4), (3, 7), (2, 12), (6, 5)]:
        members = [f"m{i}" for i in range(n_members)]
        a = SimpleAssignor().compute({m: [T1] for m in members}, {T1: n_parts})
        counts = [len(a[m].get(T1, ())) for m in members]
        assert max(counts) - min(counts) <= 1, (n_members, n_parts, counts)
        assert set(holders(a, T1)) == set(range(n_parts))


def test_balanced_current_assignment_is_kept() -> None:
    members = ["a", "b"]
    current = {"a": {T1: {0, 2}}, "b": {T1: {1, 3}}}
    assert SimpleAssignor().compute({m: [T1] for m in members}, {T1: 4}, current) == current


def test_an_overfilled_member_gives_partitions_to_a_new_member() -> None:
    # a held all four; b joins: two each, a keeps two of its own (stickiness after balance).
    a = SimpleAssignor().compute({"a": [T1], "b": [T1]}, {T1: 4}, {"a": {T1: {0, 1, 2, 3}}})
    assert len(a["a"][T1]) == len(a["b"][T1]) == 2 and a["a"][T1] | a["b"][T1] == {0, 1, 2, 3}


def test_only_initialized_partitions_are_assignable() -> None:
    a = SimpleAssignor().compute({"a": [T1], "b": [T1]}, {T1: 4}, assignable={T1: {1, 3}})
    assert holders(a, T1).keys() == {1, 3}
    assert SimpleAssignor().compute({"a": [T1]}, {T1: 4}, assignable={}) == {"a": {}}


def test_a_topic_no_longer_subscribed_is_dropped_from_the_current_assignment() -> None:
    a = SimpleAssignor().compute({"a": [T2]}, {T1: 2, T2: 1}, {"a": {T1: {0, 1}}})
    assert a == {"a": {T2: {0}}}


def test_heterogeneous_subscriptions_deal_each_topic_to_its_subscribers() -> None:
    a = SimpleAssignor().compute({"a": [T1], "b": [T1, T2], "c": [T2]}, {T1: 3, T2: 3})
    assert set(holders(a, T1)) == {0, 1, 2} and set(holders(a, T2)) == {0, 1, 2}
    assert T2 not in a["a"] and T1 not in a["c"]


def test_edges() -> None:
    s = SimpleAssignor()
    assert s.name() == "simple"
    assert s.compute({}, {T1: 1}) == {}
    assert s.compute({"a": []}, {T1: 1}) == {"a": {}}
    with pytest.raises(PartitionAssignorError, match="doesn't exist in the topic metadata"):
        s.compute({"a": [T1]}, {})
