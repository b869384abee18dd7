"""The remote log manager's view of a live partition log (Kafka's ``UnifiedLog`` as seen by
``RLMCopyTask``): closed segments with their files, the last stable offset, the leader-epoch
entries, the producer snapshot taken at each roll and the topic's ``remote.log.copy.disable``.

It implements :class:`strom.tiered.remote_log_manager.TieredLog` structurally. Every call takes
the log's lock only long enough to copy what it needs, so a copy round (a worker thread) never
holds the log while it uploads. Only a broker with ``remote.log.storage.system.enable=true``
imports this module.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from strom.core.log.log import UnifiedLog
from strom.core.log.producer_state import snapshot_path
from strom.tiered.remote_log_manager import ClosedSegment


class UnifiedLogTieredView:
    """A :class:`~strom.tiered.remote_log_manager.TieredLog` over a :class:`UnifiedLog`."""

    def __init__(self, log: UnifiedLog) -> None:
        self.log = log

    def closed_segments(self) -> list[ClosedSegment]:
        with self.log.lock:
            segments = self.log.log_segments()
            out = []
            for seg, nxt in itertools.pairwise(segments):
                txn = seg.txn_index.path
                out.append(ClosedSegment(
                    seg.base_offset, nxt.base_offset, seg.log_path, seg.offset_index.path, seg.time_index.path,
                    txn if txn.exists() and txn.stat().st_size > 0 else None, seg.max_timestamp_so_far))
            return out

    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    def leader_epoch_entries(self) -> list[tuple[int, int]]:
        with self.log.lock:
            return self.log.epoch_cache.entries()

    def producer_snapshot(self, offset: int) -> Path | None:
        """The snapshot the log took when it rolled to ``offset`` (it names the new segment's base)."""
        path = snapshot_path(self.log.dir, offset)
        return path if path.exists() else None

    def remote_copy_disabled(self) -> bool:
        return bool(self.log.config.get("remote.log.copy.disable"))

    def update_highest_offset_in_remote_storage(self, offset: int) -> None:
        self.log.update_highest_offset_in_remote_storage(offset)

    def retention(self) -> tuple[int, int]:
        config = self.log.config
        if not config.delete:
            return -1, -1
        return config.retention_ms, config.retention_bytes

    def local_only_size(self, above: int) -> int:
        with self.log.lock:
            return sum(seg.size for seg in self.log.log_segments() if seg.base_offset > above)

    def increment_log_start_offset(self, offset: int) -> None:
        self.log.increment_log_start_for_remote(offset)
