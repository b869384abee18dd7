"""LogManager: startup/recovery, checkpoints, clean shutdown marker, deletion, retention via maintenance."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from strom.core.config import BrokerConfig, LogConfig
from strom.core.exceptions import ConfigError
from strom.core.log.manager import LogManager
from strom.core.records.builder import SimpleRecord


def broker(dirs: list[Path], **extra: str) -> BrokerConfig:
    return BrokerConfig.from_mapping({"log.dirs": ",".join(map(str, dirs)), "node.id": "1", **extra})


def recs(n: int, start: int = 0, ts: int = 1000) -> list[SimpleRecord]:
    return [SimpleRecord(b"k%d" % i, b"v%d" % i, timestamp=ts) for i in range(start, start + n)]


def test_create_append_shutdown_restart(tmp_path: Path, appender: Any) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    mgr = LogManager(dirs, broker(dirs))
    mgr.startup()
    tid = uuid.uuid4()
    logs = [mgr.get_or_create_log("orders", p, tid) for p in range(4)]
    assert {log.dir.parent for log in logs} == set(dirs)  # spread over the dirs
    assert mgr.get_or_create_log("orders", 0) is logs[0]
    for i, log in enumerate(logs):
        appender(log, recs(i + 1))
        log.update_high_watermark(log.log_end_offset)
    mgr.shutdown()
    for d in dirs:
        assert (d / ".kafka_cleanshutdown").exists()
        lines = (d / "replication-offset-checkpoint").read_text().splitlines()
        assert lines[0] == "0" and int(lines[1]) == 2
    text = (dirs[0] / "recovery-point-offset-checkpoint").read_text()
    assert "orders 0 1" in text or "orders 1 2" in text

    mgr = LogManager(dirs, broker(dirs))
    mgr.startup()
    assert all(mgr.had_clean_shutdown.values())
    for d in dirs:
        assert not (d / ".kafka_cleanshutdown").exists()  # consumed at startup
    for p in range(4):
        loaded = mgr.get_log("orders", p)
        assert loaded is not None and loaded.log_end_offset == p + 1 and loaded.high_watermark == p + 1
        assert loaded.topic_id == tid
    mgr.shutdown()


def test_unclean_restart_recovers(tmp_path: Path, appender: Any) -> None:
    dirs = [tmp_path / "d"]
    mgr = LogManager(dirs, broker(dirs))
    mgr.startup()
    log = mgr.get_or_create_log("t", 0)
    for i in range(5):
        appender(log, recs(2, i * 2))
    mgr.checkpoint()
    seg = dirs[0] / "t-0" / "00000000000000000000.log"
    size = seg.stat().st_size
    with open(seg, "r+b") as f:  # tear the last batch, as a crash mid-write would
        f.truncate(size - 10)
    # No shutdown(): the marker is absent, as after kill -9 (whose death releases the dir locks).
    mgr.release_locks()
    mgr2 = LogManager(dirs, broker(dirs))
    mgr2.startup()
    assert not mgr2.had_clean_shutdown[dirs[0]]
    log2 = mgr2.get_log("t", 0)
    assert log2 is not None and log2.log_end_offset == 8
    mgr2.shutdown()


def test_unclean_restart_of_an_intact_log_is_quiet(tmp_path: Path, appender: Any,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """After kill -9 the active segment's preallocated indexes hold zeros past their entries.
    That is expected: recovery rebuilds them once, without calling them corrupt."""
    dirs = [tmp_path / "d"]
    mgr = LogManager(dirs, broker(dirs, **{"log.index.interval.bytes": "1"}))
    mgr.startup()
    log = mgr.get_or_create_log("t", 0)
    for i in range(20):
        appender(log, recs(5, i * 5))
    log.flush()
    # No shutdown(): no clean-shutdown marker, indexes left at their preallocated size.
    mgr.release_locks()
    caplog.set_level("INFO")
    mgr2 = LogManager(dirs, broker(dirs, **{"log.index.interval.bytes": "1"}))
    mgr2.startup()
    assert not mgr2.had_clean_shutdown[dirs[0]]
    assert not [r for r in caplog.records if "corrupt" in r.getMessage()], caplog.text
    log2 = mgr2.get_log("t", 0)
    assert log2 is not None and log2.log_end_offset == 100
    seg = log2.active_segment
    assert seg.offset_index.entries == 19  # one entry per batch after the first, rebuilt by recovery
    for offset in (0, 37, 99):
        got = log2.read(offset, 1_000_000, None, True)
        assert got.records and offset - 4 <= got.first_batch_offset <= offset
    mgr2.shutdown()


def test_meta_properties_node_id_mismatch(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "meta.properties").write_text("version=1\nnode.id=7\ncluster.id=x\n")
    first = LogManager([d], broker([d]))
    with pytest.raises(ConfigError, match=r"node\.id"):
        first.startup()
    first.release_locks()
    (d / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=x\n")
    mgr = LogManager([d], broker([d]))
    mgr.startup()
    assert mgr.meta_properties[d]["cluster.id"] == "x"


def test_delete_log_renames_then_removes(tmp_path: Path, appender: Any) -> None:
    dirs = [tmp_path / "d"]
    mgr = LogManager(dirs, broker(dirs))
    mgr.startup()
    log = mgr.get_or_create_log("gone", 0)
    appender(log, recs(3))
    assert mgr.delete_log("gone", 0)
    assert mgr.get_log("gone", 0) is None
    assert not (dirs[0] / "gone-0").exists()
    mgr.wait_for_deletions()
    assert not [p for p in dirs[0].iterdir() if p.name.startswith("gone-0")]
    # A leftover -delete dir (crash before removal) is removed at startup and never loaded.
    leftover = dirs[0] / f"x-0.{uuid.uuid4().hex}-delete"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"")
    mgr.shutdown()
    mgr = LogManager(dirs, broker(dirs))
    mgr.startup()
    mgr.wait_for_deletions()
    assert not leftover.exists() and mgr.get_log("x", 0) is None
    assert not mgr.delete_log("nope", 0)


def test_maintenance_runs_retention_and_flush(tmp_path: Path, appender: Any) -> None:
    dirs = [tmp_path / "d"]
    mgr = LogManager(dirs, broker(dirs))
    mgr.startup()
    config = LogConfig.build(broker(dirs), {"segment.bytes": "400", "retention.ms": "1000",
                                            "flush.messages": "10"})
    log = mgr.get_or_create_log("r", 0, config=config)
    for i in range(20):
        appender(log, recs(2, i * 2, ts=10_000 + i))
    log.update_high_watermark(log.log_end_offset)
    n = log.num_segments
    stats = mgr.run_maintenance(now_ms=10_000 + 5)  # nothing expired yet
    assert stats["segments_deleted"] == 0 and stats["logs_flushed"] == 1
    assert log.recovery_point == 40
    stats = mgr.run_maintenance(now_ms=10_000 + 20 + 1000 + 1)
    assert stats["segments_deleted"] == 0  # log.retention.check.interval.ms has not passed
    stats = mgr.run_maintenance(now_ms=10_000 + 20 + 1000 + 1, force=True)
    assert stats["segments_deleted"] == n
    assert log.log_start_offset == 40
    assert "r 0 40" in (dirs[0] / "log-start-offset-checkpoint").read_text()
    mgr.shutdown()
