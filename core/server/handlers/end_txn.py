"""EndTxn (key 26): commit or abort a producer's transaction (two-phase, see the coordinator).

Versions 0-4 are transaction version 1 (the producer keeps its epoch). Version 5 is KIP-890's
transaction version 2: the coordinator bumps the epoch and the response carries the producer id
and epoch the producer continues with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.coordinator.txn.state import TxnError
from strom.core.coordinator.txn.wire import client_code, coordinator, may_write_txn_id
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import response_throttle

if TYPE_CHECKING:
    from strom.core.server.broker import Broker

API_KEY = 26
VERSIONS = (0, 5)
FENCED_SINCE = 2
TV2_SINCE = 5


async def handle(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    m = response_messages(API_KEY, ctx.api_version)

    def answer(code: int, producer_id: int = -1, producer_epoch: int = -1) -> Any:
        if ctx.api_version < TV2_SINCE:
            return m.make("EndTxnResponse", throttle_time=response_throttle(broker, ctx), error_code=code)
        return m.make("EndTxnResponse", throttle_time=response_throttle(broker, ctx), error_code=code,
                      producer_id=producer_id, producer_epoch=producer_epoch)

    if not may_write_txn_id(broker, ctx, request.transactional_id):
        return answer(int(ErrorCode.transactional_id_authorization_failed))
    client_version = 2 if ctx.api_version >= TV2_SINCE else 0
    try:
        pid, epoch = await coordinator(broker).end_transaction(
            request.transactional_id, request.producer_id, request.producer_epoch, bool(request.committed),
            client_version)
    except TxnError as e:
        return answer(client_code(e.code, ctx.api_version, FENCED_SINCE))
    return answer(0, pid, epoch)
