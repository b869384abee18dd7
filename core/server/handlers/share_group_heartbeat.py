"""ShareGroupHeartbeat (key 76): join, heartbeat in and leave a share group (KIP-932).

v1, the version Kafka 4.3 serves (v0 was the early-access one). The client generates its member
id and joins with epoch 0 and the topics it subscribes to, heartbeats with the epoch it was
given, leaves with -1; it gets its member epoch, the heartbeat interval and, when it changed,
the partitions it is assigned (several members may share one). As Kafka's ``KafkaApis``: the
API needs ``share.version`` >= 1 finalized (UNSUPPORTED_VERSION otherwise), READ on the group,
and DESCRIBE on every subscribed topic (TOPIC_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group.api_support import client_host
from strom.core.exceptions import KafkaError
from strom.core.metadata.features import SHARE_VERSION_FEATURE
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, error_of, response_throttle

if TYPE_CHECKING:
    from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
    from kio.schema.share_group_heartbeat.v1.response import ShareGroupHeartbeatResponse

    from strom.core.server.handlers._deps import GroupDeps

API_KEY = 76
VERSIONS = (1, 1)


async def handle(deps: GroupDeps, ctx: RequestContext, request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
    m = response_messages(API_KEY, ctx.api_version)
    throttle = response_throttle(deps, ctx)

    def failure(code: int, message: str | None) -> ShareGroupHeartbeatResponse:
        response: ShareGroupHeartbeatResponse = m.make(
            "ShareGroupHeartbeatResponse", throttle_time=throttle, error_code=code, error_message=message,
            member_id=None, member_epoch=0, heartbeat_interval=0, assignment=None)
        return response

    if deps.image.features.get(SHARE_VERSION_FEATURE, 0) < 1:
        # Kafka's isShareGroupProtocolEnabled: share groups need share.version 1 finalized.
        return failure(int(ErrorCode.unsupported_version), None)
    if not deps.authorize(ctx, "READ", "GROUP", [request.group_id])[0]:
        return failure(int(ErrorCode.group_authorization_failed), None)
    names = None if request.subscribed_topic_names is None else [str(n) for n in request.subscribed_topic_names]
    if names:
        denied = authorize_topics(deps, ctx, "DESCRIBE", sorted(set(names)))
        if denied:
            return failure(int(ErrorCode.topic_authorization_failed), None)
    coordinator = getattr(deps, "group_coordinator", None)
    if coordinator is None:
        return failure(int(ErrorCode.coordinator_not_available), None)
    try:
        result = await coordinator.share.heartbeat(
            request.group_id, request.member_id, int(request.member_epoch), names, rack_id=request.rack_id,
            client_id=ctx.client_id or "", client_host=client_host(ctx))
    except KafkaError as e:
        return failure(*error_of(e))
    except Exception as e:  # answered as UNKNOWN_SERVER_ERROR (error_of logs it)
        return failure(*error_of(e))
    assignment = None
    if result.assignment is not None:
        assignment = m.make("Assignment", topic_partitions=tuple(
            m.make("TopicPartitions", topic_id=tid, partitions=tuple(sorted(ps)))
            for tid, ps in sorted(result.assignment.items(), key=lambda kv: str(kv[0])) if ps))
    response: ShareGroupHeartbeatResponse = m.make(
        "ShareGroupHeartbeatResponse", throttle_time=throttle, error_code=0, error_message=None,
        member_id=result.member_id, member_epoch=result.member_epoch,
        heartbeat_interval=result.heartbeat_interval_ms, assignment=assignment)
    return response
