"""KIP-714 client metrics: subscriptions from CLIENT_METRICS config resources, as Kafka's
ClientMetricsManager computes them, and the state behind GetTelemetrySubscriptions (71) and
PushTelemetry (72).

A subscription is a CLIENT_METRICS config resource (type 16) in the metadata log: ``metrics``
(metric-name prefixes, ``*`` for all), ``interval.ms`` (push interval, default 5 minutes) and
``match`` (``selector=regex`` items that must all match the client; none: every client). A
client asks for its subscription with GetTelemetrySubscriptions (a zero client instance id gets a
new one); the broker answers with the union of the metrics of every matching subscription and
the smallest of their intervals, under a subscription id that changes when that set changes.
PushTelemetry is accepted when the client uses its current subscription id, does not push before
its interval (unless terminating) and stays under ``telemetry.max.bytes``.

Pushed metrics (OpenTelemetry MetricsData protobuf, possibly compressed) are logged at DEBUG
(client instance, size) and kept as the client's last payload in :class:`ClientInstance`;
strom has no metrics exporter plugin to hand them to. The client's software name and version
(sent in ApiVersions) are not recorded per connection in strom, so ``client_software_name`` and
``client_software_version`` selectors match the empty string.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
import weakref
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from strom.core.dynamic_config import parse_match

log = logging.getLogger(__name__)

CLIENT_METRICS_RESOURCE = 16
DEFAULT_INTERVAL_MS = 300_000  # ClientMetricsConfigs.INTERVAL_MS_DEFAULT
ALL_METRICS = "*"  # ClientMetricsConfigs.ALL_SUBSCRIBED_METRICS
# CompressionType ids the broker accepts for PushTelemetry, in Kafka's order (zstd, lz4, gzip, snappy).
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)
# Kafka forgets a client instance after 3 push intervals without a request (cache expiry).
_EXPIRY_INTERVALS = 3


@dataclass
class ClientInstance:
    """One client instance's telemetry state."""

    instance_id: uuid.UUID
    subscription_id: int = 0
    push_interval_ms: int = DEFAULT_INTERVAL_MS
    metrics: tuple[str, ...] = ()
    last_get_ms: int = 0
    last_push_ms: int = 0
    terminating: bool = False
    last_error: int = 0  # the last push's error code (117 lets the client ask again at once)
    last_payload: bytes = field(default=b"", repr=False)


@dataclass(frozen=True, slots=True)
class Subscription:
    """What GetTelemetrySubscriptions answers."""

    instance_id: uuid.UUID
    subscription_id: int
    metrics: tuple[str, ...]
    push_interval_ms: int


class PushRejected(Exception):
    """A PushTelemetry the broker refuses; ``code`` is Kafka's error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


UNKNOWN_SUBSCRIPTION_ID, TELEMETRY_TOO_LARGE, THROTTLING_QUOTA_EXCEEDED, INVALID_REQUEST = 117, 118, 89, 42


def _matches(match: str, attributes: Mapping[str, str]) -> bool:
    items = [p.strip() for p in match.split(",") if p.strip()]
    try:
        patterns = parse_match(items)
    except Exception:
        return False  # validated before it was committed; an old record matches nothing
    return all(re.fullmatch(p, attributes.get(selector, "")) is not None for selector, p in patterns.items())


class ClientMetricsManager:
    """The broker's client-metrics state (one per broker, on its event loop)."""

    def __init__(self, telemetry_max_bytes: int = 1_048_576) -> None:
        self.telemetry_max_bytes = telemetry_max_bytes
        self.instances: dict[uuid.UUID, ClientInstance] = {}

    def subscription(self, subscriptions: Mapping[str, Mapping[str, str]], instance_id: uuid.UUID | None,
                     client_id: str, client_address: str, now_ms: int | None = None) -> Subscription:
        """GetTelemetrySubscriptions: the client's subscription (a new instance id for a zero one)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        self._expire(now)
        if instance_id is None or instance_id.int == 0:
            instance_id = uuid.uuid4()
        host, _, port = client_address.rpartition(":")
        attributes = {"client_instance_id": str(instance_id), "client_id": client_id,
                      "client_software_name": "", "client_software_version": "",
                      "client_source_address": host.strip("[]"), "client_source_port": port}
        metrics: set[str] = set()
        intervals: list[int] = []
        matched: list[str] = []
        for name in sorted(subscriptions):
            values = subscriptions[name]
            if not _matches(values.get("match", ""), attributes):
                continue
            prefixes = [p.strip() for p in values.get("metrics", "").split(",") if p.strip()]
            if not prefixes:
                continue  # a subscription without metrics asks for nothing
            matched.append(name)
            metrics.update(prefixes)
            intervals.append(int(values.get("interval.ms", DEFAULT_INTERVAL_MS)))
        # Kafka answers "*" as it is stored: the client reads it as every metric.
        requested = (ALL_METRICS,) if ALL_METRICS in metrics else tuple(sorted(metrics))
        interval = min(intervals) if intervals else DEFAULT_INTERVAL_MS
        key = repr((requested, interval, str(instance_id), matched)).encode()
        subscription_id = zlib.crc32(key) - (1 << 31)  # any stable int32 that changes with the set
        instance = self.instances.get(instance_id)
        if instance is None:
            instance = self.instances[instance_id] = ClientInstance(instance_id)
        elif now - max(instance.last_get_ms, instance.last_push_ms) < instance.push_interval_ms and \
                instance.last_error != UNKNOWN_SUBSCRIPTION_ID:
            # ClientMetricsInstance.maybeUpdateGetRequestTimestamp: not again before the interval,
            # unless the last push was refused for an old subscription id.
            raise PushRejected(THROTTLING_QUOTA_EXCEEDED, f"The request from the client [{instance_id}] "
                                                          "arrived before the next push interval time")
        instance.subscription_id, instance.push_interval_ms, instance.metrics = subscription_id, interval, requested
        instance.last_get_ms, instance.last_error = now, 0
        return Subscription(instance_id, subscription_id, requested, interval)

    def push(self, instance_id: uuid.UUID | None, subscription_id: int, terminating: bool, compression_type: int,
             metrics: bytes, now_ms: int | None = None) -> None:
        """PushTelemetry: accept the payload or raise PushRejected with Kafka's error."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if instance_id is None or instance_id.int == 0:
            raise PushRejected(INVALID_REQUEST, "Invalid request from the client: client instance id is empty")
        instance = self.instances.get(instance_id)
        if instance is None:
            raise PushRejected(UNKNOWN_SUBSCRIPTION_ID, f"Unknown client subscription id for the client: {instance_id}")
        if instance.terminating:
            raise PushRejected(INVALID_REQUEST, f"Client {instance_id} sent the terminating flag already")
        # ClientMetricsInstance.maybeUpdatePushRequestTimestamp, before the subscription id is
        # checked (as Kafka orders it): the first push after a Get is accepted, later ones not
        # before the push interval since the last request; a terminating push may come early.
        can_accept = instance.last_get_ms > instance.last_push_ms or \
            now - max(instance.last_get_ms, instance.last_push_ms) >= instance.push_interval_ms
        if can_accept:
            instance.last_push_ms = now
        elif not terminating:
            raise PushRejected(THROTTLING_QUOTA_EXCEEDED,
                               f"Request from the client [{instance_id}] arrived before the next push interval time")
        if instance.subscription_id != subscription_id:
            instance.last_error = UNKNOWN_SUBSCRIPTION_ID
            raise PushRejected(UNKNOWN_SUBSCRIPTION_ID, f"Unknown client subscription id for the client: {instance_id}")
        instance.terminating = terminating
        if len(metrics) > self.telemetry_max_bytes:
            raise PushRejected(TELEMETRY_TOO_LARGE,
                               f"Telemetry request from [{instance_id}] is larger than the maximum allowed size "
                               f"[{self.telemetry_max_bytes}]")
        instance.last_payload = bytes(metrics)
        log.debug("telemetry from client instance %s: %d bytes (compression type %d)%s", instance_id, len(metrics),
                  compression_type, ", terminating" if terminating else "")

    def _expire(self, now: int) -> None:
        gone = [i for i, c in self.instances.items()
                if now - max(c.last_get_ms, c.last_push_ms) > _EXPIRY_INTERVALS * max(c.push_interval_ms, 60_000)]
        for instance_id in gone:
            del self.instances[instance_id]


_MANAGERS: weakref.WeakKeyDictionary[object, ClientMetricsManager] = weakref.WeakKeyDictionary()


def manager_for(broker: object, telemetry_max_bytes: int = 1_048_576) -> ClientMetricsManager:
    """The broker's manager (made on first use; the broker object owns it)."""
    manager = _MANAGERS.get(broker)
    if manager is None:
        manager = _MANAGERS[broker] = ClientMetricsManager(telemetry_max_bytes)
    return manager
