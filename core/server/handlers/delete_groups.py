"""DeleteGroups (key 42): delete empty groups and their offsets (tombstones in __consumer_offsets)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group.api_support import coordinator_of, denied_groups
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import GroupDeps
    from strom.core.server.handlers._kio_types import DeleteGroupsRequest, DeleteGroupsResponse

API_KEY = 42
VERSIONS = (0, 2)


async def handle(deps: GroupDeps, ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    m = response_messages(API_KEY, ctx.api_version)
    names: list[str] = [*request.groups_names]
    denied = denied_groups(deps, ctx, "DELETE", names)
    coordinator = coordinator_of(deps)
    codes: dict[str, int] = {g: int(ErrorCode.group_authorization_failed) for g in denied}
    todo = [g for g in dict.fromkeys(names) if g not in denied]
    if coordinator is None:
        codes.update({g: int(ErrorCode.coordinator_not_available) for g in todo})
    elif todo:
        codes.update(await coordinator.delete_groups(todo))
    out = tuple(m.make("DeletableGroupResult", group_id=g, error_code=codes[g]) for g in dict.fromkeys(names))
    return m.make("DeleteGroupsResponse", throttle_time=response_throttle(deps, ctx), results=out)
