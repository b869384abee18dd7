"""Leader election and ISR/ELR changes of one partition: a port of Kafka 4.3.1's
``org.apache.kafka.controller.PartitionChangeBuilder`` (read from the kafka-metadata-4.3.1 jar's
bytecode, method by method; the 2024 source differs in canElectLastKnownLeader and
maybeUpdateLastKnownLeader, and 4.3.1 takes the ELR flag in its constructor).

:class:`PartitionChangeBuilder` keeps Kafka's steps and their order (``build``): populate the
target ELR, elect, bump the leader epoch for a shrunk replica set, update the ELR fields, set the
ISR, update LastKnownElr, set the assignment. The election rules (``electAnyLeader``):

1. the current leader stays if it is a *valid new leader*: in the target ISR, or - only when the
   target ISR is empty - in the target ELR (KIP-966), and acceptable (registered, unfenced, not
   in controlled shutdown). The ELR is read whether ``eligible.leader.replicas.version`` is on or
   off: off, the builder only stops maintaining it (an ELR left from before a downgrade elects,
   and the record empties it);
2. else the first valid new leader in replica order; one taken from the ELR becomes the ISR alone;
3. else, with the feature on, ISR and ELR empty and LastKnownElr holding exactly one acceptable
   replica, that last known leader (an unclean election);
4. else, for ``Election.UNCLEAN`` (``unclean.leader.election.enable``), the first acceptable
   replica (ISR set to it, leader recovery RECOVERING, ELR and LastKnownElr emptied);
5. else no leader.

A non-empty ISR whose members cannot lead therefore does not elect from the ELR: the controller
first takes the fenced/shutting-down broker out of the target ISR (Kafka's
``generateLeaderAndIsrUpdates``), and only an ISR emptied that way opens the ELR.

Not ported (strom has one node and no reassignment yet): ``completeReassignmentIfNeeded`` and
the directory assignment of ``setAssignmentChanges``; the metadata version is taken as 3.7+ (leader
recovery supported, no epoch bump on an ISR shrink - KAFKA-15021 - unless asked for).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from strom.core.metadata.image import PartitionRegistration
from strom.core.metadata.records import PartitionChangeRecord

NO_LEADER = -1
NO_LEADER_CHANGE = -2
LEADER_RECOVERY_RECOVERED = 0
LEADER_RECOVERY_RECOVERING = 1
LEADER_RECOVERY_NO_CHANGE = -1

Acceptable = Callable[[int], bool]


class Election(enum.Enum):
    """Kafka's ``PartitionChangeBuilder.Election``."""

    PREFERRED = "PREFERRED"  # the preferred replica if it may lead
    ONLINE = "ONLINE"  # from the ISR (or, when it is empty, the ELR)
    UNCLEAN = "UNCLEAN"  # as ONLINE, then any acceptable replica


@dataclass(frozen=True)
class ElectionResult:
    """Kafka's ``ElectionResult``: the node (``NO_LEADER`` if none) and whether it was unclean."""

    node: int
    unclean: bool


def java_hash_set_order(initial: Sequence[int], added: Iterable[int]) -> list[int]:
    """The iteration order of ``new HashSet<>(initial)`` after ``add`` of each of ``added``.

    Kafka builds the target ELR through a HashSet, so the record lists it in bucket order, not
    replica order. An Integer hashes to itself, spread as ``h ^ (h >>> 16)``; the table starts at
    ``tableSizeFor(max(n / .75 + 1, 16))`` and doubles past 0.75 full. Resizing keeps each bucket's
    insertion order, so the final order is (bucket in the final table, insertion order).
    Treeified buckets (8+ collisions in a 64+ table) are not modelled.
    """
    members: list[int] = []
    for value in [*initial, *added]:
        if value not in members:
            members.append(value)
    capacity = 1
    while capacity < max(int(len(initial) / 0.75) + 1, 16):
        capacity *= 2
    while len(members) > capacity * 0.75:
        capacity *= 2

    def bucket(value: int) -> int:
        h = value & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(members, key=lambda v: (bucket(v), members.index(v)))


class PartitionChangeBuilder:
    """Kafka's ``PartitionChangeBuilder``: set the targets, then :meth:`build` the record (or None)."""

    def __init__(self, partition: PartitionRegistration, topic_id: uuid.UUID, partition_id: int,
                 is_acceptable_leader: Acceptable, min_isr: int, eligible_leader_replicas_enabled: bool) -> None:
        self.partition = partition
        self.topic_id = topic_id
        self.partition_id = partition_id
        self.is_acceptable_leader = is_acceptable_leader
        self.min_isr = min_isr
        self.eligible_leader_replicas_enabled = eligible_leader_replicas_enabled
        self.target_isr: list[int] = list(partition.isr)
        self.target_replicas: list[int] = list(partition.replicas)
        self.target_removing: list[int] = list(partition.removing_replicas)
        self.target_adding: list[int] = list(partition.adding_replicas)
        self.target_elr: list[int] = list(partition.elr)
        self.target_last_known_elr: list[int] = list(partition.last_known_elr)
        self.unclean_shutdown_replicas: list[int] | None = None
        self.election = Election.ONLINE
        self.target_leader_recovery_state = partition.leader_recovery_state
        # Kafka's ReplicationControlManager never changes it from the constructor's true.
        self.use_last_known_leader_in_balanced_recovery = True
        # MetadataVersion.isLeaderEpochBumpRequiredOnIsrShrink: only before 3.6 (KAFKA-15021).
        self.leader_epoch_bump_on_isr_shrink = False

    # -- setters, as Kafka's (chainable) ------------------------------------------------------------

    def set_target_isr(self, isr: Sequence[int]) -> PartitionChangeBuilder:
        self.target_isr = list(isr)
        return self

    def set_target_replicas(self, replicas: Sequence[int]) -> PartitionChangeBuilder:
        self.target_replicas = list(replicas)
        return self

    def set_unclean_shutdown_replicas(self, replicas: Sequence[int]) -> PartitionChangeBuilder:
        self.unclean_shutdown_replicas = list(replicas)
        return self

    def set_election(self, election: Election) -> PartitionChangeBuilder:
        self.election = election
        return self

    def set_target_leader_recovery_state(self, state: int) -> PartitionChangeBuilder:
        self.target_leader_recovery_state = state
        return self

    def set_use_last_known_leader_in_balanced_recovery(self, value: bool) -> PartitionChangeBuilder:
        self.use_last_known_leader_in_balanced_recovery = value
        return self

    # -- election -----------------------------------------------------------------------------------

    def elect_leader(self) -> ElectionResult:
        """Kafka's ``electLeader``."""
        if self.election is Election.PREFERRED:
            return self._elect_preferred_leader()
        return self._elect_any_leader()

    def _elect_preferred_leader(self) -> ElectionResult:
        preferred = self.target_replicas[0]
        if self._is_valid_new_leader(preferred):
            return ElectionResult(preferred, False)
        if self._is_valid_new_leader(self.partition.leader):
            return ElectionResult(self.partition.leader, False)
        for replica in self.target_replicas[1:]:
            if self._is_valid_new_leader(replica):
                return ElectionResult(replica, False)
        if self._can_elect_last_known_leader():
            return ElectionResult(self.partition.last_known_elr[0], True)
        return ElectionResult(NO_LEADER, False)

    def _elect_any_leader(self) -> ElectionResult:
        if self._is_valid_new_leader(self.partition.leader):
            return ElectionResult(self.partition.leader, False)
        for replica in self.target_replicas:
            if self._is_valid_new_leader(replica):
                return ElectionResult(replica, False)
        if self._can_elect_last_known_leader():
            return ElectionResult(self.partition.last_known_elr[0], True)
        if self.election is Election.UNCLEAN:
            for replica in self.target_replicas:
                if self.is_acceptable_leader(replica):
                    return ElectionResult(replica, True)
        return ElectionResult(NO_LEADER, False)

    def _can_elect_last_known_leader(self) -> bool:
        if not self.eligible_leader_replicas_enabled or not self.use_last_known_leader_in_balanced_recovery:
            return False
        if self.target_elr or self.target_isr:
            return False
        # With the balanced-recovery flag LastKnownElr holds the last leader only; more members
        # mean it was written without the flag and names no single leader.
        if len(self.partition.last_known_elr) != 1:
            return False
        return self.is_acceptable_leader(self.partition.last_known_elr[0])

    def _is_valid_new_leader(self, replica: int) -> bool:
        # The ELR counts only while the target ISR is empty (KIP-966), whatever the feature level.
        return (replica in self.target_isr or (not self.target_isr and replica in self.target_elr)) \
            and self.is_acceptable_leader(replica)

    def _try_election(self, record: dict[str, object]) -> None:
        result = self.elect_leader()
        if result.node == self.partition.leader:
            return
        if result.node in self.target_elr:
            self.target_isr = [result.node]
            self.target_elr = [r for r in self.target_elr if r != result.node]
        record["leader"] = result.node
        if result.unclean:
            # Forcibly the new leader alone: this can lose data.
            record["isr"] = [result.node]
            if self.partition.leader_recovery_state != LEADER_RECOVERY_RECOVERING:
                record["leader_recovery_state"] = LEADER_RECOVERY_RECOVERING

    # -- the record ---------------------------------------------------------------------------------

    def _trigger_leader_epoch_bump_for_replica_reassignment_if_needed(self, record: dict[str, object]) -> None:
        if record["leader"] != NO_LEADER_CHANGE:
            return
        if not set(self.partition.replicas) <= set(self.target_replicas):
            record["leader"] = self.partition.leader

    def _trigger_leader_epoch_bump_for_isr_shrink_if_needed(self, record: dict[str, object]) -> None:
        if not self.leader_epoch_bump_on_isr_shrink or record["leader"] != NO_LEADER_CHANGE:
            return
        isr = record["isr"]
        if isinstance(isr, list) and not set(self.partition.isr) <= set(isr):
            record["leader"] = self.partition.leader

    def _maybe_populate_target_elr(self) -> None:
        if not self.eligible_leader_replicas_enabled:
            return
        if len(self.target_isr) >= self.min_isr:
            self.target_elr = []
            self.target_last_known_elr = []
            return
        # ELR: (ELR + current ISR) - target ISR - unclean shutdowns; LastKnownElr: that set plus
        # LastKnownElr, less the target ISR and the new ELR. Both in HashSet order.
        initial = list(self.target_elr)
        candidates = java_hash_set_order(initial, self.partition.isr)
        unclean = self.unclean_shutdown_replicas or []
        self.target_elr = [r for r in candidates if r not in self.target_isr and r not in unclean]
        candidates = java_hash_set_order(initial, [*self.partition.isr, *self.target_last_known_elr])
        self.target_last_known_elr = [r for r in candidates
                                      if r not in self.target_isr and r not in self.target_elr]

    def _maybe_update_record_elr(self, record: dict[str, object]) -> None:
        clean = record["isr"] is None  # an unclean election has already set the ISR
        if not clean or not self.eligible_leader_replicas_enabled:
            self.target_elr = []
            self.target_last_known_elr = []
        if self.target_elr != list(self.partition.elr):
            record["eligible_leader_replicas"] = list(self.target_elr)
        leader = record["leader"]
        if self.use_last_known_leader_in_balanced_recovery and len(self.partition.last_known_elr) == 1 and (
                leader == NO_LEADER or (leader == NO_LEADER_CHANGE and self.partition.leader == NO_LEADER)):
            # LastKnownElr holds the last leader: it stays while the partition has none.
            self.target_last_known_elr = list(self.partition.last_known_elr)
        if self.use_last_known_leader_in_balanced_recovery:
            return  # _maybe_update_last_known_leader writes it
        if self.target_last_known_elr != list(self.partition.last_known_elr):
            record["last_known_elr"] = list(self.target_last_known_elr)

    def _maybe_update_last_known_leader(self, record: dict[str, object]) -> None:
        if not self.use_last_known_leader_in_balanced_recovery or not self.eligible_leader_replicas_enabled:
            return
        leader = record["leader"]
        assert isinstance(leader, int)
        if leader == NO_LEADER and not self.partition.last_known_elr:
            # The first time the partition becomes leaderless: remember who led.
            record["last_known_elr"] = [self.partition.leader]
        elif leader >= 0 and self.partition.last_known_elr:
            record["last_known_elr"] = []

    def _set_assignment_changes(self, record: dict[str, object]) -> None:
        if self.target_replicas and self.target_replicas != list(self.partition.replicas):
            record["replicas"] = list(self.target_replicas)
        if self.target_removing != list(self.partition.removing_replicas):
            record["removing_replicas"] = list(self.target_removing)
        if self.target_adding != list(self.partition.adding_replicas):
            record["adding_replicas"] = list(self.target_adding)

    def build(self) -> PartitionChangeRecord | None:
        """Kafka's ``build``: the PartitionChangeRecord, or None when it would be a no-op."""
        record: dict[str, object] = {"isr": None, "leader": NO_LEADER_CHANGE, "replicas": None,
                                     "removing_replicas": None, "adding_replicas": None,
                                     "leader_recovery_state": LEADER_RECOVERY_NO_CHANGE,
                                     "eligible_leader_replicas": None, "last_known_elr": None}
        self._maybe_populate_target_elr()
        self._try_election(record)
        self._trigger_leader_epoch_bump_for_replica_reassignment_if_needed(record)
        self._maybe_update_record_elr(record)
        # An empty ISR is written only with ELR on; off, the last member stays in it.
        if record["isr"] is None and (self.target_isr or self.eligible_leader_replicas_enabled) \
                and self.target_isr != list(self.partition.isr):
            record["isr"] = list(self.target_isr)
        self._trigger_leader_epoch_bump_for_isr_shrink_if_needed(record)
        self._maybe_update_last_known_leader(record)
        self._set_assignment_changes(record)
        if self.target_leader_recovery_state != self.partition.leader_recovery_state:
            record["leader_recovery_state"] = self.target_leader_recovery_state
        if record["leader"] == NO_LEADER_CHANGE and record["leader_recovery_state"] == LEADER_RECOVERY_NO_CHANGE \
                and all(record[k] is None for k in ("isr", "replicas", "removing_replicas", "adding_replicas",
                                                    "eligible_leader_replicas", "last_known_elr")):
            return None
        return PartitionChangeRecord(partition_id=self.partition_id, topic_id=self.topic_id, **record)  # type: ignore[arg-type]


def elect_leader(reg: PartitionRegistration, topic_id: uuid.UUID, partition: int, *, acceptable: Acceptable,
                 elr_enabled: bool, unclean: bool, min_isr: int = 1) -> PartitionChangeRecord | None:
    """The change an election writes for a partition that has no leader (or an unacceptable
    one), its ISR as it stands: Kafka's handleBrokerUnfenced path (``generateLeaderAndIsrUpdates``
    with no broker to remove; ``Election.UNCLEAN`` when the topic allows it). None if nothing changes."""
    builder = PartitionChangeBuilder(reg, topic_id, partition, acceptable, min_isr, elr_enabled)
    return builder.set_election(Election.UNCLEAN if unclean else Election.ONLINE).build()


def remove_from_isr(reg: PartitionRegistration, topic_id: uuid.UUID, partition: int, broker: int, *,
                    acceptable: Acceptable, elr_enabled: bool, min_isr: int,
                    unclean: bool = False) -> PartitionChangeRecord | None:
    """Controlled shutdown (or fencing) of ``broker``: Kafka's ``generateLeaderAndIsrUpdates``
    with it as the broker to remove, which visits the partitions whose ISR holds it and sets the
    target ISR to the ISR without it. ``acceptable`` must already refuse ``broker``. With ELR off
    the builder does not write an emptied ISR, so the last member stays (and loses leadership)."""
    if broker not in reg.isr:
        return None
    builder = PartitionChangeBuilder(reg, topic_id, partition, acceptable, min_isr, elr_enabled)
    builder.set_election(Election.UNCLEAN if unclean else Election.ONLINE)
    return builder.set_target_isr([r for r in reg.isr if r != broker]).build()


def shutdown_change(reg: PartitionRegistration, topic_id: uuid.UUID, partition: int, broker: int, *,
                    acceptable: Acceptable, elr_enabled: bool, min_isr: int, unclean: bool,
                    unclean_shutdown: bool) -> PartitionChangeRecord | None:
    """One partition of Kafka 4.3.1's ``ReplicationControlManager.handleBrokerShutdown`` (run
    when a broker registers with a new incarnation): ``generateLeaderAndIsrUpdates`` with the
    target ISR the ISR without ``broker``. ``unclean_shutdown`` is its
    ``handleBrokerUncleanShutdown`` form (ELR on, no clean-shutdown marker): ``broker`` is the
    ``brokerWithUncleanShutdown``, so it also leaves the ELR (``setUncleanShutdownReplicas``).
    ``acceptable`` must already refuse ``broker`` (Kafka's predicate excludes it in both forms)."""
    builder = PartitionChangeBuilder(reg, topic_id, partition, acceptable, min_isr, elr_enabled)
    if unclean:
        builder.set_election(Election.UNCLEAN)
    if unclean_shutdown:
        builder.set_unclean_shutdown_replicas([broker])
    return builder.set_target_isr([r for r in reg.isr if r != broker]).build()
