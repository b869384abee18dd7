"""Built-in local tier ``local``: partition directories in ``log.dirs``, in Kafka's layout.

``<log.dir>/<topic>-<partition>/<20-digit base offset>.log`` with ``.index``, ``.timeindex`` and
``.txnindex`` beside it. Directories Kafka renames for deletion (``<topic>-<p>.<id>-delete``)
or future replicas (``-future``) and files with a further suffix (``.deleted``, ``.cleaned``,
``.swap``) are not segments of a live partition and are skipped.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from strom.plugins.hookspecs.storage import DEFAULT_LOCAL_TIER, LocalSegment, LocalTierFactory
from strom.plugins.markers import hookimpl

DEFAULT_LOG_DIRS = "/tmp/strom-logs"  # BrokerConfig's default for log.dirs


def segment_file_name(base_offset: int, suffix: str) -> str:
    """Kafka's file name of a segment file: the base offset as 20 digits + suffix."""
    return f"{base_offset:020d}{suffix}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``"orders-3"`` -> ("orders", 3); ``None`` for names that are not a live partition dir."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


class LocalDiskTier:
    """Segment files on local disks."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        raw = str((config or {}).get("log.dirs") or DEFAULT_LOG_DIRS)
        self._dirs = [Path(p.strip()) for p in raw.split(",") if p.strip()]

    def log_dirs(self) -> list[Path]:
        return list(self._dirs)

    def partition_dir(self, topic: str, partition: int, *, create: bool = False) -> Path | None:
        name = f"{topic}-{partition}"
        for d in self._dirs:
            if (d / name).is_dir():
                return d / name
        if not create:
            return None
        # Like Kafka's LogManager.nextLogDirs: the log dir holding the fewest partitions.
        target = min(self._dirs, key=self._partition_count) / name
        target.mkdir(parents=True, exist_ok=True)
        return target

    @staticmethod
    def _partition_count(log_dir: Path) -> int:
        try:
            return sum(1 for e in os.scandir(log_dir) if e.is_dir() and parse_partition_dir(e.name))
        except FileNotFoundError:
            return 0

    def list_segments(self, topic: str, partition: int) -> list[LocalSegment]:
        pdir = self.partition_dir(topic, partition)
        if pdir is None:
            return []
        out = []
        for entry in os.scandir(pdir):
            stem, _, suffix = entry.name.partition(".")
            if suffix != "log" or len(stem) != 20 or not stem.isdigit():
                continue
            base = int(stem)
            txn = pdir / segment_file_name(base, ".txnindex")
            out.append(LocalSegment(
                topic=topic, partition=partition, base_offset=base, log=Path(entry.path),
                size=entry.stat().st_size, offset_index=pdir / segment_file_name(base, ".index"),
                time_index=pdir / segment_file_name(base, ".timeindex"),
                transaction_index=txn if txn.exists() else None))
        out.sort(key=lambda s: s.base_offset)
        return out

    def read(self, segment: LocalSegment, start_position: int, end_position: int) -> bytes:
        if start_position < 0 or end_position < start_position:
            raise ValueError(f"bad byte range [{start_position}, {end_position})")
        fd = os.open(segment.log, os.O_RDONLY)
        try:
            return os.pread(fd, end_position - start_position, start_position)
        finally:
            os.close(fd)

    def delete_segment(self, segment: LocalSegment) -> None:
        for path in (segment.log, segment.offset_index, segment.time_index, segment.transaction_index):
            if path is not None:
                path.unlink(missing_ok=True)


@hookimpl
def strom_local_tiers() -> Mapping[str, LocalTierFactory]:
    return {DEFAULT_LOCAL_TIER: LocalDiskTier}
