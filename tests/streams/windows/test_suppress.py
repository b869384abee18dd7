"""suppress(until_window_closes): final results only, on stream time and (strom) on wall-clock time."""

from __future__ import annotations

from typing import Any

import pytest

from strom.streams import Consumed, Produced, Serdes, StreamsBuilder, TopologyTestDriver
from strom.streams.dsl.suppress import BufferConfig, Suppressed
from strom.streams.dsl.windows import SessionWindows, TimeWindows, Window, Windowed, WindowedSerdes
from strom.streams.exceptions import TopologyError

S = Serdes.string()
L = Serdes.long()


def _driver(windows: Any, suppressed: Suppressed) -> tuple[TopologyTestDriver, Any, Any]:
    b = StreamsBuilder()
    serde = (WindowedSerdes.time_windowed(S, windows.size) if isinstance(windows, TimeWindows)
             else WindowedSerdes.session_windowed(S))
    (b.stream("in", Consumed.with_(S, S)).group_by_key().windowed_by(windows).count()
        .suppress(suppressed).to_stream().to("out", Produced.with_(serde, L)))
    driver = TopologyTestDriver(b.build(), initial_wall_clock_ms=1_000_000)
    return driver, driver.create_input_topic("in", S, S), driver.create_output_topic("out", serde, L)


def W(key: str, start: int, end: int) -> Windowed:
    return Windowed(key, Window(start, end))


def test_only_final_result_when_window_closes() -> None:
    driver, inp, out = _driver(TimeWindows.of_size_and_grace(10, 5),
                               Suppressed.until_window_closes(BufferConfig.unbounded()))
    with driver:
        for k, ts in [("a", 1), ("a", 3), ("b", 4), ("a", 12), ("a", 8)]:  # 8: late but within grace
            inp.pipe_input(k, "x", ts)
        assert out.is_empty()  # stream time 12 < 10 + 5
        inp.pipe_input("c", "x", 14)
        assert out.is_empty()
        inp.pipe_input("c", "x", 15)  # stream time 15 = end 10 + grace 5: [0,10) closes
        assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
            (W("a", 0, 10), 3, 8), (W("b", 0, 10), 1, 4)]
        inp.pipe_input("a", "x", 9)  # too late: dropped upstream, nothing re-emitted
        inp.pipe_input("c", "x", 40)
        assert out.read_key_values_to_list() == [(W("a", 10, 20), 1), (W("c", 10, 20), 2)]


def test_session_final_results_skip_merged_away_sessions() -> None:
    # sessions close at end + gap + grace
    driver, inp, out = _driver(SessionWindows.of_inactivity_gap_and_grace(5, 10),
                               Suppressed.until_window_closes(BufferConfig.unbounded()))
    with driver:
        for ts in (0, 10, 5):  # two sessions bridged by a late record
            inp.pipe_input("a", "x", ts)
        inp.pipe_input("z", "x", 24)
        assert out.is_empty()  # [0,10] closes at 10 + 5 + 10 = 25
        inp.pipe_input("z", "x", 25)
        assert out.read_key_values_to_list() == [(W("a", 0, 10), 3)]


def test_wall_clock_closes_windows_without_input() -> None:
    driver, inp, out = _driver(TimeWindows.of_size_with_no_grace(10_000),
                               Suppressed.until_window_closes(BufferConfig.unbounded(), wall_clock=True,
                                                              wall_clock_interval_ms=500))
    with driver:
        inp.pipe_input("a", "x", 1_000)
        inp.pipe_input("a", "x", 2_000)  # stream time 2000; window [0,10000)
        driver.advance_wall_clock_time(7_000)  # effective time 9000: still open
        assert out.is_empty()
        driver.advance_wall_clock_time(1_000)  # effective 10000 >= end: closed on wall-clock time
        assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
            (W("a", 0, 10_000), 2, 2_000)]
        inp.pipe_input("a", "x", 3_000)  # the window was closed: no second "final" result
        driver.advance_wall_clock_time(60_000)
        assert out.is_empty()
        inp.pipe_input("a", "x", 75_000)
        driver.advance_wall_clock_time(20_000)
        assert out.read_key_values_to_list() == [(W("a", 70_000, 80_000), 1)]


def test_stream_time_only_suppress_ignores_wall_clock() -> None:
    driver, inp, out = _driver(TimeWindows.of_size_with_no_grace(10),
                               Suppressed.until_window_closes(BufferConfig.unbounded()))
    with driver:
        inp.pipe_input("a", "x", 1)
        driver.advance_wall_clock_time(3_600_000)
        assert out.is_empty()


def test_suppress_needs_a_windowed_table() -> None:
    b = StreamsBuilder()
    table = b.stream("in", Consumed.with_(S, S)).group_by_key().count()
    with pytest.raises(TopologyError):
        table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    with pytest.raises(TopologyError):
        Suppressed.until_window_closes(BufferConfig(10))
