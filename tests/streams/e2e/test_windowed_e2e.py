"""A windowed aggregation on the bundled broker: tumbling counts, final results only (suppress),
exact under exactly_once_v2 — also when the instance is killed with kill -9 and restarted."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from streams_e2e_util import Rec, create_topics, produce, read_committed, start, wait_consumed
from windowed_app import FLUSH, LONG, SIZE, WINDOWED, build, expected, flush_records, make_views, partition_of

from strom.core.testing import BrokerProcess


def _decode(records: list[Rec]) -> Counter[tuple[str, int, int]]:
    """(page, window start, count) of each output record (a multiset: duplicates would show)."""
    out: Counter[tuple[str, int, int]] = Counter()
    for k, v, _ in records:
        w = WINDOWED.deserialize("out", k)
        out[(w.key, w.start, LONG.deserialize("out", v))] += 1
    return out


def _want(views: list[tuple[str, str, int]]) -> Counter[tuple[str, int, int]]:
    return Counter({(page, start, n): 1 for (page, start), n in expected(views).items()})


def test_tumbling_counts_final_results(broker: BrokerProcess, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    views_t, counts_t, app_id = f"views-{tag}", f"counts-{tag}", f"pv-{tag}"
    create_topics(broker.bootstrap, (views_t, 2), (counts_t, 2))
    views = make_views(1500)
    produce(broker.bootstrap, views_t, views, partition_of)
    want = _want(views)
    app = start(build(views_t, counts_t), broker.bootstrap, app_id, tmp_path)
    try:
        # nothing is final before the flush records: only windows the views themselves closed
        early = _decode(read_committed(broker.bootstrap, counts_t, lambda r: len(r) >= len(want) - 4,
                                       timeout=30))
        assert early and set(early) <= set(want)
        produce(broker.bootstrap, views_t, flush_records(views))
        got = _decode(read_committed(broker.bootstrap, counts_t, lambda r: len(r) >= len(want)))
        assert got == want
        assert not any(page == FLUSH for page, _, _ in got)
    finally:
        assert app.close(30)


def _wait_output(bootstrap: str, topic: str, more_than: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if len(read_committed(bootstrap, topic, lambda r: len(r) > more_than, timeout=1.0, settle=0)) > more_than:
            return
    raise AssertionError(f"no new output on {topic} within 60 s")


def test_tumbling_counts_exact_after_kill9(broker: BrokerProcess, tmp_path: Path) -> None:
    """Two kill -9s: one once the first part of the input is consumed and committed (the windows
    still open then get no later update: only the restored suppress buffer can emit them), one
    in the middle of the second part (its open transaction is aborted). Every window's final
    count appears exactly once."""
    tag = uuid.uuid4().hex[:8]
    views_t, counts_t, app_id = f"views-{tag}", f"counts-{tag}", f"pv-{tag}"
    create_topics(broker.bootstrap, (views_t, 2), (counts_t, 2))
    views = make_views(6000, seed=9)
    first, second = views[:2000], [(p, u, ts + 3 * SIZE) for p, u, ts in views[2000:]]  # a gap between
    produce(broker.bootstrap, views_t, first, partition_of)
    script = Path(__file__).parent / "windowed_app.py"
    args = [sys.executable, str(script), broker.bootstrap, views_t, counts_t, app_id, str(tmp_path)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_consumed(broker.bootstrap, app_id, [views_t])
        before = len(read_committed(broker.bootstrap, counts_t, lambda r: True, timeout=2.0, settle=0))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert not (tmp_path / app_id / "0_0" / ".checkpoint").exists()  # a crash, not a clean close
        produce(broker.bootstrap, views_t, second, partition_of)
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_output(broker.bootstrap, counts_t, before)  # processing the second part
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        produce(broker.bootstrap, views_t, flush_records(first + second))
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        want = _want(first + second)
        got = _decode(read_committed(broker.bootstrap, counts_t, lambda r: len(r) >= len(want),
                                     timeout=120, settle=3.0))
        # every window exactly once, with its exact count: none lost, none emitted twice
        assert got == want
    finally:
        proc.kill()
        proc.wait(10)
