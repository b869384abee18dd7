"""ShareGroupDescribe (key 77): a share group's state, epochs, assignor and members (KIP-932).

As Kafka's ``KafkaApis.handleShareGroupDescribeRequest``: without ``share.version`` >= 1 every
group answers UNSUPPORTED_VERSION; DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED); a group
that does not exist, or is not a share group, is GROUP_ID_NOT_FOUND with Kafka's message; a
group whose members are assigned topics the caller may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED
with no members.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group.api_support import authorized_group_operations
from strom.core.coordinator.share.share_group import ShareGroup
from strom.core.exceptions import KafkaError
from strom.core.metadata.features import SHARE_VERSION_FEATURE
from strom.core.protocol.messages import Messages, response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, error_of, response_throttle

if TYPE_CHECKING:
    from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
    from kio.schema.share_group_describe.v1.response import (
        Assignment,
        DescribedGroup,
        ShareGroupDescribeResponse,
    )

    from strom.core.metadata.image import MetadataImage
    from strom.core.server.handlers._deps import GroupDeps

API_KEY = 77
VERSIONS = (1, 1)
NO_OPERATIONS = -(1 << 31)
TOPICS_DENIED = "The described group uses topics that the client is not authorized to describe."


def _rows(parts: Mapping[uuid.UUID, set[int]], image: MetadataImage) -> list[tuple[uuid.UUID, str, list[int]]]:
    rows = []
    for tid, ps in sorted(parts.items(), key=lambda kv: str(kv[0])):
        topic = image.topic_by_id(tid)
        if topic is not None and ps:
            rows.append((tid, topic.name, sorted(ps)))
    return rows


def _assignment(m: Messages, parts: Mapping[uuid.UUID, set[int]], image: MetadataImage) -> Assignment:
    out: Assignment = m.make("Assignment", topic_partitions=tuple(
        m.make("TopicPartitions", topic_id=tid, topic_name=name, partitions=tuple(ps))
        for tid, name, ps in _rows(parts, image)))
    return out


def _failure(m: Messages, group_id: str, code: int, message: str | None) -> DescribedGroup:
    # The other fields keep their schema defaults, as in Kafka's error entries.
    out: DescribedGroup = m.make("DescribedGroup", error_code=code, error_message=message, group_id=group_id,
                                 group_state="", group_epoch=0, assignment_epoch=0, assignor_name="", members=())
    return out


def _described(m: Messages, deps: GroupDeps, ctx: RequestContext, group: ShareGroup,
               want_ops: bool) -> DescribedGroup:
    image = deps.image
    topics = {name for mem in group.members.values() for _, name, _ in _rows(mem.assignment, image)}
    if topics and authorize_topics(deps, ctx, "DESCRIBE", sorted(topics)):
        return _failure(m, group.group_id, int(ErrorCode.topic_authorization_failed), TOPICS_DENIED)
    members = tuple(
        m.make("Member", member_id=mem.member_id, rack_id=mem.rack_id, member_epoch=mem.member_epoch,
               client_id=mem.client_id, client_host=mem.client_host,
               subscribed_topic_names=tuple(sorted(mem.subscribed_topic_names)),
               assignment=_assignment(m, mem.assignment, image))
        for mem in sorted(group.members.values(), key=lambda x: x.member_id))
    ops = authorized_group_operations(deps, ctx, group.group_id) if want_ops else NO_OPERATIONS
    out: DescribedGroup = m.make(
        "DescribedGroup", error_code=0, error_message=None, group_id=group.group_id, group_state=group.state,
        group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch, assignor_name=group.assignor.name(),
        members=members, authorized_operations=ops)
    return out


async def handle(deps: GroupDeps, ctx: RequestContext, request: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
    m = response_messages(API_KEY, ctx.api_version)
    coordinator = getattr(deps, "group_coordinator", None)
    want_ops = bool(request.include_authorized_operations)
    enabled = deps.image.features.get(SHARE_VERSION_FEATURE, 0) >= 1
    groups: list[DescribedGroup] = []
    for group_id in request.group_ids:
        if not enabled:
            # Kafka's isShareGroupProtocolEnabled: without share.version 1 every group fails.
            groups.append(_failure(m, group_id, int(ErrorCode.unsupported_version), None))
            continue
        if not deps.authorize(ctx, "DESCRIBE", "GROUP", [group_id])[0]:
            groups.append(_failure(m, group_id, int(ErrorCode.group_authorization_failed), None))
            continue
        if coordinator is None:
            groups.append(_failure(m, group_id, int(ErrorCode.coordinator_not_available), None))
            continue
        try:
            coordinator.check_serving(group_id)
            group = coordinator.share_group(group_id)
            if group is None:
                message = (f"Group {group_id} not found." if coordinator.groups.get(group_id) is None
                           else f"Group {group_id} is not a share group.")
                groups.append(_failure(m, group_id, int(ErrorCode.group_id_not_found), message))
                continue
            groups.append(_described(m, deps, ctx, group, want_ops))
        except KafkaError as e:
            groups.append(_failure(m, group_id, *error_of(e)))
    response: ShareGroupDescribeResponse = m.make("ShareGroupDescribeResponse",
                                                  throttle_time=response_throttle(deps, ctx), groups=tuple(groups))
    return response
