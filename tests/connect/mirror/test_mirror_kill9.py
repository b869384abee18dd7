"""A dedicated MirrorMaker process killed -9 mid-replication and started again: with
exactly-once source support (KIP-618: ``exactly.once.source.support=enabled`` on the worker,
``read_committed`` on the source consumer) the target holds every record exactly once; without
it every record at least once (duplicates allowed, never a missing record)."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest

from strom.core.testing import wait_for

from .conftest import Mirror, MirrorMakerProcess

N = 20_000


@pytest.mark.parametrize("eos", [True, False], ids=["exactly-once", "at-least-once"])
def test_kill9_mid_replication(mirror: Mirror, tmp_path: Path, eos: bool) -> None:
    tag = uuid.uuid4().hex[:8]
    topic = f"k9-{tag}"
    mirror.create_topic(mirror.a, topic, 2)
    mirror.produce(mirror.a, topic, [{"partition": i % 2, "value": f"v{i}".encode()} for i in range(N)])
    props = tmp_path / "mm2.properties"
    lines = [
        "clusters = A, B", f"A.bootstrap.servers = {mirror.a}", f"B.bootstrap.servers = {mirror.b}",
        "A->B.enabled = true", f"A->B.topics = {topic}", "emit.heartbeats.enabled = false",
        "A->B.emit.checkpoints.enabled = false", "A->B.sync.group.offsets.enabled = true",
        "tasks.max = 2", "replication.factor = 1", "offset-syncs.topic.replication.factor = 1",
        "checkpoints.topic.replication.factor = 1", "config.storage.replication.factor = 1",
        "offset.storage.replication.factor = 1", "status.storage.replication.factor = 1",
        "B.offset.flush.interval.ms = 1000",
        f"B.group.id = mm2-{tag}", f"B.config.storage.topic = mm2-configs-{tag}",
        f"B.offset.storage.topic = mm2-offsets-{tag}", f"B.status.storage.topic = mm2-status-{tag}",
        # the consumer side of the source throttled, so the kill lands mid-replication
        "consumer.max.partition.fetch.bytes = 2048", "consumer.fetch.max.bytes = 4096",
    ]
    if eos:
        lines += ["B.exactly.once.source.support = enabled", "consumer.isolation.level = read_committed"]
    props.write_text("\n".join(lines) + "\n")
    remote = f"A.{topic}"
    first = MirrorMakerProcess(props, ["B"]).start()
    try:
        wait_for(lambda: sum(mirror.end_offsets(mirror.b, remote).values()) >= N // 10, 90, "some records mirrored",
                 detail=lambda: first.log_tail(20))
    finally:
        first.kill()
    with MirrorMakerProcess(props, ["B"]) as second:
        def all_there() -> bool:
            values = {r[3] for r in mirror.read_all(mirror.b, remote, 2)}
            return len(values) >= N

        wait_for(all_there, 120, "every record on B", detail=lambda: second.log_tail(20))
    got = Counter(r[3] for r in mirror.read_all(mirror.b, remote, 2))
    assert set(got) == {f"v{i}".encode() for i in range(N)}  # nothing missing
    duplicates = sum(c - 1 for c in got.values())
    if eos:
        assert duplicates == 0, f"{duplicates} duplicates under exactly-once"
