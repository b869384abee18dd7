"""ConsumerGroupHeartbeat (key 68): join, heartbeat in and leave a KIP-848 consumer group.

The client sends its member epoch (0 to join, -1 to leave, -2 for a static member leaving for
a while) and, when they changed, its subscription and owned partitions; it gets its member
epoch, the heartbeat interval and, when it changed (or on a full request), the partitions it may
own now. v1 clients generate their member id (a UUID); v0 lets the coordinator do it.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group import consumer_group_service as service
from strom.core.coordinator.group.consumer_group import HeartbeatRequest
from strom.core.coordinator.group.consumer_group_member import JOIN_GROUP_MEMBER_EPOCH, normalize
from strom.core.exceptions import KafkaError
from strom.core.metadata.features import GROUP_VERSION_FEATURE
from strom.core.protocol.messages import ms, response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import error_of, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import GroupDeps
    from strom.core.server.handlers._kio_types import (
        ConsumerGroupHeartbeatRequest,
        ConsumerGroupHeartbeatResponse,
    )

API_KEY = 68
VERSIONS = (0, 1)


def parse(request: Any, ctx: RequestContext) -> HeartbeatRequest:
    """The request as plain values (kio types -> ints, tuples, topic-id maps)."""
    owned = None
    if request.topic_partitions is not None:
        owned = normalize({tp.topic_id: [int(p) for p in tp.partitions]
                           for tp in request.topic_partitions if tp.topic_id is not None})
    member_id = request.member_id
    if not member_id and ctx.api_version == 0 and request.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        member_id = str(uuid.uuid4())  # v0: the coordinator names new members
    names = request.subscribed_topic_names
    return HeartbeatRequest(
        member_id=member_id, member_epoch=int(request.member_epoch), instance_id=request.instance_id,
        rack_id=request.rack_id, rebalance_timeout_ms=ms(request.rebalance_timeout),
        subscribed_topic_names=None if names is None else tuple(str(n) for n in names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor, owned=owned,
        client_id=ctx.client_id or "", client_host=f"/{ctx.client_address.rsplit(':', 1)[0]}"
        if ctx.client_address else "")


async def handle(deps: GroupDeps, ctx: RequestContext, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
    m = response_messages(API_KEY, ctx.api_version)
    throttle = response_throttle(deps, ctx)

    def failure(code: int, message: str | None) -> Any:
        return m.make("ConsumerGroupHeartbeatResponse", throttle_time=throttle, error_code=code,
                      error_message=message, member_id=None, member_epoch=-1, heartbeat_interval=0)

    if deps.image.features.get(GROUP_VERSION_FEATURE, 0) < 1:
        # Kafka's isConsumerGroupProtocolEnabled, checked first: the protocol needs group.version 1.
        return failure(int(ErrorCode.unsupported_version), None)
    if not deps.authorize(ctx, "READ", "GROUP", [request.group_id])[0]:
        return failure(int(ErrorCode.group_authorization_failed), None)
    coordinator = getattr(deps, "group_coordinator", None)
    if coordinator is None:
        return failure(int(ErrorCode.coordinator_not_available), None)
    try:
        req = parse(request, ctx)
        env = service.env_for(deps, request.group_id)  # the group's own timeouts (GROUP configs)
        result = await service.heartbeat(coordinator, lambda: service.env_for(deps, request.group_id),
                                         request.group_id, req)
    except KafkaError as e:
        return failure(*error_of(e))
    except Exception as e:  # answered as UNKNOWN_SERVER_ERROR (error_of logs it)
        return failure(*error_of(e))
    assignment = None
    if result.assignment is not None:
        assignment = m.make("Assignment", topic_partitions=tuple(
            m.make("TopicPartitions", topic_id=tid, partitions=tuple(sorted(ps)))
            for tid, ps in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))))
    return m.make("ConsumerGroupHeartbeatResponse", throttle_time=throttle, error_code=0, error_message=None,
                  member_id=result.member_id, member_epoch=result.member_epoch,
                  heartbeat_interval=env.heartbeat_interval_ms, assignment=assignment)
