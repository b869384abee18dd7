"""Compaction: latest value per key, offsets kept, tombstones and their delete horizon, swap safety."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from strom.core.log.cleaner import LogCleaner
from strom.core.log.log import Log
from strom.core.records.batch import iter_headers
from strom.core.records.builder import SimpleRecord, decode_records


def read_all(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 10**8).records
        got = [(r.offset, r.key, r.value) for r in decode_records(data) if r.offset >= offset]
        if not got:
            break
        out += got
        offset = got[-1][0] + 1
    return out


def compact_log(log_dir: Path, cfg: Any, **kw: Any) -> Log:
    return Log(log_dir, cfg(cleanup_policy="compact", segment_bytes=1500, min_cleanable_dirty_ratio=0.01, **kw))


def test_keeps_latest_value_per_key_at_its_offset(log_dir: Path, cfg: Any, appender: Any) -> None:
    log = compact_log(log_dir, cfg)
    latest: dict[bytes, tuple[int, bytes]] = {}
    for i in range(200):
        key = b"key-%d" % (i % 7)
        value = b"value-%d" % i
        info = appender(log, [SimpleRecord(key, value, timestamp=1000 + i)])
        latest[key] = (info.first_offset, value)
    log.update_high_watermark(log.log_end_offset)
    before_size = log.size_in_bytes
    active_base = log.active_segment.base_offset
    cleaner = LogCleaner()
    result = cleaner.clean(log, now_ms=2000)
    assert result is not None and result.records_removed > 0 and result.end_offset == active_base
    assert log.size_in_bytes < before_size
    rows = read_all(log)
    cleaned = [r for r in rows if r[0] < active_base]
    # One record per key in the cleaned section; each is the latest of its key below the active segment.
    keys = [k for _, k, _ in cleaned]
    assert len(keys) == len(set(keys))
    for offset, k, v in cleaned:
        assert k is not None
        if latest[k][0] < active_base:
            assert (offset, v) == latest[k]
    # The active segment is untouched and every key still resolves to its latest value.
    final = {k: (o, v) for o, k, v in rows}
    assert final == latest
    # Offsets are preserved (gaps remain) and reads from any offset work.
    assert log.read(0, 10**6).first_batch_offset >= 0
    assert cleaner.clean(log, now_ms=2000) is None  # nothing dirty any more


def test_batches_keep_base_offset_and_producer_fields(log_dir: Path, cfg: Any, appender: Any) -> None:
    log = compact_log(log_dir, cfg)
    for i in range(40):
        appender(log, [SimpleRecord(b"a", b"1", timestamp=5), SimpleRecord(b"k%d" % i, b"x" * 30, timestamp=6)],
                 producer_id=77, producer_epoch=3, base_sequence=i * 2, epoch=4)
    log.update_high_watermark(log.log_end_offset)
    LogCleaner().clean(log, now_ms=100)
    first = log.log_segments()[0]
    data = first.log_path.read_bytes()
    headers = [h for _, h in iter_headers(data)]
    for h in headers:
        assert h.last_offset_delta == 1 and h.base_offset % 2 == 0
        assert (h.producer_id, h.producer_epoch, h.base_sequence) == (77, 3, h.base_offset)
        assert h.partition_leader_epoch == 4
    recs = list(decode_records(data, check_crc=True))
    assert all(r.key != b"a" for r in recs)  # "a" is overwritten later in the log
    assert all(r.offset % 2 == 1 for r in recs)


def test_tombstones_kept_until_delete_retention_then_removed(log_dir: Path, cfg: Any, appender: Any) -> None:
    log = compact_log(log_dir, cfg, delete_retention_ms=1000)
    for i in range(60):
        appender(log, [SimpleRecord(b"k%d" % (i % 5), b"v%d" % i, timestamp=100 + i)])
    appender(log, [SimpleRecord(b"k1", None, timestamp=200)])  # tombstone for k1
    for i in range(40):
        appender(log, [SimpleRecord(b"z%d" % (i % 4), b"w%d" % i, timestamp=300 + i)])
    log.update_high_watermark(log.log_end_offset)
    cleaner = LogCleaner()
    assert cleaner.clean(log, now_ms=10_000) is not None
    rows = read_all(log)
    k1 = [(o, v) for o, k, v in rows if k == b"k1"]
    assert k1 == [(60, None)]  # only the tombstone survives; its older values are gone
    # The batch holding it now carries a delete horizon = now + delete.retention.ms.
    seg = next(s for s in log.log_segments() if s.base_offset <= 60 < s.base_offset + 10**6
               and s.translate_offset(60) is not None)
    found = seg.translate_offset(60)
    assert found is not None and found.header.has_delete_horizon and found.header.base_timestamp == 11_000
    # Before the horizon: kept, even when cleaning again.
    cleaner.clean(log, now_ms=10_500, force=True)
    assert [(o, v) for o, k, v in read_all(log) if k == b"k1"] == [(60, None)]
    # After it: the pending horizon alone makes the log eligible, and the tombstone goes.
    assert cleaner.clean(log, now_ms=11_001) is not None
    assert [o for o, k, _ in read_all(log) if k == b"k1"] == []
    assert {k for _, k, _ in read_all(log)} == {b"k0", b"k2", b"k3", b"k4", b"z0", b"z1", b"z2", b"z3"}


def test_dirty_ratio_and_min_compaction_lag(log_dir: Path, cfg: Any, appender: Any) -> None:
    log = Log(log_dir, cfg(cleanup_policy="compact", segment_bytes=1500, min_cleanable_dirty_ratio=0.99,
                           min_compaction_lag_ms=1000))
    for i in range(100):
        appender(log, [SimpleRecord(b"k%d" % (i % 3), b"v%d" % i, timestamp=1000 + i)])
    log.update_high_watermark(log.log_end_offset)
    cleaner = LogCleaner()
    # Everything is younger than min.compaction.lag.ms: nothing is cleanable.
    assert cleaner.cleanable_segments(log, 1500) == []
    assert cleaner.clean(log, now_ms=1500, force=True) is None
    # Old enough, fully dirty: ratio 1.0 > 0.99.
    assert cleaner.dirty_ratio(log, 10_000) == 1.0
    assert cleaner.clean(log, now_ms=10_000) is not None
    assert cleaner.dirty_ratio(log, 10_000) == 0.0
    # The first dirty offset is checkpointed in Kafka's format.
    text = (log_dir.parent / "cleaner-offset-checkpoint").read_text()
    assert text.startswith("0\n1\ntopic 0 ")


def test_cleaned_log_survives_reopen_and_recovery(log_dir: Path, cfg: Any, appender: Any) -> None:
    log = compact_log(log_dir, cfg)
    for i in range(100):
        appender(log, [SimpleRecord(b"k%d" % (i % 4), b"v%d" % i, timestamp=1000 + i)])
    log.update_high_watermark(log.log_end_offset)
    LogCleaner().clean(log, now_ms=5000)
    rows = read_all(log)
    log.close()
    assert not list(log_dir.glob("*.swap")) and not list(log_dir.glob("*.cleaned"))
    again = compact_log(log_dir, cfg)
    assert read_all(again) == rows
    again.close()
    recovered = Log(log_dir, cfg(cleanup_policy="compact", segment_bytes=1500), had_clean_shutdown=False)
    assert read_all(recovered) == rows and recovered.log_end_offset == 100
