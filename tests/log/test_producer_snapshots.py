"""Producer-state snapshots and recovery: roll/close snapshots, restart, torn tails, kill -9."""

from __future__ import annotations

import logging
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import crc32c
import pytest

from strom.core.config import LogConfig
from strom.core.log.log import Log, LogAppendInfo
from strom.core.log.producer_state import read_snapshot
from strom.core.records.batch import iter_headers
from strom.core.records.builder import SimpleRecord, build_batch
from strom.core.records.validate import validate_produce_batches


def produce(log: Log, pid: int, epoch: int, seq: int, n: int = 2, *, transactional: bool = False) -> LogAppendInfo:
    ts = int(time.time() * 1000)
    buf = bytearray(build_batch([SimpleRecord(b"k", b"v%d" % (seq + i), (), ts) for i in range(n)],
                                producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                transactional=transactional))
    info = log.append_as_leader(buf, validate_produce_batches(buf, max_batch_bytes=10**8, now_ms=ts), 0)
    log.update_high_watermark(log.log_end_offset)
    return info


def state(log: Log) -> dict[int, tuple[int, int, int, int | None, int]]:
    """What a snapshot keeps of each producer: epoch, last sequence, last offset, txn start, coordinator epoch."""
    return {pid: (e.producer_epoch, e.last_seq, e.last_data_offset, e.current_txn_first_offset, e.coordinator_epoch)
            for pid, e in log.producer_state.producers.items()}


def crash(log: Log) -> None:
    """Drop the log like a killed process would: descriptors closed, nothing written on the way out."""
    for seg in log.log_segments():
        seg.close_handlers()
    log.closed = True


def snapshots(log_dir: Path) -> list[str]:
    return sorted(p.name for p in log_dir.glob("*.snapshot"))


def test_snapshot_at_roll_in_kafka_format(log_dir: Path, cfg: Callable[..., LogConfig]) -> None:
    log = Log(log_dir, cfg())
    produce(log, 1, 0, 0)
    produce(log, 2, 3, 0, transactional=True)
    log.roll()
    assert snapshots(log_dir) == ["00000000000000000004.snapshot"]
    data = (log_dir / "00000000000000000004.snapshot").read_bytes()
    # Parse Kafka's layout by hand: version, crc32c of the rest, count, 46-byte entries.
    version, crc, count = struct.unpack_from(">hIi", data)
    assert version == 1 and crc == crc32c.crc32c(data[6:]) and count == 2
    entries = sorted(struct.iter_unpack(">qhiqiqiq", data[10:]))
    assert [(e[0], e[1], e[2], e[3], e[4], e[7]) for e in entries] == [(1, 0, 1, 1, 1, -1), (2, 3, 1, 3, 1, 2)]
    log.close()


def test_segment_bytes_roll_writes_a_snapshot_and_restart_restores_state(log_dir: Path,
                                                                         cfg: Callable[..., LogConfig]) -> None:
    log = Log(log_dir, cfg(segment_bytes=400))
    for seq in range(0, 20, 2):
        produce(log, 1, 0, seq)
    produce(log, 2, 0, 0, transactional=True)
    assert log.num_segments > 2
    assert len(snapshots(log_dir)) == log.num_segments - 1
    before, lso, leo = state(log), log.last_stable_offset, log.log_end_offset
    log.close()
    assert f"{leo:020d}.snapshot" in snapshots(log_dir)
    reopened = Log(log_dir, cfg(segment_bytes=400), high_watermark=leo)
    assert state(reopened) == before
    assert reopened.last_stable_offset == lso
    # The last batch is still recognised as a duplicate after the restart.
    assert produce(reopened, 1, 0, 18).duplicate
    assert not produce(reopened, 1, 0, 20).duplicate
    reopened.close()


def test_restart_mid_transaction_then_abort_marker(log_dir: Path, cfg: Callable[..., LogConfig]) -> None:
    log = Log(log_dir, cfg())
    produce(log, 5, 0, 0, transactional=True)
    produce(log, 6, 0, 0)
    log.close()
    log = Log(log_dir, cfg(), high_watermark=4)
    assert log.last_stable_offset == 0
    log.append_control_marker(5, 0, False, 0, 0)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 5 and log.collect_aborted_transactions(0, 5) == [(5, 0)]
    log.close()


def test_state_is_rebuilt_from_the_log_when_the_snapshot_is_older(log_dir: Path,
                                                                   cfg: Callable[..., LogConfig]) -> None:
    log = Log(log_dir, cfg())
    produce(log, 1, 0, 0)
    log.roll()                                  # snapshot at 2
    produce(log, 1, 0, 2)
    produce(log, 2, 0, 0, transactional=True)   # 4-5
    produce(log, 3, 0, 0, transactional=True)   # 6-7
    log.append_control_marker(3, 0, False, 0, 0)   # 8: aborted, entry in segment 2's .txnindex
    log.flush()
    expected = state(log)
    crash(log)
    # The .txnindex lost its entry (written but not on disk at the crash): replay restores it.
    (log_dir / "00000000000000000002.txnindex").write_bytes(b"")
    log = Log(log_dir, cfg(), recovery_point=2, had_clean_shutdown=False, high_watermark=9)
    assert state(log) == expected
    assert log.last_stable_offset == 4
    assert log.collect_aborted_transactions(0, 9) == [(3, 6)]
    assert (log_dir / "00000000000000000002.txnindex").stat().st_size == 34
    log.close()


def test_torn_tail_truncates_producer_state(log_dir: Path, cfg: Callable[..., LogConfig],
                                            caplog: pytest.LogCaptureFixture) -> None:
    log = Log(log_dir, cfg())
    produce(log, 1, 0, 0)                        # 0-1
    produce(log, 2, 0, 0, transactional=True)   # 2-3
    log.append_control_marker(2, 0, False, 0, 0)   # 4 abort
    produce(log, 1, 0, 2)                        # 5-6 (will be torn)
    crash(log)
    seg = log_dir / "00000000000000000000.log"
    last_pos = list(iter_headers(seg.read_bytes()))[-1][0]
    with open(seg, "r+b") as f:
        f.truncate(last_pos + 30)
    with caplog.at_level(logging.WARNING):
        log = Log(log_dir, cfg(), recovery_point=0, had_clean_shutdown=False, high_watermark=10)
    assert "torn" in caplog.text
    assert log.log_end_offset == 5
    assert state(log)[1][1:3] == (1, 1)          # last sequence 1 at offset 1: the torn batch is gone
    assert log.collect_aborted_transactions(0, 5) == [(2, 2)]
    # The producer's retry of the torn batch is appended again (not a duplicate), where it was.
    info = produce(log, 1, 0, 2)
    assert (info.first_offset, info.duplicate) == (5, False)
    log.close()


def test_torn_abort_marker_reopens_the_transaction(log_dir: Path, cfg: Callable[..., LogConfig]) -> None:
    log = Log(log_dir, cfg())
    produce(log, 2, 0, 0, transactional=True)      # 0-1
    log.append_control_marker(2, 0, False, 0, 0)   # 2
    assert (log_dir / "00000000000000000000.txnindex").stat().st_size == 34
    crash(log)
    seg = log_dir / "00000000000000000000.log"
    with open(seg, "r+b") as f:
        f.truncate(seg.stat().st_size - 5)
    log = Log(log_dir, cfg(), recovery_point=0, had_clean_shutdown=False, high_watermark=3)
    assert log.log_end_offset == 2 and log.last_stable_offset == 0
    assert log.collect_aborted_transactions(0, 3) == []
    assert (log_dir / "00000000000000000000.txnindex").stat().st_size == 0
    log.close()


def test_truncate_to_rebuilds_producer_state(log_dir: Path, cfg: Callable[..., LogConfig]) -> None:
    log = Log(log_dir, cfg())
    produce(log, 1, 0, 0)
    log.roll()                                   # snapshot at 2
    produce(log, 1, 0, 2)
    log.roll()                                   # snapshot at 4
    produce(log, 1, 0, 4, transactional=True)
    log.truncate_to(3)                           # the batch 2-3 is cut whole: LEO 2
    assert log.log_end_offset == 2
    assert snapshots(log_dir) == ["00000000000000000002.snapshot"]
    assert state(log) == {1: (0, 1, 1, None, -1)}
    assert log.first_unstable_offset is None
    assert produce(log, 1, 0, 2).first_offset == 2
    log.close()


def test_corrupt_snapshot_falls_back_to_an_older_one(log_dir: Path, cfg: Callable[..., LogConfig],
                                                     caplog: pytest.LogCaptureFixture) -> None:
    log = Log(log_dir, cfg())
    produce(log, 1, 0, 0)
    log.roll()
    produce(log, 1, 0, 2, transactional=True)
    expected = state(log)
    log.close()
    newest = log_dir / "00000000000000000004.snapshot"
    data = bytearray(newest.read_bytes())
    data[-3] ^= 0xFF
    newest.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        log = Log(log_dir, cfg(), high_watermark=4)
    assert "corrupt producer snapshot" in caplog.text
    assert state(log) == expected and log.last_stable_offset == 2
    assert read_snapshot(log_dir / "00000000000000000002.snapshot")[0].last_seq == 1
    log.close()


def test_retention_deletes_snapshots_below_the_log_start(log_dir: Path, cfg: Callable[..., LogConfig]) -> None:
    log = Log(log_dir, cfg())
    for seq in range(0, 8, 2):
        produce(log, 1, 0, seq)
        log.roll()
    assert snapshots(log_dir) == [f"{o:020d}.snapshot" for o in (2, 4, 6, 8)]
    log.maybe_increment_log_start_offset(6)
    assert snapshots(log_dir) == [f"{o:020d}.snapshot" for o in (6, 8)]
    log.close()


def test_truncate_fully_drops_state_and_snapshots(log_dir: Path, cfg: Callable[..., LogConfig]) -> None:
    log = Log(log_dir, cfg())
    produce(log, 1, 0, 0, transactional=True)
    log.roll()
    log.truncate_fully_and_start_at(100)
    assert snapshots(log_dir) == [] and not log.producer_state.producers
    assert log.first_unstable_offset is None
    log.close()


_CHILD = textwrap.dedent("""
    import signal, sys, time
    from pathlib import Path
    from strom.core.config import LogConfig
    from strom.core.log.log import Log
    from strom.core.records.builder import SimpleRecord, build_batch
    from strom.core.records.validate import validate_produce_batches

    log = Log(Path(sys.argv[1]), LogConfig.defaults().with_overrides({"segment.bytes": 2000}))
    seqs = {}

    def produce(pid, transactional=False):
        ts = int(time.time() * 1000)
        seq = seqs.get(pid, 0)
        buf = bytearray(build_batch([SimpleRecord(b"k", b"x" * 50, (), ts) for _ in range(3)], producer_id=pid,
                                    producer_epoch=0, base_sequence=seq, transactional=transactional))
        log.append_as_leader(buf, validate_produce_batches(buf, max_batch_bytes=10**8, now_ms=ts), 0)
        seqs[pid] = seq + 3

    for i in range(30):
        produce(1)
        produce(2, transactional=True)
        if i % 10 == 9:
            log.append_control_marker(2, 0, i % 20 == 19, 0, 0)
        if i == 20:
            log.flush()
            print("RP", log.recovery_point, flush=True)
    produce(3, transactional=True)
    log.flush()
    print("LEO", log.log_end_offset, "SEQ1", seqs[1] - 1, "SEQ2", seqs[2] - 1, flush=True)
    print("READY", flush=True)
    signal.pause()  # until the test kills this process with SIGKILL
""")


def test_kill_9_rebuilds_producer_state_from_log_and_older_snapshot(log_dir: Path,
                                                                     cfg: Callable[..., LogConfig]) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(log_dir)], stdout=subprocess.PIPE, text=True)
    lines: list[list[str]] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.split())
            if line.startswith("READY"):
                break
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert lines and lines[-1] == ["READY"], lines
    recovery_point = int(lines[0][1])
    _, leo, _, seq1, _, seq2 = lines[1]
    snaps = [int(p.name.split(".")[0]) for p in log_dir.glob("*.snapshot")]
    assert snaps and max(snaps) > recovery_point  # some snapshots are newer than the recovery point
    log = Log(log_dir, cfg(segment_bytes=2000), recovery_point=recovery_point, had_clean_shutdown=False,
              high_watermark=int(leo))
    assert log.log_end_offset == int(leo)
    st = state(log)
    assert st[1][1] == int(seq1) and st[2][1] == int(seq2)
    # Producer 2's 30 batches: markers after 10, 20 (abort, commit alternate), 30 -> all closed; producer 3 open.
    assert set(log.producer_state.ongoing_transactions()) == {3}
    assert log.last_stable_offset == st[3][2] - 2
    aborted = log.collect_aborted_transactions(0, log.log_end_offset)
    assert [pid for pid, _ in aborted] == [2, 2]
    # Idempotence survives the crash: producer 1's last batch is a duplicate, the next is new.
    ts = int(time.time() * 1000)
    buf = bytearray(build_batch([SimpleRecord(b"k", b"x" * 50, (), ts) for _ in range(3)], producer_id=1,
                                producer_epoch=0, base_sequence=int(seq1) - 2))
    assert log.append_as_leader(buf, validate_produce_batches(buf, max_batch_bytes=10**8, now_ms=ts), 0).duplicate
    log.close()


def test_torn_txnindex_entry_is_dropped_on_load(log_dir: Path, cfg: Callable[..., LogConfig]) -> None:
    log = Log(log_dir, cfg())
    produce(log, 2, 0, 0, transactional=True)
    log.append_control_marker(2, 0, False, 0, 0)
    log.close()
    with open(log_dir / "00000000000000000000.txnindex", "ab") as f:
        f.write(b"\x00" * 10)  # half an entry, as a crash mid-write leaves it
    log = Log(log_dir, cfg(), high_watermark=3)
    assert (log_dir / "00000000000000000000.txnindex").stat().st_size == 34
    assert log.collect_aborted_transactions(0, 3) == [(2, 0)]
    log.close()


def test_compaction_keeps_the_txnindex_of_cleaned_segments(log_dir: Path, cfg: Callable[..., LogConfig]) -> None:
    from strom.core.log.cleaner import LogCleaner

    log = Log(log_dir, cfg(cleanup_policy="compact", min_cleanable_dirty_ratio=0.01))
    ts = int(time.time() * 1000)
    for i in range(20):  # duplicate keys for the cleaner to remove
        buf = bytearray(build_batch([SimpleRecord(b"key", b"v%d" % i, (), ts)]))
        log.append_as_leader(buf, validate_produce_batches(buf, max_batch_bytes=10**8, now_ms=ts, compacted=True), 0)
    buf = bytearray(build_batch([SimpleRecord(b"t", b"x", (), ts)], producer_id=4, producer_epoch=0,
                                base_sequence=0, transactional=True))
    log.append_as_leader(buf, validate_produce_batches(buf, max_batch_bytes=10**8, now_ms=ts, compacted=True), 0)
    log.append_control_marker(4, 0, False, 0, 0)       # offsets 20 (data), 21 (abort)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    assert LogCleaner().clean(log, now_ms=ts + 1000) is not None
    assert log.log_segments()[0].size < 22 * 70  # records were removed
    assert log.collect_aborted_transactions(0, 22) == [(4, 20)]
    assert (log_dir / "00000000000000000000.txnindex").stat().st_size == 34
    log.close()
