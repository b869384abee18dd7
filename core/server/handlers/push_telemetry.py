"""PushTelemetry (72, KIP-714): a client pushes its metrics.

Accepted when the client uses its current subscription id, keeps to its push interval (a
terminating push may come early) and stays under ``telemetry.max.bytes``; otherwise Kafka's
error (UNKNOWN_SUBSCRIPTION_ID, THROTTLING_QUOTA_EXCEEDED, TELEMETRY_TOO_LARGE,
INVALID_REQUEST). The metrics are logged at DEBUG and kept as the client's last payload
(:mod:`strom.core.server.client_metrics`); strom exports them nowhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.core.protocol.messages import response_messages
from strom.core.server.client_metrics import PushRejected
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import response_throttle
from strom.core.server.handlers.get_telemetry_subscriptions import manager

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ControllerDeps
    from strom.core.server.handlers._kio_types import PushTelemetryRequest, PushTelemetryResponse

API_KEY = 72
VERSIONS = (0, 0)


async def handle(deps: ControllerDeps, ctx: RequestContext, request: PushTelemetryRequest) -> PushTelemetryResponse:
    m = response_messages(API_KEY, ctx.api_version)
    code = 0
    try:
        manager(deps).push(request.client_instance_id, int(request.subscription_id), bool(request.terminating),
                           int(request.compression_type), bytes(request.metrics))
    except PushRejected as e:
        code = e.code
    return m.make("PushTelemetryResponse", throttle_time=response_throttle(deps, ctx), error_code=code)
