"""Heartbeat (key 12): keeps a classic-group member alive; REBALANCE_IN_PROGRESS asks it to rejoin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.core.coordinator.group.api_support import group_coordinator_for
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import GroupDeps
    from strom.core.server.handlers._kio_types import HeartbeatRequest, HeartbeatResponse

API_KEY = 12
VERSIONS = (0, 4)


async def handle(deps: GroupDeps, ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    coordinator, code = group_coordinator_for(deps, ctx, "READ", request.group_id)
    if coordinator is not None:
        code = coordinator.heartbeat(request.group_id, request.generation_id, request.member_id,
                                     getattr(request, "group_instance_id", None))
    m = response_messages(API_KEY, ctx.api_version)
    return m.make("HeartbeatResponse", throttle_time=response_throttle(deps, ctx), error_code=code)
