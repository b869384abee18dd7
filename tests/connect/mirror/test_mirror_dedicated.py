"""Dedicated mode: ``strom connect mirror-maker mm2.properties --clusters B`` — two processes on
one file join the same Connect group on B and share the replication of A's partitions; every
record arrives. The flow's worker settings come from ``B.*`` cluster properties."""

from __future__ import annotations

import uuid
from pathlib import Path

from strom.core.testing import wait_for

from .conftest import Mirror, MirrorMakerProcess


def test_two_processes_share_the_partitions(mirror: Mirror, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    topic = f"ded-{tag}"
    mirror.create_topic(mirror.a, topic, 4)
    props = tmp_path / "mm2.properties"
    props.write_text("\n".join([
        "clusters = A, B",
        f"A.bootstrap.servers = {mirror.a}",
        f"B.bootstrap.servers = {mirror.b}",
        "A->B.enabled = true",
        f"A->B.topics = ded-{tag}.*",
        "emit.heartbeats.enabled = false",
        "tasks.max = 4",
        "replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "config.storage.replication.factor = 1",
        "offset.storage.replication.factor = 1",
        "status.storage.replication.factor = 1",
        "B.offset.flush.interval.ms = 500",
        # isolate this test's Connect group and internal topics on B (cluster properties)
        f"B.group.id = mm2-{tag}",
        f"B.config.storage.topic = mm2-configs-{tag}",
        f"B.offset.storage.topic = mm2-offsets-{tag}",
        f"B.status.storage.topic = mm2-status-{tag}",
    ]) + "\n")
    with MirrorMakerProcess(props, ["B"]) as first, MirrorMakerProcess(props, ["B"]) as second:
        # both processes end up running source tasks: the partitions are shared
        wait_for(lambda: first.task_lines() and second.task_lines(), 90, "source tasks in both processes",
                 detail=lambda: f"first: {first.log_tail(15)}\nsecond: {second.log_tail(15)}")
        records = [{"partition": i % 4, "key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(2000)]
        mirror.produce(mirror.a, topic, records)
        wait_for(lambda: sum(mirror.end_offsets(mirror.b, f"A.{topic}").values()) >= 2000, 90,
                 "all records on B", detail=lambda: f"{first.log_tail(15)}\n{second.log_tail(15)}")
        got = mirror.read_all(mirror.b, f"A.{topic}", 4)
        sent = mirror.read_all(mirror.a, topic, 4)
        # at-least-once: nothing missing, each partition in order (a rebalance may repeat some)
        assert {(r[0], r[2], r[3]) for r in got} == {(r[0], r[2], r[3]) for r in sent}
        assert not first.alive or first.stop() == 0
        assert second.stop() == 0
