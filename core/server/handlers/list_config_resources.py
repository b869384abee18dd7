"""ListConfigResources (74, KIP-1142; v0 is KIP-714's ListClientMetricsResources).

Lists the config resources of the requested types (none given: every type Kafka lists): the
topics (2), this broker (4) and its logger resource (8) under its node id, the client-metrics
subscriptions (16) and the groups that have group configs (32), read from the metadata image.
v0 lists the client-metrics subscriptions only. A type Kafka does not list is answered with
UNSUPPORTED_VERSION, as Kafka 4.3.1 answers it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ControllerDeps
    from strom.core.server.handlers._kio_types import ListConfigResourcesRequest, ListConfigResourcesResponse

API_KEY = 74
VERSIONS = (0, 1)

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED_TYPES = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)


def resources(deps: ControllerDeps, types: tuple[int, ...]) -> list[tuple[str, int]]:
    """(name, type) of every config resource of ``types``."""
    image = deps.image
    out: list[tuple[str, int]] = []
    for rtype in types:
        if rtype == TOPIC:
            out += [(name, TOPIC) for name in sorted(image.topics)]
        elif rtype in (BROKER, BROKER_LOGGER):
            out.append((str(deps.node_id), rtype))
        else:
            out += [(name, rtype) for (t, name) in sorted(image.configs) if t == rtype and image.configs[(t, name)]]
    return out


async def handle(deps: ControllerDeps, ctx: RequestContext,
                 request: ListConfigResourcesRequest) -> ListConfigResourcesResponse:
    m = response_messages(API_KEY, ctx.api_version)
    throttle = response_throttle(deps, ctx)
    if not authorize_cluster(deps, ctx, "DESCRIBE_CONFIGS"):
        return m.make("ListConfigResourcesResponse", throttle_time=throttle,
                      error_code=int(ErrorCode.cluster_authorization_failed), config_resources=())
    if ctx.api_version == 0:
        found = resources(deps, (CLIENT_METRICS,))
        return m.make("ListConfigResourcesResponse", throttle_time=throttle, error_code=0,
                      config_resources=tuple(m.make("ConfigResource", resource_name=n) for n, _ in found))
    wanted = tuple(int(t) for t in getattr(request, "resource_types", ())) or SUPPORTED_TYPES
    if any(t not in SUPPORTED_TYPES for t in wanted):
        return m.make("ListConfigResourcesResponse", throttle_time=throttle,
                      error_code=int(ErrorCode.unsupported_version), config_resources=())
    found = resources(deps, wanted)
    return m.make("ListConfigResourcesResponse", throttle_time=throttle, error_code=0,
                  config_resources=tuple(m.make("ConfigResource", resource_name=n, resource_type=t)
                                         for n, t in found))
