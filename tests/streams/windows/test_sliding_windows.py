"""Sliding-window aggregations: one window per distinct set of records within the time difference."""

from __future__ import annotations

from typing import Any

import pytest

from strom.streams import Consumed, Produced, Serdes, StreamsBuilder, TopologyTestDriver
from strom.streams.dsl.suppress import BufferConfig, Suppressed
from strom.streams.dsl.windows import SlidingWindows, Window, Windowed, WindowedSerdes
from strom.streams.exceptions import TopologyError

S = Serdes.string()
L = Serdes.long()


def W(key: str, start: int, end: int) -> Windowed:
    return Windowed(key, Window(start, end))


def _run(windows: SlidingWindows, records: list[tuple[str, int, int]], op: str = "count",
         suppress: bool = False) -> list[tuple[Any, Any, int]]:
    b = StreamsBuilder()
    g = b.stream("in", Consumed.with_(S, L)).group_by_key().windowed_by(windows)
    table = g.count() if op == "count" else g.reduce(lambda a, v: a + v)
    if suppress:
        table = table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    serde = WindowedSerdes.time_windowed(S, windows.time_difference)
    table.to_stream().to("out", Produced.with_(serde, L))
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("in", S, L)
        for k, v, ts in records:
            inp.pipe_input(k, v, ts)
        return [(r.key, r.value, r.timestamp) for r in d.create_output_topic("out", serde, L).read_records_to_list()]


def test_sliding_windows_in_order_and_out_of_order() -> None:
    got = _run(SlidingWindows.of_time_difference_and_grace(10, 20),
               [("k", 1, 10), ("k", 1, 15), ("k", 1, 30), ("k", 1, 21)])
    assert got == [
        (W("k", 0, 10), 1, 10),
        (W("k", 5, 15), 2, 15),    # left window of 15: {10, 15}
        (W("k", 11, 21), 1, 15),   # right window of 10, now that 15 follows it
        (W("k", 20, 30), 1, 30),   # 30 is alone
        # 21 arrives late (within grace):
        (W("k", 11, 21), 2, 21),   # updated: {15, 21} (it is also 21's left window)
        (W("k", 16, 26), 1, 21),   # right window of 15 comes into existence: {21}
        (W("k", 20, 30), 2, 30),   # updated: {21, 30}
        (W("k", 22, 32), 1, 30),   # right window of 21: {30}
    ]


def test_sliding_window_sums_with_reduce() -> None:
    got = _run(SlidingWindows.of_time_difference_with_no_grace(5),
               [("k", 1, 100), ("k", 2, 103), ("k", 4, 106)], op="reduce")
    assert got == [(W("k", 95, 100), 1, 100),
                   (W("k", 98, 103), 3, 103), (W("k", 101, 106), 2, 103),
                   (W("k", 101, 106), 6, 106), (W("k", 104, 109), 4, 106)]


def test_early_records_share_the_window_starting_at_zero() -> None:
    got = _run(SlidingWindows.of_time_difference_and_grace(10, 100), [("k", 1, 3), ("k", 1, 7)])
    assert got == [(W("k", 0, 10), 1, 3), (W("k", 0, 10), 2, 7), (W("k", 4, 14), 1, 7)]


def test_grace_closes_sliding_windows_and_drops_late_records() -> None:
    got = _run(SlidingWindows.of_time_difference_with_no_grace(10),
               [("k", 1, 10), ("k", 1, 30), ("k", 1, 21), ("k", 1, 18)])
    # 21: its left window [11,21] is closed (21 < 30 - 0); [20,30] (end inclusive) is not;
    #     its right window [22,32] opens with {30}
    # 18: even its right window [19,29] is closed: dropped
    assert got == [(W("k", 0, 10), 1, 10), (W("k", 20, 30), 1, 30),
                   (W("k", 20, 30), 2, 30), (W("k", 22, 32), 1, 30)]


def test_suppressed_sliding_windows_emit_final_counts() -> None:
    got = _run(SlidingWindows.of_time_difference_with_no_grace(10),
               [("k", 1, 10), ("k", 1, 15), ("k", 1, 40)], suppress=True)
    assert got == [(W("k", 0, 10), 1, 10), (W("k", 5, 15), 2, 15), (W("k", 11, 21), 1, 15)]


def test_invalid_sliding_windows() -> None:
    with pytest.raises(TopologyError):
        SlidingWindows.of_time_difference_with_no_grace(0)
    with pytest.raises(TopologyError):
        SlidingWindows.of_time_difference_and_grace(10, -1)
