"""KRaft snapshot files: ``<end offset, 20 digits>-<epoch, 10 digits>.checkpoint``.

A snapshot holds the state of the log below ``end offset`` as RecordBatch v2 batches, the way
Kafka's ``RecordsSnapshotWriter`` lays them out: a control batch with a ``SnapshotHeaderRecord``
(control type 3), data batches whose record values are the serialized records, and a control
batch with a ``SnapshotFooterRecord`` (type 4). Offsets inside the file start at 0. The file is
written as ``.checkpoint.part``, fsynced and renamed, so a crash leaves either no snapshot or a
whole one; ``bootstrap.checkpoint`` uses the same layout.

The same codec reads the file back; a snapshot without its footer or with a bad CRC is rejected
(``CorruptMessageError``) and startup falls back to an older snapshot.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from strom.core.errors import CorruptMessageError
from strom.core.log.checkpoint import fsync_dir
from strom.core.raft.control_records import (
    CONTROL_SNAPSHOT_FOOTER,
    CONTROL_SNAPSHOT_HEADER,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    control_key,
    skip_control_record,
)
from strom.core.records.batch import iter_headers
from strom.core.records.builder import SimpleRecord, build_batch, decode_batch, now_ms

SUFFIX = ".checkpoint"
PART_SUFFIX = ".checkpoint.part"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
RECORDS_PER_BATCH = 1000


class SnapshotId(NamedTuple):
    """Snapshot of every record below ``end_offset``; ``epoch`` is that of the last one."""

    end_offset: int
    epoch: int

    @property
    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}{SUFFIX}"


def list_snapshots(directory: Path) -> list[SnapshotId]:
    """Complete snapshots in ``directory``, oldest first."""
    out = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    for name in names:
        m = _NAME.match(name)
        if m:
            out.append(SnapshotId(int(m.group(1)), int(m.group(2))))
    return sorted(out)


def encode_snapshot(values: Iterable[bytes], epoch: int, last_contained_log_timestamp: int) -> bytes:
    """The bytes of a snapshot holding record ``values`` (already serialized records)."""
    ts = now_ms()
    out = bytearray()
    offset = 0
    header = SnapshotHeaderRecord(0, last_contained_log_timestamp).encode(0)
    out += build_batch([SimpleRecord(control_key(CONTROL_SNAPSHOT_HEADER), header, (), ts)],
                       base_offset=offset, control=True, partition_leader_epoch=epoch)
    offset += 1
    chunk: list[SimpleRecord] = []

    def flush_chunk() -> None:
        nonlocal offset
        if chunk:
            out.extend(build_batch(chunk, base_offset=offset, partition_leader_epoch=epoch))
            offset += len(chunk)
            chunk.clear()

    for value in values:
        chunk.append(SimpleRecord(None, value, (), ts))
        if len(chunk) >= RECORDS_PER_BATCH:
            flush_chunk()
    flush_chunk()
    footer = SnapshotFooterRecord(0).encode(0)
    out += build_batch([SimpleRecord(control_key(CONTROL_SNAPSHOT_FOOTER), footer, (), ts)],
                       base_offset=offset, control=True, partition_leader_epoch=epoch)
    return bytes(out)


def write_snapshot_file(path: Path, values: Sequence[bytes] | Iterable[bytes], epoch: int,
                        last_contained_log_timestamp: int = -1) -> None:
    """Write a snapshot atomically (``.part`` + fsync + rename + dir fsync)."""
    data = encode_snapshot(values, epoch, last_contained_log_timestamp)
    part = path.with_name(path.name.removesuffix(SUFFIX) + PART_SUFFIX)
    with open(part, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, path)
    fsync_dir(path.parent)


def write_snapshot(directory: Path, snapshot_id: SnapshotId, values: Iterable[bytes],
                   last_contained_log_timestamp: int = -1) -> Path:
    path = directory / snapshot_id.file_name
    write_snapshot_file(path, values, snapshot_id.epoch, last_contained_log_timestamp)
    return path


def read_snapshot_file(path: Path) -> list[bytes]:
    """The record values of a snapshot file, checking CRCs, header and footer."""
    data = path.read_bytes()
    values: list[bytes] = []
    seen_header = seen_footer = False
    end = 0
    for pos, header in iter_headers(data):
        batch = decode_batch(data, pos, check_crc=True)
        end = pos + header.size
        if header.is_control:
            for rec in batch.records:
                ctype = int.from_bytes((rec.key or b"\0\0\0\0")[2:4], "big")
                if ctype == CONTROL_SNAPSHOT_HEADER:
                    seen_header = True
                elif ctype == CONTROL_SNAPSHOT_FOOTER:
                    seen_footer = True
                else:
                    skip_control_record(rec.key, str(path))
            continue
        if seen_footer:
            raise CorruptMessageError(f"{path}: data after the snapshot footer")
        values.extend(rec.value for rec in batch.records if rec.value is not None)
    if end != len(data):
        raise CorruptMessageError(f"{path}: {len(data) - end} trailing byte(s) are not a whole batch")
    if not seen_header or not seen_footer:
        raise CorruptMessageError(f"{path}: snapshot header or footer missing (incomplete snapshot)")
    return values


def delete_snapshots_before(directory: Path, keep: SnapshotId) -> None:
    """Remove snapshots older than ``keep`` and stale ``.part`` files."""
    for sid in list_snapshots(directory):
        if sid < keep:
            (directory / sid.file_name).unlink(missing_ok=True)
    for name in os.listdir(directory):
        if name.endswith(PART_SUFFIX):
            (directory / name).unlink(missing_ok=True)
