"""GroupCoordinator: every group of this broker, persisted in ``__consumer_offsets``.

A group lives in partition ``java_hash_partition(group_id, offsets.topic.num.partitions)`` of
``__consumer_offsets``; the leader of that partition is its coordinator (single node: this
broker). ``start`` creates the topic if needed and replays every partition - GroupMetadata
records rebuild classic groups, OffsetCommit records the committed offsets, ConsumerGroup*
records KIP-848 groups, transactional offset batches wait for their COMMIT/ABORT marker - and
only then does the coordinator answer (COORDINATOR_LOAD_IN_PROGRESS before). Every change is
appended through the coordinator runtime first and applied to memory after the append.

KIP-848 groups (``consumer_group.ConsumerGroup``, with ``consumer_group_service``) plug in
through ``ConsumerGroup(group_id)``, ``replay(key, value)`` for record types 3..8 (value ``None``
= tombstone), ``state``, ``is_empty()``, ``deleted``, ``validate_offset_commit`` /
``validate_offset_fetch(member_id, member_epoch)`` and ``delete_records()``; their changes go
through :meth:`GroupCoordinator.write_records` (append, then replay into the group).

Share groups (KIP-932, ``share_group.ShareGroup``) live in the same map; their heartbeats,
records (ShareGroup* types 10..15), expiry and deletion are ``share_group_service``'s
(:attr:`GroupCoordinator.share`). A share group id is not a consumer group: as Kafka 4.3.1, JoinGroup
answers INCONSISTENT_GROUP_PROTOCOL, Heartbeat/SyncGroup/LeaveGroup UNKNOWN_MEMBER_ID, OffsetCommit
and the KIP-848 APIs GROUP_ID_NOT_FOUND.

Offset commits to a KIP-848 group follow Kafka 4.3 (KIP-1251): an epoch older than the member's
is checked per partition against the epoch the partition was assigned at, and one refused
partition refuses the whole commit (STALE_MEMBER_EPOCH; ILLEGAL_GENERATION for TxnOffsetCommit),
nothing of it written.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group import records as rec
from strom.core.coordinator.group.classic import ClassicGroup, GroupState, JoinResult, SyncResult
from strom.core.coordinator.group.offsets import OffsetAndMetadata, OffsetStore, TopicPartition
from strom.core.coordinator.group.share_group_service import (
    SHARE_KEYS,
    MemberListener,
    ShareGroupService,
    load_share_assignors,
)
from strom.core.coordinator.runtime import (
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    CoordinatorNode,
    java_hash_partition,
)
from strom.core.coordinator.share.share_group import ShareGroup
from strom.core.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    CorruptMessageError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidCommitOffsetSizeError,
    InvalidFetchSizeError,
    InvalidGroupIdError,
    InvalidRequestError,
    InvalidSessionTimeoutError,
    KafkaError,
    KafkaStorageError,
    NonEmptyGroupError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RebalanceInProgressError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    RequestTimedOutError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)

if TYPE_CHECKING:
    import uuid

    import pluggy

    from strom.core.config import BrokerConfig
    from strom.core.coordinator.group.consumer_group import CommitPartitionValidator
    from strom.core.coordinator.runtime import CoordinatorRuntime
    from strom.core.coordinator.share.coordinator import ShareCoordinator
    from strom.core.metadata.image import MetadataImage
    from strom.plugins.hookspecs.assignors import ConsumerGroupPartitionAssignor

log = logging.getLogger(__name__)


OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"}
TRANSACTION_STATE_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600",
                             "compression.type": "producer", "min.insync.replicas": "1"}
OFFSET_METADATA_MAX_BYTES = 4096          # offset.metadata.max.bytes
KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION = 0, 1
CONTROL_COMMIT = 1

E = ErrorCode

# The keys of KIP-848 consumer group records: each names its group.
_CONSUMER_GROUP_KEYS = (rec.ConsumerGroupMetadataKey, rec.ConsumerGroupPartitionMetadataKey,
                        rec.ConsumerGroupMemberMetadataKey, rec.ConsumerGroupTargetAssignmentMetadataKey,
                        rec.ConsumerGroupTargetAssignmentMemberKey, rec.ConsumerGroupCurrentMemberAssignmentKey)

# Log append failures as a coordinator reports them (Kafka's OffsetCommit/JoinGroup mapping).
_APPEND_ERRORS: dict[int, type[KafkaError]] = {
    UnknownTopicOrPartitionError.errno: CoordinatorNotAvailableError,
    NotEnoughReplicasError.errno: CoordinatorNotAvailableError,
    NotEnoughReplicasAfterAppendError.errno: CoordinatorNotAvailableError,
    RequestTimedOutError.errno: CoordinatorNotAvailableError,
    NotLeaderOrFollowerError.errno: NotCoordinatorError,
    KafkaStorageError.errno: NotCoordinatorError,
    RecordTooLargeError.errno: InvalidCommitOffsetSizeError,
    RecordBatchTooLargeError.errno: InvalidCommitOffsetSizeError,
    InvalidFetchSizeError.errno: InvalidCommitOffsetSizeError,
}


def _mark_deleted(group: Any) -> None:
    """A group removed from the coordinator: a classic group closes (its members' waits end) and
    is Dead; a KIP-848 group is marked deleted."""
    if isinstance(group, ClassicGroup):
        group.close()
        group.state = GroupState.DEAD
    elif isinstance(group, ShareGroup):
        group.deleted = True
    else:
        setattr(group, "deleted", True)  # noqa: B010 - a ConsumerGroup


def _now_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinatorHost(CoordinatorNode, Protocol):
    """What the group coordinator uses of the node it runs in (the broker satisfies it):
    :class:`CoordinatorNode` (the image gives topics and ids, the replica manager whether this
    node leads a group's partition) and the plugin manager (the KIP-848 assignors). The node's
    transaction coordinator, when it has one, is looked up as ``txn_coordinator`` (FindCoordinator)."""

    @property
    def plugin_manager(self) -> pluggy.PluginManager: ...


class GroupCoordinator:
    """Owns the groups and offsets of ``__consumer_offsets`` (see the module docstring)."""

    def __init__(self, broker: GroupCoordinatorHost) -> None:
        self.broker = broker
        self.runtime: CoordinatorRuntime | None = None
        self.num_partitions = broker.config.offsets_topic_num_partitions
        self.groups: dict[str, Any] = {}       # group id -> ClassicGroup | ConsumerGroup
        self.offsets = OffsetStore()
        self.loaded = False
        self._closed = False
        self._cleanup_task: asyncio.Task[None] | None = None
        self.share = ShareGroupService(self)
        self._share_assignors: dict[str, ConsumerGroupPartitionAssignor] | None = None

    # -- share groups (KIP-932): what ShareFetch/ShareAcknowledge and the share admin APIs use --

    def share_group(self, group_id: str) -> ShareGroup | None:
        """The share group ``group_id`` (its members, their assignments, epochs, state) or None."""
        return self.share.group(group_id)

    def share_group_lock(self, group_id: str) -> asyncio.Lock:
        """The lock a share group's changes run under (heartbeats, expiry, offset admin)."""
        return self.share.lock(group_id)

    def share_group_member_assignment(self, group_id: str, member_id: str) -> dict[uuid.UUID, set[int]] | None:
        """What a share-group member is assigned now (topic id -> partitions); None if unknown."""
        return self.share.member_assignment(group_id, member_id)

    def add_share_member_listener(self, callback: MemberListener) -> None:
        """``callback(group_id, member_id)`` after a share-group member left or its session expired."""
        self.share.add_listener(callback)

    # What share_group_service's host protocol reads of the broker.
    @property
    def image(self) -> MetadataImage:
        return self.broker.image

    @property
    def config(self) -> BrokerConfig:
        return self.broker.config

    @property
    def share_coordinator(self) -> ShareCoordinator | None:
        found: ShareCoordinator | None = getattr(self.broker, "share_coordinator", None)
        return found

    def share_assignors(self) -> dict[str, ConsumerGroupPartitionAssignor]:
        if self._share_assignors is None:
            # Plugins are asked once; heartbeats then use the objects directly.
            self._share_assignors = load_share_assignors(self.broker.plugin_manager, self.broker.config)
        return self._share_assignors

    async def append_records(self, group_id: str,
                             records: list[tuple[rec.CoordinatorMessage, rec.CoordinatorMessage | None]]) -> int:
        """Append records to the group's partition (share groups apply them themselves)."""
        return await self._append(group_id, records)

    @property
    def initial_rebalance_delay_ms(self) -> int:
        return int(self.broker.config.group_initial_rebalance_delay_ms)

    @property
    def new_member_join_timeout_ms(self) -> int:
        return int(self.broker.config.strom_group_new_member_join_timeout_ms)

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self, runtime: CoordinatorRuntime) -> None:
        """Create ``__consumer_offsets`` if needed and replay it; the coordinator is then loaded."""
        self.runtime = runtime
        await runtime.ensure_topic(OFFSETS_TOPIC, self.num_partitions, OFFSETS_TOPIC_CONFIGS)
        topic = self.broker.image.topics.get(OFFSETS_TOPIC)
        if topic is not None:
            # An existing topic keeps its partition count: keys hash by what is on disk.
            self.num_partitions = len(topic.partitions)
        started = time.monotonic()
        count = 0
        for partition in range(self.num_partitions):
            count += self._load_partition(partition)
            await asyncio.sleep(0)  # let the loop breathe between partitions
        for group in self.groups.values():
            if isinstance(group, ClassicGroup):
                group.start_timers()
            elif not group.is_empty():
                from strom.core.coordinator.group import consumer_group_service as cgs

                cgs.ensure_timer(self, group, functools.partial(cgs.env_for, self.broker, group.group_id))
        self.loaded = True
        self.share.start()
        self._cleanup_task = asyncio.get_running_loop().create_task(self._cleanup_loop(),
                                                                    name="group-metadata-cleanup")
        log.info("group coordinator loaded %d record(s), %d group(s) in %.2fs", count, len(self.groups),
                 time.monotonic() - started)

    async def close(self) -> None:
        self._closed = True
        self.loaded = False
        if self._cleanup_task is not None:
            self._cleanup_task.cancel()
            await asyncio.gather(self._cleanup_task, return_exceptions=True)
            self._cleanup_task = None
        for group in self.groups.values():
            if isinstance(group, ClassicGroup):
                group.close()
        await self.share.close()
        from strom.core.coordinator.group import consumer_group_service as cgs

        await cgs.stop_timers(self)

    def _load_partition(self, partition: int) -> int:
        assert self.runtime is not None
        count = 0
        for record in self.runtime.read(OFFSETS_TOPIC, partition):
            header = record.header
            count += 1
            if header.is_control:
                if record.key is not None and len(record.key) >= 4:
                    commit = int.from_bytes(record.key[2:4], "big", signed=True) == CONTROL_COMMIT
                    self._complete_txn(header.producer_id, commit)
                continue
            if record.key is None:
                continue
            try:
                self._replay(record.key, record.value, header.producer_id if header.is_transactional else None)
            except CorruptMessageError as e:
                log.warning("%s-%d offset %d: skipping an unreadable record: %s", OFFSETS_TOPIC, partition,
                            record.offset, e)
        return count

    def _replay(self, key_bytes: bytes, value_bytes: bytes | None, producer_id: int | None) -> None:
        decoded = rec.decode_key(key_bytes)
        if decoded is None:
            return  # a record type of a newer Kafka (share groups, streams groups)
        record_type, key = decoded
        value = rec.decode_value(record_type, value_bytes)
        if isinstance(key, rec.OffsetCommitKey):
            assert value is None or isinstance(value, rec.OffsetCommitValue)
            tp = (key.topic, key.partition)
            offset = None if value is None else OffsetAndMetadata(value.offset, value.leader_epoch,
                                                                  value.metadata, value.commit_timestamp)
            if producer_id is not None and offset is not None:
                self.offsets.put_pending(producer_id, key.group, tp, offset)
            else:
                if offset is not None and key.group not in self.groups:
                    self.groups[key.group] = ClassicGroup(self, key.group)  # Kafka does this too
                self.offsets.put(key.group, tp, offset)
        elif isinstance(key, rec.GroupMetadataKey):
            if value is None:
                old = self.groups.get(key.group)
                if isinstance(old, ClassicGroup):
                    del self.groups[key.group]
            else:
                assert isinstance(value, rec.GroupMetadataValue)
                self.groups[key.group] = ClassicGroup.from_record(self, key.group, value)
        elif isinstance(key, SHARE_KEYS):
            self._replay_share_record(key, value)
        else:
            self._replay_consumer_record(key, value)

    def _replay_share_record(self, key: Any, value: rec.CoordinatorMessage | None) -> None:
        from strom.core.coordinator.group import share_group_service as sgs

        group_id = key.group_id
        group = self.groups.get(group_id)
        if not isinstance(group, ShareGroup):
            if value is None:
                return  # tombstone of a group that is gone already
            group = ShareGroup(group_id)
            self.groups[group_id] = group
        sgs.replay(group, key, value)
        if group.deleted and self.groups.get(group_id) is group:
            del self.groups[group_id]

    def _replay_consumer_record(self, key: rec.CoordinatorMessage, value: rec.CoordinatorMessage | None) -> None:
        assert isinstance(key, _CONSUMER_GROUP_KEYS)  # every other key type is replayed by the caller
        group_id = key.group_id
        group = self.groups.get(group_id)
        if (group is None or isinstance(group, ClassicGroup)) and value is None:
            return  # tombstone of a group that is gone already
        group = self.get_or_create_consumer_group(group_id)
        group.replay(key, value)
        if getattr(group, "deleted", False) and self.groups.get(group_id) is group:
            del self.groups[group_id]

    def _complete_txn(self, producer_id: int, commit: bool) -> None:
        for group_id in self.offsets.complete_transaction(producer_id, commit):
            if commit and group_id not in self.groups:
                self.groups[group_id] = ClassicGroup(self, group_id)

    # -- routing ------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return java_hash_partition(group_id, self.num_partitions)

    def check_available(self, group_id: str | None = None) -> None:
        """:meth:`check_serving`, refusing an empty group id first (INVALID_GROUP_ID): the APIs
        that act on a group (join, sync, heartbeat, leave, commits, OffsetDelete) do, as Kafka's."""
        if group_id is not None and group_id == "":
            raise InvalidGroupIdError("the group id is empty")
        self.check_serving(group_id)

    def check_serving(self, group_id: str | None = None) -> None:
        """Raise the error a request for ``group_id`` gets while this coordinator cannot serve it.

        Any id, the empty one included, hashes to its partition: the lookups (FindCoordinator,
        DescribeGroups, DeleteGroups, OffsetFetch) treat "" as a group that does not exist.
        """
        if self._closed or self.runtime is None:
            raise CoordinatorNotAvailableError()
        if not self.loaded:
            raise CoordinatorLoadInProgressError()
        if group_id is not None:
            part = self.broker.replica_manager.get_partition(OFFSETS_TOPIC, self.partition_for(group_id))
            if not part.is_leader:
                raise NotCoordinatorError()

    async def find_coordinator(self, key_type: int, key: str) -> int:
        """The coordinator partition of a group or transactional id (raises while unavailable)."""
        if key_type == KEY_TYPE_GROUP:
            if self.runtime is None:
                raise CoordinatorNotAvailableError()
            self.check_serving(key)
            return self.partition_for(key)
        if key_type == KEY_TYPE_TRANSACTION:
            if self.runtime is None:
                raise CoordinatorNotAvailableError()
            n = self.broker.config.transaction_state_log_num_partitions
            await self.runtime.ensure_topic(TRANSACTION_STATE_TOPIC, n, TRANSACTION_STATE_CONFIGS)
            topic = self.broker.image.topics.get(TRANSACTION_STATE_TOPIC)
            n = len(topic.partitions) if topic is not None else n
            txn = getattr(self.broker, "txn_coordinator", None)
            partition = java_hash_partition(key, n)
            if txn is None:
                raise CoordinatorNotAvailableError()
            if not getattr(txn, "loaded", True):
                raise CoordinatorLoadInProgressError()
            return partition
        raise InvalidRequestError(f"unknown coordinator key type {key_type}")

    # -- writes -------------------------------------------------------------------------------

    async def write_records(self, group_id: str,
                            records: list[tuple[rec.CoordinatorMessage, rec.CoordinatorMessage | None]]) -> int:
        """Append KIP-848 records to the group's partition, then replay them into the group."""
        last = await self._append(group_id, records)
        for key, value in records:
            self._replay_consumer_record(key, value)
        return last

    async def _append(self, group_id: str, records: list[tuple[rec.CoordinatorMessage,
                                                                rec.CoordinatorMessage | None]],
                      *, producer_id: int = -1, producer_epoch: int = -1, transactional: bool = False) -> int:
        """Append records to the group's partition; raises the coordinator error of a failure."""
        if self.runtime is None:
            raise CoordinatorNotAvailableError()
        encoded: list[tuple[bytes | None, bytes | None]] = [rec.encode_record(k, v) for k, v in records]
        try:
            return await self.runtime.append(OFFSETS_TOPIC, self.partition_for(group_id), encoded,
                                             producer_id=producer_id, producer_epoch=producer_epoch,
                                             transactional=transactional)
        except KafkaError as e:
            mapped = _APPEND_ERRORS.get(e.errno)
            if mapped is None:
                raise
            raise mapped(str(e)) from e

    async def store_group(self, group: ClassicGroup, assignments: dict[str, bytes] | None = None) -> None:
        """Persist a classic group's metadata (with the leader's assignment on SyncGroup)."""
        await self._append(group.group_id, [(rec.GroupMetadataKey(group.group_id), group.to_record(assignments))])

    def store_group_later(self, group: ClassicGroup) -> None:
        """Persist from a timer callback (no request waits for it)."""
        async def run() -> None:
            try:
                await self.store_group(group)
            except Exception:
                log.exception("group %s: cannot store the group metadata", group.group_id)
        asyncio.get_running_loop().create_task(run())

    # -- group lookup -------------------------------------------------------------------------

    def get_or_create_consumer_group(self, group_id: str) -> Any:
        """The KIP-848 group of ``group_id``, created (in memory) if missing."""
        from strom.core.coordinator.group.consumer_group import ConsumerGroup

        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return group
        if isinstance(group, ShareGroup):
            raise GroupIdNotFoundError(f"Group {group_id} is not a consumer group.")
        if group is not None and not group.is_empty():
            raise GroupIdNotFoundError(f"group {group_id} is not a consumer group")
        group = ConsumerGroup(group_id)
        self.groups[group_id] = group
        return group

    def consumer_group(self, group_id: str) -> Any:
        """The KIP-848 group of ``group_id`` or ``None`` (lookups that must not create one)."""
        from strom.core.coordinator.group.consumer_group import ConsumerGroup

        group = self.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def _classic_group(self, group_id: str, create: bool) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                return None
            group = ClassicGroup(self, group_id)
            self.groups[group_id] = group
        if isinstance(group, ShareGroup):
            # Kafka's classicGroupJoin answers a share group's id so (and the member APIs too).
            raise InconsistentGroupProtocolError(f"group {group_id} is a share group")
        if not isinstance(group, ClassicGroup):
            if create and group.is_empty() and not self.offsets.has_offsets(group_id):
                group = ClassicGroup(self, group_id)
                self.groups[group_id] = group
                return group
            raise InconsistentGroupProtocolError(f"group {group_id} uses the consumer protocol")
        return group

    # -- classic protocol ---------------------------------------------------------------------

    async def join_group(self, group_id: str, member_id: str, group_instance_id: str | None, client_id: str,
                         client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
                         protocol_type: str, protocols: list[tuple[str, bytes]],
                         require_known_member_id: bool) -> JoinResult:
        try:
            self.check_available(group_id)
            config = self.broker.config
            if not config.group_min_session_timeout_ms <= session_timeout_ms <= config.group_max_session_timeout_ms:
                raise InvalidSessionTimeoutError()
            group = self._classic_group(group_id, create=not member_id)
            if group is None:
                raise UnknownMemberIdError()
        except KafkaError as e:
            return JoinResult(e.errno, member_id=member_id)
        return await group.join(member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                                rebalance_timeout_ms, protocol_type, protocols, require_known_member_id)

    def _known_classic_group(self, group_id: str) -> ClassicGroup:
        """The classic group a member request names; the coordinator's error, or
        UNKNOWN_MEMBER_ID for a group that does not exist."""
        self.check_available(group_id)
        if isinstance(self.groups.get(group_id), ShareGroup):
            raise UnknownMemberIdError()  # Kafka 4.3.1 answers a share group's id so (not JoinGroup's error)
        group = self._classic_group(group_id, create=False)
        if group is None:
            raise UnknownMemberIdError()
        return group

    async def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        try:
            group = self._known_classic_group(group_id)
        except KafkaError as e:
            return SyncResult(e.errno)
        return await group.sync(generation_id, member_id, group_instance_id, protocol_type, protocol_name,
                                assignments)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> int:
        try:
            group = self._known_classic_group(group_id)
        except KafkaError as e:
            return e.errno
        return group.heartbeat(generation_id, member_id, group_instance_id)

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """(top-level error, error per member)."""
        try:
            group = self._known_classic_group(group_id)
        except KafkaError as e:
            return e.errno, [e.errno] * len(members)
        return 0, group.leave(members)

    # -- offsets ------------------------------------------------------------------------------

    def _validate_commit(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                         transactional: bool, api_version: int | None = None) -> CommitPartitionValidator | None:
        """Group-level checks of a commit; returns the per-partition check a KIP-848 group asks for."""
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                return None  # a "simple" consumer or an admin client: the group is created on write
            if not transactional and api_version is not None and api_version >= 9:
                # As Kafka: from OffsetCommit v9 an unknown group is GROUP_ID_NOT_FOUND, which
                # both protocols' clients understand; older versions keep ILLEGAL_GENERATION.
                raise GroupIdNotFoundError(f"Group {group_id} not found.")
            raise IllegalGenerationError()
        if not isinstance(group, ClassicGroup):
            check: CommitPartitionValidator | None = group.validate_offset_commit(
                member_id, generation_id, instance_id=group_instance_id, transactional=transactional,
                api_version=api_version)
            return check
        if generation_id < 0 and group.state is GroupState.EMPTY:
            return None
        if group.state is GroupState.DEAD:
            raise CoordinatorNotAvailableError()
        if generation_id >= 0 or member_id or group_instance_id:
            if group_instance_id and group.static_members.get(group_instance_id, member_id) != member_id:
                raise FencedInstanceIdError()
            if member_id not in group.members:
                raise UnknownMemberIdError()
            if generation_id != group.generation_id:
                raise IllegalGenerationError()
        elif not transactional:
            raise UnknownMemberIdError()
        if not transactional and group.state is GroupState.COMPLETING_REBALANCE:
            raise RebalanceInProgressError()
        if not transactional and member_id in group.members:
            group._schedule_heartbeat(group.members[member_id])  # a commit proves the member is alive
        return None

    def _topic_id(self, topic: str) -> Any:
        image = getattr(self.broker, "image", None)
        found = image.topic(topic) if image is not None else None
        return None if found is None else found.topic_id

    def _offset_records(self, group_id: str, offsets: list[tuple[str, int, int, int, str | None]],
                        results: dict[TopicPartition, int], check: CommitPartitionValidator | None = None
                        ) -> tuple[list[tuple[rec.CoordinatorMessage, rec.CoordinatorMessage | None]],
                                   list[tuple[TopicPartition, OffsetAndMetadata]]]:
        """The records of a commit; ``check`` (KIP-848 groups) may refuse it by raising."""
        now = _now_ms()
        records: list[tuple[rec.CoordinatorMessage, rec.CoordinatorMessage | None]] = []
        applied: list[tuple[TopicPartition, OffsetAndMetadata]] = []
        for topic, partition, offset, leader_epoch, metadata in offsets:
            meta = metadata or ""
            if len(meta.encode()) > OFFSET_METADATA_MAX_BYTES:
                results[(topic, partition)] = int(E.offset_metadata_too_large)
                continue
            if check is not None:
                # As in Kafka, one refused partition fails the whole request: the caller turns
                # the exception into every partition's error and nothing is written.
                check(topic, self._topic_id(topic), partition)
            value = OffsetAndMetadata(offset, leader_epoch, meta, now)
            records.append((rec.OffsetCommitKey(group_id, topic, partition),
                            rec.OffsetCommitValue(offset, leader_epoch, meta, now)))
            applied.append(((topic, partition), value))
            results[(topic, partition)] = 0
        return records, applied

    async def commit_offsets(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                             offsets: list[tuple[str, int, int, int, str | None]],
                             api_version: int | None = None) -> dict[TopicPartition, int]:
        """OffsetCommit: ``offsets`` are (topic, partition, offset, leader epoch, metadata);
        ``api_version`` is the request's (KIP-848 members must use v9+)."""
        results: dict[TopicPartition, int] = {}
        try:
            self.check_available(group_id)
            check = self._validate_commit(group_id, generation_id, member_id, group_instance_id,
                                          transactional=False, api_version=api_version)
            records, applied = self._offset_records(group_id, offsets, results, check)
            if records:
                await self._append(group_id, records)
        except KafkaError as e:
            return {(t, p): e.errno for t, p, *_ in offsets}
        if applied and group_id not in self.groups:
            self.groups[group_id] = ClassicGroup(self, group_id)
        for tp, value in applied:
            self.offsets.put(group_id, tp, value)
        return results

    async def commit_transactional_offsets(self, producer_id: int, producer_epoch: int, group_id: str,
                                           generation_id: int, member_id: str, group_instance_id: str | None,
                                           offsets: list[tuple[str, int, int, int, str | None]]
                                           ) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: appended in the producer's transaction, pending until its marker."""
        results: dict[TopicPartition, int] = {}
        try:
            self.check_available(group_id)
            try:
                check = self._validate_commit(group_id, generation_id, member_id, group_instance_id,
                                              transactional=True)
                records, applied = self._offset_records(group_id, offsets, results, check)
            except KafkaError as e:
                # Kafka answers a transactional commit a KIP-848 group refuses for its epoch
                # (group-wide or for one partition) with ILLEGAL_GENERATION.
                if isinstance(e, StaleMemberEpochError):
                    raise IllegalGenerationError(str(e)) from None
                raise
            if records:
                await self._append(group_id, records, producer_id=producer_id,
                                         producer_epoch=producer_epoch, transactional=True)
        except KafkaError as e:
            return {(t, p): e.errno for t, p, *_ in offsets}
        if applied and group_id not in self.groups:
            # As Kafka, a transactional commit to an unknown group creates it Empty (simple group).
            self.groups[group_id] = ClassicGroup(self, group_id)
        for tp, value in applied:
            self.offsets.put_pending(producer_id, group_id, tp, value)
        return results

    def on_transaction_completed(self, producer_id: int, commit: bool) -> None:
        """Called by the runtime once the COMMIT/ABORT marker is in ``__consumer_offsets``."""
        self._complete_txn(producer_id, commit)

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> tuple[int, list[tuple[str, int, int, int, str, int]]]:
        """OffsetFetch: (group error, [(topic, partition, offset, leader epoch, metadata, error)])."""
        try:
            self.check_serving(group_id)
            group = self.groups.get(group_id)
            validate = getattr(group, "validate_offset_fetch", None)
            if group is not None and validate is not None and member_id is not None and member_epoch >= 0:
                validate(member_id, member_epoch)
        except KafkaError as e:
            return e.errno, []
        unstable = int(E.unstable_offset_commit)
        out = []
        if topics is None:
            for (topic, partition), v in sorted(self.offsets.of_group(group_id).items()):
                if require_stable and self.offsets.has_pending(group_id, (topic, partition)):
                    out.append((topic, partition, -1, -1, "", unstable))
                else:
                    out.append((topic, partition, v.offset, v.leader_epoch, v.metadata, 0))
            return 0, out
        for topic, partitions in topics:
            for partition in partitions:
                if require_stable and self.offsets.has_pending(group_id, (topic, partition)):
                    out.append((topic, partition, -1, -1, "", unstable))
                    continue
                found = self.offsets.get(group_id, (topic, partition))
                if found is None:
                    out.append((topic, partition, -1, -1, "", 0))
                else:
                    out.append((topic, partition, found.offset, found.leader_epoch, found.metadata, 0))
        return 0, out

    async def delete_offsets(self, group_id: str, topics: list[tuple[str, list[int]]]
                             ) -> tuple[int, dict[TopicPartition, int]]:
        """OffsetDelete: tombstones for offsets no member of the group is subscribed to."""
        try:
            self.check_available(group_id)
            group = self.groups.get(group_id)
            if group is None:
                raise GroupIdNotFoundError()
            if isinstance(group, ShareGroup):
                raise GroupIdNotFoundError(f"Group {group_id} is not a consumer group.")
            subscribed: set[str] = set()
            if not group.is_empty():
                topics_of = getattr(group, "subscribed_topics", None)
                found = topics_of() if topics_of is not None else None
                if found is None:
                    raise NonEmptyGroupError()
                subscribed = set(found)
        except KafkaError as e:
            return e.errno, {}
        results: dict[TopicPartition, int] = {}
        records: list[tuple[rec.CoordinatorMessage, rec.CoordinatorMessage | None]] = []
        for topic, partitions in topics:
            for partition in partitions:
                if topic in subscribed:
                    results[(topic, partition)] = int(E.group_subscribed_to_topic)
                elif self.offsets.get(group_id, (topic, partition)) is not None:
                    records.append((rec.OffsetCommitKey(group_id, topic, partition), None))
                    results[(topic, partition)] = 0
                else:
                    results[(topic, partition)] = 0
        if records:
            try:
                await self._append(group_id, records)
            except KafkaError as e:
                return e.errno, {}
            for key, _ in records:
                assert isinstance(key, rec.OffsetCommitKey)
                self.offsets.put(group_id, (key.topic, key.partition), None)
        return 0, results

    # -- cleanup ------------------------------------------------------------------------------

    async def _cleanup_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.broker.config.offsets_retention_check_interval_ms / 1000)
            try:
                await self.cleanup_group_metadata()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("deleting empty groups failed")

    def _is_current(self, group_id: str, group: Any) -> bool:
        return group_id in self.groups and self.groups[group_id] is group

    async def cleanup_group_metadata(self) -> list[str]:
        """Delete every Empty group that has no committed or pending offsets, as Kafka's periodic
        cleanupGroupMetadata does (tombstones first, then the group is gone); returns their ids.

        Group ids are the client's to choose: a JoinGroup that failed, members that left or
        expired, a ConsumerGroupHeartbeat refused, each can leave an Empty group behind.
        """
        deleted = []
        for group_id, found in list(self.groups.items()):
            group: Any = found
            if self._closed:
                break
            if not self._is_current(group_id, group) or not group.is_empty() or self.offsets.has_offsets(group_id):
                continue
            if isinstance(group, ShareGroup):
                continue  # Kafka never expires a share group (ShareGroup.shouldExpire is false)
            if isinstance(group, ClassicGroup):
                if group.state is not GroupState.EMPTY:
                    continue
                records: list[tuple[rec.CoordinatorMessage, rec.CoordinatorMessage | None]] = [
                    (rec.GroupMetadataKey(group_id), None)]
            else:
                if getattr(group, "deleted", False):
                    continue
                records = list(group.delete_records())
            try:
                self.check_serving(group_id)
                if records:
                    await self._append(group_id, records)
            except KafkaError:
                continue
            if not self._is_current(group_id, group) or not group.is_empty():
                continue
            del self.groups[group_id]
            _mark_deleted(group)
            deleted.append(group_id)
        if deleted:
            log.info("deleted %d empty group(s) with no offsets", len(deleted))
        return deleted

    # -- admin --------------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> tuple[int, Any]:
        """(error, group or None) for DescribeGroups."""
        try:
            self.check_serving(group_id)
        except KafkaError as e:
            return e.errno, None
        return 0, self.groups.get(group_id)

    def list_groups(self) -> tuple[int, list[Any]]:
        try:
            self.check_available()
        except KafkaError as e:
            return e.errno, []
        return 0, list(self.groups.values())

    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        """DeleteGroups: tombstones for the offsets and the metadata of each empty group."""
        out: dict[str, int] = {}
        for group_id in group_ids:
            try:
                self.check_serving(group_id)
                group: Any = self.groups.get(group_id)
                if group is None:
                    raise GroupIdNotFoundError()
                if not group.is_empty():
                    raise NonEmptyGroupError()
                if isinstance(group, ShareGroup):
                    await self.share.delete_group(group)
                    out[group_id] = 0
                    continue
                records: list[tuple[rec.CoordinatorMessage, rec.CoordinatorMessage | None]] = [
                    (rec.OffsetCommitKey(group_id, t, p), None) for t, p in self.offsets.of_group(group_id)]
                if isinstance(group, ClassicGroup):
                    records.append((rec.GroupMetadataKey(group_id), None))
                else:
                    records.extend(group.delete_records())
                await self._append(group_id, records)
                if self.groups.get(group_id) is group:
                    del self.groups[group_id]
                    _mark_deleted(group)
                self.offsets.delete_group(group_id)
                out[group_id] = 0
            except KafkaError as e:
                out[group_id] = e.errno
        return out
