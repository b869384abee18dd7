"""GetTelemetrySubscriptions (71, KIP-714): a client's metrics subscription.

The subscription is computed from the CLIENT_METRICS config resources in the metadata image by
:class:`strom.core.server.client_metrics.ClientMetricsManager`, as Kafka's ClientMetricsManager
does; a client that sends the zero instance id gets a new one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.core.group_config import broker_value
from strom.core.protocol.messages import response_messages
from strom.core.server.client_metrics import (
    ACCEPTED_COMPRESSION_TYPES,
    CLIENT_METRICS_RESOURCE,
    ClientMetricsManager,
    PushRejected,
    manager_for,
)
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ControllerDeps
    from strom.core.server.handlers._kio_types import (
        GetTelemetrySubscriptionsRequest,
        GetTelemetrySubscriptionsResponse,
    )

API_KEY = 71
VERSIONS = (0, 0)


def manager(deps: ControllerDeps) -> ClientMetricsManager:
    """The broker's client-metrics manager, sized by its ``telemetry.max.bytes``."""
    return manager_for(deps, int(broker_value(deps.config, "telemetry.max.bytes") or 1_048_576))


async def handle(deps: ControllerDeps, ctx: RequestContext,
                 request: GetTelemetrySubscriptionsRequest) -> GetTelemetrySubscriptionsResponse:
    m = response_messages(API_KEY, ctx.api_version)
    mgr = manager(deps)
    subscriptions = {name: values for (rtype, name), values in deps.image.configs.items()
                     if rtype == CLIENT_METRICS_RESOURCE}
    try:
        sub = mgr.subscription(subscriptions, request.client_instance_id, ctx.client_id, ctx.client_address)
    except PushRejected as e:  # asked again before the push interval: Kafka's empty error answer
        return m.make("GetTelemetrySubscriptionsResponse", throttle_time=response_throttle(deps, ctx),
                      error_code=e.code, client_instance_id=None, subscription_id=0, accepted_compression_types=(),
                      push_interval=0, telemetry_max_bytes=0, delta_temporality=False, requested_metrics=())
    return m.make("GetTelemetrySubscriptionsResponse", throttle_time=response_throttle(deps, ctx), error_code=0,
                  client_instance_id=sub.instance_id, subscription_id=sub.subscription_id,
                  accepted_compression_types=ACCEPTED_COMPRESSION_TYPES, push_interval=sub.push_interval_ms,
                  telemetry_max_bytes=mgr.telemetry_max_bytes, delta_temporality=True,
                  requested_metrics=sub.metrics)
