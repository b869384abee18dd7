"""The asynchronous side of share groups (KIP-932): heartbeats, persistence, expiry, deletion.

:class:`~strom.core.coordinator.share.share_group.ShareGroup` is the membership state machine;
this module runs it against a broker, as Kafka's ``GroupMetadataManager.shareGroupHeartbeat``:

* A heartbeat runs under the group's lock: the group's new state is computed in memory, the
  difference is written to ``__consumer_offsets`` as Kafka 4.3's ShareGroup* records
  (member metadata, group epoch, target assignment, current member assignment) and, if the
  append fails, the group is put back as it was.
* Share-partition initialization: before a heartbeat can give a member a partition, every
  partition of the topics the group subscribes to has its state in the share coordinator
  (``InitializeShareGroupState`` with state epoch 0 and start offset -1, "resolve with
  ``share.auto.offset.reset`` on first read") and the group records the partitions it
  initialized (ShareGroupStatePartitionMetadata). Kafka does this asynchronously and assigns only
  initialized partitions; strom does it inline, before the assignment is computed, which gives
  the same guarantee. A partition whose state already exists (set by AlterShareGroupOffsets) is
  recorded, not initialized again.
* One timer task per coordinator removes members silent for ``share.session.timeout.ms``.
* Listeners registered with :meth:`ShareGroupService.add_listener` are called with
  ``(group_id, member_id)`` after a member left or was expired (the share-partition leaders
  release what it had acquired).
* Deleting a group deletes its share-partition state through the share coordinator, then writes
  tombstones of every record.

Timeouts come from :func:`~strom.core.group_config.effective_group_config` (the GROUP resource's
``share.session.timeout.ms`` / ``share.heartbeat.interval.ms`` / ``share.assignment.interval.ms``,
else the broker's ``group.share.*``, as Kafka's ``shareGroupAssignmentIntervalMs(groupId)``); the assignor from the assignor hook (``group.share.assignors``, default
``simple``).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from strom.core.coordinator.group import records as R
from strom.core.coordinator.share.assignor import (
    DEFAULT_SHARE_ASSIGNORS,
    SHARE_ASSIGNORS_CONFIG,
    ShareGroupPartitionAssignor,
)
from strom.core.coordinator.share.share_group import (
    DEFAULT_ASSIGNMENT_INTERVAL_MS,
    DEFAULT_MAX_SIZE,
    HeartbeatResult,
    ShareGroup,
    ShareGroupMember,
)
from strom.core.errors import (
    GroupIdNotFoundError,
    InvalidRequestError,
    NonEmptyGroupError,
    UnknownServerError,
)
from strom.core.group_config import GROUP_RESOURCE, broker_value, effective_group_config
from strom.plugins.manager import load_assignors

if TYPE_CHECKING:
    import pluggy

    from strom.core.config import BrokerConfig
    from strom.core.coordinator.share.coordinator import ShareCoordinator
    from strom.core.metadata.image import MetadataImage
    from strom.plugins.hookspecs.assignors import ConsumerGroupPartitionAssignor

log = logging.getLogger(__name__)

Record = tuple[R.CoordinatorMessage, R.CoordinatorMessage | None]
MemberListener = Callable[[str, str], None]

# Upper bound of one expiry-timer sleep.
TIMER_TICK_MS = 500
MEMBER_STATE_STABLE = 3  # Kafka's MemberState.STABLE, the byte of ShareGroupCurrentMemberAssignmentValue

SHARE_KEYS = (R.ShareGroupMemberMetadataKey, R.ShareGroupMetadataKey, R.ShareGroupTargetAssignmentMetadataKey,
              R.ShareGroupTargetAssignmentMemberKey, R.ShareGroupCurrentMemberAssignmentKey,
              R.ShareGroupStatePartitionMetadataKey)
ShareKey = (R.ShareGroupMemberMetadataKey | R.ShareGroupMetadataKey | R.ShareGroupTargetAssignmentMetadataKey
            | R.ShareGroupTargetAssignmentMemberKey | R.ShareGroupCurrentMemberAssignmentKey
            | R.ShareGroupStatePartitionMetadataKey)


def now_ms() -> int:
    """Session deadlines live in memory only: a monotonic clock."""
    return int(time.monotonic() * 1000)


class ShareGroupHost(Protocol):
    """What this module uses of the group coordinator (and, through it, the broker)."""

    groups: dict[str, object]

    def check_available(self, group_id: str | None = None) -> None: ...

    async def append_records(self, group_id: str, records: list[Record]) -> int: ...

    @property
    def image(self) -> MetadataImage: ...

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def share_coordinator(self) -> ShareCoordinator | None: ...

    def share_assignors(self) -> Mapping[str, ConsumerGroupPartitionAssignor]: ...


@dataclass(frozen=True, slots=True)
class ShareGroupEnv:
    """A group's effective settings at one heartbeat."""

    session_timeout_ms: int
    heartbeat_interval_ms: int
    max_size: int
    assignor: ConsumerGroupPartitionAssignor
    assignment_interval_ms: int = DEFAULT_ASSIGNMENT_INTERVAL_MS


def load_share_assignors(pm: pluggy.PluginManager, config: BrokerConfig) -> dict[str, ConsumerGroupPartitionAssignor]:
    """The share assignors ``group.share.assignors`` names, in order (first = the groups' assignor)."""
    offers = load_assignors(pm)
    raw = broker_value(config, SHARE_ASSIGNORS_CONFIG) or DEFAULT_SHARE_ASSIGNORS
    out: dict[str, ConsumerGroupPartitionAssignor] = {}
    for name in (n.strip() for n in raw.split(",")):
        # Kafka's config may name a class; strom's plugins name themselves.
        short = {"org.apache.kafka.coordinator.group.assignor.SimpleAssignor": "simple"}.get(name, name)
        found = offers.get(short)
        if found is not None and isinstance(found, ShareGroupPartitionAssignor):
            out[short] = found
        elif short:
            log.warning("%s names %r, which no plugin offers as a share-group assignor", SHARE_ASSIGNORS_CONFIG, name)
    return out


ASSIGNMENT_INTERVAL_CONFIG = "group.share.assignment.interval.ms"
MIN_ASSIGNMENT_INTERVAL_CONFIG = "group.share.min.assignment.interval.ms"
MAX_ASSIGNMENT_INTERVAL_CONFIG = "group.share.max.assignment.interval.ms"


def check_assignment_interval(config: BrokerConfig) -> None:
    """Kafka 4.3.1's ``GroupCoordinatorConfig`` requirements on the broker's share-group
    assignment interval (its constructor's ``Utils.require``, same order and messages); raises
    ValueError (Kafka's IllegalArgumentException, which stops the broker)."""
    def value(name: str, default: int) -> int:
        raw = broker_value(config, name)
        return int(raw) if raw is not None and raw.strip().lstrip("-").isdigit() else default
    interval = value(ASSIGNMENT_INTERVAL_CONFIG, DEFAULT_ASSIGNMENT_INTERVAL_MS)
    low, high = value(MIN_ASSIGNMENT_INTERVAL_CONFIG, 0), value(MAX_ASSIGNMENT_INTERVAL_CONFIG, 15_000)
    if high < low:
        raise ValueError(f"{MAX_ASSIGNMENT_INTERVAL_CONFIG} must be greater than or equal to "
                         f"{MIN_ASSIGNMENT_INTERVAL_CONFIG}")
    if interval < low:
        raise ValueError(f"{ASSIGNMENT_INTERVAL_CONFIG} must be greater than or equal to "
                         f"{MIN_ASSIGNMENT_INTERVAL_CONFIG}")
    if interval > high:
        raise ValueError(f"{ASSIGNMENT_INTERVAL_CONFIG} must be less than or equal to "
                         f"{MAX_ASSIGNMENT_INTERVAL_CONFIG}")


# -- records -----------------------------------------------------------------------------------


def _topic_partitions(parts: Mapping[uuid.UUID, Iterable[int]]) -> list[R.TopicPartitions]:
    return [R.TopicPartitions(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(parts.items(), key=lambda kv: str(kv[0])) if ps]


def _parts(items: Iterable[R.TopicPartitions]) -> dict[uuid.UUID, set[int]]:
    out: dict[uuid.UUID, set[int]] = {}
    for tp in items:
        out.setdefault(tp.topic_id, set()).update(tp.partitions)
    return out


def member_metadata_record(group_id: str, m: ShareGroupMember) -> Record:
    return (R.ShareGroupMemberMetadataKey(group_id, m.member_id),
            R.ShareGroupMemberMetadataValue(rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
                                            subscribed_topic_names=list(m.subscribed_topic_names)))


def current_assignment_record(group_id: str, m: ShareGroupMember) -> Record:
    return (R.ShareGroupCurrentMemberAssignmentKey(group_id, m.member_id),
            R.ShareGroupCurrentMemberAssignmentValue(member_epoch=m.member_epoch,
                                                     previous_member_epoch=m.previous_member_epoch,
                                                     state=MEMBER_STATE_STABLE,
                                                     assigned_partitions=_topic_partitions(m.assignment)))


def state_partition_record(group: ShareGroup) -> Record:
    return (R.ShareGroupStatePartitionMetadataKey(group.group_id), R.ShareGroupStatePartitionMetadataValue(
        initialized_topics=[R.TopicPartitionsInfo(topic_id=t, topic_name=group.topic_names.get(t, ""),
                                                  partitions=sorted(ps))
                            for t, ps in sorted(group.initialized.items(), key=lambda kv: str(kv[0])) if ps]))


def member_removal_records(group_id: str, member_id: str) -> list[Record]:
    """Kafka's order for a member leaving: current assignment, target, then its metadata."""
    return [(R.ShareGroupCurrentMemberAssignmentKey(group_id, member_id), None),
            (R.ShareGroupTargetAssignmentMemberKey(group_id, member_id), None),
            (R.ShareGroupMemberMetadataKey(group_id, member_id), None)]


def delete_records(group: ShareGroup) -> list[Record]:
    """Tombstones of every record of the group (Kafka's ``createGroupTombstoneRecords``)."""
    out: list[Record] = []
    for member_id in sorted(set(group.members) | set(group.target)):
        out.extend(member_removal_records(group.group_id, member_id))
    out += [(R.ShareGroupTargetAssignmentMetadataKey(group.group_id), None),
            (R.ShareGroupStatePartitionMetadataKey(group.group_id), None),
            (R.ShareGroupMetadataKey(group.group_id), None)]
    return out


@dataclass(frozen=True, slots=True)
class _View:
    """What of a group its records hold, to diff before and after a change."""

    group_epoch: int
    metadata_hash: int
    assignment_epoch: int
    members: dict[str, tuple[tuple[str, ...], str | None, str, str]]
    target: dict[str, dict[uuid.UUID, frozenset[int]]]
    current: dict[str, tuple[int, dict[uuid.UUID, frozenset[int]]]]


def _view(group: ShareGroup) -> _View:
    return _View(
        group.group_epoch, group.metadata_hash, group.assignment_epoch,
        {m.member_id: (m.subscribed_topic_names, m.rack_id, m.client_id, m.client_host)
         for m in group.members.values()},
        {mid: {t: frozenset(ps) for t, ps in parts.items() if ps} for mid, parts in group.target.items()},
        {m.member_id: (m.member_epoch, {t: frozenset(ps) for t, ps in m.assignment.items() if ps})
         for m in group.members.values()})


def diff_records(before: _View, group: ShareGroup, *, new_group: bool) -> list[Record]:
    """The records that take a group's log from ``before`` to ``group``, in Kafka's order."""
    after = _view(group)
    gid = group.group_id
    out: list[Record] = []
    for member_id in before.members.keys() - after.members.keys():
        out.extend(member_removal_records(gid, member_id))
    for member_id, meta in after.members.items():
        if before.members.get(member_id) != meta:
            out.append(member_metadata_record(gid, group.members[member_id]))
    if new_group or (before.group_epoch, before.metadata_hash) != (after.group_epoch, after.metadata_hash):
        out.append((R.ShareGroupMetadataKey(gid), R.ShareGroupMetadataValue(epoch=group.group_epoch,
                                                                            metadata_hash=group.metadata_hash)))
    if before.assignment_epoch != after.assignment_epoch or before.target != after.target:
        for member_id, parts in after.target.items():
            if member_id in after.members and before.target.get(member_id) != parts:
                out.append((R.ShareGroupTargetAssignmentMemberKey(gid, member_id),
                            R.ShareGroupTargetAssignmentMemberValue(topic_partitions=_topic_partitions(parts))))
        out.append((R.ShareGroupTargetAssignmentMetadataKey(gid), R.ShareGroupTargetAssignmentMetadataValue(
            assignment_epoch=group.assignment_epoch, assignment_timestamp=int(time.time() * 1000))))
    for member_id, cur in after.current.items():
        if before.current.get(member_id) != cur:
            out.append(current_assignment_record(gid, group.members[member_id]))
    return out


def replay(group: ShareGroup, key: ShareKey, value: R.CoordinatorMessage | None) -> None:
    """Apply one ShareGroup* record to ``group`` (loading ``__consumer_offsets``)."""
    if isinstance(key, R.ShareGroupMetadataKey):
        if value is None:
            group.deleted = True
            return
        assert isinstance(value, R.ShareGroupMetadataValue)
        group.group_epoch, group.metadata_hash = value.epoch, value.metadata_hash
    elif isinstance(key, R.ShareGroupMemberMetadataKey):
        if value is None:
            group.members.pop(key.member_id, None)
            return
        assert isinstance(value, R.ShareGroupMemberMetadataValue)
        m = _member(group, key.member_id)
        m.subscribed_topic_names = tuple(value.subscribed_topic_names)
        m.rack_id, m.client_id, m.client_host = value.rack_id, value.client_id, value.client_host
    elif isinstance(key, R.ShareGroupTargetAssignmentMetadataKey):
        if value is not None:
            assert isinstance(value, R.ShareGroupTargetAssignmentMetadataValue)
            group.assignment_epoch = value.assignment_epoch
            group.assignment_timestamp_ms = _from_wall_clock(value.assignment_timestamp)
    elif isinstance(key, R.ShareGroupTargetAssignmentMemberKey):
        if value is None:
            group.target.pop(key.member_id, None)
        else:
            assert isinstance(value, R.ShareGroupTargetAssignmentMemberValue)
            group.target[key.member_id] = _parts(value.topic_partitions)
    elif isinstance(key, R.ShareGroupCurrentMemberAssignmentKey):
        if value is None:
            return  # the member metadata tombstone removes the member
        assert isinstance(value, R.ShareGroupCurrentMemberAssignmentValue)
        m = _member(group, key.member_id)
        m.member_epoch, m.previous_member_epoch = value.member_epoch, value.previous_member_epoch
        m.assignment = _parts(value.assigned_partitions)
    elif isinstance(key, R.ShareGroupStatePartitionMetadataKey):
        group.initialized.clear()
        if value is not None:
            assert isinstance(value, R.ShareGroupStatePartitionMetadataValue)
            for info in value.initialized_topics:
                group.initialized.setdefault(info.topic_id, set()).update(info.partitions)
                group.topic_names[info.topic_id] = info.topic_name


def _from_wall_clock(timestamp_ms: int) -> int:
    """A record's wall-clock AssignmentTimestamp on the service's monotonic clock (:func:`now_ms`):
    Kafka's replay restores it (``setTargetAssignmentMetadata(epoch, timestamp)``) so a restarted
    coordinator still waits out the assignment interval. 0 (never computed) stays 0."""
    if timestamp_ms <= 0:
        return 0
    # At least 1: 0 means "never", which would allow an immediate recompute.
    return max(1, now_ms() - (int(time.time() * 1000) - timestamp_ms))


def _member(group: ShareGroup, member_id: str) -> ShareGroupMember:
    m = group.members.get(member_id)
    if m is None:
        m = ShareGroupMember(member_id, 0, ())
        group.members[member_id] = m
    return m


# -- the service -------------------------------------------------------------------------------


class ShareGroupService:
    """Share groups of one group coordinator (they live in its ``groups`` map)."""

    def __init__(self, host: ShareGroupHost, *, clock: Callable[[], int] = now_ms) -> None:
        self.host = host
        self.clock = clock
        self._locks: dict[str, asyncio.Lock] = {}
        self._listeners: list[MemberListener] = []
        self._timer: asyncio.Task[None] | None = None

    # -- lookups others use -------------------------------------------------------------------

    def group(self, group_id: str) -> ShareGroup | None:
        found = self.host.groups.get(group_id)
        return found if isinstance(found, ShareGroup) and not found.deleted else None

    def member_assignment(self, group_id: str, member_id: str) -> dict[uuid.UUID, set[int]] | None:
        group = self.group(group_id)
        return None if group is None else group.member_assignment(member_id)

    def add_listener(self, callback: MemberListener) -> None:
        self._listeners.append(callback)

    def _notify(self, group_id: str, member_ids: Iterable[str]) -> None:
        for member_id in member_ids:
            for callback in list(self._listeners):
                try:
                    callback(group_id, member_id)
                except Exception:
                    # A listener's failure must not undo the membership change already written.
                    log.exception("share member listener failed for %s/%s", group_id, member_id)

    # -- environment --------------------------------------------------------------------------

    def env(self, group_id: str) -> ShareGroupEnv:
        config = self.host.config
        values = effective_group_config(config, self.host.image.resource_configs(GROUP_RESOURCE, group_id))
        session = values.get("share.session.timeout.ms")
        # Kafka's shareGroupAssignmentIntervalMs(groupId): the GROUP override (bounded by the
        # broker's min/max when it was set), else group.share.assignment.interval.ms.
        interval = values.get("share.assignment.interval.ms")
        heartbeat = values.get("share.heartbeat.interval.ms")
        raw_max = broker_value(config, "group.share.max.size")
        assignors = self.host.share_assignors()
        if not assignors:
            raise UnknownServerError(f"no share-group assignor is enabled ({SHARE_ASSIGNORS_CONFIG})")
        return ShareGroupEnv(session_timeout_ms=int(session) if isinstance(session, int) else 45_000,
                             heartbeat_interval_ms=int(heartbeat) if isinstance(heartbeat, int) else 5_000,
                             max_size=int(raw_max) if raw_max and raw_max.isdigit() else DEFAULT_MAX_SIZE,
                             assignor=next(iter(assignors.values())),
                             assignment_interval_ms=int(interval) if isinstance(interval, int)
                             else DEFAULT_ASSIGNMENT_INTERVAL_MS)

    def _topics(self) -> dict[str, tuple[uuid.UUID, int]]:
        return {name: (t.topic_id, len(t.partitions)) for name, t in self.host.image.topics.items()}

    def lock(self, group_id: str) -> asyncio.Lock:
        """The lock every change of the group runs under (heartbeats, expiry; offset admin may take it too)."""
        lock = self._locks.get(group_id)
        if lock is None:
            lock = self._locks[group_id] = asyncio.Lock()
        return lock

    # -- heartbeat ----------------------------------------------------------------------------

    async def heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                        subscribed_topic_names: Sequence[str] | None, *, rack_id: str | None = None,
                        client_id: str = "", client_host: str = "") -> HeartbeatResult:
        """One ShareGroupHeartbeat; raises the KafkaError to answer with."""
        # Kafka's throwIfShareGroupHeartbeatRequestIsInvalid comes before the group lookup.
        if not group_id:
            raise InvalidRequestError("GroupId can't be empty.")
        if not member_id:
            # Kafka 4.3.1 answers an empty member id (v1: the client names itself) with no message.
            raise InvalidRequestError()
        if member_epoch < -1:
            raise InvalidRequestError("MemberEpoch is invalid.")
        if member_epoch == 0 and not subscribed_topic_names:
            raise InvalidRequestError("SubscribedTopicNames must be set in first request.")
        self.host.check_available(group_id)
        async with self.lock(group_id):
            group, created = self._get_or_create(group_id, create=member_epoch == 0)
            env = self.env(group_id)
            group.assignor = env.assignor
            group.session_timeout_ms = env.session_timeout_ms
            group.heartbeat_interval_ms = env.heartbeat_interval_ms
            group.max_size = env.max_size
            group.assignment_interval_ms = env.assignment_interval_ms
            topics = self._topics()
            if member_epoch != -1:
                names = set(group.subscribed_topic_names()) | set(subscribed_topic_names or ())
                await self._initialize_partitions(group, names, topics, created)
            before = _view(group)
            saved = _save(group)
            try:
                result = group.heartbeat(member_id, member_epoch, subscribed_topic_names, topics=topics,
                                         now_ms=self.clock(), rack_id=rack_id, client_id=client_id,
                                         client_host=client_host)
                records = diff_records(before, group, new_group=created)
                if records:
                    await self.host.append_records(group_id, records)
            except BaseException:
                self._restore(group, saved, created)
                raise
        if member_epoch == -1:
            self._notify(group_id, [member_id])
        self._ensure_timer()
        return result

    def _get_or_create(self, group_id: str, *, create: bool) -> tuple[ShareGroup, bool]:
        found = self.host.groups.get(group_id)
        if isinstance(found, ShareGroup) and not found.deleted:
            return found, False
        if found is not None and not isinstance(found, ShareGroup):
            raise GroupIdNotFoundError(f"Group {group_id} is not a share group.")
        if not create:
            raise GroupIdNotFoundError(f"Share group {group_id} not found.")
        group = ShareGroup(group_id)
        self.host.groups[group_id] = group
        return group, True

    def _restore(self, group: ShareGroup, saved: ShareGroup, created: bool) -> None:
        if created:
            if self.host.groups.get(group.group_id) is group:
                del self.host.groups[group.group_id]
            return
        for slot in _STATE_SLOTS:
            setattr(group, slot, getattr(saved, slot))

    async def _initialize_partitions(self, group: ShareGroup, names: Iterable[str],
                                     topics: Mapping[str, tuple[uuid.UUID, int]], created: bool) -> None:
        """Give every partition of ``names`` its share-partition state before it is assigned;
        forget (and delete the state of) the partitions of topics deleted since, as Kafka's
        coordinator does when the metadata drops a topic (its ``DeletingTopics``)."""
        live_ids = {topic_id for topic_id, _ in topics.values()}
        deleted = [t for t in group.initialized if t not in live_ids]
        missing: list[tuple[str, uuid.UUID, int]] = []
        for name in sorted(names):
            found = topics.get(name)
            if found is None:
                continue
            topic_id, count = found
            have = group.initialized.get(topic_id, set())
            missing.extend((name, topic_id, p) for p in range(count) if p not in have)
        if not missing and not deleted:
            return
        share = self.host.share_coordinator
        if share is None:
            raise UnknownServerError("the share coordinator is not running")
        for topic_id in deleted:
            for p in sorted(group.initialized[topic_id]):
                await share.delete_state(group.group_id, topic_id, p)
        for _, topic_id, p in missing:
            if share.read_state(group.group_id, topic_id, p) is None:
                await share.initialize_state(group.group_id, topic_id, p, state_epoch=0, start_offset=-1)
        saved_init = {t: set(ps) for t, ps in group.initialized.items()}
        saved_names = dict(group.topic_names)
        for topic_id in deleted:
            group.initialized.pop(topic_id, None)
            group.topic_names.pop(topic_id, None)
        for name, topic_id, p in missing:
            group.initialized.setdefault(topic_id, set()).add(p)
            group.topic_names[topic_id] = name
        records: list[Record] = []
        if created:
            # The group's first record must say what the group is before its state metadata.
            records.append((R.ShareGroupMetadataKey(group.group_id), R.ShareGroupMetadataValue(epoch=0)))
        records.append(state_partition_record(group))
        try:
            await self.host.append_records(group.group_id, records)
        except BaseException:
            group.initialized, group.topic_names = saved_init, saved_names
            raise

    # -- expiry -------------------------------------------------------------------------------

    def start(self) -> None:
        """After the load: members' sessions restart now (as Kafka's on coordinator load)."""
        check_assignment_interval(self.host.config)
        now = self.clock()
        for group in list(self.host.groups.values()):
            if isinstance(group, ShareGroup):
                for m in group.members.values():
                    m.last_heartbeat_ms = now
                if group.members:
                    try:
                        group.session_timeout_ms = self.env(group.group_id).session_timeout_ms
                    except Exception:
                        log.exception("share group %s: cannot read its settings", group.group_id)
        self._ensure_timer()

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            await asyncio.gather(self._timer, return_exceptions=True)
            self._timer = None

    def _ensure_timer(self) -> None:
        running = self._timer is not None and not self._timer.done()
        if not running and any(isinstance(g, ShareGroup) and g.members for g in self.host.groups.values()):
            self._timer = asyncio.get_running_loop().create_task(self._expiry_loop(), name="share-group-expiry")

    async def _expiry_loop(self) -> None:
        while True:
            groups = [g for g in self.host.groups.values() if isinstance(g, ShareGroup) and g.members]
            if not groups:
                return  # the next heartbeat starts it again
            now = self.clock()
            next_deadline = now + TIMER_TICK_MS
            for group in groups:
                deadline = min(m.last_heartbeat_ms for m in group.members.values()) + group.session_timeout_ms
                if deadline <= now:
                    try:
                        await self.expire(group)
                    except asyncio.CancelledError:
                        raise
                    except Exception:
                        log.exception("share group %s: expiring members failed", group.group_id)
                else:
                    next_deadline = min(next_deadline, deadline)
            await asyncio.sleep(max(next_deadline - self.clock(), 10) / 1000)

    async def expire(self, group: ShareGroup) -> list[str]:
        """Remove the members of ``group`` whose session ran out; returns their ids."""
        async with self.lock(group.group_id):
            if self.host.groups.get(group.group_id) is not group:
                return []
            before = _view(group)
            saved = _save(group)
            gone = group.expire_members(self.clock())
            if not gone:
                return []
            try:
                await self.host.append_records(group.group_id, diff_records(before, group, new_group=False))
            except BaseException:
                self._restore(group, saved, False)
                raise
        log.info("share group %s: session of member(s) %s expired", group.group_id, ", ".join(gone))
        self._notify(group.group_id, gone)
        return gone

    # -- deletion -----------------------------------------------------------------------------

    async def delete_group(self, group: ShareGroup) -> None:
        """DeleteGroups of an empty share group, under the group's lock (a join in flight either
        finishes first, and the group is not empty, or finds the group gone): its share-partition
        state first, as Kafka, then tombstones of its records; NON_EMPTY_GROUP if a member joined."""
        async with self.lock(group.group_id):
            if self.host.groups.get(group.group_id) is not group:
                raise GroupIdNotFoundError(f"Group {group.group_id} not found.")
            if not group.is_empty():
                raise NonEmptyGroupError()
            await self.delete_state(group)
            await self.host.append_records(group.group_id, delete_records(group))
            if self.host.groups.get(group.group_id) is group:
                del self.host.groups[group.group_id]
            group.deleted = True

    async def delete_state(self, group: ShareGroup) -> None:
        """Delete the group's share-partition state (DeleteGroups, before the tombstones)."""
        share = self.host.share_coordinator
        if share is None:
            return
        keys = {(t, p) for t, ps in group.initialized.items() for p in ps}
        keys |= {(t, p) for (g, t, p) in list(share.states) if g == group.group_id}
        for topic_id, partition in sorted(keys, key=lambda k: (str(k[0]), k[1])):
            await share.delete_state(group.group_id, topic_id, partition)


_STATE_SLOTS = ("group_epoch", "assignment_epoch", "assignment_timestamp_ms", "members", "target",
                "_topic_metadata", "metadata_hash", "initialized", "_initialized_seen", "topic_names")


def _save(group: ShareGroup) -> ShareGroup:
    """A deep copy of the group's mutable state (restored when an append fails)."""
    saved = ShareGroup.__new__(ShareGroup)
    for slot in _STATE_SLOTS:
        setattr(saved, slot, copy.deepcopy(getattr(group, slot)))
    return saved
