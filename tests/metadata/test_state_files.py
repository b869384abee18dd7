"""Parsers of the state files and the metadata log check: garbage is an error naming the file.

Real files in a temporary directory; no broker. The broker-level behaviour (exit code, one line)
is in tests/faults/test_corrupt_state_files.py and test_corrupt_metadata.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from strom.core.config import BrokerConfig
from strom.core.controller.metadata_system import MetadataSystem
from strom.core.controller.quorum_controller import CreatableTopic
from strom.core.log.checkpoint import (
    CheckpointError,
    MetaPropertiesError,
    read_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
)
from strom.core.metadata.bootstrap import BOOTSTRAP_FILE, BootstrapFileError, read_bootstrap
from strom.core.raft.client import METADATA_PARTITION_DIR
from strom.core.raft.log import MetadataLogCorruptedError, check_metadata_log, scan_metadata_log
from strom.core.raft.quorum_state import ElectionState, QuorumStateError, QuorumStateStore
from strom.core.records.batch import iter_headers
from strom.core.records.builder import SimpleRecord, build_batch

BAD_UTF8 = b"0\n1\n\xff\xfe topic 0 12\n"


def _raises(exc: type[Exception], fn: Any, *args: Any) -> str:
    with pytest.raises(exc) as info:
        fn(*args)
    return str(info.value)


# -- offset and epoch checkpoints ---------------------------------------------------------------


@pytest.mark.parametrize(("content", "what"), [
    (BAD_UTF8, "byte 4 is not UTF-8"),
    (b"0\n1\nt 0 12\x00\x00\x00\n", "NUL byte"),
    (b"1\n1\nt 0 12\n", ":1: unsupported checkpoint version 1"),
    (b"zero\n1\nt 0 12\n", ":1: expected the version number 0"),
    (b"0\nmany\nt 0 12\n", ":2: expected the number of entries"),
    (b"0\n2\nt 0 12\n", "announces 2 entries, found 1"),
    (b"0\n1\nt 0 twelve\n", ":3: partition and offset must be integers"),
    (b"0\n1\nt 0\n", ":3: expected 'topic partition offset'"),
    (b"0\n1\nt -1 12\n", ":3: negative partition -1"),
    (b"0\n", "expected a version and a count line"),
])
def test_offset_checkpoint_garbage_names_file_and_line(tmp_path: Path, content: bytes, what: str) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_bytes(content)
    message = _raises(CheckpointError, read_offset_checkpoint, path)
    assert message.startswith(str(path)) and what in message, message


def test_offset_checkpoint_round_trip_and_absent(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    assert read_offset_checkpoint(path) == {}
    path.write_text("0\n2\na 0 5\nb 3 7\n")
    assert read_offset_checkpoint(path) == {("a", 0): 5, ("b", 3): 7}


def test_epoch_checkpoint_garbage(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(b"0\n1\n\xc3\x28 0\n")
    assert "is not UTF-8" in _raises(CheckpointError, read_epoch_checkpoint, path)
    path.write_bytes(b"0\n1\n3 x\n")
    assert ":3: epoch and start offset must be integers" in _raises(CheckpointError, read_epoch_checkpoint, path)


# -- partition.metadata, meta.properties --------------------------------------------------------


@pytest.mark.parametrize(("content", "what"), [
    (b"\xff\xff", "is not UTF-8"),
    (b"version: 0\n", "expected 'version: 0' and 'topic_id: <id>'"),
    (b"version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n", "expected 'version: 0'"),
    (b"version: 0\ntopic_id: abc\n", "does not decode to 16 bytes"),
])
def test_partition_metadata_garbage(tmp_path: Path, content: bytes, what: str) -> None:
    (tmp_path / "partition.metadata").write_bytes(content)
    message = _raises(CheckpointError, read_partition_metadata, tmp_path)
    assert str(tmp_path / "partition.metadata") in message and what in message, message
    assert "move the file aside" in message


@pytest.mark.parametrize(("content", "what"), [
    (b"version=1\ncluster.id=\xff\xfe\nnode.id=1\n", "is not UTF-8"),
    (b"version=7\ncluster.id=abc\nnode.id=1\n", "unsupported meta.properties version '7'"),
    (b"cluster.id=abc\nnode.id=1\n", "unsupported meta.properties version None"),
    (b"version=1\ncluster.id=abc\n", "version 1 requires node.id"),
    (b"version=1\ncluster.id=abc\nnode.id=x1\n", "node.id must be an integer"),
    (b"version=1\ncluster.id=\nnode.id=1\n", "cluster.id is empty"),
])
def test_meta_properties_garbage(tmp_path: Path, content: bytes, what: str) -> None:
    (tmp_path / "meta.properties").write_bytes(content)
    message = _raises(MetaPropertiesError, read_meta_properties, tmp_path)
    assert str(tmp_path / "meta.properties") in message and what in message, message
    assert "restore it from a backup" in message


# -- quorum-state ------------------------------------------------------------------------------


@pytest.mark.parametrize(("content", "what"), [
    (b"\xff{}", "is not UTF-8"),
    (b'{"clusterId":"","leaderId":1,"leaderEp', "not a quorum-state JSON object"),
    (b"[1, 2]", "expected a JSON object, got list"),
    (b'{"leaderEpoch": 3}', "missing field 'data_version'"),
    (b'{"leaderEpoch": "three", "data_version": 0}', "not a quorum-state JSON object"),
    (b'{"leaderEpoch": 3, "data_version": 9}', "data_version 9 is not within 0..1"),
    (b'{"leaderEpoch": -4, "data_version": 0}', "negative leaderEpoch"),
])
def test_quorum_state_garbage(tmp_path: Path, content: bytes, what: str) -> None:
    (tmp_path / "quorum-state").write_bytes(content)
    message = _raises(QuorumStateError, QuorumStateStore(tmp_path).read)
    assert str(tmp_path / "quorum-state") in message and what in message, message
    assert "move it aside" in message


def test_quorum_state_keeps_the_high_watermark_in_applied_offset(tmp_path: Path) -> None:
    store = QuorumStateStore(tmp_path)
    store.write(ElectionState(5, 1, -1, (1,), high_watermark=42))
    assert json.loads((tmp_path / "quorum-state").read_text())["appliedOffset"] == 42
    assert store.read() == ElectionState(5, 1, -1, (1,), 42)


async def test_quorum_state_moved_aside_continues_above_the_logs_epoch(config: BrokerConfig,
                                                                      open_system: Any) -> None:
    """The way out the quorum-state error names: a single voter restarts in a higher epoch."""
    for _ in range(3):
        system = await open_system(config)
        last_epoch = system.raft.epoch
        await system.close(controlled_shutdown=False)
    state = config.metadata_dir / METADATA_PARTITION_DIR / "quorum-state"
    state.rename(state.with_name("quorum-state.bad"))
    again = await open_system(config)
    try:
        assert again.raft.epoch == last_epoch + 1
        [r] = await again.controller.create_topics([CreatableTopic("after", 1, 1)])
        assert r.error_code == 0
    finally:
        await again.close()


# -- bootstrap.checkpoint ----------------------------------------------------------------------


async def test_bootstrap_checkpoint_garbage_matters_only_to_an_empty_log(config: BrokerConfig,
                                                                        open_system: Any) -> None:
    path = config.metadata_dir / BOOTSTRAP_FILE
    original = path.read_bytes()
    path.write_bytes(original[:-10])
    message = _raises(BootstrapFileError, read_bootstrap, config.metadata_dir)
    assert str(path) in message and "move it aside" in message
    with pytest.raises(BootstrapFileError):
        await open_system(config)  # an empty log needs it
    path.write_bytes(original)
    system = await open_system(config)
    await system.close(controlled_shutdown=False)
    path.write_bytes(b"garbage")
    system = await open_system(config)  # a log with metadata.version does not read it
    try:
        assert system.image.metadata_version > 0
    finally:
        await system.close(controlled_shutdown=False)


# -- the metadata log check --------------------------------------------------------------------


def _write_log(directory: Path, batches: int, base: int = 0) -> list[tuple[int, int]]:
    """``batches`` one-record batches from offset ``base`` in one segment; their (position, size)."""
    directory.mkdir(parents=True, exist_ok=True)
    data = b"".join(build_batch([SimpleRecord(None, f"r{i}".encode(), (), 1000 + i)], base_offset=base + i,
                                partition_leader_epoch=1) for i in range(batches))
    (directory / f"{base:020d}.log").write_bytes(data)
    return [(pos, h.size) for pos, h in iter_headers(data)]


def _flip(path: Path, pos: int) -> None:
    data = bytearray(path.read_bytes())
    data[pos] ^= 0xFF
    path.write_bytes(bytes(data))


def test_scan_finds_the_first_bad_batch_and_the_valid_ones_after_it(tmp_path: Path) -> None:
    spans = _write_log(tmp_path, 5)
    seg = tmp_path / f"{0:020d}.log"
    _flip(seg, spans[2][0] + spans[2][1] - 1)
    scan = scan_metadata_log(tmp_path)
    assert scan.damage is not None
    assert (scan.damage.path, scan.damage.position, scan.damage.offset) == (seg, spans[2][0], 2)
    assert "CRC mismatch" in scan.damage.reason
    assert [b.header.base_offset for b in scan.batches] == [0, 1]
    assert [b.header.base_offset for b in scan.damage.later] == [3, 4]
    assert scan.committed_end(0) == 4  # batch 4 was written after batch 2 was fsynced


def test_a_torn_last_batch_past_the_high_watermark_is_left_to_recovery(tmp_path: Path) -> None:
    spans = _write_log(tmp_path, 5)
    seg = tmp_path / f"{0:020d}.log"
    _flip(seg, spans[4][0] + spans[4][1] - 1)
    scan = check_metadata_log(tmp_path, high_watermark=4, snapshot_end_offset=0)
    assert scan.damage is not None and scan.damage.offset == 4
    # The same bytes below the durable high watermark are committed data.
    message = _raises(MetadataLogCorruptedError, lambda: check_metadata_log(
        tmp_path, high_watermark=5, snapshot_end_offset=0))
    assert f"{seg} is corrupt at byte {spans[4][0]} (the batch at offset 4)" in message
    assert "--offset 4" in message


def test_damage_in_the_middle_is_refused_even_without_a_stored_high_watermark(tmp_path: Path) -> None:
    spans = _write_log(tmp_path, 5)
    with open(tmp_path / f"{0:020d}.log", "r+b") as f:  # a torn length field
        f.seek(spans[1][0] + 8)
        f.write((10_000_000).to_bytes(4, "big"))
    message = _raises(MetadataLogCorruptedError, lambda: check_metadata_log(
        tmp_path, high_watermark=0, snapshot_end_offset=0))
    assert "torn batch (batch_length 10000000" in message and "3 valid batch(es) follow it" in message


def test_a_later_segment_proves_the_damaged_one_was_committed(tmp_path: Path) -> None:
    spans = _write_log(tmp_path, 3)
    _write_log(tmp_path, 0, base=3)  # an empty segment rolled at offset 3
    _flip(tmp_path / f"{0:020d}.log", spans[2][0] + spans[2][1] - 1)
    message = _raises(MetadataLogCorruptedError, lambda: check_metadata_log(
        tmp_path, high_watermark=0, snapshot_end_offset=0))
    assert f"later segment(s) {3:020d}.log exist" in message


def test_damage_the_snapshot_covers_is_left_to_recovery(tmp_path: Path) -> None:
    spans = _write_log(tmp_path, 5)
    _flip(tmp_path / f"{0:020d}.log", spans[1][0] + spans[1][1] - 1)
    # Everything committed (below 4) is in a snapshot ending at 5: cutting loses nothing.
    check_metadata_log(tmp_path, high_watermark=4, snapshot_end_offset=5)
    with pytest.raises(MetadataLogCorruptedError):
        check_metadata_log(tmp_path, high_watermark=4, snapshot_end_offset=3)


def test_whole_committed_batches_missing_is_refused(tmp_path: Path) -> None:
    spans = _write_log(tmp_path, 5)
    os.truncate(tmp_path / f"{0:020d}.log", spans[3][0])
    assert check_metadata_log(tmp_path, high_watermark=3, snapshot_end_offset=0).end_offset == 3
    message = _raises(MetadataLogCorruptedError, lambda: check_metadata_log(
        tmp_path, high_watermark=5, snapshot_end_offset=0))
    assert "ends at offset 3, but offsets up to 4 were committed" in message
    check_metadata_log(tmp_path, high_watermark=5, snapshot_end_offset=5)  # the snapshot holds them


async def test_a_snapshot_gap_is_refused_not_restarted(config: BrokerConfig, open_system: Any) -> None:
    """An unreadable newest snapshot with a log that starts after the older one: refuse."""
    system = await open_system(config)
    await system.controller.create_topics([CreatableTopic("a", 1, 1)])
    first = await system.snapshot()
    await system.close(controlled_shutdown=False)
    assert first is not None
    part = config.metadata_dir / METADATA_PARTITION_DIR
    # Restart the log at the snapshot (as after a follower's snapshot load), then spoil the snapshot.
    raft_dir_files = sorted(part.glob("*.log"))
    for f in raft_dir_files:
        f.unlink()
    for f in part.glob("*index"):
        f.unlink()
    _write_log(part, 0, base=first.end_offset)
    (part / first.file_name).write_bytes(b"not a snapshot")
    again = MetadataSystem.open(config)
    try:
        with pytest.raises(MetadataLogCorruptedError) as info:
            await again.start()
    finally:
        await again.close()
    assert f"starts at offset {first.end_offset}, but the newest readable snapshot ends at 0" in str(info.value)
