"""Offsets: spark-sql-kafka's JSON form, and resolving offset options against a cluster (driver side).

A set of partition offsets is ``dict[(topic, partition), offset]``. In checkpoints and options it
is spark-sql-kafka's JSON, ``{"topic":{"0":next_offset}}`` (partition numbers as strings).
:class:`KafkaMetadata` answers the driver's questions (which partitions, earliest/latest/by
timestamp) with one AdminClient ListOffsets request per question; latest honours
``isolation.level`` (read_committed: the last stable offset).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import OffsetSpec as KafkaOffsetSpec

from strom.spark_bridge.exceptions import ClientTimeoutError, KafkaClientError, OptionError, is_transient
from strom.spark_bridge.options import EARLIEST, LATEST, OffsetSpec, SourceOptions, Subscription

PartitionOffsets = dict[tuple[str, int], int]
TopicPart = tuple[str, int]
T = TypeVar("T")

log = logging.getLogger(__name__)


def to_json_dict(offsets: PartitionOffsets) -> dict[str, dict[str, int]]:
    """``{(t, p): o}`` -> ``{"t": {"p": o}}`` (sorted, so equal offsets give equal JSON)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(off)
    return out


def from_json_dict(data: dict[str, Any]) -> PartitionOffsets:
    """Inverse of :func:`to_json_dict` (also accepts what Spark read back from a checkpoint)."""
    return {(topic, int(p)): int(o) for topic, parts in data.items() for p, o in parts.items()}


def client_config(kafka: dict[str, str]) -> dict[str, Any]:
    """The librdkafka config for driver-side clients (no group: nothing is committed)."""
    conf: dict[str, Any] = {k: v for k, v in kafka.items() if k not in ("group.id", "isolation.level")}
    return conf


class KafkaMetadata:
    """Driver-side partition discovery and offset lookups for one source."""

    def __init__(self, options: SourceOptions, timeout: float = 30.0) -> None:
        self.options = options
        self.timeout = timeout
        try:
            self.admin = AdminClient(client_config(options.kafka))
        except KafkaException as exc:
            raise _config_error(exc, options.kafka) from None
        self.isolation = (IsolationLevel.READ_COMMITTED if options.read_committed
                          else IsolationLevel.READ_UNCOMMITTED)

    def _retrying(self, what: str, call: Callable[[], T]) -> T:
        """``call()``, each attempt bounded by the client timeout; a transient failure (broker
        away, request timed out) is retried ``fetchOffset.numRetries`` times
        ``fetchOffset.retryIntervalMs`` apart, as spark-sql-kafka's driver does."""
        retries = self.options.fetch_offset_num_retries
        for attempt in range(retries + 1):
            try:
                return call()
            except KafkaException as exc:
                if not is_transient(exc):
                    raise
                if _stale_leader_epoch(exc):
                    # librdkafka's admin client keeps sending the leader epoch it cached and does
                    # not refresh it on FENCED_LEADER_EPOCH: a new client reads fresh metadata
                    # (the epoch moves on when a broker is elected again, e.g. after a crash).
                    self.admin = AdminClient(client_config(self.options.kafka))
                if attempt == retries:
                    raise ClientTimeoutError(
                        f"{what}: still failing after {retries} retries (fetchOffset.numRetries, "
                        f"fetchOffset.retryIntervalMs={self.options.fetch_offset_retry_interval_ms}; each "
                        f"attempt {self.timeout:.0f} s): {exc}") from None
                log.warning("%s failed (attempt %d of %d), retrying: %s", what, attempt + 1, retries + 1, exc)
                time.sleep(self.options.fetch_offset_retry_interval_ms / 1000)  # the option's back-off
        raise AssertionError("unreachable")

    # -- partitions --------------------------------------------------------------------------

    def partitions(self, subscription: Subscription | None = None) -> list[TopicPart]:
        sub = subscription or self.options.subscription
        if sub.kind == "assign":
            return sorted(set(sub.partitions))
        try:
            md = self._retrying("reading cluster metadata", lambda: self.admin.list_topics(timeout=self.timeout))
        except KafkaException as exc:
            raise KafkaClientError(f"cannot read cluster metadata: {exc}") from None
        if sub.kind == "subscribe":
            names = [t for t in sub.topics if t in md.topics]
        else:
            assert sub.pattern is not None
            rx = re.compile(sub.pattern)
            # Java's Pattern.matches is a full match; internal topics are excluded as the Java
            # consumer does by default (exclude.internal.topics=true).
            names = [t for t in md.topics if rx.fullmatch(t) and not t.startswith("__")]
        out: list[TopicPart] = []
        for name in names:
            tmd = md.topics[name]
            if tmd.error is not None:
                continue
            out.extend((name, p) for p in tmd.partitions)
        return sorted(out)

    # -- offsets ------------------------------------------------------------------------------

    def _list(self, specs: dict[TopicPart, KafkaOffsetSpec]) -> dict[TopicPart, int]:
        if not specs:
            return {}
        request = {TopicPartition(t, p): s for (t, p), s in specs.items()}

        def list_offsets() -> dict[TopicPart, int]:
            futures = self.admin.list_offsets(request, isolation_level=self.isolation,
                                              request_timeout=self.timeout)
            return {(tp.topic, tp.partition): f.result(self.timeout + 5).offset for tp, f in futures.items()}

        try:
            return self._retrying(f"ListOffsets of {_fmt(sorted(specs))}", list_offsets)
        except KafkaException as exc:
            raise KafkaClientError(f"ListOffsets failed for {sorted(specs)}: {exc}") from None

    def earliest(self, tps: list[TopicPart]) -> PartitionOffsets:
        return self._list({tp: KafkaOffsetSpec.earliest() for tp in tps})

    def latest(self, tps: list[TopicPart]) -> PartitionOffsets:
        return self._list({tp: KafkaOffsetSpec.latest() for tp in tps})

    def by_timestamp(self, stamps: dict[TopicPart, int]) -> dict[TopicPart, int]:
        """Offset of the first record with timestamp >= the given one, -1 when there is none."""
        return self._list({tp: KafkaOffsetSpec.for_timestamp(ts) for tp, ts in stamps.items()})

    def resolve(self, spec: OffsetSpec, tps: list[TopicPart], *, option: str,
                starting: bool) -> PartitionOffsets:
        """Concrete offsets of ``tps`` for a starting/ending option (``option`` names it in errors)."""
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind in ("offsets", "timestamps"):
            given = set(spec.offsets)
            missing = sorted(set(tps) - given)
            extra = sorted(given - set(tps))
            if missing or extra:
                raise OptionError(option, "must name every partition of the subscription exactly: "
                                  f"missing {_fmt(missing)}, not in the subscription {_fmt(extra)}")
        if spec.kind == "offsets":
            out = dict(spec.offsets)
            early = [tp for tp, o in out.items() if o == EARLIEST]
            late = [tp for tp, o in out.items() if o == LATEST]
            out.update(self.earliest(early))
            out.update(self.latest(late))
            return out
        stamps = dict(spec.offsets) if spec.kind == "timestamps" else {
            tp: int(spec.timestamp or 0) for tp in tps}
        found = self.by_timestamp(stamps)
        unmatched = [tp for tp, o in found.items() if o < 0]
        if unmatched:
            if starting and self.options.timestamp_strategy == "error":
                raise OptionError(option, f"no offset matched the timestamp for {_fmt(sorted(unmatched))}; "
                                  "set startingOffsetsByTimestampStrategy=latest to start at the latest "
                                  "offset there instead")
            found.update(self.latest(unmatched))
        return found

    def close(self) -> None:
        # AdminClient has no close(); dropping the reference lets librdkafka tear it down.
        self.admin = None  # type: ignore[assignment]


def _fmt(tps: list[TopicPart]) -> str:
    return "[" + ", ".join(f"{t}-{p}" for t, p in tps) + "]" if tps else "[]"


def _config_error(exc: KafkaException, kafka: dict[str, str]) -> OptionError:
    """Name the ``kafka.*`` option librdkafka refused (its message does not always say)."""
    text = str(exc)
    m = re.search(r'property "([^"]+)"', text)
    prop = m.group(1) if m else None
    if prop is None:
        # Try the properties one at a time beside bootstrap.servers; only on this error path.
        base = {"bootstrap.servers": kafka.get("bootstrap.servers", "")}
        for key, value in kafka.items():
            if key == "bootstrap.servers":
                continue
            try:
                AdminClient({**base, key: value})
            except KafkaException:
                prop = key
                break
    return OptionError(f"kafka.{prop or 'bootstrap.servers'}", f"rejected by the Kafka client: {text}")


def _stale_leader_epoch(exc: KafkaException) -> bool:
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and err.code() in (KafkaError.FENCED_LEADER_EPOCH,
                                                          KafkaError.UNKNOWN_LEADER_EPOCH)
