"""KIP-848 state machine without a broker: simulated clients against a ConsumerGroup, fake clock.

The group's records go through the real codec (encode -> decode) into an in-memory log and are
replayed, exactly as the coordinator does with ``__consumer_offsets``; a second group replaying
the same log must end equal. Safety is checked after every step: the partitions the clients
believe they own are pairwise disjoint.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from group_harness import REBALANCE_MS, SESSION_MS, Cluster
from kio.schema.errors import ErrorCode

from strom.core.coordinator.group import consumer_group_service as service
from strom.core.coordinator.group import records as R
from strom.core.coordinator.group.consumer_group import STABLE, ConsumerGroup, HeartbeatRequest
from strom.core.coordinator.group.consumer_group_member import MemberState, normalize
from strom.core.errors import KafkaError, for_code


@dataclass
class Client:
    """A consumer as the protocol sees it: member id, epoch and the partitions it holds."""

    cluster: Cluster
    topics: tuple[str, ...] = ("t",)
    member_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    epoch: int = 0
    owned: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    instance_id: str | None = None
    assignor: str | None = None
    alive: bool = True

    def join(self) -> None:
        self.epoch = 0
        self.owned = {}
        self._send(HeartbeatRequest(self.member_id, 0, instance_id=self.instance_id,
                                    rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_names=self.topics,
                                    server_assignor=self.assignor, owned={}))

    def beat(self) -> None:
        self._send(HeartbeatRequest(self.member_id, self.epoch, owned=dict(self.owned)))

    def _send(self, req: HeartbeatRequest) -> None:
        epoch, assignment = self.cluster.heartbeat(req)
        self.epoch = epoch
        if assignment is not None:
            self.owned = normalize(assignment)  # revoke what is gone, take what is new

    def leave(self) -> None:
        self.cluster.heartbeat(HeartbeatRequest(self.member_id, -1))
        self.alive = False
        self.owned = {}


def assert_disjoint(clients: list[Client]) -> None:
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for c in clients:
        if not c.alive:
            continue
        for t, ps in c.owned.items():
            for p in ps:
                assert (t, p) not in seen, f"partition {p} owned by {seen[(t, p)]} and {c.member_id}"
                seen[(t, p)] = c.member_id


def settle(clients: list[Client], rng: random.Random | None = None, rounds: int = 20) -> None:
    for _ in range(rounds):
        order = [c for c in clients if c.alive]
        if rng is not None:
            rng.shuffle(order)
        for c in order:
            c.beat()
            assert_disjoint(clients)


def all_partitions(cluster: Cluster, topic: str = "t") -> set[tuple[uuid.UUID, int]]:
    t = cluster.image.topic(topic)
    assert t is not None
    return {(t.topic_id, p) for p in t.partitions}


def owned_set(clients: list[Client]) -> list[tuple[uuid.UUID, int]]:
    return [(t, p) for c in clients if c.alive for t, ps in c.owned.items() for p in ps]


def test_first_member_gets_everything_at_epoch_one() -> None:
    cluster = Cluster({"t": 6})
    c = Client(cluster)
    c.join()
    assert c.epoch == 1
    assert set(owned_set([c])) == all_partitions(cluster)
    assert cluster.group.state == STABLE
    assert cluster.group.group_epoch == cluster.group.assignment_epoch == 1


def test_three_members_converge_without_double_ownership() -> None:
    cluster = Cluster({"t": 6})
    clients: list[Client] = []
    for _ in range(3):
        c = Client(cluster)
        clients.append(c)
        c.join()
        assert_disjoint(clients)
        settle(clients)
    owned = owned_set(clients)
    assert sorted(owned, key=str) == sorted(all_partitions(cluster), key=str)
    assert sorted(sum(len(ps) for ps in c.owned.values()) for c in clients) == [2, 2, 2]
    g = cluster.group
    assert g.state == STABLE
    assert all(m.member_epoch == g.group_epoch == 3 for m in g.members.values())
    assert cluster.replayed().snapshot() == g.snapshot()


def test_revocation_blocks_the_new_owner_until_acknowledged() -> None:
    cluster = Cluster({"t": 2})
    a, b = Client(cluster), Client(cluster)
    a.join()
    b.join()  # target now splits the partitions, but a still owns both
    assert b.owned == {} and b.epoch == 2
    assert cluster.group.members[b.member_id].state is MemberState.UNRELEASED_PARTITIONS
    # a reconciles on its own heartbeat: it keeps epoch 1 and must revoke one partition first.
    assert cluster.group.members[a.member_id].state is MemberState.STABLE
    b.beat()
    assert b.owned == {}  # still unreleased
    a.beat()  # a learns which partition to give up (its response carries the smaller set)
    a_member = cluster.group.members[a.member_id]
    assert a_member.state is MemberState.UNREVOKED_PARTITIONS and a_member.member_epoch == 1
    assert sum(map(len, a.owned.values())) == 1
    b.beat()
    assert b.owned == {}  # a has not acknowledged yet
    a.beat()  # ... and acknowledges by reporting it no longer owns it
    assert cluster.group.members[a.member_id].member_epoch == 2
    b.beat()
    assert sum(map(len, b.owned.values())) == 1
    assert_disjoint([a, b])


@pytest.mark.parametrize("seed", range(8))
def test_random_joins_and_leaves_keep_ownership_exclusive(seed: int) -> None:
    rng = random.Random(seed)
    cluster = Cluster({"t": 6, "u": 3})
    clients: list[Client] = []
    for _step in range(60):
        action = rng.random()
        live = [c for c in clients if c.alive]
        if action < 0.2 or not live:
            c = Client(cluster, topics=rng.choice([("t",), ("t", "u"), ("u",)]),
                       assignor=rng.choice([None, "uniform", "range"]))
            clients.append(c)
            c.join()
        elif action < 0.3:
            rng.choice(live).leave()
        else:
            rng.choice(live).beat()
        assert_disjoint(clients)
    settle(clients, rng)
    g = cluster.group
    live = [c for c in clients if c.alive]
    if live:
        wanted = set()
        for c in live:
            for name in c.topics:
                wanted |= all_partitions(cluster, name)
        owned = owned_set(clients)
        assert len(owned) == len(set(owned)) and set(owned) == wanted
        assert g.state == STABLE
    assert cluster.replayed().snapshot() == g.snapshot()


def test_epoch_fencing() -> None:
    cluster = Cluster({"t": 4})
    a = Client(cluster)
    a.join()
    with pytest.raises(KafkaError) as e:
        cluster.heartbeat(HeartbeatRequest(a.member_id, a.epoch + 1, owned={}))
    assert e.value.code == ErrorCode.fenced_member_epoch
    with pytest.raises(KafkaError) as e:
        cluster.heartbeat(HeartbeatRequest("nobody", 3, owned={}))
    assert e.value.code == ErrorCode.unknown_member_id
    b = Client(cluster)
    b.join()
    settle([a, b])
    assert a.epoch == 2
    # The previous epoch is accepted when what the member reports is a subset of its assignment
    # (the response that bumped it was lost) ...
    epoch, _ = cluster.heartbeat(HeartbeatRequest(a.member_id, 1, owned=a.owned))
    assert epoch == 2
    # ... but not with partitions it no longer has, nor an older epoch.
    with pytest.raises(KafkaError) as e:
        cluster.heartbeat(HeartbeatRequest(a.member_id, 1, owned={cluster.ids["t"]: frozenset(range(4))}))
    assert e.value.code == ErrorCode.fenced_member_epoch
    with pytest.raises(KafkaError) as e:
        cluster.heartbeat(HeartbeatRequest(a.member_id, -3))
    assert e.value.code == ErrorCode.invalid_request
    # A fenced client rejoins with epoch 0 and the same member id and gets its partitions back.
    a.join()
    settle([a, b])
    assert_disjoint([a, b])
    assert len(owned_set([a, b])) == 4


def test_leave_reassigns_and_removes_member_records() -> None:
    cluster = Cluster({"t": 6})
    a, b = Client(cluster), Client(cluster)
    a.join()
    b.join()
    settle([a, b])
    epoch = cluster.group.group_epoch
    a.leave()
    assert a.member_id not in cluster.group.members and a.member_id not in cluster.group.target
    assert cluster.group.group_epoch == epoch + 1
    settle([a, b])
    assert set(owned_set([b])) == all_partitions(cluster)
    with pytest.raises(KafkaError) as e:
        cluster.heartbeat(HeartbeatRequest(a.member_id, 3, owned={}))
    assert e.value.code == ErrorCode.unknown_member_id
    b.leave()
    assert cluster.group.state == "Empty"
    assert cluster.replayed().snapshot() == cluster.group.snapshot()


def test_session_timeout_fences_a_silent_member() -> None:
    cluster = Cluster({"t": 6})
    a, b = Client(cluster), Client(cluster)
    a.join()
    b.join()
    settle([a, b])
    for _ in range(2):  # b keeps heartbeating, a goes silent
        cluster.now += SESSION_MS // 3
        b.beat()
    cluster.expire()
    assert a.member_id in cluster.group.members  # not yet: 45 s have not passed since its last beat
    cluster.now += SESSION_MS // 3 + 1
    b.beat()
    cluster.expire()
    assert a.member_id not in cluster.group.members and b.member_id in cluster.group.members
    a.alive = False  # a zombie now: its commits and heartbeats are fenced
    settle([b])
    assert set(owned_set([b])) == all_partitions(cluster)


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    cluster = Cluster({"t": 4})
    a, b = Client(cluster), Client(cluster)
    a.join()
    b.join()
    # a keeps heartbeating but never gives up the partitions (reports owning all four).
    stuck = dict(a.owned)
    cluster.heartbeat(HeartbeatRequest(a.member_id, a.epoch, owned=stuck))
    assert cluster.group.members[a.member_id].state is MemberState.UNREVOKED_PARTITIONS
    for _ in range(4):
        cluster.now += REBALANCE_MS // 4
        cluster.heartbeat(HeartbeatRequest(a.member_id, a.epoch, owned=stuck))
        b.beat()
    cluster.now += 1
    cluster.expire()
    assert a.member_id not in cluster.group.members
    b.beat()
    b.beat()
    assert set(owned_set([b])) == all_partitions(cluster)


def test_static_member_leaves_and_comes_back_with_its_partitions() -> None:
    cluster = Cluster({"t": 6})
    a, b = Client(cluster, instance_id="i-a"), Client(cluster, instance_id="i-b")
    a.join()
    b.join()
    settle([a, b])
    before = dict(a.owned)
    epoch = cluster.group.group_epoch
    cluster.heartbeat(HeartbeatRequest(a.member_id, -2, instance_id="i-a"))
    assert cluster.group.members[a.member_id].member_epoch == -2
    assert cluster.group.group_epoch == epoch  # nothing moves while it is away
    # Another process with the same instance id cannot join while the member is active ...
    with pytest.raises(KafkaError) as e:
        cluster.heartbeat(HeartbeatRequest(str(uuid.uuid4()), 0, instance_id="i-b", rebalance_timeout_ms=1,
                                           subscribed_topic_names=("t",), owned={}))
    assert e.value.code == ErrorCode.unreleased_instance_id
    # ... but takes over the departed one, assignment and epoch included.
    a2 = Client(cluster, instance_id="i-a")
    a2.join()
    assert a2.owned == before and a2.epoch == epoch
    assert a.member_id not in cluster.group.members
    assert cluster.group.group_epoch == epoch
    assert cluster.replayed().snapshot() == cluster.group.snapshot()


def test_request_validation() -> None:
    cluster = Cluster({"t": 1})

    def code(req: HeartbeatRequest) -> int:
        with pytest.raises(KafkaError) as e:
            cluster.heartbeat(req)
        return int(e.value.code)

    full: dict[str, Any] = {"rebalance_timeout_ms": 1000, "subscribed_topic_names": ("t",), "owned": {}}
    assert code(HeartbeatRequest("", 0, **full)) == ErrorCode.invalid_request
    assert code(HeartbeatRequest("m", 0, subscribed_topic_names=("t",), owned={})) == ErrorCode.invalid_request
    assert code(HeartbeatRequest("m", 0, rebalance_timeout_ms=1, owned={})) == ErrorCode.invalid_request
    assert code(HeartbeatRequest("m", -2)) == ErrorCode.invalid_request
    assert code(HeartbeatRequest("m", 0, server_assignor="nope", **full)) == ErrorCode.unsupported_assignor
    assert code(HeartbeatRequest("m", 0, rebalance_timeout_ms=1, subscribed_topic_regex="(", owned={})) \
        == ErrorCode.invalid_regular_expression
    assert code(HeartbeatRequest("m", -1)) == ErrorCode.unknown_member_id
    assert not cluster.group.members and not cluster.log


def test_regex_subscription_and_partition_growth_bump_the_epoch() -> None:
    cluster = Cluster({"orders-a": 2, "orders-b": 1, "other": 5})
    c = Client(cluster)
    cluster.heartbeat(HeartbeatRequest(c.member_id, 0, rebalance_timeout_ms=1000, subscribed_topic_regex="orders-.*",
                                       owned={}))
    g = cluster.group
    assert set(g.subscription_metadata) == {"orders-a", "orders-b"}
    assert normalize(g.members[c.member_id].assigned) == {
        cluster.ids["orders-a"]: frozenset({0, 1}), cluster.ids["orders-b"]: frozenset({0})}
    epoch = g.group_epoch
    cluster.set_topics({"orders-a": 4, "orders-b": 1, "orders-c": 1, "other": 5})
    c.epoch = epoch
    c.owned = dict(g.members[c.member_id].assigned)
    c.beat()
    assert g.group_epoch == epoch + 1
    assert sum(map(len, c.owned.values())) == 6
    assert cluster.replayed().snapshot() == g.snapshot()


def test_member_requested_assignor_is_used() -> None:
    cluster = Cluster({"a": 2, "b": 2})
    c1 = Client(cluster, topics=("a", "b"), assignor="range", member_id="m1")
    c2 = Client(cluster, topics=("a", "b"), assignor="range", member_id="m2")
    c1.join()
    c2.join()
    settle([c1, c2])
    assert cluster.group.preferred_assignor(cluster.env()) == "range"
    # range co-partitions: the same member gets partition 0 of both topics.
    assert c1.owned == {cluster.ids["a"]: frozenset({0}), cluster.ids["b"]: frozenset({0})}


def test_offset_commit_validation() -> None:
    cluster = Cluster({"t": 2})
    g = cluster.group
    g.validate_offset_commit("", -1)  # an empty group accepts simple (admin/manual) commits
    a = Client(cluster)
    a.join()
    assert g.validate_offset_commit(a.member_id, a.epoch) is None  # current epoch: no per-partition check
    # Kafka 4.3: a newer epoch is STALE_MEMBER_EPOCH (not FENCED); an older one is checked per
    # partition (tests/coordinator/kip848/test_assignment_epochs.py).
    assert g.validate_offset_commit(a.member_id, a.epoch - 1) is not None
    for member, epoch, err in [(a.member_id, a.epoch + 1, ErrorCode.stale_member_epoch),
                               ("ghost", 1, ErrorCode.unknown_member_id),
                               ("", -1, ErrorCode.unknown_member_id)]:
        with pytest.raises(KafkaError) as e:
            g.validate_offset_commit(member, epoch)
        assert e.value.code == err


def test_delete_records_tombstone_the_group() -> None:
    cluster = Cluster({"t": 2})
    a = Client(cluster)
    a.join()
    a.leave()
    cluster.write(cluster.group.delete_records())
    fresh = cluster.replayed()
    assert fresh.deleted and not fresh.members and not fresh.target


def test_contradicting_records_are_refused_on_replay() -> None:
    cluster = Cluster({"t": 2})
    a = Client(cluster)
    a.join()
    tid = cluster.ids["t"]
    bogus = R.ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=1, previous_member_epoch=0, state=int(MemberState.STABLE),
        assigned_partitions=[R.TopicPartitions(topic_id=tid, partitions=[0])])
    with pytest.raises(RuntimeError, match="owned by both"):
        cluster.group.replay(R.ConsumerGroupCurrentMemberAssignmentKey(group_id="g", member_id="other"), bogus)


class MemoryHost:
    """The coordinator side of the service contract, over the in-memory log of a Cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.available = True

    def check_available(self, group_id: str | None = None) -> None:
        if not self.available:
            raise for_code(ErrorCode.coordinator_load_in_progress)()

    def get_or_create_consumer_group(self, group_id: str) -> ConsumerGroup:
        return self.cluster.group

    async def write_records(self, group_id: str, records: list[Any]) -> int:
        await asyncio.sleep(0)  # a real append yields to the loop: heartbeats interleave here
        self.cluster.write(records)
        return len(self.cluster.log)


def test_service_serializes_heartbeats_and_its_timer_fences_silent_members() -> None:
    cluster = Cluster({"t": 6})
    host = MemoryHost(cluster)

    def clock() -> int:
        return cluster.now

    async def scenario() -> None:
        members = [str(uuid.uuid4()) for _ in range(3)]
        joins = [service.heartbeat(host, cluster.env, "g", HeartbeatRequest(
            m, 0, rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_names=("t",), owned={}), clock=clock)
            for m in members]
        results = await asyncio.gather(*joins)  # concurrent joins: each sees the previous one's records
        assert [r.member_epoch for r in results] == [1, 2, 3]
        assert cluster.group.group_epoch == 3
        host.available = False
        with pytest.raises(KafkaError) as e:
            await service.heartbeat(host, cluster.env, "g", HeartbeatRequest(members[0], 1), clock=clock)
        assert e.value.code == ErrorCode.coordinator_load_in_progress
        host.available = True
        # Nobody heartbeats any more: the timer (armed by the heartbeats) fences everyone.
        cluster.now += SESSION_MS + 1
        for _ in range(40):
            if not cluster.group.members:
                break
            await asyncio.sleep(0.1)
        assert not cluster.group.members and cluster.group.state == "Empty"
        await service.stop_timers(host)

    asyncio.run(scenario())
    assert cluster.replayed().snapshot() == cluster.group.snapshot()
