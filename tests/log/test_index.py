"""OffsetIndex / TimeIndex / TransactionIndex: format, lookups, truncation, preallocation, sanity checks."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from strom.core.log.index import (
    AbortedTxn,
    CorruptIndexError,
    IndexOffsetError,
    OffsetIndex,
    TimeIndex,
    TransactionIndex,
)


def test_offset_index_is_preallocated_and_trimmed(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    idx = OffsetIndex(path, 100, 1000)
    assert path.stat().st_size == 1000  # rounded down to whole 8-byte entries
    assert idx.max_entries == 125
    idx.append(110, 0)
    idx.append(150, 4200)
    idx.close()
    assert path.read_bytes() == struct.pack(">iiii", 10, 0, 50, 4200)


def test_offset_index_lookup_binary_search(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "x.index", 1000, 8 * 1000)
    for i in range(1, 500):
        idx.append(1000 + i * 3, i * 100)
    assert idx.lookup(999) == (1000, 0)  # below every entry: segment start
    assert idx.lookup(1002) == (1000, 0)
    assert idx.lookup(1003) == (1003, 100)
    assert idx.lookup(1004) == (1003, 100)
    assert idx.lookup(1000 + 250 * 3 + 2) == (1750, 25000)
    assert idx.lookup(10**9) == (1000 + 499 * 3, 49900)
    idx.sanity_check()


def test_offset_index_rejects_out_of_order_and_full(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "x.index", 0, 16)
    idx.append(5, 10)
    with pytest.raises(IndexOffsetError):
        idx.append(5, 20)
    idx.append(6, 20)
    assert idx.is_full()
    with pytest.raises(IndexOffsetError):
        idx.append(7, 30)


def test_offset_index_truncate_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    idx = OffsetIndex(path, 0, 800)
    for i in range(10):
        idx.append(i * 10, i * 100)
    idx.truncate_to(50)  # removes the entry for 50 and everything above
    assert idx.entries == 5
    idx.truncate_to(45)
    assert idx.entries == 5
    idx.close()
    again = OffsetIndex(path, 0, 800)
    assert again.entries == 5
    assert again.lookup(1000) == (40, 400)


def test_offset_index_sanity_checks(tmp_path: Path) -> None:
    bad_size = tmp_path / "a.index"
    bad_size.write_bytes(b"\x00" * 12)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(bad_size, 0, 800).sanity_check()
    unordered = tmp_path / "b.index"
    unordered.write_bytes(struct.pack(">iiii", 5, 100, 3, 200))
    with pytest.raises(CorruptIndexError, match="does not follow"):
        OffsetIndex(unordered, 0, 800).sanity_check()
    # A preallocated-but-not-trimmed index after a crash has empty slots at its tail: they are
    # recognised as free slots, not entries (Kafka's trimToValidSize would have cut them).
    crashed = tmp_path / "c.index"
    crashed.write_bytes(struct.pack(">iiii", 5, 100, 9, 300) + b"\x00" * 80)
    idx = OffsetIndex(crashed, 0, 800)
    assert idx.entries == 2 and idx.has_slack
    idx.sanity_check()
    assert idx.lookup(1000) == (9, 300)
    idx.append(12, 400)
    idx.close()
    assert crashed.read_bytes() == struct.pack(">iiiiii", 5, 100, 9, 300, 12, 400)


def test_time_index(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    idx = TimeIndex(path, 100, 12 * 10)
    assert idx.last_entry == (-1, 100)
    idx.maybe_append(1000, 105)
    idx.maybe_append(1000, 107)  # not larger: ignored, as Kafka does
    idx.maybe_append(2000, 110)
    idx.maybe_append(3000, 120)
    assert idx.entries == 3
    assert idx.lookup(999) == (-1, 100)
    assert idx.lookup(1500) == (1000, 105)
    assert idx.lookup(3000) == (3000, 120)
    idx.truncate_to(110)
    assert idx.last_entry == (1000, 105)
    idx.close()
    assert path.read_bytes() == struct.pack(">qi", 1000, 5)
    with pytest.raises(CorruptIndexError):
        bad = tmp_path / "y.timeindex"
        bad.write_bytes(struct.pack(">qiqi", 2000, 5, 1000, 6))
        TimeIndex(bad, 0, 120).sanity_check()


def test_empty_time_index_stays_empty(tmp_path: Path) -> None:
    # Kafka's maybeAppend compares with the empty index's sentinel (-1, base offset): the final
    # entry of a segment without timestamps is not written, and the closed file is empty.
    path = tmp_path / "00000000000000000100.timeindex"
    idx = TimeIndex(path, 100, 12 * 10)
    idx.maybe_append(-1, 100, skip_full_check=True)
    assert idx.entries == 0
    idx.close()
    assert path.read_bytes() == b""


def test_time_index_from_old_strom_with_a_sentinel_entry_still_works(tmp_path: Path) -> None:
    # strom once closed empty segments with one entry (-1, 0): such a file must keep opening.
    path = tmp_path / "00000000000000000100.timeindex"
    path.write_bytes(struct.pack(">qi", -1, 0))
    idx = TimeIndex(path, 100, 12 * 10)
    idx.sanity_check()
    assert idx.entries == 1 and idx.last_entry == (-1, 100)
    assert idx.lookup(5) == (-1, 100)
    idx.resize(12 * 10)  # as the Log regrows its active segment's indexes
    idx.maybe_append(1000, 105)
    assert idx.lookup(1000) == (1000, 105)
    idx.close()
    assert path.read_bytes() == struct.pack(">qiqi", -1, 0, 1000, 5)


def test_time_index_keeps_a_slot_for_the_final_entry(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "x.timeindex", 0, 24)
    idx.maybe_append(1, 1)
    assert idx.is_full()
    idx.maybe_append(2, 2, skip_full_check=True)
    assert idx.entries == 2


def test_transaction_index(tmp_path: Path) -> None:
    path = tmp_path / "x.txnindex"
    idx = TransactionIndex(path, 0)
    assert path.exists() and path.stat().st_size == 0
    idx.append(AbortedTxn(7, 10, 20, 5))
    idx.append(AbortedTxn(8, 15, 30, 10))
    assert path.stat().st_size == 68
    assert path.read_bytes()[:34] == struct.pack(">hqqqq", 0, 7, 10, 20, 5)
    again = TransactionIndex(path, 0)
    assert again.all_aborted() == [AbortedTxn(7, 10, 20, 5), AbortedTxn(8, 15, 30, 10)]
    assert again.collect_aborted(21, 100) == [AbortedTxn(8, 15, 30, 10)]
    assert again.collect_aborted(0, 12) == [AbortedTxn(7, 10, 20, 5)]
    with pytest.raises(IndexOffsetError):
        again.append(AbortedTxn(9, 1, 2, 0))
    again.truncate_to(25)
    assert again.all_aborted() == [AbortedTxn(7, 10, 20, 5)]
    path.write_bytes(path.read_bytes() + b"\x01")
    with pytest.raises(CorruptIndexError):
        again.sanity_check()
