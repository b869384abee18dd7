"""Storage formatting (``kafka-storage format``): ``meta.properties`` and ``bootstrap.checkpoint``.

:func:`format_storage` writes, in every log dir and the metadata log dir, Kafka 4's
``meta.properties``::

    version=1
    cluster.id=<id>
    node.id=<node.id>
    directory.id=<random Uuid, one per directory>

and, in the metadata log dir, ``bootstrap.checkpoint`` (snapshot layout: header, a batch with a
FeatureLevelRecord for ``metadata.version`` and one per other finalized feature, footer). The
active controller writes these bootstrap records as the first batch of an empty metadata log. A directory already formatted
for another cluster is refused (:class:`FormatError`); the same cluster is fine with
``ignore_formatted=True``.
"""

from __future__ import annotations

import base64
import os
import struct
import uuid
from collections.abc import Sequence
from pathlib import Path

from strom.core.config import BrokerConfig
from strom.core.exceptions import BrokerError, CorruptStateError
from strom.core.log.checkpoint import META_PROPERTIES, write_atomically
from strom.core.log.checkpoint import read_meta_properties as _read_meta_properties
from strom.core.metadata.features import (
    LATEST_PRODUCTION_METADATA_VERSION,
    METADATA_VERSION_FEATURE,
    METADATA_VERSION_LEVELS,
    RECORDED_FEATURES,
    FeatureError,
    default_levels,
    dependency_problem,
)
from strom.core.metadata.features import (
    MINIMUM_METADATA_VERSION as MINIMUM_METADATA_VERSION,  # re-exported: older importers
)
from strom.core.metadata.records import FeatureLevelRecord, Message, decode_record, encode_record
from strom.core.raft.snapshot import read_snapshot_file, write_snapshot_file
from strom.exceptions import StromError

BOOTSTRAP_FILE = "bootstrap.checkpoint"

# Release -> metadata.version level: each release's newest level (Kafka's MetadataVersion
# fromVersionString takes "4.3" as 4.3-IV0, its latest level); every "x.y-IVn" name is also known.
METADATA_VERSIONS: dict[str, int] = {}
for _name, _level in METADATA_VERSION_LEVELS.items():
    METADATA_VERSIONS[_name.split("-")[0]] = _level
LATEST_METADATA_VERSION = LATEST_PRODUCTION_METADATA_VERSION


class FormatError(BrokerError):
    """A storage directory cannot be formatted (or is not formatted) as asked."""


class BootstrapFileError(CorruptStateError):
    """``bootstrap.checkpoint`` is unreadable; the message names it and the way out."""


def random_uuid() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: base64url, no padding, never starting with '-'."""
    while True:
        raw = os.urandom(16)
        text = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
        # Kafka also rejects the reserved zero / metadata-topic ids; a leading '-' would read as
        # a command-line option.
        if not text.startswith("-") and raw not in (bytes(16), (1).to_bytes(16, "big")):
            return text


def uuid_from_str(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a base64 Kafka Uuid")
    return uuid.UUID(bytes=raw)


def read_meta_properties(directory: str | os.PathLike[str]) -> dict[str, str] | None:
    """``meta.properties`` of a directory as a dict, or None if the directory is not formatted."""
    return _read_meta_properties(Path(directory))


def metadata_level(release_version: str | None) -> int:
    """The metadata.version level of ``4.3``, ``4.3-IV0`` or ``4.3.1`` (default: the latest production one)."""
    if release_version is None:
        return LATEST_METADATA_VERSION
    text = release_version.strip()
    if text in METADATA_VERSION_LEVELS:
        return METADATA_VERSION_LEVELS[text]
    key = ".".join(text.split("-")[0].split(".")[:2])
    if "-" in text or key not in METADATA_VERSIONS:
        known = ", ".join(METADATA_VERSION_LEVELS)
        raise FormatError(f"unknown release version {release_version!r}; known: {known}")
    return METADATA_VERSIONS[key]


def bootstrap_records(metadata_version: int = LATEST_METADATA_VERSION,
                      features: dict[str, int] | None = None) -> list[Message]:
    """metadata.version, then every other feature: its default for that version unless overridden.

    A feature level that needs a newer metadata.version (``eligible.leader.replicas.version=1``
    before 4.0-IV1) is refused, as ``kafka-storage format`` refuses it.
    """
    levels = {**default_levels(metadata_version), **(features or {})}
    for name, level in levels.items():
        problem = dependency_problem(name, level, metadata_version)
        if problem is not None:
            raise FeatureError(problem)
    return [FeatureLevelRecord(METADATA_VERSION_FEATURE, metadata_version),
            *(FeatureLevelRecord(name, level) for name, level in sorted(levels.items())
              if level > 0 and name in RECORDED_FEATURES)]


def format_storage(config: BrokerConfig, cluster_id: str, *, ignore_formatted: bool = False,
                   release_version: str | None = None, features: dict[str, int] | None = None,
                   extra_records: Sequence[Message] = ()) -> list[Path]:
    """Format every log dir and the metadata dir; return the directories written.

    ``features`` overrides the default level of a feature (``kafka-storage format --feature``);
    ``extra_records`` go into the bootstrap metadata after the features (``--add-scram``'s
    UserScramCredentialRecords).
    """
    try:
        if len(uuid_from_str(cluster_id).bytes) != 16:
            raise ValueError
    except ValueError:
        raise FormatError(f"cluster id {cluster_id!r} is not a base64-encoded 16-byte Uuid") from None
    level = metadata_level(release_version)
    records = [*bootstrap_records(level, features), *extra_records]  # a refused level leaves nothing written
    dirs: list[Path] = []
    for d in [*config.log_dir_list, config.metadata_dir]:
        if d not in dirs:
            dirs.append(d)
    # Check every directory before writing any, so a refusal leaves nothing half-formatted.
    todo = []
    for d in dirs:
        props = read_meta_properties(d)
        if props is None:
            todo.append(d)
            continue
        if props.get("cluster.id") != cluster_id:
            raise FormatError(f"{d} is already formatted for cluster {props.get('cluster.id')!r}, "
                              f"not {cluster_id!r}; remove it to reformat")
        if props.get("node.id") != str(config.node_id):
            raise FormatError(f"{d} is formatted for node.id {props.get('node.id')}, not {config.node_id}")
        if not ignore_formatted:
            raise FormatError(f"{d} is already formatted (use ignore_formatted to skip formatted dirs)")
    for d in todo:
        d.mkdir(parents=True, exist_ok=True)
        write_atomically(d / META_PROPERTIES,
                         "#\n#Written by strom format\n"
                         f"cluster.id={cluster_id}\ndirectory.id={random_uuid()}\n"
                         f"node.id={config.node_id}\nversion=1\n")
    bootstrap = config.metadata_dir / BOOTSTRAP_FILE
    if config.metadata_dir in todo or not bootstrap.exists():
        write_snapshot_file(bootstrap, [encode_record(r) for r in records], epoch=0)
    return todo


def read_bootstrap(metadata_dir: Path) -> list[Message]:
    """The records of ``bootstrap.checkpoint``; Kafka's default (latest metadata.version) if absent."""
    path = metadata_dir / BOOTSTRAP_FILE
    if not path.exists():
        return bootstrap_records()
    out: list[Message] = []
    try:
        for value in read_snapshot_file(path):
            rec = decode_record(value)
            if isinstance(rec, Message):
                out.append(rec)
    except (StromError, ValueError, IndexError, struct.error) as e:
        raise BootstrapFileError(
            f"{path}: not a readable bootstrap checkpoint ({e}); it is only read to start an empty metadata "
            "log: restore it from a backup, or move it aside to bootstrap with the latest metadata.version "
            "and the default feature levels") from None
    return out
