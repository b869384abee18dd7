"""Helpers shared by the API handlers: error mapping, authorization and quota calls."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from kio.schema.errors import ErrorCode

from strom.core.exceptions import ConfigError, KafkaError
from strom.core.request_context import Authorizing, RequestContext, denied
from strom.plugins.hookspecs.quotas import ControllerMutationQuotas

if TYPE_CHECKING:
    from strom.core.metadata.image import MetadataImage, PartitionRegistration
    from strom.core.server.handlers._deps import RequestDeps

log = logging.getLogger("strom.core.server.handlers")
_T = TypeVar("_T")

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})

# The schemas' default of every *_authorized_operations field: "not asked for" (Kafka's Int.MinValue).
AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)
# Kafka's AclEntry.supportedOperations by resource type, as (AclOperation name, code): an
# *_authorized_operations field is the bit set (1 << code) of those the caller is allowed.
SUPPORTED_OPERATIONS: dict[str, tuple[tuple[str, int], ...]] = {
    "TOPIC": (("READ", 3), ("WRITE", 4), ("CREATE", 5), ("DELETE", 6), ("ALTER", 7), ("DESCRIBE", 8),
              ("DESCRIBE_CONFIGS", 10), ("ALTER_CONFIGS", 11)),
    "GROUP": (("READ", 3), ("DELETE", 6), ("DESCRIBE", 8), ("DESCRIBE_CONFIGS", 10), ("ALTER_CONFIGS", 11)),
    "CLUSTER": (("CREATE", 5), ("ALTER", 7), ("DESCRIBE", 8), ("CLUSTER_ACTION", 9), ("DESCRIBE_CONFIGS", 10),
                ("ALTER_CONFIGS", 11), ("IDEMPOTENT_WRITE", 12)),
    "TRANSACTIONAL_ID": (("WRITE", 4), ("DESCRIBE", 8)),
}
CLUSTER_NAME = "kafka-cluster"


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


def partition_call(denied: set[str], topic: str, call: Callable[[], _T]) -> tuple[int, _T | None]:
    """One partition's answer in a per-partition API: TOPIC_AUTHORIZATION_FAILED when ``topic``
    is denied, else ``(0, call())``, or the error code ``call`` failed with (and None)."""
    if topic in denied:
        return int(ErrorCode.topic_authorization_failed), None
    try:
        return 0, call()
    except Exception as e:
        return error_of(e)[0], None


def find_partition(image: MetadataImage, topic: str, index: int, no_topic: str,
                   no_partition: str) -> PartitionRegistration | tuple[int, str]:
    """The partition's registration, or UNKNOWN_TOPIC_OR_PARTITION with the API's message:
    ``no_topic`` when the topic is unknown, ``no_partition`` when only the partition is."""
    topic_image = image.topics.get(topic)
    if topic_image is None:
        return int(ErrorCode.unknown_topic_or_partition), no_topic
    part = topic_image.partitions.get(index)
    if part is None:
        return int(ErrorCode.unknown_topic_or_partition), no_partition
    return part


def authorize_cluster(deps: Authorizing, ctx: RequestContext, operation: str) -> bool:
    return deps.authorize(ctx, operation, "CLUSTER", [CLUSTER_NAME])[0]


def authorized_operations(deps: Authorizing, ctx: RequestContext, resource_type: str,
                          names: Sequence[str]) -> list[int]:
    """Kafka's AuthHelper.authorizedOperations for each named resource: the bit set of the
    operations its type supports that the authorizer allows the caller (every one of them with
    the allow-all built-in, as Kafka answers without an authorizer). One authorizer call per
    operation, covering every name; probes, so the authorizer does not audit-log them."""
    bits = [0] * len(names)
    if not names:
        return bits
    for operation, code in SUPPORTED_OPERATIONS[resource_type]:
        for i, allowed in enumerate(deps.authorize(ctx, operation, resource_type, names, audit=False)):
            if allowed:
                bits[i] |= 1 << code
    return bits


def cluster_authorized_operations(deps: Authorizing, ctx: RequestContext) -> int:
    """What Metadata v8-v10 and DescribeCluster answer when the client asks for the cluster's
    authorized operations: 0 unless the caller may DESCRIBE the cluster (Kafka checks that
    first), else the bit set of the cluster operations allowed."""
    if not authorize_cluster(deps, ctx, "DESCRIBE"):
        return 0
    return authorized_operations(deps, ctx, "CLUSTER", [CLUSTER_NAME])[0]


def throttle(deps: RequestDeps, ctx: RequestContext, quota_type: str, value: float) -> int:
    """Record ``value`` against the client's quota; the throttle time also mutes the channel.

    Produce and Fetch are also charged to the request quota, as Kafka's handlers are (their
    throttle time is the larger of the two)."""
    ms = deps.record_quota(ctx, quota_type, value)
    if quota_type in ("PRODUCE", "FETCH"):
        ms = max(ms, deps.record_quota(ctx, "REQUEST", request_time_percent(ctx)))
    if ms > ctx.throttle_ms:
        ctx.throttle_ms = ms
    return ms


def request_time_percent(ctx: RequestContext) -> float:
    """The request's handling time so far in Kafka's request-quota unit: percent of one second
    (``ClientRequestQuotaManager.nanosToPercentage``)."""
    return (time.monotonic_ns() - ctx.received_ns) * 100 / 1e9


def response_throttle(deps: RequestDeps, ctx: RequestContext) -> int:
    """Request quota (``request_percentage``), charged for every request that carries a throttle time."""
    return max(ctx.throttle_ms, throttle(deps, ctx, "REQUEST", request_time_percent(ctx)))


# Kafka 4.3.1 answers a mutation refused by the quota with THROTTLING_QUOTA_EXCEEDED and no message
# (tests/differential/test_client_quotas.py).
THROTTLED_MESSAGE: str | None = None


class MutationQuota:
    """KIP-599's controller mutation quota of one request (``controller_mutation_rate``), as
    Kafka's Strict/PermissiveControllerMutationQuota: a client new enough to know
    THROTTLING_QUOTA_EXCEEDED (``strict``) has a mutation refused while its token bucket is empty;
    an older one is let through and throttled (muted) instead. Either way the response carries
    the throttle time."""

    def __init__(self, deps: RequestDeps, ctx: RequestContext, strict_since_version: int) -> None:
        self.deps, self.ctx = deps, ctx
        self.strict = ctx.api_version >= strict_since_version
        self.throttle_ms = 0

    def admit(self, permits: int) -> bool:
        """Charge ``permits`` partitions created or deleted; False = refused (strict only)."""
        manager = self.deps.quota_manager
        if self.strict and isinstance(manager, ControllerMutationQuotas):
            waited = manager.mutation_throttle_ms(self.ctx.principal, self.ctx.client_id, int(time.time() * 1000))
            if waited > 0:
                self.throttle_ms = max(self.throttle_ms, waited)
                self._mute()
                return False
            # Strict records without checking afterwards (Sensor.record(..., checkQuotas=false)).
            self.deps.record_quota(self.ctx, "CONTROLLER_MUTATION", float(permits))
            return True
        self.throttle_ms = max(self.throttle_ms, self.deps.record_quota(self.ctx, "CONTROLLER_MUTATION",
                                                                         float(permits)))
        self._mute()
        return True

    def _mute(self) -> None:
        if self.throttle_ms > self.ctx.throttle_ms:
            self.ctx.throttle_ms = self.throttle_ms


def first(values: Any, *names: str, default: Any = None) -> Any:
    """The first attribute of ``values`` among ``names`` that exists (fields move across versions)."""
    for name in names:
        if hasattr(values, name):
            return getattr(values, name)
    return default
