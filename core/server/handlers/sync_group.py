"""SyncGroup (key 14): the leader hands in the assignment; every member waits for its share."""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.core.coordinator.group.api_support import group_coordinator_for
from strom.core.coordinator.group.classic import SyncResult
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import GroupDeps
    from strom.core.server.handlers._kio_types import SyncGroupRequest, SyncGroupResponse

API_KEY = 14
VERSIONS = (0, 5)


async def handle(deps: GroupDeps, ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    coordinator, code = group_coordinator_for(deps, ctx, "READ", request.group_id)
    if coordinator is None:
        result = SyncResult(code)
    else:
        result = await coordinator.sync_group(
            request.group_id, request.generation_id, request.member_id, getattr(request, "group_instance_id", None),
            getattr(request, "protocol_type", None), getattr(request, "protocol_name", None),
            {a.member_id: bytes(a.assignment) for a in request.assignments})
    m = response_messages(API_KEY, ctx.api_version)
    return m.make("SyncGroupResponse", throttle_time=response_throttle(deps, ctx), error_code=result.error,
                  protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                  assignment=result.assignment)
