"""The controller's partition changes (Kafka's PartitionChangeBuilder) on registrations built by
hand: which replica leads, what the ISR and ELR become, and when nothing is written."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from strom.core.controller.partition_change import elect_leader, remove_from_isr
from strom.core.metadata.image import PartitionRegistration
from strom.core.metadata.records import PartitionChangeRecord

TID = uuid.UUID(int=7)


def reg(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int, elr: tuple[int, ...] = (),
        last_known: tuple[int, ...] = ()) -> PartitionRegistration:
    return PartitionRegistration(replicas, isr, leader, 3, 5, elr=elr, last_known_elr=last_known)


def up(*brokers: int) -> Callable[[int], bool]:
    """Brokers registered, unfenced and not shutting down."""
    return lambda b: b in brokers


def test_a_leader_that_is_acceptable_is_kept() -> None:
    assert elect_leader(reg((1, 2), (1, 2), 1), TID, 0, acceptable=up(1, 2), elr_enabled=True, unclean=False) is None


def test_isr_first_in_replica_order() -> None:
    change = elect_leader(reg((3, 2, 1), (1, 2), -1), TID, 0, acceptable=up(1, 2), elr_enabled=True, unclean=False)
    assert change == PartitionChangeRecord(partition_id=0, topic_id=TID, leader=2)


def test_elr_when_the_isr_has_no_acceptable_replica() -> None:
    change = elect_leader(reg((1, 2), (), -1, elr=(1, 2), last_known=(1,)), TID, 0, acceptable=up(2),
                          elr_enabled=True, unclean=False)
    assert change == PartitionChangeRecord(partition_id=0, topic_id=TID, isr=[2], leader=2,
                                           eligible_leader_replicas=[1], last_known_elr=[])


def test_an_elr_left_when_the_feature_is_off_still_leads_and_unclean_only_if_allowed() -> None:
    r = reg((1, 2), (), -1, elr=(1,))
    # Kafka 4.3.1's isValidNewLeader reads the partition's ELR whether the feature is on or not;
    # with it off the record empties the ELR (tests/metadata/test_elr_disabled.py).
    assert elect_leader(r, TID, 0, acceptable=up(1), elr_enabled=False, unclean=False) == PartitionChangeRecord(
        partition_id=0, topic_id=TID, isr=[1], leader=1, eligible_leader_replicas=[])
    unclean = elect_leader(reg((1, 2), (), -1), TID, 0, acceptable=up(2), elr_enabled=True, unclean=True)
    assert unclean == PartitionChangeRecord(partition_id=0, topic_id=TID, isr=[2], leader=2, leader_recovery_state=1)
    assert elect_leader(reg((1, 2), (), -1), TID, 0, acceptable=up(2), elr_enabled=True, unclean=False) is None


def test_a_fenced_leader_with_no_successor_leaves_no_leader() -> None:
    change = elect_leader(reg((1,), (1,), 1), TID, 0, acceptable=up(), elr_enabled=True, unclean=False)
    # Kafka 4.3.1's maybeUpdateLastKnownLeader: the leader becoming -1 records it as LastKnownElr
    assert change == PartitionChangeRecord(partition_id=0, topic_id=TID, leader=-1, last_known_elr=[1])


def test_controlled_shutdown_moves_leadership_to_the_isr() -> None:
    change = remove_from_isr(reg((1, 2, 3), (1, 2, 3), 1), TID, 0, 1, acceptable=up(2, 3), elr_enabled=True,
                             min_isr=2)
    assert change == PartitionChangeRecord(partition_id=0, topic_id=TID, isr=[2, 3], leader=2)


def test_controlled_shutdown_below_min_isr_keeps_the_broker_eligible() -> None:
    change = remove_from_isr(reg((1, 2), (1, 2), 2), TID, 0, 2, acceptable=up(1), elr_enabled=True, min_isr=2)
    assert change == PartitionChangeRecord(partition_id=0, topic_id=TID, isr=[1], leader=1,
                                           eligible_leader_replicas=[2])  # LastKnownElr untouched
    # Not in the ISR and not the leader: nothing to write.
    assert remove_from_isr(reg((1, 2), (1,), 1), TID, 0, 2, acceptable=up(1), elr_enabled=True, min_isr=1) is None
