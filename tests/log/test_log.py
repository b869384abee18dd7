"""Log: append/read, indexes, rolling, offsets, timestamps, log start, truncation, flush."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from strom.core.errors import OffsetOutOfRangeError, RecordListTooLargeError
from strom.core.log.log import Log
from strom.core.records.batch import iter_headers
from strom.core.records.builder import SimpleRecord


def recs(n: int, start: int = 0, ts: int = 1000, size: int = 20) -> list[SimpleRecord]:
    return [SimpleRecord(b"k%d" % (start + i), bytes([65 + i % 26]) * size, timestamp=ts + i) for i in range(n)]


def test_append_assigns_offsets_and_reads_back(log_dir: Path, cfg: Any, appender: Any, decode: Any) -> None:
    log = Log(log_dir, cfg())
    info = appender(log, recs(3))
    assert (info.first_offset, info.last_offset, info.log_append_time_ms) == (0, 2, -1)
    info = appender(log, recs(2, 3, ts=5000))
    assert (info.first_offset, info.last_offset, info.max_timestamp) == (3, 4, 5001)
    assert log.log_end_offset == 5
    got = log.read(0, 10**6)
    assert got.first_batch_offset == 0
    assert [o for o, _, _ in decode(got.records)] == [0, 1, 2, 3, 4]
    # Reading offset 1 returns the whole batch that contains it.
    got = log.read(1, 10**6)
    assert got.first_batch_offset == 0 and decode(got.records)[0][0] == 0
    assert log.read(5, 100).records == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6, 100)
    assert (log_dir / "00000000000000000000.log").stat().st_size == log.size_in_bytes


def test_batch_header_on_disk_has_offset_and_leader_epoch(log_dir: Path, cfg: Any, appender: Any) -> None:
    log = Log(log_dir, cfg())
    appender(log, recs(2), epoch=7)
    appender(log, recs(4), epoch=7)
    data = (log_dir / "00000000000000000000.log").read_bytes()
    headers = [h for _, h in iter_headers(data)]
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in headers] == [(0, 1, 7), (2, 5, 7)]
    assert log.end_offset_for_epoch(7) == (7, 6)
    # The first append of an epoch writes nothing (no fsync on the event loop); the flush,
    # off the loop, makes the checkpoint durable before it moves the recovery point.
    assert not (log_dir / "leader-epoch-checkpoint").exists()
    log.flush()
    assert (log_dir / "leader-epoch-checkpoint").read_text() == "0\n1\n7 0\n"
    assert log.recovery_point == 6


def test_read_bounds_max_bytes_min_one_message_and_max_offset(log_dir: Path, cfg: Any, appender: Any, decode: Any) -> None:
    log = Log(log_dir, cfg())
    sizes = []
    for i in range(5):
        info = appender(log, recs(2, i * 2))
        sizes.append(info.valid_bytes)
    one = sizes[0]
    # max_bytes smaller than a batch: nothing, unless min_one_message.
    assert log.read(0, one - 1, min_one_message=False).records == b""
    assert len(log.read(0, one - 1, min_one_message=True).records) == one
    # Only whole batches, never a partial one at the end.
    assert len(log.read(0, one * 2 + 5).records) == one * 2
    # max_offset (the HW): a batch is returned only if its base offset < max_offset.
    got = log.read(0, 10**6, max_offset=5)
    assert [o for o, _, _ in decode(got.records)] == [0, 1, 2, 3, 4, 5]
    assert log.read(6, 10**6, max_offset=6).records == b""
    assert log.read(4, 10**6, max_offset=4).records == b""


def test_sparse_index_entries_every_interval(log_dir: Path, cfg: Any, appender: Any) -> None:
    log = Log(log_dir, cfg(index_interval_bytes=500))
    for i in range(40):
        appender(log, recs(1, i, size=100))  # ~170-byte batches
    seg = log.active_segment
    n = seg.offset_index.entries
    assert 8 <= n <= 15  # one entry per ~500 bytes of log, not per batch
    for k in range(n):
        offset, position = seg.offset_index.entry(k)
        found = seg.translate_offset(offset)
        assert found is not None and found.position == position
    for target in range(40):
        found = seg.translate_offset(target)
        assert found is not None and found.header.base_offset == target


def test_roll_on_segment_bytes_and_reads_across_segments(log_dir: Path, cfg: Any, appender: Any, decode: Any) -> None:
    log = Log(log_dir, cfg(segment_bytes=1000, index_interval_bytes=100))
    for i in range(60):
        appender(log, recs(2, i * 2))
    assert log.num_segments > 5
    names = sorted(p.name for p in log_dir.glob("*.log"))
    bases = [s.base_offset for s in log.log_segments()]
    assert names == [f"{b:020d}.log" for b in bases]
    for seg in log.log_segments():
        assert seg.size <= 1000
    for s in log.log_segments()[:-1]:
        # Rolled segments have their indexes trimmed to their entries.
        assert s.offset_index.path.stat().st_size == s.offset_index.entries * 8
    got = log.read(0, 10**7)
    offsets = [o for o, _, _ in decode(got.records)]
    assert offsets[0] == 0 and offsets == list(range(offsets[-1] + 1))  # one segment per read
    for target in (0, 33, 64, 119):
        got = log.read(target, 10**6)
        assert got.first_batch_offset <= target <= decode(got.records)[-1][0]
    with pytest.raises(RecordListTooLargeError):
        appender(log, recs(1, size=2000))


def test_roll_on_segment_ms_uses_batch_timestamps(log_dir: Path, cfg: Any, appender: Any) -> None:
    log = Log(log_dir, cfg(segment_ms=1000))
    appender(log, recs(1, ts=10_000))
    appender(log, recs(1, ts=10_900))
    assert log.num_segments == 1
    appender(log, recs(1, ts=11_001))
    assert [s.base_offset for s in log.log_segments()] == [0, 2]


def test_roll_when_offset_index_full(log_dir: Path, cfg: Any, appender: Any) -> None:
    log = Log(log_dir, cfg(segment_index_bytes=24, index_interval_bytes=1))
    for i in range(12):
        appender(log, recs(1, i))
    assert log.num_segments >= 3
    assert [s.base_offset for s in log.log_segments()] == sorted({s.base_offset for s in log.log_segments()})


def test_log_append_time(log_dir: Path, cfg: Any, appender: Any, decode: Any) -> None:
    clock = [123_456]
    log = Log(log_dir, cfg(message_timestamp_type="LogAppendTime"), clock=lambda: clock[0])
    info = appender(log, recs(3, ts=5))
    assert info.log_append_time_ms == 123_456 and info.max_timestamp == 123_456
    _, h = next(iter_headers(log.read(0, 10**6).records))
    assert h.timestamp_type == 1 and h.max_timestamp == 123_456


def test_fetch_offset_by_timestamp(log_dir: Path, cfg: Any, appender: Any) -> None:
    log = Log(log_dir, cfg(segment_bytes=600, index_interval_bytes=50))
    for i in range(30):
        appender(log, recs(2, i * 2, ts=1000 + i * 10), epoch=i // 10)
    assert log.num_segments > 2
    assert log.fetch_offset_by_timestamp(-2) == (0, -1, 0)
    assert log.fetch_offset_by_timestamp(-1) == (60, -1, 2)
    # Batch i holds timestamps 1000+10i and 1001+10i at offsets 2i and 2i+1.
    assert log.fetch_offset_by_timestamp(1000) == (0, 1000, 0)
    assert log.fetch_offset_by_timestamp(1001) == (1, 1001, 0)
    assert log.fetch_offset_by_timestamp(1002) == (2, 1010, 0)
    assert log.fetch_offset_by_timestamp(1155) == (32, 1160, 1)
    assert log.fetch_offset_by_timestamp(1291) == (59, 1291, 2)
    assert log.fetch_offset_by_timestamp(1292) is None
    assert log.fetch_offset_by_timestamp(-3) == (59, 1291, 2)
    assert log.fetch_offset_by_timestamp(0) == (0, 1000, 0)


def test_delete_records_moves_log_start_and_deletes_segments(log_dir: Path, cfg: Any, appender: Any) -> None:
    log = Log(log_dir, cfg(segment_bytes=500))
    for i in range(30):
        appender(log, recs(2, i * 2))
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(10)  # above the high watermark (0)
    log.update_high_watermark(60)
    assert log.high_watermark == 60
    n_before = log.num_segments
    bases = [s.base_offset for s in log.log_segments()]
    target = bases[2] + 1
    assert log.maybe_increment_log_start_offset(target)
    assert log.log_start_offset == target
    assert [s.base_offset for s in log.log_segments()] == bases[2:]
    assert log.num_segments == n_before - 2
    assert not (log_dir / f"{bases[0]:020d}.log").exists()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(target - 1, 100)
    assert log.read(target, 10**6).first_batch_offset <= target
    assert not log.maybe_increment_log_start_offset(target - 1)
    earliest = log.fetch_offset_by_timestamp(-2)
    assert earliest is not None and earliest[0] == target


def test_truncate_to(log_dir: Path, cfg: Any, appender: Any, decode: Any) -> None:
    log = Log(log_dir, cfg(segment_bytes=500))
    for i in range(20):
        appender(log, recs(2, i * 2), epoch=i // 5)
    log.update_high_watermark(40)
    assert log.truncate_to(21)  # inside batch [20, 21]: the whole batch goes
    assert log.log_end_offset == 20 and log.high_watermark == 20
    assert decode(log.read(18, 10**6).records)[-1][0] == 19
    # Epoch 2 started at offset 20 (batch 10), so its entry is gone too.
    assert log.epoch_cache.latest_epoch == 1 and log.end_offset_for_epoch(1) == (1, 20)
    info = appender(log, recs(1), epoch=9)
    assert info.first_offset == 20
    assert log.end_offset_for_epoch(1) == (1, 20) and log.end_offset_for_epoch(9) == (9, 21)
    assert not log.truncate_to(100)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset) == (500, 500)
    assert [p.name for p in log_dir.glob("*.log")] == ["00000000000000000500.log"]


def test_follower_append(tmp_path: Path, cfg: Any, appender: Any) -> None:
    leader = Log(tmp_path / "a-0", cfg())
    for i in range(3):
        appender(leader, recs(2, i * 2), epoch=4)
    follower = Log(tmp_path / "b-0", cfg())
    data = leader.read(0, 10**6).records
    info = follower.append_as_follower(data + data[:30])  # a trailing partial batch is ignored
    assert (info.first_offset, info.last_offset, follower.log_end_offset) == (0, 5, 6)
    assert follower.read(0, 10**6).records == data
    assert follower.end_offset_for_epoch(4) == (4, 6)
    with pytest.raises(Exception, match="below the log end offset"):
        follower.append_as_follower(data)
    corrupt = bytearray(leader.read(4, 10**6).records)
    corrupt[-1] ^= 0xFF
    with pytest.raises(Exception, match="CRC"):
        follower.append_as_follower(bytes(corrupt))


def test_flush_messages_and_flush_ms(log_dir: Path, cfg: Any, appender: Any) -> None:
    clock = [0]
    log = Log(log_dir, cfg(flush_messages=5, flush_ms=1000), clock=lambda: clock[0])
    appender(log, recs(3))
    assert not log.needs_flush(0)
    assert log.needs_flush(1000)  # flush.ms since the last flush
    appender(log, recs(2))
    assert log.needs_flush(0)  # flush.messages
    log.flush()
    assert log.recovery_point == 5
    assert not log.needs_flush(10)


def test_reopen_after_clean_close(log_dir: Path, cfg: Any, appender: Any, decode: Any) -> None:
    log = Log(log_dir, cfg(segment_bytes=700, index_interval_bytes=100))
    for i in range(30):
        appender(log, recs(2, i * 2, ts=100 + i), epoch=1)
    log.update_high_watermark(55)
    before = log.read(0, 10**7).records
    segs = log.num_segments
    log.close()
    for p in log_dir.glob("*.index"):
        assert p.stat().st_size % 8 == 0 and p.stat().st_size < 10485760  # trimmed
    log = Log(log_dir, cfg(segment_bytes=700, index_interval_bytes=100), high_watermark=55)
    assert (log.log_end_offset, log.high_watermark, log.num_segments) == (60, 55, segs)
    assert log.read(0, 10**7).records == before
    assert log.fetch_offset_by_timestamp(110) == (19, 110, 1)  # batch 9 holds 109, 110
    # The reopened active segment accepts appends again (its indexes were regrown).
    assert appender(log, recs(1)).first_offset == 60
    assert os.path.getsize(log.active_segment.offset_index.path) == 10485760


def test_empty_segment_closes_with_an_empty_time_index(log_dir: Path, cfg: Any, appender: Any) -> None:
    # As Kafka: `kafka-dump-log --verify-index-only` reports a (-1, 0) entry in an empty segment.
    Log(log_dir, cfg()).close()
    timeindex = log_dir / "00000000000000000000.timeindex"
    assert timeindex.read_bytes() == b""
    log = Log(log_dir, cfg())
    appender(log, recs(2, ts=500))
    assert log.fetch_offset_by_timestamp(500) == (0, 500, 0)
    log.close()


def test_old_sentinel_time_index_of_an_empty_segment_still_opens(log_dir: Path, cfg: Any, appender: Any) -> None:
    import struct

    Log(log_dir, cfg()).close()
    # What strom wrote before: one entry (timestamp -1, relative offset 0).
    (log_dir / "00000000000000000000.timeindex").write_bytes(struct.pack(">qi", -1, 0))
    log = Log(log_dir, cfg())
    appender(log, recs(2, ts=500))
    assert log.fetch_offset_by_timestamp(500) == (0, 500, 0)
    assert log.fetch_offset_by_timestamp(0) == (0, 500, 0)
    log.close()


def test_partition_metadata_written(log_dir: Path, cfg: Any) -> None:
    import uuid

    tid = uuid.uuid4()
    Log(log_dir, cfg(), topic_id=tid).close()
    text = (log_dir / "partition.metadata").read_text()
    assert text.startswith("version: 0\ntopic_id: ") and not text.endswith("\n")  # Kafka's bytes
    assert Log(log_dir, cfg()).topic_id == tid
    with pytest.raises(Exception, match=r"partition\.metadata"):
        Log(log_dir, cfg(), topic_id=uuid.uuid4())


def test_retention_by_time_and_size(log_dir: Path, cfg: Any, appender: Any) -> None:
    log = Log(log_dir, cfg(segment_bytes=500, retention_ms=1000))
    for i in range(20):
        appender(log, recs(2, i * 2, ts=10_000 + i * 100))
    log.update_high_watermark(log.log_end_offset)
    segs = log.log_segments()
    # Segments whose largest timestamp is older than now - retention.ms go, oldest first.
    cutoff = segs[2].max_timestamp_so_far + 1000 + 1
    deleted = log.delete_old_segments(cutoff)
    assert deleted == 3
    assert log.log_start_offset == segs[3].base_offset
    # Everything expired: the active segment is rolled and deleted too (Kafka 4 behaviour).
    assert log.delete_old_segments(10**9) > 0
    assert log.size_in_bytes == 0 and log.log_start_offset == log.log_end_offset == 40
    assert appender(log, recs(1)).first_offset == 40

    log2 = Log(log_dir.parent / "size-0", cfg(segment_bytes=500, retention_bytes=1000))
    for i in range(20):
        appender(log2, recs(2, i * 2))
    log2.update_high_watermark(log2.log_end_offset)
    log2.delete_old_segments(0)
    assert 500 < log2.size_in_bytes <= 1000 + 500


def test_retention_respects_high_watermark(log_dir: Path, cfg: Any, appender: Any) -> None:
    log = Log(log_dir, cfg(segment_bytes=500, retention_ms=1))
    for i in range(20):
        appender(log, recs(2, i * 2, ts=1))
    assert log.delete_old_segments(10**9) == 0  # HW is 0: nothing is below it
    log.update_high_watermark(log.log_segments()[2].base_offset)
    assert log.delete_old_segments(10**9) == 2
