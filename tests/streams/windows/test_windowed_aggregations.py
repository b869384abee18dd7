"""Time and session windowed aggregations in the TopologyTestDriver (Kafka's documented examples)."""

from __future__ import annotations

import logging
import struct
from typing import Any

import pytest

from strom.streams import Consumed, Materialized, Produced, Serdes, StreamsBuilder, TopologyTestDriver
from strom.streams.dsl.windows import (
    SessionWindows,
    TimeWindows,
    Window,
    Windowed,
    WindowedSerdes,
)
from strom.streams.exceptions import SerializationError, TopologyError
from strom.streams.processor.stores import SessionStoreFacade, WindowStoreFacade

S = Serdes.string()
L = Serdes.long()


def _count_topology(windows: Any, store: str = "counts") -> tuple[Any, Any]:
    b = StreamsBuilder()
    out_serde = (WindowedSerdes.time_windowed(S, windows.size) if isinstance(windows, TimeWindows)
                 else WindowedSerdes.session_windowed(S))
    (b.stream("in", Consumed.with_(S, S)).group_by_key().windowed_by(windows)
        .count(materialized=Materialized.as_(store)).to_stream()
        .to("out", Produced.with_(out_serde, L)))
    return b.build(), out_serde


def _run(topology: Any, out_serde: Any, records: list[tuple[str, str, int]]) -> tuple[list[Any], Any]:
    driver = TopologyTestDriver(topology)
    inp = driver.create_input_topic("in", S, S)
    out = driver.create_output_topic("out", out_serde, L)
    for k, v, ts in records:
        inp.pipe_input(k, v, ts)
    return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()], driver


def W(key: str, start: int, end: int) -> Windowed:
    return Windowed(key, Window(start, end))


def test_tumbling_window_counts() -> None:
    topo, serde = _count_topology(TimeWindows.of_size_with_no_grace(10))
    got, driver = _run(topo, serde, [("a", "x", 1), ("a", "x", 9), ("b", "x", 5), ("a", "x", 10), ("a", "x", 19)])
    assert got == [(W("a", 0, 10), 1, 1), (W("a", 0, 10), 2, 9), (W("b", 0, 10), 1, 5),
                   (W("a", 10, 20), 1, 10), (W("a", 10, 20), 2, 19)]
    store = WindowStoreFacade(driver.get_key_value_store("counts"))
    # retention is size + grace = 10: windows starting at <= stream time (19... store time 10) - 10 expired
    assert sorted(store.all()) == [("a", 10, 20, 2)]
    driver.close()


def test_hopping_windows_overlap() -> None:
    # size 10, advance 5: a record at 7 is in [0,10) and [5,15); none start before 0
    topo, serde = _count_topology(TimeWindows.of_size_and_grace(10, 10).advance_by(5))
    got, driver = _run(topo, serde, [("a", "x", 7), ("a", "x", 12), ("a", "x", 3)])
    assert got == [(W("a", 0, 10), 1, 7), (W("a", 5, 15), 1, 7),
                   (W("a", 5, 15), 2, 12), (W("a", 10, 20), 1, 12),
                   (W("a", 0, 10), 2, 7)]  # out-of-order 3: [0,10) still in grace; timestamp = max seen
    driver.close()


def test_windows_for_matches_kafka_alignment() -> None:
    w = TimeWindows.of_size_with_no_grace(10).advance_by(3)
    assert w.windows_for(11) == [Window(3, 13), Window(6, 16), Window(9, 19)]
    assert w.windows_for(2) == [Window(0, 10)]
    with pytest.raises(TopologyError):
        TimeWindows.of_size_with_no_grace(10).advance_by(11)
    with pytest.raises(TopologyError):
        TimeWindows.of_size_with_no_grace(0)


def test_grace_period_drops_late_records() -> None:
    # size 10, grace 5: window [0,10) closes when stream time reaches 15
    topo, serde = _count_topology(TimeWindows.of_size_and_grace(10, 5))
    got, driver = _run(topo, serde, [("a", "x", 2), ("a", "x", 14), ("a", "x", 8),  # 8: in grace, counted
                                     ("a", "x", 15), ("a", "x", 9)])              # 9: window closed, dropped
    assert got == [(W("a", 0, 10), 1, 2), (W("a", 10, 20), 1, 14), (W("a", 0, 10), 2, 8),
                   (W("a", 10, 20), 2, 15)]
    driver.close()


def test_no_grace_drops_anything_behind_stream_time_window() -> None:
    topo, serde = _count_topology(TimeWindows.of_size_with_no_grace(10))
    got, driver = _run(topo, serde, [("a", "x", 5), ("a", "x", 10), ("a", "x", 9)])
    assert got == [(W("a", 0, 10), 1, 5), (W("a", 10, 20), 1, 10)]
    driver.close()


def test_windowed_reduce_and_aggregate() -> None:
    b = StreamsBuilder()
    g = b.stream("in", Consumed.with_(S, L)).group_by_key()
    tw = TimeWindows.of_size_with_no_grace(100)
    g.windowed_by(tw).reduce(lambda a, v: a + v).to_stream().to(
        "sum", Produced.with_(WindowedSerdes.time_windowed(S, 100), L))
    g.windowed_by(tw).aggregate(lambda: "", lambda k, v, agg: agg + str(v)).to_stream().map(
        lambda wk, v: (f"{wk.key}@{wk.start}", v)).to("agg", Produced.with_(S, S))
    with TopologyTestDriver(b.build()) as driver:
        inp = driver.create_input_topic("in", S, L)
        for v, ts in [(1, 10), (2, 50), (3, 150)]:
            inp.pipe_input("k", v, ts)
        sums = driver.create_output_topic("sum", WindowedSerdes.time_windowed(S, 100), L)
        assert sums.read_key_values_to_list() == [(W("k", 0, 100), 1), (W("k", 0, 100), 3), (W("k", 100, 200), 3)]
        aggs = driver.create_output_topic("agg", S, S)
        assert aggs.read_key_values_to_list() == [("k@0", "1"), ("k@0", "12"), ("k@100", "3")]


def test_session_windows_merge_when_a_late_record_bridges_two_sessions() -> None:
    # gap 5, grace 10 (Kafka docs' example pattern): sessions [0,0] and [10,10] are 10 apart;
    # a late record at 5 is within the gap of both and merges them into [0,10]
    topo, serde = _count_topology(SessionWindows.of_inactivity_gap_and_grace(5, 10))
    got, driver = _run(topo, serde, [("a", "x", 0), ("a", "x", 10), ("a", "x", 5)])
    assert got == [(W("a", 0, 0), 1, 0), (W("a", 10, 10), 1, 10),
                   (W("a", 0, 0), None, 0), (W("a", 10, 10), None, 10),  # merged-away sessions removed
                   (W("a", 0, 10), 3, 10)]
    store = SessionStoreFacade(driver.get_key_value_store("counts"))
    assert list(store.all()) == [("a", 0, 10, 3)]
    driver.close()


def test_session_windows_extend_and_split_by_gap() -> None:
    topo, serde = _count_topology(SessionWindows.of_inactivity_gap_with_no_grace(5))
    got, driver = _run(topo, serde, [("a", "x", 0), ("a", "x", 4), ("b", "x", 4), ("a", "x", 10)])
    assert got == [(W("a", 0, 0), 1, 0), (W("a", 0, 0), None, 0), (W("a", 0, 4), 2, 4),
                   (W("b", 4, 4), 1, 4), (W("a", 10, 10), 1, 10)]
    driver.close()


def test_session_late_record_beyond_grace_is_dropped() -> None:
    topo, serde = _count_topology(SessionWindows.of_inactivity_gap_with_no_grace(5))
    got, driver = _run(topo, serde, [("a", "x", 100), ("a", "x", 20)])  # session [20,20] ends < 100 - 0
    assert got == [(W("a", 100, 100), 1, 100)]
    driver.close()


def test_session_aggregate_uses_merger() -> None:
    b = StreamsBuilder()
    (b.stream("in", Consumed.with_(S, S)).group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 100))
        .aggregate(lambda: "", lambda k, v, agg: agg + v, lambda k, a1, a2: a1 + "|" + a2)
        .to_stream().map(lambda wk, v: (f"{wk.key}[{wk.start},{wk.end}]", v)).to("out", Produced.with_(S, S)))
    with TopologyTestDriver(b.build()) as driver:
        inp = driver.create_input_topic("in", S, S)
        inp.pipe_input("k", "a", 0)
        inp.pipe_input("k", "b", 10)
        inp.pipe_input("k", "c", 5)
        out = driver.create_output_topic("out", S, S).read_key_values_to_list()
        assert out[-1] == ("k[0,10]", "|a|bc")


def test_windowed_serdes_wire_format() -> None:
    tw = WindowedSerdes.time_windowed(S, 60_000)
    data = tw.serialize("t", W("key", 120_000, 180_000))
    assert data == b"key" + struct.pack(">q", 120_000)
    assert tw.deserialize("t", data) == W("key", 120_000, 180_000)
    sw = WindowedSerdes.session_windowed(S)
    data = sw.serialize("t", W("key", 5, 9))
    assert data == b"key" + struct.pack(">q", 9) + struct.pack(">q", 5)  # end first, as Kafka's SessionKeySchema
    assert sw.deserialize("t", data) == W("key", 5, 9)
    with pytest.raises(SerializationError):
        tw.deserialize("t", b"short")
    with pytest.raises(SerializationError):
        sw.deserialize("t", b"0123456789")


def test_record_for_expired_window_is_logged_as_kafka_does(caplog: pytest.LogCaptureFixture) -> None:
    topology, out_serde = _count_topology(TimeWindows.of_size_and_grace(10, 0))
    with caplog.at_level(logging.WARNING, logger="strom.streams.dsl.windowed"):
        got, driver = _run(topology, out_serde, [("a", "x", 25), ("a", "late", 3)])
        driver.close()
    assert len(got) == 1  # the late record updated nothing
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("Skipping record for expired window. topic=[in] partition=[0] offset=[1] timestamp=[3]")
    assert "window=[0,10] expiration=[25] streamTime=[25]" in line
