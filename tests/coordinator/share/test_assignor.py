"""The share-group SimpleAssignor (KIP-932's server-side assignment), as Kafka's rules state it."""

from __future__ import annotations

import uuid

import pytest

from strom.core.coordinator.runtime import java_string_hashcode
from strom.core.coordinator.share.assignor import PartitionAssignorError, SimpleAssignor

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def holders(assignment: dict[str, dict[uuid.UUID, set[int]]], topic: uuid.UUID) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for member, topics in assignment.items():
        for p in topics.get(topic, ()):
            out.setdefault(p, set()).add(member)
    return out


def test_more_members_than_partitions_every_member_gets_its_hashed_partition() -> None:
    members = [f"member-{i}" for i in range(5)]
    a = SimpleAssignor().compute({m: [T1] for m in members}, {T1: 2})
    for m in members:
        assert abs(java_string_hashcode(m)) % 2 in a[m][T1]
    # A partition no member hashed to is dealt round-robin: both are read.
    assert set(holders(a, T1)) == {0, 1}
    assert sum(len(a[m][T1]) for m in members) <= len(members) + 1


def test_more_partitions_than_members_covers_every_partition() -> None:
    members = ["a", "b", "c"]
    a = SimpleAssignor().compute({m: [T1, T2] for m in members}, {T1: 4, T2: 3})
    assert set(holders(a, T1)) == {0, 1, 2, 3} and set(holders(a, T2)) == {0, 1, 2}
    # Leftovers are dealt round-robin: no member is left out.
    assert all(a[m] for m in members)


def test_current_assignment_is_kept_and_held_partitions_are_not_dealt_again() -> None:
    members = ["a", "b"]
    current = {"a": {T1: {0, 1, 2, 3}}}
    a = SimpleAssignor().compute({m: [T1] for m in members}, {T1: 4}, current)
    assert a["a"][T1] >= {0, 1, 2, 3}
    # b gets only the partition it hashes to: every other one is held by a already.
    assert a["b"] == {T1: {abs(java_string_hashcode("b")) % 4}}


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
