"""A share group's membership (KIP-932's ShareGroupHeartbeat), without I/O.

As Kafka 4.3.1's ``GroupMetadataManager.shareGroupHeartbeat``: a member joins with epoch 0 and
the topics it subscribes to, heartbeats with the epoch it was given, leaves with epoch -1. A new
group starts at group epoch 1 (Kafka's ``ModernGroup``). A heartbeat bumps the *group epoch*
when the member's subscriptions changed (a join is one), when the subscribed topics' metadata
hash changed, or - the target being current - when the initialized share partitions of the
subscribed topics are not what the target assigns (``initializedAssignmentPending``). The
*target assignment* is recomputed with the share assignor when the group epoch is ahead of it,
but at most once per ``group.share.assignment.interval.ms`` (Kafka's
``canComputeNextTargetAssignment``); only initialized partitions are assignable. Share groups
have no revocation phase (a partition may be read by several members at once), so each member
takes its target at once and its member epoch becomes the assignment epoch. The assignment is
sent on a join, on a full request (subscriptions given) and when it changed. A heartbeat with
another epoch than the member's is FENCED_MEMBER_EPOCH, an unknown member with an epoch > 0
UNKNOWN_MEMBER_ID, a member silent for ``group.share.session.timeout.ms`` is removed
(:meth:`ShareGroup.expire_members`), and ``group.share.max.size`` members at most
(GROUP_MAX_SIZE_REACHED).

The caller resolves topic names to ids and partition counts from the metadata image
(``topics``) and persists the group (``group.share_group_service`` writes Kafka's ShareGroup*
records to ``__consumer_offsets`` and replays them here through :meth:`ShareGroup.replay`);
this class holds the state machine only. ``initialized`` is the set of share partitions whose
state the share coordinator holds (ShareGroupStatePartitionMetadata).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import xxhash

from strom.core.coordinator.share.assignor import Assignment, ShareGroupSpec, SimpleAssignor
from strom.core.errors import (
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    InvalidRequestError,
    UnknownMemberIdError,
)
from strom.plugins.hookspecs.assignors import (
    ConsumerGroupPartitionAssignor,
    MemberAssignment,
    MemberSubscription,
    SubscribedTopicMetadata,
    TopicMetadata,
)

LEAVE_GROUP_MEMBER_EPOCH = -1
DEFAULT_SESSION_TIMEOUT_MS = 45_000
DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000
DEFAULT_MAX_SIZE = 200
DEFAULT_ASSIGNMENT_INTERVAL_MS = 1_000  # group.share.assignment.interval.ms


@dataclass(slots=True)
class ShareGroupMember:
    """One member: its subscriptions, its epoch and what it is assigned."""

    member_id: str
    member_epoch: int
    subscribed_topic_names: tuple[str, ...]
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    assignment: dict[uuid.UUID, set[int]] = field(default_factory=dict)
    last_heartbeat_ms: int = 0


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """ShareGroupHeartbeatResponse's content: ``assignment`` is None when unchanged (not sent)."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: dict[uuid.UUID, set[int]] | None


class ShareGroup:
    """Membership, group epoch and target assignment of one share group."""

    def __init__(self, group_id: str, *, assignor: ConsumerGroupPartitionAssignor | None = None,
                 session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
                 heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS,
                 max_size: int = DEFAULT_MAX_SIZE,
                 assignment_interval_ms: int = DEFAULT_ASSIGNMENT_INTERVAL_MS) -> None:
        self.group_id = group_id
        self.assignor: ConsumerGroupPartitionAssignor = assignor or SimpleAssignor()
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_size = max_size
        self.assignment_interval_ms = assignment_interval_ms
        # Kafka 4.3's ModernGroup starts at epoch 1: the first join makes it 2.
        self.group_epoch = 1
        self.assignment_epoch = 0
        # When the target was last computed (0: never); the next waits assignment_interval_ms.
        self.assignment_timestamp_ms = 0
        self.members: dict[str, ShareGroupMember] = {}
        self.target: Assignment = {}
        # The partition counts the target was computed with (topic id -> count).
        self._topic_metadata: dict[uuid.UUID, int] = {}
        # Kafka persists a hash of the subscribed topics' metadata, not the metadata: a group
        # replayed from the log compares against this one (see ``metadata_hash``).
        self.metadata_hash = 0
        # Share partitions whose state the share coordinator holds: topic id -> partitions.
        self.initialized: dict[uuid.UUID, set[int]] = {}
        # ``initialized`` as the previous heartbeat left it (None: no heartbeat since the group
        # was created or loaded). Kafka initializes share partitions asynchronously after the
        # heartbeat that found them missing, so they are assignable from the next heartbeat on;
        # strom's service initializes them just before the heartbeat, and this keeps them out
        # of that heartbeat's target (see :meth:`_assignable`).
        self._initialized_seen: dict[uuid.UUID, set[int]] | None = None
        self.topic_names: dict[uuid.UUID, str] = {}
        self.deleted = False

    @property
    def state(self) -> str:
        """ShareGroupDescribe's GroupState: Empty or Stable (share groups never rebalance); Dead once deleted."""
        if self.deleted:
            return "Dead"
        return "Empty" if not self.members else "Stable"

    def is_empty(self) -> bool:
        return not self.members

    def member_assignment(self, member_id: str) -> dict[uuid.UUID, set[int]] | None:
        """What the member is assigned now (a copy), None for an unknown member."""
        member = self.members.get(member_id)
        return None if member is None else {t: set(ps) for t, ps in member.assignment.items()}

    # Kafka's ShareGroup refuses the consumer-group offset APIs with GROUP_ID_NOT_FOUND.
    def validate_offset_commit(self, *_args: object, **_kwargs: object) -> None:
        raise GroupIdNotFoundError(f"Group {self.group_id} is not a consumer group.")

    def validate_offset_fetch(self, *_args: object, **_kwargs: object) -> None:
        raise GroupIdNotFoundError(f"Group {self.group_id} is not a consumer group.")

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def heartbeat(self, member_id: str, member_epoch: int, subscribed_topic_names: Sequence[str] | None, *,
                  topics: Mapping[str, tuple[uuid.UUID, int]], now_ms: int, rack_id: str | None = None,
                  client_id: str = "", client_host: str = "") -> HeartbeatResult:
        """Handle one ShareGroupHeartbeat. ``topics``: name -> (topic id, partitions) of existing topics.

        ``subscribed_topic_names`` None means unchanged (the field is nullable on the wire).
        """
        if not member_id:
            raise InvalidRequestError("MemberId can't be empty.")
        if member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            raise InvalidRequestError("MemberEpoch is invalid.")
        if member_epoch == 0 and not subscribed_topic_names:
            raise InvalidRequestError("SubscribedTopicNames must be set in first request.")
        if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            return self._leave(member_id)

        member = self.members.get(member_id)
        changed = False
        if member is None:
            if member_epoch != 0:
                raise UnknownMemberIdError(f"Member {member_id} is not a member of group {self.group_id}.")
            if len(self.members) >= self.max_size:
                raise GroupMaxSizeReachedError(f"The share group has reached its maximum capacity of "
                                               f"{self.max_size} members.")
            member = ShareGroupMember(member_id, 0, tuple(subscribed_topic_names or ()))
            self.members[member_id] = member
            changed = True
        elif member_epoch > member.member_epoch:
            raise FencedMemberEpochError(
                f"The share group member has a greater member epoch ({member_epoch}) than the one known by the "
                f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")
        elif 0 < member_epoch < member.member_epoch and member_epoch != member.previous_member_epoch:
            # The previous epoch is accepted: the response that gave the new one may be lost.
            raise FencedMemberEpochError(
                f"The share group member has a smaller member epoch ({member_epoch}) than the one known by the "
                f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")
        if subscribed_topic_names is not None and tuple(subscribed_topic_names) != member.subscribed_topic_names:
            member.subscribed_topic_names = tuple(subscribed_topic_names)
            changed = True
        member.rack_id, member.client_id, member.client_host = rack_id, client_id, client_host
        member.last_heartbeat_ms = now_ms

        assignable = self._assignable()
        self._initialized_seen = {t: set(ps) for t, ps in self.initialized.items()}
        bump = changed
        if not bump and self.assignment_epoch >= self.group_epoch:
            bump = self._initialized_assignment_pending(assignable)
        metadata = self._subscribed_metadata(topics)
        if bump or metadata != self._topic_metadata:
            digest = metadata_hash({n: topics[n] for n in self.subscribed_topic_names() if n in topics})
            if digest != self.metadata_hash:
                bump = True
            if bump:
                self.group_epoch += 1
                self.metadata_hash = digest
        if self.group_epoch > self.assignment_epoch and self._can_compute_target(now_ms):
            self._compute_target(topics, metadata, now_ms, assignable)

        new_assignment = {t: set(ps) for t, ps in self.target.get(member_id, {}).items()}
        send = member_epoch == 0 or subscribed_topic_names is not None or new_assignment != member.assignment
        member.assignment = new_assignment
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
        member.member_epoch = self.assignment_epoch
        return HeartbeatResult(member_id, member.member_epoch, self.heartbeat_interval_ms,
                               new_assignment if send else None)

    def _can_compute_target(self, now_ms: int) -> bool:
        # Kafka's canComputeNextTargetAssignment.
        return (self.assignment_timestamp_ms == 0 or self.assignment_interval_ms == 0
                or now_ms >= self.assignment_timestamp_ms + self.assignment_interval_ms)

    def _assignable(self) -> dict[uuid.UUID, set[int]]:
        """The initialized partitions this heartbeat may assign: those the previous heartbeat
        saw (less any dropped since). A group with no heartbeat since it was loaded trusts what
        it loaded; a new group (never assigned) has nothing initialized before its first join."""
        seen = self._initialized_seen
        if seen is None:
            if self.assignment_epoch == 0:
                return {}
            seen = self.initialized
        return {t: ps & seen.get(t, set()) for t, ps in self.initialized.items() if ps & seen.get(t, set())}

    def _initialized_assignment_pending(self, initialized: Mapping[uuid.UUID, set[int]]) -> bool:
        """Kafka's ``initializedAssignmentPending``: a subscribed topic's initialized partitions
        are not exactly what the target assigns, so the target must be recomputed."""
        if not self.members or not initialized:
            return False
        subscribed = self.subscribed_topic_names()
        if not subscribed:
            return False
        assigned: dict[uuid.UUID, set[int]] = {}
        for parts in self.target.values():
            for topic_id, ps in parts.items():
                assigned.setdefault(topic_id, set()).update(ps)
        for topic_id, ps in initialized.items():
            if self.topic_names.get(topic_id) in subscribed and assigned.get(topic_id) != ps:
                return True
        return False

    def expire_members(self, now_ms: int) -> list[str]:
        """Remove the members whose session timed out; the group epoch moves if any went."""
        gone = [m.member_id for m in self.members.values()
                if now_ms - m.last_heartbeat_ms >= self.session_timeout_ms]
        for member_id in gone:
            del self.members[member_id]
        if gone:
            self.group_epoch += 1
            for member_id in gone:
                self.target.pop(member_id, None)
        return gone

    def _leave(self, member_id: str) -> HeartbeatResult:
        if self.members.pop(member_id, None) is None:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group {self.group_id}.")
        self.group_epoch += 1
        self.target.pop(member_id, None)
        # Kafka answers a leave with heartbeat interval 0: there is no next heartbeat.
        return HeartbeatResult(member_id, LEAVE_GROUP_MEMBER_EPOCH, 0, None)

    def _subscribed_metadata(self, topics: Mapping[str, tuple[uuid.UUID, int]]) -> dict[uuid.UUID, int]:
        return {topics[n][0]: topics[n][1] for n in sorted(self.subscribed_topic_names()) if n in topics}

    def _compute_target(self, topics: Mapping[str, tuple[uuid.UUID, int]], metadata: dict[uuid.UUID, int],
                        now_ms: int, assignable: Mapping[uuid.UUID, set[int]]) -> None:
        # Through the assignor hook's interface, so a plugin assignor is called the same way.
        spec = ShareGroupSpec(
            members={m.member_id: MemberSubscription(
                frozenset(topics[n][0] for n in m.subscribed_topic_names if n in topics), m.rack_id)
                for m in self.members.values()},
            # Kafka's GroupSpec holds each member's target assignment (its last one), in the order
            # the assignor gave it: the assignor walks it in Java's hash order.
            current={m.member_id: MemberAssignment({t: frozenset(ps) for t, ps in self.target.get(m.member_id, {}).items()})
                     for m in self.members.values()},
            assignable={t: frozenset(ps) for t, ps in assignable.items()})
        names = {tid: name for name, (tid, _) in topics.items()}
        described = SubscribedTopicMetadata({tid: TopicMetadata(tid, names.get(tid, ""), n)
                                             for tid, n in metadata.items()})
        result = self.assignor.assign(spec, described)
        self.target = {mid: {t: set(ps) for t, ps in a.partitions.items() if ps}
                       for mid, a in result.members.items()}
        self._topic_metadata = metadata
        self.assignment_epoch = self.group_epoch
        self.assignment_timestamp_ms = now_ms


# Kafka's Utils.TOPIC_HASH_MAGIC_BYTE: the version of the topic hash's layout.
TOPIC_HASH_MAGIC_BYTE = 0


def _hash4j_string(value: str) -> bytes:
    # hash4j's HashStream.putString: the UTF-16 code units (little-endian), then their count.
    units = value.encode("utf-16-le")
    return units + struct.pack("<i", len(units) // 2)


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def topic_hash(topic_id: uuid.UUID, name: str, partitions: int,
               racks: Sequence[Sequence[str]] | None = None) -> int:
    """Kafka's ``Utils.computeTopicHash`` (KIP-1101): streaming XXH3-64 (hash4j, seed 0) of the
    magic byte, the topic id's two longs, the name, the partition count and, per partition, its
    index and its replicas' sorted racks (``racks[p]``; none when the brokers have no rack)."""
    out = bytearray([TOPIC_HASH_MAGIC_BYTE])
    out += struct.pack("<qq", _signed64(topic_id.int >> 64), _signed64(topic_id.int & ((1 << 64) - 1)))
    out += _hash4j_string(name)
    out += struct.pack("<i", partitions)
    for p in range(partitions):
        out += struct.pack("<i", p)
        for rack in sorted(racks[p] if racks is not None else ()):
            out += struct.pack("<i", len(rack)) + _hash4j_string(rack)
    return _signed64(xxhash.xxh3_64_intdigest(bytes(out)))


def metadata_hash(topics: Mapping[str, tuple[uuid.UUID, int]]) -> int:
    """Kafka's ``ModernGroup.computeMetadataHash`` / ``Utils.computeGroupHash`` of the subscribed
    topics that exist (name -> (topic id, partitions)): XXH3-64 of their topic hashes in topic-name
    order, 0 for none. Byte for byte Kafka's, so a group Kafka wrote loads without an epoch bump
    (tests/coordinator/share/test_metadata_hash_reference.py)."""
    if not topics:
        return 0
    # Java's String.compareTo orders by UTF-16 code units.
    names = sorted(topics, key=lambda n: n.encode("utf-16-be"))
    data = b"".join(struct.pack("<q", topic_hash(topics[n][0], n, topics[n][1])) for n in names)
    return _signed64(xxhash.xxh3_64_intdigest(data))
