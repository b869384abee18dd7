"""strom's MirrorMaker between strom and Apache Kafka 4.x brokers (the reference broker from
Maven Central's jars): strom A -> Kafka K and on to strom B, records exact partition for
partition, and a group's checkpoint on Kafka translates (no broker-specific behaviour)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka_ref import KafkaRef
from ref_fixtures import kafka_ref  # noqa: F401  (the session's reference broker fixture)

from strom.connect.api.records import TopicPartition as TP
from strom.connect.mirror import translate_offsets
from strom.core.testing import wait_for

from .conftest import Mirror

pytestmark = pytest.mark.reference
SOURCE = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
CHECKPOINT = "org.apache.kafka.connect.mirror.MirrorCheckpointConnector"


def test_strom_to_kafka_and_on_to_strom(mirror: Mirror, kafka_ref: KafkaRef, tmp_path: Path) -> None:  # noqa: F811
    k = kafka_ref.bootstrap
    tag = uuid.uuid4().hex[:8]
    topic, group = f"xk-{tag}", f"g-{tag}"
    mirror.create_topic(mirror.a, topic, 2)
    sent = [{"partition": i % 2, "key": f"k{i}".encode(), "value": f"v{i}".encode(),
             "headers": [("h", f"{i}".encode())], "timestamp": 1_700_000_000_000 + i} for i in range(1000)]
    mirror.produce(mirror.a, topic, sent)
    c = Consumer({"bootstrap.servers": mirror.a, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 300), TopicPartition(topic, 1, 500)], asynchronous=False)
    c.close()
    on_k = mirror.herder(k, f"k-{tag}")
    common = {"topics": f"{topic}.*", "groups": group, "emit_checkpoints_interval_seconds": "1",
              "refresh_groups_interval_seconds": "1"}
    on_k.put_connector_config("a2k", mirror.connector(SOURCE, "a2k", ("A", mirror.a), ("K", k), **common), False)
    wait_for(lambda: sum(mirror.end_offsets(k, f"A.{topic}").values()) >= 1000, 90, "A -> Kafka")
    on_k.put_connector_config("a2k-cp", mirror.connector(CHECKPOINT, "a2k-cp", ("A", mirror.a), ("K", k), **common),
                              False)
    on_b = mirror.herder(mirror.b, f"b-{tag}")
    on_b.put_connector_config("k2b", mirror.connector(SOURCE, "k2b", ("K", k), ("B", mirror.b),
                                                      topics=f"A\\.{topic}"), False)
    wait_for(lambda: sum(mirror.end_offsets(mirror.b, f"K.A.{topic}").values()) >= 1000, 90, "Kafka -> B")
    src = mirror.read_all(mirror.a, topic, 2)
    assert mirror.read_all(k, f"A.{topic}", 2) == src  # offsets, keys, values, headers, timestamps
    assert mirror.read_all(mirror.b, f"K.A.{topic}", 2) == src
    translated = wait_for(lambda: (t := translate_offsets({"bootstrap.servers": k}, "A", group, timeout=20))
                          and len(t) == 2 and t, 60, "checkpoints on Kafka")
    assert 0 < translated[TP(f"A.{topic}", 0)] <= 300 and 0 < translated[TP(f"A.{topic}", 1)] <= 500
