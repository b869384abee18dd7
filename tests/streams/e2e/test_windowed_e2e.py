"""A windowed aggregation on the bundled broker: tumbling counts, final results only (suppress),
exact under exactly_once_v2 — also when the instance is killed with kill -9 and restarted.

The kill -9 test runs the application in a subprocess: this file itself
(``python test_windowed_e2e.py bootstrap views counts app_id state_dir``).
"""

from __future__ import annotations

import logging
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from strom.streams import Consumed, KafkaStreams, Produced, Serdes, StreamsBuilder, Topology
from strom.streams.dsl.suppress import BufferConfig, Suppressed
from strom.streams.dsl.windows import TimeWindows, WindowedSerdes
from strom.streams.runtime import State

if TYPE_CHECKING:
    from tests.streams.e2e.conftest import Rec, StreamsE2E

log = logging.getLogger(__name__)

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


def _decode(records: list[Rec]) -> Counter[tuple[str, int, int]]:
    """(page, window start, count) of each output record (a multiset: duplicates would show)."""
    out: Counter[tuple[str, int, int]] = Counter()
    for k, v, _ in records:
        w = WINDOWED.deserialize("out", k)
        n = LONG.deserialize("out", v)
        assert w is not None and n is not None  # final results: never a tombstone
        out[(w.key, w.start, n)] += 1
    return out


def _want(views: list[tuple[str, str, int]]) -> Counter[tuple[str, int, int]]:
    return Counter({(page, start, n): 1 for (page, start), n in expected(views).items()})


def test_tumbling_counts_final_results(streams_e2e: StreamsE2E, tmp_path: Path) -> None:
    e2e = streams_e2e
    tag = uuid.uuid4().hex[:8]
    views_t, counts_t, app_id = f"views-{tag}", f"counts-{tag}", f"pv-{tag}"
    e2e.create_topics((views_t, 2), (counts_t, 2))
    views = make_views(1500)
    e2e.produce(views_t, views, partition_of)
    want = _want(views)
    app = e2e.start(build(views_t, counts_t), app_id, tmp_path)
    try:
        # nothing is final before the flush records: only windows the views themselves closed
        early = _decode(e2e.read_committed(counts_t, lambda r: len(r) >= len(want) - 4, timeout=30))
        assert early and set(early) <= set(want)
        e2e.produce(views_t, flush_records(views))
        got = _decode(e2e.read_committed(counts_t, lambda r: len(r) >= len(want)))
        assert got == want
        assert not any(page == FLUSH for page, _, _ in got)
    finally:
        assert app.close(30)


def _wait_output(e2e: StreamsE2E, topic: str, more_than: int) -> None:
    e2e.wait_for(lambda: len(e2e.read_committed(topic, lambda r: len(r) > more_than, timeout=1.0, settle=0))
                 > more_than, 60, f"new output on {topic}")


def test_tumbling_counts_exact_after_kill9(streams_e2e: StreamsE2E, tmp_path: Path) -> None:
    """Two kill -9s: one once the first part of the input is consumed and committed (the windows
    still open then get no later update: only the restored suppress buffer can emit them), one
    in the middle of the second part (its open transaction is aborted). Every window's final
    count appears exactly once."""
    e2e = streams_e2e
    tag = uuid.uuid4().hex[:8]
    views_t, counts_t, app_id = f"views-{tag}", f"counts-{tag}", f"pv-{tag}"
    e2e.create_topics((views_t, 2), (counts_t, 2))
    views = make_views(6000, seed=9)
    first, second = views[:2000], [(p, u, ts + 3 * SIZE) for p, u, ts in views[2000:]]  # a gap between
    e2e.produce(views_t, first, partition_of)
    args = [sys.executable, __file__, e2e.bootstrap, views_t, counts_t, app_id, str(tmp_path)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        e2e.wait_consumed(app_id, [views_t])
        before = len(e2e.read_committed(counts_t, lambda r: True, timeout=2.0, settle=0))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert not (tmp_path / app_id / "0_0" / ".checkpoint").exists()  # a crash, not a clean close
        e2e.produce(views_t, second, partition_of)
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_output(e2e, counts_t, before)  # processing the second part
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        e2e.produce(views_t, flush_records(first + second))
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        want = _want(first + second)
        got = _decode(e2e.read_committed(counts_t, lambda r: len(r) >= len(want), timeout=120, settle=3.0))
        # every window exactly once, with its exact count: none lost, none emitted twice
        assert got == want
    finally:
        proc.kill()
        proc.wait(10)


def main() -> None:
    """The application alone, until it is killed (the kill -9 test's subprocess)."""
    logging.basicConfig(level=logging.INFO)
    bootstrap, views, counts, app_id, state_dir = sys.argv[1:6]
    app = KafkaStreams(build(views, counts), {
        "application.id": app_id, "bootstrap.servers": bootstrap, "processing.guarantee": "exactly_once_v2",
        "commit.interval.ms": 100, "state.dir": state_dir, "consumer.session.timeout.ms": 6000,
        "max.poll.records": 100})
    app.start()
    while app.state() is not State.ERROR:  # runs until killed; polls for a failure
        time.sleep(0.5)
    log.error("application failed: %s", app.errors())
    sys.exit(1)


if __name__ == "__main__":
    main()
