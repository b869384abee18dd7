"""DescribeGroups (key 15): state, protocol and members of classic groups.

A group that does not exist (or is a KIP-848 group) is Dead with no error up to v5 and
GROUP_ID_NOT_FOUND from v6 (KIP-1043).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group.api_support import INT32_MIN, coordinator_of, denied_groups
from strom.core.coordinator.group.classic import ClassicGroup, GroupState
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorized_operations, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import GroupDeps
    from strom.core.server.handlers._kio_types import DescribeGroupsRequest, DescribeGroupsResponse

API_KEY = 15
VERSIONS = (0, 6)

async def handle(deps: GroupDeps, ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    v = ctx.api_version
    m = response_messages(API_KEY, v)
    coordinator = coordinator_of(deps)
    want_ops = bool(getattr(request, "include_authorized_operations", False))
    denied = denied_groups(deps, ctx, "DESCRIBE", list(request.groups))
    out = []
    for group_id in request.groups:
        state, protocol_type, protocol_data, members = "Dead", "", "", ()
        message: str | None = None
        if group_id in denied:
            code = int(ErrorCode.group_authorization_failed)
        elif coordinator is None:
            code = int(ErrorCode.coordinator_not_available)
        else:
            code, group = coordinator.describe_group(group_id)
            if isinstance(group, ClassicGroup):
                state, protocol_type = group.state_name, group.protocol_type or ""
                stable = group.state is GroupState.STABLE
                protocol_data = (group.protocol_name or "") if stable else ""
                members = tuple(m.make("DescribedGroupMember", member_id=mb.member_id,
                                       group_instance_id=mb.group_instance_id, client_id=mb.client_id,
                                       client_host=mb.client_host,
                                       member_metadata=mb.metadata(group.protocol_name) if stable else b"",
                                       member_assignment=mb.assignment if stable else b"")
                                for mb in group.members.values())
            elif not code and v >= 6:
                # KIP-1043: v6 tells a missing group (or a KIP-848 one, which ConsumerGroupDescribe
                # describes) apart from a dead one; older versions answer Dead with no error.
                code = int(ErrorCode.group_id_not_found)
                message = (f"Group {group_id} not found." if group is None
                           else f"Group {group_id} is not a classic group.")
        # KIP-430: the caller's GROUP operations, asked of the authorizer as probes (not audit-logged).
        ops = authorized_operations(deps, ctx, "GROUP", [group_id])[0] if want_ops and not code else INT32_MIN
        out.append(m.make("DescribedGroup", error_code=code, error_message=message, group_id=group_id,
                          group_state=state, protocol_type=protocol_type, protocol_data=protocol_data,
                          members=members, authorized_operations=ops))
    return m.make("DescribeGroupsResponse", throttle_time=response_throttle(deps, ctx), groups=tuple(out))
