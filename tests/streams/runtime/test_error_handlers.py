"""Deserialization, processing and production exception handlers and the dead-letter queue,
end to end on the bundled broker (poison records among good ones; counts exact)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from wordcount_app import create_topics, read_records

from strom.core.testing import BrokerProcess, wait_for
from strom.streams import Consumed, KafkaStreams, Produced, Serdes, StreamsBuilder, Topology
from strom.streams.runtime import State, StreamThreadExceptionResponse
from strom.streams.topology.errors import ErrorContext, ErrorKind, HandlerResponse, resolve_handler

LONG = Serdes.long()


def _build(src: str, out: str) -> Topology:
    b = StreamsBuilder()
    # 1000 // v: a zero value is a processing error; "big" values make an oversize output
    (b.stream(src, Consumed.with_(Serdes.string(), Serdes.long()))
     .map_values(lambda v: "x" * 5000 if v == 999 else str(1000 // v))
     .to(out, Produced.with_(Serdes.string(), Serdes.string())))
    return b.build()


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i, v in enumerate(values):
        p.produce(topic, v, f"k{i}".encode(), partition=0, headers=[("origin", b"test")])
    assert p.flush(30) == 0


def _read(bootstrap: str, topic: str, until: Callable[[list[Any]], bool], timeout: float = 45.0) -> list[Any]:
    return read_records(bootstrap, topic, until, timeout)


def _read_to_end(bootstrap: str, topic: str, timeout: float = 30.0) -> list[Any]:
    """Every committed record of ``topic`` (all partitions, up to their current end)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    parts = c.list_topics(topic, timeout=10).topics[topic].partitions
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
    out: list[Any] = []
    pending = set(parts)
    deadline = time.monotonic() + timeout
    try:
        while pending:
            assert time.monotonic() < deadline, f"{topic} not read to its end within {timeout}s"
            for m in c.consume(500, 0.3):
                err = m.error()
                if err is None:
                    out.append(m)
                elif err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(m.partition())
    finally:
        c.close()
    return out


def _setup(broker: BrokerProcess) -> tuple[str, str, str, str]:
    tag = uuid.uuid4().hex[:8]
    src, out, dlq = f"in-{tag}", f"out-{tag}", f"dlq-{tag}"
    create_topics(broker.bootstrap, (src, 1), (out, 1), (dlq, 1))
    return src, out, dlq, f"eh-{tag}"


def _long(v: int) -> bytes:
    raw = LONG.serialize("", v)
    assert raw is not None
    return raw


def _values(n: int, poison: dict[int, bytes]) -> list[bytes]:
    return [poison.get(i, _long(i + 1)) for i in range(n)]


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_log_and_continue_with_dead_letters(broker: BrokerProcess, tmp_path: Path, guarantee: str) -> None:
    """A record that cannot be deserialized and one whose processing raises are skipped, go to
    the DLQ with Kafka's headers, and every other record's output is there exactly once."""
    src, out, dlq, app_id = _setup(broker)
    n = 60
    values = _values(n, {10: b"bad", 30: _long(0)})
    _produce(broker.bootstrap, src, values)
    app = KafkaStreams(_build(src, out), {
        "application.id": app_id, "bootstrap.servers": broker.bootstrap, "processing.guarantee": guarantee,
        "commit.interval.ms": 100, "state.dir": str(tmp_path),
        "default.deserialization.exception.handler": "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler",
        "processing.exception.handler": "log-and-continue",
        "errors.dead.letter.queue.topic.name": dlq})
    app.start()
    try:
        _read(broker.bootstrap, out, lambda r: len(r) >= n - 2)
        dead = _read(broker.bootstrap, dlq, lambda r: len(r) >= 2)
        assert app.state() is State.RUNNING, app.errors()
    finally:
        assert app.close(30)
    # the application is closed: whatever it ever wrote is on the topic now
    got = _read_to_end(broker.bootstrap, out)
    keys = [m.key().decode() for m in got]
    assert sorted(keys) == sorted(f"k{i}" for i in range(n) if i not in (10, 30))
    assert {m.key().decode(): m.value().decode() for m in got}["k4"] == str(1000 // 5)
    assert app.error_handling.skipped[ErrorKind.DESERIALIZATION] == 1
    assert app.error_handling.skipped[ErrorKind.PROCESSING] == 1
    assert len(dead) == 2
    by_key = {m.key(): m for m in dead}
    bad, zero = by_key[b"k10"], by_key[b"k30"]
    assert bad.value() == b"bad" and zero.value() == LONG.serialize("", 0)  # the raw source record
    for m, offset, exc in ((bad, 10, "SerializationError"), (zero, 30, "ZeroDivisionError")):
        h = dict(m.headers())
        assert h["origin"] == b"test"  # the source record's own headers are kept
        assert h["__streams.errors.topic"] == src.encode()
        assert h["__streams.errors.partition"] == b"0"
        assert h["__streams.errors.offset"] == str(offset).encode()
        assert h["__streams.errors.exception"].decode().endswith(exc)
        assert h["__streams.errors.message"]
        assert b"Traceback" in h["__streams.errors.stacktrace"]


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_dead_letter_of_a_failing_record_is_kept(broker: BrokerProcess, tmp_path: Path, guarantee: str) -> None:
    """The handler answers FAIL and the thread stops; the record's dead letter is on the DLQ
    (read_committed) under both guarantees: the aborted transaction does not take it along
    (issue 28: under exactly_once_v2 it was written inside the transaction the failure aborts)."""
    src, out, dlq, app_id = _setup(broker)
    _produce(broker.bootstrap, src, _values(10, {4: _long(0)}))
    app = KafkaStreams(_build(src, out), {
        "application.id": app_id, "bootstrap.servers": broker.bootstrap, "processing.guarantee": guarantee,
        "commit.interval.ms": 100, "state.dir": str(tmp_path), "errors.dead.letter.queue.topic.name": dlq},
        log=lambda line: None)
    app.start()
    try:
        wait_for(lambda: app.state() is State.ERROR, 30, "the application to fail on the poison record")
    finally:
        app.close(30)
    dead = _read_to_end(broker.bootstrap, dlq)
    assert [dict(m.headers())["__streams.errors.offset"] for m in dead] == [b"4"]
    if guarantee == "exactly_once_v2":
        # the output of the records before it was in the aborted transaction too
        assert _read_to_end(broker.bootstrap, out) == []


def test_replace_thread_goes_on_after_a_failure(broker: BrokerProcess, tmp_path: Path) -> None:
    """The uncaught-exception handler answers REPLACE_THREAD: a new stream thread takes over
    from the last commit and the application stays up (Kafka's default would shut it down)."""
    src, out, _, app_id = _setup(broker)
    n = 20
    _produce(broker.bootstrap, src, _values(n, {}))
    failures: list[BaseException] = []

    def fail_once(v: int) -> str:
        if v == 8 and not failures:
            raise RuntimeError("boom")  # the first sight of the record only
        return str(1000 // v)

    b = StreamsBuilder()
    (b.stream(src, Consumed.with_(Serdes.string(), Serdes.long()))
     .map_values(fail_once)
     .to(out, Produced.with_(Serdes.string(), Serdes.string())))

    def handler(exc: BaseException) -> StreamThreadExceptionResponse:
        failures.append(exc)
        return StreamThreadExceptionResponse.REPLACE_THREAD

    app = KafkaStreams(b.build(), {"application.id": app_id, "bootstrap.servers": broker.bootstrap,
                                   "commit.interval.ms": 100, "state.dir": str(tmp_path)},
                       log=lambda line: None)
    app.set_uncaught_exception_handler(handler)
    app.start()
    try:
        got = _read(broker.bootstrap, out, lambda r: {m.key() for m in r} >= {f"k{i}".encode() for i in range(n)})
        assert {m.key() for m in got} == {f"k{i}".encode() for i in range(n)}
        assert len(failures) == 1 and "boom" in repr(failures[0].__cause__ or failures[0])
        assert app.threads_replaced == 1
        wait_for(lambda: app.state() is State.RUNNING, 30, "the replacement thread to run")
    finally:
        assert app.close(30)
    assert app.state() is State.NOT_RUNNING


def test_log_and_fail_names_the_record(broker: BrokerProcess, tmp_path: Path) -> None:
    src, out, _, app_id = _setup(broker)
    _produce(broker.bootstrap, src, _values(20, {7: b"\x01\x02"}))
    logs: list[str] = []
    app = KafkaStreams(_build(src, out), {
        "application.id": app_id, "bootstrap.servers": broker.bootstrap, "commit.interval.ms": 100,
        "state.dir": str(tmp_path),
        "default.deserialization.exception.handler": "org.apache.kafka.streams.errors.LogAndFailExceptionHandler"},
        log=logs.append)
    app.start()
    try:
        wait_for(lambda: app.state() is State.ERROR, 30, "the application to fail")
        err = str(app.errors()[0])
        assert f"topic={src} partition=0 offset=7" in err, err
        assert "deserialization" in err
    finally:
        app.close(30)
    # at_least_once: the records before the poison one were processed and their output sent
    got = _read(broker.bootstrap, out, lambda r: len(r) >= 7, timeout=10)
    assert sorted(m.key() for m in got) == sorted(f"k{i}".encode() for i in range(7))


def test_processing_error_fails_by_default(broker: BrokerProcess, tmp_path: Path) -> None:
    src, out, _, app_id = _setup(broker)
    _produce(broker.bootstrap, src, _values(10, {4: _long(0)}))
    app = KafkaStreams(_build(src, out), {
        "application.id": app_id, "bootstrap.servers": broker.bootstrap, "state.dir": str(tmp_path)},
        log=lambda line: None)
    app.start()
    try:
        wait_for(lambda: app.state() is State.ERROR, 30, "the application to fail")
        err = app.errors()[0]
        assert f"topic={src} partition=0 offset=4" in str(err)
        assert isinstance(err.__cause__, ZeroDivisionError)
    finally:
        app.close(30)


def test_production_handler_skips_oversize_output(broker: BrokerProcess, tmp_path: Path) -> None:
    """The producer refuses an output over message.max.bytes; the production handler answers
    CONTINUE, the record goes to the DLQ, the rest is produced."""
    src, out, dlq, app_id = _setup(broker)
    n = 30
    _produce(broker.bootstrap, src, _values(n, {12: _long(999)}))
    seen: list[ErrorContext] = []

    def handler(ctx: ErrorContext) -> HandlerResponse:
        seen.append(ctx)
        return HandlerResponse.CONTINUE

    app = KafkaStreams(_build(src, out), {
        "application.id": app_id, "bootstrap.servers": broker.bootstrap, "commit.interval.ms": 100,
        "state.dir": str(tmp_path), "producer.message.max.bytes": 2000,
        "production.exception.handler": handler, "errors.dead.letter.queue.topic.name": dlq},
        log=lambda line: None)
    app.start()
    try:
        got = _read(broker.bootstrap, out, lambda r: len(r) >= n - 1)
        dead = _read(broker.bootstrap, dlq, lambda r: len(r) >= 1)
        assert app.state() is State.RUNNING, app.errors()
    finally:
        assert app.close(30)
    assert sorted(m.key() for m in got) == sorted(f"k{i}".encode() for i in range(n) if i != 12)
    assert len(seen) == 1 and seen[0].kind is ErrorKind.PRODUCTION and seen[0].offset == 12
    assert seen[0].sink_topic == out
    assert [m.key() for m in dead] == [b"k12"]
    assert dict(dead[0].headers())["__streams.errors.offset"] == b"12"


def test_resolve_handler_names() -> None:
    ctx = ErrorContext(ErrorKind.PROCESSING, ValueError("x"), "0_0", "t", 0, 1, None, None, 0, None)
    k = "org.apache.kafka.streams.errors."
    for name, want in ((k + "LogAndContinueExceptionHandler", HandlerResponse.CONTINUE),
                       (k + "LogAndFailExceptionHandler", HandlerResponse.FAIL),
                       (k + "LogAndContinueProcessingExceptionHandler", HandlerResponse.CONTINUE),
                       (k + "DefaultProductionExceptionHandler", HandlerResponse.FAIL),
                       ("log-and-continue", HandlerResponse.CONTINUE),
                       ("strom.streams.topology.errors.log_and_continue", HandlerResponse.CONTINUE),
                       ("strom.streams.topology.errors:log_and_fail", HandlerResponse.FAIL)):
        assert resolve_handler(name, "h")(ctx) is want, name
    with pytest.raises(Exception, match="h: cannot load handler"):
        resolve_handler("no.such.module.handler", "h")
    with pytest.raises(Exception, match="unknown handler"):
        resolve_handler("nonsense", "h")
