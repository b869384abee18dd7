"""ShareGroupHeartbeat and ShareGroupDescribe on strom's broker, over a real socket.

Join with epoch 0 (a client-generated member id), heartbeat, leave with -1; a second member
bumps the group epoch and both are assigned (the simple assignor shares partitions when there
are more members than partitions); a stale epoch is FENCED_MEMBER_EPOCH; a silent member is
removed when its ``share.session.timeout.ms`` (a GROUP config) runs out; the group and its
assignments survive a kill -9 and restart (the ShareGroup* records of ``__consumer_offsets`` are replayed);
a share partition's state is initialized in the share coordinator (start offset -1) before any
member is assigned it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka.admin import AdminClient
from diff_wire import WireClient
from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.read_share_group_state.v0 import request as read_req
from kio.schema.read_share_group_state_summary.v1 import request as summary_req
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32
from share_kit import SHARE_BROKER_CONFIG, set_group_config

from strom.core.testing import BrokerProcess


def heartbeat(wire: WireClient, group: str, member: str, epoch: int, topics: list[str] | None = None) -> Any:
    names = None if topics is None else tuple(TopicName(t) for t in topics)
    return wire.request(ShareGroupHeartbeatRequest(group_id=GroupId(group), member_id=member, member_epoch=i32(epoch),
                                                   rack_id=None, subscribed_topic_names=names))


def describe(wire: WireClient, group: str) -> Any:
    return wire.request(ShareGroupDescribeRequest(group_ids=(GroupId(group),), include_authorized_operations=True)).groups[0]


def assigned(resp: Any) -> dict[uuid.UUID, set[int]]:
    assert resp.assignment is not None, resp
    return {tp.topic_id: set(tp.partitions) for tp in resp.assignment.topic_partitions}


def topic_id_of(wire: WireClient, topic: str) -> uuid.UUID:
    topic_id = wire.metadata([topic]).topics[0].topic_id
    assert isinstance(topic_id, uuid.UUID)
    return topic_id


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_join_assign_heartbeat_leave(fresh_broker: BrokerProcess) -> None:
    with fresh_broker, WireClient(fresh_broker.bootstrap) as wire:
        wire.create_topic("hb", 2)
        tid = topic_id_of(wire, "hb")
        wire.wait_for_coordinator("g1")
        a, b = str(uuid.uuid4()), str(uuid.uuid4())

        r = heartbeat(wire, "g1", a, 0, ["hb"])
        assert r.error_code == ErrorCode.none, r
        # A new group is at epoch 1 (Kafka 4.3's ModernGroup); the join bumps it. Nothing is
        # assigned yet: the partitions' share state is initialized for this heartbeat and they
        # are assigned from a later one (Kafka initializes them after the heartbeat).
        assert (r.member_id, r.member_epoch, assigned(r)) == (a, 2, {})
        assert r.heartbeat_interval.total_seconds() == 5.0
        # The partitions' share state was initialized: start offset -1, state epoch 0.
        summary = wire.request(summary_req.ReadShareGroupStateSummaryRequest(group_id="g1", topics=(
            summary_req.ReadStateSummaryData(topic_id=tid, partitions=tuple(
                summary_req.PartitionData(partition=i32(p), leader_epoch=i32(-1)) for p in (0, 1))),)))
        for p in summary.results[0].partitions:
            assert (p.error_code, p.start_offset, p.state_epoch) == (ErrorCode.none, -1, 0), p
        # A heartbeat bumps the epoch (the initialized partitions are not assigned) and, at most
        # once per group.share.assignment.interval.ms (1 s), assigns them.
        seen: list[Any] = []

        def a_assigned() -> bool:
            seen.append(heartbeat(wire, "g1", a, seen[-1].member_epoch if seen else 2))
            return seen[-1].assignment is not None
        wait_for(a_assigned, 15, "a's assignment")
        assert (seen[-1].member_epoch, assigned(seen[-1])) == (3, {tid: {0, 1}})
        r = heartbeat(wire, "g1", a, 3)
        assert (r.error_code, r.member_epoch, r.assignment) == (ErrorCode.none, 3, None)  # unchanged: not sent

        r = heartbeat(wire, "g1", b, 0, ["hb"])
        # If b joined within group.share.assignment.interval.ms (1 s) of the last target, it is in
        # the group (epoch 4) but the target waits; a later heartbeat of each gets epoch 4, one
        # partition each.
        assert r.error_code == ErrorCode.none and r.member_epoch in (3, 4)
        epochs, parts = {a: 3, b: r.member_epoch}, {a: {0, 1}, b: assigned(r).get(tid, set())}

        def settled() -> bool:
            for m in (a, b):
                x = heartbeat(wire, "g1", m, epochs[m])
                assert x.error_code == ErrorCode.none, x
                epochs[m] = x.member_epoch
                if x.assignment is not None:
                    parts[m] = assigned(x).get(tid, set())
            return epochs == {a: 4, b: 4} and len(parts[a]) == len(parts[b]) == 1
        wait_for(settled, 15, "a and b at epoch 4 with a partition each")
        assert parts[a] | parts[b] == {0, 1}
        b_parts = parts[b]

        d = describe(wire, "g1")
        assert (d.error_code, d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name) == (
            ErrorCode.none, "Stable", 4, 4, "simple")
        members = {m.member_id: m for m in d.members}
        assert set(members) == {a, b}
        assert members[b].subscribed_topic_names == ("hb",)
        assert {p for tp in members[b].assignment.topic_partitions for p in tp.partitions} == b_parts
        assert members[b].assignment.topic_partitions[0].topic_name == "hb"

        r = heartbeat(wire, "g1", b, -1)
        assert (r.error_code, r.member_id, r.member_epoch) == (ErrorCode.none, b, -1)
        d = describe(wire, "g1")
        assert [m.member_id for m in d.members] == [a] and d.group_epoch == 5
        r = heartbeat(wire, "g1", a, -1)
        assert r.member_epoch == -1
        assert describe(wire, "g1").group_state == "Empty"


def test_heartbeat_errors(fresh_broker: BrokerProcess) -> None:
    with fresh_broker, WireClient(fresh_broker.bootstrap) as wire:
        wire.create_topic("hb", 1)
        wire.wait_for_coordinator("g2")
        a = str(uuid.uuid4())
        assert heartbeat(wire, "g2", a, 0, ["hb"]).member_epoch == 2
        r = heartbeat(wire, "g2", a, 7)
        assert r.error_code == ErrorCode.fenced_member_epoch, r
        assert r.error_message.startswith("The share group member has a greater member epoch (7)"), r
        r = heartbeat(wire, "g2", str(uuid.uuid4()), 2)
        assert r.error_code == ErrorCode.unknown_member_id, r
        r = heartbeat(wire, "nope", a, 2)
        assert r.error_code == ErrorCode.group_id_not_found, r
        assert heartbeat(wire, "g2", "", 0, ["hb"]).error_code == ErrorCode.invalid_request
        assert heartbeat(wire, "g2", a, 0, []).error_code == ErrorCode.invalid_request
        assert heartbeat(wire, "g2", a, -2).error_code == ErrorCode.invalid_request
        # An unknown topic is subscribed to and assigned nothing until it exists.
        c = str(uuid.uuid4())
        r = heartbeat(wire, "g2", c, 0, ["later"])
        assert r.error_code == ErrorCode.none and assigned(r) == {}
        wire.create_topic("later", 1)
        tid = topic_id_of(wire, "later")
        r = wait_for(lambda: (x := heartbeat(wire, "g2", c, r.member_epoch)).assignment and x, 10, "assignment")
        assert assigned(r) == {tid: {0}}
        # A share group id is not a consumer group and the other way round.
        d = describe(wire, "no-such-group")
        assert (d.error_code, d.error_message) == (ErrorCode.group_id_not_found, "Group no-such-group not found.")


def test_session_expiry_removes_member(fresh_broker: BrokerProcess) -> None:
    fresh_broker.config.update(SHARE_BROKER_CONFIG)
    with fresh_broker, WireClient(fresh_broker.bootstrap) as wire:
        wire.create_topic("hb", 1)
        wire.wait_for_coordinator("g3")
        set_group_config(fresh_broker.bootstrap, "g3", {"share.session.timeout.ms": "6000",
                                                        "share.heartbeat.interval.ms": "1000"})
        a, b = str(uuid.uuid4()), str(uuid.uuid4())
        r = heartbeat(wire, "g3", a, 0, ["hb"])
        assert r.heartbeat_interval.total_seconds() == 1.0
        epoch = r.member_epoch
        heartbeat(wire, "g3", b, 0, ["hb"])
        started = time.monotonic()
        # a keeps heartbeating, b goes silent.
        while [m.member_id for m in describe(wire, "g3").members] != [a]:
            assert time.monotonic() - started < 30, describe(wire, "g3")
            r = heartbeat(wire, "g3", a, epoch)
            assert r.error_code == ErrorCode.none, r
            epoch = r.member_epoch
            time.sleep(0.5)  # heartbeat pacing (the member's interval), not a condition
        assert time.monotonic() - started >= 5.0
        assert heartbeat(wire, "g3", b, 2).error_code == ErrorCode.unknown_member_id


def test_group_survives_kill_and_restart(fresh_broker: BrokerProcess) -> None:
    with fresh_broker, WireClient(fresh_broker.bootstrap) as wire:
        wire.create_topic("hb", 3)
        tid = topic_id_of(wire, "hb")
        wire.wait_for_coordinator("g4")
        a, b = str(uuid.uuid4()), str(uuid.uuid4())
        epochs = {a: heartbeat(wire, "g4", a, 0, ["hb"]).member_epoch,
                  b: heartbeat(wire, "g4", b, 0, ["hb"]).member_epoch}

        def settled() -> bool:
            # The target may wait group.share.assignment.interval.ms: heartbeat until both are on it.
            for m in (a, b):
                epochs[m] = heartbeat(wire, "g4", m, epochs[m]).member_epoch
            return epochs[a] == epochs[b] == describe(wire, "g4").group_epoch
        wait_for(settled, 15, "both members at the group epoch")
        r = heartbeat(wire, "g4", a, epochs[a])
        before = describe(wire, "g4")
        fresh_broker.kill()  # kill -9: what a heartbeat wrote was appended before it was answered
    with fresh_broker, WireClient(fresh_broker.bootstrap) as wire:
        wire.wait_for_coordinator("g4")
        after = describe(wire, "g4")
        assert (after.group_state, after.group_epoch, after.assignment_epoch) == (
            before.group_state, before.group_epoch, before.assignment_epoch)
        assert after.members == before.members
        # The member goes on with the epoch it had; nothing changed, so nothing is sent.
        r = heartbeat(wire, "g4", a, r.member_epoch)
        assert (r.error_code, r.assignment) == (ErrorCode.none, None), r
        assert describe(wire, "g4").group_epoch == before.group_epoch
        assert tid in {tp.topic_id for m in after.members for tp in m.assignment.topic_partitions}


def test_api_versions_advertise_share_apis_and_feature(broker: BrokerProcess) -> None:
    """A newly formatted cluster finalizes share.version 1 (Kafka 4.3's default) and serves the
    share-group APIs at Kafka 4.3's versions; without the feature they answer UNSUPPORTED_VERSION."""
    with WireClient(broker.bootstrap) as wire:
        resp = wire.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        apis = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys}
        assert apis[76] == (1, 1) and apis[77] == (1, 1)
        supported = {f.name: (f.min_version, f.max_version) for f in resp.supported_features}
        finalized = {f.name: f.max_version_level for f in resp.finalized_features}
        assert supported["share.version"] == (0, 1) and finalized["share.version"] == 1


def test_share_apis_need_share_version(fresh_broker: BrokerProcess) -> None:
    fresh_broker.features["share.version"] = 0
    with fresh_broker, WireClient(fresh_broker.bootstrap) as wire:
        wire.wait_for_coordinator("g5")
        r = heartbeat(wire, "g5", str(uuid.uuid4()), 0, ["t"])
        assert r.error_code == ErrorCode.unsupported_version, r
        assert describe(wire, "g5").error_code == ErrorCode.unsupported_version


def test_deleted_topic_state_is_deleted_and_recreated_topic_assigned(fresh_broker: BrokerProcess) -> None:
    with fresh_broker, WireClient(fresh_broker.bootstrap) as wire:
        wire.create_topic("gone", 1)
        old_id = topic_id_of(wire, "gone")
        wire.wait_for_coordinator("g6")
        a = str(uuid.uuid4())
        r = heartbeat(wire, "g6", a, 0, ["gone"])
        epoch = r.member_epoch

        def assignment_becomes(expected: dict[uuid.UUID, set[int]]) -> bool:
            # Partitions are assigned from the heartbeat after their initialization, and a new
            # target waits group.share.assignment.interval.ms (1 s) after the last.
            nonlocal epoch
            x = heartbeat(wire, "g6", a, epoch)
            epoch = x.member_epoch
            return x.assignment is not None and assigned(x) == expected
        wait_for(lambda: assignment_becomes({old_id: {0}}), 15, "the partition")
        admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
        for future in admin.delete_topics(["gone"], operation_timeout=30).values():
            future.result()
        wait_for(lambda: wire.metadata(["gone"]).topics[0].error_code != ErrorCode.none, 20, "the topic to go")
        wait_for(lambda: assignment_becomes({}), 15, "the deleted topic's partition to be unassigned")
        wire.create_topic("gone", 1)
        new_id = topic_id_of(wire, "gone")
        wait_for(lambda: assignment_becomes({new_id: {0}}), 15, "the re-created topic's partition")
        assert read_state_error(wire, "g6", old_id) == ErrorCode.invalid_request  # its state was deleted
        assert read_state_error(wire, "g6", new_id) == ErrorCode.none


def read_state_error(wire: WireClient, group: str, topic_id: uuid.UUID) -> ErrorCode:
    resp = wire.request(read_req.ReadShareGroupStateRequest(group_id=GroupId(group), topics=(read_req.ReadStateData(
        topic_id=topic_id, partitions=(read_req.PartitionData(partition=i32(0), leader_epoch=i32(-1)),)),)))
    code: ErrorCode = resp.results[0].partitions[0].error_code
    return code
