"""Grouped aggregations, KTables and global tables in the TopologyTestDriver."""

from __future__ import annotations

from typing import Any

import pytest

from strom.streams import (
    Consumed,
    Grouped,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    TopologyTestDriver,
)

S = Serdes.string()
L = Serdes.long()


def test_word_count_from_the_issue_literally() -> None:
    builder = StreamsBuilder()
    (builder.stream("text", Consumed.with_(Serdes.string(), Serdes.string()))
        .flat_map_values(lambda line: line.lower().split())
        .group_by(lambda key, word: word)
        .count(materialized="word-counts")
        .to_stream()
        .to("counts", Produced.with_(Serdes.string(), Serdes.long())))
    topology = builder.build()
    assert "wordcount" not in topology.internal_topics
    assert topology.internal_topics == {"word-counts-repartition"}
    with TopologyTestDriver(topology, {"application.id": "wordcount"}) as driver:
        text = driver.create_input_topic("text", Serdes.string(), Serdes.string())
        counts = driver.create_output_topic("counts", Serdes.string(), Serdes.long())
        text.pipe_input(None, "The quick brown fox", 1)
        text.pipe_input("k", "the lazy DOG and the fox", 2)
        assert counts.read_key_values_to_list() == [
            ("the", 1), ("quick", 1), ("brown", 1), ("fox", 1),
            ("the", 2), ("lazy", 1), ("dog", 1), ("and", 1), ("the", 3), ("fox", 2)]
        store = driver.get_key_value_store("word-counts")
        assert dict(store.all()) == {"the": 3, "quick": 1, "brown": 1, "fox": 2, "lazy": 1, "dog": 1, "and": 1}
        # the repartition topic exists under <application.id>-<name>-repartition
        assert "wordcount-word-counts-repartition" in driver.runtime.sources


def test_word_count_describe_matches_kafka() -> None:
    b = StreamsBuilder()
    (b.stream("text", Consumed.with_(S, S)).flat_map_values(str.split).group_by(lambda k, w: w)
     .count(materialized="counts-store").to_stream().to("out", Produced.with_(S, L)))
    text = str(b.build().describe())
    assert "Sink: KSTREAM-SINK-0000000004 (topic: counts-store-repartition)" in text
    assert "Processor: KSTREAM-AGGREGATE-0000000003 (stores: [counts-store])" in text
    assert "   Sub-topology: 1\n    Source: KSTREAM-SOURCE-0000000006 (topics: [counts-store-repartition])" in text


def test_generated_repartition_name_and_grouped_name() -> None:
    b = StreamsBuilder()
    s = b.stream("in", Consumed.with_(S, S))
    s.group_by(lambda k, v: v).count()
    s.group_by(lambda k, v: k, Grouped.as_("by-key")).count()
    topics = b.build().internal_topics
    assert topics == {"KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition", "by-key-repartition"}


def test_group_by_key_needs_no_repartition_unless_key_changed() -> None:
    b = StreamsBuilder()
    s = b.stream("in", Consumed.with_(S, S))
    s.group_by_key().count(materialized="c1")
    s.select_key(lambda k, v: v).group_by_key(Grouped.with_(S, S)).count(materialized="c2")
    topo = b.build()
    assert topo.internal_topics == {"c2-repartition"}
    with TopologyTestDriver(topo) as d:
        inp = d.create_input_topic("in", S, S)
        for k, v in [("a", "x"), ("a", "y"), ("b", "x")]:
            inp.pipe_input(k, v)
        assert dict(d.get_key_value_store("c1").all()) == {"a": 2, "b": 1}
        assert dict(d.get_key_value_store("c2").all()) == {"x": 2, "y": 1}


def test_reduce_and_aggregate_skip_null_keys_and_values() -> None:
    b = StreamsBuilder()
    s = b.stream("in", Consumed.with_(S, L))
    s.group_by_key().reduce(lambda a, v: a + v, materialized=Materialized.as_("sum").with_store_type("in_memory"))
    s.group_by_key().aggregate(lambda: "", lambda k, v, agg: agg + str(v),
                               materialized=Materialized.as_("concat").with_value_serde(S))
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("in", S, L)
        inp.pipe_input("a", 1)
        inp.pipe_input("a", 2)
        inp.pipe_input(None, 100)
        inp.pipe_input("a", None)
        inp.pipe_input("b", 5)
        assert dict(d.get_key_value_store("sum").all()) == {"a": 3, "b": 5}
        assert dict(d.get_key_value_store("concat").all()) == {"a": "12", "b": "5"}


def test_ktable_source_filter_map_values_to_stream() -> None:
    b = StreamsBuilder()
    t = b.table("prices", Consumed.with_(S, L), materialized="prices-store")
    (t.filter(lambda k, v: v >= 10).map_values(lambda v: v * 2).to_stream()
     .to("expensive", Produced.with_(S, L)))
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("prices", S, L)
        out = d.create_output_topic("expensive", S, L)
        inp.pipe_input("a", 5)      # filtered out, never in the table: nothing
        inp.pipe_input("b", 20)
        inp.pipe_input("b", 3)      # leaves the filtered table: tombstone
        inp.pipe_input("c", 11)
        inp.pipe_input("c", None)   # deleted upstream: tombstone
        assert out.read_key_values_to_list() == [("b", 40), ("b", None), ("c", 22), ("c", None)]
        assert dict(d.get_key_value_store("prices-store").all()) == {"a": 5, "b": 3}


def test_grouped_table_aggregate_with_subtractor() -> None:
    """Users per region: a user moving region leaves the old count and joins the new."""
    b = StreamsBuilder()
    users = b.table("user-region", Consumed.with_(S, S))
    (users.group_by(lambda user, region: (region, user), Grouped.with_(S, S))
     .count(materialized="per-region").to_stream().to("region-counts", Produced.with_(S, L)))
    users.group_by(lambda user, region: (region, len(user))).reduce(
        lambda a, v: a + v, lambda a, v: a - v, materialized=Materialized.as_("name-len").with_value_serde(L))
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("user-region", S, S)
        inp.pipe_input("alice", "eu")
        inp.pipe_input("bob", "eu")
        inp.pipe_input("alice", "us")
        inp.pipe_input("bob", None)
        assert dict(d.get_key_value_store("per-region").all()) == {"eu": 0, "us": 1}
        assert dict(d.get_key_value_store("name-len").all()) == {"eu": 0, "us": 5}
        got = d.create_output_topic("region-counts", S, L).read_key_values_to_list()
        assert got == [("eu", 1), ("eu", 2), ("eu", 1), ("us", 1), ("eu", 0)]


def test_global_table_join() -> None:
    b = StreamsBuilder()
    names = b.global_table("names", Consumed.with_(S, S), materialized="names-store")
    orders = b.stream("orders", Consumed.with_(S, S))
    orders.join(names, lambda order, name: f"{order} for {name}",
                key_mapper=lambda k, v: v.split(":")[0]).to("joined", Produced.with_(S, S))
    orders.left_join(names, lambda order, name: f"{order}/{name}",
                     key_mapper=lambda k, v: v.split(":")[0]).to("left", Produced.with_(S, S))
    topo = b.build()
    assert "for global store" in str(topo.describe())
    with TopologyTestDriver(topo) as d:
        d.create_input_topic("names", S, S).pipe_input("u1", "Ann")
        o = d.create_input_topic("orders", S, S)
        o.pipe_input("o1", "u1:book")
        o.pipe_input("o2", "u2:pen")
        assert d.create_output_topic("joined", S, S).read_key_values_to_list() == [("o1", "u1:book for Ann")]
        assert d.create_output_topic("left", S, S).read_key_values_to_list() == [
            ("o1", "u1:book/Ann"), ("o2", "u2:pen/None")]
        assert d.get_key_value_store("names-store").get("u1") == "Ann"


@pytest.mark.parametrize("store_type", ["rocksdb", "in_memory"])
def test_counts_survive_many_records_in_either_store(store_type: str) -> None:
    b = StreamsBuilder()
    (b.stream("in", Consumed.with_(S, S)).group_by(lambda k, v: v, Grouped.with_(S, S))
     .count(materialized=Materialized.as_("c").with_store_type(store_type)))
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("in", S, S)
        expected: dict[str, int] = {}
        for i in range(2000):
            w = f"w{(i * 7919) % 37}"
            expected[w] = expected.get(w, 0) + 1
            inp.pipe_input(None, w, i)
        store: Any = d.get_key_value_store("c")
        assert dict(store.all()) == expected
        if store_type == "in_memory":
            assert store.approximate_num_entries() == 37
        else:
            # the driver commits after each record, as a task does; RocksDB's estimate-num-keys
            # then also counts overwrites still in the memtable (Kafka's RocksDBStore too)
            assert store.approximate_num_entries() >= 37
