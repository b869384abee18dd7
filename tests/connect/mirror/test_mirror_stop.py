"""Stopping MirrorMaker (dedicated mode, and a standalone worker running the Mirror connectors)
while its source cluster is down is bounded, as Kafka Connect's stop is: ``task.shutdown.graceful.timeout.ms`` for all tasks together, bounded
connector and client closes, and no thread of MirrorMaker left running afterwards.

Before the fix the checkpoint task and connector waited ``admin.timeout.ms`` (60 s) for the
unreachable source's answers: the stop took ~35 s and left the checkpoint task's thread behind.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from strom.connect.mirror import MirrorMakerConfig, translate_offsets
from strom.connect.mirror.maker import MirrorMaker
from strom.core.testing import BrokerProcess, wait_for

from .conftest import Mirror

GRACEFUL_MS = 3000
# Kafka's Worker.CONNECTOR_GRACEFUL_SHUTDOWN_TIMEOUT_MS: what stopping the connectors may add
CONNECTOR_GRACEFUL_SHUTDOWN_S = 5.0


def _source_with_a_group(mirror: Mirror, source: BrokerProcess, topic: str, group: str) -> None:
    """300 records in 3 partitions of ``topic`` on the source, and ``group`` committed at 50 on each."""
    mirror.create_topic(source.bootstrap, topic, 3)
    mirror.produce(source.bootstrap, topic, [{"partition": i % 3, "value": b"v%d" % i} for i in range(300)])
    c = Consumer({"bootstrap.servers": source.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, p, 50) for p in range(3)], asynchronous=False)
    c.close()


def _mirroring(mirror: Mirror, topic: str, group: str) -> None:
    """Every record is on B and the checkpoint task translated the group: its polls ask the source."""
    wait_for(lambda: sum(mirror.end_offsets(mirror.b, f"S.{topic}").values()) >= 300, 90, "records on B")
    wait_for(lambda: len(translate_offsets({"bootstrap.servers": mirror.b}, "S", group)) == 3, 60,
             "checkpoints of the group on B")


def test_stop_with_the_source_down_is_bounded_and_leaves_no_thread(mirror: Mirror, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"stop-{tag}", f"stop-group-{tag}"
    with BrokerProcess(tmp_path / "source") as source:
        _source_with_a_group(mirror, source, topic, group)
        props = tmp_path / "mm2.properties"
        props.write_text("".join(f"{k} = {v}\n" for k, v in {
            "clusters": "S, B",
            "S.bootstrap.servers": source.bootstrap,
            "B.bootstrap.servers": mirror.b,
            "S->B.enabled": "true",
            "S->B.topics": topic,
            "S->B.groups": group,
            "emit.checkpoints.interval.seconds": "1",
            "refresh.groups.interval.seconds": "1",
            "emit.heartbeats.enabled": "false",
            "tasks.max": "3",
            "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
            "checkpoints.topic.replication.factor": "1", "heartbeats.topic.replication.factor": "1",
            "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1", "offset.flush.interval.ms": "500",
            "B.task.shutdown.graceful.timeout.ms": str(GRACEFUL_MS),
            # this test's own Connect group and internal topics on B
            "B.group.id": f"mm2-{tag}", "B.config.storage.topic": f"mm2-configs-{tag}",
            "B.offset.storage.topic": f"mm2-offsets-{tag}", "B.status.storage.topic": f"mm2-status-{tag}",
        }.items()))
        before = set(threading.enumerate())
        maker = MirrorMaker(MirrorMakerConfig.load(props), ["B"])
        maker.start()
        try:
            (herder,) = maker.herders.values()
            graceful_s = herder.config.task_shutdown_graceful_timeout_ms / 1000
            assert graceful_s == GRACEFUL_MS / 1000
            _mirroring(mirror, topic, group)
            source.stop()
        finally:
            started = time.monotonic()
            maker.stop()
            took = time.monotonic() - started
        left = [t.name for t in set(threading.enumerate()) - before if t.is_alive()]
    # Kafka's bound: the tasks' graceful timeout, plus the most stopping the connectors may add
    assert took <= graceful_s + CONNECTOR_GRACEFUL_SHUTDOWN_S, f"stop took {took:.1f} s"
    assert not left, f"threads still running after stop(): {left}"


def test_worker_stop_with_the_source_down_is_bounded_and_leaves_no_thread(mirror: Mirror, tmp_path: Path) -> None:
    """The same through a normal (standalone) Connect worker running the Mirror connectors."""
    tag = uuid.uuid4().hex[:8]
    topic, group = f"wstop-{tag}", f"wstop-group-{tag}"
    with BrokerProcess(tmp_path / "source") as source:
        _source_with_a_group(mirror, source, topic, group)
        before = set(threading.enumerate())
        herder = mirror.herder(mirror.b, f"wstop-{tag}")
        try:
            graceful_s = herder.worker.config.task_shutdown_graceful_timeout_ms / 1000
            common = {"topics": topic, "groups": group, "emit_checkpoints_interval_seconds": "1",
                      "refresh_groups_interval_seconds": "1", "tasks_max": "3"}
            for cls, name in (("org.apache.kafka.connect.mirror.MirrorSourceConnector", "src"),
                              ("org.apache.kafka.connect.mirror.MirrorCheckpointConnector", "cp")):
                herder.put_connector_config(f"{name}-{tag}", mirror.connector(
                    cls, f"{name}-{tag}", ("S", source.bootstrap), ("B", mirror.b), **common), False)
            _mirroring(mirror, topic, group)
            source.stop()
        finally:
            started = time.monotonic()
            herder.stop()
            took = time.monotonic() - started
        left = [t.name for t in set(threading.enumerate()) - before if t.is_alive()]
    assert took <= graceful_s + CONNECTOR_GRACEFUL_SHUTDOWN_S, f"stop took {took:.1f} s"
    assert not left, f"threads still running after stop(): {left}"
