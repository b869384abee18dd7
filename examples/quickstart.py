"""Quickstart: start the bundled broker, create a topic, produce and consume with confluent-kafka.

Run: ``python examples/quickstart.py [--records N]`` (after ``pip install -e .``), from any
directory. The broker runs as a subprocess on a free port with a temporary data directory and
stops at the end.

The producer loop is the pattern to copy: ``produce()`` only queues a record, so a full local
queue (``BufferError``) is back-pressure, answered by serving delivery reports (``poll``) until
there is room; ``poll(0)`` after every record keeps the reports flowing, and ``flush`` at the
end waits for the last acknowledgements.
"""

from __future__ import annotations

import argparse
import sys
import time

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.testing import BrokerProcess

RECORDS = 200_000
IDLE_TIMEOUT_S = 30.0
TOPIC = "quickstart"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=RECORDS, help=f"records to produce (default: {RECORDS:,})")
    records = ap.parse_args().records
    with BrokerProcess() as broker:
        print(f"broker up: bootstrap.servers={broker.bootstrap}")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=1)])[TOPIC].result(30)
        print(f"created topic {TOPIC!r} with 3 partitions")
        del admin  # release its connections now, not after the broker has stopped

        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all"})
        failed = 0

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            nonlocal failed
            if err is not None:
                failed += 1

        start = time.perf_counter()
        for i in range(records):
            while True:
                try:
                    producer.produce(TOPIC, key=f"key-{i % 100}".encode(), value=b"x" * 100, on_delivery=on_delivery)
                    break
                except BufferError:
                    # librdkafka's local queue is full: a full buffer is back-pressure, so serve
                    # delivery reports until there is room, as Kafka's producer blocks in send().
                    producer.poll(0.1)
            producer.poll(0)  # serve delivery reports as they arrive, so the queue drains steadily
            if i and i % 50_000 == 0:
                print(f"  produced {i:,} records", flush=True)
        left = producer.flush(60)
        del producer
        elapsed = time.perf_counter() - start
        if left or failed:
            print(f"{failed} records failed and {left} were not acknowledged within 60 s", file=sys.stderr)
            return 1
        print(f"produced {records:,} records in {elapsed:.2f}s ({records / elapsed:,.0f} records/s)")

        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "quickstart",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
        received = 0
        start = last_progress = time.perf_counter()
        while received < records:
            msgs = consumer.consume(min(10_000, records - received), timeout=1)
            received += sum(1 for m in msgs if m.error() is None)
            if msgs:
                last_progress = time.perf_counter()
            elif time.perf_counter() - last_progress > IDLE_TIMEOUT_S:
                # Every record was acknowledged, so they are all there: only a stalled broker
                # (or machine) gets here. Generous, so a busy machine does not fail the example.
                print(f"no record arrived for {IDLE_TIMEOUT_S:.0f}s", file=sys.stderr)
                break
        elapsed = time.perf_counter() - start
        consumer.close()
        print(f"consumed {received:,} records in {elapsed:.2f}s ({received / elapsed:,.0f} records/s)")
        return 0 if received == records else 1


if __name__ == "__main__":
    sys.exit(main())
