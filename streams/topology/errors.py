"""Exception handlers of a streams application and its dead-letter queue (KIP-1033, KIP-1034).

Three handlers decide what happens to a record that fails:

* ``default.deserialization.exception.handler`` (also ``deserialization.exception.handler``):
  the source record's key or value could not be deserialized;
* ``processing.exception.handler`` (KIP-1033): a processor raised while processing the record;
* ``production.exception.handler`` (also ``default.production.exception.handler``): a sink could
  not serialize its output or the producer refused it (e.g. larger than ``message.max.bytes``),
  or, under at_least_once, the broker rejected it (delivery report).

A handler is a Python callable ``handler(ctx: ErrorContext) -> HandlerResponse`` (an object with
a ``handle(ctx)`` method works too), a dotted path ``"pkg.module.name"``/``"pkg.module:name"``
to one (a class is instantiated without arguments), or a built-in name: ``"log-and-continue"``,
``"log-and-fail"`` or Kafka's class names (``org.apache.kafka.streams.errors.
LogAndContinueExceptionHandler``, ``LogAndFailExceptionHandler``,
``LogAndContinueProcessingExceptionHandler``, ``LogAndFailProcessingExceptionHandler``,
``DefaultProductionExceptionHandler``). Kafka's defaults: fail, fail, fail.

Only record errors reach a handler: a serde failure, a record the producer or the broker
refuses for what it is (``MSG_SIZE_TOO_LARGE``, ``INVALID_RECORD``, an authorization failure,
an unknown topic). A retriable condition (a full producer queue, an unreachable broker, a moved
coordinator, a request that timed out, a re-bootstrap; :func:`is_retriable`) is back-pressure:
the stream thread waits and retries within ``task.timeout.ms`` and never asks a handler, so no
record is dropped for it. A record a handler lets go (CONTINUE) is logged with its topic,
partition and offset.

Dead letters (KIP-1034), one rule under both guarantees: **every failed record's dead letter is
written at least once, whatever the handler answers, and no transaction takes it back.** With
``errors.dead.letter.queue.topic.name`` set, every failed record (whatever the handler answers;
strom does not leave that to custom handlers as Kafka does) is sent to that topic with the
*source* record's key and value bytes and Kafka's headers ``__streams.errors.exception``,
``.message``, ``.stacktrace``, ``.topic``, ``.partition``, ``.offset``. Kafka 4.x sends it
through the task's producer, so under exactly_once_v2 a FAIL answer's dead letter is lost with
the transaction the failure aborts; strom sends it through a second, non-transactional
(idempotent) producer of the stream thread and flushes that before every commit and every abort.
A record processed again (after a failure, a rebalance or an abort) fails again and leaves
another dead letter: consumers of the DLQ see each failure at least once, read_committed or not.
A FAIL answer raises :class:`ErrorHandlerFailure`, which names topic, partition and offset and
stops the stream thread (the uncaught-exception handler decides what follows; by default, as
in Kafka, the client shuts down and the application goes to ERROR).
"""

from __future__ import annotations

import enum
import importlib
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from strom.streams.exceptions import StreamsError, TaskCorruptedError, TaskMigratedError

#: KIP-1034 header names
H_EXCEPTION = "__streams.errors.exception"
H_MESSAGE = "__streams.errors.message"
H_STACKTRACE = "__streams.errors.stacktrace"
H_TOPIC = "__streams.errors.topic"
H_PARTITION = "__streams.errors.partition"
H_OFFSET = "__streams.errors.offset"


# Conditions that pass (the broker comes back, the coordinator moves, the queue drains): Kafka's
# RetriableException family plus librdkafka's local states for the same situations. librdkafka
# marks some errors retriable itself (KafkaError.retriable()); delivery reports carry only a code.
RETRIABLE_CODES = frozenset({
    KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT,
    KafkaError._TIMED_OUT_QUEUE, KafkaError._QUEUE_FULL, KafkaError._RESOLVE, KafkaError._WAIT_COORD,
    KafkaError._PREV_IN_PROGRESS, KafkaError._IN_PROGRESS, KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT,
    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NETWORK_EXCEPTION, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND, KafkaError.KAFKA_STORAGE_ERROR,
    KafkaError.CONCURRENT_TRANSACTIONS, KafkaError.REBALANCE_IN_PROGRESS,
})


def is_retriable(err: KafkaError) -> bool:
    """True for a condition that passes (back-pressure), never for a record error."""
    return err.code() in RETRIABLE_CODES or (err.retriable() and not err.fatal())


def is_record_error(exc: BaseException) -> bool:
    """True if ``exc``, raised while handing one record to the producer, is about that record
    (a handler may decide about it); False for back-pressure, a fenced or failed producer and
    the runtime's own task-level failures, which the stream thread handles."""
    if isinstance(exc, TaskMigratedError | TaskCorruptedError | ErrorHandlerFailure | BufferError):
        return False
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err: KafkaError = exc.args[0]
        return not (err.fatal() or err.txn_requires_abort() or is_retriable(err)
                    or err.code() in (KafkaError._FATAL, KafkaError._FENCED, KafkaError._STATE))
    return True


class HandlerResponse(enum.Enum):
    CONTINUE = "CONTINUE"
    FAIL = "FAIL"


class ErrorKind(enum.Enum):
    DESERIALIZATION = "deserialization"
    PROCESSING = "processing"
    PRODUCTION = "production"


class ErrorHandlerFailure(StreamsError):
    """A handler answered FAIL: the stream thread stops; the message names the record."""


@dataclass(frozen=True)
class ErrorContext:
    """What a handler sees: the failure and the source record (raw bytes) it came from."""

    kind: ErrorKind
    exception: BaseException
    task_id: str
    topic: str | None
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: Any
    #: for production errors: the topic the output was meant for
    sink_topic: str | None = None

    def describe(self) -> str:
        where = f"topic={self.topic} partition={self.partition} offset={self.offset}"
        if self.sink_topic is not None:
            where += f" (producing to {self.sink_topic})"
        return f"{self.kind.value} error in task {self.task_id} on record {where}: {self.exception!r}"


Handler = Callable[[ErrorContext], HandlerResponse]


def log_and_continue(ctx: ErrorContext) -> HandlerResponse:
    return HandlerResponse.CONTINUE


def log_and_fail(ctx: ErrorContext) -> HandlerResponse:
    return HandlerResponse.FAIL


_KAFKA = "org.apache.kafka.streams.errors."
_BUILTINS: dict[str, Handler] = {
    "log-and-continue": log_and_continue, "log_and_continue": log_and_continue, "continue": log_and_continue,
    "log-and-fail": log_and_fail, "log_and_fail": log_and_fail, "fail": log_and_fail,
    _KAFKA + "LogAndContinueExceptionHandler": log_and_continue,
    _KAFKA + "LogAndFailExceptionHandler": log_and_fail,
    _KAFKA + "LogAndContinueProcessingExceptionHandler": log_and_continue,
    _KAFKA + "LogAndFailProcessingExceptionHandler": log_and_fail,
    _KAFKA + "DefaultProductionExceptionHandler": log_and_fail,
}


def resolve_handler(spec: Any, key: str) -> Handler:
    """A handler from a config value (see the module docstring); errors name ``key``."""
    if spec is None:
        return log_and_fail
    if isinstance(spec, str):
        builtin = _BUILTINS.get(spec) or _BUILTINS.get(spec.lower())
        if builtin is not None:
            return builtin
        module_name, sep, attr = spec.partition(":")
        if not sep:
            module_name, _, attr = spec.rpartition(".")
        if not module_name or not attr:
            raise StreamsError(f"{key}: unknown handler {spec!r}")
        try:
            spec = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise StreamsError(f"{key}: cannot load handler {spec!r}: {exc}") from exc
        if isinstance(spec, type):
            spec = spec()
    handle = getattr(spec, "handle", None)
    if callable(handle) and not isinstance(spec, type):
        return handle  # type: ignore[no-any-return,unused-ignore]
    if callable(spec):
        return spec  # type: ignore[no-any-return,unused-ignore]
    raise StreamsError(f"{key}: {spec!r} is not a handler (a callable or an object with handle())")


def dlq_headers(ctx: ErrorContext) -> list[tuple[str, bytes | None]]:
    """Kafka's KIP-1034 headers, appended to the source record's own headers."""
    exc = ctx.exception
    own = list(ctx.headers or [])
    cls = type(exc)
    return [
        *own,
        (H_EXCEPTION, f"{cls.__module__}.{cls.__qualname__}".encode()),
        (H_MESSAGE, str(exc).encode()),
        (H_STACKTRACE, "".join(traceback.format_exception(exc)).encode()),
        (H_TOPIC, (ctx.topic or "").encode()),
        (H_PARTITION, str(ctx.partition).encode()),
        (H_OFFSET, str(ctx.offset).encode()),
    ]


Emit = Callable[[str, bytes | None, bytes | None, int, Any], None]


class ErrorHandling:
    """The handlers of one application plus the DLQ; called by the task runtime on a failure.

    ``emit`` sends a DLQ record through the owning thread's producer. Counters say how many
    records each kind of error skipped (``skipped``) and how many went to the DLQ.
    """

    def __init__(self, deserialization: Any, processing: Any, production: Any, dlq_topic: str | None,
                 log: Callable[[str], None]) -> None:
        self.handlers: dict[ErrorKind, Handler] = {
            ErrorKind.DESERIALIZATION: resolve_handler(deserialization, "default.deserialization.exception.handler"),
            ErrorKind.PROCESSING: resolve_handler(processing, "processing.exception.handler"),
            ErrorKind.PRODUCTION: resolve_handler(production, "production.exception.handler"),
        }
        self.dlq_topic = dlq_topic
        self.log = log
        self.skipped: dict[ErrorKind, int] = dict.fromkeys(ErrorKind, 0)
        self.dead_lettered = 0

    def handle(self, ctx: ErrorContext, emit: Emit) -> None:
        """Returns if processing continues; raises :class:`ErrorHandlerFailure` otherwise."""
        try:
            response = self.handlers[ctx.kind](ctx)
        except Exception as exc:  # a broken handler must not hide the original error
            raise ErrorHandlerFailure(f"{ctx.describe()}; the {ctx.kind.value} exception handler itself "
                                      f"raised {exc!r}") from ctx.exception
        if self.dlq_topic is not None:
            emit(self.dlq_topic, ctx.key, ctx.value, ctx.timestamp, dlq_headers(ctx))
            self.dead_lettered += 1
        if response is HandlerResponse.CONTINUE:
            self.skipped[ctx.kind] += 1
            self.log(f"WARN {ctx.describe()}; skipping the record (handler answered CONTINUE)")
            return
        if response is not HandlerResponse.FAIL:
            raise ErrorHandlerFailure(f"{ctx.describe()}; the {ctx.kind.value} exception handler returned "
                                      f"{response!r}, not a HandlerResponse") from ctx.exception
        self.log(f"ERROR {ctx.describe()}; failing (handler answered FAIL)")
        raise ErrorHandlerFailure(
            f"{ctx.describe()}. The {ctx.kind.value} exception handler is set to fail on such errors; "
            f"set it to log-and-continue to skip bad records") from ctx.exception
