"""A work queue with retries on a share group (KIP-932, Kafka's queues).

Run: ``python examples/work_queue.py`` (after ``pip install -e .``). It starts the bundled broker
on a free port with a temporary data directory, queues a few jobs on topic ``jobs`` and works
them off with a share consumer (``confluent_kafka.ShareConsumer``), acknowledging each job
explicitly:

- the job succeeds: ACCEPT, it is done for good;
- the job fails: RELEASE, the broker hands it out again (to this or any other consumer of the
  group), its delivery count one higher;
- it failed ``MAX_ATTEMPTS`` times (a poison job): REJECT, the broker archives it and never
  delivers it again. A real service would also write it to a dead-letter topic here.

Unlike a consumer group, any number of consumers may read the same partition: start more
processes with the same ``group.id`` and the jobs are spread over them, record by record.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from strom.core.testing import BrokerProcess

TOPIC, GROUP = "jobs", "workers"
MAX_ATTEMPTS = 3
JOBS = ["resize:cat.png", "resize:dog.png", "email:welcome", "flaky:report", "poison:corrupt.pdf",
        "email:digest"]
TIMEOUT_S = 60.0


def work(job: str, attempt: int) -> None:
    """The job itself: ``flaky`` jobs fail on their first attempt, ``poison`` ones every time."""
    kind = job.split(":", 1)[0]
    if kind == "poison" or (kind == "flaky" and attempt == 1):
        raise RuntimeError(f"{job} failed")


def setup(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1)])[TOPIC].result(30)
    # Share-group settings are group configs (IncrementalAlterConfigs on the GROUP resource):
    # start from the oldest job, and let the broker archive a job after MAX_ATTEMPTS deliveries
    # even if a consumer keeps releasing it.
    configs = {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": str(MAX_ATTEMPTS)}
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    for future in admin.incremental_alter_configs(
            [ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=entries)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for job in JOBS:
        producer.produce(TOPIC, job.encode())
    producer.flush(30)


def handle(consumer: ShareConsumer, msg: Message, done: list[str], dead: list[str]) -> None:
    job, attempt = (msg.value() or b"").decode(), msg.delivery_count() or 1
    try:
        work(job, attempt)
    except RuntimeError as exc:
        if attempt >= MAX_ATTEMPTS:
            print(f"  {job}: attempt {attempt} failed ({exc}), giving up: REJECT")
            consumer.acknowledge(msg, AcknowledgeType.REJECT)
            dead.append(job)
        else:
            print(f"  {job}: attempt {attempt} failed ({exc}), retry: RELEASE")
            consumer.acknowledge(msg, AcknowledgeType.RELEASE)
        return
    print(f"  {job}: done on attempt {attempt}: ACCEPT")
    consumer.acknowledge(msg, AcknowledgeType.ACCEPT)
    done.append(job)


def main() -> int:
    with BrokerProcess() as broker:
        print(f"broker up: bootstrap.servers={broker.bootstrap}")
        setup(broker.bootstrap)
        print(f"queued {len(JOBS)} jobs on {TOPIC!r}")
        consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP,
                                  "share.acknowledgement.mode": "explicit"})
        consumer.subscribe([TOPIC])
        done: list[str] = []
        dead: list[str] = []
        deadline = time.monotonic() + TIMEOUT_S
        try:
            while len(done) + len(dead) < len(JOBS):
                if time.monotonic() > deadline:
                    print(f"only {len(done) + len(dead)} of {len(JOBS)} jobs finished in {TIMEOUT_S:.0f}s",
                          file=sys.stderr)
                    return 1
                msgs = consumer.poll(1.0)
                for msg in msgs:
                    if msg.error() is None:
                        handle(consumer, msg, done, dead)
                if msgs:
                    consumer.commit_sync()  # send this batch's acknowledgements now
        finally:
            consumer.close()
        print(f"{len(done)} jobs done, {len(dead)} rejected after {MAX_ATTEMPTS} attempts: {', '.join(dead)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
