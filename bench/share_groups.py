"""Share-group consumption (KIP-932), strom beside Apache Kafka 4.3.1 in the same run (issue 25).

Per broker: ``--records`` records of ``--size`` bytes are produced to a fresh topic with
``--partitions`` partitions before any consumer starts; then ``--consumers`` share consumers
(confluent-kafka's ``ShareConsumer``, implicit acknowledgement, one process each, one share
group with ``share.auto.offset.reset=earliest`` set through IncrementalAlterConfigs) consume
until together they have received every record. The figure is records/s from the consumers'
common start to the last record; each process then closes (its last acknowledgements).

Printed: a table of records/s per broker and the target/result line for strom/kafka (issue 25:
floor 0.5x, goal >= 1.0x). ``--quick`` is a small run (50,000 records) that checks the harness.

Run: ``python bench/share_groups.py [--brokers strom,kafka] [--records N] [--partitions N]
[--consumers N] [--size B] [--quick] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from peers import Broker, KafkaBroker, StromBroker

log = logging.getLogger(__name__)

FLOOR, GOAL = 0.5, 1.0
TIMEOUT_S = 600.0


@dataclass
class Result:
    broker: str
    records: int
    seconds: float
    records_per_s: float
    per_consumer: list[int]


def produce(bootstrap: str, topic: str, records: int, partitions: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "acks": "all", "compression.type": "none"})
    failed: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            failed.append(err)

    payload = b"x" * size
    for i in range(records):
        while True:
            try:
                producer.produce(topic, payload, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)  # local queue full: back-pressure, serve delivery reports
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    if failed or left:
        raise RuntimeError(f"produce: {len(failed)} failed ({failed[:3]}), {left} unacknowledged")


def consumer_main(bootstrap: str, topic: str, group: str, total: int, received: Synchronized[int],
                  mine: Synchronized[int], ready: Synchronized[int], start: Synchronized[float],
                  done: Synchronized[float]) -> None:
    """One share consumer process: poll until every consumer together has ``total`` records."""
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([topic])
    with ready.get_lock():
        ready.value += 1
    while start.value == 0.0:  # start together, once every process is up
        time.sleep(0.01)
    deadline = time.monotonic() + TIMEOUT_S
    while received.value < total and time.monotonic() < deadline:
        msgs = consumer.poll(0.2)
        n = sum(1 for m in msgs if m.error() is None)
        if n:
            mine.value += n
            with received.get_lock():
                received.value += n
                if received.value >= total and done.value == 0.0:
                    done.value = time.time()
    consumer.close()


def run_broker(broker: Broker, args: argparse.Namespace) -> Result:
    topic, group = f"share-bench-{uuid.uuid4().hex[:8]}", f"share-bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=args.partitions, replication_factor=1)])[topic].result(60)
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                                  incremental_configs=[entry])]).values():
        future.result(30)
    log.info("%s: producing %d records of %d B to %d partitions", broker.name, args.records, args.size,
             args.partitions)
    produce(broker.bootstrap, topic, args.records, args.partitions, args.size)
    ctx = mp.get_context("spawn")
    received, ready = ctx.Value("q", 0), ctx.Value("q", 0)
    start, done = ctx.Value("d", 0.0), ctx.Value("d", 0.0)
    mine = [ctx.Value("q", 0) for _ in range(args.consumers)]
    procs = [ctx.Process(target=consumer_main, args=(broker.bootstrap, topic, group, args.records, received,
                                                      mine[i], ready, start, done), name=f"share-consumer-{i}")
             for i in range(args.consumers)]
    for p in procs:
        p.start()
    # The clock starts once every process has imported and subscribed (joining is in the figure).
    deadline = time.monotonic() + 120
    while ready.value < args.consumers:
        if time.monotonic() > deadline or not all(p.is_alive() for p in procs):
            raise RuntimeError(f"{broker.name}: only {ready.value} of {args.consumers} consumers started")
        time.sleep(0.05)
    start.value = time.time()
    for p in procs:
        p.join(TIMEOUT_S + 60)
    if received.value < args.records or done.value == 0.0:
        raise RuntimeError(f"{broker.name}: {received.value:,} of {args.records:,} records consumed "
                           f"within {TIMEOUT_S:.0f}s")
    seconds = done.value - start.value
    return Result(broker.name, args.records, round(seconds, 3), round(args.records / seconds, 1),
                  [m.value for m in mine])


def make_broker(name: str) -> Broker:
    if name == "strom":
        return StromBroker()
    if name == "kafka":
        return KafkaBroker()
    raise SystemExit(f"unknown broker {name!r}: strom or kafka")


def render(results: list[Result]) -> str:
    lines = [f"{'broker':8} {'records':>10} {'seconds':>8} {'records/s':>11}  per consumer"]
    lines += [f"{r.broker:8} {r.records:>10,} {r.seconds:>8.2f} {r.records_per_s:>11,.0f}  {r.per_consumer}"
              for r in results]
    by = {r.broker: r for r in results}
    if "strom" in by and "kafka" in by:
        ratio = by["strom"].records_per_s / by["kafka"].records_per_s
        verdict = "goal met" if ratio >= GOAL else "floor met" if ratio >= FLOOR else "BELOW FLOOR"
        lines.append(f"target: strom/kafka >= {FLOOR}x (floor), >= {GOAL}x (goal); result: {ratio:.2f}x ({verdict})")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--brokers", default="strom,kafka")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--consumers", type=int, default=4)
    ap.add_argument("--size", type=int, default=100, help="value bytes per record")
    ap.add_argument("--quick", action="store_true", help="50,000 records: a check of the harness")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.quick:
        args.records = min(args.records, 50_000)
    return args


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    args = parse_args(argv)
    results: list[Result] = []
    for name in [b.strip() for b in args.brokers.split(",") if b.strip()]:
        broker = make_broker(name).start()
        try:
            results.append(run_broker(broker, args))
        finally:
            broker.stop()
        log.info("%s: %s records/s", name, f"{results[-1].records_per_s:,.0f}")
    print(render(results))
    if args.json is not None:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                         "results": [asdict(r) for r in results]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
