"""DescribeTransactions (key 65): the coordinator's state of each transactional id."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.coordinator.txn.wire import coordinator
from strom.core.errors import InvalidRequestError, KafkaError
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import TxnDeps
    from strom.core.server.handlers._kio_types import (
        DescribeTransactionsRequest,
        DescribeTransactionsResponse,
    )

API_KEY = 65
VERSIONS = (0, 0)


def _timestamp(ms: int) -> datetime.datetime:
    # kio maps datetimes to int64 ms; -1 (no transaction in flight) must be sent as -1, not null.
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


async def handle(deps: TxnDeps, ctx: RequestContext, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    m = response_messages(API_KEY, ctx.api_version)
    ids = list(request.transactional_ids)
    allowed = deps.authorize(ctx, "DESCRIBE", "TRANSACTIONAL_ID", ids) if ids else []
    states = []
    for tid, ok in zip(ids, allowed, strict=True):
        def failed(code: ErrorCode, tid: str = tid) -> Any:
            # Kafka leaves the other fields of a failed entry at their schema defaults (0, "").
            return m.make("TransactionState", error_code=code, transactional_id=tid, transaction_state="",
                          transaction_timeout=0, transaction_start_time=_timestamp(0), producer_id=0,
                          producer_epoch=0, topics=())
        if not ok:
            states.append(failed(ErrorCode.transactional_id_authorization_failed))
            continue
        try:
            txn = coordinator(deps)
            if tid == "":
                # Kafka refuses an empty id (once the coordinator is up) instead of looking it up.
                raise InvalidRequestError()
            txn.persist_lingering((tid,))
            md = txn.describe(tid)
        except KafkaError as e:
            states.append(failed(e.code))
            continue
        topics = tuple(m.make("TopicData", topic=t, partitions=tuple(p)) for t, p in md.topics().items())
        states.append(m.make("TransactionState", error_code=0, transactional_id=tid,
                             transaction_state=md.state.display, transaction_timeout=md.timeout_ms,
                             transaction_start_time=_timestamp(md.txn_start_ms), producer_id=md.producer_id,
                             producer_epoch=md.producer_epoch, topics=topics))
    return m.make("DescribeTransactionsResponse", throttle_time=response_throttle(deps, ctx),
                  transaction_states=tuple(states))
