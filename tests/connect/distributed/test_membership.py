"""The kio membership client against the bundled broker: a group of protocol type "connect"."""

from __future__ import annotations

import threading
import uuid

import pytest
from kio.schema.errors import ErrorCode

from strom.connect.runtime.distributed.membership import GroupMembership, JoinResult, MembershipError
from strom.core.testing import BrokerProcess


def _member(broker: BrokerProcess, group: str, **kw: int) -> GroupMembership:
    return GroupMembership(broker.bootstrap, group, session_timeout_ms=kw.get("session", 6000),
                           heartbeat_interval_ms=kw.get("hb", 500), rebalance_timeout_ms=10000)


def test_two_members_join_sync_and_rebalance_on_leave(connect_broker: BrokerProcess) -> None:
    group = f"connect-{uuid.uuid4().hex[:8]}"
    a, b = _member(connect_broker, group), _member(connect_broker, group)
    try:
        ja = a.join([("sessioned", b"meta-a2"), ("compatible", b"meta-a1")])
        assert ja.is_leader and ja.protocol_name == "sessioned" and ja.members == {ja.member_id: b"meta-a2"}
        assert a.sync({ja.member_id: b"assign-a"}, ja.protocol_name) == b"assign-a"
        a.start_heartbeats()
        # b joins: a's heartbeat learns of the rebalance and a rejoins; both land in generation 2.
        results: dict[str, JoinResult] = {}
        t = threading.Thread(target=lambda: results.setdefault(
            "b", b.join([("sessioned", b"meta-b2"), ("compatible", b"meta-b1")])))
        t.start()
        assert a.rejoin_needed.wait(10)
        ja2 = a.join([("sessioned", b"meta-a2"), ("compatible", b"meta-a1")])
        t.join(15)
        jb = results["b"]
        assert ja2.generation == jb.generation == ja.generation + 1
        assert ja2.is_leader and ja2.members == {ja2.member_id: b"meta-a2", jb.member_id: b"meta-b2"}
        got: dict[str, bytes] = {}
        t = threading.Thread(target=lambda: got.setdefault("b", b.sync({}, "sessioned")))
        t.start()
        assert a.sync({ja2.member_id: b"A", jb.member_id: b"B"}, "sessioned") == b"A"
        t.join(15)
        assert got["b"] == b"B"
        b.start_heartbeats()
        assert a.heartbeat() == ErrorCode.none
        # b leaves: a is asked to rebalance without waiting for b's session to time out.
        b.close()
        assert a.rejoin_needed.wait(10)
        ja3 = a.join([("sessioned", b"meta-a2")])
        assert ja3.members == {ja3.member_id: b"meta-a2"}
    finally:
        a.close()
        b.close()


def test_consumer_group_id_cannot_be_joined_as_connect(connect_broker: BrokerProcess) -> None:
    group = f"connect-{uuid.uuid4().hex[:8]}"
    a = _member(connect_broker, group)
    other = GroupMembership(connect_broker.bootstrap, group, protocol_type="consumer")
    try:
        ja = other.join([("range", b"")])
        other.sync({ja.member_id: b""})
        with pytest.raises(MembershipError) as err:
            a.join([("sessioned", b"m")])
        assert err.value.error_code == ErrorCode.inconsistent_group_protocol
    finally:
        a.close()
        other.close()


def test_dead_member_is_expired_after_its_session(connect_broker: BrokerProcess) -> None:
    group = f"connect-{uuid.uuid4().hex[:8]}"
    a, b = _member(connect_broker, group), _member(connect_broker, group)
    try:
        ja = a.join([("sessioned", b"a")])
        a.sync({ja.member_id: b""})
        a.start_heartbeats()
        t = threading.Thread(target=lambda: b.join([("sessioned", b"b")]))
        t.start()
        assert a.rejoin_needed.wait(10)
        ja = a.join([("sessioned", b"a")])
        t.join(15)
        sync_b = threading.Thread(target=lambda: b.sync({}))
        sync_b.start()
        a.sync({m: b"" for m in ja.members})
        sync_b.join(15)
        # b goes silent (no heartbeats, no LeaveGroup, socket dropped): its session expires.
        b.close(leave=False)
        assert a.rejoin_needed.wait(15)
        ja = a.join([("sessioned", b"a")])
        assert list(ja.members) == [ja.member_id]
    finally:
        a.close()


def test_broken_connection_is_an_error_then_reconnects(connect_broker: BrokerProcess) -> None:
    group = f"connect-{uuid.uuid4().hex[:8]}"
    a = _member(connect_broker, group)
    try:
        ja = a.join([("sessioned", b"a")])
        a.sync({ja.member_id: b"x"})
        assert a._conn is not None
        a._conn.sock.shutdown(2)  # the connection dies under the client
        with pytest.raises(MembershipError) as err:
            a.heartbeat()
        assert err.value.error_code == ErrorCode.network_exception and err.value.coordinator_moved
        assert a.heartbeat() == ErrorCode.none  # a new connection to the coordinator, same member
    finally:
        a.close()


def test_unreachable_bootstrap_is_an_error() -> None:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    m = GroupMembership(dead, "g", request_timeout_ms=2000)
    with pytest.raises(MembershipError, match="no bootstrap server reachable"):
        m.join([("sessioned", b"")])
