"""strom's PartitionChangeBuilder writes the record Kafka 4.3.1's own builder writes: every case
of partition_change_cases.py (Kafka's PartitionChangeBuilderTest) and 400 seeded random
partitions (replicas among 1-4, 17, 18, 33 so the ELR's HashSet order is not the sorted order;
ISR, ELR, LastKnownElr, acceptable brokers, min ISR, the ELR feature, the election, a target ISR,
unclean-shutdown replicas, balanced recovery on/off) run through
``org.apache.kafka.controller.PartitionChangeBuilder`` from the kafka-metadata jar
(KafkaPartitionChangeBuilder.java beside this file; one JVM, ~3 s).

Also 300 seeded partitions through strom's ``shutdown_change`` (the registration path's
``handleBrokerShutdown``, quorum_controller._broker_shutdown) against Kafka's builder set up as
4.3.1's ``generateLeaderAndIsrUpdates`` sets it for that path: the leader any acceptable broker
but the restarting one, UNCLEAN when the topic allows it, target ISR the ISR without it and,
for ``handleBrokerUncleanShutdown``, it as the unclean-shutdown replica."""

from __future__ import annotations

import random
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from kafka_ref import classpath, jars_present
from partition_change_cases import CASES, TID, Case, builder

from strom.core.controller.partition_change import shutdown_change
from strom.core.metadata.image import PartitionRegistration
from strom.core.metadata.records import PartitionChangeRecord
from strom.core.testing import java_problem

pytestmark = pytest.mark.reference

JAVA_PROGRAM = Path(__file__).with_name("KafkaPartitionChangeBuilder.java")
IDS = (1, 2, 3, 4, 17, 18, 33)


def _random_cases(n: int, seed: int = 966) -> list[Case]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        replicas = tuple(rnd.sample(IDS, rnd.randint(1, 5)))

        def sub(replicas: tuple[int, ...] = replicas) -> tuple[int, ...]:
            return tuple(r for r in replicas if rnd.random() < 0.4)
        isr = sub()
        elr = tuple(r for r in sub() if r not in isr)
        leader = rnd.choice([-1, *isr]) if isr else -1
        lke_options: list[tuple[int, ...]] = [(), (), (rnd.choice(replicas),), sub()]
        case = Case(f"random-{i}", replicas, isr, leader, tuple(r for r in IDS if rnd.random() < 0.5),
                    rnd.randint(1, 3), None, elr=elr, last_known_elr=rnd.choice(lke_options),
                    recovery=rnd.choice([0, 0, 1]), elr_enabled=rnd.random() < 0.7,
                    election=rnd.choice(["ONLINE", "ONLINE", "UNCLEAN", "PREFERRED"]),
                    target_isr=rnd.choice([None, sub()]), unclean_shutdown=rnd.choice([None, None, sub()]),
                    last_known_leader=rnd.random() < 0.8)
        out.append(case)
    return out


def _shutdown_cases(n: int, seed: int = 4331) -> list[tuple[Case, int, bool]]:
    """(Kafka-side case, the restarting broker, unclean shutdown) for partitions holding it."""
    rnd = random.Random(seed)
    out: list[tuple[Case, int, bool]] = []
    while len(out) < n:
        replicas = tuple(rnd.sample(IDS, rnd.randint(1, 5)))
        isr = tuple(r for r in replicas if rnd.random() < 0.6)
        elr = tuple(r for r in replicas if r not in isr and rnd.random() < 0.5)
        holders = [*isr, *elr]
        if not holders:
            continue
        broker = rnd.choice(holders)
        leader = rnd.choice([-1, *isr, *([broker] * 3 if broker in isr else [])]) if isr else -1
        elr_enabled = rnd.random() < 0.75
        unclean_shutdown = elr_enabled and rnd.random() < 0.7
        case = Case(f"shutdown-{len(out)}", replicas, isr, leader,
                    tuple(r for r in IDS if r != broker and rnd.random() < 0.5), rnd.randint(1, 3), None,
                    elr=elr, last_known_elr=rnd.choice([(), (), (rnd.choice(replicas),), elr]),
                    recovery=rnd.choice([0, 0, 1]), elr_enabled=elr_enabled,
                    election=rnd.choice(["ONLINE", "UNCLEAN"]), target_isr=tuple(r for r in isr if r != broker),
                    unclean_shutdown=(broker,) if unclean_shutdown else None)
        out.append((case, broker, unclean_shutdown))
    return out


SHUTDOWN_CASES = _shutdown_cases(300)

ALL_CASES = [*CASES, *(replace(c, name=c.name + "/elr-flip", elr_enabled=not c.elr_enabled) for c in CASES),
             *_random_cases(400)]


def _ints(values: tuple[int, ...] | None) -> str:
    if values is None:
        return "-"
    return ",".join(map(str, values)) or "x"


def _show(values: list[int] | None) -> str:
    if values is None:
        return "null"
    return ",".join(map(str, values)) or "x"


def _render(record: PartitionChangeRecord | None) -> str:
    if record is None:
        return "none"
    return (f"isr={_show(record.isr)} leader={record.leader} elr={_show(record.eligible_leader_replicas)} "
            f"lke={_show(record.last_known_elr)} lrs={record.leader_recovery_state} replicas={_show(record.replicas)}")


@pytest.fixture(scope="module")
def kafka_records() -> dict[str, str]:
    problem = java_problem()
    if problem is not None:
        pytest.skip(f"Kafka's PartitionChangeBuilder needs Java: {problem}")
    if not jars_present():
        pytest.skip("Kafka 4.3.1's jars are not in .cache/kafka-ref (scripts/kafka_ref/fetch.sh)")
    lines = [" ".join([c.name, _ints(c.replicas), _ints(c.isr), str(c.leader), _ints(c.elr), _ints(c.last_known_elr),
                       str(c.recovery), _ints(c.acceptable), str(c.min_isr), str(c.elr_enabled).lower(), c.election,
                       _ints(c.target_isr), _ints(c.unclean_shutdown), str(c.last_known_leader).lower()])
             for c in [*ALL_CASES, *(c for c, _, _ in SHUTDOWN_CASES)]]
    done = subprocess.run(["java", "-Xmx128m", "-cp", classpath(), str(JAVA_PROGRAM)], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"KafkaPartitionChangeBuilder.java failed: {done.stderr[-3000:]}"
    return dict(line.split(" ", 1) for line in done.stdout.splitlines())


def test_kafka_writes_what_its_test_expects(kafka_records: dict[str, str]) -> None:
    """The table's expectations (from Kafka's older test source) hold for the 4.3.1 jar."""
    for case in CASES:
        expected = None if case.expected is None else PartitionChangeRecord(
            partition_id=0, topic_id=TID, **case.expected)  # type: ignore[arg-type]
        assert kafka_records[case.name] == _render(expected), case.name


def test_strom_writes_what_kafka_writes(kafka_records: dict[str, str]) -> None:
    assert len(kafka_records) == len(ALL_CASES) + len(SHUTDOWN_CASES)
    differ = [(c.name, kafka_records[c.name], _render(builder(c).build())) for c in ALL_CASES
              if kafka_records[c.name] != _render(builder(c).build())]
    assert not differ, f"{len(differ)} of {len(ALL_CASES)} differ, e.g. {differ[:5]}"


def test_registration_shutdown_writes_what_kafka_writes(kafka_records: dict[str, str]) -> None:
    assert sum(1 for _, _, unclean in SHUTDOWN_CASES if unclean) > 100  # both forms are covered
    differ = []
    for c, broker, unclean_shutdown in SHUTDOWN_CASES:
        reg = PartitionRegistration(c.replicas, c.isr, c.leader, 100, 200, leader_recovery_state=c.recovery,
                                    elr=c.elr, last_known_elr=c.last_known_elr)
        acceptable = frozenset(c.acceptable)
        got = _render(shutdown_change(reg, TID, 0, broker, acceptable=acceptable.__contains__,
                                      elr_enabled=c.elr_enabled, min_isr=c.min_isr, unclean=c.election == "UNCLEAN",
                                      unclean_shutdown=unclean_shutdown))
        if got != kafka_records[c.name]:
            differ.append((c, kafka_records[c.name], got))
    assert not differ, f"{len(differ)} of {len(SHUTDOWN_CASES)} differ, e.g. {differ[:3]}"
