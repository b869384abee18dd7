"""Stream-table and table-table joins; co-partitioning checks."""

from __future__ import annotations

import pytest

from strom.streams import (
    Consumed,
    Joined,
    Produced,
    Serdes,
    StreamsBuilder,
    TopologyError,
    TopologyTestDriver,
)

S = Serdes.string()


def test_stream_table_inner_and_left_join() -> None:
    b = StreamsBuilder()
    users = b.table("users", Consumed.with_(S, S))
    clicks = b.stream("clicks", Consumed.with_(S, S))
    clicks.join(users, lambda c, u: f"{c}@{u}").to("inner", Produced.with_(S, S))
    clicks.left_join(users, lambda c, u: f"{c}@{u}").to("left", Produced.with_(S, S))
    with TopologyTestDriver(b.build()) as d:
        u = d.create_input_topic("users", S, S)
        c = d.create_input_topic("clicks", S, S)
        c.pipe_input("u1", "early")       # table empty: inner drops, left joins with None
        u.pipe_input("u1", "Ann")
        c.pipe_input("u1", "home")
        u.pipe_input("u1", None)          # deleted
        c.pipe_input("u1", "late")
        c.pipe_input(None, "nokey")       # no key: dropped by both
        assert d.create_output_topic("inner", S, S).read_key_values_to_list() == [("u1", "home@Ann")]
        assert d.create_output_topic("left", S, S).read_key_values_to_list() == [
            ("u1", "early@None"), ("u1", "home@Ann"), ("u1", "late@None")]


def test_stream_table_join_through_filtered_unmaterialized_table() -> None:
    b = StreamsBuilder()
    vip = b.table("users", Consumed.with_(S, S)).filter(lambda k, v: v.startswith("V"))
    b.stream("clicks", Consumed.with_(S, S)).join(vip, lambda c, u: u).to("out", Produced.with_(S, S))
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("users", S, S).pipe_key_value_list([("a", "Vera"), ("b", "Bob")])
        d.create_input_topic("clicks", S, S).pipe_key_value_list([("a", "x"), ("b", "y")])
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [("a", "Vera")]


def test_stream_table_join_repartitions_a_rekeyed_stream() -> None:
    b = StreamsBuilder()
    users = b.table("users", Consumed.with_(S, S))
    (b.stream("clicks", Consumed.with_(S, S)).select_key(lambda k, v: v)
     .join(users, lambda c, u: u, joined=Joined(S, S, None, "by-user"))
     .to("out", Produced.with_(S, S)))
    topo = b.build()
    assert "by-user-repartition" in topo.internal_topics
    with TopologyTestDriver(topo) as d:
        d.create_input_topic("users", S, S).pipe_input("u1", "Ann")
        d.create_input_topic("clicks", S, S).pipe_input("c9", "u1")
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [("u1", "Ann")]


@pytest.mark.parametrize(("mode", "expected"), [
    ("join", [("k", "L1+R1"), ("k", "L2+R1"), ("k", None)]),
    ("left_join", [("k", "L1+None"), ("k", "L1+R1"), ("k", "L2+R1"), ("k", "L2+None"), ("k", None)]),
    ("outer_join", [("k", "L1+None"), ("k", "L1+R1"), ("k", "L2+R1"), ("k", "L2+None"), ("k", None),
                    ("j", "None+R9")]),
])
def test_table_table_joins(mode: str, expected: list[tuple[str, str | None]]) -> None:
    b = StreamsBuilder()
    left = b.table("left", Consumed.with_(S, S))
    right = b.table("right", Consumed.with_(S, S))
    getattr(left, mode)(right, lambda lv, rv: f"{lv}+{rv}", materialized="joined").to_stream() \
        .to("out", Produced.with_(S, S))
    with TopologyTestDriver(b.build()) as d:
        lt = d.create_input_topic("left", S, S)
        rt = d.create_input_topic("right", S, S)
        lt.pipe_input("k", "L1")
        rt.pipe_input("k", "R1")
        lt.pipe_input("k", "L2")
        rt.pipe_input("k", None)
        lt.pipe_input("k", None)
        rt.pipe_input("j", "R9")
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == expected


def test_unmaterialized_table_table_join_feeds_a_stream_join() -> None:
    b = StreamsBuilder()
    a = b.table("a", Consumed.with_(S, S))
    c = b.table("c", Consumed.with_(S, S))
    both = a.join(c, lambda x, y: x + y)
    b.stream("s", Consumed.with_(S, S)).join(both, lambda s, t: s + t).to("out", Produced.with_(S, S))
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("a", S, S).pipe_input("k", "A")
        d.create_input_topic("s", S, S).pipe_input("k", "1")   # c missing: no match
        d.create_input_topic("c", S, S).pipe_input("k", "C")
        d.create_input_topic("s", S, S).pipe_input("k", "2")
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [("k", "2AC")]


def test_copartitioning_violation_names_the_topics() -> None:
    b = StreamsBuilder()
    users = b.table("users", Consumed.with_(S, S))
    b.stream("clicks", Consumed.with_(S, S)).join(users, lambda c, u: u).to("out")
    topo = b.build()
    with pytest.raises(TopologyError, match=r"clicks \(3 partitions\).*users \(6 partitions\)"):
        TopologyTestDriver(topo, topic_partitions={"clicks": 3, "users": 6})
    TopologyTestDriver(topo, topic_partitions={"clicks": 4, "users": 4}).close()


def test_table_table_copartitioning_checked() -> None:
    b = StreamsBuilder()
    b.table("l", Consumed.with_(S, S)).outer_join(b.table("r", Consumed.with_(S, S)), lambda x, y: x)
    with pytest.raises(TopologyError, match="not co-partitioned"):
        TopologyTestDriver(b.build(), topic_partitions={"l": 2})
