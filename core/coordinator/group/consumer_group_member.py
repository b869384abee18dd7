"""KIP-848 group members and their incremental reconciliation (Kafka's ``ConsumerGroupMember``
and ``CurrentAssignmentBuilder``).

A member moves from its current assignment towards its target assignment in steps that never
let two members own one partition:

* partitions it owns but the target no longer gives it are *pending revocation*; while there
  are any, the member stays at its epoch in ``UNREVOKED_PARTITIONS`` and gets nothing new;
* once the client reports (owned partitions in a heartbeat) that it let them go, the member
  moves to the target epoch and receives the target partitions that are free;
* target partitions still owned by another member (assigned or pending revocation there) are
  *unreleased*: the member waits for them in ``UNRELEASED_PARTITIONS``.

Everything here is a pure function of immutable values; the group applies the results by
replaying the records built from them.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

# Member epochs with a meaning of their own (Kafka's ConsumerGroupHeartbeatRequest).
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

Partitions = Mapping[uuid.UUID, frozenset[int]]
EMPTY: Partitions = {}


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
                normalize(self.assigned), normalize(self.pending_revocation))

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def with_epoch(self, epoch: int) -> ConsumerGroupMember:
        """The member moved to ``epoch``, remembering the epoch it leaves."""
        if epoch == self.member_epoch:
            return self
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch)

    def owned(self) -> Partitions:
        """Partitions this member holds: assigned plus those it still has to revoke."""
        out = {t: set(ps) for t, ps in self.assigned.items()}
        for t, ps in self.pending_revocation.items():
            out.setdefault(t, set()).update(ps)
        return normalize(out)


PartitionOwner = Callable[[uuid.UUID, int], "str | None"]
"""Which member (id) owns a partition in the group's current state, ``None`` when free."""


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Partitions,
              owned_by_client: Partitions | None, owner: PartitionOwner) -> ConsumerGroupMember:
    """The member's next state towards ``target`` at ``target_epoch`` (CurrentAssignmentBuilder).

    ``owned_by_client`` is what the heartbeat reported (``None``: not sent this time); the
    member's own partitions count as free for itself.
    """
    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next_assignment(member, member.member_epoch, target_epoch, target, owner)
        return member
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        # Revocation is acknowledged by leaving the revoked partitions out of the owned list.
        if owned_by_client is None or intersects(member.pending_revocation, owned_by_client):
            return member
        return _next_assignment(member, min(member.member_epoch + 1, target_epoch), target_epoch, target, owner)
    # UNRELEASED_PARTITIONS (or UNKNOWN after a replay of an unknown state byte): re-check.
    return _next_assignment(member, member.member_epoch, target_epoch, target, owner)


def _next_assignment(member: ConsumerGroupMember, revoking_epoch: int, target_epoch: int,
                     target: Partitions, owner: PartitionOwner) -> ConsumerGroupMember:
    assigned: dict[uuid.UUID, set[int]] = {}
    revoking: dict[uuid.UUID, set[int]] = {}
    to_assign: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for t in set(target) | set(member.assigned):
        want = target.get(t, frozenset())
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
    if revoking:
        # Keep the epoch and ask the client to revoke first; nothing new is handed out now.
        return replace(member.with_epoch(revoking_epoch), state=MemberState.UNREVOKED_PARTITIONS,
                       assigned=normalize(assigned), pending_revocation=normalize(revoking))
    for t, ps in to_assign.items():
        assigned.setdefault(t, set()).update(ps)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return replace(member.with_epoch(target_epoch), state=state, assigned=normalize(assigned),
                   pending_revocation={})
