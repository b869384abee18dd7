"""Retention holds the log's lock for one segment at a time: appends go on during a long pass.

The retention pass runs in its own thread, as the broker's maintenance does. A trace function
on that thread (observation only: the code under test runs unchanged) stops it each time it
deletes a segment's files; while it is stopped the test appends from another thread and waits,
with a deadline, for the append to complete. Before the split, the whole pass held the lock
and the first append blocked until the pass ended.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from strom.core.log.log import Log
from strom.core.log.segment import LogSegment
from strom.core.records.builder import SimpleRecord

SEGMENTS = 40
DEADLINE_S = 10.0


def _records(n: int, ts: int) -> list[SimpleRecord]:
    return [SimpleRecord(b"k%d" % i, b"v" * 40, timestamp=ts) for i in range(n)]


def test_appends_complete_between_the_segment_deletions_of_one_retention_pass(
        log_dir: Path, cfg: Any, appender: Any) -> None:
    log = Log(log_dir, cfg(segment_bytes=400, retention_ms=1000))
    while log.num_segments < SEGMENTS:
        appender(log, _records(3, ts=1000))
    keep_from = log.log_end_offset
    appender(log, _records(1, ts=10**12))  # a recent active segment, kept by retention
    log.update_high_watermark(log.log_end_offset)
    before = log.num_segments

    paused = threading.Semaphore(0)
    resume = threading.Semaphore(0)
    delete_code = LogSegment.delete.__code__

    def tracer(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code is delete_code:
            paused.release()
            resume.acquire(timeout=DEADLINE_S * 2)

    deleted: list[int] = []

    def retention() -> None:
        sys.settrace(tracer)
        try:
            deleted.append(log.delete_old_segments(now_ms=10**12))
        finally:
            sys.settrace(None)

    worker = threading.Thread(target=retention, name="retention")
    worker.start()
    appended_during_pass = 0
    appenders: list[threading.Thread] = []
    blocked = False
    try:
        for _ in range(before - 1):
            assert paused.acquire(timeout=DEADLINE_S), "the retention pass never deleted a segment"
            done = threading.Event()

            def append_one(done: threading.Event = done) -> None:
                appender(log, _records(1, ts=10**12))
                log.update_high_watermark(log.log_end_offset)
                done.set()

            t = threading.Thread(target=append_one)
            appenders.append(t)
            t.start()
            # The pass is stopped between two segment operations: the append must not wait for it.
            if not done.wait(DEADLINE_S):
                blocked = True
                break
            resume.release()
            t.join()
            appended_during_pass += 1
    finally:
        for _ in range(SEGMENTS * 2):  # let the pass run to its end whatever happened
            resume.release()
        worker.join()
        for t in appenders:
            t.join()
    assert not blocked, f"an append waited for the retention pass (after {appended_during_pass} appends)"
    assert deleted == [before - 1]
    assert appended_during_pass == before - 1
    # Every old segment went; every append made during the pass is in the log.
    assert log.log_start_offset == keep_from
    assert log.log_end_offset - keep_from == 1 + appended_during_pass
    assert min(s.largest_timestamp for s in log.log_segments()) == 10**12
