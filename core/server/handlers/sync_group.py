"""SyncGroup (key 14): the leader hands in the assignment; every member waits for its share."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group.api_support import coordinator_of, denied_groups
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
    m = response_messages(API_KEY, ctx.api_version)
    coordinator = coordinator_of(deps)
    if denied_groups(deps, ctx, "READ", [request.group_id]):
        result = SyncResult(int(ErrorCode.group_authorization_failed))
    elif coordinator is None:
        result = SyncResult(int(ErrorCode.coordinator_not_available))
    else:
        result = await coordinator.sync_group(
            request.group_id, request.generation_id, request.member_id, getattr(request, "group_instance_id", None),
            getattr(request, "protocol_type", None), getattr(request, "protocol_name", None),
            {a.member_id: bytes(a.assignment) for a in request.assignments})
    return m.make("SyncGroupResponse", throttle_time=response_throttle(deps, ctx), error_code=result.error,
                  protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                  assignment=result.assignment)
