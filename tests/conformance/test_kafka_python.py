"""kafka-python (pure-Python client) against the broker: admin, produce per codec, assign+seek reads."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

from strom.core.testing import BrokerProcess

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def _producer(bootstrap: str, **conf: Any) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, linger_ms=10, **conf)


def _read(bootstrap: str, topic: str, partition: int, start: int, n: int, timeout: float = 30.0) -> list[Any]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, start)
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=500, max_records=n - len(out)).values():
                out.extend(recs)
        assert len(out) == n, f"read {len(out)} of {n} records"
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_per_codec(codec: str | None, broker: BrokerProcess, topic_name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, num_partitions=2, replication_factor=1)])
    finally:
        admin.close()
    producer = _producer(broker.bootstrap, compression_type=codec)
    ts0 = int(time.time() * 1000) - 10_000
    futures = []
    for i in range(60):
        futures.append(producer.send(topic_name, value=f"val-{i}".encode() * (i % 5 + 1), key=f"k{i}".encode(),
                                     headers=[("n", str(i).encode()), ("codec", str(codec).encode())],
                                     partition=i % 2, timestamp_ms=ts0 + i))
    producer.flush(30)
    metas = [f.get(timeout=30) for f in futures]
    producer.close()
    for p in (0, 1):
        sent = [(m.offset, i) for i, m in enumerate(metas) if m.partition == p]
        assert [o for o, _ in sent] == list(range(30))
        got = _read(broker.bootstrap, topic_name, p, 0, 30)
        for (offset, i), rec in zip(sent, got, strict=True):
            assert rec.offset == offset
            assert rec.key == f"k{i}".encode()
            assert rec.value == f"val-{i}".encode() * (i % 5 + 1)
            assert list(rec.headers) == [("n", str(i).encode()), ("codec", str(codec).encode())]
            assert rec.timestamp == ts0 + i
    # assign + seek into the middle.
    mid = _read(broker.bootstrap, topic_name, 1, 17, 5)
    assert [r.offset for r in mid] == [17, 18, 19, 20, 21]
    assert mid[0].value == b"val-35" * (35 % 5 + 1)


def test_admin_create_and_delete_topics(broker: BrokerProcess, topic_name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, num_partitions=3, replication_factor=1,
                                      topic_configs={"retention.ms": "3600000"})])
        assert topic_name in admin.list_topics()
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(topic_name, num_partitions=1, replication_factor=1)])
        admin.delete_topics([topic_name])
        deadline = time.monotonic() + 20
        while topic_name in admin.list_topics():
            assert time.monotonic() < deadline, "deleted topic still listed"
            time.sleep(0.1)
    finally:
        admin.close()
