"""Issue 27 item 2 on real data: a data directory Apache Kafka 4.3.1 wrote and shut down cleanly
(its controlled shutdown leaves every partition with leader -1, ISR [] and ELR [1]) is opened by
strom, which elects a leader for every partition from the ELR and serves every record; strom's
own clean stop then writes Kafka's controlled-shutdown records, so Kafka started on the same
directory afterwards registers its broker without DuplicateBrokerRegistrationException and
serves the records again.

The metadata log is read at each step with strom's own decoder and replay (every record type
and version Kafka 4.3 writes must decode), so the states asserted are the ones in the files.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_ref import KafkaRef
from ref_fixtures import skip_without_java

from strom.core.metadata.delta import MetadataDelta
from strom.core.metadata.image import EMPTY_IMAGE, MetadataImage
from strom.core.metadata.records import (
    BrokerRegistrationChangeRecord,
    Message,
    RegisterControllerRecord,
    decode_record,
)
from strom.core.records.builder import decode_records
from strom.core.testing import BrokerProcess, wait_for

pytestmark = pytest.mark.slow  # three broker starts (two of them Kafka): ~22 s on the 2-CPU machine

log = logging.getLogger(__name__)
TOPICS = {"plain": 3, "compacted": 2}
PER_PARTITION = 20


def metadata_records(log_dir: Path) -> list[Message]:
    out = []
    for path in sorted((log_dir / "__cluster_metadata-0").glob("*.log")):
        for rec in decode_records(path.read_bytes()):
            if rec.value is not None and not rec.header.is_control:
                out.append(decode_record(rec.value))
    return out


def replay(records: list[Message]) -> MetadataImage:
    delta = MetadataDelta(EMPTY_IMAGE)
    for r in records:
        delta.replay(r)
    return delta.apply(len(records), 0)


def partition_states(image: MetadataImage) -> dict[tuple[str, int], tuple[int, tuple[int, ...], tuple[int, ...]]]:
    return {(name, p): (reg.leader, reg.isr, reg.elr)
            for name in TOPICS for p, reg in image.topics[name].partitions.items()}


def produce(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(name, n, 1, config={"cleanup.policy": "compact"} if name == "compacted" else {})
           for name, n in TOPICS.items()]
    for future in admin.create_topics(new).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for name, n in TOPICS.items():
        for p in range(n):
            for i in range(PER_PARTITION):
                producer.produce(name, key=f"k{i}", value=f"{name}-{p}-{i}", partition=p)
    assert producer.flush(30) == 0


def read_all(bootstrap: str) -> dict[tuple[str, int], list[str]]:
    """Every record of every partition from offset 0 (the leaders must serve them)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"elections-{time.monotonic_ns()}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(name, p, 0) for name, n in TOPICS.items() for p in range(n)])
    got: dict[tuple[str, int], list[str]] = {(name, p): [] for name, n in TOPICS.items() for p in range(n)}

    def everything() -> bool:
        for msg in consumer.consume(num_messages=1000, timeout=0.5):
            topic, partition, value = msg.topic(), msg.partition(), msg.value()
            if msg.error() is None and topic is not None and partition is not None and value is not None:
                got[(topic, partition)].append(value.decode())
        return all(len(values) == PER_PARTITION for values in got.values())

    try:
        wait_for(everything, timeout=60, what="every record from the leaders")
    finally:
        consumer.close()
    return got


def leaders(bootstrap: str) -> dict[tuple[str, int], int]:
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15).topics
    return {(name, p.id): p.leader for name in TOPICS for p in topics[name].partitions.values()}


def test_strom_elects_from_kafkas_elr_and_hands_back_a_fenced_registration(tmp_path: Path) -> None:
    skip_without_java()
    kafka_root = tmp_path / "kafka"
    expected = {(name, p): [f"{name}-{p}-{i}" for i in range(PER_PARTITION)]
                for name, n in TOPICS.items() for p in range(n)}
    started = time.monotonic()
    with KafkaRef(kafka_root) as kafka:  # Kafka 4.3.1 at its default metadata.version (4.3-IV0)
        produce(kafka.bootstrap)
    log.info("Kafka wrote its data directory in %.1f s", time.monotonic() - started)
    # Kafka's clean shutdown, as its own log records it: no leader, empty ISR, ELR [1].
    kafka_log = kafka_root / "kafka-logs"
    after_kafka = replay(metadata_records(kafka_log))
    assert after_kafka.metadata_version == 30
    assert set(partition_states(after_kafka).values()) == {(-1, (), (1,))}

    copy = tmp_path / "copy"
    shutil.copytree(kafka_root, copy)
    log_dir = str(copy / "kafka-logs")
    strom = BrokerProcess(tmp_path / "strom-unused", config={"log.dirs": log_dir, "metadata.log.dir": log_dir})
    started = time.monotonic()
    with strom:
        assert set(leaders(strom.bootstrap).values()) == {1}
        assert read_all(strom.bootstrap) == expected
    log.info("strom served it in %.1f s", time.monotonic() - started)
    # strom's clean stop: in controlled shutdown with the ELR kept, then fenced (Kafka's records).
    after_strom = metadata_records(copy / "kafka-logs")
    image = replay(after_strom)
    assert set(partition_states(image).values()) == {(-1, (), (1,))}
    broker = image.broker(1)
    assert broker is not None and broker.fenced and broker.in_controlled_shutdown
    changes = [r for r in after_strom if isinstance(r, BrokerRegistrationChangeRecord)]
    assert [(c.in_controlled_shutdown, c.fenced) for c in changes[-2:]] == [(1, 0), (0, 1)]
    assert any(isinstance(r, RegisterControllerRecord) for r in after_strom[len(metadata_records(kafka_log)):])
    for topic in image.topics.values():
        for reg in topic.partitions.values():
            assert reg.directories == broker.log_dirs  # Kafka's directory ids, kept

    # Kafka takes the directory back: no duplicate registration, leaders, every record.
    started = time.monotonic()
    with KafkaRef(copy) as kafka_again:
        assert set(leaders(kafka_again.bootstrap).values()) == {1}
        assert read_all(kafka_again.bootstrap) == expected
        assert "DuplicateBrokerRegistrationException" not in kafka_again.log_text()
    log.info("Kafka took it back in %.1f s", time.monotonic() - started)
