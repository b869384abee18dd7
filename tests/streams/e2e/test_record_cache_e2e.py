"""The record cache gives the same result in the TopologyTestDriver and on the bundled broker.

Lines are counted word by word per line key (``flat_map_values`` into ``count``), so one input
record updates its key several times. With the cache (``statestore.cache.max.bytes``) those
updates leave as one net update per key and commit; without it every update is forwarded. The
driver commits after every record, as Kafka's does; the application commits every
``commit.interval.ms``. Each round of input touches every key once, and the next round is sent
only once the previous round's output is committed, so the updates a commit coalesces are
exactly one record's in both: the per-key output sequences must be identical.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from strom.streams import Consumed, Grouped, Produced, Serdes, StreamsBuilder, Topology, TopologyTestDriver

if TYPE_CHECKING:
    from tests.streams.e2e.conftest import Rec, StreamsE2E

S = Serdes.string()
L = Serdes.long()
KEYS = [f"line{i}" for i in range(8)]
# two rounds; each touches every key once with several words
ROUNDS = [[(k, " ".join(["w"] * (i % 3 + 2))) for i, k in enumerate(KEYS)],
          [(k, " ".join(["w"] * (i % 2 + 1))) for i, k in enumerate(KEYS)]]


def build(lines: str, out: str) -> Topology:
    b = StreamsBuilder()
    (b.stream(lines, Consumed.with_(S, S))
        .flat_map_values(str.split)
        .group_by_key(Grouped.with_(S, S))
        .count(materialized="words")
        .to_stream()
        .to(out, Produced.with_(S, L)))
    return b.build()


def per_key(pairs: list[tuple[str, int]]) -> dict[str, list[int]]:
    """Each key's sequence of updates (the order across keys depends on partitions)."""
    out: dict[str, list[int]] = defaultdict(list)
    for k, v in pairs:
        out[k].append(v)
    return dict(out)


def driver_output(cache_bytes: int) -> dict[str, list[int]]:
    with TopologyTestDriver(build("lines", "out"), {"statestore.cache.max.bytes": cache_bytes}) as driver:
        lines = driver.create_input_topic("lines", S, S)
        for batch in ROUNDS:
            lines.pipe_key_value_list(batch)
        return per_key(driver.create_output_topic("out", S, L).read_key_values_to_list())


def decode(records: list[Rec]) -> list[tuple[str, int]]:
    out = []
    for k, v, _ in records:
        count = L.deserialize("out", v)
        assert k is not None and count is not None
        out.append((k.decode(), count))
    return out


def _at_least(n: int) -> Callable[[list[Rec]], bool]:
    return lambda records: len(records) >= n


@pytest.mark.parametrize("cache_bytes", [10 * 1024 * 1024, 0], ids=["cache-on", "cache-off"])
def test_cache_dependent_counts_match_driver(streams_e2e: StreamsE2E, tmp_path: Path, cache_bytes: int) -> None:
    want = driver_output(cache_bytes)
    # the result does depend on the cache: one update per key and round with it, one per word without
    updates_per_round = [len(KEYS) if cache_bytes else sum(len(v.split()) for _, v in batch) for batch in ROUNDS]
    assert sum(len(v) for v in want.values()) == sum(updates_per_round)

    tag = uuid.uuid4().hex[:8]
    lines_t, out_t, app_id = f"lines-{tag}", f"wordcounts-{tag}", f"cache-{tag}"
    streams_e2e.create_topics((lines_t, 2), (out_t, 2))
    app = streams_e2e.start(build(lines_t, out_t), app_id, tmp_path, **{"statestore.cache.max.bytes": cache_bytes})
    try:
        expected_total = 0
        now = int(time.time() * 1000)
        for batch, n in zip(ROUNDS, updates_per_round, strict=True):
            streams_e2e.produce(lines_t, [(k, v, now) for k, v in batch])
            expected_total += n
            # the round's output committed (read_committed) before the next round goes in
            got = streams_e2e.read_committed(out_t, _at_least(expected_total))
        assert per_key(decode(got)) == want
    finally:
        assert app.close(30)
