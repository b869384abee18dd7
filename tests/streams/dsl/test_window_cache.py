"""The record cache of time-windowed aggregations (Kafka's ``CachingWindowStore``): one net update
per key-window per flush with the stored value as the old one, reads through the cache, early
flush when full, no cache at ``statestore.cache.max.bytes=0``; batches give what records give."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from strom.streams import (
    Consumed,
    Grouped,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    TimeWindows,
    Topology,
    TopologyTestDriver,
)
from strom.streams.processor.readonly import ReadOnlyWindowStore
from strom.streams.processor.stores import (
    CachedKeyValueStoreFacade,
    CachedWindowStoreFacade,
    KeyValueStoreFacade,
)
from strom.streams.state.window import InMemoryWindowStore
from strom.streams.topology.runtime import TopologyRuntime

S, L = Serdes.string(), Serdes.long()


def _topology(windows: TimeWindows, kind: str = "count") -> Topology:
    b = StreamsBuilder()
    grouped = b.stream("in", Consumed.with_(S, S)).group_by_key(Grouped.with_(S, S)).windowed_by(windows)
    if kind == "count":
        table = grouped.count(materialized=Materialized.as_("w"))
    elif kind == "reduce":
        table = grouped.reduce(lambda a, v: a + v, materialized=Materialized.as_("w"))
    else:
        table = grouped.aggregate(lambda: "", lambda k, v, a: a + v.upper(),
                                  materialized=Materialized.as_("w").with_value_serde(S))
    (table.to_stream().map(lambda wk, v: (f"{wk.key}@{wk.window.start}-{wk.window.end}", str(v)))
        .to("out", Produced.with_(S, S)))
    return b.build()


Out = tuple[str, str, int]


def _runtime(windows: TimeWindows, cache: int, kind: str = "count") -> tuple[TopologyRuntime, list[Out]]:
    out: list[Out] = []

    def emit(topic: str, key: bytes | None, value: bytes | None, ts: int, headers: Any) -> None:
        assert key is not None and value is not None
        out.append((key.decode(), value.decode(), ts))

    return TopologyRuntime(_topology(windows, kind), "app", emit, cache_max_entries=cache), out


def _pipe(rt: TopologyRuntime, records: list[tuple[str, int]], offset: int = 0) -> None:
    for i, (k, ts) in enumerate(records):
        rt.process_input("in", 0, offset + i, k.encode(), b"v", ts)


def test_cache_forwards_one_net_update_per_window_at_flush() -> None:
    rt, out = _runtime(TimeWindows.of_size_and_grace(10, 100), 100)
    _pipe(rt, [("a", 1), ("a", 5), ("b", 3), ("a", 12), ("a", 4)])
    assert out == []  # nothing leaves before the flush (the commit)
    view = ReadOnlyWindowStore("w", lambda: [(contextlib.nullcontext(), rt.stores["w"])])
    assert view.fetch("a", 0) == 3 and view.fetch("a", 10) == 1  # reads see the cache
    assert list(view.fetch("a", 0, 20)) == [(0, 3), (10, 1)]
    assert [(w.key, w.window.start, v) for w, v in view.all()] == [("a", 0, 3), ("a", 10, 1), ("b", 0, 1)]
    rt.flush_caches()
    # one update per key-window, in first-update order, stamped with the window's latest record
    assert out == [("a@0-10", "3", 5), ("b@0-10", "1", 3), ("a@10-20", "1", 12)]
    _pipe(rt, [("a", 2)], 5)
    rt.flush_caches()
    assert out[-1] == ("a@0-10", "4", 5)  # continued from the store
    rt.flush_caches()  # nothing dirty: nothing sent
    assert len(out) == 4
    assert view.fetch("a", 0) == 4


def test_without_cache_every_update_flows() -> None:
    rt, out = _runtime(TimeWindows.of_size_and_grace(10, 100), 0)
    _pipe(rt, [("a", 1), ("a", 5), ("b", 3)])
    assert out == [("a@0-10", "1", 1), ("a@0-10", "2", 5), ("b@0-10", "1", 3)]


def test_cache_overflow_flushes_early() -> None:
    rt, out = _runtime(TimeWindows.of_size_and_grace(10, 100), 2)
    _pipe(rt, [("a", 1), ("b", 1), ("a", 2), ("c", 1)])
    # the third dirty window flushed the cache (with itself): a=2, b=1, c=1
    assert sorted(out) == [("a@0-10", "2", 2), ("b@0-10", "1", 1), ("c@0-10", "1", 1)]
    _pipe(rt, [("a", 3)], 4)
    assert len(out) == 3
    rt.flush_caches()
    assert out[-1] == ("a@0-10", "3", 3)


def test_flush_gives_the_stored_value_as_old() -> None:
    """Kafka's CachingWindowStore: the Change carries the value the store held before the flush."""
    changes: list[tuple[Any, Any, Any, int]] = []
    facade = KeyValueStoreFacade("w", InMemoryWindowStore("w", 1000, 10), S, L)
    cache = CachedKeyValueStoreFacade(facade, 10, lambda kw, new, old, ts, h: changes.append((kw, new, old, ts)))
    assert isinstance(cache, CachedWindowStoreFacade)  # the runtime's constructor picks the window cache
    cache.put_window("k", 0, 1, None, 5, None)
    assert cache.fetch_cached("k", 0) == (1, 5) and cache.fetch_stored("k", 0) is None
    cache.flush()
    assert cache.fetch_stored("k", 0) == (1, 5)
    cache.put_window("k", 0, 2, 1, 7, None)
    cache._dirty[("k", 0)][0] = 3  # a second update before the flush keeps the first old value
    cache.flush()
    assert changes == [(("k", 0), 1, None, 5), (("k", 0), 3, 1, 7)]
    with pytest.raises(Exception, match="window store"):
        cache.get("k")


@pytest.mark.parametrize("windows", [TimeWindows.of_size_and_grace(10, 5),
                                     TimeWindows.of_size_and_grace(10, 5).advance_by(3)],
                         ids=["tumbling", "hopping"])
@pytest.mark.parametrize("kind", ["count", "reduce", "aggregate"])
def test_driver_output_is_the_same_with_and_without_cache(windows: TimeWindows, kind: str) -> None:
    """Kafka's TopologyTestDriver commits (flushes the cache) after every record, so caching does
    not change what it shows, only how one record's updates are coalesced."""
    records = [("a", 1), ("b", 4), ("a", 9), ("a", 13), ("b", 2), ("c", 30), ("a", 12), ("a", 3), ("b", 31)]

    def run(cache_bytes: int) -> tuple[list[Any], list[Any], list[Any]]:
        with TopologyTestDriver(_topology(windows, kind),
                                {"statestore.cache.max.bytes": cache_bytes}) as driver:
            inp = driver.create_input_topic("in", S, S)
            for i, (k, ts) in enumerate(records):
                inp.pipe_input(k, f"v{i}", ts)
            got = [(r.key, r.value, r.timestamp) for r in
                   driver.create_output_topic("out", S, S).read_records_to_list()]
            changelog = driver.create_output_topic("test-w-changelog").read_records_to_list()
            store = [(w.key, w.window.start, v) for w, v in driver.get_window_store("w").all()]
        return got, [(r.key, r.value) for r in changelog], store

    cached, plain = run(10 * 1024 * 1024), run(0)
    assert cached[0]  # something came out (late records were dropped from it)
    assert cached == plain


def _batched_vs_records(windows: TimeWindows, kind: str, cache: int, chunk: int) -> None:
    records = [(f"k{(i * 7) % 5}", 100 + i * 3 - (i % 4) * 9) for i in range(400)]
    one, out_one = _runtime(windows, cache, kind)
    many, out_many = _runtime(windows, cache, kind)
    _pipe(one, records)
    for start in range(0, len(records), chunk):
        part = records[start:start + chunk]
        many.process_batch("in", 0, list(range(start, start + len(part))), [k.encode() for k, _ in part],
                           [b"v"] * len(part), [ts for _, ts in part], [None] * len(part))
    one.flush_caches()
    many.flush_caches()
    assert out_one and out_many == out_one
    assert one.stream_time == many.stream_time
    assert list(one.raw_stores["w"].all()) == list(many.raw_stores["w"].all())


@pytest.mark.parametrize("chunk", [1, 9, 400])
@pytest.mark.parametrize("cache", [0, 4, 1000])
@pytest.mark.parametrize("kind", ["count", "reduce", "aggregate"])
@pytest.mark.parametrize("hopping", [False, True])
def test_batches_give_what_records_give(hopping: bool, kind: str, cache: int, chunk: int) -> None:
    windows = TimeWindows.of_size_and_grace(20, 10)
    _batched_vs_records(windows.advance_by(5) if hopping else windows, kind, cache, chunk)


def test_counts_are_exact_through_flushes() -> None:
    """Many keys and windows, flushed now and then, give the true counts in the last updates."""
    rt, out = _runtime(TimeWindows.of_size_and_grace(100, 10_000), 50)
    records = [(f"k{(i * 13) % 37}", (i * 7919) % 5000) for i in range(3000)]
    for start in range(0, len(records), 250):
        part = records[start:start + 250]
        rt.process_batch("in", 0, list(range(start, start + len(part))), [k.encode() for k, _ in part],
                         [b"v"] * len(part), [ts for _, ts in part], [None] * len(part))
        if start % 1000 == 0:
            rt.flush_caches()
    rt.flush_caches()
    last = {k: int(v) for k, v, _ in out}
    want: dict[str, int] = {}
    for k, ts in records:
        kw = f"{k}@{ts - ts % 100}-{ts - ts % 100 + 100}"
        want[kw] = want.get(kw, 0) + 1
    assert last == want
