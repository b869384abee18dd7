"""InitProducerId (key 22): a producer id and epoch for an idempotent producer.

Non-transactional producers get a fresh id from the controller-allocated blocks; a producer
that presents its current id and epoch (KIP-360) gets the epoch bumped, or a new id when the
epoch would overflow. Transactional ids need the transaction coordinator, which is not part of
this broker yet: they are answered with COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, response_throttle

if TYPE_CHECKING:
    from strom.core.server.broker import Broker

API_KEY = 22
VERSIONS = (0, 5)
MAX_EPOCH = 32767


async def handle(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    m = response_messages(API_KEY, ctx.api_version)

    def answer(code: int, pid: int = -1, epoch: int = -1) -> Any:
        return m.make("InitProducerIdResponse", throttle_time=response_throttle(broker, ctx), error_code=code,
                      producer_id=pid, producer_epoch=epoch)

    if request.transactional_id is not None:
        return answer(int(ErrorCode.coordinator_not_available))
    if not authorize_cluster(broker, ctx, "IDEMPOTENT_WRITE"):
        return answer(int(ErrorCode.cluster_authorization_failed))
    pid = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return answer(0, pid, epoch + 1)
    return answer(0, await broker.producer_ids.generate(), 0)
