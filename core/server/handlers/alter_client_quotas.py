"""AlterClientQuotas (key 49, v0-1): set and remove client quotas, as ``ClientQuotaRecord``s.

As Kafka's ``ControllerApis.handleAlterClientQuotas`` and ``ClientQuotaControlManager``:
ALTER_CONFIGS on the CLUSTER or CLUSTER_AUTHORIZATION_FAILED for every entry; each entity is
checked (types user, client-id, ip; ip alone; a known key of the right type, above 0, integral
where Kafka's key is) and answers INVALID_REQUEST with Kafka's message; the valid changes of the
request commit as one batch (none with ``validate_only``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.protocol.messages import response_messages
from strom.core.security.quota_control import QuotaAlteration, QuotaOp, alter_client_quotas
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, error_of, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ControllerDeps
    from strom.core.server.handlers._kio_types import AlterClientQuotasRequest, AlterClientQuotasResponse

API_KEY = 49
VERSIONS = (0, 1)


async def handle(deps: ControllerDeps, ctx: RequestContext,
                 request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    m = response_messages(API_KEY, ctx.api_version)
    throttle = response_throttle(deps, ctx)
    alterations = [QuotaAlteration(tuple((e.entity_type, e.entity_name) for e in entry.entity),
                                   tuple(QuotaOp(op.key, float(op.value), bool(op.remove)) for op in entry.ops))
                   for entry in request.entries]

    def entry(entity: tuple[tuple[str, str | None], ...], code: int, message: str | None) -> object:
        return m.make("EntryData", error_code=code, error_message=message,
                      entity=tuple(m.make("EntityData", entity_type=t, entity_name=n) for t, n in entity))

    if not authorize_cluster(deps, ctx, "ALTER_CONFIGS"):
        return m.make("AlterClientQuotasResponse", throttle_time=throttle, entries=tuple(
            entry(a.entity, int(ErrorCode.cluster_authorization_failed), "Cluster authorization failed.")
            for a in alterations))
    try:
        results = await alter_client_quotas(deps.controller, alterations, bool(request.validate_only))
    except Exception as e:  # the whole batch failed (too many records, the controller)
        code, message = error_of(e)
        return m.make("AlterClientQuotasResponse", throttle_time=throttle, entries=tuple(
            entry(a.entity, code, message) for a in alterations))
    out = []
    for entity, error in results:
        if error is None:
            out.append(entry(entity, 0, None))
        else:
            out.append(entry(entity, int(error.code), error.message or None))
    return m.make("AlterClientQuotasResponse", throttle_time=throttle, entries=tuple(out))
