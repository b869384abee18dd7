"""Kafka's small text state files: offset checkpoints, ``partition.metadata``, ``meta.properties``.

Offset checkpoint files (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``) use Kafka's format::

    0                 <- version
    2                 <- number of entries
    orders 0 1234     <- topic partition offset
    orders 1 99

Every file is written atomically the way Kafka's ``CheckpointFile`` does: write ``<name>.tmp``,
fsync it, rename over the target, fsync the directory. A reader never sees a half-written file.
A malformed file (bad UTF-8, a wrong version line, a bad number, a missing field) raises
:class:`CheckpointError` naming the file, the line and what is wrong; callers decide the way out
(Kafka ignores a corrupt offset checkpoint and recovers from offset 0; a corrupt
``meta.properties`` stops the node).
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

from strom.core.exceptions import CorruptStateError

CHECKPOINT_VERSION = 0

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
META_PROPERTIES = "meta.properties"

TopicPartition = tuple[str, int]


class CheckpointError(CorruptStateError):
    """A checkpoint / metadata file is malformed; the message names the file and what is wrong."""

    def __init__(self, message: str, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


def read_state_text(path: Path, error: type[CheckpointError] = CheckpointError) -> str | None:
    """The text of a small state file, or None if it is absent.

    Garbage (bytes that are not UTF-8, NUL bytes a crash can leave in a file whose size was
    updated before its data) raises ``error`` naming the file and the byte, never a bare
    ``UnicodeDecodeError``.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{path}: not a text file (byte {e.start} is not UTF-8: {data[e.start:e.start + 8]!r})",
                    path) from None
    nul = text.find("\0")
    if nul >= 0:
        raise error(f"{path}: NUL byte at character {nul} (a torn or zero-filled write)", path)
    return text


class MetaPropertiesError(CheckpointError):
    """``meta.properties`` is unreadable: the node cannot know its cluster and refuses to start."""

    def __init__(self, message: str, path: Path | None = None) -> None:
        # Kafka refuses to start too; the way out is the same file from a backup or a sibling dir.
        super().__init__(f"{message}; restore it from a backup or copy meta.properties from another "
                         "log dir of this node (same cluster.id and node.id, directory.id from "
                         "`strom storage random-uuid`), or move the directory aside and run "
                         "`strom storage format` to start it empty", path)


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
    text = read_state_text(path)
    if text is None:
        return None
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: expected a version and a count line, found {len(lines)} line(s)", path)
    try:
        version = int(lines[0])
    except ValueError:
        raise CheckpointError(f"{path}:1: expected the version number {CHECKPOINT_VERSION}, got {lines[0][:80]!r}",
                              path) from None
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path}:1: unsupported checkpoint version {version} (expected {CHECKPOINT_VERSION})",
                              path)
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}:2: expected the number of entries, got {lines[1][:80]!r}", path) from None
    entries = [line for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise CheckpointError(f"{path}: line 2 announces {count} entries, found {len(entries)}", path)
    return entries


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Read a ``topic partition offset`` checkpoint; a missing file is an empty map."""
    entries = _read_versioned_lines(path)
    out: dict[TopicPartition, int] = {}
    for n, line in enumerate(entries or (), start=3):
        parts = line.split()
        if len(parts) != 3:
            raise CheckpointError(f"{path}:{n}: expected 'topic partition offset', got {line[:120]!r}", path)
        try:
            partition, offset = int(parts[1]), int(parts[2])
        except ValueError:
            raise CheckpointError(f"{path}:{n}: partition and offset must be integers, got {line[:120]!r}",
                                  path) from None
        if partition < 0:
            raise CheckpointError(f"{path}:{n}: negative partition {partition}", path)
        out[(parts[0], partition)] = offset
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
            raise CheckpointError(f"{path}:{n}: expected 'epoch startOffset', got {line[:120]!r}", path)
        try:
            out.append((int(parts[0]), int(parts[1])))
        except ValueError:
            raise CheckpointError(f"{path}:{n}: epoch and start offset must be integers, got {line[:120]!r}",
                                  path) from None
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


# Kafka takes the log dir offline here; the topic id is also in the metadata log, which wins.
_PARTITION_METADATA_WAY_OUT = ("move the file aside and restart: the broker then takes the partition's topic id "
                               "from the metadata log")


def write_partition_metadata(dir_path: Path, topic_id: uuid.UUID) -> None:
    # Byte for byte Kafka's PartitionMetadataFile: two lines, no newline after the second.
    write_atomically(dir_path / PARTITION_METADATA_FILE, f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}")


def read_partition_metadata(dir_path: Path) -> uuid.UUID | None:
    """The topic id stored in ``partition.metadata``, or None if there is no file."""
    path = dir_path / PARTITION_METADATA_FILE
    try:
        text = read_state_text(path)
    except CheckpointError as e:
        raise CheckpointError(f"{e}; {_PARTITION_METADATA_WAY_OUT}", path) from None
    if text is None:
        return None
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise CheckpointError(f"{path}: expected 'version: 0' and 'topic_id: <id>', got {text[:200]!r}; "
                              f"{_PARTITION_METADATA_WAY_OUT}", path)
    try:
        return topic_id_from_str(fields["topic_id"])
    except ValueError as e:
        raise CheckpointError(f"{path}: {e}; {_PARTITION_METADATA_WAY_OUT}", path) from None


# -- meta.properties --------------------------------------------------------------------------


def read_meta_properties(dir_path: Path) -> dict[str, str] | None:
    """The key/values of ``meta.properties`` in a log dir (None if absent), version-checked."""
    from strom.core.config import parse_properties

    path = dir_path / META_PROPERTIES
    text = read_state_text(path, MetaPropertiesError)
    if text is None:
        return None
    props = parse_properties(text)
    if props.get("version") not in ("0", "1"):
        raise MetaPropertiesError(f"{path}: unsupported meta.properties version {props.get('version')!r} "
                                  "(expected version=1 or version=0)", path)
    if props.get("version") == "1" and "node.id" not in props:
        raise MetaPropertiesError(f"{path}: version 1 requires node.id", path)
    for key in ("node.id", "broker.id"):
        if key in props and not props[key].lstrip("-").isdigit():
            raise MetaPropertiesError(f"{path}: {key} must be an integer, got {props[key][:40]!r}", path)
    if "cluster.id" in props and not props["cluster.id"]:
        raise MetaPropertiesError(f"{path}: cluster.id is empty", path)
    return props
