"""InitProducerId (key 22): a producer id and epoch for an idempotent or transactional producer.

Non-transactional producers get a fresh id from the controller-allocated blocks; a producer
that presents its current id and epoch (KIP-360) gets the epoch bumped, or a new id when the
epoch would overflow. Transactional ids go to the transaction coordinator, which fences older
producers of the id by bumping its epoch and aborts an ongoing transaction first
(CONCURRENT_TRANSACTIONS: the client retries).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.coordinator.txn.wire import client_code, coordinator, may_write_txn_id
from strom.core.errors import KafkaError
from strom.core.protocol.messages import ms, response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ProducerIdDeps
    from strom.core.server.handlers._kio_types import InitProducerIdRequest, InitProducerIdResponse

API_KEY = 22
VERSIONS = (0, 5)
MAX_EPOCH = 32767
FENCED_SINCE = 4  # InitProducerId v4 introduced PRODUCER_FENCED


async def handle(deps: ProducerIdDeps, ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    m = response_messages(API_KEY, ctx.api_version)

    def answer(code: int, pid: int = -1, epoch: int = -1) -> Any:
        return m.make("InitProducerIdResponse", throttle_time=response_throttle(deps, ctx), error_code=code,
                      producer_id=pid, producer_epoch=epoch)

    pid = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    tid = request.transactional_id
    if tid is not None:
        if not may_write_txn_id(deps, ctx, tid):
            return answer(int(ErrorCode.transactional_id_authorization_failed))
        if (pid < 0) != (epoch < 0):
            return answer(int(ErrorCode.invalid_request))
        try:
            txn_pid, txn_epoch = await coordinator(deps).init_producer_id(
                tid, ms(request.transaction_timeout), (pid, epoch) if pid >= 0 else None)
        except KafkaError as e:
            return answer(client_code(e.code, ctx.api_version, FENCED_SINCE))
        return answer(0, txn_pid, txn_epoch)
    # Kafka's KafkaApis: IDEMPOTENT_WRITE on the cluster, or WRITE on at least one topic.
    if not authorize_cluster(deps, ctx, "IDEMPOTENT_WRITE") and \
            not deps.authorize_by_resource_type(ctx, "WRITE", "TOPIC"):
        return answer(int(ErrorCode.cluster_authorization_failed))
    if pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return answer(0, pid, epoch + 1)
    return answer(0, await deps.producer_ids.generate(), 0)
