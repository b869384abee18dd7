"""Stateless KStream operations run in the TopologyTestDriver."""

from __future__ import annotations

from typing import Any

import pytest

from strom.streams import (
    Branched,
    Consumed,
    Named,
    Produced,
    Repartitioned,
    Serdes,
    SerializationError,
    StreamsBuilder,
    TopologyError,
    TopologyTestDriver,
)

S = Serdes.string()


def run(builder: StreamsBuilder, inputs: list[tuple[Any, Any]], out_topics: list[str], *,
        in_topic: str = "in", value_serde: Any = S, out_value_serde: Any = S,
        app: str = "app") -> dict[str, list[tuple[Any, Any]]]:
    config = {"application.id": app, "default.key.serde": S, "default.value.serde": S}
    with TopologyTestDriver(builder.build(), config) as d:
        inp = d.create_input_topic(in_topic, S, value_serde)
        for i, (k, v) in enumerate(inputs):
            inp.pipe_input(k, v, timestamp=1000 + i)
        return {t: d.create_output_topic(t, S, out_value_serde).read_key_values_to_list() for t in out_topics}


def source(b: StreamsBuilder, topic: str = "in") -> Any:
    return b.stream(topic, Consumed.with_(S, S))


def test_map_filter_chain() -> None:
    b = StreamsBuilder()
    (source(b).filter(lambda k, v: v != "drop").map(lambda k, v: (v, k)).filter_not(lambda k, v: k == "x")
     .map_values(str.upper).to("out"))
    got = run(b, [("a", "1"), ("b", "drop"), ("c", "x"), ("d", "2")], ["out"])
    assert got["out"] == [("1", "A"), ("2", "D")]


def test_map_values_with_key_and_select_key() -> None:
    b = StreamsBuilder()
    source(b).map_values(lambda k, v: f"{k}:{v}", with_key=True).select_key(lambda k, v: v[::-1]).to("out")
    assert run(b, [("k", "v")], ["out"])["out"] == [("v:k", "k:v")]


def test_flat_map_and_flat_map_values() -> None:
    b = StreamsBuilder()
    s = source(b)
    s.flat_map(lambda k, v: [(c, k) for c in v]).to("fm")
    s.flat_map_values(lambda v: v.split(",")).to("fmv")
    got = run(b, [("k", "ab"), ("z", "")], ["fm", "fmv"])
    assert got["fm"] == [("a", "k"), ("b", "k")]
    assert got["fmv"] == [("k", "ab"), ("z", "")]


def test_peek_foreach_merge() -> None:
    seen: list[tuple[str, str]] = []
    sunk: list[str] = []
    b = StreamsBuilder()
    a = source(b, "a").peek(lambda k, v: seen.append((k, v)))
    c = source(b, "c")
    merged = a.merge(c)
    merged.foreach(lambda k, v: sunk.append(v))
    merged.to("out")
    with TopologyTestDriver(b.build(), {"default.key.serde": S, "default.value.serde": S}) as d:
        d.create_input_topic("a", S, S).pipe_input("1", "x")
        d.create_input_topic("c", S, S).pipe_input("2", "y")
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [("1", "x"), ("2", "y")]
    assert seen == [("1", "x")]
    assert sunk == ["x", "y"]


def test_split_branches_first_match_and_default() -> None:
    b = StreamsBuilder()
    branches = (source(b).split(Named.as_("s-"))
                .branch(lambda k, v: v.startswith("a"), Branched.as_("A"))
                .branch(lambda k, v: "a" in v)
                .default_branch())
    assert sorted(branches) == ["s-0", "s-2", "s-A"]
    branches["s-A"].to("a")
    branches["s-2"].to("has-a")
    branches["s-0"].to("rest")
    got = run(b, [("1", "abc"), ("2", "bab"), ("3", "zzz"), ("4", "aaa")], ["a", "has-a", "rest"])
    assert got == {"a": [("1", "abc"), ("4", "aaa")], "has-a": [("2", "bab")], "rest": [("3", "zzz")]}


def test_split_with_chain_function_and_no_default() -> None:
    b = StreamsBuilder()
    result = (source(b).split()
              .branch(lambda k, v: v == "x", Branched.with_function(lambda s: s.map_values(lambda v: v * 2)))
              .branch(lambda k, v: v == "y", Branched.with_consumer(lambda s: s.to("y-out")))
              .no_default_branch())
    assert len(result) == 1
    (only,) = result.values()
    only.to("x-out")
    got = run(b, [("1", "x"), ("2", "y"), ("3", "z")], ["x-out", "y-out"])
    assert got == {"x-out": [("1", "xx")], "y-out": [("2", "y")]}


def test_output_timestamp_and_headers_propagate() -> None:
    b = StreamsBuilder()
    source(b).map_values(str.upper).to("out", Produced.with_(S, S))
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, S).pipe_input("k", "v", timestamp=42, headers=[("h", b"1")])
        (rec,) = d.create_output_topic("out", S, S).read_records_to_list()
        assert (rec.key, rec.value, rec.timestamp, list(rec.headers or [])) == ("k", "V", 42, [("h", b"1")])


def test_produced_serdes_are_used_on_the_wire() -> None:
    b = StreamsBuilder()
    source(b).map_values(len).to("out", Produced.with_(S, Serdes.long()))
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, S).pipe_input("k", "abc")
        # read raw bytes: the 8-byte big-endian long of Kafka's LongSerializer
        assert d.create_output_topic("out", S, None).read_key_value() == ("k", (3).to_bytes(8, "big"))


def test_missing_serde_on_user_topic_is_a_clear_error() -> None:
    b = StreamsBuilder()
    source(b).map_values(len).to("out")  # map_values lost the value serde; no default configured
    with TopologyTestDriver(b.build()) as d, pytest.raises(SerializationError, match="out"):
        d.create_input_topic("in", S, S).pipe_input("k", "abc")


def test_default_serdes_from_config() -> None:
    b = StreamsBuilder()
    b.stream("in").map_values(lambda v: v + "!").to("out")
    with TopologyTestDriver(b.build(), {"default.key.serde": S, "default.value.serde": S}) as d:
        d.create_input_topic("in", S, S).pipe_input("k", "v")
        assert d.create_output_topic("out", S, S).read_key_value() == ("k", "v!")


def test_repartition_loops_back_and_is_not_visible_as_output() -> None:
    b = StreamsBuilder()
    source(b).select_key(lambda k, v: v).repartition(Repartitioned.as_("rekey").with_key_serde(S)).to("out")
    topo = b.build()
    assert "rekey-repartition" in topo.internal_topics
    assert len(topo.subtopologies()) == 2
    with TopologyTestDriver(topo, {"application.id": "myapp"}) as d:
        d.create_input_topic("in", S, S).pipe_input("k", "v")
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [("v", "v")]
        assert d.create_output_topic("myapp-rekey-repartition", S, S).is_empty()
        assert "myapp-rekey-repartition" in d.runtime.sources


def test_output_read_on_empty_topic_raises() -> None:
    b = StreamsBuilder()
    source(b).to("out")
    with TopologyTestDriver(b.build()) as d:
        out = d.create_output_topic("out", S, S)
        assert out.is_empty()
        with pytest.raises(Exception, match="empty"):
            out.read_key_value()


def test_unknown_input_topic_rejected() -> None:
    b = StreamsBuilder()
    source(b).to("out")
    with TopologyTestDriver(b.build()) as d, pytest.raises(TopologyError, match="nope"):
        d.create_input_topic("nope", S, S)


def test_corrupt_input_bytes_raise_serialization_error() -> None:
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, Serdes.long())).to("out", Produced.with_(S, Serdes.long()))
    with TopologyTestDriver(b.build()) as d:
        raw = d.create_input_topic("in", S, None)  # bytes pass through the test topic
        with pytest.raises(SerializationError, match="in"):
            raw.pipe_input("k", b"\x00\x01\x02")  # 3 bytes are not a long
