"""ConsumerGroupDescribe (key 69): members, current and target assignments of KIP-848 groups."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group import consumer_group_service as service
from strom.core.coordinator.group.api_support import authorized_group_operations
from strom.core.exceptions import KafkaError
from strom.core.metadata.features import GROUP_VERSION_FEATURE
from strom.core.protocol.messages import Messages, response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import error_of, response_throttle

if TYPE_CHECKING:
    from strom.core.coordinator.group.consumer_group import ConsumerGroup
    from strom.core.server.handlers._deps import GroupDeps
    from strom.core.server.handlers._kio_types import (
        ConsumerGroupDescribeRequest,
        ConsumerGroupDescribeResponse,
    )

API_KEY = 69
VERSIONS = (0, 1)
MEMBER_TYPE_CONSUMER = 1
NO_OPERATIONS = -2147483648


def _assignment(m: Messages, parts: Any, image: Any) -> Any:
    return m.make("Assignment", topic_partitions=tuple(
        m.make("TopicPartitions", topic_id=tid, topic_name=name, partitions=tuple(ps))
        for tid, name, ps in service.describe_assignment(parts, image)))


def _described(m: Messages, deps: GroupDeps, group: ConsumerGroup, operations: int) -> Any:
    image = deps.image
    env = service.env_for(deps)
    members = tuple(
        m.make("Member", member_id=mem.member_id, instance_id=mem.instance_id, rack_id=mem.rack_id,
               member_epoch=mem.member_epoch, client_id=mem.client_id, client_host=mem.client_host,
               subscribed_topic_names=tuple(sorted(mem.subscribed_topic_names)),
               # Kafka's member keeps "" for "no regex" and describes it so.
               subscribed_topic_regex=mem.subscribed_topic_regex or "",
               assignment=_assignment(m, mem.assigned, image),
               target_assignment=_assignment(m, group.target.get(mem.member_id, {}), image),
               member_type=MEMBER_TYPE_CONSUMER)
        for mem in sorted(group.members.values(), key=lambda x: x.member_id))
    return m.make("DescribedGroup", error_code=0, error_message=None, group_id=group.group_id,
                  group_state=group.state, group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                  assignor_name=group.preferred_assignor(env), members=members,
                  authorized_operations=operations)


async def handle(deps: GroupDeps, ctx: RequestContext, request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    m = response_messages(API_KEY, ctx.api_version)
    coordinator = getattr(deps, "group_coordinator", None)
    want_ops = bool(getattr(request, "include_authorized_operations", False))
    groups = []
    for group_id in request.group_ids:

        def failure(code: int, message: str | None, gid: str = group_id) -> Any:
            # The other fields keep their schema defaults, as in Kafka's error entries.
            return m.make("DescribedGroup", error_code=code, error_message=message, group_id=gid, group_state="",
                          group_epoch=0, assignment_epoch=0, assignor_name="", members=())

        if deps.image.features.get(GROUP_VERSION_FEATURE, 0) < 1:
            # Kafka's isConsumerGroupProtocolEnabled: without group.version 1 every group fails.
            groups.append(failure(int(ErrorCode.unsupported_version), None))
            continue
        if not deps.authorize(ctx, "DESCRIBE", "GROUP", [group_id])[0]:
            groups.append(failure(int(ErrorCode.group_authorization_failed), None))
            continue
        if coordinator is None:
            groups.append(failure(int(ErrorCode.coordinator_not_available), None))
            continue
        if group_id == "":
            groups.append(failure(int(ErrorCode.invalid_group_id), None))
            continue
        try:
            group = service.find_consumer_group(coordinator, group_id)
            if group is None:
                # Kafka tells a classic group (with its offsets-only Empty groups) from no group.
                other = coordinator.groups.get(group_id)
                message = (f"Group {group_id} not found." if other is None
                           else f"Group {group_id} is not a consumer group.")
                groups.append(failure(int(ErrorCode.group_id_not_found), message))
                continue
            ops = authorized_group_operations(deps, ctx, group_id) if want_ops else NO_OPERATIONS
            groups.append(_described(m, deps, group, ops))
        except KafkaError as e:
            groups.append(failure(*error_of(e)))
    return m.make("ConsumerGroupDescribeResponse", throttle_time=response_throttle(deps, ctx), groups=tuple(groups))
