"""Interoperability with Kafka's MirrorMaker 2 (the Java one, 4.3.1 from Maven Central, in
dedicated mode): a replication started by Kafka's MM2 is continued by strom's from the same
mm2.properties without re-copying (its internal topics and source offsets are read as Kafka
wrote them), and a checkpoint Kafka's MM2 wrote translates with strom's ``translate_offsets``."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Self

import pytest
from confluent_kafka import Consumer, TopicPartition

from strom.connect.api.records import TopicPartition as TP
from strom.connect.mirror import translate_offsets
from strom.core.testing import ManagedProcess, wait_for

from .conftest import Mirror, MirrorMakerProcess

pytestmark = [pytest.mark.reference, pytest.mark.slow]  # ~22-29 s each


class KafkaMirrorMaker(ManagedProcess):
    name = "kafka-mirror-maker"
    tier = "reference"

    def __init__(self, classpath: str, properties: Path, clusters: list[str]) -> None:
        super().__init__()
        self.classpath, self.properties, self.clusters = classpath, properties, clusters

    def start(self) -> Self:
        self.spawn(["java", "-Xmx512m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=info", "-cp", self.classpath,
                    "org.apache.kafka.connect.mirror.MirrorMaker", str(self.properties), "--clusters", *self.clusters])
        return self


def _properties(mirror: Mirror, tmp_path: Path, topic: str, group: str, tag: str) -> Path:
    props = tmp_path / "mm2.properties"
    props.write_text("\n".join([
        "clusters = A, B", f"A.bootstrap.servers = {mirror.a}", f"B.bootstrap.servers = {mirror.b}",
        "A->B.enabled = true", f"A->B.topics = {topic}", f"A->B.groups = {group}", "emit.heartbeats.enabled = false",
        "emit.checkpoints.interval.seconds = 1", "refresh.groups.interval.seconds = 1", "tasks.max = 2",
        "replication.factor = 1", "offset-syncs.topic.replication.factor = 1",
        "checkpoints.topic.replication.factor = 1", "config.storage.replication.factor = 1",
        "offset.storage.replication.factor = 1", "status.storage.replication.factor = 1",
        "B.offset.flush.interval.ms = 1000",
        f"B.group.id = mm2-{tag}", f"B.config.storage.topic = mm2-configs-{tag}",
        f"B.offset.storage.topic = mm2-offsets-{tag}", f"B.status.storage.topic = mm2-status-{tag}",
    ]) + "\n")
    return props


def test_kafka_mm2_replication_continued_by_strom(mirror: Mirror, tmp_path: Path, kmirror_classpath: str) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"io-{tag}", f"g-{tag}"
    mirror.create_topic(mirror.a, topic, 2)
    mirror.produce(mirror.a, topic, [{"partition": i % 2, "value": f"v{i}".encode()} for i in range(2000)])
    c = Consumer({"bootstrap.servers": mirror.a, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 700), TopicPartition(topic, 1, 1000)], asynchronous=False)
    c.close()
    props = _properties(mirror, tmp_path, topic, group, tag)
    remote = f"A.{topic}"
    target = {"bootstrap.servers": mirror.b}
    with KafkaMirrorMaker(kmirror_classpath, props, ["B"]) as kafka_mm2:
        wait_for(lambda: sum(mirror.end_offsets(mirror.b, remote).values()) >= 2000, 120, "Kafka's MM2 copied all",
                 detail=lambda: kafka_mm2.log_tail(30))
        # Kafka's checkpoint, read by strom's translate_offsets: never past the committed offset
        translated = wait_for(lambda: (t := translate_offsets(target, "A", group, timeout=20)) and len(t) == 2 and t,
                              90, "Kafka's checkpoints", detail=lambda: kafka_mm2.log_tail(30))
        assert 0 < translated[TP(remote, 0)] <= 700 and 0 < translated[TP(remote, 1)] <= 1000
        # let Kafka's worker commit its source offsets before it stops (a clean stop commits)
        assert kafka_mm2.stop() is not None
    assert sum(mirror.end_offsets(mirror.b, remote).values()) == 2000
    mirror.produce(mirror.a, topic, [{"partition": i % 2, "value": f"w{i}".encode()} for i in range(1000)])
    with MirrorMakerProcess(props, ["B"]) as strom_mm2:
        wait_for(lambda: sum(mirror.end_offsets(mirror.b, remote).values()) >= 3000, 90, "strom continued",
                 detail=lambda: strom_mm2.log_tail(30))
        got = [r[3] for r in mirror.read_all(mirror.b, remote, 2)]
    # continued where Kafka's MM2 stopped: nothing copied twice, nothing missing
    assert sorted(got) == sorted([f"v{i}".encode() for i in range(2000)] + [f"w{i}".encode() for i in range(1000)])


def test_strom_mm2_replication_continued_by_kafka(mirror: Mirror, tmp_path: Path, kmirror_classpath: str) -> None:
    """The other way round: Kafka's MM2 continues strom's replication from strom's source
    offsets, and Kafka's checkpoint task translates with the offset syncs strom wrote."""
    tag = uuid.uuid4().hex[:8]
    topic, group = f"io2-{tag}", f"g-{tag}"
    mirror.create_topic(mirror.a, topic, 2)
    mirror.create_topic(mirror.b, f"A.{topic}", 2)
    # the remote topic already holds 25 other records per partition: translations must shift
    mirror.produce(mirror.b, f"A.{topic}", [{"partition": p, "value": b"older"} for p in (0, 1) for _ in range(25)])
    mirror.produce(mirror.a, topic, [{"partition": i % 2, "value": f"v{i}".encode()} for i in range(2000)])
    props = _properties(mirror, tmp_path, topic, group, tag)
    remote = f"A.{topic}"
    with MirrorMakerProcess(props, ["B"]) as strom_mm2:
        wait_for(lambda: sum(mirror.end_offsets(mirror.b, remote).values()) >= 2050, 90, "strom copied all",
                 detail=lambda: strom_mm2.log_tail(30))
        assert strom_mm2.stop() == 0  # a clean stop commits the source offsets
    c = Consumer({"bootstrap.servers": mirror.a, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 1000), TopicPartition(topic, 1, 400)], asynchronous=False)
    c.close()
    mirror.produce(mirror.a, topic, [{"partition": i % 2, "value": f"w{i}".encode()} for i in range(1000)])
    target = {"bootstrap.servers": mirror.b}
    with KafkaMirrorMaker(kmirror_classpath, props, ["B"]) as kafka_mm2:
        wait_for(lambda: sum(mirror.end_offsets(mirror.b, remote).values()) >= 3050, 120, "Kafka's MM2 continued",
                 detail=lambda: kafka_mm2.log_tail(30))
        translated = wait_for(lambda: (t := translate_offsets(target, "A", group, timeout=20)) and len(t) == 2 and t,
                              90, "Kafka's checkpoints from strom's offset syncs", detail=lambda: kafka_mm2.log_tail(30))
    got = [r[3] for r in mirror.read_all(mirror.b, remote, 2) if r[3] != b"older"]
    assert sorted(got) == sorted([f"v{i}".encode() for i in range(2000)] + [f"w{i}".encode() for i in range(1000)])
    for p, committed in ((0, 1000), (1, 400)):
        offset = translated[TP(remote, p)]
        assert 25 <= offset <= committed + 25  # shifted by the older records, never past the group
