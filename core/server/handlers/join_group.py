"""JoinGroup (key 11): a classic-group member (re)joins; a long poll until the rebalance completes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.core.coordinator.group.api_support import client_host, group_coordinator_for
from strom.core.coordinator.group.classic import JoinResult
from strom.core.protocol.messages import ms, response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import GroupDeps
    from strom.core.server.handlers._kio_types import JoinGroupRequest, JoinGroupResponse

API_KEY = 11
VERSIONS = (0, 9)


async def handle(deps: GroupDeps, ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    v = ctx.api_version
    session_ms = ms(request.session_timeout)
    coordinator, code = group_coordinator_for(deps, ctx, "READ", request.group_id)
    if coordinator is None:
        result = JoinResult(code, member_id=request.member_id)
    else:
        result = await coordinator.join_group(
            request.group_id, request.member_id, getattr(request, "group_instance_id", None), ctx.client_id,
            client_host(ctx), session_ms, ms(getattr(request, "rebalance_timeout", None)) or session_ms,
            request.protocol_type, [(p.name, bytes(p.metadata)) for p in request.protocols],
            require_known_member_id=v >= 4)
    m = response_messages(API_KEY, v)
    members = tuple(m.make("JoinGroupResponseMember", member_id=mid, group_instance_id=iid, metadata=meta)
                    for mid, iid, meta in result.members)
    return m.make("JoinGroupResponse", throttle_time=response_throttle(deps, ctx), error_code=result.error,
                  generation_id=result.generation_id, protocol_type=result.protocol_type,
                  protocol_name=result.protocol_name if v >= 7 else (result.protocol_name or ""),
                  leader=result.leader, skip_assignment=result.skip_assignment, member_id=result.member_id,
                  members=members)
