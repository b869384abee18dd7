"""A KafkaRaftClient-like replicated log for the metadata partition ``__cluster_metadata-0``.

Roles follow KRaft: ``unattached`` → ``candidate`` (epoch + 1, vote for self, persisted in
``quorum-state`` before acting) → ``leader`` once a majority of voters granted the vote. With
one voter (the only configuration strom runs today) the candidate's own vote is the majority,
so startup ends as leader in a new epoch; more voters need the Vote/BeginQuorumEpoch/Fetch RPCs,
which are not implemented yet (:class:`RaftClient` refuses a multi-voter set rather than
pretending).

As leader:

* the first batch of the epoch is a control batch with a ``LeaderChangeMessage`` (control type
  2), as Kafka writes it;
* :meth:`RaftClient.append` writes one batch (one atomic unit of metadata records) whose
  partition leader epoch is the current epoch, fsyncs it off the event loop, and advances the
  high watermark to the fsynced end offset — the majority of one voter;
* committed batches go to listeners in offset order (``handle_commit``); on startup the newest
  valid snapshot is loaded first (``handle_load_snapshot``), then the log after it is replayed.

Appends are serialized by an ``asyncio.Lock``: a batch is committed and delivered before the
next is written, so listeners see exactly the log's order. That order is also what lets a
restart tell a torn tail from corruption (:mod:`strom.core.raft.log`): a batch followed by
another was fsynced. The durable high watermark goes to ``quorum-state`` (``appliedOffset``)
once the first batch of an epoch is committed, after each snapshot and at close.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from strom.core.errors import CorruptMessageError, KafkaStorageError, NotLeaderOrFollowerError
from strom.core.raft.control_records import (
    CONTROL_LEADER_CHANGE,
    LeaderChangeMessage,
    Voter,
    control_key,
    skip_control_record,
)
from strom.core.raft.log import MetadataLogCorruptedError, RaftLog
from strom.core.raft.quorum_state import ElectionState, QuorumStateStore
from strom.core.raft.snapshot import SnapshotId, list_snapshots, read_snapshot_file, write_snapshot
from strom.core.records.builder import SimpleRecord, build_batch, decode_batch, now_ms

log = logging.getLogger(__name__)

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION_DIR = f"{METADATA_TOPIC}-0"


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    """One committed batch: its offsets, epoch, and the (offset, value) of its data records."""

    base_offset: int
    last_offset: int
    epoch: int
    append_timestamp: int
    size_in_bytes: int
    is_control: bool
    records: list[tuple[int, bytes]]


class RaftListener(Protocol):
    """Consumer of the committed log (the metadata loader)."""

    def handle_load_snapshot(self, snapshot_id: SnapshotId, values: list[bytes]) -> None: ...

    def handle_commit(self, batch: CommittedBatch) -> None: ...


class RaftClient:
    """The raft state machine of one node over a :class:`RaftLog` and a partition directory."""

    def __init__(self, node_id: int, voters: Sequence[int], directory: Path, raft_log: RaftLog) -> None:
        if node_id not in voters:
            raise ValueError(f"node {node_id} is not among the voters {list(voters)}")
        if len(voters) != 1:
            # Elections with other voters need the Vote / BeginQuorumEpoch / Fetch RPCs.
            raise NotImplementedError("multi-voter KRaft quorums are not implemented yet")
        self.node_id = node_id
        self.voters = tuple(sorted(voters))
        self.directory = directory
        self.log = raft_log
        self.store = QuorumStateStore(directory)
        self.state = ElectionState(0, -1, -1, self.voters)
        self.role = "unattached"
        self.high_watermark = 0
        self.latest_snapshot: SnapshotId | None = None
        self._listeners: list[RaftListener] = []
        self._lock = asyncio.Lock()
        self._last_committed_epoch = 0
        # The high watermark last written to quorum-state; only offsets known fsynced go there.
        self._stored_high_watermark = 0
        self._started = False

    # -- state ---------------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def is_leader(self) -> bool:
        return self.role == "leader"

    @property
    def end_offset(self) -> int:
        return self.log.end_offset

    @property
    def last_committed_epoch(self) -> int:
        return self._last_committed_epoch

    def register_listener(self, listener: RaftListener) -> None:
        self._listeners.append(listener)

    def _persist(self, state: ElectionState) -> None:
        # The state is durable before the node acts in it (votes, leads, appends).
        state = dataclasses.replace(state, high_watermark=self._stored_high_watermark)
        self.store.write(state)
        self.state = state

    def persist_high_watermark(self) -> None:
        """Write the current high watermark (every offset below it is fsynced) to quorum-state."""
        if not self._started or self.high_watermark <= self._stored_high_watermark:
            return
        self._stored_high_watermark = self.high_watermark
        self._persist(self.state)

    # -- startup -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load state, replay snapshot + log to the listeners, win the election, write LeaderChange."""
        stored = self.store.read()
        if stored is not None:
            self.state = ElectionState(stored.epoch, -1, stored.voted_id, self.voters)
            self._stored_high_watermark = stored.high_watermark
        self.role = "unattached"
        self._replay_existing()
        # Candidate: bump the epoch and vote for ourselves; persisted before anything else. The
        # log's last epoch counts too: a quorum-state moved aside must not make epochs go back.
        epoch = max(self.state.epoch, self._last_committed_epoch) + 1
        self._persist(ElectionState(epoch, -1, self.node_id, self.voters))
        self.role = "candidate"
        granted = {self.node_id}
        if len(granted) * 2 > len(self.voters):
            await self._become_leader(granted)

    def _replay_existing(self) -> None:
        """Everything on disk was fsynced by a leader of an earlier epoch; with one voter it is
        committed once the new leader's first batch is, so it is delivered now, in order."""
        start = self._load_latest_snapshot()
        if start < self.log.start_offset:
            # Offsets [start, log start) are in no readable snapshot and not in the log: restarting
            # the log at the snapshot would silently drop the metadata written after it.
            raise MetadataLogCorruptedError(
                f"metadata log {self.directory} starts at offset {self.log.start_offset}, but the newest "
                f"readable snapshot ends at {start}: offsets {start}..{self.log.start_offset - 1} are in "
                "neither (an unreadable snapshot was skipped, see the WARNING above). Restore the "
                f"snapshot files of {self.directory} from a backup")
        if start > self.log.end_offset:
            if self.log.end_offset > self.log.start_offset:
                log.warning("metadata log [%d, %d) does not continue snapshot at %d; restarting the log there",
                            self.log.start_offset, self.log.end_offset, start)
            self.log.truncate_fully_and_start_at(start)
        self.high_watermark = start
        for _base, data in self.log.read(start):
            self._deliver(data, min_offset=start)
        self.high_watermark = self.log.end_offset

    def _load_latest_snapshot(self) -> int:
        for sid in reversed(list_snapshots(self.directory)):
            try:
                values = read_snapshot_file(self.directory / sid.file_name)
            except (CorruptMessageError, OSError) as e:
                log.warning("skipping unreadable snapshot %s: %s", sid.file_name, e)
                continue
            self.latest_snapshot = sid
            self._last_committed_epoch = sid.epoch
            for listener in self._listeners:
                listener.handle_load_snapshot(sid, values)
            return sid.end_offset
        return 0

    async def _become_leader(self, granted: set[int]) -> None:
        self._persist(ElectionState(self.state.epoch, self.node_id, -1, self.voters))
        self.role = "leader"
        message = LeaderChangeMessage(0, self.node_id, [Voter(v) for v in self.voters],
                                      [Voter(v) for v in sorted(granted)])
        batch = build_batch([SimpleRecord(control_key(CONTROL_LEADER_CHANGE), message.encode(0), (), now_ms())],
                            base_offset=self.log.end_offset, control=True, partition_leader_epoch=self.epoch)
        async with self._lock:
            await self._append_and_commit(batch)
        # Everything up to here is fsynced and committed (the replayed log included).
        self._started = True
        await asyncio.to_thread(self.persist_high_watermark)
        log.info("node %d is the metadata leader in epoch %d (log end offset %d)",
                 self.node_id, self.epoch, self.log.end_offset)

    # -- appends -------------------------------------------------------------------------------

    async def append(self, values: Sequence[bytes]) -> int:
        """Append ``values`` as one batch, wait until it is committed and delivered; return
        the offset of its last record. Raises ``NotLeaderOrFollowerError`` on a non-leader."""
        if not values:
            raise ValueError("an append needs at least one record")
        async with self._lock:
            if not self.is_leader:
                raise NotLeaderOrFollowerError(f"node {self.node_id} is not the metadata leader")
            ts = now_ms()
            batch = build_batch([SimpleRecord(None, v, (), ts) for v in values],
                                base_offset=self.log.end_offset, partition_leader_epoch=self.epoch)
            return await self._append_and_commit(batch)

    async def _append_and_commit(self, batch: bytes) -> int:
        first, last = self.log.append(batch, self.epoch)
        try:
            await asyncio.to_thread(self.log.flush)
        except (OSError, KafkaStorageError):
            # Not durable: drop it so the log never holds a batch the quorum did not commit. The
            # storage engine reports a failed fsync as KAFKA_STORAGE_ERROR (the dir goes offline);
            # if the cut fails too, the next start's metadata log check finds the batch past the
            # durable high watermark and truncates it as a torn tail.
            with contextlib.suppress(OSError, KafkaStorageError):
                self.log.truncate_to(first)
            raise
        self._deliver(batch, min_offset=first)
        self.high_watermark = last + 1
        return last

    def _deliver(self, data: bytes, *, min_offset: int) -> None:
        decoded = decode_batch(data, 0, check_crc=False)
        h = decoded.header
        if h.is_control:
            for r in decoded.records:
                skip_control_record(r.key, "the metadata log")
        records = [] if h.is_control else [
            (h.base_offset + r.offset_delta, r.value) for r in decoded.records
            if r.value is not None and h.base_offset + r.offset_delta >= min_offset
        ]
        committed = CommittedBatch(h.base_offset, h.last_offset, h.partition_leader_epoch, h.max_timestamp,
                                   h.size, h.is_control, records)
        self._last_committed_epoch = h.partition_leader_epoch
        for listener in self._listeners:
            listener.handle_commit(committed)

    # -- snapshots -----------------------------------------------------------------------------

    async def write_snapshot(self, snapshot_id: SnapshotId, values: list[bytes]) -> None:
        """Persist a snapshot of the committed state below ``snapshot_id.end_offset``."""
        if snapshot_id.end_offset > self.high_watermark:
            raise ValueError(f"snapshot {snapshot_id} is beyond the high watermark {self.high_watermark}")
        await asyncio.to_thread(write_snapshot, self.directory, snapshot_id, values)
        if self.latest_snapshot is None or snapshot_id > self.latest_snapshot:
            self.latest_snapshot = snapshot_id
        await asyncio.to_thread(self.persist_high_watermark)

    def close(self) -> None:
        self.role = "resigned"
        self.log.close()
        try:
            self.persist_high_watermark()
        except OSError as e:
            # The next start then knows an older high watermark: only a damaged tail past it
            # would be truncated instead of refused.
            log.warning("could not record the metadata high watermark in %s: %s", self.store.path, e)
        self._started = False
