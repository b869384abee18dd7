"""ListGroups (key 16): every group of this coordinator, filtered by state (v4+) and type (v5+)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group.api_support import coordinator_of
from strom.core.coordinator.group.classic import ClassicGroup
from strom.core.coordinator.share.share_group import ShareGroup
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import GroupDeps
    from strom.core.server.handlers._kio_types import ListGroupsRequest, ListGroupsResponse

API_KEY = 16
VERSIONS = (0, 5)


def _describe(group: Any) -> tuple[str, str, str]:
    """(protocol type, state, type) of a classic, KIP-848 or share group."""
    if isinstance(group, ClassicGroup):
        return group.protocol_type or "", group.state_name, "classic"
    if isinstance(group, ShareGroup):
        return "share", group.state, "share"  # Kafka's ShareGroup.protocolType() is "share"
    return "consumer", str(group.state), "consumer"


async def handle(deps: GroupDeps, ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    m = response_messages(API_KEY, ctx.api_version)
    coordinator = coordinator_of(deps)
    if coordinator is None:
        return m.make("ListGroupsResponse", throttle_time=response_throttle(deps, ctx),
                      error_code=int(ErrorCode.coordinator_not_available), groups=())
    code, groups = coordinator.list_groups()
    # Kafka compares states case-insensitively and trimmed (GroupMetadataManager.listGroups).
    states = {s.strip().lower() for s in (getattr(request, "states_filter", None) or ())}
    types = {t.lower() for t in (getattr(request, "types_filter", None) or ())}
    rows = []
    for group in groups:
        protocol_type, state, group_type = _describe(group)
        if states and state.lower() not in states:
            continue
        if types and group_type not in types:
            continue
        rows.append((group.group_id, protocol_type, state, group_type))
    if rows and not authorize_cluster(deps, ctx, "DESCRIBE"):
        allowed = deps.authorize(ctx, "DESCRIBE", "GROUP", [r[0] for r in rows])
        rows = [r for r, ok in zip(rows, allowed, strict=True) if ok]
    out = tuple(m.make("ListedGroup", group_id=g, protocol_type=p, group_state=s, group_type=t)
                for g, p, s, t in sorted(rows))
    return m.make("ListGroupsResponse", throttle_time=response_throttle(deps, ctx), error_code=code, groups=out)
