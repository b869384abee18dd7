"""The record cache of aggregations: one net update per key per flush, reads see the cache."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from strom.streams import (
    Consumed,
    Grouped,
    Processor,
    ProcessorContext,
    Produced,
    PunctuationType,
    Record,
    Serdes,
    StoreSpec,
    StreamsBuilder,
    Topology,
    TopologyTestDriver,
)
from strom.streams.dsl import processors as P
from strom.streams.dsl.graph import count_one, zero
from strom.streams.topology.runtime import TopologyRuntime


def _count_topology() -> Any:
    builder = StreamsBuilder()
    (builder.stream("words", Consumed.with_(Serdes.string(), Serdes.string()))
        .group_by_key(Grouped.with_(Serdes.string(), Serdes.string()))
        .count(materialized="counts")
        .to_stream()
        .to("out", Produced.with_(Serdes.string(), Serdes.long())))
    return builder.build()


def _run(cache_max_entries: int) -> tuple[TopologyRuntime, list[tuple[str, int]]]:
    out: list[tuple[str, int]] = []

    def emit(topic: str, key: bytes | None, value: bytes | None, ts: int, headers: Any) -> None:
        assert key is not None and value is not None
        out.append((key.decode(), struct.unpack(">q", value)[0]))

    runtime = TopologyRuntime(_count_topology(), "app", emit, cache_max_entries=cache_max_entries)
    return runtime, out


def _pipe(runtime: TopologyRuntime, keys: str, start_offset: int = 0) -> None:
    for i, k in enumerate(keys):
        runtime.process_input("words", 0, start_offset + i, k.encode(), b"x", 1000 + i)


def test_without_cache_every_update_flows() -> None:
    runtime, out = _run(0)
    _pipe(runtime, "abab a")
    assert out == [("a", 1), ("b", 1), ("a", 2), ("b", 2), (" ", 1), ("a", 3)]


def test_cache_forwards_one_net_update_per_key_at_flush() -> None:
    runtime, out = _run(100)
    _pipe(runtime, "ababa")
    assert out == []  # nothing leaves before the flush (the commit)
    store = runtime.stores["counts"]
    assert store.get("a") == 3 and store.get("b") == 2  # reads see the cached values
    assert dict(store.all()) == {"a": 3, "b": 2}
    runtime.flush_caches()
    assert out == [("a", 3), ("b", 2)]
    # after the flush the store holds the values and the next round starts from them
    _pipe(runtime, "b", 5)
    runtime.flush_caches()
    assert out[-1] == ("b", 3)
    runtime.flush_caches()  # nothing dirty: nothing sent
    assert len(out) == 3


def test_cache_overflow_flushes_early() -> None:
    runtime, out = _run(2)
    _pipe(runtime, "abc")  # a third dirty key overflows a cache of two
    assert sorted(out) == [("a", 1), ("b", 1), ("c", 1)]


# -- the TopologyTestDriver runs the cache and changelog layers of a task ------------------

def _words_per_line() -> Topology:
    """Words of each line counted per line key: one input record updates its key many times."""
    builder = StreamsBuilder()
    (builder.stream("lines", Consumed.with_(Serdes.string(), Serdes.string()))
        .flat_map_values(str.split)
        .group_by_key(Grouped.with_(Serdes.string(), Serdes.string()))
        .count(materialized="counts")
        .to_stream()
        .to("out", Produced.with_(Serdes.string(), Serdes.long())))
    return builder.build()


def _drive(config: dict[str, Any]) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(output, changelog) of two lines per key through the driver."""
    with TopologyTestDriver(_words_per_line(), {"application.id": "wc", **config}) as driver:
        lines = driver.create_input_topic("lines", Serdes.string(), Serdes.string())
        lines.pipe_key_value_list([("k1", "a b c"), ("k2", "d e"), ("k1", "f g")])
        out = driver.create_output_topic("out", Serdes.string(), Serdes.long()).read_key_values_to_list()
        changelog = driver.create_output_topic("wc-counts-changelog", Serdes.string(), Serdes.long())
        assert "wc-counts-changelog" in driver.producer_topic_names()
        return out, changelog.read_key_values_to_list()


def test_driver_coalesces_one_records_updates_with_caching_on_by_default() -> None:
    """Kafka's driver commits after every record, so with the cache (statestore.cache.max.bytes,
    10 MiB by default) the updates one record makes to a key leave as one."""
    out, changelog = _drive({})
    assert out == [("k1", 3), ("k2", 2), ("k1", 5)]
    assert changelog == out  # one changelog record per key and commit, as a task writes it


def test_driver_forwards_every_update_with_caching_off() -> None:
    out, changelog = _drive({"statestore.cache.max.bytes": 0})
    assert out == [("k1", 1), ("k1", 2), ("k1", 3), ("k2", 1), ("k2", 2), ("k1", 4), ("k1", 5)]
    # the change-logging layer still sends the last value per key and commit
    assert changelog == [("k1", 3), ("k2", 2), ("k1", 5)]


def test_driver_commits_stores_with_their_changelog_offsets(tmp_path: Path) -> None:
    with TopologyTestDriver(_words_per_line(), {"application.id": "wc", "state.dir": str(tmp_path)}) as driver:
        lines = driver.create_input_topic("lines", Serdes.string(), Serdes.string())
        lines.pipe_key_value_list([("k1", "a b c"), ("k2", "d e")])
        store = driver.runtime.raw_stores["counts"]
        assert store.committed_offsets() == {("wc-counts-changelog", 0): 2}
        lines.pipe_input("k1", "f")
        assert store.committed_offsets() == {("wc-counts-changelog", 0): 3}


class _HoldUntilWallClock(Processor[str, str]):
    """Forwards what it received only from a wall-clock punctuation (every second)."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.held: list[Record[str, str]] = []
        context.schedule(1000, PunctuationType.WALL_CLOCK_TIME, self._release)

    def process(self, record: Record[str, str]) -> None:
        self.held.append(record)

    def _release(self, now: int) -> None:
        held, self.held = self.held, []
        for record in held:
            self.context.forward(record)


def _punctuated_count() -> Topology:
    t = Topology()
    t.add_source("src", "in", key_serde=Serdes.string(), value_serde=Serdes.string())
    t.add_processor("hold", _HoldUntilWallClock, "src")
    t.add_processor("count", lambda: P.StreamAggregate("counts", zero, count_one, None), "hold")
    t.add_state_store(StoreSpec("counts", key_serde=Serdes.string(), value_serde=Serdes.long()), "count")
    t.add_processor("to-stream", lambda: P.TableToStream(None), "count")
    t.add_sink("out", "out", "to-stream", key_serde=Serdes.string(), value_serde=Serdes.long())
    return t


@pytest.mark.parametrize("cache_bytes,want", [(10 * 1024 * 1024, [("k", 3)]),
                                              (0, [("k", 1), ("k", 2), ("k", 3)])])
def test_driver_commits_after_advancing_the_wall_clock(cache_bytes: int, want: list[tuple[str, int]]) -> None:
    """Updates a wall-clock punctuation makes leave the cache at the commit that follows it."""
    with TopologyTestDriver(_punctuated_count(), {"statestore.cache.max.bytes": cache_bytes},
                            initial_wall_clock_ms=0) as driver:
        driver.create_input_topic("in", Serdes.string(), Serdes.string()).pipe_key_value_list(
            [("k", "a"), ("k", "b"), ("k", "c")])
        out = driver.create_output_topic("out", Serdes.string(), Serdes.long())
        assert out.is_empty()
        driver.advance_wall_clock_time(1000)
        assert out.read_key_values_to_list() == want
