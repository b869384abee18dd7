"""A KIP-848 consumer group: epochs, members, target assignment and reconciliation
(Kafka's ``ConsumerGroup`` plus the consumer-group half of ``GroupMetadataManager``).

Three epochs drive the protocol: the *group epoch* is bumped whenever the input of the
assignment changes (a member joins, leaves or changes its subscription; a subscribed topic's
partition count changes); the *assignment epoch* is the group epoch the target assignment was
computed for; each *member epoch* reaches the assignment epoch once the member has reconciled
(see :mod:`.consumer_group_member`).

State changes are never applied directly. :meth:`ConsumerGroup.heartbeat`, :meth:`leave` and
:meth:`expire` compute the records the change consists of (ConsumerGroupMemberMetadata,
ConsumerGroupMetadata, ConsumerGroupPartitionMetadata, ConsumerGroupTargetAssignmentMember /
Metadata, ConsumerGroupCurrentMemberAssignment); the coordinator persists them in
``__consumer_offsets`` and feeds each back through :meth:`ConsumerGroup.replay`, which is also
how a restarted broker rebuilds the group. Session and rebalance deadlines are in memory only,
as in Kafka: after a load every member gets a fresh session timeout.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Protocol

from strom.core.coordinator.group import consumer_group_records as CR
from strom.core.coordinator.group import records as R
from strom.core.coordinator.group.consumer_group_member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
    Partitions,
    is_subset,
    normalize,
    reconcile,
)
from strom.core.coordinator.group.consumer_group_records import Record
from strom.core.errors import (
    FencedMemberEpochError,
    GroupMaxSizeReachedError,
    InvalidRegularExpressionError,
    InvalidRequestError,
    KafkaError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
    UnsupportedVersionError,
)
from strom.plugins.hookspecs.assignors import (
    ConsumerGroupPartitionAssignor,
    GroupSpec,
    MemberAssignment,
    MemberSubscription,
    SubscribedTopicMetadata,
    TopicMetadata,
)

SubscriptionMetadata = dict[str, tuple[uuid.UUID, int]]  # topic name -> (topic id, partitions)

# Kafka's ConsumerGroup.ConsumerGroupState names, as DescribeGroups/ListGroups show them.
EMPTY, ASSIGNING, RECONCILING, STABLE, DEAD = "Empty", "Assigning", "Reconciling", "Stable", "Dead"


@lru_cache(maxsize=256)
def compile_regex(pattern: str) -> re.Pattern[str]:
    """A subscription regex (Kafka matches the whole topic name); INVALID_REGULAR_EXPRESSION if bad."""
    try:
        return re.compile(pattern)
    except re.error as e:
        raise InvalidRegularExpressionError(f"invalid regular expression {pattern!r}: {e}") from None


class TopicsView(Protocol):
    """The cluster's topics as the group needs them (the broker's metadata image)."""

    def lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        """(topic id, partition count) of an existing topic."""
        ...

    def names(self) -> Iterable[str]:
        """Every topic name (for regex subscriptions)."""
        ...


@dataclass(frozen=True, slots=True)
class GroupEnv:
    """What a group computation needs from the broker: topics, assignors and timeouts."""

    topics: TopicsView
    assignors: Mapping[str, ConsumerGroupPartitionAssignor]  # first = default
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 2**31 - 1


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat request in plain values; ``None`` = unchanged since the last one."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(slots=True)
class HeartbeatResult:
    """The records of a heartbeat and what to answer once they are written."""

    records: list[Record]
    member_id: str
    member_epoch: int
    assignment: Partitions | None  # None: the response carries no assignment
    session_deadline_ms: int | None = None
    rebalance_deadline_ms: int | None = None  # set while the member must revoke
    rebalance_restart: bool = False  # this heartbeat asked for a (new) revocation: restart the timer


class CommitPartitionValidator(Protocol):
    """Checks one partition of an offset commit; raises the error that refuses the commit."""

    def __call__(self, topic: str, topic_id: uuid.UUID | None, partition: int) -> None: ...


@dataclass(frozen=True, slots=True)
class _AssignmentEpochValidator:
    """KIP-1251: a commit with an epoch older than the member's is fine for a partition the
    member has held (assigned or pending revocation) since that epoch or earlier."""

    member: ConsumerGroupMember
    received: int

    def __call__(self, topic: str, topic_id: uuid.UUID | None, partition: int) -> None:
        epoch = None if topic_id is None else self.member.assignment_epoch(topic_id, partition)
        if epoch is None:
            raise StaleMemberEpochError(
                f"Partition {topic}-{partition} is not assigned or pending revocation for member.")
        if self.received < epoch:
            raise StaleMemberEpochError(f"Received member epoch {self.received} is older than "
                                        f"assignment epoch {epoch} for partition {topic}-{partition}.")


@dataclass(slots=True)
class _Deadlines:
    session: dict[str, int] = field(default_factory=dict)
    rebalance: dict[str, tuple[int, int]] = field(default_factory=dict)  # member -> (deadline, epoch)


class ConsumerGroup:
    """The state of one KIP-848 group, rebuilt from its records by :meth:`replay`."""

    protocol_type = "consumer"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, Partitions] = {}
        self.subscription_metadata: SubscriptionMetadata = {}
        self.deleted = False
        # (topic id, partition) -> member owning it (assigned or pending revocation): the
        # invariant "one owner per partition" is checked on every replay.
        self._owners: dict[tuple[uuid.UUID, int], str] = {}
        self._deadlines = _Deadlines()
        self._lock: asyncio.Lock | None = None

    # -- views -------------------------------------------------------------------------------

    @property
    def lock(self) -> asyncio.Lock:
        """Serializes compute-write-replay of this group's changes (created on the running loop)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def is_empty(self) -> bool:
        return not self.members

    @property
    def state(self) -> str:
        """Empty, Assigning, Reconciling or Stable (Kafka's ConsumerGroupState)."""
        if self.deleted:
            return DEAD
        if not self.members:
            return EMPTY
        if self.group_epoch != self.assignment_epoch:
            return ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return RECONCILING
        return STABLE

    def subscribed_topics(self) -> set[str]:
        """Topic names some member subscribes to (OffsetDelete refuses to delete their offsets)."""
        names = set(self.subscription_metadata)
        for m in self.members.values():
            names.update(m.subscribed_topic_names)
        return names

    def owner_of(self, topic_id: uuid.UUID, partition: int) -> str | None:
        return self._owners.get((topic_id, partition))

    def owners(self) -> dict[tuple[uuid.UUID, int], str]:
        return dict(self._owners)

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def preferred_assignor(self, env: GroupEnv, members: Mapping[str, ConsumerGroupMember] | None = None) -> str:
        """The assignor most members ask for (ties: configured order), else the default."""
        names = list(env.assignors)
        votes: dict[str, int] = {}
        for m in (self.members if members is None else members).values():
            if m.server_assignor is not None and m.server_assignor in env.assignors:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return names[0]
        return max(votes, key=lambda n: (votes[n], -names.index(n)))

    def snapshot(self) -> tuple[object, ...]:
        """The persistent state as a comparable value (tests check replay rebuilds it)."""
        return (self.group_epoch, self.assignment_epoch, dict(sorted(self.members.items())),
                {k: normalize(v) for k, v in sorted(self.target.items())},
                dict(sorted(self.subscription_metadata.items())), dict(self._owners), self.deleted)

    # -- offsets ------------------------------------------------------------------------------

    def validate_offset_commit(self, member_id: str, member_epoch: int, *, instance_id: str | None = None,
                               transactional: bool = False, api_version: int | None = None
                               ) -> CommitPartitionValidator | None:
        """Check an (Txn)OffsetCommit against the member (Kafka 4.3's ``validateOffsetCommit``).

        Returns ``None`` when every partition may be committed, else the per-partition check
        (KIP-1251) to run on each partition before anything is written. Epoch -1 (admin client,
        manual assignment) may only commit to an empty group; a transactional commit without a
        member (epoch -1, no member id, no instance id) is not checked against the group.
        Raises UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION (OffsetCommit below v9 from a consumer-
        protocol member) or STALE_MEMBER_EPOCH (an epoch newer than the member's).
        """
        if member_epoch < 0 and not self.members:
            return None
        if transactional and member_epoch == -1 and member_id == "" and instance_id is None:
            return None
        member = self.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group {self.group_id}.")
        if not transactional and api_version is not None and api_version < 9:
            raise UnsupportedVersionError("OffsetCommit version 9 or above must be used by members "
                                          "using the consumer group protocol")
        if member_epoch == member.member_epoch:
            return None
        if member_epoch > member.member_epoch:
            raise StaleMemberEpochError(f"Received member epoch {member_epoch} is newer than "
                                        f"current member epoch {member.member_epoch}.")
        return _AssignmentEpochValidator(member, member_epoch)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """OffsetFetch v9+: a member reading with its epoch must be current (-1 = not a member)."""
        if member_epoch < 0 and not member_id:
            return
        member = self.members.get(member_id or "")
        if member is None:
            raise UnknownMemberIdError(f"member {member_id!r} is not in group {self.group_id!r}")
        if member_epoch != member.member_epoch:
            raise StaleMemberEpochError(
                f"member epoch {member_epoch} is not the current {member.member_epoch}")

    # -- replay -------------------------------------------------------------------------------

    def replay(self, key: R.CoordinatorMessage, value: R.CoordinatorMessage | None) -> None:
        """Apply one persisted record (at write time and at load)."""
        if isinstance(key, R.ConsumerGroupMetadataKey):
            if value is None:
                self._clear()
                self.deleted = True
            else:
                assert isinstance(value, R.ConsumerGroupMetadataValue)
                self.group_epoch = value.epoch
                self.deleted = False
        elif isinstance(key, R.ConsumerGroupPartitionMetadataKey):
            # The record table pairs each key type with its value type.
            assert value is None or isinstance(value, R.ConsumerGroupPartitionMetadataValue)
            self.subscription_metadata = {} if value is None else {
                t.topic_name: (t.topic_id, t.num_partitions)
                for t in value.topics
            }
        elif isinstance(key, R.ConsumerGroupMemberMetadataKey):
            self._replay_member(key.member_id, value)
        elif isinstance(key, R.ConsumerGroupTargetAssignmentMetadataKey):
            assert value is None or isinstance(value, R.ConsumerGroupTargetAssignmentMetadataValue)
            self.assignment_epoch = 0 if value is None else value.assignment_epoch
        elif isinstance(key, R.ConsumerGroupTargetAssignmentMemberKey):
            if value is None:
                self.target.pop(key.member_id, None)
            else:
                assert isinstance(value, R.ConsumerGroupTargetAssignmentMemberValue)
                self.target[key.member_id] = CR.from_topic_partitions(value.topic_partitions)
        elif isinstance(key, R.ConsumerGroupCurrentMemberAssignmentKey):
            self._replay_assignment(key.member_id, value)

    def _replay_member(self, member_id: str, value: R.CoordinatorMessage | None) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is not None:
                self._set_owned(old, None)
                del self.members[member_id]
            self._deadlines.session.pop(member_id, None)
            self._deadlines.rebalance.pop(member_id, None)
            return
        assert isinstance(value, R.ConsumerGroupMemberMetadataValue)
        base = old or ConsumerGroupMember(member_id)
        self.members[member_id] = replace(
            base, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
            client_host=value.client_host, subscribed_topic_names=tuple(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex, server_assignor=value.server_assignor,
            rebalance_timeout_ms=value.rebalance_timeout_ms)
        self.deleted = False

    def _replay_assignment(self, member_id: str, value: R.CoordinatorMessage | None) -> None:
        old = self.members.get(member_id) or ConsumerGroupMember(member_id)
        if value is None:
            new = replace(old, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                          previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH).with_assignment({}, {})
        else:
            assert isinstance(value, R.ConsumerGroupCurrentMemberAssignmentValue)
            try:
                state = MemberState(value.state)
            except ValueError:
                state = MemberState.UNKNOWN
            epochs = CR.epochs_from_topic_partitions(
                self.group_id, member_id, (*value.assigned_partitions, *value.partitions_pending_revocation),
                value.member_epoch)
            new = replace(old, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
                          state=state).with_assignment(CR.from_topic_partitions(value.assigned_partitions),
                                                       CR.from_topic_partitions(value.partitions_pending_revocation),
                                                       epochs)
        self._set_owned(old, new)
        if member_id in self.members or value is not None:
            self.members[member_id] = new

    def _set_owned(self, old: ConsumerGroupMember, new: ConsumerGroupMember | None) -> None:
        for t, ps in old.owned().items():
            for p in ps:
                if self._owners.get((t, p)) == old.member_id:
                    del self._owners[(t, p)]
        if new is None:
            return
        for t, ps in new.owned().items():
            for p in ps:
                holder = self._owners.setdefault((t, p), new.member_id)
                if holder != new.member_id:
                    # Kafka throws IllegalStateException here: the records contradict themselves.
                    raise RuntimeError(f"partition {t}-{p} of group {self.group_id!r} would be owned by "
                                       f"both {holder!r} and {new.member_id!r}")

    def _clear(self) -> None:
        self.group_epoch = self.assignment_epoch = 0
        self.members.clear()
        self.target.clear()
        self.subscription_metadata = {}
        self._owners.clear()
        self._deadlines = _Deadlines()

    # -- deadlines ----------------------------------------------------------------------------

    def set_deadlines(self, result: HeartbeatResult) -> None:
        """Arm the member's timers after its heartbeat was written."""
        mid = result.member_id
        if mid not in self.members:
            return
        if result.session_deadline_ms is not None:
            self._deadlines.session[mid] = result.session_deadline_ms
        member = self.members[mid]
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            current = self._deadlines.rebalance.get(mid)
            if result.rebalance_restart or current is None or current[1] != member.member_epoch:
                deadline = result.rebalance_deadline_ms
                if deadline is not None:
                    self._deadlines.rebalance[mid] = (deadline, member.member_epoch)
        else:
            self._deadlines.rebalance.pop(mid, None)

    def next_deadline(self, now_ms: int, env: GroupEnv) -> int | None:
        """When :meth:`expire` next has something to do (members without a timer get one now)."""
        for mid in self.members:
            self._deadlines.session.setdefault(mid, now_ms + env.session_timeout_ms)
        times = [d for mid, d in self._deadlines.session.items() if mid in self.members]
        times += [d for mid, (d, _) in self._deadlines.rebalance.items() if mid in self.members]
        return min(times, default=None)

    def expire(self, now_ms: int, env: GroupEnv) -> list[Record]:
        """Records fencing the members whose session or revocation time ran out."""
        self.next_deadline(now_ms, env)
        gone = sorted(mid for mid, d in self._deadlines.session.items() if d <= now_ms and mid in self.members)
        for mid, (deadline, epoch) in self._deadlines.rebalance.items():
            m = self.members.get(mid)
            if (deadline <= now_ms and m is not None and m.state is MemberState.UNREVOKED_PARTITIONS
                    and m.member_epoch == epoch and mid not in gone):
                gone.append(mid)
        return self._removal(gone, env) if gone else []

    # -- heartbeat ----------------------------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest, env: GroupEnv, now_ms: int) -> HeartbeatResult:
        """The records and answer of one ConsumerGroupHeartbeat (GroupMetadataManager.consumerGroupHeartbeat)."""
        self._validate(req, env)
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self.leave(req.member_id, req.member_epoch, req.instance_id, env)
        gid = self.group_id
        records: list[Record] = []
        stored = self.members.get(req.member_id)
        replaced: ConsumerGroupMember | None = None  # a departed static member being taken over
        if stored is None:
            if req.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise UnknownMemberIdError(f"member {req.member_id!r} is not in group {gid!r}")
            if len(self.members) >= env.max_size:
                raise GroupMaxSizeReachedError(f"group {gid!r} has {len(self.members)} members")
            member = ConsumerGroupMember(req.member_id)
            if req.instance_id is not None:
                replaced = self.static_member(req.instance_id)
                if replaced is not None:
                    if replaced.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                        raise UnreleasedInstanceIdError(
                            f"instance {req.instance_id!r} is still used by member {replaced.member_id!r}")
                    # The new incarnation takes over the old one's assignment and epoch.
                    member = replace(replaced, member_id=req.member_id,
                                     member_epoch=replaced.previous_member_epoch,
                                     previous_member_epoch=replaced.previous_member_epoch,
                                     state=MemberState.STABLE).with_assignment(replaced.assigned, {})
        elif req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            # A rejoin (after fencing, or a lost join response): the client owns nothing now.
            member = replace(stored, member_epoch=0, previous_member_epoch=stored.member_epoch,
                             state=MemberState.STABLE).with_assignment({}, {})
        else:
            member = stored
            if req.member_epoch > member.member_epoch or (
                    req.member_epoch < member.member_epoch
                    # The previous epoch is accepted when the response bumping it was lost.
                    and (req.member_epoch != member.previous_member_epoch
                         or (req.owned is not None and not is_subset(req.owned, member.assigned)))):
                raise FencedMemberEpochError(
                    f"member epoch {req.member_epoch} does not match {member.member_epoch}")

        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms >= 0
            else member.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=tuple(req.subscribed_topic_names) if req.subscribed_topic_names is not None
            else member.subscribed_topic_names,
            subscribed_topic_regex=(req.subscribed_topic_regex or None) if req.subscribed_topic_regex is not None
            else member.subscribed_topic_regex,
            client_id=req.client_id, client_host=req.client_host)

        if replaced is not None:
            records += CR.member_removal(gid, replaced.member_id)
        bump = stored is None and replaced is None
        if stored is None or updated.metadata_key() != stored.metadata_key():
            records.append(CR.member_metadata(gid, updated))
        if updated.subscription_key() != member.subscription_key():
            bump = True

        members = dict(self.members)
        if replaced is not None:
            del members[replaced.member_id]
        members[updated.member_id] = updated
        metadata = self.compute_subscription_metadata(members, env.topics)
        if metadata != self.subscription_metadata:
            records.append(CR.subscription_metadata(gid, metadata))
            bump = True
        group_epoch = self.group_epoch + 1 if bump else self.group_epoch
        if bump:
            records.append(CR.group_epoch(gid, group_epoch))

        targets = dict(self.target)
        if replaced is not None:
            targets[updated.member_id] = targets.pop(replaced.member_id, {})
            records.append(CR.target_member(gid, updated.member_id, targets[updated.member_id]))
        target_epoch = self.assignment_epoch
        if group_epoch > target_epoch:
            new_targets = self.compute_target(members, metadata, targets, env)
            for mid, parts in new_targets.items():
                if mid not in targets or normalize(targets[mid]) != normalize(parts):
                    records.append(CR.target_member(gid, mid, parts))
            records.append(CR.target_epoch(gid, group_epoch))
            targets, target_epoch = new_targets, group_epoch

        same = {updated.member_id} | ({replaced.member_id} if replaced is not None else set())

        def owner(t: uuid.UUID, p: int) -> str | None:
            holder = self._owners.get((t, p))
            return updated.member_id if holder in same else holder

        names = list(metadata)
        subscribed = frozenset(metadata[n][0] for n in self.subscribed_names(updated, names) if n in metadata)
        reconciled = reconcile(updated, target_epoch, targets.get(updated.member_id, {}), req.owned, owner,
                               subscribed=subscribed,
                               subscription_changed=updated.subscription_key() != member.subscription_key())
        if stored is None or reconciled.assignment_key() != stored.assignment_key():
            records.append(CR.current_assignment(gid, reconciled))

        full = (req.member_epoch == JOIN_GROUP_MEMBER_EPOCH or (
            req.owned is not None and req.rebalance_timeout_ms >= 0
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)))
        changed = stored is None or normalize(stored.assigned) != normalize(reconciled.assigned)
        revoking = reconciled.state is MemberState.UNREVOKED_PARTITIONS
        rebalance_deadline = now_ms + reconciled.rebalance_timeout_ms if revoking else None
        return HeartbeatResult(records, reconciled.member_id, reconciled.member_epoch,
                               reconciled.assigned if (full or changed) else None,
                               now_ms + env.session_timeout_ms, rebalance_deadline,
                               # Kafka reschedules the revocation timeout whenever it asks anew
                               # (the epoch may stay the same from one revocation to the next).
                               revoking and reconciled.assignment_key() != updated.assignment_key())

    def leave(self, member_id: str, member_epoch: int, instance_id: str | None, env: GroupEnv) -> HeartbeatResult:
        """A member leaving with epoch -1, or a static member leaving for a while with -2."""
        member = self.members.get(member_id)
        if member is None and instance_id is not None:
            member = self.static_member(instance_id)
        if member is None:
            raise UnknownMemberIdError(f"member {member_id!r} is not in group {self.group_id!r}")
        if member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and member.instance_id is not None:
            # Kept with its assignment until it comes back or its session expires; as in Kafka
            # its assignment epochs drop to 0, so the returning instance may commit with any epoch.
            left = replace(member.with_epoch(LEAVE_GROUP_STATIC_MEMBER_EPOCH), state=MemberState.STABLE)
            left = left.with_assignment(member.assigned, {}, {}, new_epoch=0)
            records = [CR.current_assignment(self.group_id, left)]
            return HeartbeatResult(records, member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH, None)
        return HeartbeatResult(self._removal([member.member_id], env), member.member_id,
                               LEAVE_GROUP_MEMBER_EPOCH, None)

    def _removal(self, member_ids: list[str], env: GroupEnv) -> list[Record]:
        records: list[Record] = []
        for mid in member_ids:
            records += CR.member_removal(self.group_id, mid)
        members = {k: v for k, v in self.members.items() if k not in member_ids}
        metadata = self.compute_subscription_metadata(members, env.topics)
        if metadata != self.subscription_metadata:
            records.append(CR.subscription_metadata(self.group_id, metadata))
        records.append(CR.group_epoch(self.group_id, self.group_epoch + 1))
        return records

    def delete_records(self) -> list[Record]:
        """Tombstones of every record of this group (DeleteGroups of an empty group)."""
        gid = self.group_id
        records: list[Record] = []
        for mid in self.members:
            records += CR.member_removal(gid, mid)
        for mid in self.target:
            if mid not in self.members:
                records.append(CR.target_member_tombstone(gid, mid))
        records += [CR.target_epoch_tombstone(gid), CR.subscription_metadata_tombstone(gid), CR.group_tombstone(gid)]
        return records

    # -- validation and computation -----------------------------------------------------------

    def _validate(self, req: HeartbeatRequest, env: GroupEnv) -> None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
        def invalid(msg: str) -> KafkaError:
            return InvalidRequestError(msg)

        if not self.group_id:
            raise invalid("GroupId can't be empty.")
        if req.instance_id is not None and not req.instance_id:
            raise invalid("InstanceId can't be empty.")
        if req.rack_id is not None and not req.rack_id:
            raise invalid("RackId can't be empty.")
        if not req.member_id:
            raise invalid("MemberId can't be empty.")
        if req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if req.rebalance_timeout_ms < 0:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or any(req.owned.values()):
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise invalid(f"MemberEpoch is invalid: {req.member_epoch}")
        if req.server_assignor is not None and req.server_assignor not in env.assignors:
            raise UnsupportedAssignorError(f"ServerAssignor {req.server_assignor} is not supported. "
                                           f"Supported assignors: {', '.join(env.assignors)}.")
        if req.subscribed_topic_regex:
            compile_regex(req.subscribed_topic_regex)

    @staticmethod
    def subscribed_names(member: ConsumerGroupMember, topic_names: Iterable[str]) -> set[str]:
        """Topic names the member subscribes to: its list plus the regex's matches."""
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            rx = compile_regex(member.subscribed_topic_regex)
            names.update(n for n in topic_names if not n.startswith("__") and rx.fullmatch(n))
        return names

    def compute_subscription_metadata(self, members: Mapping[str, ConsumerGroupMember],
                                      topics: TopicsView) -> SubscriptionMetadata:
        """Topic id and partition count of every existing topic some member subscribes to."""
        all_names: list[str] | None = None
        wanted: set[str] = set()
        for m in members.values():
            if m.subscribed_topic_regex and all_names is None:
                all_names = list(topics.names())
            wanted |= self.subscribed_names(m, all_names or ())
        out: SubscriptionMetadata = {}
        for name in sorted(wanted):
            found = topics.lookup(name)
            if found is not None:
                out[name] = found
        return out

    def compute_target(self, members: Mapping[str, ConsumerGroupMember], metadata: SubscriptionMetadata,
                       current: Mapping[str, Partitions], env: GroupEnv) -> dict[str, Partitions]:
        """The target assignment from the group's assignor (every member present)."""
        names = list(metadata)
        specs = {}
        for mid, m in members.items():
            ids = frozenset(metadata[n][0] for n in self.subscribed_names(m, names) if n in metadata)
            specs[mid] = MemberSubscription(ids, m.rack_id, m.instance_id)
        spec = GroupSpec(specs, {mid: MemberAssignment(current[mid]) for mid in members if mid in current})
        described = SubscribedTopicMetadata({tid: TopicMetadata(tid, name, n) for name, (tid, n) in metadata.items()})
        assignor = env.assignors[self.preferred_assignor(env, members)]
        result = assignor.assign(spec, described)
        return {mid: normalize(result.members[mid].partitions) if mid in result.members else {}
                for mid in members}
