"""Error handling of worker tasks: retry with tolerance, error log, dead-letter queue.

Kafka Connect's model (KIP-298), with strom's additions:

* :class:`RetryWithToleranceOperator` runs one record's conversion/transformation pipeline;
  a :class:`~strom.connect.exceptions.RetriableException` is retried with exponential backoff
  (300 ms doubling, at most ``errors.retry.delay.max.ms``) until ``errors.retry.timeout``
  (0: no retry, -1: forever); any other failure — or a retriable one out of time — is either
  tolerated (``errors.tolerance=all``: reported to the reporters, the record skipped) or fails
  the task with ``ConnectException("Tolerance exceeded in error handler")`` (not reported, as
  in Kafka; the task's status carries the trace). Records a sink task hands to its
  ``ErrantRecordReporter`` are always reported.
* :class:`LogReporter`: ``errors.log.enable`` / ``errors.log.include.messages``.
* :class:`DeadLetterQueueReporter`: ``errors.deadletterqueue.topic.name``. Sink records go to
  the DLQ as the original bytes with their original headers, as in Kafka. strom also routes
  failed *source* records (Kafka Connect has no DLQ there): key and value are the record's
  key and value rendered as JSON, the DLQ header ``__connect.errors.topic`` names the
  destination topic, and ``__connect.errors.source.partition`` / ``.source.offset`` carry the
  record's source partition and offset as JSON. With
  ``errors.deadletterqueue.context.headers.enable=true`` the ``__connect.errors.*`` context
  headers are added (Kafka's names; values are UTF-8 strings).

The operator counts attempts and failures; the reporters' produced records are flushed before
a sink task commits offsets, so a DLQ'd record is never lost behind a committed offset.
"""

from __future__ import annotations

import base64
import enum
import json
import logging
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from strom.connect.exceptions import ConnectException, RetriableException, Tolerated

log = logging.getLogger("strom.connect.errors")

DEFAULT_MAX_BLOCK_MS = 60000  # Kafka's producer max.block.ms: how long a send may wait for queue room

RETRIES_DELAY_MIN_MS = 300  # Kafka's first backoff
HEADER_PREFIX = "__connect.errors."
H_TOPIC = HEADER_PREFIX + "topic"
H_PARTITION = HEADER_PREFIX + "partition"
H_OFFSET = HEADER_PREFIX + "offset"
H_CONNECTOR = HEADER_PREFIX + "connector.name"
H_TASK = HEADER_PREFIX + "task.id"
H_STAGE = HEADER_PREFIX + "stage"
H_CLASS = HEADER_PREFIX + "class.name"
H_EXC_CLASS = HEADER_PREFIX + "exception.class.name"
H_EXC_MESSAGE = HEADER_PREFIX + "exception.message"
H_EXC_TRACE = HEADER_PREFIX + "exception.stacktrace"
H_SOURCE_PARTITION = HEADER_PREFIX + "source.partition"
H_SOURCE_OFFSET = HEADER_PREFIX + "source.offset"


class Stage(enum.Enum):
    """Where in a task's pipeline a failure happened (Kafka's names)."""

    TASK_POLL = "TASK_POLL"
    TASK_PUT = "TASK_PUT"
    HEADER_CONVERTER = "HEADER_CONVERTER"
    KEY_CONVERTER = "KEY_CONVERTER"
    VALUE_CONVERTER = "VALUE_CONVERTER"
    TRANSFORMATION = "TRANSFORMATION"
    KAFKA_PRODUCE = "KAFKA_PRODUCE"
    KAFKA_CONSUME = "KAFKA_CONSUME"


# Stages whose failures errors.tolerance=all may skip; a failing poll/put fails the task.
TOLERABLE_STAGES = frozenset({Stage.HEADER_CONVERTER, Stage.KEY_CONVERTER, Stage.VALUE_CONVERTER,
                              Stage.TRANSFORMATION, Stage.KAFKA_PRODUCE, Stage.TASK_PUT})


@dataclass(slots=True)
class RawRecord:
    """A consumed Kafka record as bytes (what a sink DLQ receives)."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None


@dataclass(slots=True)
class ProcessingContext:
    """What the reporters know about one failure; the pipeline updates ``stage`` as it goes."""

    connector: str
    task: int
    stage: Stage = Stage.TRANSFORMATION
    executing_class: Any = None
    consumer_record: RawRecord | None = None
    source_record: Any = None
    error: BaseException | None = None
    attempt: int = 0
    consumer_message: Any = None  # a confluent-kafka Message; turned into a RawRecord on failure only

    def raw_record(self) -> RawRecord | None:
        if self.consumer_record is None and self.consumer_message is not None:
            m = self.consumer_message
            ts_type, ts = m.timestamp()
            self.consumer_record = RawRecord(m.topic(), m.partition(), m.offset(), ts if ts_type else None,
                                             m.key(), m.value(), m.headers())
        return self.consumer_record


def class_name(obj: Any) -> str:
    if obj is None:
        return ""
    cls = obj if isinstance(obj, type) else type(obj)
    return getattr(cls, "KAFKA_CLASS_NAME", None) or f"{cls.__module__}.{cls.__qualname__}"


def format_trace(exc: BaseException) -> str:
    """The trace a failed connector/task shows in its status."""
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


class ErrorReporter(Protocol):
    def report(self, ctx: ProcessingContext) -> None: ...

    def flush(self, timeout: float) -> None: ...

    def close(self) -> None: ...


class LogReporter:
    """``errors.log.enable``: one log line per failure, with the record if asked."""

    def __init__(self, include_messages: bool) -> None:
        self.include_messages = include_messages

    def report(self, ctx: ProcessingContext) -> None:
        msg = (f"Error encountered in task {ctx.connector}-{ctx.task}. Executing stage "
               f"'{ctx.stage.value}' with class '{class_name(ctx.executing_class)}'")
        r = ctx.raw_record()
        if r is not None:
            msg += f", where consumed record is {{topic='{r.topic}', partition={r.partition}, offset={r.offset}}}"
            if self.include_messages:
                msg += f" key={r.key!r} value={r.value!r}"
        elif ctx.source_record is not None:
            sr = ctx.source_record
            msg += (f", where source record is {{topic='{sr.topic}', partition={sr.source_partition}, "
                    f"offset={sr.source_offset}}}")
            if self.include_messages:
                msg += f" key={sr.key!r} value={sr.value!r}"
        log.error("%s.", msg, exc_info=ctx.error)

    def flush(self, timeout: float) -> None:
        pass

    def close(self) -> None:
        pass


def _jsonable(value: Any) -> Any:
    """A JSON-friendly rendering of connect data (Struct, bytes, Decimal, datetime ...)."""
    schema = getattr(value, "schema", None)
    fields = getattr(schema, "fields", None)
    if fields is not None and hasattr(value, "get"):
        return {f.name: _jsonable(value.get(f.name)) for f in fields}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


class DeadLetterQueueReporter:
    """Produces failed records to ``errors.deadletterqueue.topic.name`` (see the module doc)."""

    def __init__(self, producer: Any, topic: str, context_headers: bool,
                 max_block_ms: int = DEFAULT_MAX_BLOCK_MS) -> None:
        self.producer = producer
        self.topic = topic
        self.context_headers = context_headers
        self.max_block_ms = max_block_ms
        self._errors: list[Any] = []

    @classmethod
    def create(cls, producer_conf: dict[str, Any], topic: str, replication_factor: int,
               context_headers: bool, admin_conf: dict[str, Any] | None = None) -> DeadLetterQueueReporter:
        """Creates the DLQ topic if missing (1 partition, as Kafka), then a producer for it."""
        from confluent_kafka import KafkaError, KafkaException, Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(admin_conf or {"bootstrap.servers": producer_conf["bootstrap.servers"]})
        md = admin.list_topics(timeout=30)
        if topic not in md.topics:
            rf = replication_factor
            if rf > len(md.brokers):
                log.warning("DLQ topic %s: replication factor %d exceeds the %d broker(s); using %d",
                            topic, rf, len(md.brokers), len(md.brokers))
                rf = max(1, len(md.brokers))
            fut = admin.create_topics([NewTopic(topic, 1, rf)])[topic]
            try:
                fut.result(30)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise ConnectException(f"cannot create dead letter queue topic {topic}: {exc}") from exc
        conf = dict(producer_conf)
        conf.pop("transactional.id", None)
        max_block_ms = int(conf.pop("max.block.ms", DEFAULT_MAX_BLOCK_MS))  # Kafka's key; not librdkafka's
        return cls(Producer(conf), topic, context_headers, max_block_ms)

    def report(self, ctx: ProcessingContext) -> None:
        headers: list[tuple[str, bytes | None]] = []
        r = ctx.raw_record()
        if r is not None:
            key, value, ts = r.key, r.value, r.timestamp
            headers.extend(r.headers or ())
            where = [(H_TOPIC, r.topic), (H_PARTITION, str(r.partition)), (H_OFFSET, str(r.offset))]
        elif ctx.source_record is not None:
            sr = ctx.source_record
            key = None if sr.key is None else json.dumps(_jsonable(sr.key)).encode()
            value = None if sr.value is None else json.dumps(_jsonable(sr.value)).encode()
            ts = sr.timestamp
            where = [(H_TOPIC, sr.topic or ""),
                     (H_SOURCE_PARTITION, json.dumps(_jsonable(sr.source_partition))),
                     (H_SOURCE_OFFSET, json.dumps(_jsonable(sr.source_offset)))]
            if sr.kafka_partition is not None:
                where.append((H_PARTITION, str(sr.kafka_partition)))
        else:
            return
        if self.context_headers:
            exc = ctx.error
            where += [(H_CONNECTOR, ctx.connector), (H_TASK, str(ctx.task)), (H_STAGE, ctx.stage.value),
                      (H_CLASS, class_name(ctx.executing_class))]
            if exc is not None:
                where += [(H_EXC_CLASS, class_name(exc)), (H_EXC_MESSAGE, str(exc)),
                          (H_EXC_TRACE, format_trace(exc))]
            headers.extend((k, v.encode()) for k, v in where)
        elif ctx.source_record is not None:
            # Without context headers a source record still needs its origin to be replayable.
            headers.extend((k, v.encode()) for k, v in where)
        kwargs: dict[str, Any] = {"headers": headers or None, "on_delivery": self._on_delivery}
        if ts is not None and ts >= 0:
            kwargs["timestamp"] = ts
        # A full queue is back-pressure: serve delivery reports until there is room, for at most
        # max.block.ms (the broker may be away for a moment); then the report fails the task.
        deadline = time.monotonic() + self.max_block_ms / 1000
        while True:
            try:
                self.producer.produce(self.topic, value, key, **kwargs)
                break
            except BufferError:
                if time.monotonic() >= deadline:
                    raise ConnectException(f"dead letter queue topic {self.topic}: no room in the producer queue "
                                           f"within max.block.ms={self.max_block_ms}") from None
                self.producer.poll(0.1)
        self.producer.poll(0)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._errors.append(err)

    def flush(self, timeout: float) -> None:
        """Waits for the DLQ records; raises if one could not be written (the task then fails)."""
        remaining = self.producer.flush(timeout)
        if remaining:
            # Still in flight, not lost: the caller's offsets wait for the next commit.
            raise RetriableException(f"{remaining} dead letter queue records not delivered within {timeout}s")
        if self._errors:
            err, self._errors = self._errors[0], []
            raise ConnectException(f"writing to dead letter queue topic {self.topic} failed: {err}")

    def close(self) -> None:
        try:
            self.producer.flush(5)
        finally:
            close = getattr(self.producer, "close", None)
            if close is not None:
                close()


@dataclass
class RetryWithToleranceOperator:
    """Runs record operations with retries and tolerance (see the module doc)."""

    retry_timeout_ms: int = 0
    retry_delay_max_ms: int = 60000
    tolerance_all: bool = False
    reporters: Sequence[ErrorReporter] = ()
    stopping: threading.Event = field(default_factory=threading.Event)
    clock: Callable[[], float] = time.monotonic
    total_failures: int = 0
    total_skipped: int = 0
    total_retries: int = 0

    def execute(self, operation: Callable[[], Any], ctx: ProcessingContext) -> Any:
        """``operation()``'s result; raises :class:`Tolerated` if the record is to be skipped,
        ``ConnectException`` if the failure is not tolerated."""
        try:
            return operation()
        except Tolerated:
            raise
        except Exception as exc:
            return self.recover(operation, ctx, exc)

    def recover(self, operation: Callable[[], Any], ctx: ProcessingContext, first: Exception) -> Any:
        """Handles ``first``, the failure of a first ``operation()`` call made by the caller.

        Hot paths call the operation inline in a ``try`` and come here only on failure, which
        saves a call per record; the outcome is the same as :meth:`execute`.
        """
        deadline: float | None = None
        delay_ms = RETRIES_DELAY_MIN_MS
        attempt = 1
        exc: Exception = first
        while True:
            if not isinstance(exc, RetriableException):
                self._fail(ctx, exc, attempt)
            now = self.clock()
            if deadline is None:
                deadline = float("inf") if self.retry_timeout_ms < 0 else now + self.retry_timeout_ms / 1000
            if now >= deadline or self.stopping.is_set():
                self._fail(ctx, exc, attempt)
            self.total_retries += 1
            wait = min(delay_ms, self.retry_delay_max_ms) / 1000
            wait = min(wait, max(0.0, deadline - now))
            delay_ms *= 2
            if self.stopping.wait(wait):
                self._fail(ctx, exc, attempt)
            attempt += 1
            try:
                return operation()
            except Tolerated:
                raise
            except Exception as again:
                exc = again

    def report(self, ctx: ProcessingContext, exc: BaseException) -> None:
        """Hands a failure to every reporter (a failing reporter never hides the original error)."""
        ctx.error = exc
        self.total_failures += 1
        for reporter in self.reporters:
            try:
                reporter.report(ctx)
            except Exception:
                log.exception("error reporter %s failed", type(reporter).__name__)

    def _fail(self, ctx: ProcessingContext, exc: BaseException, attempt: int) -> None:
        # As Kafka: only a tolerated failure is reported (log, DLQ); an intolerable one fails the
        # task, whose status then carries the trace.
        ctx.attempt = attempt
        if self.tolerance_all and ctx.stage in TOLERABLE_STAGES:
            self.report(ctx, exc)
            self.total_skipped += 1
            raise Tolerated() from exc
        ctx.error = exc
        self.total_failures += 1
        raise ConnectException("Tolerance exceeded in error handler") from exc

    def execute_failed(self, ctx: ProcessingContext, exc: BaseException) -> None:
        """A failure the task reported itself (``ErrantRecordReporter``): always reported, as in
        Kafka, then the task fails unless ``errors.tolerance=all``."""
        self.report(ctx, exc)
        if not self.tolerance_all:
            raise ConnectException("Tolerance exceeded in error handler") from exc
        self.total_skipped += 1

    def flush(self, timeout: float = 30.0) -> None:
        for reporter in self.reporters:
            reporter.flush(timeout)

    def close(self) -> None:
        for reporter in self.reporters:
            try:
                reporter.close()
            except Exception:
                log.exception("closing error reporter %s failed", type(reporter).__name__)
