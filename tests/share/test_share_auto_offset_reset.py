"""``share.auto.offset.reset=by_duration:<ISO-8601 duration>`` with confluent-kafka's ShareConsumer,
against strom and Apache Kafka 4.3.1 (issue 25, item 2).

A new share group set to ``by_duration:PT1H`` (a GROUP config, IncrementalAlterConfigs) starts
at the first record whose timestamp is within the last hour: the records produced with
timestamps two hours ago are never delivered, the recent ones are. Old records sit at lower
offsets, and a share partition hands out its lowest available offsets first, so once every
recent record has arrived an old one would have come already.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Producer, ShareConsumer
from kafka_ref import KafkaRef
from share_kit import create_topic, set_group_config

from strom.core.testing import BrokerProcess

HOUR_MS = 3_600_000


def test_by_duration_starts_at_the_first_recent_record(share_broker: BrokerProcess | KafkaRef) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"share-dur-{suffix}", f"g-dur-{suffix}"
    create_topic(share_broker.bootstrap, topic, 1)
    now_ms = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": share_broker.bootstrap, "linger.ms": 5})
    for i in range(5):
        producer.produce(topic, value=f"old-{i}".encode(), partition=0, timestamp=now_ms - 2 * HOUR_MS)
    for i in range(5):
        producer.produce(topic, value=f"new-{i}".encode(), partition=0, timestamp=now_ms)
    assert producer.flush(30) == 0
    set_group_config(share_broker.bootstrap, group, {"share.auto.offset.reset": "by_duration:PT1H"})
    consumer = ShareConsumer({"bootstrap.servers": share_broker.bootstrap, "group.id": group})
    consumer.subscribe([topic])
    values: list[str] = []
    recent = {f"new-{i}" for i in range(5)}
    deadline = time.monotonic() + 45
    try:
        while not recent <= set(values):
            assert time.monotonic() < deadline, f"only {values} within 45 s"
            values += [(m.value() or b"").decode() for m in consumer.poll(0.5) if m.error() is None]
    finally:
        consumer.close()
    assert sorted(values) == sorted(recent), f"records older than the duration delivered: {values}"
