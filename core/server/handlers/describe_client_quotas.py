"""DescribeClientQuotas (key 48, v0-1): the client quotas of the entities a filter matches.

As Kafka's ``KafkaApis.handleDescribeClientQuotas`` over ``ClientQuotasImage.describe``:
DESCRIBE_CONFIGS on the CLUSTER or CLUSTER_AUTHORIZATION_FAILED; filter components match an
entity type exactly (a name), its default entity, or any name; ``strict`` also excludes entities
with types the filter does not name. A bad filter answers INVALID_REQUEST (or
UNSUPPORTED_VERSION for an unknown entity type) with Kafka's message and no entries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.exceptions import KafkaError
from strom.core.protocol.messages import response_messages
from strom.core.security.quota_control import FilterComponent, describe_client_quotas, java_key_order
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ImageDeps
    from strom.core.server.handlers._kio_types import (
        DescribeClientQuotasRequest,
        DescribeClientQuotasResponse,
    )

API_KEY = 48
VERSIONS = (0, 1)


async def handle(deps: ImageDeps, ctx: RequestContext,
                 request: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    m = response_messages(API_KEY, ctx.api_version)
    throttle = response_throttle(deps, ctx)
    if not authorize_cluster(deps, ctx, "DESCRIBE_CONFIGS"):
        return m.make("DescribeClientQuotasResponse", throttle_time=throttle,
                      error_code=ErrorCode.cluster_authorization_failed,
                      error_message="Cluster authorization failed.", entries=None)
    components = [FilterComponent(c.entity_type, int(c.match_type), c.match) for c in request.components]
    try:
        found = describe_client_quotas(deps.image, components, bool(request.strict))
    except KafkaError as e:
        return m.make("DescribeClientQuotasResponse", throttle_time=throttle, error_code=int(e.code),
                      error_message=e.message or None, entries=None)
    entries = tuple(
        m.make("EntryData",
               entity=tuple(m.make("EntityData", entity_type=t, entity_name=n) for t, n in entity),
               values=tuple(m.make("ValueData", key=k, value=values[k]) for k in java_key_order(values)))
        for entity, values in found)
    # Kafka answers success with an empty message, not null.
    return m.make("DescribeClientQuotasResponse", throttle_time=throttle, error_code=0, error_message="",
                  entries=entries)
