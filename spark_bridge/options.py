"""Parse and check the data source options, with spark-sql-kafka's names and semantics.

Spark hands options over lower-cased (``CaseInsensitiveDict``); every check here works on
lower-case names and error messages use spark-sql-kafka's spelling. ``kafka.*`` options go to
the Kafka client with the prefix removed; the Java-only ones that spark-sql-kafka itself forbids
(deserializers, ``auto.offset.reset``, ``enable.auto.commit``, interceptors) are refused with the
option to use instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from strom.client_security import ClientSecurityError, to_librdkafka
from strom.config_hints import suggestion_suffix
from strom.spark_bridge.exceptions import OptionError

# spark-sql-kafka's option names in their documented spelling; keys are the lower-case form.
_SOURCE_OPTIONS = [
    "assign", "subscribe", "subscribePattern",
    "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "includeHeaders", "minPartitions", "maxRecordsPerPartition",
    "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
    "groupIdPrefix",
]
_SINK_OPTIONS = ["topic", "includeHeaders"]
# Options Spark itself adds to a source's or sink's options.
_SPARK_OPTIONS = ["path", "checkpointLocation", "queryName"]
SPELLING: dict[str, str] = {n.lower(): n for n in _SOURCE_OPTIONS + _SINK_OPTIONS + _SPARK_OPTIONS}

# (type, default, doc) of each option, spark-sql-kafka's documentation in short, for
# `strom config list spark` and docs/configuration.md.
OPTION_DOCS: dict[str, tuple[str, str, str]] = {
    "assign": ("json", "", "Specific TopicPartitions to consume, as JSON: {\"topicA\":[0,1]}."),
    "subscribe": ("string", "", "Comma-separated list of topics to consume."),
    "subscribePattern": ("string", "", "Regular expression of the topics to consume."),
    "startingOffsets": ("string", "latest (streaming), earliest (batch)",
                        "Where a query starts: earliest, latest or JSON of offsets per partition."),
    "endingOffsets": ("string", "latest", "Where a batch query ends: latest or JSON of offsets per partition."),
    "startingTimestamp": ("long", "", "Start from the first offset at or after this timestamp, in every partition."),
    "endingTimestamp": ("long", "", "End a batch query at the first offset at or after this timestamp."),
    "startingOffsetsByTimestamp": ("json", "", "Start timestamp per partition, as JSON."),
    "endingOffsetsByTimestamp": ("json", "", "End timestamp per partition, as JSON (batch only)."),
    "startingOffsetsByTimestampStrategy": ("string", "error",
                                           "A timestamp past a partition's last record: error or latest."),
    "failOnDataLoss": ("boolean", "true", "Fail the query when data may have been lost (deleted, aged out)."),
    "includeHeaders": ("boolean", "false", "Include the records' headers in the rows."),
    "minPartitions": ("int", "", "Desired minimum number of partitions to read from Kafka."),
    "maxRecordsPerPartition": ("int", "", "Split a Spark partition once it has this many records."),
    "maxOffsetsPerTrigger": ("long", "", "Rate limit: offsets one streaming trigger reads, over all partitions."),
    "minOffsetsPerTrigger": ("long", "", "Refused: PySpark's Python data sources take one read limit."),
    "maxTriggerDelay": ("string", "", "Refused with minOffsetsPerTrigger."),
    "kafkaConsumer.pollTimeoutMs": ("long", "120000", "Timeout of one poll of the executors' consumers."),
    "fetchOffset.numRetries": ("int", "3", "Retries of an offset lookup before giving up."),
    "fetchOffset.retryIntervalMs": ("long", "10", "Milliseconds between retries of an offset lookup."),
    "groupIdPrefix": ("string", "spark-kafka-source", "Prefix of the consumer group ids the source generates."),
    "topic": ("string", "", "Sink: the topic every row is written to (else each row's topic column)."),
    "kafka.*": ("string", "", "Any Kafka client config, prefix removed (kafka.bootstrap.servers is required)."),
}

# Kafka client settings spark-sql-kafka refuses, and what to use instead.
_FORBIDDEN_SOURCE_KAFKA = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "key.deserializer": "keys are always read as bytes; use DataFrame operations to deserialize them",
    "value.deserializer": "values are always read as bytes; use DataFrame operations to deserialize them",
    "enable.auto.commit": "the source does not commit offsets; Spark checkpoints them",
    "interceptor.classes": "consumer interceptors are not supported",
}
_FORBIDDEN_SINK_KAFKA = {
    "key.serializer": "keys are written as bytes; cast the 'key' column to string or binary",
    "value.serializer": "values are written as bytes; cast the 'value' column to string or binary",
}

EARLIEST = -2
LATEST = -1

OffsetSpecKind = Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end: earliest, latest, per-partition offsets (-2/-1 allowed) or timestamps."""

    kind: OffsetSpecKind
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)  # "offsets" or "timestamps"
    timestamp: int | None = None  # "timestamp": one timestamp for every partition


@dataclass(frozen=True)
class Subscription:
    """Exactly one of subscribe (topics), subscribePattern (pattern) or assign (partitions)."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class SourceOptions:
    """Checked options of a Kafka source (batch or streaming)."""

    kafka: dict[str, str]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy: Literal["error", "latest"] = "error"
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    poll_timeout_ms: int = 120_000
    group_id_prefix: str = "spark-kafka-source"
    # spark-sql-kafka's driver-side retries of an offset lookup (its defaults).
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 10

    @property
    def read_committed(self) -> bool:
        return self.kafka.get("isolation.level", "read_uncommitted") == "read_committed"


@dataclass(frozen=True)
class SinkOptions:
    """Checked options of a Kafka sink."""

    kafka: dict[str, str]
    topic: str | None


# -- helpers -------------------------------------------------------------------------------------

def _name(key: str) -> str:
    return SPELLING.get(key, key)


def _split_kafka(options: Mapping[str, str], forbidden: Mapping[str, str]) -> dict[str, str]:
    kafka: dict[str, str] = {}
    for key, value in options.items():
        if key.startswith("kafka."):
            prop = key[len("kafka."):]
            if prop in forbidden:
                raise OptionError(key, f"Kafka option '{prop}' is not supported: {forbidden[prop]}")
            kafka[prop] = str(value)
    if not kafka.get("bootstrap.servers"):
        raise OptionError("kafka.bootstrap.servers", "is required (host:port[,host:port...])")
    # kafka.security.protocol, kafka.sasl.jaas.config, kafka.ssl.truststore.location...: Kafka's
    # names, as spark-sql-kafka takes them, in librdkafka's
    try:
        translated = to_librdkafka(kafka)
    except ClientSecurityError as exc:
        raise OptionError("kafka." + exc.key, exc.reason) from None
    return {k: ("true" if v is True else "false" if v is False else str(v)) for k, v in translated.items()}


def _check_known(options: Mapping[str, str], allowed: list[str]) -> None:
    known = {n.lower() for n in allowed + _SPARK_OPTIONS}
    for key in options:
        if key.startswith("kafka."):
            continue
        if key.lower() not in known:
            hint = suggestion_suffix(key, allowed + _SPARK_OPTIONS)
            raise OptionError(key, "unknown option" + hint + "; accepted: " + ", ".join(sorted(allowed)) +
                              " and kafka.<Kafka client config>")


def parse_bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise OptionError(_name(key), f"expected true or false, got {raw!r}")
    return text == "true"


def parse_positive_int(options: Mapping[str, str], key: str) -> int | None:
    raw = options.get(key)
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(_name(key), f"expected a positive integer, got {raw!r}") from None
    if value <= 0:
        raise OptionError(_name(key), f"expected a positive integer, got {raw!r}")
    return value


def _load_json(key: str, raw: str, shape: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(_name(key), f"malformed JSON ({exc.msg} at char {exc.pos}); expected {shape}, "
                          f"got {raw!r}") from None


def parse_partition_map(key: str, raw: str) -> dict[tuple[str, int], int]:
    """``{"topicA":{"0":23,"1":-1}}`` -> {(topic, partition): number}, as spark-sql-kafka's JsonUtils."""
    shape = 'a JSON object like {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
    data = _load_json(key, raw, shape)
    if not isinstance(data, dict):
        raise OptionError(_name(key), f"expected {shape}, got {raw!r}")
    out: dict[tuple[str, int], int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise OptionError(_name(key), f"topic {topic!r} must map to an object of partition -> value; "
                              f"expected {shape}, got {raw!r}")
        for part, number in parts.items():
            try:
                partition = int(part)
            except ValueError:
                raise OptionError(_name(key), f"partition {part!r} of topic {topic!r} is not an integer; "
                                  f"expected {shape}") from None
            if isinstance(number, bool) or not isinstance(number, int):
                raise OptionError(_name(key), f"value for {topic}-{partition} must be an integer, "
                                  f"got {number!r}")
            out[(topic, partition)] = number
    return out


def parse_assign(raw: str) -> tuple[tuple[str, int], ...]:
    """``{"topicA":[0,1],"topicB":[2,4]}`` -> ((topicA, 0), ...)."""
    shape = 'a JSON object like {"topicA":[0,1],"topicB":[2,4]}'
    data = _load_json("assign", raw, shape)
    if not isinstance(data, dict) or not data:
        raise OptionError("assign", f"expected {shape}, got {raw!r}")
    out: list[tuple[str, int]] = []
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and not isinstance(p, bool)
                                                  for p in parts):
            raise OptionError("assign", f"topic {topic!r} must map to a list of partition numbers; "
                              f"expected {shape}, got {raw!r}")
        out.extend((topic, p) for p in parts)
    return tuple(out)


def _parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = [k for k in ("assign", "subscribe", "subscribepattern") if k in options]
    if len(given) != 1:
        names = ", ".join(_name(k) for k in given) if given else "none"
        raise OptionError("subscribe/subscribePattern/assign",
                          f"exactly one of 'assign', 'subscribe' or 'subscribePattern' must be given "
                          f"(got {names})")
    key = given[0]
    raw = str(options[key])
    if key == "assign":
        return Subscription("assign", partitions=parse_assign(raw))
    if key == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError("subscribe", f"expected a comma-separated list of topics, got {raw!r}")
        return Subscription("subscribe", topics=topics)
    if not raw.strip():
        raise OptionError("subscribePattern", "pattern is empty")
    try:
        re.compile(raw)
    except re.error as exc:
        raise OptionError("subscribePattern", f"invalid regular expression {raw!r}: {exc}") from None
    return Subscription("subscribePattern", pattern=raw)


def _parse_offset_spec(options: Mapping[str, str], prefix: str, default: OffsetSpecKind,
                       streaming: bool) -> OffsetSpec:
    """``prefix`` is "starting" or "ending"; by-timestamp options take precedence, as in spark-sql-kafka."""
    by_ts_key = f"{prefix}offsetsbytimestamp"
    ts_key = f"{prefix}timestamp"
    offsets_key = f"{prefix}offsets"
    if by_ts_key in options:
        return OffsetSpec("timestamps", offsets=parse_partition_map(by_ts_key, str(options[by_ts_key])))
    if ts_key in options:
        raw = str(options[ts_key]).strip()
        try:
            ts = int(raw)
        except ValueError:
            raise OptionError(_name(ts_key), f"expected a timestamp in milliseconds, got {raw!r}") from None
        if ts < 0:
            raise OptionError(_name(ts_key), f"expected a non-negative timestamp, got {raw!r}")
        return OffsetSpec("timestamp", timestamp=ts)
    given = options.get(offsets_key)
    if given is None:
        return OffsetSpec(default)
    text = str(given).strip()
    if text.lower() in ("earliest", "latest"):
        kind: OffsetSpecKind = "earliest" if text.lower() == "earliest" else "latest"
        if not streaming and prefix == "starting" and kind == "latest":
            raise OptionError("startingOffsets", "starting offset can't be latest for batch queries on Kafka")
        if prefix == "ending" and kind == "earliest":
            raise OptionError("endingOffsets", "ending offset can't be earliest for batch queries on Kafka")
        return OffsetSpec(kind)
    offsets = parse_partition_map(offsets_key, text)
    for (topic, partition), off in offsets.items():
        if off < EARLIEST:
            raise OptionError(_name(offsets_key), f"offset {off} for {topic}-{partition} is invalid "
                              "(use an offset >= 0, -2 for earliest or -1 for latest)")
        if not streaming and prefix == "starting" and off == LATEST:
            raise OptionError("startingOffsets", f"starting offset for {topic}-{partition} can't be latest "
                              "(-1) for batch queries on Kafka")
        if prefix == "ending" and off == EARLIEST:
            raise OptionError("endingOffsets", f"ending offset for {topic}-{partition} can't be earliest "
                              "(-2) for batch queries on Kafka")
    return OffsetSpec("offsets", offsets=offsets)


# -- public parsers ------------------------------------------------------------------------------

def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Check a source's options; raises :class:`OptionError` naming the first bad option."""
    opts = {k.lower(): v for k, v in options.items()}
    _check_known(opts, _SOURCE_OPTIONS)
    kafka = _split_kafka(opts, _FORBIDDEN_SOURCE_KAFKA)
    subscription = _parse_subscription(opts)
    level = kafka.get("isolation.level", "read_uncommitted")
    if level not in ("read_uncommitted", "read_committed"):
        raise OptionError("kafka.isolation.level", f"expected read_uncommitted or read_committed, got {level!r}")
    if streaming:
        for key in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if key in opts:
                raise OptionError(_name(key), "ending offsets are not valid in streaming queries")
    starting = _parse_offset_spec(opts, "starting", "latest" if streaming else "earliest", streaming)
    ending = _parse_offset_spec(opts, "ending", "latest", streaming)
    strategy = str(opts.get("startingoffsetsbytimestampstrategy", "error")).strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError("startingOffsetsByTimestampStrategy", f"expected error or latest, got {strategy!r}")
    if "minoffsetspertrigger" in opts or "maxtriggerdelay" in opts:
        key = "minoffsetspertrigger" if "minoffsetspertrigger" in opts else "maxtriggerdelay"
        raise OptionError(_name(key), "not supported by the strom source (PySpark's Python data sources "
                          "take one read limit; use maxOffsetsPerTrigger)")
    poll = parse_positive_int(opts, "kafkaconsumer.polltimeoutms")
    fetch: dict[str, int] = {}
    for key in ("fetchoffset.numretries", "fetchoffset.retryintervalms"):
        if key in opts:
            try:
                fetch[key] = int(str(opts[key]))
            except ValueError:
                raise OptionError(_name(key), f"expected an integer, got {opts[key]!r}") from None
            if fetch[key] < 0:
                raise OptionError(_name(key), f"must be >= 0, got {fetch[key]}")
    return SourceOptions(
        kafka=kafka,
        subscription=subscription,
        starting=starting,
        ending=ending,
        timestamp_strategy="latest" if strategy == "latest" else "error",
        fail_on_data_loss=parse_bool(opts, "failondataloss", True),
        include_headers=parse_bool(opts, "includeheaders", False),
        min_partitions=parse_positive_int(opts, "minpartitions"),
        max_records_per_partition=parse_positive_int(opts, "maxrecordsperpartition"),
        max_offsets_per_trigger=parse_positive_int(opts, "maxoffsetspertrigger"),
        poll_timeout_ms=poll if poll is not None else 120_000,
        group_id_prefix=str(opts.get("groupidprefix", "spark-kafka-source")),
        fetch_offset_num_retries=fetch.get("fetchoffset.numretries", 3),
        fetch_offset_retry_interval_ms=fetch.get("fetchoffset.retryintervalms", 10),
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Check a sink's options; raises :class:`OptionError` naming the first bad option."""
    opts = {k.lower(): v for k, v in options.items()}
    _check_known(opts, _SINK_OPTIONS)
    kafka = _split_kafka(opts, _FORBIDDEN_SINK_KAFKA)
    topic = opts.get("topic")
    if topic is not None and not str(topic).strip():
        raise OptionError("topic", "is empty")
    return SinkOptions(kafka=kafka, topic=str(topic).strip() if topic is not None else None)
