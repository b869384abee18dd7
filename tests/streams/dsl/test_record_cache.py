"""The record cache of aggregations: one net update per key per flush, reads see the cache."""

from __future__ import annotations

import struct
from typing import Any

from strom.streams import Consumed, Grouped, Produced, Serdes, StreamsBuilder
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
