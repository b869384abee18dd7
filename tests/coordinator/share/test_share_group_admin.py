"""Share groups in ListGroups and DeleteGroups, a confluent-kafka ShareConsumer joining, and
Kafka's ``kafka-share-groups`` tool listing and describing the group (strom's broker).

ListGroups shows a share group with type and protocol type "share" and its state (Stable with
members, Empty without), filtered by type and state; DeleteGroups refuses a group with members
(NON_EMPTY_GROUP) and deletes an empty one together with its share-partition state in
``__share_group_state`` (a ReadShareGroupState of it is then "uninitialized"); the classic and
KIP-848 APIs do not take a share group's id.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from acl_broker import AclBroker, sasl_wire_client
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from diff_wire import WireClient
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.read_share_group_state.v0 import request as read_req
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta
from ref_fixtures import kafka_tool_output

from strom.core.testing import BrokerProcess

SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def heartbeat(wire: WireClient, group: str, member: str, epoch: int, topics: tuple[str, ...] | None = None) -> Any:
    names = None if topics is None else tuple(TopicName(t) for t in topics)
    return wire.request(ShareGroupHeartbeatRequest(group_id=GroupId(group), member_id=member, member_epoch=i32(epoch),
                                                   rack_id=None, subscribed_topic_names=names))


def listed(wire: WireClient, types: tuple[str, ...] = (), states: tuple[str, ...] = ()) -> dict[str, tuple[str, str, str]]:
    resp = wire.request(ListGroupsRequest(states_filter=states, types_filter=types))
    assert resp.error_code == ErrorCode.none, resp
    return {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in resp.groups}


def delete(wire: WireClient, group: str) -> ErrorCode:
    code: ErrorCode = wire.request(DeleteGroupsRequest(groups_names=(GroupId(group),))).results[0].error_code
    return code


def read_state(wire: WireClient, group: str, topic_id: uuid.UUID, partition: int) -> Any:
    return wire.request(read_req.ReadShareGroupStateRequest(group_id=group, topics=(read_req.ReadStateData(
        topic_id=topic_id, partitions=(read_req.PartitionData(partition=i32(partition), leader_epoch=i32(-1)),)),))
    ).results[0].partitions[0]


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_list_and_delete_share_group(fresh_broker: BrokerProcess) -> None:
    with fresh_broker, WireClient(fresh_broker.bootstrap) as wire:
        wire.create_topic("ld", 2)
        topic_id = wire.metadata(["ld"]).topics[0].topic_id
        wire.wait_for_coordinator("sg")
        member = str(uuid.uuid4())
        assert heartbeat(wire, "sg", member, 0, ("ld",)).error_code == ErrorCode.none

        assert listed(wire)["sg"] == ("share", "Stable", "share")
        assert set(listed(wire, types=("share",))) == {"sg"}
        assert "sg" not in listed(wire, types=("consumer", "classic"))
        assert "sg" in listed(wire, states=("stable",)) and "sg" not in listed(wire, states=("Empty",))

        # The other protocols do not take a share group's id.
        cg = wire.request(ConsumerGroupHeartbeatRequest(
            group_id=GroupId("sg"), member_id=str(uuid.uuid4()), member_epoch=i32(0), instance_id=None, rack_id=None,
            rebalance_timeout=i32Timedelta.parse(timedelta(seconds=30)), subscribed_topic_names=(TopicName("ld"),), subscribed_topic_regex=None,
            server_assignor=None, topic_partitions=()))
        assert (cg.error_code, cg.error_message) == (ErrorCode.group_id_not_found, "Group sg is not a consumer group.")

        assert delete(wire, "sg") == ErrorCode.non_empty_group
        assert read_state(wire, "sg", topic_id, 1).error_code == ErrorCode.none
        assert heartbeat(wire, "sg", member, -1).error_code == ErrorCode.none
        assert listed(wire, states=("empty",))["sg"] == ("share", "Empty", "share")

        assert delete(wire, "sg") == ErrorCode.none
        assert "sg" not in listed(wire)
        for p in (0, 1):
            assert read_state(wire, "sg", topic_id, p).error_code == ErrorCode.invalid_request
        d = wire.request(ShareGroupDescribeRequest(group_ids=(GroupId("sg"),), include_authorized_operations=False))
        assert d.groups[0].error_code == ErrorCode.group_id_not_found
        assert delete(wire, "sg") == ErrorCode.group_id_not_found


def test_share_consumer_joins_and_tool_describes(fresh_broker: BrokerProcess) -> None:
    with fresh_broker, WireClient(fresh_broker.bootstrap) as wire:
        wire.create_topic("sc", 3)
        wire.wait_for_coordinator("ck-share")
        consumer = ShareConsumer({"bootstrap.servers": fresh_broker.bootstrap, "group.id": "ck-share"})
        try:
            consumer.subscribe(["sc"])

            def joined() -> Any:
                consumer.poll(0.2)
                resp = wire.request(ShareGroupDescribeRequest(group_ids=(GroupId("ck-share"),),
                                                              include_authorized_operations=False))
                group = resp.groups[0]
                if group.error_code != ErrorCode.none or not group.members:
                    return None
                member = group.members[0]
                return group if member.assignment.topic_partitions else None

            group = wait_for(joined, 30, "the ShareConsumer to join and be assigned")
            member = group.members[0]
            assert group.group_state == "Stable"
            assert member.subscribed_topic_names == ("sc",)
            assert sorted(p for tp in member.assignment.topic_partitions for p in tp.partitions) == [0, 1, 2]

            listing = kafka_tool_output(SHARE_GROUP_COMMAND, "--bootstrap-server", fresh_broker.bootstrap, "--list")
            assert "ck-share" in listing.split()
            out = kafka_tool_output(SHARE_GROUP_COMMAND, "--bootstrap-server", fresh_broker.bootstrap,
                                    "--describe", "--group", "ck-share", "--members")
            lines = [line.split() for line in out.splitlines() if line.strip()]
            header = lines[0]
            assert header[:2] == ["GROUP", "CONSUMER-ID"], out
            row = dict(zip(header, lines[1], strict=False))
            assert row["GROUP"] == "ck-share" and row["CONSUMER-ID"] == member.member_id, out
            assert "sc:0,1,2" in out, out
            state = kafka_tool_output(SHARE_GROUP_COMMAND, "--bootstrap-server", fresh_broker.bootstrap,
                                      "--describe", "--group", "ck-share", "--state")
            rows = [line.split() for line in state.splitlines() if line.strip()]
            assert rows[1][0] == "ck-share" and rows[1][-2:] == ["Stable", "1"], state
        finally:
            consumer.close()
        # close() leaves the group (epoch -1).
        resp = wait_for(lambda: (g := wire.request(ShareGroupDescribeRequest(
            group_ids=(GroupId("ck-share"),), include_authorized_operations=False)).groups[0]).group_state == "Empty"
            and g, 30, "the member to leave")
        assert resp.members == ()


def test_authorization_as_kafka_apis(tmp_path: Path) -> None:
    """READ on the group to heartbeat, DESCRIBE on every subscribed topic, DESCRIBE (implied by
    READ) on the group to describe it (StandardAuthorizer, PLAIN user alice with only the ACLs
    granted here)."""
    with AclBroker(tmp_path / "data") as broker:
        admin = AdminClient({"bootstrap.servers": broker.plain})
        with WireClient(broker.plain) as wire:
            wire.create_topic("at", 1)
            wire.wait_for_coordinator("ag")

        def grant(rtype: ResourceType, name: str, op: AclOperation) -> None:
            binding = AclBinding(rtype, name, ResourcePatternType.LITERAL, "User:alice", "*", op,
                                 AclPermissionType.ALLOW)
            for future in admin.create_acls([binding], request_timeout=30).values():
                future.result()

        with sasl_wire_client(broker.sasl, "alice") as alice:
            member = str(uuid.uuid4())

            def describe_code() -> ErrorCode:
                code: ErrorCode = alice.request(ShareGroupDescribeRequest(
                    group_ids=(GroupId("ag"),), include_authorized_operations=False)).groups[0].error_code
                return code

            assert heartbeat(alice, "ag", member, 0, ("at",)).error_code == ErrorCode.group_authorization_failed
            assert describe_code() == ErrorCode.group_authorization_failed
            grant(ResourceType.GROUP, "ag", AclOperation.READ)
            wait_for(lambda: heartbeat(alice, "ag", member, 0, ("at",)).error_code
                     == ErrorCode.topic_authorization_failed, 15, "READ on the group to apply")
            grant(ResourceType.TOPIC, "at", AclOperation.DESCRIBE)
            r = wait_for(lambda: (x := heartbeat(alice, "ag", member, 0, ("at",))).error_code == ErrorCode.none and x,
                         15, "DESCRIBE on the topic to apply")
            assert r.member_epoch >= 1
            # The partitions are assigned at a heartbeat after the one that initialized them.
            epoch = r.member_epoch

            def assigned() -> bool:
                nonlocal epoch
                x = heartbeat(alice, "ag", member, epoch)
                epoch = x.member_epoch
                return x.assignment is not None and bool(x.assignment.topic_partitions)
            wait_for(assigned, 15, "the member's assignment")
            assert describe_code() == ErrorCode.none  # READ implies DESCRIBE, as in Kafka's AclOperation
        # bob may describe the group but not the topic its member is assigned: no members shown.
        binding = AclBinding(ResourceType.GROUP, "ag", ResourcePatternType.LITERAL, "User:bob", "*",
                             AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        for future in admin.create_acls([binding], request_timeout=30).values():
            future.result()
        with sasl_wire_client(broker.sasl, "bob") as bob:
            def bob_describe() -> Any:
                return bob.request(ShareGroupDescribeRequest(group_ids=(GroupId("ag"),),
                                                             include_authorized_operations=False)).groups[0]

            g = wait_for(lambda: (x := bob_describe()).error_code != ErrorCode.group_authorization_failed and x,
                         15, "bob's DESCRIBE on the group to apply")
            assert (g.error_code, g.error_message, g.members) == (
                ErrorCode.topic_authorization_failed,
                "The described group uses topics that the client is not authorized to describe.", ())
