"""A share group's metadata hash (ShareGroupMetadataValue.MetadataHash, KIP-1101) is Kafka 4.3.1's
own: ``Utils.computeTopicHash`` and ``ModernGroup.computeMetadataHash`` from the group-coordinator
jar (run from KafkaMetadataHash.java beside this file over a metadata image of the same topics)
give the same values as strom's :func:`topic_hash` / :func:`metadata_hash`, so a group Kafka
wrote is loaded by strom without an epoch bump."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from kafka_ref import classpath, jars_present

from strom.core.coordinator.share.share_group import ShareGroup, ShareGroupMember, metadata_hash, topic_hash
from strom.core.testing import java_problem

pytestmark = pytest.mark.reference  # one JVM run (~2 s)

JAVA_PROGRAM = Path(__file__).with_name("KafkaMetadataHash.java")
# name -> (topic id, partitions): ASCII, non-ASCII (UTF-16 code units), long names, 1-300 partitions
# (XXH3's short, medium and long inputs).
TOPICS = {
    "t1": (uuid.UUID("5f1c2a3b-9d4e-4f60-8a71-b2c3d4e5f607"), 1),
    "orders": (uuid.UUID("0a1b2c3d-4e5f-4a6b-9c8d-7e6f5a4b3c2d"), 4),
    "ünïcode-トピック": (uuid.UUID("c3d4e5f6-0718-4293-a4b5-c6d7e8f90a1b"), 12),
    "x" * 200: (uuid.UUID("ffffffff-ffff-4fff-bfff-ffffffffffff"), 30),
    "big": (uuid.UUID("00000000-0000-4000-8000-000000000001"), 300),
    "Zeta": (uuid.UUID("12345678-1234-4234-9234-123456789abc"), 2),
}
GROUPS = [["t1"], ["orders", "t1"], ["t1", "no-such-topic"], ["Zeta", "orders", "ünïcode-トピック", "big", "x" * 200],
          ["no-such-topic"]]


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


@pytest.fixture(scope="module")
def kafka_hashes() -> dict[str, int]:
    problem = java_problem()
    if problem is not None:
        pytest.skip(f"Kafka's hash code needs Java: {problem}")
    if not jars_present():
        pytest.skip("Kafka 4.3.1's jars are not in .cache/kafka-ref (scripts/kafka_ref/fetch.sh)")
    lines = [f"TOPIC {name} {_signed(tid.int >> 64)} {_signed(tid.int & ((1 << 64) - 1))} {n}"
             for name, (tid, n) in TOPICS.items()]
    lines += ["GROUP " + ",".join(g) for g in GROUPS]
    done = subprocess.run(["java", "-Xmx128m", "-cp", classpath(), str(JAVA_PROGRAM)], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=120, check=False, encoding="utf-8")
    assert done.returncode == 0, f"KafkaMetadataHash.java failed: {done.stderr[-3000:]}"
    return {f"{kind} {key}": int(value) for kind, key, value in (line.split(" ") for line in done.stdout.splitlines())}


@pytest.mark.parametrize("name", sorted(TOPICS))
def test_topic_hash_is_kafkas(kafka_hashes: dict[str, int], name: str) -> None:
    topic_id, partitions = TOPICS[name]
    assert topic_hash(topic_id, name, partitions) == kafka_hashes[f"TOPIC {name}"]


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: ",".join(x[:8] for x in g))
def test_group_metadata_hash_is_kafkas(kafka_hashes: dict[str, int], group: list[str]) -> None:
    # Only existing topics count (Kafka filters them through the image).
    subscribed = {n: TOPICS[n] for n in group if n in TOPICS}
    assert metadata_hash(subscribed) == kafka_hashes["GROUP " + ",".join(group)]


def test_a_group_kafka_wrote_heartbeats_without_an_epoch_bump(kafka_hashes: dict[str, int]) -> None:
    # The state a replay of Kafka's ShareGroup* records leaves: epoch 7, the hash Kafka stored,
    # a member on its target; strom has not seen the topic metadata yet (it is not persisted).
    g = ShareGroup("g")
    g.group_epoch = g.assignment_epoch = 7
    g.metadata_hash = kafka_hashes["GROUP orders,t1"]
    ids = {n: TOPICS[n][0] for n in ("orders", "t1")}
    g.initialized = {ids["orders"]: set(range(4)), ids["t1"]: {0}}
    g.topic_names = {tid: n for n, tid in ids.items()}
    target = {ids["orders"]: {0, 1, 2, 3}, ids["t1"]: {0}}
    g.members["m"] = ShareGroupMember("m", 7, ("orders", "t1"), assignment={t: set(ps) for t, ps in target.items()})
    g.target = {"m": {t: set(ps) for t, ps in target.items()}}
    r = g.heartbeat("m", 7, None, topics={n: TOPICS[n] for n in ("orders", "t1")}, now_ms=1_000)
    assert (r.member_epoch, r.assignment, g.group_epoch) == (7, None, 7)
