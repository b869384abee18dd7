"""The one read-only store API (strom.streams.processor.readonly), as interactive queries use it.

``KafkaStreams.store`` builds these views over every local task holding a partition of the
store; here two TopologyTestDrivers stand in for two partitions (real stores, real serdes), so
the cross-partition merge order and Kafka's ``KeyValue`` shapes are checked without a broker.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from strom.streams import (
    Consumed,
    ReadOnlyKeyValueStore,
    ReadOnlySessionStore,
    ReadOnlyWindowStore,
    Serdes,
    StreamsBuilder,
    TopologyTestDriver,
)
from strom.streams.dsl.windows import SessionWindows, TimeWindows, Window, Windowed
from strom.streams.exceptions import StreamsError
from strom.streams.processor import readonly
from strom.streams.processor.stores import CachedKeyValueStoreFacade
from strom.streams.runtime import queries

S = Serdes.string()


def W(key: str, start: int, end: int) -> Windowed:
    return Windowed(key, Window(start, end))


def _drivers(builder: StreamsBuilder, inputs: Sequence[Sequence[tuple[str, int]]]) -> Iterator[TopologyTestDriver]:
    """One driver per "partition", each fed its own ``(key, timestamp)`` records."""
    for records in inputs:
        d = TopologyTestDriver(builder.build())
        topic = d.create_input_topic("in", S, S)
        for k, ts in records:
            topic.pipe_input(k, "x", ts)
        yield d


def _parts(facades: Sequence[Any]) -> readonly.Parts:
    return lambda: [(contextlib.nullcontext(), f) for f in facades]


def test_interactive_queries_and_the_test_driver_share_one_api() -> None:
    assert queries.ReadOnlyKeyValueStore is readonly.ReadOnlyKeyValueStore is ReadOnlyKeyValueStore
    assert queries.ReadOnlyWindowStore is readonly.ReadOnlyWindowStore is ReadOnlyWindowStore
    assert queries.ReadOnlySessionStore is readonly.ReadOnlySessionStore is ReadOnlySessionStore
    empty = _parts([])
    assert type(queries.view_for("window", "w", empty)) is ReadOnlyWindowStore
    assert type(queries.view_for("session", "s", empty)) is ReadOnlySessionStore
    assert type(queries.view_for("key_value", "kv", empty)) is ReadOnlyKeyValueStore
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10)).count(
        materialized="w")
    with TopologyTestDriver(b.build()) as d:
        assert type(d.get_window_store("w")) is queries.ReadOnlyWindowStore


def _counts() -> StreamsBuilder:
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).group_by_key().count(materialized="counts")
    return b


def test_key_value_view_merges_partitions_in_key_order() -> None:
    p0 = [("banana", 1), ("apricot", 2), ("banana", 3)]
    p1 = [("apple", 1), ("cherry", 2), ("apple", 3), ("apple", 4)]
    drivers = list(_drivers(_counts(), [p0, p1]))
    try:
        view = ReadOnlyKeyValueStore("counts", _parts([d.get_key_value_store("counts") for d in drivers]))
        rows = list(view.all())
        assert rows == [("apple", 3), ("apricot", 1), ("banana", 2), ("cherry", 1)]
        # Kafka's KeyValue: unpacks as a pair and names its fields
        assert all(isinstance(r, readonly.KeyValue) for r in rows)
        assert (rows[0].key, rows[0].value) == ("apple", 3)
        assert [kv.key for kv in view.reverse_all()] == ["cherry", "banana", "apricot", "apple"]
        assert list(view.range("apricot", "banana")) == [("apricot", 1), ("banana", 2)]
        assert list(view.reverse_range("apricot", "banana")) == [("banana", 2), ("apricot", 1)]
        assert list(view.range("b", None)) == [("banana", 2), ("cherry", 1)]
        assert list(view.range("z", "a")) == []  # inverted: empty, as in Kafka
        assert list(view.prefix_scan("ap")) == [("apple", 3), ("apricot", 1)]
        assert list(view.prefix_scan("ap", S)) == [("apple", 3), ("apricot", 1)]
        assert list(view.prefix_scan("zz")) == []
        assert view.get("cherry") == 1 and view.get("banana") == 2 and view.get("nobody") is None
        # RocksDB's estimate-num-keys: the driver commits after each record as a task does, and
        # overwrites still in the memtable count too (Kafka's RocksDBStore estimates the same way)
        assert view.approximate_num_entries() >= 4
        with pytest.raises(StreamsError, match="must not be None"):
            view.get(None)
        with pytest.raises(StreamsError, match="must not be None"):
            view.prefix_scan(None)
    finally:
        for d in drivers:
            d.close()


def test_key_value_view_reads_through_the_record_cache() -> None:
    (d,) = _drivers(_counts(), [[("apple", 1), ("banana", 2)]])
    with d:
        flushed: list[Any] = []
        cached = CachedKeyValueStoreFacade(d.get_key_value_store("counts"), 100,
                                           lambda *a: flushed.append(a))
        cached.put_cached("apple", 7, 1, 5, None)
        cached.put_cached("apricot", 1, None, 5, None)
        view = ReadOnlyKeyValueStore("counts", _parts([cached]))
        # dirty entries are visible before the flush, in key order, through every read
        assert list(view.all()) == [("apple", 7), ("apricot", 1), ("banana", 1)]
        assert list(view.prefix_scan("ap")) == [("apple", 7), ("apricot", 1)]
        assert view.get("apricot") == 1
        assert flushed == []


def _windowed() -> StreamsBuilder:
    b = StreamsBuilder()
    (b.stream("in", Consumed.with_(S, S)).group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(10, 100)).count(materialized="w"))
    return b


def test_window_view_merges_partitions() -> None:
    drivers = list(_drivers(_windowed(), [[("b", 1), ("b", 12), ("d", 3)], [("a", 5), ("c", 15), ("a", 7)]]))
    try:
        view = ReadOnlyWindowStore("w", _parts([d.get_window_store("w")._parts()[0][1] for d in drivers]))
        assert view.fetch("a", 0) == 2 and view.fetch("b", 10) == 1 and view.fetch("a", 10) is None
        one_key = list(view.fetch("b", 0, 100))
        assert one_key == [(0, 1), (10, 1)]
        assert one_key[1].key == 10 and one_key[1].value == 1  # WindowStoreIterator: (start, value)
        assert list(view.all()) == [(W("a", 0, 10), 2), (W("b", 0, 10), 1), (W("b", 10, 20), 1),
                                    (W("c", 10, 20), 1), (W("d", 0, 10), 1)]
        assert list(view.fetch_all(10, 10)) == [(W("b", 10, 20), 1), (W("c", 10, 20), 1)]
        assert list(view.fetch("b", "c", 0, 100)) == [(W("b", 0, 10), 1), (W("b", 10, 20), 1), (W("c", 10, 20), 1)]
        first = next(view.backward_all())
        assert first.key == W("d", 0, 10) and first.value == 1
        with pytest.raises(StreamsError, match="must not be None"):
            view.fetch(None, 0)
    finally:
        for d in drivers:
            d.close()


def test_session_view_merges_partitions() -> None:
    b = StreamsBuilder()
    (b.stream("in", Consumed.with_(S, S)).group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 100)).count(materialized="s"))
    drivers = list(_drivers(b, [[("b", 0), ("b", 2)], [("a", 1), ("a", 30), ("c", 4)]]))
    try:
        view = ReadOnlySessionStore("s", _parts([d.get_session_store("s")._parts()[0][1] for d in drivers]))
        assert list(view.fetch("a", "c")) == [(W("a", 1, 1), 1), (W("a", 30, 30), 1), (W("b", 0, 2), 2),
                                              (W("c", 4, 4), 1)]
        found = list(view.find_sessions("b", 1, 10))
        assert found == [(W("b", 0, 2), 2)] and found[0].key.window == Window(0, 2) and found[0].value == 2
        assert view.fetch_session("b", 0, 2) == 2 and view.fetch_session("a", 0, 2) is None
        assert [kv.key.key for kv in view.all()] == ["a", "a", "b", "c"]
    finally:
        for d in drivers:
            d.close()
