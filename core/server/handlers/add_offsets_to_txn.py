"""AddOffsetsToTxn (key 25): enlist the group's ``__consumer_offsets`` partition in a transaction.

The producer then sends TxnOffsetCommit to the group coordinator; the offsets become visible
when the transaction's COMMIT marker reaches that partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.coordinator.txn.wire import client_code, coordinator, may_write_txn_id
from strom.core.errors import KafkaError
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import TxnDeps
    from strom.core.server.handlers._kio_types import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

API_KEY = 25
VERSIONS = (0, 4)
FENCED_SINCE = 2


async def handle(deps: TxnDeps, ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    m = response_messages(API_KEY, ctx.api_version)

    def answer(code: int) -> Any:
        return m.make("AddOffsetsToTxnResponse", throttle_time=response_throttle(deps, ctx), error_code=code)

    if not may_write_txn_id(deps, ctx, request.transactional_id):
        return answer(int(ErrorCode.transactional_id_authorization_failed))
    if not deps.authorize(ctx, "READ", "GROUP", [request.group_id])[0]:
        return answer(int(ErrorCode.group_authorization_failed))
    try:
        await coordinator(deps).add_offsets(request.transactional_id, request.producer_id,
                                              request.producer_epoch, request.group_id)
    except KafkaError as e:
        return answer(client_code(e.code, ctx.api_version, FENCED_SINCE))
    return answer(0)
