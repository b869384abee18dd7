"""Helpers of the tiered-storage broker tests (tests/tiered): a partition's local segments, its
topic id, keyed records produced and consumed with confluent-kafka, ListOffsets' special
timestamps on a raw socket. The broker + moto setups are fixtures of tests/tiered/conftest.py."""

from __future__ import annotations

import os
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from diff_wire import WireClient
from kio.schema.list_offsets.v9.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i64

from strom.core.testing import BrokerProcess, wait_for
from strom.plugins.hookspecs.storage import TopicIdPartition, kafka_uuid_parse


def topic_id_partition(partition_dir: Path, topic: str, partition: int) -> TopicIdPartition:
    for line in (partition_dir / "partition.metadata").read_text().splitlines():
        if line.startswith("topic_id:"):
            return TopicIdPartition(kafka_uuid_parse(line.split(":", 1)[1].strip()), topic, partition)
    raise AssertionError(f"no topic id in {partition_dir}")


def local_bases(partition_dir: Path) -> list[int]:
    """Base offsets of the segments on the broker's disk."""
    return sorted(int(p.name[:20]) for p in partition_dir.glob("*.log"))


def produce(bootstrap: str, topic: str, count: int, first: int = 0) -> list[tuple[bytes, bytes]]:
    """``count`` records of 100 random bytes keyed by their number from ``first``; returns (key,
    value) in order."""
    errors: list[object] = []
    sent = [(str(i).encode(), os.urandom(100)) for i in range(first, first + count)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4000})
    for key, value in sent:
        producer.produce(topic, value, key=key, on_delivery=lambda e, m: errors.append(e) if e else None)
    assert producer.flush(60) == 0 and not errors, errors[:3]
    return sent


def consume_all(bootstrap: str, topic: str, count: int, **config: str | int) -> list[tuple[int, bytes, bytes]]:
    """(offset, key, value) of the first ``count`` records from offset 0, read with confluent-kafka."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tier-reader", "enable.auto.commit": False,
                         "auto.offset.reset": "error", **config})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes, bytes]] = []
    try:
        def more() -> bool:
            for m in consumer.consume(500, 1.0):
                assert m.error() is None, m.error()
                got.append((m.offset() or 0, m.key() or b"", m.value() or b""))
            return len(got) >= count
        wait_for(more, 60, f"{count} records of {topic}", interval=0, detail=lambda: f"{len(got)} read")
    finally:
        consumer.close()
    return got


def list_offsets(bootstrap: str, topic: str, timestamp: int) -> tuple[int, int]:
    """(error code, offset) of ListOffsets v9 for partition 0 at a special timestamp."""
    with WireClient(bootstrap) as c:
        resp = c.request(ListOffsetsRequest(replica_id=BrokerId(-1), isolation_level=i8(0), topics=(ListOffsetsTopic(
            name=TopicName(topic), partitions=(ListOffsetsPartition(
                partition_index=i32(0), current_leader_epoch=i32(-1), timestamp=i64(timestamp)),)),)))
    p = resp.topics[0].partitions[0]
    return int(p.error_code), int(p.offset)


def local_down_to_active(broker: BrokerProcess, topic: str) -> int:
    """Wait until only the active segment of partition 0 is on disk (the rest copied to S3 and
    deleted locally); its base offset, the local log start."""
    partition_dir = broker.data_dir / "logs" / f"{topic}-0"
    wait_for(lambda: len(local_bases(partition_dir)) == 1, 60, f"{topic}: local segments down to the active one",
             detail=lambda: str(local_bases(partition_dir)))
    return local_bases(partition_dir)[0]


def tiered_down_to_active(broker: BrokerProcess, topic: str) -> int:
    """:func:`local_down_to_active`, then until the leader knows the copies (ListOffsets -5, the
    highest tiered offset, is the local start - 1); the local log start."""
    local_start = local_down_to_active(broker, topic)
    wait_for(lambda: list_offsets(broker.bootstrap, topic, -5)[1] == local_start - 1, 60,
             "the highest tiered offset known to the leader")
    return local_start
