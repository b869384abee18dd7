"""Share-group membership (ShareGroupHeartbeat's state machine) without a broker."""

from __future__ import annotations

import uuid

import pytest

from strom.core.coordinator.share.share_group import ShareGroup
from strom.core.errors import (
    FencedMemberEpochError,
    GroupMaxSizeReachedError,
    InvalidRequestError,
    UnknownMemberIdError,
)

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
TOPICS = {"t1": (T1, 2), "t2": (T2, 1)}


def all_partitions(g: ShareGroup) -> dict[uuid.UUID, set[int]]:
    out: dict[uuid.UUID, set[int]] = {}
    for m in g.members.values():
        for t, ps in m.assignment.items():
            out.setdefault(t, set()).update(ps)
    return out


def initialize(g: ShareGroup, topics: dict[str, tuple[uuid.UUID, int]] = TOPICS) -> None:
    """What the service does just before a heartbeat: the share coordinator gets the state of the
    subscribed partitions. Kafka does it after that heartbeat, asynchronously, so the partitions
    are assignable from the next heartbeat on; so are strom's."""
    for name, (topic_id, count) in topics.items():
        g.initialized.setdefault(topic_id, set()).update(range(count))
        g.topic_names[topic_id] = name


def test_join_heartbeat_leave() -> None:
    # As Kafka 4.3.1 answered the same sequence (tests/coordinator/share/test_share_group_reference.py):
    # the group starts at epoch 1, a join bumps it; nothing is assignable before the partitions
    # are initialized; then a heartbeat bumps the epoch and assigns them.
    g = ShareGroup("g", heartbeat_interval_ms=5000)
    assert g.state == "Empty" and g.group_epoch == 1
    initialize(g)
    r = g.heartbeat("a", 0, ["t1"], topics=TOPICS, now_ms=1_000)
    assert (r.member_epoch, r.heartbeat_interval_ms, r.assignment) == (2, 5000, {})
    assert g.state == "Stable" and g.group_epoch == 2
    # Within group.share.assignment.interval.ms of the last target: the epoch moves, the target waits.
    r = g.heartbeat("a", 2, None, topics=TOPICS, now_ms=1_500)
    assert (r.member_epoch, r.assignment, g.group_epoch) == (2, None, 3)
    r = g.heartbeat("a", 2, None, topics=TOPICS, now_ms=2_000)
    assert (r.member_epoch, r.assignment) == (3, {T1: {0, 1}})
    # A plain heartbeat: same epoch, assignment not resent.
    r = g.heartbeat("a", 3, None, topics=TOPICS, now_ms=2_010)
    assert (r.member_epoch, r.assignment) == (3, None)
    # A second member joins: the epoch moves and the two partitions are split (one each).
    r = g.heartbeat("b", 0, ["t1"], topics=TOPICS, now_ms=3_100)
    assert r.member_epoch == 4 and r.assignment and len(r.assignment[T1]) == 1
    b_part = r.assignment[T1]
    r = g.heartbeat("a", 3, None, topics=TOPICS, now_ms=3_110)
    assert r.member_epoch == 4 and r.assignment == {T1: {0, 1} - b_part}  # a's assignment changed: resent
    r = g.heartbeat("b", 4, None, topics=TOPICS, now_ms=3_120)
    assert r.assignment is None
    # A full request (subscriptions given) is answered with the assignment.
    r = g.heartbeat("b", 4, ["t1"], topics=TOPICS, now_ms=3_130)
    assert (r.member_epoch, r.assignment) == (4, {T1: b_part})
    r = g.heartbeat("a", -1, None, topics=TOPICS, now_ms=3_140)
    assert r.member_epoch == -1 and set(g.members) == {"b"} and g.group_epoch == 5
    r = g.heartbeat("b", 4, None, topics=TOPICS, now_ms=4_200)
    assert (r.member_epoch, r.assignment) == (5, {T1: {0, 1}})


def test_a_member_joining_within_the_assignment_interval_waits_for_the_next_target() -> None:
    g = ShareGroup("g", assignment_interval_ms=1000)
    initialize(g)
    g.heartbeat("a", 0, ["t1"], topics=TOPICS, now_ms=9_000)
    g.heartbeat("a", 2, None, topics=TOPICS, now_ms=10_000)  # assigned: epoch 3
    r = g.heartbeat("b", 0, ["t1"], topics=TOPICS, now_ms=10_400)
    # The group epoch moved (4) but the target is the one of epoch 3, without b.
    assert (r.member_epoch, r.assignment, g.group_epoch) == (3, {}, 4)
    r = g.heartbeat("b", 3, None, topics=TOPICS, now_ms=11_000)
    assert r.member_epoch == 4 and r.assignment and len(r.assignment[T1]) == 1


def test_subscription_and_partition_count_changes_bump_the_epoch() -> None:
    g = ShareGroup("g", assignment_interval_ms=0)
    initialize(g)
    g.heartbeat("a", 0, ["t1"], topics=TOPICS, now_ms=0)
    r = g.heartbeat("a", 2, ["t1", "t2"], topics=TOPICS, now_ms=1)
    assert r.member_epoch == 3 and r.assignment == {T1: {0, 1}, T2: {0}}
    grown = {"t1": (T1, 3), "t2": (T2, 1)}
    # A new partition: the metadata hash moves the epoch; the partition is assigned from the
    # heartbeat after the one its state was initialized for.
    initialize(g, grown)
    r = g.heartbeat("a", 3, None, topics=grown, now_ms=2)
    assert r.member_epoch == 4 and r.assignment is None
    r = g.heartbeat("a", 4, None, topics=grown, now_ms=3)
    assert r.member_epoch == 5 and r.assignment == {T1: {0, 1, 2}, T2: {0}}
    # A topic that does not exist (yet) is subscribed but assigns nothing.
    r = g.heartbeat("a", 5, ["t1", "nope"], topics=grown, now_ms=4)
    assert r.assignment == {T1: {0, 1, 2}}


def test_errors() -> None:
    g = ShareGroup("g", max_size=1)
    with pytest.raises(InvalidRequestError, match="SubscribedTopicNames must be set"):
        g.heartbeat("a", 0, [], topics=TOPICS, now_ms=0)
    with pytest.raises(InvalidRequestError, match="MemberId can't be empty"):
        g.heartbeat("", 0, ["t1"], topics=TOPICS, now_ms=0)
    with pytest.raises(InvalidRequestError, match="MemberEpoch is invalid"):
        g.heartbeat("a", -2, ["t1"], topics=TOPICS, now_ms=0)
    with pytest.raises(UnknownMemberIdError):
        g.heartbeat("a", 5, None, topics=TOPICS, now_ms=0)
    with pytest.raises(UnknownMemberIdError):
        g.heartbeat("a", -1, None, topics=TOPICS, now_ms=0)
    g.heartbeat("a", 0, ["t1"], topics=TOPICS, now_ms=0)
    with pytest.raises(FencedMemberEpochError):
        g.heartbeat("a", 7, None, topics=TOPICS, now_ms=0)
    with pytest.raises(GroupMaxSizeReachedError):
        g.heartbeat("b", 0, ["t1"], topics=TOPICS, now_ms=0)


def test_session_timeout_removes_a_silent_member_and_others_take_its_partitions() -> None:
    g = ShareGroup("g", session_timeout_ms=1000, assignment_interval_ms=0)
    initialize(g)
    g.heartbeat("a", 0, ["t1"], topics=TOPICS, now_ms=0)
    g.heartbeat("b", 0, ["t1"], topics=TOPICS, now_ms=0)
    g.heartbeat("b", g.members["b"].member_epoch, None, topics=TOPICS, now_ms=900)
    assert g.expire_members(999) == []
    assert g.expire_members(1000) == ["a"]
    r = g.heartbeat("b", g.members["b"].member_epoch, None, topics=TOPICS, now_ms=1001)
    assert r.member_epoch == g.group_epoch
    assert all_partitions(g) == {T1: {0, 1}}
