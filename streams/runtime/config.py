"""StreamsConfig: the settings of a :class:`KafkaStreams` application, by Kafka's property names.

Field aliases are Kafka Streams' names (``application.id``, ``processing.guarantee``...).
Keys prefixed ``consumer.``, ``producer.`` and ``admin.`` are passed, without the prefix, to
the corresponding confluent-kafka client (librdkafka property names), as Kafka Streams does
for its Java clients. Kafka's client security settings (``security.protocol``, ``sasl.*``,
``ssl.*``) at the top level go to every client; in either place Kafka's names are translated to
librdkafka's (:mod:`strom.client_security`). Any other unknown key is an error naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from strom.client_security import is_security_key, to_librdkafka
from strom.config_hints import expected_text, unknown_key_hint, value_line
from strom.streams.exceptions import StreamsError

AT_LEAST_ONCE: Final = "at_least_once"
EXACTLY_ONCE_V2: Final = "exactly_once_v2"
_PREFIXES = ("consumer.", "producer.", "admin.")
# Kafka's other names for the same settings (renamed across Kafka versions)
_RENAMED = {"deserialization.exception.handler": "default.deserialization.exception.handler",
            "cache.max.bytes.buffering": "statestore.cache.max.bytes",
            "default.production.exception.handler": "production.exception.handler"}

# What each key does (Kafka Streams' documentation, first sentence), for `strom config list streams`.
STREAMS_DOCS: dict[str, str] = {
    'application.id': 'An identifier for the stream processing application.',
    'bootstrap.servers': 'A list of host/port pairs used to establish the initial connection to the Kafka cluster.',
    'processing.guarantee': 'The processing guarantee that should be used.',
    'commit.interval.ms': 'The frequency in milliseconds with which to commit processing progress.',
    'state.dir': 'Directory location for state store.',
    'num.stream.threads': 'The number of threads to execute stream processing.',
    'default.key.serde': 'Default serializer / deserializer class for key that implements the org.apache.kafka.common.serialization.Serde interface.',
    'default.value.serde': 'Default serializer / deserializer class for value that implements the org.apache.kafka.common.serialization.Serde interface.',
    'replication.factor': 'The replication factor for change log topics and repartition topics created by the stream processing application.',
    'num.standby.replicas': 'The number of standby replicas for each task.',
    'application.server': 'A host:port pair pointing to a user-defined endpoint that can be used for state store discovery and interactive queries on this KafkaStreams instance.',
    'strom.iq.http.enable': "strom: serve GET /stores/<store>/keys/<key> over HTTP on application.server's port.",
    'strom.metrics.listener': "strom: http://HOST:PORT serving the application's Prometheus /metrics ('' = off).",
    'default.deserialization.exception.handler': 'Exception handling class that implements the org.apache.kafka.streams.errors.DeserializationExceptionHandler interface.',
    'processing.exception.handler': 'Exception handling class that implements the org.apache.kafka.streams.errors.ProcessingExceptionHandler interface.',
    'production.exception.handler': 'Exception handling class that implements the org.apache.kafka.streams.errors.ProductionExceptionHandler interface.',
    'errors.dead.letter.queue.topic.name': 'If not null, the default exception handler will build and send a Dead Letter Queue record to the topic with the provided name if an error occurs.',
    'statestore.cache.max.bytes': 'Maximum number of memory bytes to be used for statestore cache across all threads',
    'task.timeout.ms': 'The maximum amount of time in milliseconds a task might stall due to internal errors and retries until an error is raised.',
    'max.block.ms': 'How long one blocking client call may wait (Kafka Streams passes it to its clients).',
    'request.timeout.ms': 'The configuration controls the maximum amount of time the client will wait for the response of a request.',
    'poll.ms': 'The amount of time in milliseconds to block waiting for input.',
    'max.poll.records': 'The most records one poll of the consumer hands to the tasks.',
    'max.task.idle.ms': 'This config controls whether joins and merges may produce out-of-order results. The config value is the maximum amount of time in milliseconds a stream task will stay idle when it is fully caught up on some (but not all) input partitions to wait for producers to send additional records and avoid potential out-of-order record processing across multiple input streams. The default (zero) does not wait for producers to send more records, but it does wait to fetch data that is already present on the brokers. This default means that for records that are already present on the brokers, Streams will process them in timestamp order. Set to -1 to disable idling entirely and process any locally available data, even though doing so may produce out-of-order processing.',
}

class StreamsConfigError(StreamsError):
    """A StreamsConfig value is missing or out of range; the message names the key."""


class StreamsConfig(BaseModel):
    """Kafka Streams configuration (the subset strom.streams implements)."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", arbitrary_types_allowed=True)

    application_id: str = Field(alias="application.id", min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    bootstrap_servers: str = Field(alias="bootstrap.servers", min_length=1)
    processing_guarantee: Literal["at_least_once", "exactly_once_v2"] = Field(
        AT_LEAST_ONCE, alias="processing.guarantee")
    # None = Kafka's default: 30000 ms, or 100 ms under exactly_once_v2
    commit_interval_ms: int | None = Field(None, alias="commit.interval.ms", ge=0)
    state_dir: str = Field("/tmp/kafka-streams", alias="state.dir")
    num_stream_threads: int = Field(1, alias="num.stream.threads", ge=1)
    default_key_serde: Any = Field(None, alias="default.key.serde")
    default_value_serde: Any = Field(None, alias="default.value.serde")
    replication_factor: int = Field(-1, alias="replication.factor", ge=-1)
    # warm copies of other instances' task stores (see strom.streams.runtime.standby)
    num_standby_replicas: int = Field(0, alias="num.standby.replicas", ge=0)
    # host:port this instance serves interactive queries on (Kafka's application.server)
    application_server: str | None = Field(None, alias="application.server", pattern=r"^[^:\s]+:\d+$")
    # strom: serve GET /stores/<store>/keys/<key> over HTTP on application.server's port
    iq_http_enable: bool = Field(False, alias="strom.iq.http.enable")
    # strom: Prometheus /metrics with Kafka Streams' names at http://HOST:PORT (strom.streams.runtime.metrics)
    metrics_listener: str | None = Field(None, alias="strom.metrics.listener", pattern=r"^http://[^:\s]+:\d+$")
    # exception handlers (strom.streams.runtime.errors): built-in names, Kafka class names,
    # dotted paths or Python callables; Kafka's default is to fail
    deserialization_exception_handler: Any = Field(
        "log-and-fail", alias="default.deserialization.exception.handler")
    processing_exception_handler: Any = Field("log-and-fail", alias="processing.exception.handler")
    production_exception_handler: Any = Field("log-and-fail", alias="production.exception.handler")
    dead_letter_queue_topic: str | None = Field(None, alias="errors.dead.letter.queue.topic.name", min_length=1)
    # the record cache of aggregations (Kafka's default, 10 MiB), shared by a thread's tasks;
    # 0 writes and forwards every update at once
    statestore_cache_max_bytes: int = Field(10 * 1024 * 1024, alias="statestore.cache.max.bytes", ge=0)
    # Bounds of blocking client calls (Kafka Streams' semantics): each call waits at most
    # max.block.ms; a call failing on a retriable condition is retried until task.timeout.ms has
    # passed since it first failed, then the tasks are closed dirty and re-created
    task_timeout_ms: int = Field(300_000, alias="task.timeout.ms", ge=0)
    max_block_ms: int = Field(60_000, alias="max.block.ms", ge=1)
    # Kafka's client request.timeout.ms, for every client of the application (librdkafka's
    # socket.timeout.ms, and the producer's request.timeout.ms); None: the clients' defaults
    request_timeout_ms: int | None = Field(None, alias="request.timeout.ms", ge=10)
    poll_ms: int = Field(100, alias="poll.ms", ge=0)
    max_poll_records: int = Field(1000, alias="max.poll.records", ge=1)
    # Kafka's: how long a task with an empty input partition (known to be at its end) waits for
    # data before it processes the others' records anyway; -1 never waits (partition_group.py)
    max_task_idle_ms: int = Field(0, alias="max.task.idle.ms", ge=-1)
    consumer: dict[str, Any] = Field(default_factory=dict)
    producer: dict[str, Any] = Field(default_factory=dict)
    admin: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _split_client_props(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        out: dict[str, Any] = {}
        clients: dict[str, dict[str, Any]] = {"consumer": {}, "producer": {}, "admin": {}}
        security: dict[str, Any] = {}
        for key, value in data.items():
            for prefix in _PREFIXES:
                if isinstance(key, str) and key.startswith(prefix):
                    clients[prefix[:-1]][key[len(prefix):]] = value
                    break
            else:
                if isinstance(key, str) and is_security_key(key):
                    security[key] = value  # StreamsConfig's client settings: every client gets them
                else:
                    out[_RENAMED.get(key, key) if isinstance(key, str) else key] = value
        for name, props in clients.items():
            merged = {**security, **dict(out.get(name) or {}), **props}
            if merged:
                # Kafka's names (sasl.jaas.config, ssl.truststore.location...) in librdkafka's
                out[name] = to_librdkafka(merged)
        return out

    def client_timeouts(self, producer: bool) -> dict[str, Any]:
        """librdkafka properties carrying ``request.timeout.ms`` (prefixed keys override them)."""
        if self.request_timeout_ms is None:
            return {}
        out: dict[str, Any] = {"socket.timeout.ms": self.request_timeout_ms}
        if producer:
            out["request.timeout.ms"] = self.request_timeout_ms
        return out

    @property
    def exactly_once(self) -> bool:
        return self.processing_guarantee == EXACTLY_ONCE_V2

    @property
    def commit_interval(self) -> int:
        """commit.interval.ms in effect (Kafka: 30000, or 100 under exactly_once_v2)."""
        if self.commit_interval_ms is not None:
            return self.commit_interval_ms
        return 100 if self.exactly_once else 30000

    def cache_max_entries(self, tasks: int = 1) -> int:
        """Entries per task's record cache: the byte budget at ~100 bytes per cached entry.

        Kafka counts the serialized bytes; strom caches objects and does not serialize them
        until the flush, so it budgets by an estimated entry size instead.
        """
        return self.statestore_cache_max_bytes // (100 * max(tasks, 1))

    @classmethod
    def load(cls, props: Mapping[str, Any] | StreamsConfig) -> StreamsConfig:
        """Validate ``props``; a bad or unknown key is a :class:`StreamsConfigError` naming it."""
        if isinstance(props, StreamsConfig):
            return props
        try:
            return cls.model_validate(dict(props))
        except ValidationError as exc:
            problems = []
            known = cls.known_keys()
            for err in exc.errors():
                loc = err["loc"][0] if err["loc"] else "?"
                if err["type"] == "extra_forbidden":
                    # a typo: name the key it most likely meant
                    problems.append(unknown_key_hint(str(loc), known, _PREFIXES))
                    continue
                field = cls.model_fields.get(str(loc))
                key = field.alias if field is not None and field.alias else str(loc)
                value = err.get("input")
                problems.append(value_line(key, value, expected_text(err["type"], err.get("ctx"), err["msg"]),
                                           reason=err["type"] == "value_error"))
            raise StreamsConfigError("invalid streams config: " + "; ".join(problems)) from None

    @classmethod
    def known_keys(cls) -> list[str]:
        """The keys strom.streams reads (Kafka's names, their renamed forms); the client
        prefixes ``consumer.``, ``producer.``, ``admin.`` are open-ended."""
        fields = [f.alias for name, f in cls.model_fields.items() if f.alias and name not in ("consumer", "producer",
                                                                                              "admin")]
        return [*fields, *_RENAMED]
