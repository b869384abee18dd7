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

With ``errors.dead.letter.queue.topic.name`` set, every failed record (whatever the handler
answers; strom does not leave that to custom handlers as Kafka does) is sent to that topic with
the *source* record's key and value bytes and Kafka's headers ``__streams.errors.exception``,
``.message``, ``.stacktrace``, ``.topic``, ``.partition``, ``.offset``. The DLQ record goes
through the task's producer, so under exactly_once_v2 it commits with the transaction.
A FAIL answer raises :class:`ErrorHandlerFailure`, which names topic, partition and offset and
kills the stream thread (the application goes to ERROR).
"""

from __future__ import annotations

import enum
import importlib
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from strom.streams.exceptions import StreamsError

#: KIP-1034 header names
H_EXCEPTION = "__streams.errors.exception"
H_MESSAGE = "__streams.errors.message"
H_STACKTRACE = "__streams.errors.stacktrace"
H_TOPIC = "__streams.errors.topic"
H_PARTITION = "__streams.errors.partition"
H_OFFSET = "__streams.errors.offset"


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
