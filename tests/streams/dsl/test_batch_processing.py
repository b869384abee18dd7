"""Batch-at-a-time processing (issue 26): ``TopologyRuntime.process_batch`` gives exactly what
``process_input`` record by record gives: the same outputs in the same order with the same
timestamps and headers, the same store contents, punctuations between the same records, the
same metadata and stream time seen by per-record processors, and the same records handed to
the exception handlers (with their own offsets and raw bytes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from strom.streams import (
    Consumed,
    Grouped,
    Processor,
    ProcessorContext,
    Produced,
    PunctuationType,
    Record,
    Serdes,
    StreamsBuilder,
    TimeWindows,
    Topology,
)
from strom.streams.topology.errors import ErrorContext, ErrorHandlerFailure, ErrorHandling, HandlerResponse
from strom.streams.topology.runtime import TopologyRuntime

Out = tuple[str, bytes | None, bytes | None, int, Any]
Input = tuple[bytes | None, bytes | None, int, Any]


class _Run:
    """One runtime over a topology, fed record by record or in batches of ``chunk``."""

    def __init__(self, topology: Topology, batched: bool, chunk: int, *, cache: int = 0,
                 handler: Callable[[ErrorContext], HandlerResponse] | None = None) -> None:
        self.out: list[Out] = []
        self.seen: list[tuple[str, str | None, int, bytes | None, str | None]] = []
        errors = None
        if handler is not None:
            def judge(ctx: ErrorContext) -> HandlerResponse:
                self.seen.append((ctx.kind.value, ctx.topic, ctx.offset, ctx.value, ctx.sink_topic))
                return handler(ctx)
            errors = ErrorHandling(judge, judge, judge, None, lambda _msg: None)
        self.runtime = TopologyRuntime(topology, "app", self._emit, errors=errors, cache_max_entries=cache)
        self.batched = batched
        self.chunk = chunk

    def _emit(self, topic: str, key: bytes | None, value: bytes | None, ts: int, headers: Any) -> None:
        self.out.append((topic, key, value, ts, list(headers) if headers else None))

    def feed(self, topic: str, records: list[Input]) -> None:
        rt = self.runtime
        if not self.batched:
            for offset, (k, v, ts, h) in enumerate(records):
                rt.process_input(topic, 0, offset, k, v, ts, h)
            return
        for start in range(0, len(records), self.chunk):
            part = records[start:start + self.chunk]
            rt.process_batch(topic, 0, list(range(start, start + len(part))), [r[0] for r in part],
                             [r[1] for r in part], [r[2] for r in part], [r[3] for r in part])

    def run(self, topic: str, records: list[Input]) -> list[Out]:
        """Feed the input, then what went to internal (repartition) topics, until none is left;
        the outputs to every other topic, in order."""
        self.feed(topic, records)
        internal = set(self.runtime.sources) - {topic}
        done = 0
        while True:
            pending = [o for o in self.out[done:] if o[0] in internal]
            done = len(self.out)
            if not pending:
                break
            for t in sorted({o[0] for o in pending}):
                self.feed(t, [(o[1], o[2], o[3], o[4]) for o in pending if o[0] == t])
        self.runtime.flush_caches()
        return [o for o in self.out if o[0] not in internal]


def _lines(n: int) -> list[Input]:
    words = ["kafka", "streams", "strom", "python", "batch", "Record", "x"]
    out: list[Input] = []
    for i in range(n):
        line = " ".join(words[(i * j) % len(words)] for j in range(1 + i % 5))
        key = None if i % 7 == 0 else f"k{i % 3}".encode()
        headers = [("h", str(i).encode())] if i % 4 == 0 else None
        ts = 1000 + (i * 37) % 50 + i  # out of order now and then
        out.append((key, line.encode(), ts, headers))
    return out


def _wordcount() -> Topology:
    builder = StreamsBuilder()
    (builder.stream("lines", Consumed.with_(Serdes.string(), Serdes.string()))
        .flat_map_values(lambda line: line.lower().split())
        .group_by(lambda key, word: word)
        .count(materialized="counts")
        .to_stream()
        .to("out", Produced.with_(Serdes.string(), Serdes.long())))
    return builder.build()


def _stateless() -> Topology:
    """Every stateless operator, a fan-out into two branches and a merge back."""
    builder = StreamsBuilder()
    s = (builder.stream("lines", Consumed.with_(Serdes.string(), Serdes.string()))
         .filter(lambda k, v: "x" not in v)
         .map_values(str.upper)
         .flat_map(lambda k, v: [(w, len(w)) for w in v.split()])
         .peek(lambda k, v: None)
         .map(lambda k, v: (k.lower(), v * 2))
         .filter_not(lambda k, v: v > 12)
         .select_key(lambda k, v: f"{k}:{v}"))
    long_ones = s.filter(lambda k, v: v >= 10)
    short_ones = s.filter(lambda k, v: v < 10).map_values(lambda k, v: v + 1000)
    long_ones.merge(short_ones).to("out", Produced.with_(Serdes.string(), Serdes.long()))
    s.flat_map_values(lambda v: [v, v]).to("twice", Produced.with_(Serdes.string(), Serdes.long()))
    return builder.build()


class _Ticker(Processor[Any, Any]):
    """Logs what a per-record processor sees; punctuates every 25 ms of stream time."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        context.schedule(25, PunctuationType.STREAM_TIME, self._tick)

    def _tick(self, ts: int) -> None:
        self.context.forward(Record("tick", str(ts), ts))

    def process(self, record: Record[Any, Any]) -> None:
        md = self.context.record_metadata()
        assert md is not None
        self.context.forward(record.with_value(f"{record.value}@{md.offset}/{self.context.current_stream_time_ms()}"))


def _punctuated() -> Topology:
    builder = StreamsBuilder()
    (builder.stream("lines", Consumed.with_(Serdes.string(), Serdes.string()))
        .map_values(str.title)
        .process(_Ticker)
        .to("out", Produced.with_(Serdes.string(), Serdes.string())))
    return builder.build()


def _windowed() -> Topology:
    builder = StreamsBuilder()
    (builder.stream("lines", Consumed.with_(Serdes.string(), Serdes.string()))
        .flat_map_values(str.split)
        .select_key(lambda k, w: w)
        .group_by_key(Grouped.with_(Serdes.string(), Serdes.string()))
        .windowed_by(TimeWindows.of_size_with_no_grace(20))
        .count()
        .to_stream()
        .map(lambda wk, n: (f"{wk.key}@{wk.window.start}", n))
        .to("out", Produced.with_(Serdes.string(), Serdes.long())))
    return builder.build()


TOPOLOGIES = {"wordcount": _wordcount, "stateless": _stateless, "punctuated": _punctuated, "windowed": _windowed}


@pytest.mark.parametrize("chunk", [1, 7, 500])
@pytest.mark.parametrize("cache", [0, 3, 1000])
@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_batches_give_what_records_give(name: str, cache: int, chunk: int) -> None:
    records = _lines(300)
    one = _Run(TOPOLOGIES[name](), False, 1, cache=cache)
    many = _Run(TOPOLOGIES[name](), True, chunk, cache=cache)
    expected = one.run("lines", records)
    assert expected  # the topology produced something to compare
    assert many.run("lines", records) == expected
    assert one.runtime.stream_time == many.runtime.stream_time
    for store, raw in one.runtime.raw_stores.items():
        assert list(raw.all()) == list(many.runtime.raw_stores[store].all())


def _failing() -> Topology:
    """A mapper that raises on some lines, a value that cannot be produced as a long."""
    builder = StreamsBuilder()

    def words(line: str) -> list[str]:
        if line.startswith("kafka python"):
            raise ValueError(f"no python: {line}")
        return line.split()

    (builder.stream("lines", Consumed.with_(Serdes.string(), Serdes.string()))
        .flat_map_values(words)
        .map_values(lambda w: 2**70 if w == "batch" else len(w))
        .to("out", Produced.with_(Serdes.string(), Serdes.long())))
    return builder.build()


@pytest.mark.parametrize("chunk", [1, 7, 500])
def test_handlers_see_the_same_failed_records(chunk: int) -> None:
    records = _lines(200)
    records[5] = (b"k", b"\xff\xfe not utf-8", 2000, None)  # a value the string serde refuses
    one = _Run(_failing(), False, 1, handler=lambda ctx: HandlerResponse.CONTINUE)
    many = _Run(_failing(), True, chunk, handler=lambda ctx: HandlerResponse.CONTINUE)
    expected = one.run("lines", records)
    assert many.run("lines", records) == expected
    kinds = {s[0] for s in one.seen}
    assert kinds == {"deserialization", "processing", "production"}  # each handler was asked
    assert many.seen == one.seen


def test_a_failing_handler_stops_at_the_same_record() -> None:
    records = _lines(200)
    outs = []
    for batched in (False, True):
        run = _Run(_failing(), batched, 64, handler=lambda ctx: HandlerResponse.FAIL)
        with pytest.raises(ErrorHandlerFailure, match="offset=2 "):
            run.run("lines", records)
        outs.append((run.out, run.seen))
    assert outs[0] == outs[1]
    assert len(outs[0][1]) == 1  # one handler call, then the failure
