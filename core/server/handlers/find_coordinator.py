"""FindCoordinator (key 10): the coordinator of a group or transactional id (v4+ batched keys).

Single node: every coordinator partition is led by this broker, so the answer is this broker's
endpoint on the listener the request came in on - once the coordinator has loaded its topic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group.api_support import coordinator_of
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import error_of, response_throttle

if TYPE_CHECKING:
    from strom.core.server.broker import Broker

API_KEY = 10
VERSIONS = (0, 6)


async def _lookup(broker: Broker, ctx: RequestContext, key_type: int, key: str) -> tuple[int, str | None, int, str, int]:
    """(error, message, node id, host, port)."""
    if key_type == 1:
        if not broker.authorize(ctx, "DESCRIBE", "TRANSACTIONAL_ID", [key])[0]:
            return int(ErrorCode.transactional_id_authorization_failed), None, -1, "", -1
    elif not broker.authorize(ctx, "DESCRIBE", "GROUP", [key])[0]:
        return int(ErrorCode.group_authorization_failed), None, -1, "", -1
    coordinator = coordinator_of(broker)
    if coordinator is None:
        return int(ErrorCode.coordinator_not_available), None, -1, "", -1
    try:
        await coordinator.find_coordinator(key_type, key)
    except Exception as e:
        code, message = error_of(e)
        return code, message, -1, "", -1
    for node_id, host, port, _rack, _fenced in broker.broker_endpoints(ctx.listener_name):
        if node_id == broker.node_id:
            return 0, None, node_id, host, port
    return int(ErrorCode.coordinator_not_available), "no endpoint on this listener", -1, "", -1


async def handle(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    v = ctx.api_version
    m = response_messages(API_KEY, v)
    key_type = int(getattr(request, "key_type", 0))
    if v >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            code, message, node, host, port = await _lookup(broker, ctx, key_type, key)
            # A found coordinator keeps the schema default "" as its message, as Kafka's does.
            coordinators.append(m.make("Coordinator", key=key, node_id=node, host=host, port=port,
                                       error_code=code, error_message="" if code == 0 else message))
        return m.make("FindCoordinatorResponse", throttle_time=response_throttle(broker, ctx),
                      coordinators=tuple(coordinators))
    code, message, node, host, port = await _lookup(broker, ctx, key_type, request.key)
    # Kafka's pre-v4 answer carries Errors.message(), which is "NONE" on success.
    return m.make("FindCoordinatorResponse", throttle_time=response_throttle(broker, ctx), error_code=code,
                  error_message="NONE" if code == 0 else message, node_id=node, host=host, port=port)
