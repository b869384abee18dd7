"""Leader election and ISR/ELR changes of one partition (Kafka's ``PartitionChangeBuilder``).

The controller calls these with the committed image and gets back the
:class:`PartitionChangeRecord` to append, or None when nothing changes:

* :func:`elect_leader` — a partition whose leader is missing (-1) or not acceptable (fenced,
  unregistered, in controlled shutdown) gets one: the first acceptable replica of the ISR in
  replica order; else the first acceptable replica of the ELR (KIP-966: it left the ISR cleanly,
  so it holds every committed record; the new ISR is that replica alone); else, only when unclean election is allowed, any acceptable
  replica (leader recovery state RECOVERING). Otherwise the leader is -1.
* :func:`remove_from_isr` — controlled shutdown of a broker: it leaves the ISR (unless it is the
  last member and ELR is off: Kafka then keeps the ISR and only drops the leader); a new leader is
  elected among the rest. With ELR on, replicas that leave the ISR while it is below
  ``min.insync.replicas`` join the ELR, and when the ISR empties the last leader is remembered
  in ``LastKnownElr`` (Kafka's ``maybeUpdateLastKnownLeader``).

With ``eligible.leader.replicas.version`` off (downgraded to 0) Kafka 4.3.1's builder stops
maintaining the ELR but still elects from one a partition holds, and each change it writes
empties that ELR (LastKnownElr is left as it is); the downgrade itself writes only the
FeatureLevelRecord, no ClearElrRecord (read from Kafka 4.3.1's PartitionChangeBuilder and
ConfigurationControlManager bytecode).

Acceptable leader (Kafka's ``isAcceptableLeader``): registered, unfenced, not in controlled shutdown.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from strom.core.metadata.image import PartitionRegistration
from strom.core.metadata.records import PartitionChangeRecord

NO_LEADER = -1
NO_LEADER_CHANGE = -2
LEADER_RECOVERY_RECOVERING = 1

Acceptable = Callable[[int], bool]


def _ordered(reg: PartitionRegistration, members: set[int]) -> list[int]:
    """``members`` in replica order (Kafka keeps ISR/ELR lists in that order)."""
    return [r for r in reg.replicas if r in members]


def _target_elr(reg: PartitionRegistration, new_isr: list[int], min_isr: int, clean: Acceptable) -> list[int]:
    """Kafka's ``populateTargetElr``: below min ISR, the replicas that left the ISR cleanly join the ELR."""
    if len(new_isr) >= min_isr:
        return []
    candidates = (set(reg.elr) | set(reg.isr)) - set(new_isr)
    return _ordered(reg, {r for r in candidates if clean(r)})


def _build(reg: PartitionRegistration, topic_id: uuid.UUID, partition: int, *, leader: int,
           isr: list[int], elr: list[int] | None, elr_enabled: bool,
           recovering: bool = False) -> PartitionChangeRecord | None:
    """The record that moves ``reg`` to the target leader / ISR / ELR; None if nothing changes."""
    record_isr = isr if tuple(isr) != reg.isr else None
    record_leader = leader if leader != reg.leader else NO_LEADER_CHANGE
    record_elr: list[int] | None = None
    last_known: list[int] | None = None
    if elr_enabled:
        if elr is not None and tuple(elr) != reg.elr:
            record_elr = elr
        # Kafka's maybeUpdateLastKnownLeader: remember the leader the first time the ISR empties;
        # forget it once the partition has a leader again.
        if record_isr is not None and not record_isr and reg.last_known_elr != (reg.leader,) \
                and reg.leader != NO_LEADER:
            last_known = [reg.leader]
        elif (leader >= 0 or (reg.leader != NO_LEADER and record_leader != NO_LEADER)) and reg.last_known_elr:
            last_known = []
    elif reg.elr:
        # Kafka's maybeUpdateRecordElr with the feature off (eligible.leader.replicas.version 0,
        # e.g. after a downgrade): the partition's next change empties its ELR. LastKnownElr is
        # left as it is (Kafka 4.3 builds with useLastKnownLeaderInBalancedRecovery on, which
        # returns before touching it).
        record_elr = []
    if record_isr is None and record_leader == NO_LEADER_CHANGE and record_elr is None and last_known is None:
        return None
    if record_leader >= 0 and record_elr is None and elr_enabled and reg.elr and record_leader in reg.elr:
        record_elr = [r for r in reg.elr if r != record_leader]
    if elr_enabled and (record_elr is not None or last_known is not None):
        # Kafka writes both ELR fields together (an unchanged one as its current value).
        record_elr = list(reg.elr) if record_elr is None else record_elr
        last_known = list(reg.last_known_elr) if last_known is None else last_known
    return PartitionChangeRecord(
        partition_id=partition, topic_id=topic_id, isr=record_isr, leader=record_leader,
        leader_recovery_state=LEADER_RECOVERY_RECOVERING if recovering else -1,
        eligible_leader_replicas=record_elr, last_known_elr=last_known)


def elect_leader(reg: PartitionRegistration, topic_id: uuid.UUID, partition: int, *, acceptable: Acceptable,
                 elr_enabled: bool, unclean: bool) -> PartitionChangeRecord | None:
    """A leader for a partition that has none (or an unacceptable one); None when it keeps its
    leader or no replica can lead."""
    if reg.leader >= 0 and acceptable(reg.leader) and reg.leader in reg.isr:
        return None
    isr = list(reg.isr)
    in_isr = [r for r in reg.replicas if r in reg.isr and acceptable(r)]
    if in_isr:
        return _build(reg, topic_id, partition, leader=in_isr[0], isr=isr, elr=None, elr_enabled=elr_enabled)
    # Kafka's isValidNewLeader takes the ELR as the partition holds it, with the feature on or
    # off: off, the builder only stops maintaining it, so an ELR left from before a downgrade
    # still elects (and the record empties it).
    in_elr = [r for r in reg.replicas if r in reg.elr and acceptable(r)]
    if in_elr:
        leader = in_elr[0]
        return _build(reg, topic_id, partition, leader=leader, isr=[leader],
                      elr=[r for r in reg.elr if r != leader], elr_enabled=elr_enabled)
    if unclean:
        anyone = [r for r in reg.replicas if acceptable(r)]
        if anyone:
            # Unclean: the new leader may lack committed records; ELR no longer means anything.
            return _build(reg, topic_id, partition, leader=anyone[0], isr=[anyone[0]], elr=[],
                          elr_enabled=elr_enabled, recovering=True)
    if reg.leader != NO_LEADER or (reg.elr and not elr_enabled):
        # Still no leader; with the feature off Kafka's builder writes the change anyway, to empty the ELR.
        return _build(reg, topic_id, partition, leader=NO_LEADER, isr=isr, elr=None, elr_enabled=elr_enabled)
    return None


def remove_from_isr(reg: PartitionRegistration, topic_id: uuid.UUID, partition: int, broker: int, *,
                    acceptable: Acceptable, elr_enabled: bool, min_isr: int) -> PartitionChangeRecord | None:
    """Controlled shutdown of ``broker``: out of the ISR and leadership (Kafka's
    ``handleBrokerInControlledShutdown``); None if it is neither leader nor in the ISR."""
    if broker not in reg.isr and reg.leader != broker:
        return None
    new_isr = [r for r in reg.isr if r != broker]
    if not new_isr and not elr_enabled:
        new_isr = list(reg.isr)  # Kafka never empties the ISR without ELR: the last member stays
    leader = reg.leader
    if leader == broker or (leader >= 0 and not acceptable(leader)):
        others = [r for r in reg.replicas if r in new_isr and r != broker and acceptable(r)]
        leader = others[0] if others else NO_LEADER
    # The broker shuts down cleanly: it may join the ELR (an unclean one would not).
    elr = _target_elr(reg, new_isr, min_isr, clean=lambda r: True) if elr_enabled else None
    return _build(reg, topic_id, partition, leader=leader, isr=new_isr, elr=elr, elr_enabled=elr_enabled)
