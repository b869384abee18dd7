"""Helpers shared by the API handlers: error mapping, authorization and quota calls."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.exceptions import ConfigError, KafkaError
from strom.core.request_context import Authorizing, RequestContext, denied

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import RequestDeps

log = logging.getLogger("strom.core.server.handlers")

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def error_of(exc: BaseException) -> tuple[int, str | None]:
    """The Kafka error code and message a failed operation answers with."""
    if isinstance(exc, KafkaError):
        return int(exc.code), exc.message or None
    if isinstance(exc, ConfigError):
        return int(ErrorCode.invalid_config), str(exc)
    if isinstance(exc, OSError) and not isinstance(exc, ConnectionError):
        # The log turns the I/O errors it expects into KafkaStorageError through the log dir
        # failure channel; one that escapes it is still a storage error, as Kafka answers an
        # IOException under a partition (KafkaStorageException), not UNKNOWN_SERVER_ERROR. A
        # ConnectionError is a plugin's backend (an authorizer's), not storage.
        log.error("I/O error in a request handler", exc_info=exc)
        return int(ErrorCode.kafka_storage_error), f"{type(exc).__name__}: {exc}"
    log.error("unexpected error in a request handler", exc_info=exc)
    return int(ErrorCode.unknown_server_error), f"{type(exc).__name__}: {exc}"


def authorize_topics(deps: Authorizing, ctx: RequestContext, operation: str, topics: Sequence[str]) -> set[str]:
    """Ask the authorizer about ``operation`` on each topic; returns the denied ones."""
    return denied(deps, ctx, operation, "TOPIC", topics)


def authorize_cluster(deps: Authorizing, ctx: RequestContext, operation: str) -> bool:
    return deps.authorize(ctx, operation, "CLUSTER", ["kafka-cluster"])[0]


def throttle(deps: RequestDeps, ctx: RequestContext, quota_type: str, value: float) -> int:
    """Record ``value`` against the client's quota; the throttle time also mutes the channel."""
    ms = deps.record_quota(ctx, quota_type, value)
    if ms > ctx.throttle_ms:
        ctx.throttle_ms = ms
    return ms


def response_throttle(deps: RequestDeps, ctx: RequestContext) -> int:
    """Request-rate quota, charged for every request that carries a throttle time."""
    return max(ctx.throttle_ms, throttle(deps, ctx, "REQUEST", 1.0))


def first(values: Any, *names: str, default: Any = None) -> Any:
    """The first attribute of ``values`` among ``names`` that exists (fields move across versions)."""
    for name in names:
        if hasattr(values, name):
            return getattr(values, name)
    return default
