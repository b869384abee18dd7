"""BrokerHeartbeat (key 63), served on the controller listener only (KIP-631).

A registered broker renews its session and reports how far it has read the metadata log;
``QuorumController.process_broker_heartbeat`` answers whether it has caught up, is fenced and
should shut down (Kafka's BrokerHeartbeatManager and ReplicationControlManager). An error
(STALE_BROKER_EPOCH, also for a broker that never registered) is answered as Kafka does: the
code with the response's defaults (fenced, not caught up). CLUSTER_ACTION on the cluster, as
Kafka's ControllerApis checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from kio.schema.errors import ErrorCode

from strom.core.errors import KafkaError
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster

if TYPE_CHECKING:
    import kio.schema.broker_heartbeat.v0.request
    import kio.schema.broker_heartbeat.v0.response
    import kio.schema.broker_heartbeat.v1.request
    import kio.schema.broker_heartbeat.v1.response
    import kio.schema.broker_heartbeat.v2.request
    import kio.schema.broker_heartbeat.v2.response

    from strom.core.server.handlers._deps import BrokerLifecycleDeps

    BrokerHeartbeatRequest: TypeAlias = (
        kio.schema.broker_heartbeat.v0.request.BrokerHeartbeatRequest
        | kio.schema.broker_heartbeat.v1.request.BrokerHeartbeatRequest
        | kio.schema.broker_heartbeat.v2.request.BrokerHeartbeatRequest
    )
    BrokerHeartbeatResponse: TypeAlias = (
        kio.schema.broker_heartbeat.v0.response.BrokerHeartbeatResponse
        | kio.schema.broker_heartbeat.v1.response.BrokerHeartbeatResponse
        | kio.schema.broker_heartbeat.v2.response.BrokerHeartbeatResponse
    )

API_KEY = 63
VERSIONS = (0, 2)
LISTENER = "controller"


async def handle(deps: BrokerLifecycleDeps, ctx: RequestContext,
                 request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
    m = response_messages(API_KEY, ctx.api_version)

    def failed(code: ErrorCode) -> BrokerHeartbeatResponse:
        return m.make("BrokerHeartbeatResponse", throttle_time=0, error_code=code, is_caught_up=False,
                      is_fenced=True, should_shut_down=False)

    if not authorize_cluster(deps, ctx, "CLUSTER_ACTION"):
        return failed(ErrorCode.cluster_authorization_failed)
    try:
        reply = await deps.controller.process_broker_heartbeat(
            int(request.broker_id), int(request.broker_epoch), int(request.current_metadata_offset),
            bool(request.want_fence), bool(request.want_shut_down))
    except KafkaError as e:
        return failed(ErrorCode(e.errno))
    return m.make("BrokerHeartbeatResponse", throttle_time=0, error_code=ErrorCode.none,
                  is_caught_up=reply.is_caught_up, is_fenced=reply.is_fenced, should_shut_down=reply.should_shut_down)
