"""Two strom brokers (clusters ``A`` and ``B``), a dedicated ``strom connect mirror-maker``
process and helpers for the MirrorMaker tests.

``cluster_a`` is the session's shared broker; ``cluster_b`` a second broker process of this
folder's own. Tests use unique topic and group names, so they share both.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.connect.mirror.maker import READY_LINE
from strom.connect.plugins import PluginRegistry
from strom.connect.runtime.config import WorkerConfig
from strom.connect.runtime.standalone import StandaloneHerder
from strom.core.testing import BrokerProcess, ManagedProcess, java_problem


@pytest.fixture(scope="session")
def kmirror_classpath() -> str:
    """The classpath of Kafka 4.3.1's MirrorMaker 2 and its client (bench/mirror.py resolves it
    from Maven Central); skips when Java or the jars are unavailable."""
    problem = java_problem()
    if problem is not None:
        pytest.skip(f"Kafka's MirrorMaker needs Java: {problem}")
    from mirror import ensure_kmirror  # bench/mirror.py (bench/ is on the suite's import path)

    try:
        return ensure_kmirror()
    except Exception as exc:  # mvn missing or Maven Central unreachable
        pytest.skip(f"Kafka's MirrorMaker jars unavailable: {exc}")


@pytest.fixture(scope="session")
def cluster_b(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("cluster-b")) as proc:
        yield proc


@dataclass
class Mirror:
    """Helpers over the two clusters."""

    a: str
    b: str
    tmp: Path
    herders: list[StandaloneHerder] = field(default_factory=list)

    def create_topic(self, bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the answer came
        admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)

    def produce(self, bootstrap: str, topic: str, records: list[dict[str, Any]]) -> None:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        for r in records:
            while True:
                try:
                    p.produce(topic, key=r.get("key"), value=r.get("value"), partition=r["partition"],
                              headers=r.get("headers"), timestamp=r.get("timestamp", 0))
                    break
                except BufferError:  # queue full: wait for deliveries, then retry
                    p.poll(0.1)
        assert p.flush(60) == 0

    def read_all(self, bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> list[Any]:
        """Every record of the topic up to its end offsets now (key, value, headers, timestamp,
        partition, offset)."""
        # partition EOF events give the position past transaction markers (the last offsets of a
        # transactional topic are markers, never records)
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirror-test-reader", "enable.auto.commit": False,
                      "enable.partition.eof": True})
        try:
            ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
            c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions) if ends[p] > 0])
            out: list[Any] = []
            pos = dict.fromkeys(ends, 0)
            deadline = time.monotonic() + timeout
            while any(pos[p] < ends[p] for p in ends):
                assert time.monotonic() < deadline, f"reading {topic}: at {pos} of {ends}"
                for m in c.consume(1000, 0.5):
                    err, partition, offset = m.error(), m.partition(), m.offset()
                    if err is not None:
                        assert err.code() == KafkaError._PARTITION_EOF, err
                        if partition is not None and offset is not None:
                            pos[partition] = max(pos[partition], offset)
                        continue
                    assert partition is not None and offset is not None
                    out.append((partition, offset, m.key(), m.value(), m.headers(), m.timestamp()[1]))
                    pos[partition] = offset + 1
            return sorted(out, key=lambda r: (r[0], r[1]))
        finally:
            c.close()

    def end_offsets(self, bootstrap: str, topic: str) -> dict[int, int]:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirror-test-ends"})
        try:
            md = c.list_topics(topic, timeout=10).topics.get(topic)
            if md is None or md.error is not None:
                return {}
            return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in md.partitions}
        except KafkaException as e:
            # A topic just created by the mirror may not have its leader yet (NOT_LEADER on Kafka's
            # broker): no offsets yet, the caller's wait goes on.
            if e.args and e.args[0].code() in (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                                               KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT):
                return {}
            raise
        finally:
            c.close()

    def herder(self, bootstrap: str, name: str) -> StandaloneHerder:
        """A standalone worker producing to ``bootstrap`` (the target), offsets in a file."""
        config = WorkerConfig.from_mapping({
            "bootstrap.servers": bootstrap, "offset.storage.file.filename": str(self.tmp / f"{name}.offsets"),
            "offset.flush.interval.ms": "200",
            "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "header.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        })
        h = StandaloneHerder(config, PluginRegistry())
        h.start()
        self.herders.append(h)
        return h

    def connector(self, cls: str, name: str, source: tuple[str, str], target: tuple[str, str],
                  **extra: str) -> dict[str, str]:
        """A Mirror* connector config for Connect (not dedicated mode), internal topics at RF 1."""
        return {"name": name, "connector.class": cls, "tasks.max": "2",
                "source.cluster.alias": source[0], "source.cluster.bootstrap.servers": source[1],
                "target.cluster.alias": target[0], "target.cluster.bootstrap.servers": target[1],
                "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
                "checkpoints.topic.replication.factor": "1", "heartbeats.topic.replication.factor": "1",
                **{k.replace("_", "."): v for k, v in extra.items()}}


class MirrorMakerProcess(ManagedProcess):
    name = "strom-mirror-maker"

    def __init__(self, properties: Path, clusters: list[str]) -> None:
        super().__init__()
        self.properties, self.clusters = properties, clusters

    def start(self) -> Self:
        self.spawn([sys.executable, "-m", "strom.connect.cli", "mirror-maker", str(self.properties),
                    "--clusters", *self.clusters], ready=lambda line: READY_LINE in line)
        if not self.wait_ready(60):
            raise self.fail_start("mirror-maker did not start")
        return self

    def task_lines(self) -> list[str]:
        return [line for line in self.output if "replicating" in line and "partition(s)" in line and "task" in line]


@pytest.fixture
def mirror(broker: BrokerProcess, cluster_b: BrokerProcess, tmp_path: Path) -> Iterator[Mirror]:
    m = Mirror(broker.bootstrap, cluster_b.bootstrap, tmp_path)
    try:
        yield m
    finally:
        for h in m.herders:
            h.stop()

