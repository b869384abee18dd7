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


def test_join_heartbeat_leave() -> None:
    g = ShareGroup("g", heartbeat_interval_ms=5000)
    assert g.state == "Empty"
    r = g.heartbeat("a", 0, ["t1"], topics=TOPICS, now_ms=0)
    assert (r.member_epoch, r.heartbeat_interval_ms, r.assignment) == (1, 5000, {T1: {0, 1}})
    assert g.state == "Stable" and g.group_epoch == 1
    # A plain heartbeat: same epoch, assignment not resent.
    r = g.heartbeat("a", 1, None, topics=TOPICS, now_ms=10)
    assert (r.member_epoch, r.assignment) == (1, None)
    # A second member joins: the epoch moves and the two partitions are split (one each).
    r = g.heartbeat("b", 0, ["t1"], topics=TOPICS, now_ms=20)
    assert r.member_epoch == 2 and r.assignment and len(r.assignment[T1]) == 1
    b_part = r.assignment[T1]
    r = g.heartbeat("a", 1, None, topics=TOPICS, now_ms=30)
    assert r.member_epoch == 2 and r.assignment == {T1: {0, 1} - b_part}  # a's assignment changed: resent
    r = g.heartbeat("b", 2, None, topics=TOPICS, now_ms=40)
    assert r.assignment is None
    r = g.heartbeat("a", -1, None, topics=TOPICS, now_ms=50)
    assert r.member_epoch == -1 and set(g.members) == {"b"} and g.group_epoch == 3
    r = g.heartbeat("b", 2, None, topics=TOPICS, now_ms=60)
    assert r.member_epoch == 3


def test_subscription_and_partition_count_changes_bump_the_epoch() -> None:
    g = ShareGroup("g")
    g.heartbeat("a", 0, ["t1"], topics=TOPICS, now_ms=0)
    r = g.heartbeat("a", 1, ["t1", "t2"], topics=TOPICS, now_ms=1)
    assert r.member_epoch == 2 and r.assignment == {T1: {0, 1}, T2: {0}}
    grown = {"t1": (T1, 3), "t2": (T2, 1)}
    r = g.heartbeat("a", 2, None, topics=grown, now_ms=2)
    assert r.member_epoch == 3 and r.assignment == {T1: {0, 1, 2}, T2: {0}}
    # A topic that does not exist (yet) is subscribed but assigns nothing.
    r = g.heartbeat("a", 3, ["t1", "nope"], topics=grown, now_ms=3)
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
    g = ShareGroup("g", session_timeout_ms=1000)
    g.heartbeat("a", 0, ["t1"], topics=TOPICS, now_ms=0)
    g.heartbeat("b", 0, ["t1"], topics=TOPICS, now_ms=0)
    g.heartbeat("b", g.members["b"].member_epoch, None, topics=TOPICS, now_ms=900)
    assert g.expire_members(999) == []
    assert g.expire_members(1000) == ["a"]
    r = g.heartbeat("b", g.members["b"].member_epoch, None, topics=TOPICS, now_ms=1001)
    assert r.member_epoch == g.group_epoch
    assert all_partitions(g) == {T1: {0, 1}}
