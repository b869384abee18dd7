# mypy: disable-error-code="arg-type"
# (kio types fields with phantom NewTypes - i32, i64, TopicName, GroupId; plain ints/strs are
# what they are at run time, so only the checker objects.)
"""The share-group offsets APIs under StandardAuthorizer: the ACL checks of Kafka's KafkaApis.

DescribeShareGroupOffsets needs DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED for that
group, code only) and DESCRIBE on each topic: a named topic without it answers
TOPIC_AUTHORIZATION_FAILED per partition (topic id zero, start offset -1, after the others); with
topics null such topics are left out. AlterShareGroupOffsets needs READ on the group (else the
whole request is GROUP_AUTHORIZATION_FAILED) and READ on each topic (per partition, listed
first). DeleteShareGroupOffsets needs DELETE on the group and READ on each topic (per topic,
listed first). ``alice`` (SASL/PLAIN) is given exactly the ACLs each step needs; ``admin`` sets
up the state.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from acl_broker import AclBroker, sasl_wire_client
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from diff_wire import WireClient
from kio.schema.alter_share_group_offsets.v0 import request as alter_req
from kio.schema.alter_share_group_offsets.v0.response import AlterShareGroupOffsetsResponse
from kio.schema.delete_share_group_offsets.v0 import request as delete_req
from kio.schema.delete_share_group_offsets.v0.response import DeleteShareGroupOffsetsResponse
from kio.schema.describe_share_group_offsets.v1 import request as describe_req
from kio.schema.describe_share_group_offsets.v1.response import (
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
)
from kio.schema.errors import ErrorCode

pytestmark = pytest.mark.broker  # AclBroker starts strom's broker

ALICE = "User:alice"
TOPIC_DENIED = "Topic authorization failed."


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    with AclBroker(tmp_path_factory.mktemp("share-acl") / "data") as broker:
        yield broker


def allow(admin: AdminClient, rtype: ResourceType, name: str, op: AclOperation) -> None:
    binding = AclBinding(rtype, name, ResourcePatternType.LITERAL, ALICE, "*", op, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding], request_timeout=30).values():
        assert future.result(timeout=30) is None


def describe(c: WireClient, group: str, topics: dict[str, list[int]] | None) -> DescribeShareGroupOffsetsResponseGroup:
    wanted = None if topics is None else tuple(
        describe_req.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps)) for t, ps in topics.items())
    resp: DescribeShareGroupOffsetsResponse = c.request(describe_req.DescribeShareGroupOffsetsRequest(groups=(
        describe_req.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=wanted),)))
    return resp.groups[0]


def alter(c: WireClient, group: str, starts: dict[str, dict[int, int]]) -> AlterShareGroupOffsetsResponse:
    return c.request(alter_req.AlterShareGroupOffsetsRequest(group_id=group, topics=tuple(
        alter_req.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(
            alter_req.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o) for p, o in ps.items()))
        for t, ps in starts.items())))


def delete(c: WireClient, group: str, topics: list[str]) -> DeleteShareGroupOffsetsResponse:
    return c.request(delete_req.DeleteShareGroupOffsetsRequest(group_id=group, topics=tuple(
        delete_req.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics)))


def test_acls_of_the_share_group_offsets_apis(acl_broker: AclBroker, tmp_path: Path) -> None:
    run = uuid.uuid4().hex[:6]
    group, open_topic, closed_topic = f"acl-g-{run}", f"acl-open-{run}", f"acl-closed-{run}"
    admin = AdminClient(acl_broker.client("admin"))
    with WireClient(acl_broker.plain) as su:  # User:ANONYMOUS, a super user
        for t in (open_topic, closed_topic):
            su.create_topic(t, 1)
            su.wait_for_leaders(t, 1)
        su.wait_for_coordinator(group)
        assert int(alter(su, group, {open_topic: {0: 2}, closed_topic: {0: 5}}).error_code) == 0

    with sasl_wire_client(acl_broker.sasl, "alice") as c:
        g = describe(c, group, None)
        assert (int(g.error_code), g.error_message, g.topics) == (ErrorCode.group_authorization_failed, None, ())
        resp = alter(c, group, {open_topic: {0: 1}})
        assert (int(resp.error_code), resp.error_message, resp.responses) == (
            ErrorCode.group_authorization_failed, "Group authorization failed.", ())
        deleted = delete(c, group, [open_topic])
        assert (int(deleted.error_code), deleted.error_message, deleted.responses) == (
            ErrorCode.group_authorization_failed, "Group authorization failed.", ())

        allow(admin, ResourceType.GROUP, group, AclOperation.DESCRIBE)
        allow(admin, ResourceType.TOPIC, open_topic, AclOperation.DESCRIBE)
        # Topics null: only the topics alice may describe.
        g = describe(c, group, None)
        assert [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions]) for t in g.topics] == [
            (open_topic, [(0, 2)])]
        g = describe(c, group, {closed_topic: [0], open_topic: [0]})
        assert [(t.topic_name, t.topic_id is None, [(p.partition_index, p.start_offset, int(p.error_code),
                                                     p.error_message) for p in t.partitions]) for t in g.topics] == [
            (open_topic, False, [(0, 2, 0, None)]),
            (closed_topic, True, [(0, -1, ErrorCode.topic_authorization_failed, TOPIC_DENIED)])]

        allow(admin, ResourceType.GROUP, group, AclOperation.READ)
        allow(admin, ResourceType.TOPIC, open_topic, AclOperation.READ)
        resp = alter(c, group, {open_topic: {0: 1}, closed_topic: {0: 1}})
        assert int(resp.error_code) == 0
        assert [(t.topic_name, t.topic_id is None, [(int(p.error_code), p.error_message) for p in t.partitions])
                for t in resp.responses] == [
            (closed_topic, False, [(ErrorCode.topic_authorization_failed, TOPIC_DENIED)]),
            (open_topic, False, [(0, None)])]
        assert [p.start_offset for p in describe(c, group, {open_topic: [0]}).topics[0].partitions] == [1]

        allow(admin, ResourceType.GROUP, group, AclOperation.DELETE)
        deleted = delete(c, group, [open_topic, closed_topic])
        assert int(deleted.error_code) == 0
        assert [(t.topic_name, int(t.error_code), t.error_message) for t in deleted.responses] == [
            (closed_topic, ErrorCode.topic_authorization_failed, TOPIC_DENIED), (open_topic, 0, None)]

    with WireClient(acl_broker.plain) as su:
        # The denied topics kept their state.
        g = describe(su, group, None)
        assert [(t.topic_name, t.partitions[0].start_offset) for t in g.topics] == [(closed_topic, 5)]
