"""strom's share-group SimpleAssignor gives the same target assignment as Kafka 4.3.1's own
``org.apache.kafka.coordinator.group.assignor.SimpleAssignor`` (run from KafkaSimpleAssignor.java
beside this file, on the group-coordinator jar under .cache/kafka-ref), member for member, over a
table of groups: 1-6 members joining one by one on 1-12 partitions, then one member leaving;
two topics all members subscribe to; heterogeneous subscriptions. Each step starts from the
previous step's target, as the coordinator does."""

from __future__ import annotations

import base64
import random
import subprocess
import uuid
from pathlib import Path

import pytest
from kafka_ref import classpath, jars_present

from strom.core.coordinator.share.assignor import SimpleAssignor
from strom.core.testing import java_problem

pytestmark = pytest.mark.reference  # one JVM run (~2 s)

JAVA_PROGRAM = Path(__file__).with_name("KafkaSimpleAssignor.java")
T = [uuid.UUID("5f1c2a3b-9d4e-4f60-8a71-b2c3d4e5f607"), uuid.UUID("0a1b2c3d-4e5f-4a6b-9c8d-7e6f5a4b3c2d"),
     uuid.UUID("c3d4e5f6-0718-4293-a4b5-c6d7e8f90a1b")]

# A case: name, partitions per topic, steps; a step lists (member, topic indices) in the group's order.
Step = list[tuple[str, tuple[int, ...]]]
Case = tuple[str, list[int], list[Step]]


def _member_ids(n: int, seed: int) -> list[str]:
    # Kafka's member ids are Uuid.randomUuid().toString(): 22 url-safe base64 characters.
    rng = random.Random(seed)
    return [base64.urlsafe_b64encode(rng.randbytes(16)).decode().rstrip("=") for _ in range(n)]


def _cases() -> list[Case]:
    cases: list[Case] = []
    for members in range(1, 7):
        for partitions in range(1, 13):
            ids = _member_ids(members, members * 100 + partitions)
            steps: list[Step] = [[(m, (0,)) for m in ids[:k]] for k in range(1, members + 1)]
            if members > 1:
                steps.append([(m, (0,)) for m in ids if m != ids[members // 2]])
            cases.append((f"single-{members}m-{partitions}p", [partitions], steps))
    for members, (p0, p1) in [(2, (3, 2)), (3, (4, 4)), (4, (2, 5)), (5, (1, 3))]:
        ids = _member_ids(members, 7000 + members)
        steps = [[(m, (0, 1)) for m in ids[:k]] for k in range(1, members + 1)]
        steps.append([(m, (0, 1)) for m in ids[1:]])
        cases.append((f"two-topics-{members}m-{p0}-{p1}", [p0, p1], steps))
    for members in (2, 3, 5):
        ids = _member_ids(members, 9000 + members)
        subs = [(0,), (0, 1), (1,), (0,), (1,)]
        steps = [[(m, subs[i]) for i, m in enumerate(ids[:k])] for k in range(1, members + 1)]
        steps.append([(m, subs[i]) for i, m in enumerate(ids) if i != 1])
        cases.append((f"hetero-{members}m", [4, 3], steps))
    # Seeded random groups: up to 8 members on up to 3 topics of up to 20 partitions (indices past
    # a small table's size), members joining, leaving and changing subscriptions.
    rng = random.Random(932)
    for c in range(40):
        counts = [rng.randint(1, 20) for _ in range(rng.randint(1, 3))]
        pool = _member_ids(8, 20000 + c)
        group: dict[str, tuple[int, ...]] = {}
        steps = []
        for _ in range(rng.randint(2, 7)):
            move = rng.random()
            if group and move < 0.25:
                del group[rng.choice(list(group))]
            elif group and move < 0.4:
                m = rng.choice(list(group))
                group[m] = tuple(sorted(rng.sample(range(len(counts)), rng.randint(1, len(counts)))))
            else:
                free = [m for m in pool if m not in group]
                if free:
                    group[free[0]] = tuple(sorted(rng.sample(range(len(counts)), rng.randint(1, len(counts)))))
            if group:
                steps.append(list(group.items()))
        cases.append((f"random-{c}", counts, steps))
    return cases


CASES = _cases()


def _render(assignment: dict[uuid.UUID, set[int]]) -> str:
    return "|".join(f"{T.index(t)}:{'.'.join(str(p) for p in sorted(ps))}"
                    for t, ps in sorted(assignment.items(), key=lambda kv: T.index(kv[0])) if ps)


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


@pytest.fixture(scope="module")
def kafka_targets() -> dict[tuple[str, int, str], str]:
    problem = java_problem()
    if problem is not None:
        pytest.skip(f"Kafka's SimpleAssignor needs Java: {problem}")
    if not jars_present():
        pytest.skip("Kafka 4.3.1's jars are not in .cache/kafka-ref (scripts/kafka_ref/fetch.sh)")
    lines: list[str] = []
    for name, counts, steps in CASES:
        lines.append(f"CASE {name}")
        for i, n in enumerate(counts):
            lines.append(f"TOPIC {_signed(T[i].int >> 64)} {_signed(T[i].int & ((1 << 64) - 1))} {n}")
        for step in steps:
            lines.append("STEP " + " ".join(f"{m}={','.join(map(str, ts))}" for m, ts in step))
    done = subprocess.run(["java", "-Xmx128m", "-cp", classpath(), str(JAVA_PROGRAM)], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"KafkaSimpleAssignor.java failed: {done.stderr[-3000:]}"
    out: dict[tuple[str, int, str], str] = {}
    for line in done.stdout.splitlines():
        name, step_no, member, *rest = line.split(" ")
        out[(name, int(step_no), member)] = rest[0] if rest else ""
    return out


def _strom_targets(counts: list[int], steps: list[Step]) -> list[dict[str, str]]:
    assignor = SimpleAssignor()
    target: dict[str, dict[uuid.UUID, set[int]]] = {}
    out = []
    for step in steps:
        subscriptions = {m: [T[i] for i in ts] for m, ts in step}
        target = assignor.compute(subscriptions, {T[i]: n for i, n in enumerate(counts)},
                                  {m: target[m] for m in subscriptions if m in target})
        out.append({m: _render(a) for m, a in target.items()})
    return out


@pytest.mark.parametrize(("name", "counts", "steps"), CASES, ids=[c[0] for c in CASES])
def test_strom_assigns_as_kafka(kafka_targets: dict[tuple[str, int, str], str], name: str, counts: list[int],
                                steps: list[Step]) -> None:
    strom = _strom_targets(counts, steps)
    for i, step in enumerate(steps):
        kafka = {m: kafka_targets[(name, i, m)] for m, _ in step}
        assert strom[i] == kafka, f"step {i} ({len(step)} members)"


def test_four_members_on_four_partitions_get_one_each(kafka_targets: dict[tuple[str, int, str], str]) -> None:
    # bench/share_groups.py's shape: Kafka balances 4 consumers on 4 partitions one partition each.
    final = _strom_targets([4], next(c[2] for c in CASES if c[0] == "single-4m-4p"))[3]
    assert sorted(final.values()) == ["0:0", "0:1", "0:2", "0:3"]
