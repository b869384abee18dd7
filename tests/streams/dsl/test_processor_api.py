"""The Processor API: stores, metadata, punctuation, hand-built topologies."""

from __future__ import annotations

from typing import Any

import pytest

from strom.streams import (
    Consumed,
    Processor,
    Produced,
    PunctuationType,
    Record,
    Serdes,
    StoreSpec,
    StreamsBuilder,
    Topology,
    TopologyError,
    TopologyTestDriver,
)

S = Serdes.string()
L = Serdes.long()


class SumPerKey(Processor[str, str]):
    """Keeps a running sum per key in a store; flushes every key on punctuation."""

    def __init__(self, kind: PunctuationType, interval: int) -> None:
        self.kind = kind
        self.interval = interval
        self.punctuations: list[int] = []

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("sums")
        context.schedule(self.interval, self.kind, self.flush)

    def process(self, record: Record[str, str]) -> None:
        md = self.context.record_metadata()
        assert md is not None
        total = (self.store.get(record.key) or 0) + int(record.value)
        self.store.put(record.key, total)
        self.context.forward(record.with_value(f"{md.topic}/{md.partition}/{md.offset}"), "meta")

    def flush(self, ts: int) -> None:
        self.punctuations.append(ts)
        assert self.context.record_metadata() is None or self.kind is PunctuationType.STREAM_TIME
        for k, v in self.store.all():
            self.context.forward(Record(k, str(v), ts), "sums-out")


def build(kind: PunctuationType, interval: int, holder: list[SumPerKey]) -> Topology:
    def supplier() -> SumPerKey:
        p = SumPerKey(kind, interval)
        holder.append(p)
        return p

    t = Topology()
    t.add_source("src", "in", key_serde=S, value_serde=S)
    t.add_processor("sum", supplier, "src")
    t.add_state_store(StoreSpec("sums", key_serde=S, value_serde=L, store_type="in_memory"), "sum")
    t.add_processor("meta", lambda: _Fwd(), "sum")
    t.add_processor("sums-out", lambda: _Fwd(), "sum")
    t.add_sink("meta-sink", "meta", "meta", key_serde=S, value_serde=S)
    t.add_sink("sums-sink", "sums", "sums-out", key_serde=S, value_serde=S)
    return t


class _Fwd(Processor[Any, Any]):
    def process(self, record: Record[Any, Any]) -> None:
        self.context.forward(record)


def test_named_forward_metadata_and_store() -> None:
    procs: list[SumPerKey] = []
    with TopologyTestDriver(build(PunctuationType.WALL_CLOCK_TIME, 1000, procs), initial_wall_clock_ms=0) as d:
        inp = d.create_input_topic("in", S, S)
        inp.pipe_input("a", "5", 10)
        inp.pipe_input("a", "7", 11)
        inp.pipe_input("b", "1", 12)
        assert d.create_output_topic("meta", S, S).read_values_to_list() == ["in/0/0", "in/0/1", "in/0/2"]
        assert d.create_output_topic("sums", S, S).is_empty()  # sums only on punctuation
        store = d.get_key_value_store("sums")
        assert store.get("a") == 12 and store.get("b") == 1
        assert list(store.all()) == [("a", 12), ("b", 1)]


def test_wall_clock_punctuation() -> None:
    procs: list[SumPerKey] = []
    with TopologyTestDriver(build(PunctuationType.WALL_CLOCK_TIME, 1000, procs), initial_wall_clock_ms=0) as d:
        d.create_input_topic("in", S, S).pipe_input("a", "3", 5)
        out = d.create_output_topic("sums", S, S)
        d.advance_wall_clock_time(999)
        assert out.is_empty()
        d.advance_wall_clock_time(1)
        assert out.read_records_to_list()[0].timestamp == 1000
        d.advance_wall_clock_time(2500)  # missed punctuations are not replayed
        assert procs[0].punctuations == [1000, 3500]
        assert out.read_key_values_to_list() == [("a", "3")]


def test_stream_time_punctuation() -> None:
    procs: list[SumPerKey] = []
    with TopologyTestDriver(build(PunctuationType.STREAM_TIME, 100, procs)) as d:
        inp = d.create_input_topic("in", S, S)
        inp.pipe_input("a", "1", 50)     # first record punctuates (schedule starts at 0)
        inp.pipe_input("a", "1", 120)    # >= 100: punctuates, next due at 200
        inp.pipe_input("a", "1", 30)     # out of order: stream time stays 120
        inp.pipe_input("a", "1", 160)    # < 200: no
        d.advance_wall_clock_time(10_000)  # wall clock does not drive stream-time schedules
        inp.pipe_input("a", "1", 450)    # one punctuation, not three; next due at 500
        inp.pipe_input("a", "1", 499)
        assert procs[0].punctuations == [50, 120, 450]


def test_unconnected_store_access_is_rejected() -> None:
    class Sneaky(Processor[Any, Any]):
        def init(self, context: Any) -> None:
            context.get_state_store("sums")

        def process(self, record: Record[Any, Any]) -> None:
            pass

    t = Topology()
    t.add_source("src", "in")
    t.add_processor("owner", _Fwd, "src")
    t.add_processor("sneaky", Sneaky, "src")
    t.add_state_store(StoreSpec("sums", store_type="in_memory"), "owner")
    with pytest.raises(TopologyError, match="no access to state store 'sums'"):
        TopologyTestDriver(t)


def test_topology_construction_errors() -> None:
    t = Topology()
    t.add_source("src", "in")
    with pytest.raises(TopologyError, match="already added"):
        t.add_source("src", "other")
    with pytest.raises(TopologyError, match="already read"):
        t.add_source("src2", "in")
    with pytest.raises(TopologyError, match="not added yet"):
        t.add_processor("p", _Fwd, "missing")
    t.add_sink("sink", "out", "src")
    with pytest.raises(TopologyError, match="cannot be a parent"):
        t.add_processor("p", _Fwd, "sink")
    with pytest.raises(TopologyError, match="not added yet"):
        t.connect_processor_and_state_stores("sink", store_names=["nope"])


def test_dsl_process_with_store_and_rocksdb() -> None:
    """KStream.process with a store added to the builder's topology; RocksDB by default."""
    class Dedupe(Processor[str, str]):
        def init(self, context: Any) -> None:
            super().init(context)
            self.seen = context.get_state_store("seen")

        def process(self, record: Record[str, str]) -> None:
            if self.seen.get(record.value) is None:
                self.seen.put(record.value, 1)
                self.context.forward(record)

    b = StreamsBuilder()
    b.topology.add_source("unused-src", "unused")  # a store must attach to a processor at add time
    b.topology.add_processor("unused-proc", _Fwd, "unused-src")
    b.topology.add_state_store(StoreSpec("seen", key_serde=S, value_serde=L), "unused-proc")
    b.stream("in", Consumed.with_(S, S)).process(Dedupe, "seen").to("out", Produced.with_(S, S))
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("in", S, S)
        for v in ["x", "y", "x", "z", "y"]:
            inp.pipe_input("k", v)
        assert d.create_output_topic("out", S, S).read_values_to_list() == ["x", "y", "z"]
        # a task's layers: the change-logging store over RocksDB
        logged = d.runtime.raw_stores["seen"]
        assert type(logged).__name__ == "ChangeLoggingKeyValueStore"
        assert type(logged.inner).__name__ == "RocksDBKeyValueStore"
