"""DescribeCluster (key 60): cluster id, controller and brokers (what AdminClient.describeCluster shows).

Brokers come from the metadata image's registrations. A fenced broker is left out unless a v2
request sets ``include_fenced_brokers`` (KIP-1073), and then shows ``is_fenced``, as Kafka
answers; before the broker's own registration is in the image, it answers with itself.
``include_cluster_authorized_operations`` is answered from the authorizer as Kafka's AuthHelper
does: the bit set of the cluster operations allowed, 0 without DESCRIBE on the cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import (
    AUTHORIZED_OPERATIONS_OMITTED,
    cluster_authorized_operations,
    response_throttle,
)

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ClusterDeps
    from strom.core.server.handlers._kio_types import DescribeClusterRequest, DescribeClusterResponse

API_KEY = 60
VERSIONS = (0, 2)


async def handle(deps: ClusterDeps, ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    m = response_messages(API_KEY, ctx.api_version)
    include_fenced = bool(getattr(request, "include_fenced_brokers", False))
    cluster_ops = (cluster_authorized_operations(deps, ctx) if request.include_cluster_authorized_operations
                   else AUTHORIZED_OPERATIONS_OMITTED)
    brokers = tuple(m.make("DescribeClusterBroker", broker_id=node, host=host, port=port, rack=rack, is_fenced=fenced)
                    for node, host, port, rack, fenced in deps.broker_endpoints(
                        ctx.listener_name, include_fenced=include_fenced))
    return m.make("DescribeClusterResponse", throttle_time=response_throttle(deps, ctx), error_code=0,
                  error_message=None, endpoint_type=1, cluster_id=deps.cluster_id,
                  controller_id=deps.controller_id(), brokers=brokers,
                  cluster_authorized_operations=cluster_ops)
