"""ShareGroupHeartbeat / ShareGroupDescribe / ListGroups / DeleteGroups: strom against Apache Kafka 4.3.1.

One scenario runs on both brokers over the same raw wire client, and what it observes is
compared: every heartbeat error (code and message: empty group or member id, bad epochs, unknown
group, unknown member, fenced epochs), the join, the described group (state, assignor, members,
their client, subscriptions and assignment, the authorized operations), the leave and its
answer, ListGroups and DeleteGroups of the group, and what the classic and consumer-group APIs
(JoinGroup, Heartbeat, OffsetCommit, OffsetFetch, DescribeGroups, ConsumerGroupHeartbeat,
ConsumerGroupDescribe) answer for a share group's id.

The epochs are compared as numbers: Kafka 4.3.1 starts a group at epoch 1 (the join makes it
2, with nothing assigned: the share partitions are not initialized yet), initializes the
partitions after the join and assigns them at a later heartbeat (epoch 3), at most once per
``group.share.assignment.interval.ms``; strom answers the same epochs. How many heartbeats the
assignment takes is timing (Kafka's first initialization on a fresh broker can take seconds), so
the epochs of the heartbeats before it are not compared.
"""

from __future__ import annotations

import re
import time
import uuid
from datetime import timedelta
from typing import Any

from diff_wire import WireClient
from kafka_ref import KafkaRef
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v6.request import DescribeGroupsRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v9.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64
from ref_fixtures import kafka_ref  # noqa: F401 (the fixture)

from strom.core.testing import BrokerProcess

GROUP = "diff-share"
TOPIC = "diff-share-t"
MEMBER = str(uuid.uuid4())
STRANGER = str(uuid.uuid4())


def heartbeat(wire: WireClient, group: str, member: str, epoch: int, topics: tuple[str, ...] | None = None) -> Any:
    names = None if topics is None else tuple(TopicName(t) for t in topics)
    return wire.request(ShareGroupHeartbeatRequest(group_id=GroupId(group), member_id=member, member_epoch=i32(epoch),
                                                   rack_id=None, subscribed_topic_names=names))


def describe(wire: WireClient, group: str) -> Any:
    return wire.request(ShareGroupDescribeRequest(group_ids=(GroupId(group),),
                                                  include_authorized_operations=True)).groups[0]


def error(resp: Any) -> tuple[str, str | None]:
    # The coordinator's epoch in a FENCED message is compared as a placeholder (see the docstring).
    message = None if resp.error_message is None else re.sub(r"coordinator \(\d+\)", "coordinator (N)",
                                                              resp.error_message)
    return resp.error_code.name, message


def scenario(bootstrap: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    with WireClient(bootstrap) as wire:
        wire.create_topic(TOPIC, 2)
        wire.wait_for_coordinator(GROUP)
        seen["describe unknown"] = error(describe(wire, GROUP))
        seen["unknown group"] = error(heartbeat(wire, GROUP, MEMBER, 5))
        seen["empty group id"] = error(heartbeat(wire, "", MEMBER, 0, (TOPIC,)))
        seen["empty member id"] = error(heartbeat(wire, GROUP, "", 0, (TOPIC,)))
        seen["no topics"] = error(heartbeat(wire, GROUP, MEMBER, 0, ()))
        seen["null topics"] = error(heartbeat(wire, GROUP, MEMBER, 0, None))
        seen["epoch -2"] = error(heartbeat(wire, GROUP, MEMBER, -2, (TOPIC,)))

        joined = heartbeat(wire, GROUP, MEMBER, 0, (TOPIC,))
        seen["join"] = (error(joined), joined.member_id, joined.member_epoch, joined.heartbeat_interval.total_seconds(),
                        _parts(joined))
        epoch, parts = joined.member_epoch, _parts(joined)
        deadline = time.monotonic() + 30
        while parts != [0, 1]:
            assert time.monotonic() < deadline, f"no assignment on {bootstrap}"
            time.sleep(0.2)  # heartbeat pacing; the loop's condition is the assignment
            r = heartbeat(wire, GROUP, MEMBER, epoch)
            assert r.error_code == 0, r
            epoch, parts = r.member_epoch, (_parts(r) if r.assignment is not None else parts)
        seen["assigned"] = (parts, epoch)
        seen["fenced greater"] = error(heartbeat(wire, GROUP, MEMBER, 99))
        seen["unknown member"] = error(heartbeat(wire, GROUP, STRANGER, epoch))

        d = describe(wire, GROUP)
        seen["describe"] = (error(d), d.group_id, d.group_state, d.assignor_name, d.authorized_operations,
                            d.group_epoch, d.assignment_epoch,
                            [(m.member_id, m.member_epoch, m.client_id, m.client_host, m.rack_id,
                              m.subscribed_topic_names,
                              [(tp.topic_name, tp.partitions) for tp in m.assignment.topic_partitions])
                             for m in d.members])
        seen["other protocols"] = other_protocols(wire)
        listed = wire.request(ListGroupsRequest(states_filter=(), types_filter=("share",)))
        # This test's group only: other tests leave share groups on the shared reference broker.
        seen["list"] = [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups
                        if g.group_id == GROUP]
        deleted = wire.request(DeleteGroupsRequest(groups_names=(GroupId(GROUP),)))
        seen["delete non-empty"] = deleted.results[0].error_code.name

        left = heartbeat(wire, GROUP, MEMBER, -1)
        seen["leave"] = (error(left), left.member_id, left.member_epoch, left.heartbeat_interval.total_seconds(),
                         left.assignment)
        seen["leave again"] = error(heartbeat(wire, GROUP, MEMBER, -1))
        d = describe(wire, GROUP)
        seen["describe empty"] = (error(d), d.group_state, d.members, d.group_epoch, d.assignment_epoch)
        deleted = wire.request(DeleteGroupsRequest(groups_names=(GroupId(GROUP),)))
        seen["delete"] = deleted.results[0].error_code.name
        seen["describe deleted"] = error(describe(wire, GROUP))
    return seen


def other_protocols(wire: WireClient) -> dict[str, Any]:
    """What the classic and consumer-group APIs answer for a share group's id."""
    gid = GroupId(GROUP)
    out: dict[str, Any] = {}
    join = wire.request(JoinGroupRequest(
        group_id=gid, session_timeout=i32Timedelta.parse(timedelta(seconds=30)),
        rebalance_timeout=i32Timedelta.parse(timedelta(seconds=30)), member_id="", group_instance_id=None,
        protocol_type="consumer", protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),), reason=None))
    out["JoinGroup"] = (join.error_code.name, join.member_id)
    out["Heartbeat"] = wire.request(HeartbeatRequest(group_id=gid, generation_id=i32(1), member_id=MEMBER,
                                                     group_instance_id=None)).error_code.name
    commit = wire.request(OffsetCommitRequest(
        group_id=gid, generation_id_or_member_epoch=i32(-1), member_id="", group_instance_id=None,
        topics=(OffsetCommitRequestTopic(name=TopicName(TOPIC), partitions=(OffsetCommitRequestPartition(
            partition_index=i32(0), committed_offset=i64(1), committed_leader_epoch=i32(-1),
            committed_metadata=None),)),)))
    out["OffsetCommit"] = commit.topics[0].partitions[0].error_code.name
    fetch = wire.request(OffsetFetchRequest(groups=(OffsetFetchRequestGroup(
        group_id=gid, member_id=None, member_epoch=i32(-1),
        topics=(OffsetFetchRequestTopics(name=TopicName(TOPIC), partition_indexes=(i32(0),)),)),),
        require_stable=False))
    out["OffsetFetch"] = (fetch.groups[0].error_code.name,
                          [(p.partition_index, p.committed_offset, p.error_code.name)
                           for t in fetch.groups[0].topics for p in t.partitions])
    described = wire.request(DescribeGroupsRequest(groups=(gid,), include_authorized_operations=False)).groups[0]
    out["DescribeGroups"] = (error(described), described.group_state)
    cg = wire.request(ConsumerGroupHeartbeatRequest(
        group_id=gid, member_id=str(uuid.uuid4()), member_epoch=i32(0), instance_id=None, rack_id=None,
        rebalance_timeout=i32Timedelta.parse(timedelta(seconds=30)), subscribed_topic_names=(TopicName(TOPIC),),
        subscribed_topic_regex=None, server_assignor=None, topic_partitions=()))
    out["ConsumerGroupHeartbeat"] = error(cg)
    cgd = wire.request(ConsumerGroupDescribeRequest(group_ids=(gid,), include_authorized_operations=False))
    out["ConsumerGroupDescribe"] = error(cgd.groups[0])
    return out


def _parts(resp: Any) -> list[int]:
    return sorted(p for tp in resp.assignment.topic_partitions for p in tp.partitions)


def test_heartbeat_describe_list_delete_as_kafka(kafka_ref: KafkaRef, fresh_broker: BrokerProcess) -> None:  # noqa: F811
    theirs = scenario(kafka_ref.bootstrap)
    with fresh_broker:
        ours = scenario(fresh_broker.bootstrap)
    assert {k: v for k, v in ours.items() if v != theirs[k]} == {k: v for k, v in theirs.items() if v != ours[k]}
    # What Kafka 4.3.1 answered (so a change of the reference shows here, not as a strom bug).
    assert theirs["empty member id"] == ("invalid_request", None)
    assert theirs["unknown group"] == ("group_id_not_found", f"Share group {GROUP} not found.")
    assert theirs["leave"][2:4] == (-1, 0.0)
    assert theirs["join"][2:] == (2, 5.0, []) and theirs["assigned"] == ([0, 1], 3)
    assert theirs["other protocols"]["Heartbeat"] == "unknown_member_id"
    assert theirs["other protocols"]["OffsetFetch"] == ("none", [(0, -1, "none")])
