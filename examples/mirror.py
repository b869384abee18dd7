"""MirrorMaker 2 between two strom brokers, and a consumer group failing over.

    python examples/mirror.py [--records 20000]

1. **Two clusters**: ``primary`` and ``backup``, two bundled strom brokers on free ports.
2. **MirrorMaker**: dedicated mode (what ``strom connect mirror-maker mm2.properties`` runs) from
   an ``mm2.properties`` written here: ``primary->backup`` replicates ``orders`` into
   ``primary.orders`` on the backup, with checkpoints every second.
3. **A consumer group** ``billing`` reads part of ``orders`` on the primary and commits.
4. **Failover**: the primary stops. ``translate_offsets`` (Kafka's RemoteClusterUtils) reads
   the backup's ``primary.checkpoints.internal`` and says where ``billing`` resumes in
   ``primary.orders``; the group consumes the rest there. The script checks that no order is
   skipped and that at most ``offset.lag.max`` orders are read twice, and exits non-zero if not.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.connect.mirror import MirrorMakerConfig, translate_offsets
from strom.connect.mirror.maker import MirrorMaker
from strom.core.testing import BrokerProcess, wait_for

log = logging.getLogger("mirror-example")
TOPIC, GROUP, LAG_MAX = "orders", "billing", 100


def produce(bootstrap: str, n: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer came
    admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        while True:
            try:
                producer.produce(TOPIC, key=f"customer-{i % 97}".encode(), value=f"order-{i}".encode())
                break
            except BufferError:  # queue full: let deliveries drain, then retry
                producer.poll(0.1)
    producer.flush(60)


def consume(consumer: Consumer, want: int) -> list[str]:
    """Read ``want`` orders (or fewer if the topic ends)."""
    got: list[str] = []
    idle_since = time.monotonic()
    # the first records wait for the group to form (the broker delays a new group's first
    # rebalance by group.initial.rebalance.delay.ms, 3 s); after them, 3 s idle ends the read
    while len(got) < want and time.monotonic() - idle_since < (3 if got else 60):
        msgs = consumer.consume(min(500, want - len(got)), 1.0)
        for m in msgs:
            err, value = m.error(), m.value()
            if err is None and value is not None:
                got.append(value.decode())
                idle_since = time.monotonic()
            elif err is not None and err.code() != KafkaError._PARTITION_EOF:
                log.warning("consumer: %s", err.str())
    return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s", datefmt="%H:%M:%S", stream=sys.stdout)
    for noisy in ("strom.connect", "strom.core"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="strom-mirror-example-"))
    with BrokerProcess(work / "primary") as primary, BrokerProcess(work / "backup") as backup:
        log.info("primary at %s, backup at %s", primary.bootstrap, backup.bootstrap)
        props = {
            "clusters": "primary, backup",
            "primary.bootstrap.servers": primary.bootstrap,
            "backup.bootstrap.servers": backup.bootstrap,
            "primary->backup.enabled": "true",
            "primary->backup.topics": TOPIC,
            "primary->backup.emit.checkpoints.interval.seconds": "1",
            "primary->backup.sync.group.offsets.enabled": "true",
            "primary->backup.sync.group.offsets.interval.seconds": "1",
            "refresh.groups.interval.seconds": "1",
            "offset.lag.max": str(LAG_MAX),
            "emit.heartbeats.enabled": "false",
            "tasks.max": "3",
            # one broker per cluster: every internal topic with one replica
            "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
            "checkpoints.topic.replication.factor": "1", "heartbeats.topic.replication.factor": "1",
            "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1", "offset.flush.interval.ms": "1000",
        }
        (work / "mm2.properties").write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
        produce(primary.bootstrap, args.records)
        log.info("produced %d orders to %s on the primary", args.records, TOPIC)

        maker = MirrorMaker(MirrorMakerConfig.load(work / "mm2.properties"), ["backup"])
        maker.start()
        try:
            remote = f"primary.{TOPIC}"
            target = {"bootstrap.servers": backup.bootstrap}

            def mirrored() -> bool:
                c = Consumer({"bootstrap.servers": backup.bootstrap, "group.id": "example-probe"})
                try:
                    md = c.list_topics(remote, timeout=5).topics.get(remote)
                    if md is None or md.error is not None:
                        return False
                    return sum(c.get_watermark_offsets(TopicPartition(remote, p), timeout=5)[1]
                               for p in md.partitions) >= args.records
                finally:
                    c.close()

            wait_for(mirrored, 120, f"{remote} on the backup")
            log.info("MirrorMaker copied every order to %s on the backup", remote)
            # the application works on the primary while MirrorMaker runs
            half = args.records // 2
            consumer = Consumer({"bootstrap.servers": primary.bootstrap, "group.id": GROUP,
                                 "auto.offset.reset": "earliest", "enable.auto.commit": False})
            consumer.subscribe([TOPIC])
            first = consume(consumer, half)
            committed = [tp for tp in consumer.commit(asynchronous=False) or [] if tp.offset >= 0]
            consumer.close()
            log.info("group %s read %d orders on the primary and committed", GROUP, len(first))
            # a checkpoint per partition the group committed (it may not have read all three)
            offsets = wait_for(lambda: (t := translate_offsets(target, "primary", GROUP)) and len(t) == len(committed)
                               and t, 60, "checkpoints of group billing")
            primary.stop()
            log.info("primary stopped; %s resumes on the backup at %s", GROUP,
                     {f"{tp.topic}-{tp.partition}": o for tp, o in sorted(offsets.items())})
            consumer = Consumer({"bootstrap.servers": backup.bootstrap, "group.id": GROUP,
                                 "enable.auto.commit": False})
            # where the group resumes: its translated offsets; partitions it never read from the start
            resume = {p: 0 for p in range(3)} | {tp.partition: o for tp, o in offsets.items()}
            consumer.assign([TopicPartition(remote, p, o) for p, o in resume.items()])
            rest = consume(consumer, args.records)
            consumer.close()
        finally:
            maker.stop()
    seen, again = set(first), set(first) & set(rest)
    missing = {f"order-{i}" for i in range(args.records)} - seen - set(rest)
    log.info("after failover: %d orders read on the backup, %d of them already read on the primary, %d missing",
             len(rest), len(again), len(missing))
    if missing or len(again) > 3 * LAG_MAX:  # three partitions, each within offset.lag.max
        log.error("failover check FAILED")
        return 1
    log.info("failover check passed: nothing skipped, at most offset.lag.max re-read per partition")
    return 0


if __name__ == "__main__":
    sys.exit(main())
