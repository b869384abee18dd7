"""The built-in local tier on real files in Kafka's layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.plugins.builtin.local_tier import LocalDiskTier, parse_partition_dir, segment_file_name
from strom.plugins.hookspecs.storage import LocalTier
from strom.plugins.manager import get_plugin_manager, load_local_tier


def make_segment(pdir: Path, base: int, data: bytes, *, txn: bool = False) -> None:
    pdir.mkdir(parents=True, exist_ok=True)
    (pdir / segment_file_name(base, ".log")).write_bytes(data)
    (pdir / segment_file_name(base, ".index")).write_bytes(b"\0" * 8)
    (pdir / segment_file_name(base, ".timeindex")).write_bytes(b"\0" * 12)
    if txn:
        (pdir / segment_file_name(base, ".txnindex")).write_bytes(b"")


def test_file_names_and_partition_dir_names() -> None:
    assert segment_file_name(42, ".log") == "00000000000000000042.log"
    assert parse_partition_dir("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir("orders-0.0123abcd-delete") is None
    assert parse_partition_dir("orders-0-future") is None
    assert parse_partition_dir("cleaner-offset-checkpoint") is None


def test_lists_segments_in_offset_order_and_skips_non_segments(tmp_path: Path) -> None:
    tier = load_local_tier(get_plugin_manager(autoload=False, env={}), {"log.dirs": f"{tmp_path / 'd1'}"})
    assert isinstance(tier, LocalTier)
    pdir = tmp_path / "d1" / "orders-0"
    make_segment(pdir, 100, b"b" * 30, txn=True)
    make_segment(pdir, 0, b"a" * 50)
    (pdir / "00000000000000000200.log.deleted").write_bytes(b"x")  # being deleted, as Kafka renames
    (pdir / "00000000000000000300.log.swap").write_bytes(b"x")
    (pdir / "leader-epoch-checkpoint").write_text("0\n0\n")
    segs = tier.list_segments("orders", 0)
    assert [(s.base_offset, s.size) for s in segs] == [(0, 50), (100, 30)]
    assert segs[0].transaction_index is None
    assert segs[1].transaction_index == pdir / "00000000000000000100.txnindex"
    assert tier.list_segments("orders", 1) == []


def test_read_and_delete(tmp_path: Path) -> None:
    tier = LocalDiskTier({"log.dirs": str(tmp_path)})
    make_segment(tmp_path / "t-3", 7, bytes(range(100)), txn=True)
    (seg,) = tier.list_segments("t", 3)
    assert tier.read(seg, 10, 15) == bytes(range(10, 15))
    assert tier.read(seg, 95, 200) == bytes(range(95, 100))  # short read at the end of the file
    with pytest.raises(ValueError):
        tier.read(seg, 20, 10)
    tier.delete_segment(seg)
    assert tier.list_segments("t", 3) == []
    assert sorted(p.name for p in (tmp_path / "t-3").iterdir()) == []
    tier.delete_segment(seg)  # deleting again is harmless


def test_new_partition_goes_to_least_loaded_dir(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    tier = LocalDiskTier({"log.dirs": f"{d1},{d2}"})
    (d1 / "a-0").mkdir(parents=True)
    (d1 / "a-1").mkdir()
    (d2 / "b-0").mkdir(parents=True)
    (d2 / "b-1.0123abcd-delete").mkdir()  # not a live partition: does not count
    (d2 / "b-2.0123abcd-delete").mkdir()
    assert tier.partition_dir("c", 0) is None
    assert tier.partition_dir("c", 0, create=True) == d2 / "c-0"
    assert tier.partition_dir("a", 1) == d1 / "a-1"  # existing dirs are found wherever they are
    assert tier.log_dirs() == [d1, d2]
