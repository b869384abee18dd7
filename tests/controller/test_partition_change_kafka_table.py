"""strom's PartitionChangeBuilder port against the cases of Kafka's own PartitionChangeBuilderTest
(tests/controller/partition_change_cases.py, one case per assertion, named after Kafka's test),
plus the ELR rule the port fixes: the ELR may lead only once the ISR is empty (KIP-966), so a
non-empty ISR whose members cannot lead leaves the partition leaderless (or to an unclean election)."""

from __future__ import annotations

import pytest
from partition_change_cases import CASES, TID, Case, builder

from strom.core.controller.partition_change import (
    ElectionResult,
    elect_leader,
    java_hash_set_order,
)
from strom.core.metadata.image import PartitionRegistration
from strom.core.metadata.records import PartitionChangeRecord

pytestmark = pytest.mark.unit

@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_record_as_kafkas_test_expects(case: Case) -> None:
    expected = None if case.expected is None else PartitionChangeRecord(partition_id=0, topic_id=TID,
                                                                         **case.expected)  # type: ignore[arg-type]
    assert builder(case).build() == expected


# testElectLeader: (builder, expected node, unclean) for each of Kafka's assertElectLeaderEquals.
FOO = dict(replicas=(2, 1, 3), isr=(2, 1, 3), leader=1, acceptable=(1, 2, 4, 5), min_isr=2, expected=None)
BAZ = dict(replicas=(2, 1, 3), isr=(1, 3), leader=3, acceptable=(1, 2, 3, 4, 5), min_isr=2, expected=None)
ELECT_LEADER = [
    (Case("foo-preferred", election="PREFERRED", **FOO), 2, False),  # type: ignore[arg-type]
    (Case("foo", **FOO), 1, False),  # type: ignore[arg-type]
    (Case("foo-unclean", election="UNCLEAN", **FOO), 1, False),  # type: ignore[arg-type]
    (Case("foo-isr-1-3", target_isr=(1, 3), **FOO), 1, False),  # type: ignore[arg-type]
    (Case("foo-unclean-isr-1-3", election="UNCLEAN", target_isr=(1, 3), **FOO), 1, False),  # type: ignore[arg-type]
    (Case("foo-isr-3", target_isr=(3,), **FOO), -1, False),  # type: ignore[arg-type]
    (Case("foo-unclean-isr-3", election="UNCLEAN", target_isr=(3,), **FOO), 2, True),  # type: ignore[arg-type]
    (Case("foo-unclean-isr-4", election="UNCLEAN", target_isr=(4,), **FOO), 4, False),  # type: ignore[arg-type]
    (Case("baz-preferred", election="PREFERRED", **BAZ), 3, False),  # type: ignore[arg-type]
    (Case("baz", **BAZ), 3, False),  # type: ignore[arg-type]
    (Case("baz-unclean", election="UNCLEAN", **BAZ), 3, False),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("case", "node", "unclean"), ELECT_LEADER, ids=[c.name for c, _, _ in ELECT_LEADER])
def test_elect_leader_as_kafkas_test_elect_leader(case: Case, node: int, unclean: bool) -> None:
    b = builder(case)
    if case.name == "foo-unclean-isr-4":
        b.set_target_replicas([2, 1, 3, 4])  # Kafka's .setTargetReplicas(Arrays.asList(2, 1, 3, 4))
    assert b.elect_leader() == ElectionResult(node, unclean)


def test_a_non_empty_isr_that_cannot_lead_keeps_the_elr_out() -> None:
    """The brief's case through the controller's entry point: ISR [3] (fenced), ELR [1] acceptable."""
    reg = PartitionRegistration((1, 2, 3), (3,), -1, 5, 5, elr=(1,))
    assert elect_leader(reg, TID, 0, acceptable=lambda r: r in (1, 2), elr_enabled=True, unclean=False,
                        min_isr=2) is None
    unclean = elect_leader(reg, TID, 0, acceptable=lambda r: r in (1, 2), elr_enabled=True, unclean=True, min_isr=2)
    assert unclean == PartitionChangeRecord(partition_id=0, topic_id=TID, isr=[1], leader=1, leader_recovery_state=1,
                                            eligible_leader_replicas=[])


@pytest.mark.parametrize(("initial", "added", "order"), [
    ((), (3, 1, 2), [1, 2, 3]),  # small ints: ascending
    ((17, 1), (33, 2), [17, 1, 33, 2]),  # 17 and 33 share bucket 1 with 1, in insertion order
    ((), range(20, 0, -1), list(range(1, 21))),  # 20 entries: the table grew to 32
    ((), (65536, 1), [65536, 1]),  # 65536 ^ (65536 >>> 16) = 65537: bucket 1, before 1
])
def test_java_hash_set_order(initial: tuple[int, ...], added: tuple[int, ...], order: list[int]) -> None:
    assert java_hash_set_order(initial, added) == order
