"""Tumbling-window page-view counts with final results only, shared by the tests and their
subprocess (``python windowed_app.py bootstrap views counts app_id state_dir``, for kill -9)."""

from __future__ import annotations

import random
import sys
import time
from collections import Counter

from strom.streams import Consumed, KafkaStreams, Produced, Serdes, StreamsBuilder, Topology
from strom.streams.dsl.suppress import BufferConfig, Suppressed
from strom.streams.dsl.windows import TimeWindows, WindowedSerdes

S = Serdes.string()
LONG = Serdes.long()
SIZE = 5_000
WINDOWED = WindowedSerdes.time_windowed(S, SIZE)
PAGES = [f"/page/{i}" for i in range(8)]
# two hours ago, on a window boundary: recent enough that topic retention keeps the records
T0 = (int(time.time() * 1000) // SIZE) * SIZE - 2 * 3600 * 1000
FLUSH = "~flush"


def build(views: str, counts: str) -> Topology:
    b = StreamsBuilder()
    (b.stream(views, Consumed.with_(S, S)).group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(SIZE, 0))
        .count(materialized="view-counts")
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("final"))
        .to_stream().to(counts, Produced.with_(WINDOWED, Serdes.long())))
    return b.build()


def partition_of(page: str | None) -> int:
    """Pages go to fixed partitions, so each partition's stream time is known."""
    return 0 if page is None or page == FLUSH else PAGES.index(page) % 2


def make_views(n: int, seed: int = 5) -> list[tuple[str, str, int]]:
    rng = random.Random(seed)
    return [(rng.choice(PAGES), f"user{rng.randint(0, 50)}", T0 + i * 37) for i in range(n)]


def flush_records(views: list[tuple[str, str, int]]) -> list[tuple[str, str, int, int]]:
    """One record per partition far in the future: closes every window of the views."""
    end = max(ts for _, _, ts in views) + 10 * SIZE
    return [(FLUSH, "x", end, p) for p in (0, 1)]


def expected(views: list[tuple[str, str, int]]) -> Counter[tuple[str, int]]:
    return Counter((page, (ts - ts % SIZE)) for page, _, ts in views)


def main() -> None:
    bootstrap, views, counts, app_id, state_dir = sys.argv[1:6]
    app = KafkaStreams(build(views, counts), {
        "application.id": app_id, "bootstrap.servers": bootstrap, "processing.guarantee": "exactly_once_v2",
        "commit.interval.ms": 100, "state.dir": state_dir, "consumer.session.timeout.ms": 6000,
        "max.poll.records": 100})
    app.start()
    print("started", flush=True)
    while True:
        time.sleep(0.5)
        if app.state().value == "ERROR":
            print("ERROR", app.errors(), flush=True)
            sys.exit(1)


if __name__ == "__main__":
    main()
