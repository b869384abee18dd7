"""Checkpoint files (Kafka's text formats), partition.metadata and the leader epoch cache."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from strom.core.log.checkpoint import (
    CheckpointError,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
    topic_id_from_str,
    topic_id_to_str,
    write_offset_checkpoint,
    write_partition_metadata,
)
from strom.core.log.epoch_cache import LeaderEpochFileCache


def test_offset_checkpoint_format_and_roundtrip(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offset_checkpoint(path, {("orders", 1): 99, ("orders", 0): 1234})
    assert path.read_text() == "0\n2\norders 0 1234\norders 1 99\n"
    assert read_offset_checkpoint(path) == {("orders", 0): 1234, ("orders", 1): 99}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()
    assert read_offset_checkpoint(tmp_path / "missing") == {}


@pytest.mark.parametrize("text", ["1\n0\n", "0\n2\na 0 1\n", "0\n1\na zero 1\n", "0\n"])
def test_malformed_checkpoints_are_errors(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CheckpointError, match="cp"):
        read_offset_checkpoint(path)


def test_partition_metadata(tmp_path: Path) -> None:
    tid = uuid.uuid4()
    write_partition_metadata(tmp_path, tid)
    text = (tmp_path / "partition.metadata").read_text()
    # Kafka's PartitionMetadataFile writes no newline after the topic id.
    assert text == f"version: 0\ntopic_id: {topic_id_to_str(tid)}"
    assert len(topic_id_to_str(tid)) == 22  # Kafka's base64 Uuid string
    assert read_partition_metadata(tmp_path) == tid
    assert topic_id_from_str(topic_id_to_str(tid)) == tid
    (tmp_path / "partition.metadata").write_text("version: 3\n")
    with pytest.raises(CheckpointError):
        read_partition_metadata(tmp_path)


def test_partition_metadata_with_a_trailing_newline_still_reads(tmp_path: Path) -> None:
    # Files written by strom before it matched Kafka end with a newline; they must still open.
    tid = uuid.uuid4()
    (tmp_path / "partition.metadata").write_text(f"version: 0\ntopic_id: {topic_id_to_str(tid)}\n")
    assert read_partition_metadata(tmp_path) == tid


def test_meta_properties(tmp_path: Path) -> None:
    assert read_meta_properties(tmp_path) is None
    (tmp_path / "meta.properties").write_text("#x\nversion=1\nnode.id=3\ncluster.id=abc\n")
    assert read_meta_properties(tmp_path) == {"version": "1", "node.id": "3", "cluster.id": "abc"}
    (tmp_path / "meta.properties").write_text("version=7\n")
    with pytest.raises(CheckpointError):
        read_meta_properties(tmp_path)


def test_epoch_cache_file_format_and_reload(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache.in_dir(tmp_path)
    cache.assign(0, 0)
    cache.assign(0, 5)  # same epoch: no new entry
    cache.assign(3, 1500)
    # A change is memory only (no I/O under the log's lock); flush writes the file.
    assert cache.dirty and not (tmp_path / "leader-epoch-checkpoint").exists()
    cache.flush()
    assert not cache.dirty
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 1500\n"
    again = LeaderEpochFileCache.in_dir(tmp_path)
    assert again.entries() == [(0, 0), (3, 1500)]
    assert again.latest_epoch == 3


def test_epoch_cache_end_offset_for_epoch(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache.in_dir(tmp_path)
    assert cache.end_offset_for_epoch(0, 10) == (-1, -1)
    cache.assign(2, 10)
    cache.assign(4, 20)
    cache.assign(7, 35)
    leo = 50
    assert cache.end_offset_for_epoch(7, leo) == (7, 50)  # latest epoch ends at the LEO
    assert cache.end_offset_for_epoch(4, leo) == (4, 35)
    assert cache.end_offset_for_epoch(5, leo) == (4, 35)  # unknown epoch: the one below it
    assert cache.end_offset_for_epoch(1, leo) == (1, 10)  # below the first epoch
    assert cache.end_offset_for_epoch(8, leo) == (-1, -1)
    assert cache.end_offset_for_epoch(-1, leo) == (-1, -1)
    assert cache.epoch_for_offset(25) == 4
    assert cache.epoch_for_offset(5) is None


def test_epoch_cache_truncation(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache.in_dir(tmp_path)
    for epoch, offset in ((1, 0), (2, 10), (3, 20)):
        cache.assign(epoch, offset)
    cache.truncate_from_end(20)
    assert cache.entries() == [(1, 0), (2, 10)]
    cache.truncate_from_start(15)
    assert cache.entries() == [(2, 15)]
    # Assigning a lower epoch / offset removes the entries it contradicts, as Kafka does.
    cache.assign(5, 30)
    cache.assign(4, 25)
    assert cache.entries() == [(2, 15), (4, 25)]
    cache.flush()
    assert LeaderEpochFileCache.in_dir(tmp_path).entries() == [(2, 15), (4, 25)]


def test_epoch_checkpoint_older_snapshot_never_overwrites_newer(tmp_path: Path) -> None:
    """Two flushers racing: the one holding the older snapshot writes nothing (KAFKA-16660)."""
    cache = LeaderEpochFileCache.in_dir(tmp_path)
    cache.assign(1, 0)
    old = cache.snapshot()
    cache.assign(2, 10)
    cache.write_checkpoint(*cache.snapshot())
    cache.write_checkpoint(*old)
    assert LeaderEpochFileCache.in_dir(tmp_path).entries() == [(1, 0), (2, 10)]
