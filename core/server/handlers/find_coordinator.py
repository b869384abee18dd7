"""FindCoordinator (key 10): the coordinator of a group or transactional id (v4+ batched keys).

Single node: every coordinator partition is led by this broker, so the answer is this broker's
endpoint on the listener the request came in on - once the coordinator has loaded its topic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group.api_support import coordinator_of
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import error_of, response_throttle
from strom.core.server.handlers._deps import ClusterDeps, GroupDeps

if TYPE_CHECKING:
    from strom.core.server.handlers._kio_types import FindCoordinatorRequest, FindCoordinatorResponse

API_KEY = 10
VERSIONS = (0, 6)


class FindCoordinatorDeps(ClusterDeps, GroupDeps, Protocol):
    """This broker's endpoints and the group coordinator (which answers for both key types)."""


async def _lookup(deps: FindCoordinatorDeps, ctx: RequestContext, key_type: int, key: str) -> tuple[int, str | None, int, str, int]:
    """(error, message, node id, host, port)."""
    if key_type == 1:
        if not deps.authorize(ctx, "DESCRIBE", "TRANSACTIONAL_ID", [key])[0]:
            return int(ErrorCode.transactional_id_authorization_failed), None, -1, "", -1
    elif not deps.authorize(ctx, "DESCRIBE", "GROUP", [key])[0]:
        return int(ErrorCode.group_authorization_failed), None, -1, "", -1
    coordinator = coordinator_of(deps)
    if coordinator is None:
        return int(ErrorCode.coordinator_not_available), None, -1, "", -1
    try:
        await coordinator.find_coordinator(key_type, key)
    except Exception as e:
        code, message = error_of(e)
        return code, message, -1, "", -1
    for node_id, host, port, _rack, _fenced in deps.broker_endpoints(ctx.listener_name):
        if node_id == deps.node_id:
            return 0, None, node_id, host, port
    return int(ErrorCode.coordinator_not_available), "no endpoint on this listener", -1, "", -1


async def handle(deps: FindCoordinatorDeps, ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    v = ctx.api_version
    m = response_messages(API_KEY, v)
    key_type = int(getattr(request, "key_type", 0))
    by_version: Any = request  # mypy cannot narrow the Union by ctx.api_version
    if v >= 4:
        coordinators = []
        for key in by_version.coordinator_keys:
            code, message, node, host, port = await _lookup(deps, ctx, key_type, key)
            # A found coordinator keeps the schema default "" as its message, as Kafka's does.
            coordinators.append(m.make("Coordinator", key=key, node_id=node, host=host, port=port,
                                       error_code=code, error_message="" if code == 0 else message))
        return m.make("FindCoordinatorResponse", throttle_time=response_throttle(deps, ctx),
                      coordinators=tuple(coordinators))
    code, message, node, host, port = await _lookup(deps, ctx, key_type, by_version.key)
    # Kafka's pre-v4 answer carries Errors.message(), which is "NONE" on success.
    return m.make("FindCoordinatorResponse", throttle_time=response_throttle(deps, ctx), error_code=code,
                  error_message="NONE" if code == 0 else message, node_id=node, host=host, port=port)
