"""EndTxn (key 26): commit or abort a producer's transaction (two-phase, see the coordinator).

Versions 0-4 are transaction version 1 (the producer keeps its epoch). Version 5 is KIP-890's
transaction version 2: the coordinator bumps the epoch and the response carries the producer id
and epoch the producer continues with.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.coordinator.txn.wire import client_code, coordinator, may_write_txn_id
from strom.core.errors import KafkaError
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import TxnDeps
    from strom.core.server.handlers._kio_types import EndTxnRequest

API_KEY = 26
VERSIONS = (0, 5)
FENCED_SINCE = 2
TV2_SINCE = 5
FIRST_FLEXIBLE = 3

# size, correlation id, then (flexible) the header's empty tag section
_HEAD = struct.Struct(">ii")
_BODY = struct.Struct(">ih")   # ThrottleTimeMs, ErrorCode
_TV2 = struct.Struct(">qh")    # ProducerId, ProducerEpoch (v5)


class EndTxnAnswer:
    """An EndTxn response, encoded by hand: one per transaction, and kio's generic writer cost
    as much as the rest of the handler's own work. The bytes are kio's (a test checks every version)."""

    __slots__ = ("error_code", "producer_epoch", "producer_id", "throttle_time_ms")

    def __init__(self, throttle_time_ms: int, error_code: int, producer_id: int = -1, producer_epoch: int = -1) -> None:
        self.throttle_time_ms = throttle_time_ms
        self.error_code = error_code
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch

    def frame_parts(self, version: int, correlation_id: int) -> bytes:
        body = _BODY.pack(self.throttle_time_ms, self.error_code)
        if version >= TV2_SINCE:
            body += _TV2.pack(self.producer_id, self.producer_epoch)
        if version >= FIRST_FLEXIBLE:
            return _HEAD.pack(len(body) + 6, correlation_id) + b"\x00" + body + b"\x00"
        return _HEAD.pack(len(body) + 4, correlation_id) + body


async def handle(deps: TxnDeps, ctx: RequestContext, request: EndTxnRequest) -> EndTxnAnswer:
    def answer(code: int, producer_id: int = -1, producer_epoch: int = -1) -> EndTxnAnswer:
        return EndTxnAnswer(response_throttle(deps, ctx), code, producer_id, producer_epoch)

    if not may_write_txn_id(deps, ctx, request.transactional_id):
        return answer(int(ErrorCode.transactional_id_authorization_failed))
    client_version = 2 if ctx.api_version >= TV2_SINCE else 0
    try:
        pid, epoch = await coordinator(deps).end_transaction(
            request.transactional_id, request.producer_id, request.producer_epoch, bool(request.committed),
            client_version)
    except KafkaError as e:
        return answer(client_code(e.code, ctx.api_version, FENCED_SINCE))
    return answer(0, pid, epoch)
