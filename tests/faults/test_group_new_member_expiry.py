"""A new classic-group member whose JoinGroup is parked expires, as in Kafka (issue 20's RSS check).

The protocol fuzzer found it: JoinGroups with an empty member id add a new member each, and a
rebalance held open (a KIP-394 pending member with a long session, a member asking for a
rebalance timeout of 2^31 - 1 ms) parked them for good; the fuzzer hung up after 2 s and joined
again as another new member. Every parked request kept its member, its task and its connection:
+9 MiB of broker RSS per 30,000 fuzzed JoinGroups, never given back. Kafka times out a new
member's JoinGroup after CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS (5 minutes; strom's
``strom.group.new.member.join.timeout.ms``, shortened here): the member is removed and a client
still waiting gets UNKNOWN_MEMBER_ID with an empty member id. And the Empty groups such
requests leave behind (a JoinGroup refused, members gone) are deleted every
``offsets.retention.check.interval.ms`` unless they have committed offsets, as Kafka's
cleanupGroupMetadata does. Real broker, real sockets.
"""

from __future__ import annotations

import datetime
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_wire import connect, decode_response, encode_request, read_frame, roundtrip
from kio.schema.describe_groups.v3.request import DescribeGroupsRequest
from kio.schema.join_group.v3.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.join_group.v5.request import JoinGroupRequest as JoinGroupRequestV5
from kio.schema.join_group.v5.request import JoinGroupRequestProtocol as JoinGroupRequestProtocolV5
from kio.schema.list_groups.v0.request import ListGroupsRequest
from kio.schema.types import GroupId
from kio.static.primitive import i32Timedelta

from strom.core.testing import BrokerProcess

NEW_MEMBER_JOIN_TIMEOUT_MS = 3000
CLEANUP_INTERVAL_MS = 1000
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
MEMBER_ID_REQUIRED = 79
SUBSCRIPTION = struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", -1)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("new-member"), config={
            "group.initial.rebalance.delay.ms": "0",
            "strom.group.new.member.join.timeout.ms": str(NEW_MEMBER_JOIN_TIMEOUT_MS),
            "offsets.retention.check.interval.ms": str(CLEANUP_INTERVAL_MS)}) as proc:
        yield proc


def _ms(value: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))


def _join_v3(group: str, rebalance_timeout_ms: int) -> JoinGroupRequest:
    return JoinGroupRequest(group_id=GroupId(group), session_timeout=_ms(10_000),
                            rebalance_timeout=_ms(rebalance_timeout_ms), member_id="", protocol_type="consumer",
                            protocols=(JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION),))


def _hold_rebalance_open(bootstrap: str, group: str) -> None:
    """A KIP-394 member id handed out and never used, for the longest session: the rebalance
    waits for it (30 minutes)."""
    with connect(bootstrap) as sock:
        resp = roundtrip(sock, JoinGroupRequestV5(
            group_id=GroupId(group), session_timeout=_ms(1_800_000), rebalance_timeout=_ms(1_800_000),
            member_id="", group_instance_id=None, protocol_type="consumer",
            protocols=(JoinGroupRequestProtocolV5(name="range", metadata=SUBSCRIPTION),)))
        assert int(resp.error_code) == MEMBER_ID_REQUIRED


def _members(bootstrap: str, group: str) -> tuple[str, int]:
    with connect(bootstrap) as sock:
        resp = roundtrip(sock, DescribeGroupsRequest(groups=(GroupId(group),), include_authorized_operations=False))
    [described] = resp.groups
    assert int(described.error_code) == 0
    return str(described.group_state), len(described.members)


def _wait_members(bootstrap: str, group: str, count: int, timeout: float) -> tuple[str, int]:
    deadline = time.monotonic() + timeout
    while True:
        state, members = _members(bootstrap, group)
        if members == count or time.monotonic() > deadline:
            return state, members
        time.sleep(0.2)


def test_parked_new_member_gets_unknown_member_id(broker: BrokerProcess) -> None:
    """A new member waiting in a rebalance that cannot end is answered and removed on time."""
    group = "new-member-waits"
    _hold_rebalance_open(broker.bootstrap, group)
    with connect(broker.bootstrap, timeout=NEW_MEMBER_JOIN_TIMEOUT_MS / 1000 + 20) as sock:
        started = time.monotonic()
        sock.sendall(encode_request(_join_v3(group, 2**31 - 1), 7))
        assert _wait_members(broker.bootstrap, group, 1, 5) == ("PreparingRebalance", 1)
        payload = read_frame(sock)
        waited = time.monotonic() - started
    assert payload is not None, "the broker closed the connection instead of answering the JoinGroup"
    correlation_id, resp = decode_response(11, 3, payload)
    assert (correlation_id, int(resp.error_code), resp.member_id) == (7, UNKNOWN_MEMBER_ID, "")
    assert NEW_MEMBER_JOIN_TIMEOUT_MS / 1000 - 0.5 <= waited <= NEW_MEMBER_JOIN_TIMEOUT_MS / 1000 + 10
    assert _members(broker.bootstrap, group)[1] == 0


def test_defunct_new_members_do_not_pile_up(broker: BrokerProcess) -> None:
    """Clients that hang up while their JoinGroup is parked (as the fuzzer does) leave nothing."""
    group = "new-members-hang-up"
    _hold_rebalance_open(broker.bootstrap, group)
    socks: list[socket.socket] = []
    for i in range(20):
        sock = connect(broker.bootstrap)
        sock.sendall(encode_request(_join_v3(group, 2**31 - 1), 100 + i))
        socks.append(sock)
    assert _wait_members(broker.bootstrap, group, 20, 5) == ("PreparingRebalance", 20)
    for sock in socks:
        sock.close()
    state, members = _wait_members(broker.bootstrap, group, 0, NEW_MEMBER_JOIN_TIMEOUT_MS / 1000 + 10)
    assert members == 0, f"{members} defunct new members still in the group ({state})"


def _listed(bootstrap: str) -> set[str]:
    with connect(bootstrap) as sock:
        resp = roundtrip(sock, ListGroupsRequest())
    assert int(resp.error_code) == 0
    return {str(g.group_id) for g in resp.groups}


def test_empty_groups_without_offsets_are_deleted(broker: BrokerProcess) -> None:
    """A JoinGroup refused for a random group id leaves an Empty group; the periodic cleanup
    deletes it. An Empty group with committed offsets stays."""
    topic = "cleanup-offsets"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # alive until the topic is created
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "keeps-offsets"})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    finally:
        consumer.close()
    refused = [f"refused-{i}" for i in range(20)]
    with connect(broker.bootstrap) as sock:
        for i, group in enumerate(refused):
            join = JoinGroupRequest(group_id=GroupId(group), session_timeout=_ms(10_000), rebalance_timeout=_ms(10_000),
                                    member_id="", protocol_type="", protocols=())
            sock.sendall(encode_request(join, 200 + i))
            payload = read_frame(sock)
            assert payload is not None
            assert int(decode_response(11, 3, payload)[1].error_code) == INCONSISTENT_GROUP_PROTOCOL
    deadline = time.monotonic() + CLEANUP_INTERVAL_MS / 1000 * 3 + 5
    while set(refused) & _listed(broker.bootstrap) and time.monotonic() < deadline:
        time.sleep(0.2)
    listed = _listed(broker.bootstrap)
    assert not set(refused) & listed, f"Empty groups with no offsets still listed: {sorted(set(refused) & listed)}"
    assert "keeps-offsets" in listed
    assert _members(broker.bootstrap, "refused-0")[0] == "Dead"
