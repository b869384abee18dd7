"""Issue 22 item 6, the direction test_mirror_interop.py does not cover: checkpoints written by
strom's MirrorCheckpointConnector (dedicated ``strom connect mirror-maker``, between two strom
brokers) translate with Kafka's Java ``RemoteClusterUtils.translateOffsets`` (Kafka 4.3.1's
connect-mirror-client, run from TranslateOffsets.java beside this file) to exactly the offsets
strom's ``translate_offsets`` gives, partition for partition."""

from __future__ import annotations

import logging
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from strom.connect.api.records import TopicPartition as TP
from strom.connect.mirror import translate_offsets
from strom.core.testing import wait_for

from .conftest import Mirror, MirrorMakerProcess

pytestmark = pytest.mark.reference  # the JVM; ~12-14 s on the shared 2-CPU machine, so not slow

log = logging.getLogger(__name__)
JAVA_PROGRAM = Path(__file__).with_name("TranslateOffsets.java")
LAG_MAX = 50
PRE = 25  # records already in the remote topic, so target offsets differ from source ones
PER_PARTITION = 400
COMMITTED = {0: 300, 1: PER_PARTITION, 2: 137}


def java_translate_offsets(classpath: str, bootstrap: str, alias: str, group: str) -> dict[TP, int]:
    """Kafka's ``RemoteClusterUtils.translateOffsets(props, alias, group, 30 s)`` on ``bootstrap``."""
    done = subprocess.run(["java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath,
                           str(JAVA_PROGRAM), bootstrap, alias, group],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"TranslateOffsets.java failed ({done.returncode}): {done.stderr[-3000:]}"
    out: dict[TP, int] = {}
    for line in done.stdout.splitlines():
        topic, partition, offset = line.split()
        out[TP(topic, int(partition))] = int(offset)
    return out


def _properties(mirror: Mirror, tmp_path: Path, topic: str, group: str, tag: str) -> Path:
    props = tmp_path / "mm2.properties"
    props.write_text("\n".join([
        "clusters = A, B", f"A.bootstrap.servers = {mirror.a}", f"B.bootstrap.servers = {mirror.b}",
        "A->B.enabled = true", f"A->B.topics = {topic}", f"A->B.groups = {group}", "emit.heartbeats.enabled = false",
        "emit.checkpoints.interval.seconds = 1", "refresh.groups.interval.seconds = 1", "tasks.max = 2",
        f"offset.lag.max = {LAG_MAX}", "replication.factor = 1", "offset-syncs.topic.replication.factor = 1",
        "checkpoints.topic.replication.factor = 1", "config.storage.replication.factor = 1",
        "offset.storage.replication.factor = 1", "status.storage.replication.factor = 1",
        f"B.group.id = mm2-{tag}", f"B.config.storage.topic = mm2-configs-{tag}",
        f"B.offset.storage.topic = mm2-offsets-{tag}", f"B.status.storage.topic = mm2-status-{tag}",
    ]) + "\n")
    return props


def test_strom_checkpoints_translate_with_kafkas_remote_cluster_utils(mirror: Mirror, tmp_path: Path,
                                                                      kmirror_classpath: str) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"rcu-{tag}", f"g-{tag}"
    remote = f"A.{topic}"
    partitions = len(COMMITTED)
    mirror.create_topic(mirror.a, topic, partitions)
    mirror.create_topic(mirror.b, remote, partitions)
    mirror.produce(mirror.b, remote, [{"partition": p, "value": b"older"} for p in range(partitions)
                                      for _ in range(PRE)])
    mirror.produce(mirror.a, topic, [{"partition": p, "value": str(i).encode()} for p in range(partitions)
                                     for i in range(PER_PARTITION)])
    c = Consumer({"bootstrap.servers": mirror.a, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in COMMITTED.items()], asynchronous=False)
    c.close()
    target = {"bootstrap.servers": mirror.b}
    with MirrorMakerProcess(_properties(mirror, tmp_path, topic, group, tag), ["B"]) as strom_mm2:
        copied = dict.fromkeys(range(partitions), PRE + PER_PARTITION)
        wait_for(lambda: mirror.end_offsets(mirror.b, remote) == copied, 90, "strom copied all",
                 detail=lambda: strom_mm2.log_tail(30))
        wait_for(lambda: len(translate_offsets(target, "A", group, timeout=20)) == partitions, 90,
                 "strom's checkpoints of every partition", detail=lambda: strom_mm2.log_tail(30))
        # stopped, the checkpoints topic is frozen: both readers see the same records, so any
        # difference is one of reading them (format, ordering, the latest checkpoint wins)
        assert strom_mm2.stop() == 0
    translated = translate_offsets(target, "A", group, timeout=20)
    kafka_translated = java_translate_offsets(kmirror_classpath, mirror.b, "A", group)
    log.info("strom %s, Kafka's RemoteClusterUtils %s", translated, kafka_translated)
    assert kafka_translated == translated
    assert set(kafka_translated) == {TP(remote, p) for p in range(partitions)}
    for p, committed in COMMITTED.items():
        # never past the group's position, and within offset.lag.max of it (so past the older
        # records: a real translation, not a default)
        assert PRE + committed - LAG_MAX <= kafka_translated[TP(remote, p)] <= PRE + committed
