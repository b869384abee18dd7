"""ListTransactions (key 66): the transactional ids this coordinator owns, with filters.

v0: state and producer-id filters; v1 adds the duration filter (KIP-994); v2 a transactional-id
regular expression (matched against the whole id, as Java's ``Matcher.matches``). Only ids the
principal may DESCRIBE are listed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.coordinator.txn.state import STATE_BY_NAME
from strom.core.coordinator.txn.wire import coordinator
from strom.core.errors import KafkaError
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import TxnDeps
    from strom.core.server.handlers._kio_types import ListTransactionsRequest, ListTransactionsResponse

API_KEY = 66
VERSIONS = (0, 2)


async def handle(deps: TxnDeps, ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    m = response_messages(API_KEY, ctx.api_version)

    def answer(code: int, unknown: list[str], found: list[Any]) -> Any:
        return m.make("ListTransactionsResponse", throttle_time=response_throttle(deps, ctx), error_code=code,
                      unknown_state_filters=tuple(unknown), transaction_states=tuple(found))

    names = list(request.state_filters)
    unknown = [n for n in names if n not in STATE_BY_NAME]
    states = {STATE_BY_NAME[n] for n in names if n in STATE_BY_NAME}
    if names and not states:
        return answer(0, unknown, [])   # only unknown states asked for: nothing can match
    pattern = getattr(request, "transactional_id_pattern", None)
    if pattern:
        try:
            re.compile(pattern)
        except re.error:
            return answer(int(ErrorCode.invalid_regular_expression), unknown, [])
    try:
        txn = coordinator(deps)
        txn.persist_lingering()
        found = txn.list_transactions(states or None, set(request.producer_id_filters) or None,
                                      getattr(request, "duration_filter", -1), pattern)
    except KafkaError as e:
        return answer(int(e.code), unknown, [])
    ids = [md.transactional_id for md in found]
    allowed = deps.authorize(ctx, "DESCRIBE", "TRANSACTIONAL_ID", ids) if ids else []
    return answer(0, unknown, [m.make("TransactionState", transactional_id=md.transactional_id,
                                      producer_id=md.producer_id, transaction_state=md.state.display)
                               for md, ok in zip(found, allowed, strict=True) if ok])
