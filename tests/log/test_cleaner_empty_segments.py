"""Compaction groups segments as Kafka's cleaner does (``groupSegmentsBySize`` + one swap per
group), so it does not leave empty non-active segments behind.

Cleaning each segment on its own (strom's cleaner before) turned every segment whose records were
all superseded into an empty segment that stayed for good: nothing merged it again. Kafka
rewrites consecutive segments whose sizes add up to at most ``segment.bytes`` into one segment
at the group's first base offset; an empty segment joins any group.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from strom.core.log.cleaner import LogCleaner, group_segments_by_size
from strom.core.log.log import Log
from strom.core.log.segment import SWAP_SUFFIX
from strom.core.records.builder import SimpleRecord, decode_records

KEYS = 5


def _read_all(log: Log) -> dict[int, tuple[bytes | None, bytes | None]]:
    out: dict[int, tuple[bytes | None, bytes | None]] = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = [r for r in decode_records(log.read(offset, 10**8).records) if r.offset >= offset]
        if not got:
            break
        out.update((r.offset, (r.key, r.value)) for r in got)
        offset = got[-1].offset + 1
    return out


def _latest(rows: dict[int, tuple[bytes | None, bytes | None]]) -> dict[bytes | None, tuple[int, bytes | None]]:
    latest: dict[bytes | None, tuple[int, bytes | None]] = {}
    for offset in sorted(rows):
        key, value = rows[offset]
        latest[key] = (offset, value)
    return latest


def _empty_inactive(log: Log) -> list[str]:
    return [seg.log_path.name for seg in log.log_segments()[:-1] if seg.size == 0]


def _fill(log: Log, appender: Any, start: int, count: int, *, roll_every: int = 0, prefix: bytes = b"key") -> None:
    for i in range(start, start + count):
        appender(log, [SimpleRecord(b"%s-%d" % (prefix, i % KEYS), b"value-%06d" % i, timestamp=1000 + i)])
        if roll_every and (i + 1) % roll_every == 0:
            log.roll()
    log.update_high_watermark(log.log_end_offset)


def test_small_segments_are_merged_into_one(log_dir: Path, cfg: Any, appender: Any) -> None:
    """Segments rolled early (segment.ms, a low-traffic compacted topic) whose records are all
    superseded: one pass leaves one cleaned segment, not one empty file per old segment."""
    log = Log(log_dir, cfg(cleanup_policy="compact", segment_bytes=100_000, min_cleanable_dirty_ratio=0.01))
    _fill(log, appender, 0, 200, roll_every=10)  # 20 segments of 10 records, 5 keys
    assert len(log.log_segments()) == 21
    before = _read_all(log)
    result = LogCleaner().clean(log, now_ms=5000)
    assert result is not None and result.segments_cleaned == 20
    assert _empty_inactive(log) == []
    assert len(log.log_segments()) == 2  # the cleaned group and the active segment
    assert log.log_segments()[0].base_offset == 0
    after = _read_all(log)
    assert _latest(after) == _latest(before)
    assert len(after) == KEYS
    log.close()
    # The merged segment is what the directory holds after a restart; no leftovers.
    assert not list(log_dir.glob("*.swap")) and not list(log_dir.glob("*.cleaned"))
    assert not list(log_dir.glob("*.deleted"))
    again = Log(log_dir, cfg(cleanup_policy="compact", segment_bytes=100_000))
    assert _read_all(again) == after and [s.base_offset for s in again.log_segments()] == [0, 200]
    again.close()
    recovered = Log(log_dir, cfg(cleanup_policy="compact", segment_bytes=100_000), had_clean_shutdown=False)
    assert _read_all(recovered) == after and recovered.log_end_offset == 200
    recovered.close()


def test_segments_emptied_by_one_pass_are_merged_by_the_next(log_dir: Path, cfg: Any, appender: Any) -> None:
    """Full-size segments cannot be grouped before cleaning (Kafka groups by their size then),
    so a pass may empty some; the next pass merges those into their neighbours."""
    log = Log(log_dir, cfg(cleanup_policy="compact", segment_bytes=1500, min_cleanable_dirty_ratio=0.01))
    _fill(log, appender, 0, 300)
    log.roll()  # every key's latest record in a cleanable segment: the first pass keeps them there
    cleaner = LogCleaner()
    first = cleaner.clean(log, now_ms=5000)
    assert first is not None
    assert _empty_inactive(log), "the scenario needs segments that the first pass empties"
    before = _read_all(log)
    # More writes, of other keys, make the log dirty again and leave the first pass's survivors.
    _fill(log, appender, 300, 60, prefix=b"other")
    expected = _latest({**before, **_read_all(log)})
    assert cleaner.clean(log, now_ms=6000) is not None
    left = [s.log_path.name for s in log.log_segments()[:-1] if s.size == 0 and s.base_offset < first.end_offset]
    assert not left, f"segments emptied by the first pass are still there: {left}"
    assert _latest(_read_all(log)) == expected
    log.close()


def test_grouping_follows_kafkas_limits(log_dir: Path, cfg: Any, appender: Any) -> None:
    """groupSegmentsBySize: log bytes up to segment.bytes, index bytes up to segment.index.bytes
    (offset and time index each), an empty segment joins any group."""
    log = Log(log_dir, cfg(cleanup_policy="compact", segment_bytes=100_000, index_interval_bytes=1))
    _fill(log, appender, 0, 40, roll_every=10)
    segs = log.log_segments()[:-1]
    sizes = [s.size for s in segs]
    assert len(set(sizes)) == 1
    one = sizes[0]
    first_uncleanable = log.active_segment.base_offset
    assert [len(g) for g in group_segments_by_size(segs, 4 * one, 10**6, first_uncleanable)] == [4]
    assert [len(g) for g in group_segments_by_size(segs, 2 * one, 10**6, first_uncleanable)] == [2, 2]
    assert [len(g) for g in group_segments_by_size(segs, one, 10**6, first_uncleanable)] == [1, 1, 1, 1]
    # index_interval_bytes=1 indexes every batch: 10 offset entries (80 B) and 10 time entries
    # (120 B) per segment; the time index is the one that limits a group here.
    assert [len(g) for g in group_segments_by_size(segs, 10**6, 240, first_uncleanable)] == [2, 2]
    log.close()


def test_a_merge_interrupted_after_its_swap_commits_is_completed_on_load(
        log_dir: Path, tmp_path: Path, cfg: Any, appender: Any) -> None:
    """A crash after ``.cleaned`` became ``.swap`` (the commit point) but before the group's other
    segments were removed: loading completes the swap, removing every old segment its offsets
    cover, and reads as the finished merge does."""
    config = cfg(cleanup_policy="compact", segment_bytes=100_000, min_cleanable_dirty_ratio=0.01)
    log = Log(log_dir, config)
    _fill(log, appender, 0, 200, roll_every=10)
    log.close()
    finished_dir = tmp_path / "finished" / log_dir.name
    shutil.copytree(log_dir, finished_dir)
    finished = Log(finished_dir, config)
    finished.update_high_watermark(finished.log_end_offset)
    assert LogCleaner().clean(finished, now_ms=5000) is not None
    expected = _read_all(finished)
    finished.close()
    # The crashed directory: every old segment still there, beside the merged one as .swap files.
    for ext in (".index", ".timeindex", ".txnindex", ".log"):
        name = f"{0:020d}{ext}"
        if (finished_dir / name).exists():
            shutil.copyfile(finished_dir / name, log_dir / f"{name}{SWAP_SUFFIX}")
    assert len(list(log_dir.glob("*.log"))) == 21
    recovered = Log(log_dir, config, had_clean_shutdown=False)
    assert [s.base_offset for s in recovered.log_segments()] == [0, 200]
    assert _read_all(recovered) == expected and recovered.log_end_offset == 200
    recovered.close()
    assert not list(log_dir.glob(f"*{SWAP_SUFFIX}"))
