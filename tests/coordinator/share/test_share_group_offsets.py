# mypy: disable-error-code="arg-type,union-attr"
# (kio types fields with phantom NewTypes - i32, i64, TopicName, GroupId; plain ints/strs are
# what they are at run time, so only the checker objects.)
"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets on strom's broker.

Raw requests over a real socket (diff_wire), so the test sees exactly what the broker answers;
the expected answers are Apache Kafka 4.3.1's to the same requests (probed against the
reference broker): an unknown group or topic is start offset -1 with no error; an alter creates
an empty share group; v1's lag is the high watermark minus the start offset (negative past the
end); a partition beyond the topic is UNKNOWN_TOPIC_OR_PARTITION; deleting a topic with no state
is UNKNOWN_TOPIC_OR_PARTITION "There is no offset information to delete."; a group of another
type is GROUP_ID_NOT_FOUND "Group X is not a share group."; a group with a member is
NON_EMPTY_GROUP. The altered start offset survives kill -9, and a share consumer joining the
group afterwards starts reading there.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ShareConsumer
from diff_wire import WireClient
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.alter_share_group_offsets.v0 import request as alter_req
from kio.schema.delete_share_group_offsets.v0 import request as delete_req
from kio.schema.describe_share_group_offsets.v1 import request as describe_req
from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.offset_commit.v8 import request as commit_req
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1 import request as heartbeat_req
from share_kit import set_group_config

from strom.core.testing import BrokerProcess

NO_OFFSETS = "There is no offset information to delete."
UNKNOWN = "This server does not host this topic-partition."


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("share-offsets")) as proc:
        yield proc


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(c: WireClient, topic: str, partition: int, count: int) -> None:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=int(time.time() * 1000), key=None, value=b"v%d" % i, headers=[])
    batch = bytes(builder.build())
    # A broker that just made the topic may answer NOT_LEADER_OR_FOLLOWER once: retry.
    deadline = time.monotonic() + 30
    while (error := c.produce_batches({(topic, partition): batch})[(topic, partition)]) != 0 \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    assert error == 0, f"produce to {topic}-{partition} failed with error {error}"


def describe(c: WireClient, group: str, topics: dict[str, list[int]] | None) -> Any:
    wanted = None if topics is None else tuple(
        describe_req.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps)) for t, ps in topics.items())
    resp = c.request(describe_req.DescribeShareGroupOffsetsRequest(groups=(
        describe_req.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=wanted),)))
    assert len(resp.groups) == 1
    return resp.groups[0]


def offsets(group: Any) -> dict[tuple[str, int], tuple[int, int, int]]:
    """(topic, partition) -> (start offset, lag, error code)."""
    return {(t.topic_name, p.partition_index): (p.start_offset, p.lag, int(p.error_code))
            for t in group.topics for p in t.partitions}


def alter(c: WireClient, group: str, starts: dict[str, dict[int, int]]) -> Any:
    return c.request(alter_req.AlterShareGroupOffsetsRequest(group_id=group, topics=tuple(
        alter_req.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(
            alter_req.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o) for p, o in ps.items()))
        for t, ps in starts.items())))


def altered(resp: Any) -> list[tuple[str, int, int, str | None]]:
    return [(t.topic_name, p.partition_index, int(p.error_code), p.error_message)
            for t in resp.responses for p in t.partitions]


def delete(c: WireClient, group: str, topics: list[str]) -> Any:
    return c.request(delete_req.DeleteShareGroupOffsetsRequest(group_id=group, topics=tuple(
        delete_req.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics)))


def deleted(resp: Any) -> list[tuple[str, bool, int, str | None]]:
    """(topic, has a topic id, error code, message) per topic, in the broker's order."""
    return [(t.topic_name, t.topic_id is not None, int(t.error_code), t.error_message) for t in resp.responses]


def listed_share_groups(c: WireClient) -> dict[str, str]:
    resp = c.request(ListGroupsRequest(states_filter=(), types_filter=()))
    return {g.group_id: g.group_state for g in resp.groups if g.group_type == "share"}


def described(c: WireClient, group: str) -> tuple[str, int, int]:
    """ShareGroupDescribe's (state, group epoch, assignment epoch)."""
    g = c.request(ShareGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False)).groups[0]
    return str(g.group_state), int(g.group_epoch), int(g.assignment_epoch)


def setup(bootstrap: str, partitions: int = 2) -> tuple[WireClient, str, str]:
    c = WireClient(bootstrap)
    topic, group = unique("so-t"), unique("so-g")
    c.create_topic(topic, partitions)
    c.wait_for_leaders(topic, partitions)
    c.wait_for_coordinator(group)
    return c, topic, group


def test_offsets_of_a_group_without_state_are_minus_one(share_broker: BrokerProcess) -> None:
    c, topic, group = setup(share_broker.bootstrap)
    with c:
        g = describe(c, group, None)
        assert (int(g.error_code), g.topics) == (0, ())
        g = describe(c, group, {topic: [0, 1, 5], "no-such-topic": [0]})
        assert int(g.error_code) == 0
        assert offsets(g) == {(topic, 0): (-1, -1, 0), (topic, 1): (-1, -1, 0), (topic, 5): (-1, -1, 0),
                              ("no-such-topic", 0): (-1, -1, 0)}
        ids = {t.topic_name: t.topic_id for t in g.topics}
        assert ids["no-such-topic"] is None and ids[topic] is not None
        assert describe(c, group, {}).topics == ()
        # Describing creates nothing.
        assert group not in listed_share_groups(c)


def test_alter_creates_the_group_and_sets_start_offsets(share_broker: BrokerProcess) -> None:
    c, topic, group = setup(share_broker.bootstrap)
    with c:
        produce(c, topic, 0, 10)
        resp = alter(c, group, {"no-such-topic": {0: 1}, topic: {0: 3, 1: 5, 7: 1}})
        assert (int(resp.error_code), resp.error_message) == (0, None)
        # Topics refused before the group is asked come first, as Kafka's response builder adds them.
        assert altered(resp) == [("no-such-topic", 0, ErrorCode.unknown_topic_or_partition, UNKNOWN),
                                 (topic, 0, 0, None), (topic, 1, 0, None),
                                 (topic, 7, ErrorCode.unknown_topic_or_partition, UNKNOWN)]
        assert listed_share_groups(c)[group] == "Empty"
        # Kafka 4.3.1 creates the group at group and assignment epoch 1.
        assert described(c, group) == ("Empty", 1, 1)
        # Lag: high watermark - start offset (10 - 3; 0 - 5 on the empty partition, as Kafka).
        assert offsets(describe(c, group, None)) == {(topic, 0): (3, 7, 0), (topic, 1): (5, -5, 0)}
        assert offsets(describe(c, group, {topic: [0, 1, 2]})) == {
            (topic, 0): (3, 7, 0), (topic, 1): (5, -5, 0), (topic, 2): (-1, -1, 0)}
        # -1 unsets the start offset (the group's share.auto.offset.reset applies again).
        assert altered(alter(c, group, {topic: {0: -1}})) == [(topic, 0, 0, None)]
        assert offsets(describe(c, group, None)) == {(topic, 0): (-1, -1, 0), (topic, 1): (5, -5, 0)}
        assert altered(alter(c, group, {topic: {0: 20}})) == [(topic, 0, 0, None)]
        assert offsets(describe(c, group, None))[(topic, 0)] == (20, -10, 0)


def test_delete_offsets_drops_a_topics_state(share_broker: BrokerProcess) -> None:
    c, topic, group = setup(share_broker.bootstrap)
    with c:
        other = unique("so-t2")
        c.create_topic(other, 1)
        c.wait_for_leaders(other, 1)
        alter(c, group, {topic: {0: 2, 1: 4}, other: {0: 1}})
        resp = delete(c, group, [topic, "no-such-topic"])
        assert int(resp.error_code) == 0
        assert deleted(resp) == [(topic, True, 0, None),
                                 ("no-such-topic", False, ErrorCode.unknown_topic_or_partition, UNKNOWN)]
        assert offsets(describe(c, group, None)) == {(other, 0): (1, -1, 0)}
        assert deleted(delete(c, group, [topic])) == [(topic, False, ErrorCode.unknown_topic_or_partition, NO_OFFSETS)]
        # The group stays (empty), the other topic's state too.
        assert listed_share_groups(c)[group] == "Empty"
        resp = delete(c, unique("no-such-group"), [topic])
        assert (int(resp.error_code), resp.responses) == (ErrorCode.group_id_not_found, ())
        assert resp.error_message.startswith("Group no-such-group-") and resp.error_message.endswith(" not found.")


def test_a_group_of_another_type_is_not_found(share_broker: BrokerProcess) -> None:
    c, topic, group = setup(share_broker.bootstrap)
    with c:
        # An admin commit (generation -1) makes a classic group with offsets.
        resp = c.request(commit_req.OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=(
                commit_req.OffsetCommitRequestTopic(name=topic, partitions=(commit_req.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=0, committed_leader_epoch=-1, committed_metadata=None),)),)))
        assert int(resp.topics[0].partitions[0].error_code) == 0
        expected = (ErrorCode.group_id_not_found, f"Group {group} is not a share group.", ())
        resp = alter(c, group, {topic: {0: 1}})
        assert (int(resp.error_code), resp.error_message, resp.responses) == expected
        resp = delete(c, group, [topic])
        assert (int(resp.error_code), resp.error_message, resp.responses) == expected


def member_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def test_a_group_with_members_is_not_changed(share_broker: BrokerProcess) -> None:
    c, topic, group = setup(share_broker.bootstrap)
    with c:
        alter(c, group, {topic: {0: 4}})
        member = member_id()
        resp = c.request(heartbeat_req.ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=0, rack_id=None, subscribed_topic_names=(topic,)))
        assert int(resp.error_code) == 0, resp.error_message
        expected = (ErrorCode.non_empty_group, "The group is not empty.", ())
        resp = alter(c, group, {topic: {0: 1}})
        assert (int(resp.error_code), resp.error_message, resp.responses) == expected
        resp = delete(c, group, [topic])
        assert (int(resp.error_code), resp.error_message, resp.responses) == expected
        assert offsets(describe(c, group, {topic: [0]}))[(topic, 0)][0] == 4
        resp = c.request(heartbeat_req.ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=-1, rack_id=None, subscribed_topic_names=None))
        assert int(resp.error_code) == 0
        assert altered(alter(c, group, {topic: {0: 1}})) == [(topic, 0, 0, None)]


def test_altered_offsets_survive_kill_and_the_next_consumer_starts_there(fresh_broker: BrokerProcess,
                                                                         tmp_path: Path) -> None:
    fresh_broker.start()
    c, topic, group = setup(fresh_broker.bootstrap, partitions=1)
    with c:
        produce(c, topic, 0, 10)
        assert altered(alter(c, group, {topic: {0: 6}})) == [(topic, 0, 0, None)]
    fresh_broker.kill()
    fresh_broker.start()
    c = WireClient(fresh_broker.bootstrap)
    with c:
        c.wait_for_coordinator(group)
        assert offsets(describe(c, group, None)) == {(topic, 0): (6, 4, 0)}
        assert listed_share_groups(c)[group] == "Empty"
        assert described(c, group) == ("Empty", 1, 1)
    consumer = ShareConsumer({"bootstrap.servers": fresh_broker.bootstrap, "group.id": group})
    try:
        consumer.subscribe([topic])
        seen: list[int] = []
        deadline = time.monotonic() + 30
        while len(seen) < 4 and time.monotonic() < deadline:
            seen += [offset for m in consumer.poll(0.5) if m.error() is None and (offset := m.offset()) is not None]
    finally:
        consumer.close()
    # Records before the altered start offset are never delivered.
    assert sorted(seen) == [6, 7, 8, 9]


def consume(bootstrap: str, group: str, topic: str, count: int) -> list[int]:
    """Offsets a new share consumer of ``group`` gets (and accepts) until ``count`` or 30 s."""
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    seen: list[int] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(seen) < count and time.monotonic() < deadline:
            seen += [offset for m in consumer.poll(0.5) if m.error() is None and (offset := m.offset()) is not None]
    finally:
        consumer.close()
    return sorted(seen)


def test_the_next_consumer_starts_where_alter_or_delete_put_the_group(share_broker: BrokerProcess) -> None:
    """Without a restart: the share-partition leader has the old state in memory when the
    offsets change under it."""
    c, topic, group = setup(share_broker.bootstrap, partitions=1)
    with c:
        produce(c, topic, 0, 10)
        set_group_config(share_broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
        assert consume(share_broker.bootstrap, group, topic, 10) == list(range(10))
        deadline = time.monotonic() + 30
        while described(c, group)[0] != "Empty" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert altered(alter(c, group, {topic: {0: 7}})) == [(topic, 0, 0, None)]
        assert consume(share_broker.bootstrap, group, topic, 3) == [7, 8, 9]
        while described(c, group)[0] != "Empty" and time.monotonic() < deadline:
            time.sleep(0.1)
        # Without state the group's share.auto.offset.reset (earliest) applies again.
        assert deleted(delete(c, group, [topic])) == [(topic, True, 0, None)]
        assert consume(share_broker.bootstrap, group, topic, 10) == list(range(10))
