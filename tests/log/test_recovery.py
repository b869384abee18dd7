"""Recovery: torn tails, corrupt batches, missing/corrupt indexes, garbage, kill -9, interrupted swaps."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from strom.core.log.log import Log
from strom.core.records.batch import iter_headers
from strom.core.records.builder import SimpleRecord, decode_records


def fill(log: Log, appender: Any, batches: int, per_batch: int = 3) -> None:
    for i in range(batches):
        appender(log, [SimpleRecord(b"k%d" % (i * per_batch + j), b"v%d" % (i * per_batch + j),
                                    timestamp=1000 + i) for j in range(per_batch)])


def batch_positions(path: Path) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of every batch in a segment file."""
    return [(pos, h.size, h.base_offset) for pos, h in iter_headers(path.read_bytes())]


def all_offsets(log: Log) -> list[int]:
    """Every offset in the log, reading segment after segment."""
    out: list[int] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = [r.offset for r in decode_records(log.read(offset, 10**8).records) if r.offset >= offset]
        assert got, f"nothing read at {offset}"
        out += got
        offset = got[-1] + 1
    return out


SEG0 = "00000000000000000000.log"


def test_torn_tail_is_truncated_to_last_whole_batch(log_dir: Path, cfg: Any, appender: Any, caplog: Any) -> None:
    log = Log(log_dir, cfg(index_interval_bytes=50))
    fill(log, appender, 10)
    log.close()
    path = log_dir / SEG0
    pos, size, _ = batch_positions(path)[-1]
    os.truncate(path, pos + size // 2)
    with caplog.at_level(logging.WARNING):
        log = Log(log_dir, cfg(index_interval_bytes=50), had_clean_shutdown=False)
    assert log.log_end_offset == 27
    assert all_offsets(log) == list(range(27))
    assert path.stat().st_size == pos
    assert any(SEG0 in r.getMessage() and f"at byte {pos}" in r.getMessage() and "torn" in r.getMessage()
               for r in caplog.records)
    assert log.active_segment.offset_index.lookup(26).position <= pos
    assert appender(log, [SimpleRecord(b"x", b"y", timestamp=5)]).first_offset == 27


def test_flipped_byte_truncates_at_corrupt_batch_and_drops_later_segments(log_dir: Path, cfg: Any, appender: Any, caplog: Any) -> None:
    config = cfg(segment_bytes=1200, index_interval_bytes=50)
    log = Log(log_dir, config)
    fill(log, appender, 40)
    bases = [s.base_offset for s in log.log_segments()]
    assert len(bases) >= 3
    log.close()
    victim = log_dir / f"{bases[1]:020d}.log"
    batches = batch_positions(victim)
    mid_pos, mid_size, mid_base = batches[len(batches) // 2]
    data = bytearray(victim.read_bytes())
    data[mid_pos + mid_size - 5] ^= 0x55  # inside the records: only the CRC can tell
    victim.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        log = Log(log_dir, config, recovery_point=0, had_clean_shutdown=False)
    assert log.log_end_offset == mid_base
    assert all_offsets(log) == list(range(mid_base))
    assert [s.base_offset for s in log.log_segments()] == bases[:2]
    for b in bases[2:]:
        assert not (log_dir / f"{b:020d}.log").exists()
    msgs = [r.getMessage() for r in caplog.records]
    assert any(victim.name in m and f"at byte {mid_pos}" in m and "CRC mismatch" in m for m in msgs), msgs


def test_recovery_starts_at_recovery_point(log_dir: Path, cfg: Any, appender: Any) -> None:
    config = cfg(segment_bytes=1200)
    log = Log(log_dir, config)
    fill(log, appender, 40)
    bases = [s.base_offset for s in log.log_segments()]
    log.close()
    # Corrupt the first segment, but claim it was flushed: only later segments are scanned.
    first = log_dir / SEG0
    data = bytearray(first.read_bytes())
    data[-3] ^= 0xFF
    first.write_bytes(bytes(data))
    log = Log(log_dir, config, recovery_point=bases[-1], had_clean_shutdown=False)
    assert log.log_end_offset == 120
    log.close()
    log = Log(log_dir, config, recovery_point=0, had_clean_shutdown=False)
    assert log.num_segments == 1 and log.log_end_offset < bases[1]


@pytest.mark.parametrize("damage", ["delete", "truncate", "unordered"])
def test_bad_indexes_are_rebuilt_even_after_clean_shutdown(log_dir: Path, cfg: Any, appender: Any, damage: str, caplog: Any) -> None:
    config = cfg(segment_bytes=2000, index_interval_bytes=60)
    log = Log(log_dir, config)
    fill(log, appender, 40)
    expected = {s.base_offset: (s.offset_index.entries, s.time_index.entries) for s in log.log_segments()}
    log.close()
    idx = log_dir / SEG0.replace(".log", ".index")
    tidx = log_dir / SEG0.replace(".log", ".timeindex")
    if damage == "delete":
        idx.unlink()
        tidx.unlink()
    elif damage == "truncate":
        os.truncate(idx, idx.stat().st_size - 3)
        os.truncate(tidx, tidx.stat().st_size - 5)
    else:
        raw = bytearray(idx.read_bytes())
        raw[0:8], raw[8:16] = raw[8:16], raw[0:8]
        idx.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING):
        log = Log(log_dir, config, had_clean_shutdown=True)
    assert any("rebuilding" in r.getMessage() for r in caplog.records)
    seg = log.log_segments()[0]
    assert (seg.offset_index.entries, seg.time_index.entries) == expected[0]
    assert idx.exists() and tidx.exists()
    for target in range(0, 120, 7):
        got = log.read(target, 1)
        assert got.first_batch_offset == target - target % 3
    assert log.fetch_offset_by_timestamp(1020) == (60, 1020, 0)


def test_garbage_appended_is_cut(log_dir: Path, cfg: Any, appender: Any, caplog: Any) -> None:
    log = Log(log_dir, cfg())
    fill(log, appender, 5)
    log.close()
    path = log_dir / SEG0
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(os.urandom(5000))
    with caplog.at_level(logging.WARNING):
        log = Log(log_dir, cfg(), had_clean_shutdown=False)
    assert path.stat().st_size == size
    assert all_offsets(log) == list(range(15))
    assert any("truncating 5000 bytes" in r.getMessage() for r in caplog.records)


def test_zero_filled_tail_is_cut(log_dir: Path, cfg: Any, appender: Any) -> None:
    log = Log(log_dir, cfg())
    fill(log, appender, 5)
    log.close()
    path = log_dir / SEG0
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"\x00" * 4096)  # what a file system can leave after a power loss
    log = Log(log_dir, cfg(), had_clean_shutdown=False)
    assert path.stat().st_size == size and log.log_end_offset == 15


def test_interrupted_compaction_swap_is_completed(log_dir: Path, cfg: Any, appender: Any) -> None:
    config = cfg(segment_bytes=600)
    log = Log(log_dir, config)
    fill(log, appender, 20)
    first = log.log_segments()[0]
    log.close()
    # A .swap for segment 0 holding only its first batch (as a cleaner would have left it).
    _pos, size, _ = batch_positions(log_dir / SEG0)[0]
    (log_dir / (SEG0 + ".swap")).write_bytes((log_dir / SEG0).read_bytes()[:size])
    (log_dir / "00000000000000000003.log.cleaned").write_bytes(b"half written")
    log = Log(log_dir, config)
    assert not list(log_dir.glob("*.swap")) and not list(log_dir.glob("*.cleaned"))
    assert log.log_segments()[0].size == size < first.size
    offsets = all_offsets(log)
    assert offsets[:3] == [0, 1, 2] and offsets[3] == log.log_segments()[1].base_offset
    assert offsets[3:] == list(range(offsets[3], 60))


KILL_SCRIPT = textwrap.dedent("""
    import sys
    from strom.core.config import LogConfig
    from strom.core.log.log import Log
    from strom.core.records.builder import SimpleRecord, build_batch
    from strom.core.records.validate import validate_produce_batches

    cfg = LogConfig.defaults().with_overrides({"segment.bytes": "20000", "index.interval.bytes": "300"})
    log = Log(sys.argv[1], cfg, had_clean_shutdown=False)
    i = 0
    while True:
        recs = [SimpleRecord(b"k%d" % (i * 4 + j), b"value-%d" % (i * 4 + j) * 5, timestamp=i) for j in range(4)]
        buf = bytearray(build_batch(recs))
        batches = validate_produce_batches(buf, max_batch_bytes=10**6, now_ms=0)
        info = log.append_as_leader(buf, batches, 0)
        print(info.last_offset, flush=True)
        i += 1
""")


def test_kill_9_during_appends_loses_no_acknowledged_record(log_dir: Path, cfg: Any) -> None:
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(log_dir)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    acked = -1
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            acked = int(line)
            if acked >= 2000:
                break
        proc.send_signal(signal.SIGKILL)
        rest, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert acked >= 2000, err
    for line in rest.split():
        acked = max(acked, int(line))
    log = Log(log_dir, cfg(segment_bytes=20000, index_interval_bytes=300), had_clean_shutdown=False)
    assert log.num_segments > 3
    assert log.log_end_offset >= acked + 1
    offset = 0
    while offset <= acked:
        for r in decode_records(log.read(offset, 10**8).records):
            if r.offset >= offset:
                assert r.offset == offset and r.value == b"value-%d" % offset * 5
                offset += 1
    assert offset >= acked + 1


def test_leader_epochs_survive_a_crash_whether_or_not_their_checkpoint_was_written(
        log_dir: Path, cfg: Any, appender: Any) -> None:
    """The first append of an epoch writes no checkpoint; the flush writes it before it moves the
    recovery point, and recovery re-assigns the epochs above the recovery point from the batches.
    A crash (no close) at any point leaves the whole epoch history."""
    config = cfg(segment_bytes=1200)
    log = Log(log_dir, config)
    for epoch in (1, 2):
        for _ in range(8):
            appender(log, [SimpleRecord(b"k", b"v" * 20, timestamp=1000)], epoch=epoch)
    log.flush()  # an fsynced checkpoint with epochs 1 and 2, then the recovery point moves
    recovery_point = log.recovery_point
    assert recovery_point == 16 and log.num_segments > 1
    for _ in range(8):
        appender(log, [SimpleRecord(b"k", b"v" * 20, timestamp=1000)], epoch=5)
    assert log.epoch_cache.entries() == [(1, 0), (2, 8), (5, 16)]
    # kill -9 now: the checkpoint on disk still ends at epoch 2; recovery finds epoch 5.
    crashed = Log(log_dir, config, recovery_point=recovery_point, had_clean_shutdown=False)
    assert crashed.epoch_cache.entries() == [(1, 0), (2, 8), (5, 16)]
    assert crashed.end_offset_for_epoch(2) == (2, 16)
    crashed.close()
    assert Log(log_dir, config).epoch_cache.entries() == [(1, 0), (2, 8), (5, 16)]
