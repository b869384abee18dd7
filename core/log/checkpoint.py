"""Kafka's small text state files: offset checkpoints, ``partition.metadata``, ``meta.properties``.

Offset checkpoint files (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``) use Kafka's format::

    0                 <- version
    2                 <- number of entries
    orders 0 1234     <- topic partition offset
    orders 1 99

Every file is written atomically the way Kafka's ``CheckpointFile`` does: write ``<name>.tmp``,
fsync it, rename over the target, fsync the directory. A reader never sees a half-written file.
A malformed file raises :class:`CheckpointError` naming the file and line.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

from strom.core.exceptions import BrokerError

CHECKPOINT_VERSION = 0

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
META_PROPERTIES = "meta.properties"

TopicPartition = tuple[str, int]


class CheckpointError(BrokerError):
    """A checkpoint / metadata file is malformed."""


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename inside it survives a power loss."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on directories; the rename itself is still atomic
    finally:
        os.close(fd)


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: tmp file + fsync + rename + directory fsync."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _read_versioned_lines(path: Path) -> list[str] | None:
    """The entry lines of a Kafka checkpoint file after checking version and count; None if absent."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: expected a version and a count line")
    try:
        version = int(lines[0])
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: malformed version/count lines {lines[:2]!r}") from None
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path}: unsupported checkpoint version {version}")
    entries = [line for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    return entries


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Read a ``topic partition offset`` checkpoint; a missing file is an empty map."""
    entries = _read_versioned_lines(path)
    out: dict[TopicPartition, int] = {}
    for n, line in enumerate(entries or (), start=3):
        parts = line.split()
        if len(parts) != 3:
            raise CheckpointError(f"{path}:{n}: expected 'topic partition offset', got {line!r}")
        try:
            out[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            raise CheckpointError(f"{path}:{n}: malformed entry {line!r}") from None
    return out


def write_offset_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    write_atomically(path, "\n".join(lines) + "\n")


def read_epoch_checkpoint(path: Path) -> list[tuple[int, int]] | None:
    """Read ``leader-epoch-checkpoint`` (``epoch startOffset`` lines); None if the file is absent."""
    entries = _read_versioned_lines(path)
    if entries is None:
        return None
    out: list[tuple[int, int]] = []
    for n, line in enumerate(entries, start=3):
        parts = line.split()
        if len(parts) != 2:
            raise CheckpointError(f"{path}:{n}: expected 'epoch startOffset', got {line!r}")
        try:
            out.append((int(parts[0]), int(parts[1])))
        except ValueError:
            raise CheckpointError(f"{path}:{n}: malformed entry {line!r}") from None
    return out


def write_epoch_checkpoint(path: Path, entries: Iterable[tuple[int, int]]) -> None:
    items = list(entries)
    lines = [str(CHECKPOINT_VERSION), str(len(items))] + [f"{e} {o}" for e, o in items]
    write_atomically(path, "\n".join(lines) + "\n")


# -- partition.metadata -----------------------------------------------------------------------


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def topic_id_from_str(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"topic id {text!r} does not decode to 16 bytes")
    return uuid.UUID(bytes=raw)


def write_partition_metadata(dir_path: Path, topic_id: uuid.UUID) -> None:
    write_atomically(dir_path / PARTITION_METADATA_FILE, f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}\n")


def read_partition_metadata(dir_path: Path) -> uuid.UUID | None:
    """The topic id stored in ``partition.metadata``, or None if there is no file."""
    path = dir_path / PARTITION_METADATA_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise CheckpointError(f"{path}: expected 'version: 0' and 'topic_id: <id>', got {text!r}")
    try:
        return topic_id_from_str(fields["topic_id"])
    except ValueError as e:
        raise CheckpointError(f"{path}: {e}") from None


# -- meta.properties --------------------------------------------------------------------------


def read_meta_properties(dir_path: Path) -> dict[str, str] | None:
    """The key/values of ``meta.properties`` in a log dir (None if absent), version-checked."""
    from strom.core.config import parse_properties

    path = dir_path / META_PROPERTIES
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    props = parse_properties(text)
    if props.get("version") not in ("0", "1"):
        raise CheckpointError(f"{path}: unsupported meta.properties version {props.get('version')!r}")
    if props.get("version") == "1" and "node.id" not in props:
        raise CheckpointError(f"{path}: version 1 requires node.id")
    return props
