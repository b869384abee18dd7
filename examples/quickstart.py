"""Quickstart: start the bundled broker, create a topic, produce and consume with confluent-kafka.

Run: ``python examples/quickstart.py`` (after ``pip install -e .``). The broker runs as a
subprocess on a free port with a temporary data directory and stops at the end.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.testing import BrokerProcess

RECORDS = 200_000
TOPIC = "quickstart"


def main() -> int:
    with BrokerProcess() as broker:
        print(f"broker up: bootstrap.servers={broker.bootstrap}")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=1)])[TOPIC].result(30)
        print(f"created topic {TOPIC!r} with 3 partitions")
        del admin  # release its connections now, not after the broker has stopped

        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all"})
        start = time.perf_counter()
        for i in range(RECORDS):
            while True:
                try:
                    producer.produce(TOPIC, key=f"key-{i % 100}".encode(), value=b"x" * 100)
                    break
                except BufferError:
                    # librdkafka's local queue is full: a full buffer is back-pressure, so serve
                    # delivery reports until there is room, as Kafka's producer blocks in send().
                    producer.poll(0.1)
            if i % 50_000 == 0:
                producer.poll(0)
                print(f"  produced {i:,} records", flush=True)
        producer.flush(60)
        del producer
        elapsed = time.perf_counter() - start
        print(f"produced {RECORDS:,} records in {elapsed:.2f}s ({RECORDS / elapsed:,.0f} records/s)")

        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "quickstart",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
        received = 0
        start = time.perf_counter()
        while received < RECORDS:
            msgs = consumer.consume(10_000, timeout=5)
            if not msgs:
                print("no more records arrived within 5s", file=sys.stderr)
                break
            received += sum(1 for m in msgs if m.error() is None)
        elapsed = time.perf_counter() - start
        consumer.close()
        print(f"consumed {received:,} records in {elapsed:.2f}s ({received / elapsed:,.0f} records/s)")
        return 0 if received == RECORDS else 1


if __name__ == "__main__":
    sys.exit(main())
