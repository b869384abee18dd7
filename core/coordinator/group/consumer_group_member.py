"""KIP-848 group members and their incremental reconciliation (Kafka's ``ConsumerGroupMember``
and ``CurrentAssignmentBuilder``).

A member moves from its current assignment towards its target assignment in steps that never
let two members own one partition:

* partitions it owns but the target no longer gives it are *pending revocation*; while there
  are any, the member stays at its epoch in ``UNREVOKED_PARTITIONS`` and gets nothing new --
  unless the owned partitions its client reported include none of them: then there is nothing
  to wait for and they are just dropped;
* once the client reports (owned partitions in a heartbeat) that it let them go, the member
  moves to the target epoch and receives the target partitions that are free; if by then the
  target asks it to revoke more, it does so at the same epoch (KAFKA-19974);
* a subscription change while the member holds partitions of topics it no longer subscribes to
  moves those to pending revocation at once, without waiting for a new target;
* target partitions still owned by another member (assigned or pending revocation there) are
  *unreleased*: the member waits for them in ``UNRELEASED_PARTITIONS``.

Every partition a member holds carries its *assignment epoch* (KIP-1251): the member epoch at
which it was handed to this member. It stays while the partition stays with the member (also
while it is pending revocation); a partition handed out anew gets the epoch the member moves
to. OffsetCommit accepts an older member epoch for a partition whose assignment epoch is not
newer than that epoch, so a commit racing an epoch bump is not refused needlessly.

Everything here is a pure function of immutable values; the group applies the results by
replaying the records built from them.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from strom.core.errors import FencedMemberEpochError

# Member epochs with a meaning of their own (Kafka's ConsumerGroupHeartbeatRequest).
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

Partitions = Mapping[uuid.UUID, frozenset[int]]
EMPTY: Partitions = {}
# topic id -> partition -> assignment epoch, for every partition assigned or pending revocation.
AssignmentEpochs = Mapping[uuid.UUID, Mapping[int, int]]


class MemberState(enum.IntEnum):
    """Reconciliation state of a member (the byte stored in ConsumerGroupCurrentMemberAssignmentValue)."""

    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    STABLE = 3
    UNKNOWN = 127


def normalize(parts: Mapping[uuid.UUID, Iterable[int]]) -> dict[uuid.UUID, frozenset[int]]:
    """A partitions map without empty topics, with frozen sets (so equal maps compare equal)."""
    return {t: frozenset(ps) for t, ps in parts.items() if ps}


def count(parts: Partitions) -> int:
    return sum(len(ps) for ps in parts.values())


def is_subset(small: Partitions, big: Partitions) -> bool:
    return all(ps <= big.get(t, frozenset()) for t, ps in small.items())


def intersects(a: Partitions, b: Partitions) -> bool:
    return any(ps & b.get(t, frozenset()) for t, ps in a.items())


def default_assignment_epoch(member_epoch: int) -> int:
    """The epoch of a partition whose record carries none (Kafka's loader: the member epoch, >= 0)."""
    return max(member_epoch, 0)


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    """One member of a consumer group: its subscription (ConsumerGroupMemberMetadata) and its
    current assignment (ConsumerGroupCurrentMemberAssignment)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300000
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    # Exactly the partitions of ``assigned`` and ``pending_revocation`` (see with_assignment).
    assignment_epochs: AssignmentEpochs = field(default_factory=dict)

    def subscription_key(self) -> tuple[object, ...]:
        """The fields whose change alters the target assignment (bumps the group epoch)."""
        return (tuple(sorted(self.subscribed_topic_names)), self.subscribed_topic_regex)

    def metadata_key(self) -> tuple[object, ...]:
        """Every field stored in ConsumerGroupMemberMetadataValue."""
        return (self.instance_id, self.rack_id, self.client_id, self.client_host,
                tuple(sorted(self.subscribed_topic_names)), self.subscribed_topic_regex,
                self.server_assignor, self.rebalance_timeout_ms)

    def assignment_key(self) -> tuple[object, ...]:
        """Every field stored in ConsumerGroupCurrentMemberAssignmentValue."""
        return (self.member_epoch, self.previous_member_epoch, self.state,
                normalize(self.assigned), normalize(self.pending_revocation),
                {t: dict(es) for t, es in self.assignment_epochs.items() if es})

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def with_epoch(self, epoch: int) -> ConsumerGroupMember:
        """The member moved to ``epoch``, remembering the epoch it leaves."""
        if epoch == self.member_epoch:
            return self
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch)

    def assignment_epoch(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The epoch at which the member got the partition; ``None`` unless it is assigned to
        it or pending revocation from it (Kafka's ``assignmentEpoch``/``pendingRevocationEpoch``)."""
        if (partition not in self.assigned.get(topic_id, frozenset())
                and partition not in self.pending_revocation.get(topic_id, frozenset())):
            return None
        found = self.assignment_epochs.get(topic_id, {}).get(partition)
        return default_assignment_epoch(self.member_epoch) if found is None else found

    def with_assignment(self, assigned: Mapping[uuid.UUID, Iterable[int]],
                        pending_revocation: Mapping[uuid.UUID, Iterable[int]],
                        epochs: AssignmentEpochs | None = None, *, new_epoch: int | None = None) -> ConsumerGroupMember:
        """The member holding ``assigned`` and ``pending_revocation``: a partition takes its epoch
        from ``epochs`` (default: this member's own epochs), else ``new_epoch``, else the default."""
        assigned_n, pending_n = normalize(assigned), normalize(pending_revocation)
        source = self.assignment_epochs if epochs is None else epochs
        fallback = default_assignment_epoch(self.member_epoch) if new_epoch is None else new_epoch
        out: dict[uuid.UUID, dict[int, int]] = {}
        for parts in (assigned_n, pending_n):
            for t, ps in parts.items():
                known = source.get(t, {})
                row = out.setdefault(t, {})
                for p in sorted(ps):
                    row[p] = known.get(p, fallback)
        return replace(self, assigned=assigned_n, pending_revocation=pending_n, assignment_epochs=out)

    def owned(self) -> Partitions:
        """Partitions this member holds: assigned plus those it still has to revoke."""
        out = {t: set(ps) for t, ps in self.assigned.items()}
        for t, ps in self.pending_revocation.items():
            out.setdefault(t, set()).update(ps)
        return normalize(out)


PartitionOwner = Callable[[uuid.UUID, int], "str | None"]
"""Which member (id) owns a partition in the group's current state, ``None`` when free."""


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Partitions,
              owned_by_client: Partitions | None, owner: PartitionOwner, *,
              subscribed: frozenset[uuid.UUID] | None = None,
              subscription_changed: bool = False) -> ConsumerGroupMember:
    """The member's next state towards ``target`` at ``target_epoch`` (Kafka 4.3.1's
    ``CurrentAssignmentBuilder.build``).

    ``owned_by_client`` is what the heartbeat reported (``None``: not sent this time, which
    counts as still owning everything); ``subscribed`` are the ids of the topics the member
    subscribes to now (``None``: every target topic), ``subscription_changed`` whether this
    heartbeat changed its subscription. The member's own partitions count as free for itself.
    Raises FENCED_MEMBER_EPOCH for a member in an unknown state that may still own partitions.
    """
    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next_assignment(member, member.member_epoch, target_epoch, target, owner,
                                    owned_by_client, subscribed)
        if subscription_changed and subscribed is not None:
            return _revoke_unsubscribed(member, subscribed, owned_by_client)
        return member
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        # Revocation is acknowledged by leaving the revoked partitions out of the owned list.
        if _owns_any(member.pending_revocation, owned_by_client):
            if subscription_changed and subscribed is not None:
                return _revoke_unsubscribed(member, subscribed, owned_by_client)
            return member
        # KAFKA-19974: if it must revoke again it stays at its epoch, so that a partition has
        # one owner per member epoch; otherwise it moves to the target epoch.
        return _next_assignment(member, member.member_epoch, target_epoch, target, owner,
                                owned_by_client, subscribed)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(member, member.member_epoch, target_epoch, target, owner,
                                owned_by_client, subscribed)
    # UNKNOWN (a replayed state byte this version does not know): only a client that owns
    # nothing may go on, straight to the target epoch.
    if owned_by_client is None or owned_by_client:
        raise FencedMemberEpochError(
            "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.")
    return _next_assignment(member, target_epoch, target_epoch, target, owner, owned_by_client, subscribed)


def _owns_any(revoking: Partitions, owned_by_client: Partitions | None) -> bool:
    """Whether the client may still hold one of ``revoking`` (Kafka's ``ownsRevokedPartitions``):
    an unreported owned list counts as yes."""
    return owned_by_client is None or intersects(revoking, owned_by_client)


def _moved(member: ConsumerGroupMember, epoch: int, state: MemberState) -> ConsumerGroupMember:
    """Kafka's ``updateMemberEpoch``: the previous epoch is the one left, even when it is the same."""
    return replace(member, member_epoch=epoch, previous_member_epoch=member.member_epoch, state=state)


def _revoke_unsubscribed(member: ConsumerGroupMember, subscribed: frozenset[uuid.UUID],
                         owned_by_client: Partitions | None) -> ConsumerGroupMember:
    """Kafka's ``updateCurrentAssignment``: after a subscription change, the partitions of topics
    no longer subscribed are revoked at once, without waiting for a new target assignment."""
    dropped = {t: ps for t, ps in member.assigned.items() if t not in subscribed and ps}
    if not dropped:
        return member
    kept = {t: ps for t, ps in member.assigned.items() if t in subscribed}
    pending: dict[uuid.UUID, set[int]] = {t: set(ps) for t, ps in member.pending_revocation.items()}
    for t, ps in dropped.items():
        pending.setdefault(t, set()).update(ps)
    # Kept and revoked partitions keep their assignment epochs (with_assignment's default).
    if _owns_any(normalize(pending), owned_by_client):
        return _moved(member, member.member_epoch, MemberState.UNREVOKED_PARTITIONS).with_assignment(kept, pending)
    # The client already let them go: they are simply dropped.
    return _moved(member, member.member_epoch, member.state).with_assignment(kept, member.pending_revocation)


def _next_assignment(member: ConsumerGroupMember, revoking_epoch: int, target_epoch: int,
                     target: Partitions, owner: PartitionOwner, owned_by_client: Partitions | None,
                     subscribed: frozenset[uuid.UUID] | None) -> ConsumerGroupMember:
    """Kafka's ``computeNextAssignment``: revoke first (at ``revoking_epoch``) if the client still
    holds something to revoke, else move to ``target_epoch`` with every target partition that
    is free."""
    assigned: dict[uuid.UUID, set[int]] = {}
    revoking: dict[uuid.UUID, set[int]] = {}
    to_assign: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for t in set(target) | set(member.assigned):
        # A target topic the member no longer subscribes to is not handed out (a stale target).
        want = target.get(t, frozenset()) if subscribed is None or t in subscribed else frozenset()
        have = member.assigned.get(t, frozenset())
        keep = have & want
        if keep:
            assigned[t] = set(keep)
        if have - want:
            revoking[t] = set(have - want)
        for p in want - keep:
            holder = owner(t, p)
            if holder is None or holder == member.member_id:
                to_assign.setdefault(t, set()).add(p)
            else:
                unreleased = True
    # Kept and revoked partitions keep their assignment epochs; new ones get the target epoch.
    kept_epochs = {t: {p: e for p, e in es.items() if p in member.assigned.get(t, frozenset())}
                   for t, es in member.with_assignment(member.assigned, {}).assignment_epochs.items()}
    if revoking and _owns_any(normalize(revoking), owned_by_client):
        # Ask the client to revoke first; nothing new is handed out now.
        return _moved(member, revoking_epoch, MemberState.UNREVOKED_PARTITIONS).with_assignment(
            assigned, revoking, kept_epochs)
    # Nothing to revoke, or the client owns none of it any more: no need to wait for an ack.
    for t, ps in to_assign.items():
        assigned.setdefault(t, set()).update(ps)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _moved(member, target_epoch, state).with_assignment(assigned, {}, kept_epochs, new_epoch=target_epoch)
