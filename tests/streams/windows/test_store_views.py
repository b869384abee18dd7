"""TopologyTestDriver.get_window_store / get_session_store: read-only views like Kafka's."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.streams import Consumed, Materialized, Serdes, StreamsBuilder, TopologyTestDriver
from strom.streams.dsl.windows import SessionWindows, TimeWindows, Window, Windowed
from strom.streams.exceptions import TopologyError
from strom.streams.state.session import BytesSessionStore
from strom.streams.state.window import BytesWindowStore

S = Serdes.string()


def W(key: str, start: int, end: int) -> Windowed:
    return Windowed(key, Window(start, end))


def _windowed_counts(store_type: str = "rocksdb") -> StreamsBuilder:
    b = StreamsBuilder()
    (b.stream("in", Consumed.with_(S, S)).group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(10, 100))
        .count(materialized=Materialized.as_("counts").with_store_type(store_type)))
    return b


def test_window_store_view(tmp_path: Path) -> None:
    d = TopologyTestDriver(_windowed_counts().build(), {"state.dir": str(tmp_path)})
    with d:
        inp = d.create_input_topic("in", S, S)
        for k, ts in [("a", 1), ("a", 5), ("b", 7), ("a", 12), ("c", 25), ("a", 31)]:
            inp.pipe_input(k, "x", ts)
        store = d.get_window_store("counts")
        assert store.fetch("a", 0) == 2
        assert store.fetch("a", 10) == 1
        assert store.fetch("a", 20) is None
        assert store.fetch("zz", 0) is None
        assert list(store.fetch("a", 0, 30)) == [(0, 2), (10, 1), (30, 1)]
        assert list(store.fetch("a", 5, 15)) == [(10, 1)]
        assert list(store.backward_fetch("a", 0, 30)) == [(30, 1), (10, 1), (0, 2)]
        assert list(store.fetch("a", "b", 0, 9)) == [(W("a", 0, 10), 2), (W("b", 0, 10), 1)]
        assert list(store.fetch_range("b", None, 0, 100)) == [(W("b", 0, 10), 1), (W("c", 20, 30), 1)]
        assert list(store.fetch_all(10, 25)) == [(W("a", 10, 20), 1), (W("c", 20, 30), 1)]
        assert list(store.all()) == [(W("a", 0, 10), 2), (W("a", 10, 20), 1), (W("a", 30, 40), 1),
                                     (W("b", 0, 10), 1), (W("c", 20, 30), 1)]
        assert next(iter(store.backward_all())) == (W("c", 20, 30), 1)
        with pytest.raises(TypeError):
            store.fetch("a")
        # the DSL store is a change-logged RocksDB window store in the task directory
        raw = d.runtime.raw_stores["counts"].inner
        assert isinstance(raw, BytesWindowStore) and raw.persistent
        assert (tmp_path / "test" / "0_0" / "rocksdb" / "counts").is_dir()


def test_in_memory_when_materialized_says_so(tmp_path: Path) -> None:
    d = TopologyTestDriver(_windowed_counts("in_memory").build(), {"state.dir": str(tmp_path)})
    with d:
        d.create_input_topic("in", S, S).pipe_input("a", "x", 3)
        assert not d.runtime.raw_stores["counts"].persistent
        assert d.get_window_store("counts").fetch("a", 0) == 1
        assert not (tmp_path / "test" / "0_0" / "rocksdb" / "counts").exists()


def test_session_store_view() -> None:
    b = StreamsBuilder()
    (b.stream("in", Consumed.with_(S, S)).group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 100))
        .count(materialized="sessions"))
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("in", S, S)
        for k, ts in [("a", 0), ("a", 3), ("a", 20), ("b", 4), ("c", 50)]:
            inp.pipe_input(k, "x", ts)
        store = d.get_session_store("sessions")
        assert isinstance(d.runtime.raw_stores["sessions"].inner, BytesSessionStore)
        assert list(store.fetch("a")) == [(W("a", 0, 3), 2), (W("a", 20, 20), 1)]
        assert list(store.backward_fetch("a")) == [(W("a", 20, 20), 1), (W("a", 0, 3), 2)]
        assert list(store.fetch("a", "b")) == [(W("a", 0, 3), 2), (W("a", 20, 20), 1), (W("b", 4, 4), 1)]
        assert list(store.find_sessions("a", 4, 30)) == [(W("a", 20, 20), 1)]
        assert list(store.find_sessions("a", 0, 2)) == [(W("a", 0, 3), 2)]
        assert list(store.find_sessions_range("a", "c", 10, 100)) == [(W("a", 20, 20), 1), (W("c", 50, 50), 1)]
        assert store.fetch_session("a", 0, 3) == 2
        assert store.fetch_session("a", 0, 4) is None
        assert list(store.fetch("nobody")) == []
        assert [w for w, _ in store.all()] == [W("a", 0, 3), W("a", 20, 20), W("b", 4, 4), W("c", 50, 50)]


def test_wrong_kind_is_a_clear_error() -> None:
    with TopologyTestDriver(_windowed_counts().build()) as d:
        with pytest.raises(TopologyError, match="no session store named 'counts'"):
            d.get_session_store("counts")
        with pytest.raises(TopologyError, match=r"window stores: \['counts'\]"):
            d.get_window_store("nope")


def test_materialized_retention_keeps_windows_queryable() -> None:
    b = StreamsBuilder()
    (b.stream("in", Consumed.with_(S, S)).group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(10))
        .count(materialized=Materialized.as_("counts").with_retention(1000)))
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("in", S, S)
        for ts in (1, 15, 27, 500):
            inp.pipe_input("a", "x", ts)
        # the default retention (size + grace = 10) would have expired all but the last window
        assert list(d.get_window_store("counts").fetch("a", 0, 1000)) == [(0, 1), (10, 1), (20, 1), (500, 1)]
    b2 = StreamsBuilder()
    grouped = b2.stream("in", Consumed.with_(S, S)).group_by_key()
    with pytest.raises(TopologyError, match="no smaller than its window size plus the grace"):
        grouped.windowed_by(TimeWindows.of_size_and_grace(10, 5)).count(
            materialized=Materialized.as_("c").with_retention(14))
