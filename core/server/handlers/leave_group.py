"""LeaveGroup (key 13): members leave a classic group (v3+ several at once, by member or instance id)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from strom.core.coordinator.group.api_support import group_coordinator_for
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import GroupDeps
    from strom.core.server.handlers._kio_types import LeaveGroupRequest, LeaveGroupResponse

API_KEY = 13
VERSIONS = (0, 5)


async def handle(deps: GroupDeps, ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    v = ctx.api_version
    by_version: Any = request  # mypy cannot narrow the Union by ctx.api_version
    members: list[tuple[str, str | None]]
    if v >= 3:
        members = [(mi.member_id, mi.group_instance_id) for mi in by_version.members]
    else:
        members = [(by_version.member_id, None)]
    coordinator, top = group_coordinator_for(deps, ctx, "READ", request.group_id)
    codes: list[int] = []
    if coordinator is not None:
        top, codes = coordinator.leave_group(request.group_id, members)
    m = response_messages(API_KEY, v)
    if v < 3:
        return m.make("LeaveGroupResponse", throttle_time=response_throttle(deps, ctx),
                      error_code=top or (codes[0] if codes else 0))
    responses = () if top else tuple(
        m.make("MemberResponse", member_id=mid, group_instance_id=iid, error_code=code)
        for (mid, iid), code in zip(members, codes, strict=True))
    return m.make("LeaveGroupResponse", throttle_time=response_throttle(deps, ctx), error_code=top,
                  members=responses)
