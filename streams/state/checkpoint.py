"""Kafka's ``.checkpoint`` file of a task directory, and the state directory layout.

Format (Kafka's OffsetCheckpoint): a version line ``0``, a line with the entry count, then
one ``topic partition offset`` line per changelog partition. Written to a temp file, fsynced
and renamed, so a reader sees the old file or the new one.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from strom.streams.exceptions import CheckpointError
from strom.streams.state.api import ChangelogOffsets

CHECKPOINT_FILE = ".checkpoint"
VERSION = 0


def task_dir(state_dir: Path | str, application_id: str, task_id: str) -> Path:
    """``<state.dir>/<application.id>/<task id>``; task ids look like ``0_1`` as in Kafka."""
    return Path(state_dir) / application_id / task_id


def store_path(state_dir: Path | str, application_id: str, task_id: str, store_name: str) -> Path:
    """Where a RocksDB store lives: ``<task dir>/rocksdb/<store name>``."""
    return task_dir(state_dir, application_id, task_id) / "rocksdb" / store_name


def write_checkpoint(directory: Path | str, offsets: ChangelogOffsets) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / CHECKPOINT_FILE
    lines = [str(VERSION), str(len(offsets))]
    for (topic, partition), offset in sorted(offsets.items()):
        if " " in topic or "\n" in topic:
            raise CheckpointError(f"topic name {topic!r} cannot be written to a checkpoint")
        lines.append(f"{topic} {partition} {offset}")
    tmp = path.with_name(CHECKPOINT_FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)
    return path


def read_checkpoint(directory: Path | str) -> ChangelogOffsets:
    """The offsets of ``<directory>/.checkpoint``; empty if there is no file."""
    path = Path(directory) / CHECKPOINT_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: truncated checkpoint (no version/count lines)")
    if lines[0].strip() != str(VERSION):
        raise CheckpointError(f"{path}: unknown checkpoint version {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: bad entry count {lines[1]!r}") from None
    entries = [line for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    out: ChangelogOffsets = {}
    for line in entries:
        parts = line.split(" ")
        if len(parts) != 3:
            raise CheckpointError(f"{path}: malformed entry {line!r}")
        try:
            out[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            raise CheckpointError(f"{path}: malformed entry {line!r}") from None
    return out


def delete_checkpoint(directory: Path | str) -> None:
    """Kafka deletes the checkpoint while a task runs under EOS; a crash then forces a restore."""
    with contextlib.suppress(FileNotFoundError):
        (Path(directory) / CHECKPOINT_FILE).unlink()
