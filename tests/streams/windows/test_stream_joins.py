"""Windowed stream-stream joins (inner/left/outer) in the TopologyTestDriver, with timing edges."""

from __future__ import annotations

from typing import Any

import pytest

from strom.streams import Consumed, Produced, Serdes, StreamsBuilder, TopologyTestDriver
from strom.streams.dsl.stream_joins import StreamJoined
from strom.streams.dsl.windows import JoinWindows
from strom.streams.exceptions import TopologyError

S = Serdes.string()


def _joiner(lv: Any, rv: Any) -> str:
    return f"{lv}+{rv}"


def _driver(mode: str, windows: JoinWindows, **kw: Any) -> tuple[TopologyTestDriver, Any, Any, Any]:
    b = StreamsBuilder()
    left = b.stream("left", Consumed.with_(S, S))
    right = b.stream("right", Consumed.with_(S, S))
    getattr(left, mode)(right, _joiner, windows, StreamJoined.with_(S, S, S)).to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), **kw)
    return (d, d.create_input_topic("left", S, S), d.create_input_topic("right", S, S),
            d.create_output_topic("out", S, S))


def _out(out: Any) -> list[tuple[str, str, int]]:
    return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def test_inner_join_window_bounds_are_inclusive() -> None:
    d, left, right, out = _driver("join", JoinWindows.of_time_difference_with_no_grace(10))
    with d:
        left.pipe_input("k", "A", 0)
        right.pipe_input("k", "a", 10)   # |10 - 0| <= 10: joins, result at the later timestamp
        assert _out(out) == [("k", "A+a", 10)]
        right.pipe_input("k", "b", 11)   # 11 apart from A: no join
        right.pipe_input("x", "z", 5)    # other key: no join
        assert _out(out) == []
        left.pipe_input("k", "B", 11)    # matches a@10 and b@11 (duplicates kept, time order)
        assert _out(out) == [("k", "B+a", 11), ("k", "B+b", 11)]


def test_inner_join_asymmetric_windows() -> None:
    # left at t joins right in [t - 0, t + 5]
    d, left, right, out = _driver("join", JoinWindows(0, 5, 100))
    with d:
        left.pipe_input("k", "A", 10)
        right.pipe_input("k", "early", 9)    # before the left record: outside
        right.pipe_input("k", "late", 15)    # within after
        right.pipe_input("k", "tooLate", 16)
        assert _out(out) == [("k", "A+late", 15)]
        left.pipe_input("k", "B", 9)  # B@9 joins right in [9, 14]: early@9
        assert _out(out) == [("k", "B+early", 9)]


def test_left_join_emits_unmatched_only_after_window_closes() -> None:
    d, left, right, out = _driver("left_join", JoinWindows.of_time_difference_with_no_grace(10))
    with d:
        left.pipe_input("k", "A", 0)
        assert _out(out) == []          # not eagerly (Kafka 3.1+)
        right.pipe_input("z", "zz", 10)  # stream time 10: A's window [-10, 10] still open
        assert _out(out) == []
        right.pipe_input("z", "zz", 11)  # stream time 11 > 0 + 10: A is emitted with None
        assert _out(out) == [("k", "A+None", 0)]
        left.pipe_input("k", "C", 20)
        right.pipe_input("k", "c", 25)
        right.pipe_input("z", "zz", 100)
        assert _out(out) == [("k", "C+c", 25)]  # C was matched: never emitted with None
        right.pipe_input("r", "unmatched-right", 100)
        right.pipe_input("z", "zz", 200)
        assert _out(out) == []  # a left join never emits unmatched right records


def test_left_join_grace_delays_the_unmatched_result() -> None:
    d, left, right, out = _driver("left_join", JoinWindows.of_time_difference_and_grace(10, 5))
    with d:
        left.pipe_input("k", "A", 0)
        right.pipe_input("z", "zz", 15)
        assert _out(out) == []
        right.pipe_input("k", "a", 9)  # out of order but within grace: joins A, so no A+None later
        assert _out(out) == [("k", "A+a", 9)]
        left.pipe_input("k", "B", 2)   # joins a@9 at once
        assert _out(out) == [("k", "B+a", 9)]
        right.pipe_input("z", "zz", 100)
        assert _out(out) == []


def test_outer_join_emits_both_sides_unmatched_and_out_of_order_at_once() -> None:
    d, left, right, out = _driver("outer_join", JoinWindows.of_time_difference_with_no_grace(10))
    with d:
        left.pipe_input("k", "A", 0)
        right.pipe_input("j", "b", 3)
        left.pipe_input("j", "B", 5)  # joins b
        assert _out(out) == [("j", "B+b", 5)]
        left.pipe_input("q", "Q", 100)  # closes A's and nothing else unmatched
        assert _out(out) == [("k", "A+None", 0)]
        right.pipe_input("k", "late-ish", 85)  # window [85-10, 85+10] closed (95 < 100), not expired
        assert _out(out) == [("k", "None+late-ish", 85)]
        right.pipe_input("r", "R", 101)
        left.pipe_input("q", "Q2", 200)
        assert _out(out) == [("q", "Q+None", 100), ("r", "None+R", 101)]


def test_records_older_than_retention_are_dropped() -> None:
    d, left, right, out = _driver("outer_join", JoinWindows.of_time_difference_with_no_grace(10))
    with d:
        left.pipe_input("k", "A", 100)
        right.pipe_input("k", "old", 79)  # 79 <= 100 - 21: late, dropped entirely
        left.pipe_input("x", "X", 500)
        assert _out(out) == [("k", "A+None", 100)]


def test_null_keys_and_values_are_skipped() -> None:
    d, left, right, out = _driver("outer_join", JoinWindows.of_time_difference_with_no_grace(10))
    with d:
        left.pipe_input(None, "A", 0)
        left.pipe_input("k", None, 0)
        right.pipe_input("z", "zz", 1000)  # would flush a parked (k, None) record as "None+None"
        assert _out(out) == []


def test_copartitioning_is_checked() -> None:
    b = StreamsBuilder()
    b.stream("left", Consumed.with_(S, S)).join(b.stream("right", Consumed.with_(S, S)), _joiner,
                                                JoinWindows.of_time_difference_with_no_grace(5)).to("out")
    topo = b.build()
    with pytest.raises(TopologyError, match="co-partitioned"):
        TopologyTestDriver(topo, topic_partitions={"left": 3, "right": 4})
    TopologyTestDriver(topo, topic_partitions={"left": 3, "right": 3}).close()


def test_key_change_repartitions_before_the_join() -> None:
    b = StreamsBuilder()
    left = b.stream("left", Consumed.with_(S, S)).select_key(lambda k, v: v[0])
    right = b.stream("right", Consumed.with_(S, S))
    left.join(right, _joiner, JoinWindows.of_time_difference_with_no_grace(5),
              StreamJoined.with_(S, S, S).with_name("j")).to("out", Produced.with_(S, S))
    topo = b.build()
    assert topo.internal_topics == {"j-left-repartition"}
    with TopologyTestDriver(topo) as d:
        d.create_input_topic("left", S, S).pipe_input("ignored", "kX", 1)
        d.create_input_topic("right", S, S).pipe_input("k", "r", 2)
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [("k", "kX+r")]


def test_join_with_a_stream_needs_join_windows() -> None:
    b = StreamsBuilder()
    with pytest.raises(TopologyError):
        b.stream("l").join(b.stream("r"), _joiner, None)
