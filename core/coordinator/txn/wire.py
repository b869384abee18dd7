"""Glue the transaction API handlers share: finding the coordinator and mapping its errors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.errors import CoordinatorNotAvailableError
from strom.core.request_context import Authorizing, RequestContext

if TYPE_CHECKING:
    from strom.core.coordinator.txn.coordinator import TransactionCoordinator


def coordinator(broker: object) -> TransactionCoordinator:
    """The broker's transaction coordinator; COORDINATOR_NOT_AVAILABLE until it is wired and started."""
    coord: Any = getattr(broker, "txn_coordinator", None)
    if coord is None or coord.runtime is None:
        raise CoordinatorNotAvailableError()
    return coord


def client_code(code: ErrorCode | int, api_version: int, fenced_since: int) -> int:
    """PRODUCER_FENCED (KIP-588) is INVALID_PRODUCER_EPOCH for request versions before ``fenced_since``."""
    code = int(code)
    if code == int(ErrorCode.producer_fenced) and api_version < fenced_since:
        return int(ErrorCode.invalid_producer_epoch)
    return code


def may_write_txn_id(broker: Authorizing, ctx: RequestContext, transactional_id: str) -> bool:
    return broker.authorize(ctx, "WRITE", "TRANSACTIONAL_ID", [transactional_id])[0]
