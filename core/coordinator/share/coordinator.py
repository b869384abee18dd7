"""The share coordinator: the durable state of share partitions in ``__share_group_state``.

Kafka's ``ShareCoordinatorShard`` over strom's coordinator runtime. A share partition's state
(:class:`ShareGroupOffset`: state epoch, leader epoch, start offset, state batches) lives under
the keys ``ShareSnapshotKey`` / ``ShareUpdateKey`` (group, topic id, partition), in the
``__share_group_state`` partition its coordinator key hashes to. A write appends a ShareUpdate
record of the changed batches; after ``share.coordinator.snapshot.update.records.per.snapshot``
updates it appends a whole ShareSnapshot instead, so replay reads a bounded tail. Delete writes
tombstones of both keys. On start-up the coordinator replays the topic; the topic itself is
created on first use, as Kafka creates it when the first share group needs it, so a broker
that never sees a share group has no ``__share_group_state``.

Event-loop only. Validation as Kafka 4.3.1 answers: an initialize or write with a state epoch
older than the stored one is FENCED_STATE_EPOCH, a read or write with an older leader epoch
FENCED_LEADER_EPOCH (-1 checks nothing); a write of a state never initialized is INVALID_REQUEST.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from strom.core.coordinator.runtime import CoordinatorNode, CoordinatorRuntime, java_hash_partition
from strom.core.coordinator.share.share_partition import PersisterStateBatch
from strom.core.coordinator.share.state_records import (
    SHARE_GROUP_STATE_TOPIC,
    ShareGroupOffset,
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareUpdateKey,
    ShareUpdateValue,
    coordinator_key,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    to_wire_batches,
)
from strom.core.errors import (
    CoordinatorNotAvailableError,
    FencedLeaderEpochError,
    FencedStateEpochError,
    InvalidRequestError,
    KafkaError,
)

log = logging.getLogger(__name__)

PARTITION_WAIT_S = 30.0
# Kafka's ShareCoordinatorConfig defaults (strom keeps no broker config for these yet).
DEFAULT_STATE_TOPIC_NUM_PARTITIONS = 50
DEFAULT_SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT = 500
DEFAULT_STATE_TOPIC_SEGMENT_BYTES = 104857600

StateKey = tuple[str, uuid.UUID, int]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class ShareStateSummary:
    """ReadShareGroupStateSummary's answer for one share partition."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int


class ShareCoordinator:
    """Every share partition's durable state on this broker (single node: all of it)."""

    def __init__(self, node: CoordinatorNode, *, clock: Callable[[], int] = _now_ms,
                 num_partitions: int = DEFAULT_STATE_TOPIC_NUM_PARTITIONS,
                 updates_per_snapshot: int = DEFAULT_SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT) -> None:
        self.node = node
        self.clock = clock
        self.num_partitions = num_partitions
        self.updates_per_snapshot = updates_per_snapshot
        self.runtime: CoordinatorRuntime | None = None
        self.states: dict[StateKey, ShareGroupOffset] = {}
        # ShareUpdate records written since the key's last ShareSnapshot.
        self._updates_since_snapshot: dict[StateKey, int] = {}
        self._topic_ready = False
        self._topic_lock = asyncio.Lock()

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self, runtime: CoordinatorRuntime) -> None:
        """Replay ``__share_group_state`` if it exists (it is created on first use)."""
        self.runtime = runtime
        topic = self.node.image.topics.get(SHARE_GROUP_STATE_TOPIC)
        if topic is not None:
            # An existing topic keeps its partition count: keys hash by what is on disk.
            self.num_partitions = len(topic.partitions)
            await self._wait_for_partitions()
            self._topic_ready = True
            self._load()

    async def _ensure_topic(self) -> CoordinatorRuntime:
        runtime = self.runtime
        if runtime is None:
            raise RuntimeError("share coordinator not started")
        if self._topic_ready:
            return runtime
        async with self._topic_lock:
            if not self._topic_ready:
                await runtime.ensure_topic(SHARE_GROUP_STATE_TOPIC, self.num_partitions, {
                    "cleanup.policy": "compact",
                    "segment.bytes": str(DEFAULT_STATE_TOPIC_SEGMENT_BYTES),
                    "compression.type": "uncompressed",
                    "unclean.leader.election.enable": "false",
                })
                topic = self.node.image.topics.get(SHARE_GROUP_STATE_TOPIC)
                if topic is not None:
                    self.num_partitions = len(topic.partitions)
                await self._wait_for_partitions()
                self._topic_ready = True
        return runtime

    async def _wait_for_partitions(self) -> None:
        # The topic is committed; the ReplicaManager creates the logs when the image is published.
        rm = self.node.replica_manager
        deadline = time.monotonic() + PARTITION_WAIT_S
        while any((SHARE_GROUP_STATE_TOPIC, p) not in rm.partitions for p in range(self.num_partitions)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{SHARE_GROUP_STATE_TOPIC} partitions did not appear in {PARTITION_WAIT_S}s")
            await asyncio.sleep(0.02)

    def _load(self) -> None:
        assert self.runtime is not None
        self.states.clear()
        self._updates_since_snapshot.clear()
        for p in range(self.num_partitions):
            try:
                self._load_partition(p)
            except KafkaError as e:
                # A corrupt batch (the log is not re-validated after a clean shutdown) must not
                # stop the broker: the state is what the partition's valid prefix says.
                log.error("loading %s-%d stopped at a corrupt batch, its earlier records kept: %s",
                          SHARE_GROUP_STATE_TOPIC, p, e)
        log.info("loaded the state of %d share partition(s) from %s", len(self.states), SHARE_GROUP_STATE_TOPIC)

    def _load_partition(self, p: int) -> None:
        assert self.runtime is not None
        for record in self.runtime.read(SHARE_GROUP_STATE_TOPIC, p):
            if record.key is None or record.header.is_control:
                continue
            try:
                key = decode_key(record.key)
                if key is None:
                    continue  # a record type of a later version
                self._replay(key, decode_value(key, record.value))
            except KafkaError as e:
                # A record we cannot read must not stop the coordinator: skip it, loudly.
                log.error("skipping unreadable %s-%d record at offset %d: %s",
                          SHARE_GROUP_STATE_TOPIC, p, record.offset, e)

    def _replay(self, key: ShareSnapshotKey | ShareUpdateKey, value: ShareSnapshotValue | ShareUpdateValue | None) -> None:
        k: StateKey = (key.group_id, key.topic_id, key.partition)
        if value is None:
            self.states.pop(k, None)
            self._updates_since_snapshot.pop(k, None)
        elif isinstance(value, ShareSnapshotValue):
            self.states[k] = ShareGroupOffset.from_snapshot(value)
            self._updates_since_snapshot[k] = 0
        else:
            current = self.states.get(k)
            # An update of an older snapshot than the one we hold was superseded by it.
            if current is not None and value.snapshot_epoch == current.snapshot_epoch:
                self.states[k] = current.apply_update(value)
                self._updates_since_snapshot[k] = self._updates_since_snapshot.get(k, 0) + 1

    # -- the state APIs -----------------------------------------------------------------------

    def partition_for(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        """The ``__share_group_state`` partition holding this share partition's state."""
        return java_hash_partition(coordinator_key(group_id, topic_id, partition), self.num_partitions)

    async def find_coordinator(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        """The ``__share_group_state`` partition whose leader coordinates this share partition
        (FindCoordinator key type 2), creating the topic on first use as Kafka does."""
        if self.runtime is None:
            raise CoordinatorNotAvailableError("the share coordinator is starting")
        await self._ensure_topic()
        return self.partition_for(group_id, topic_id, partition)

    def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ShareGroupOffset | None:
        """The stored state (ReadShareGroupState); None when never initialized or deleted."""
        return self.states.get((group_id, topic_id, partition))

    async def read_state_for_leader(self, group_id: str, topic_id: uuid.UUID, partition: int,
                                    leader_epoch: int) -> ShareGroupOffset | None:
        """ReadShareGroupState from a share-partition leader: a newer leader epoch is recorded
        (a ShareUpdate with no batches), an older one is FENCED_LEADER_EPOCH."""
        current = self.states.get((group_id, topic_id, partition))
        if current is None or leader_epoch == -1 or leader_epoch == current.leader_epoch:
            return current
        if leader_epoch < current.leader_epoch:
            raise FencedLeaderEpochError()
        await self.write_state(group_id, topic_id, partition, state_epoch=current.state_epoch,
                               leader_epoch=leader_epoch, start_offset=-1, state_batches=(),
                               delivery_complete_count=current.delivery_complete_count)
        return self.states.get((group_id, topic_id, partition))

    def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ShareStateSummary | None:
        s = self.states.get((group_id, topic_id, partition))
        if s is None:
            return None
        return ShareStateSummary(s.state_epoch, s.leader_epoch, s.start_offset, s.delivery_complete_count)

    def group_partitions(self, group_id: str) -> list[tuple[uuid.UUID, int]]:
        """Every share partition of ``group_id`` with state (DescribeShareGroupOffsets of all
        topics, DeleteShareGroupOffsets), as (topic id, partition)."""
        return [(topic_id, partition) for (g, topic_id, partition) in self.states if g == group_id]

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, *,
                               state_epoch: int, start_offset: int) -> None:
        """InitializeShareGroupState: a fresh snapshot at ``start_offset`` with no batches."""
        runtime = await self._ensure_topic()
        k: StateKey = (group_id, topic_id, partition)
        current = self.states.get(k)
        # Kafka 4.3.1 re-initializes at the same state epoch; only an older one is fenced.
        if current is not None and current.state_epoch > state_epoch:
            raise FencedStateEpochError()
        now = self.clock()
        state = ShareGroupOffset(snapshot_epoch=0 if current is None else current.snapshot_epoch + 1,
                                 state_epoch=state_epoch, leader_epoch=-1, start_offset=start_offset,
                                 create_timestamp=now, write_timestamp=now)
        self._write_snapshot(runtime, k, state)

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int,
                          leader_epoch: int, start_offset: int, state_batches: Sequence[PersisterStateBatch],
                          delivery_complete_count: int = -1) -> None:
        """WriteShareGroupState: fold the changed batches in (``start_offset`` -1: unchanged)."""
        runtime = await self._ensure_topic()
        k: StateKey = (group_id, topic_id, partition)
        current = self.states.get(k)
        now = self.clock()
        if current is None:
            raise InvalidRequestError("Write operation on uninitialized share partition not allowed.")
        # -1 checks nothing (Kafka: the epoch is not being written); FENCED_* carry Kafka's default text.
        if leader_epoch != -1 and leader_epoch < current.leader_epoch:
            raise FencedLeaderEpochError()
        if state_epoch != -1 and state_epoch < current.state_epoch:
            raise FencedStateEpochError()
        if state_epoch == -1:
            state_epoch = current.state_epoch
        update = ShareUpdateValue(snapshot_epoch=current.snapshot_epoch, leader_epoch=leader_epoch,
                                  start_offset=start_offset, delivery_complete_count=delivery_complete_count,
                                  state_batches=to_wire_batches(state_batches))
        merged = replace(current.apply_update(update), state_epoch=state_epoch, write_timestamp=now)
        if self._updates_since_snapshot.get(k, 0) + 1 >= self.updates_per_snapshot:
            self._write_snapshot(runtime, k, replace(merged, snapshot_epoch=current.snapshot_epoch + 1))
            return
        p = self.partition_for(group_id, topic_id, partition)
        runtime.append_now(SHARE_GROUP_STATE_TOPIC, p, [
            (encode_key(ShareUpdateKey(group_id, topic_id, partition)), encode_value(update))])
        self.states[k] = merged
        self._updates_since_snapshot[k] = self._updates_since_snapshot.get(k, 0) + 1

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        """DeleteShareGroupState: tombstones of both keys (a no-op for unknown state)."""
        runtime = await self._ensure_topic()
        k: StateKey = (group_id, topic_id, partition)
        if k not in self.states:
            return
        p = self.partition_for(group_id, topic_id, partition)
        runtime.append_now(SHARE_GROUP_STATE_TOPIC, p, [
            (encode_key(ShareSnapshotKey(group_id, topic_id, partition)), None),
            (encode_key(ShareUpdateKey(group_id, topic_id, partition)), None),
        ])
        self.states.pop(k, None)
        self._updates_since_snapshot.pop(k, None)

    def _write_snapshot(self, runtime: CoordinatorRuntime, k: StateKey, state: ShareGroupOffset) -> None:
        group_id, topic_id, partition = k
        p = self.partition_for(group_id, topic_id, partition)
        # In the log before in memory: a failed append leaves the old state visible.
        runtime.append_now(SHARE_GROUP_STATE_TOPIC, p, [
            (encode_key(ShareSnapshotKey(group_id, topic_id, partition)), encode_value(state.to_snapshot()))])
        self.states[k] = state
        self._updates_since_snapshot[k] = 0
