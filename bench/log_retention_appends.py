"""Appends during a long retention pass: the pass takes the log's lock per segment (issue 29, item 4).

A real ``UnifiedLog`` gets ``--segments`` small segments whose records are all past
``retention.ms``; a maintenance thread runs one retention pass (``delete_old_segments``) while
the main thread appends one small batch after another, as produce requests would. Printed: the
pass's seconds, the appends completed while it ran, and the slowest and 99th-percentile append.
The same workload runs a second time with the pass wrapped in the log's lock, which is how the
pass held it before the split (one acquisition for the whole pass): the peer of this benchmark.

    python bench/log_retention_appends.py                     # 2,000 segments, both modes
    python bench/log_retention_appends.py --segments 5000 --json out.json

``tests/log/test_retention_lock.py`` checks the property without a clock: an append completes
while the pass is stopped between two segment deletions.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import threading
import time
from pathlib import Path

from strom.core.config import LogConfig
from strom.core.log.log import Log
from strom.core.records.builder import SimpleRecord, build_batch
from strom.core.records.validate import validate_produce_batches

logger = logging.getLogger(__name__)

OLD_TS = 1000
NOW_MS = 10**12


def _append(log: Log, ts: int) -> None:
    buf = bytearray(build_batch([SimpleRecord(b"k", b"v" * 100, timestamp=ts)]))
    log.append_as_leader(buf, validate_produce_batches(buf, max_batch_bytes=10**8, now_ms=ts), 0)
    log.update_high_watermark(log.log_end_offset)


def run(segments: int, whole_pass_lock: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        config = LogConfig.defaults().with_overrides({"segment.bytes": 1024, "retention.ms": 1000})
        log = Log(Path(tmp) / "bench-0", config)
        while log.num_segments < segments:
            _append(log, OLD_TS)
        _append(log, NOW_MS)
        # The appends during the pass go to one active segment (no roll), as a produce burst
        # within one segment would: the pass is what is measured.
        log.update_config(config.with_overrides({"segment.bytes": 1 << 30}))
        done = threading.Event()
        result: dict[str, float] = {}

        def retention() -> None:
            start = time.perf_counter()
            if whole_pass_lock:
                with log.lock:
                    result["deleted"] = log.delete_old_segments(NOW_MS)
            else:
                result["deleted"] = log.delete_old_segments(NOW_MS)
            result["pass_s"] = time.perf_counter() - start
            done.set()

        latencies: list[float] = []
        worker = threading.Thread(target=retention, name="retention")
        worker.start()
        while not done.is_set():
            t0 = time.perf_counter()
            _append(log, NOW_MS)
            latencies.append(time.perf_counter() - t0)
        worker.join()
        log.close()
    latencies.sort()
    result["appends_during_pass"] = len(latencies)
    result["max_append_ms"] = latencies[-1] * 1000
    result["p99_append_ms"] = latencies[int(len(latencies) * 0.99) - 1 if len(latencies) > 1 else 0] * 1000
    result["median_append_ms"] = statistics.median(latencies) * 1000
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, default=2000, help="segments the pass deletes")
    parser.add_argument("--json", dest="json_path", help="also write the results here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    rows = {"per-segment lock (strom)": run(args.segments, False),
            "whole-pass lock (before)": run(args.segments, True)}
    logger.info("%-26s %8s %10s %8s %12s %12s %12s", "mode", "deleted", "pass s", "appends",
                "median ms", "p99 ms", "max ms")
    for name, r in rows.items():
        logger.info("%-26s %8d %10.2f %8d %12.3f %12.3f %12.1f", name, r["deleted"], r["pass_s"],
                    r["appends_during_pass"], r["median_append_ms"], r["p99_append_ms"], r["max_append_ms"])
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
