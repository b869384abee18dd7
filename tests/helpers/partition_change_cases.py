"""Cases of Kafka's PartitionChangeBuilderTest (Kafka's test names in each case's name and comment),
shared by the unit table test and the reference test that runs Kafka 4.3.1's own builder."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from strom.core.controller.partition_change import Election, PartitionChangeBuilder
from strom.core.metadata.image import PartitionRegistration

TID = uuid.UUID(int=7)
ALL = (1, 2, 3, 4, 5)
NOT_3 = (1, 2, 4, 5)  # Kafka's ``r -> r != 3``


@dataclass(frozen=True)
class Case:
    """A partition, the builder's settings and the record Kafka's test expects (None: no change)."""

    name: str
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    acceptable: tuple[int, ...]
    min_isr: int
    expected: dict[str, object] | None
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    recovery: int = 0
    elr_enabled: bool = True
    election: str = "ONLINE"
    target_isr: tuple[int, ...] | None = None
    unclean_shutdown: tuple[int, ...] | None = None
    last_known_leader: bool = True  # setUseLastKnownLeaderInBalancedRecovery
    extra: dict[str, object] = field(default_factory=dict)


def foo(name: str, expected: dict[str, object] | None, **kw: object) -> Case:
    """Kafka's FOO partition and createFooBuilder: replicas [2,1,3], ISR [2,1,3], leader 1, min ISR 2, r != 3."""
    return Case(name, (2, 1, 3), (2, 1, 3), 1, NOT_3, 2, expected, **kw)  # type: ignore[arg-type]


def baz(name: str, expected: dict[str, object] | None, **kw: object) -> Case:
    """Kafka's BAZ partition: replicas [2,1,3], ISR [1,3], leader 3, every broker acceptable."""
    return Case(name, (2, 1, 3), (1, 3), 3, ALL, 2, expected, **kw)  # type: ignore[arg-type]


def offline_with_elr(name: str, expected: dict[str, object] | None, **kw: object) -> Case:
    """Kafka's OFFLINE_WITH_ELR: replicas [2,1,3], ISR [], ELR [3], LastKnownElr [2], no leader; only 1 acceptable."""
    return Case(name, (2, 1, 3), (), -1, (1,), 2, expected, elr=(3,), last_known_elr=(2,), **kw)  # type: ignore[arg-type]


def offline_without_elr(name: str, expected: dict[str, object] | None, **kw: object) -> Case:
    """Kafka's OFFLINE_WITHOUT_ELR: replicas [2,1,3], ISR [3], no leader; only 1 acceptable; ELR off."""
    return Case(name, (2, 1, 3), (3,), -1, (1,), 2, expected, elr_enabled=False, **kw)  # type: ignore[arg-type]


def four(name: str, isr: tuple[int, ...], leader: int, acceptable: tuple[int, ...], expected: dict[str, object] | None,
         **kw: object) -> Case:
    """The partitions of Kafka's testEligibleLeaderReplicas_*: replicas [1,2,3,4], min ISR 3."""
    return Case(name, (1, 2, 3, 4), isr, leader, acceptable, 3, expected, **kw)  # type: ignore[arg-type]


CASES: list[Case] = [
    # testNoChange
    foo("testNoChange/foo", None),
    foo("testNoChange/foo-unclean", None, election="UNCLEAN"),
    baz("testNoChange/baz-preferred", None, election="PREFERRED"),
    # testIsrChangeDoesntBumpLeaderEpoch
    foo("testIsrChangeDoesntBumpLeaderEpoch", {"isr": [2, 1]}, target_isr=(2, 1)),
    # testIsrChangeAndLeaderChange
    foo("testIsrChangeAndLeaderChange", {"isr": [2, 3], "leader": 2}, target_isr=(2, 3)),
    # testElectLeader, as the records build() writes for each election
    foo("testElectLeader/preferred", {"leader": 2}, election="PREFERRED"),
    foo("testElectLeader/isr-1-3", {"isr": [1, 3]}, target_isr=(1, 3)),
    foo("testElectLeader/unclean-isr-1-3", {"isr": [1, 3]}, target_isr=(1, 3), election="UNCLEAN"),
    # ISR [3] and 3 cannot lead: NO_LEADER, although 1 and 2 (the ELR now) are acceptable.
    foo("testElectLeader/isr-3", {"isr": [3], "leader": -1, "eligible_leader_replicas": [1, 2],
                                  "last_known_elr": [1]}, target_isr=(3,)),
    foo("testElectLeader/isr-3-elr-off", {"isr": [3], "leader": -1}, target_isr=(3,), elr_enabled=False),
    foo("testElectLeader/unclean-isr-3", {"isr": [2], "leader": 2, "leader_recovery_state": 1},
        target_isr=(3,), election="UNCLEAN"),
    baz("testElectLeader/baz-unclean", None, election="UNCLEAN"),
    # testUncleanLeaderElection
    foo("testUncleanLeaderElection/foo", {"isr": [2], "leader": 2, "leader_recovery_state": 1},
        target_isr=(3,), election="UNCLEAN"),
    offline_with_elr("testUncleanLeaderElection/offline", {"isr": [1], "leader": 1, "leader_recovery_state": 1,
                                                           "eligible_leader_replicas": [], "last_known_elr": []},
                     election="UNCLEAN"),
    offline_with_elr("testUncleanLeaderElection/offline-isr-2", {"isr": [1], "leader": 1, "leader_recovery_state": 1,
                                                                 "eligible_leader_replicas": [], "last_known_elr": []},
                     election="UNCLEAN", target_isr=(2,)),
    offline_without_elr("testUncleanLeaderElection/offline-v0", {"isr": [1], "leader": 1, "leader_recovery_state": 1},
                        election="UNCLEAN"),
    # The same partitions without unclean election: nobody may lead.
    offline_with_elr("testUncleanLeaderElection/offline-online", None),
    offline_without_elr("testUncleanLeaderElection/offline-v0-online", None),
    # testChangeInLeadershipDoesNotChangeRecoveryState (ELR off, as that test builds)
    Case("testChangeInLeadershipDoesNotChangeRecoveryState/offline", (1, 2, 3), (1,), 1, (), 2, {"leader": -1},
         recovery=1, elr_enabled=False, target_isr=()),
    Case("testChangeInLeadershipDoesNotChangeRecoveryState/online", (1, 2, 3), (1,), -1, ALL, 2, {"leader": 1},
         recovery=1, elr_enabled=False),
    # testEligibleLeaderReplicas_IsrShrinkBelowMinISR
    four("testEligibleLeaderReplicas_IsrShrinkBelowMinISR", (1, 2, 3, 4), 1, (1, 2, 4),
         {"isr": [1, 2], "eligible_leader_replicas": [3, 4]}, election="PREFERRED", target_isr=(1, 2),
         last_known_leader=False),
    four("testEligibleLeaderReplicas_IsrShrinkBelowMinISR/elr-off", (1, 2, 3, 4), 1, (1, 2, 4), {"isr": [1, 2]},
         election="PREFERRED", target_isr=(1, 2), last_known_leader=False, elr_enabled=False),
    # testEligibleLeaderReplicas_IsrExpandAboveMinISR (both versions empty both fields)
    four("testEligibleLeaderReplicas_IsrExpandAboveMinISR", (1, 2), 1, (1, 2, 4),
         {"isr": [1, 2, 3], "eligible_leader_replicas": [], "last_known_elr": []}, elr=(3,), last_known_elr=(4,),
         election="PREFERRED", target_isr=(1, 2, 3), last_known_leader=False),
    four("testEligibleLeaderReplicas_IsrExpandAboveMinISR/elr-off", (1, 2), 1, (1, 2, 4),
         {"isr": [1, 2, 3], "eligible_leader_replicas": [], "last_known_elr": []}, elr=(3,), last_known_elr=(4,),
         election="PREFERRED", target_isr=(1, 2, 3), last_known_leader=False, elr_enabled=False),
    # testEligibleLeaderReplicas_IsrAddNewMemberNotInELR
    four("testEligibleLeaderReplicas_IsrAddNewMemberNotInELR", (1,), 1, (1, 2, 4), {"isr": [1, 4]},
         elr=(3,), last_known_elr=(2,), election="PREFERRED", target_isr=(1, 4), last_known_leader=False),
    four("testEligibleLeaderReplicas_IsrAddNewMemberNotInELR/elr-off", (1,), 1, (1, 2, 4),
         {"isr": [1, 4], "eligible_leader_replicas": [], "last_known_elr": []}, elr=(3,), last_known_elr=(2,),
         election="PREFERRED", target_isr=(1, 4), last_known_leader=False, elr_enabled=False),
    # testEligibleLeaderReplicas_RemoveUncleanShutdownReplicasFromElr
    four("testEligibleLeaderReplicas_RemoveUncleanShutdownReplicasFromElr", (1,), 1, (1, 2, 4),
         {"eligible_leader_replicas": [2], "last_known_elr": [3]}, elr=(2, 3), election="PREFERRED",
         unclean_shutdown=(3,), last_known_leader=False),
    four("testEligibleLeaderReplicas_RemoveUncleanShutdownReplicasFromElr/elr-off", (1,), 1, (1, 2, 4),
         {"eligible_leader_replicas": []}, elr=(2, 3), election="PREFERRED", unclean_shutdown=(3,),
         last_known_leader=False, elr_enabled=False),
    # testEligibleLeaderReplicas_ElrCanBeElected (lastKnownLeaderEnabled true / false)
    four("testEligibleLeaderReplicas_ElrCanBeElected/lkl", (1,), 1, (2, 3, 4),
         {"isr": [3], "leader": 3, "eligible_leader_replicas": [1]}, elr=(3,), election="PREFERRED", target_isr=()),
    four("testEligibleLeaderReplicas_ElrCanBeElected/no-lkl", (1,), 1, (2, 3, 4),
         {"isr": [3], "leader": 3, "eligible_leader_replicas": [1]}, elr=(3,), last_known_elr=(2,),
         election="PREFERRED", target_isr=(), last_known_leader=False),
    # testEligibleLeaderReplicas_IsrCanShrinkToZero (true / false), then its second builder
    four("testEligibleLeaderReplicas_IsrCanShrinkToZero/lkl", (1, 2, 3, 4), 1, (),
         {"isr": [], "leader": -1, "eligible_leader_replicas": [1, 2, 3, 4], "last_known_elr": [1]},
         election="PREFERRED", target_isr=()),
    four("testEligibleLeaderReplicas_IsrCanShrinkToZero/no-lkl", (1, 2, 3, 4), 1, (),
         {"isr": [], "leader": -1, "eligible_leader_replicas": [1, 2, 3, 4]},
         election="PREFERRED", target_isr=(), last_known_leader=False),
    four("testEligibleLeaderReplicas_IsrCanShrinkToZero/lkl-then-unclean-shutdown", (), -1, (),
         {"eligible_leader_replicas": [1, 3, 4]}, elr=(1, 2, 3, 4), last_known_elr=(1,), election="PREFERRED",
         unclean_shutdown=(2,)),
    # testEligibleLeaderReplicas_ElectLastKnownLeader
    four("testEligibleLeaderReplicas_ElectLastKnownLeader", (), -1, ALL,
         {"isr": [1], "leader": 1, "leader_recovery_state": 1, "last_known_elr": []}, last_known_elr=(1,),
         election="PREFERRED", target_isr=()),
    # testEligibleLeaderReplicas_ElectLastKnownLeaderShouldFail
    four("testEligibleLeaderReplicas_ElectLastKnownLeaderShouldFail", (), -1, (1, 2, 4), None, elr=(3,),
         last_known_elr=(1,), election="PREFERRED", target_isr=()),
    # Kafka 4.3.1's canElectLastKnownLeader also refuses a last known leader that cannot lead
    # (the 2024 source only logged it); read from the kafka-metadata-4.3.1 jar.
    four("canElectLastKnownLeader/not-acceptable", (), -1, (2, 3, 4), None, last_known_elr=(1,),
         election="PREFERRED", target_isr=()),
    # ONLINE: the ELR leads only once the ISR is empty; an ISR whose members cannot lead keeps it out.
    Case("electAnyLeader/isr-cannot-lead-elr-waits", (1, 2, 3), (3,), 3, (1, 2), 2,
         {"leader": -1, "last_known_elr": [3]}, elr=(1,)),
    Case("electAnyLeader/isr-empty-elr-leads", (1, 2, 3), (), -1, (1, 2), 2,
         {"isr": [1], "leader": 1, "eligible_leader_replicas": []}, elr=(1,)),
    Case("electAnyLeader/isr-cannot-lead-unclean", (1, 2, 3), (3,), 3, (1, 2), 2,
         {"isr": [1], "leader": 1, "leader_recovery_state": 1, "eligible_leader_replicas": []}, elr=(1,),
         election="UNCLEAN"),
    # eligible.leader.replicas.version 0 with an ELR left from before: it still leads, and is emptied.
    Case("isValidNewLeader/elr-off-leftover-elr", (1, 2), (), -1, (1,), 1,
         {"isr": [1], "leader": 1, "eligible_leader_replicas": []}, elr=(1,), elr_enabled=False),
]


def builder(case: Case) -> PartitionChangeBuilder:
    """strom's builder set up as the case says (partition epochs 100/200, as Kafka's test)."""
    reg = PartitionRegistration(case.replicas, case.isr, case.leader, 100, 200, leader_recovery_state=case.recovery,
                                elr=case.elr, last_known_elr=case.last_known_elr)
    b = PartitionChangeBuilder(reg, TID, 0, lambda r: r in case.acceptable, case.min_isr, case.elr_enabled)
    b.set_election(Election[case.election]).set_use_last_known_leader_in_balanced_recovery(case.last_known_leader)
    if case.target_isr is not None:
        b.set_target_isr(case.target_isr)
    if case.unclean_shutdown is not None:
        b.set_unclean_shutdown_replicas(case.unclean_shutdown)
    return b
