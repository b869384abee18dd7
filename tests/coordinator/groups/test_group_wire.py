"""The classic group protocol's error paths on the wire (raw kio requests)."""

from __future__ import annotations

import datetime
import importlib
import socket
import threading
import uuid
from typing import Any

from kafka_wire import connect, roundtrip
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from strom.core.testing import BrokerProcess


def req(api: str, version: int) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.request")


def join(s: socket.socket, group: str, member_id: str = "", instance: str | None = None,
         protocol_type: str = "consumer", protocols: tuple[str, ...] = ("range",)) -> Any:
    mod = req("join_group", 5)
    return roundtrip(s, mod.JoinGroupRequest(
        group_id=group, session_timeout=datetime.timedelta(seconds=10),
        rebalance_timeout=datetime.timedelta(seconds=10), member_id=member_id, group_instance_id=instance,
        protocol_type=protocol_type,
        protocols=tuple(mod.JoinGroupRequestProtocol(name=p, metadata=b"meta-" + p.encode()) for p in protocols)))


def sync(s: socket.socket, group: str, generation: int, member_id: str, assignments: dict[str, bytes],
         instance: str | None = None) -> Any:
    mod = req("sync_group", 3)
    return roundtrip(s, mod.SyncGroupRequest(
        group_id=group, generation_id=i32(generation), member_id=member_id, group_instance_id=instance,
        assignments=tuple(mod.SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in assignments.items())))


def heartbeat(s: socket.socket, group: str, generation: int, member_id: str, instance: str | None = None) -> ErrorCode:
    mod = req("heartbeat", 3)
    return roundtrip(s, mod.HeartbeatRequest(group_id=group, generation_id=i32(generation), member_id=member_id,
                                              group_instance_id=instance)).error_code


def test_join_sync_heartbeat_errors(group_broker: BrokerProcess) -> None:
    group = f"w-{uuid.uuid4().hex[:8]}"
    s1, s2 = connect(group_broker.bootstrap), connect(group_broker.bootstrap)
    try:
        first = join(s1, group)
        assert first.error_code == ErrorCode.member_id_required and first.member_id
        joined = join(s1, group, first.member_id)
        assert joined.error_code == ErrorCode.none and joined.generation_id == 1
        me = joined.member_id
        assert joined.leader == me and [m.member_id for m in joined.members] == [me]
        assert joined.protocol_name == "range"
        assert sync(s1, group, 0, me, {}).error_code == ErrorCode.illegal_generation
        assert sync(s1, group, 1, "nobody", {}).error_code == ErrorCode.unknown_member_id
        done = sync(s1, group, 1, me, {me: b"my-assignment"})
        assert done.error_code == ErrorCode.none and done.assignment == b"my-assignment"
        assert heartbeat(s1, group, 1, me) == ErrorCode.none
        assert heartbeat(s1, group, 7, me) == ErrorCode.illegal_generation
        assert heartbeat(s1, group, 1, "nobody") == ErrorCode.unknown_member_id
        # Another protocol type, or no protocol in common, cannot join.
        assert join(s2, group, protocol_type="connect").error_code == ErrorCode.inconsistent_group_protocol
        assert join(s2, group, protocols=("roundrobin",)).error_code == ErrorCode.inconsistent_group_protocol
        # A second member's join starts a rebalance: the first one is told to rejoin.
        second_id = join(s2, group).member_id
        result: dict[str, Any] = {}
        t = threading.Thread(target=lambda: result.setdefault("join", join(s2, group, second_id)))
        t.start()
        deadline = datetime.datetime.now() + datetime.timedelta(seconds=10)
        while heartbeat(s1, group, 1, me) != ErrorCode.rebalance_in_progress:
            assert datetime.datetime.now() < deadline
        assert sync(s1, group, 1, me, {}).error_code == ErrorCode.rebalance_in_progress
        rejoined = join(s1, group, me)
        t.join(15)
        assert rejoined.error_code == ErrorCode.none and rejoined.generation_id == 2
        assert result["join"].generation_id == 2 and result["join"].leader == me
        assert sorted(m.member_id for m in rejoined.members) == sorted([me, second_id])
    finally:
        s1.close()
        s2.close()


def test_static_member_replacement_fences_the_old_id(group_broker: BrokerProcess) -> None:
    group = f"w-{uuid.uuid4().hex[:8]}"
    s = connect(group_broker.bootstrap)
    try:
        joined = join(s, group, instance="inst-1")  # static members get no MEMBER_ID_REQUIRED round trip
        assert joined.error_code == ErrorCode.none
        old = joined.member_id
        assert sync(s, group, joined.generation_id, old, {old: b"a"}, "inst-1").error_code == ErrorCode.none
        again = join(s, group, instance="inst-1")
        assert again.error_code == ErrorCode.none and again.member_id != old
        assert again.generation_id == joined.generation_id  # no rebalance
        assert heartbeat(s, group, joined.generation_id, old, "inst-1") == ErrorCode.fenced_instance_id
        assert heartbeat(s, group, joined.generation_id, again.member_id, "inst-1") == ErrorCode.none
        stable = sync(s, group, again.generation_id, again.member_id, {}, "inst-1")
        assert stable.error_code == ErrorCode.none and stable.assignment == b"a"
    finally:
        s.close()


def test_find_coordinator_batched_keys(group_broker: BrokerProcess) -> None:
    s = connect(group_broker.bootstrap)
    try:
        mod = req("find_coordinator", 4)
        resp = roundtrip(s, mod.FindCoordinatorRequest(key_type=0, coordinator_keys=("g1", "g2")))
        assert [c.key for c in resp.coordinators] == ["g1", "g2"]
        _host, port = group_broker.bootstrap.rsplit(":", 1)
        assert all(c.error_code == ErrorCode.none and c.port == int(port) and c.node_id == 1 for c in resp.coordinators)
        txn = roundtrip(s, mod.FindCoordinatorRequest(key_type=1, coordinator_keys=("tx",)))
        assert txn.coordinators[0].error_code == ErrorCode.none and txn.coordinators[0].port == int(port)
    finally:
        s.close()
