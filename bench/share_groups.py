"""Share-group consumption (KIP-932), strom beside Apache Kafka 4.3.1 in the same run (issue 25).

Per broker: ``--records`` records of ``--size`` bytes are produced to a fresh topic with
``--partitions`` partitions before any consumer starts; then ``--consumers`` share consumers
(confluent-kafka's ``ShareConsumer``, implicit acknowledgement, one process each, one share
group with ``share.auto.offset.reset=earliest`` set through IncrementalAlterConfigs) consume
until together they have received every record. The figure is records/s from the consumers'
common start to the last record; each process then closes (its last acknowledgements).

The run has two phases, printed apart: the wait for the first record, and the consumption from
the first record to the last. A fresh share group waits about one heartbeat interval
(``group.share.heartbeat.interval.ms``, 5 s) for its first records on both brokers: Kafka 4.3.1
answers the join with nothing assigned, initializes the share partitions, and assigns them at
the member's next heartbeat; strom does the same (the epochs are compared in
tests/coordinator/share/test_share_group_reference.py). With 1,000,000 records that wait is
most of the run, so the consumption phase's records/s is what compares the fetch paths.

Printed: a table of records/s per broker and the target/result line for strom/kafka (issue 25:
floor 0.5x, goal >= 1.0x). ``--quick`` is a small run (50,000 records) that checks the harness.
Deliveries are counted per consumer; each consumer also keeps the (partition, offset) of what
it got, so the result tells distinct records and redeliveries apart (counted as deliveries
only, a record delivered twice would stand in for one never delivered).

``--timeout`` bounds the consumers' run (default 600 s): a caller with its own deadline (the
test) passes a shorter one, so that a stalled run ends with the bench's own account (records
per consumer, which consumer died and how) instead of being killed with nothing said. A consumer
process that dies ends the run at once with its exit code.

Run: ``python bench/share_groups.py [--brokers strom,kafka] [--records N] [--partitions N]
[--consumers N] [--size B] [--quick] [--timeout S] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import queue
import sys
import time
import uuid
from array import array
from dataclasses import asdict, dataclass
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

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
    distinct: int = 0  # distinct (partition, offset) pairs delivered
    redelivered: int = 0  # deliveries beyond the first of a record
    first_record_s: float = 0.0  # from the start to the first record any consumer got
    consume_records_per_s: float = 0.0  # from the first record to the last


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
                  first: Synchronized[float], done: Synchronized[float], timeout_s: float, seen: Any) -> None:
    """One share consumer process: poll until every consumer together has ``total`` records;
    then put the (partition, offset) pairs it got on ``seen``, as one array per partition."""
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([topic])
    got: dict[int, array[int]] = {}
    with ready.get_lock():
        ready.value += 1
    while start.value == 0.0:  # start together, once every process is up
        time.sleep(0.01)
    deadline = time.monotonic() + timeout_s
    while received.value < total and time.monotonic() < deadline:
        msgs = consumer.poll(0.2)
        n = 0
        for m in msgs:
            if m.error() is None:
                n += 1
                part = m.partition() or 0
                offsets = got.get(part)
                if offsets is None:
                    offsets = got[part] = array("q")
                offsets.append(m.offset() or 0)
        if n:
            mine.value += n
            with received.get_lock():
                if first.value == 0.0:
                    first.value = time.time()
                received.value += n
                if received.value >= total and done.value == 0.0:
                    done.value = time.time()
    consumer.close()
    seen.put({p: o.tobytes() for p, o in got.items()})


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
    start, first, done = ctx.Value("d", 0.0), ctx.Value("d", 0.0), ctx.Value("d", 0.0)
    mine = [ctx.Value("q", 0) for _ in range(args.consumers)]
    seen = ctx.Queue()
    procs = [ctx.Process(target=consumer_main, args=(broker.bootstrap, topic, group, args.records, received,
                                                      mine[i], ready, start, first, done, args.timeout, seen),
                         name=f"share-consumer-{i}")
             for i in range(args.consumers)]
    for p in procs:
        p.start()
    try:
        # The clock starts once every process has imported and subscribed (joining is in the figure).
        deadline = time.monotonic() + 120
        while ready.value < args.consumers:
            if time.monotonic() > deadline or not all(p.is_alive() for p in procs):
                raise RuntimeError(f"{broker.name}: only {ready.value} of {args.consumers} consumers started "
                                   f"(exit codes {[p.exitcode for p in procs]})")
            time.sleep(0.05)
        start.value = time.time()
        # Each consumer puts what it got on the queue once it has closed. Waiting on the queue,
        # not on join(): a process that put a large array exits only once it is read. A consumer
        # that died (poll raised) ends the run now, not after the timeout.
        reports: list[dict[int, bytes]] = []
        deadline = time.monotonic() + args.timeout + 60
        while len(reports) < args.consumers:
            try:
                reports.append(seen.get(timeout=0.5))
                continue
            except queue.Empty:
                pass
            died = [(p.name, p.exitcode) for p in procs if p.exitcode not in (None, 0)]
            if died or time.monotonic() > deadline:
                raise RuntimeError(f"{broker.name}: {received.value:,} of {args.records:,} records delivered, "
                                   f"per consumer {[m.value for m in mine]}; "
                                   + (f"consumer processes died: {died}" if died else
                                      f"consumers still running {args.timeout + 60:.0f}s after the start"))
        for p in procs:
            p.join(60)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()  # never leave a consumer behind (it would poll for --timeout seconds)
    distinct: set[tuple[int, int]] = set()
    for report in reports:
        for part, raw in report.items():
            offsets = array("q")
            offsets.frombytes(raw)
            distinct.update((part, o) for o in offsets)
    per_consumer = [m.value for m in mine]
    redelivered = sum(per_consumer) - len(distinct)
    if received.value < args.records or done.value == 0.0:
        raise RuntimeError(f"{broker.name}: {received.value:,} of {args.records:,} records delivered within "
                           f"{args.timeout:.0f}s, per consumer {per_consumer}")
    if redelivered:
        log.warning("%s: %d deliveries were redeliveries; %d distinct records of %d", broker.name, redelivered,
                    len(distinct), args.records)
    seconds = done.value - start.value
    consuming = max(done.value - first.value, 1e-6)
    return Result(broker.name, args.records, round(seconds, 3), round(args.records / seconds, 1),
                  per_consumer, len(distinct), redelivered, round(first.value - start.value, 3),
                  round(args.records / consuming, 1))


def make_broker(name: str) -> Broker:
    if name == "strom":
        return StromBroker()
    if name == "kafka":
        return KafkaBroker()
    raise SystemExit(f"unknown broker {name!r}: strom or kafka")


def render(results: list[Result]) -> str:
    lines = [f"{'broker':8} {'records':>10} {'seconds':>8} {'records/s':>11} {'first rec s':>11} "
             f"{'consume rec/s':>13}  per consumer"]
    lines += [f"{r.broker:8} {r.records:>10,} {r.seconds:>8.2f} {r.records_per_s:>11,.0f} {r.first_record_s:>11.2f} "
              f"{r.consume_records_per_s:>13,.0f}  {r.per_consumer}" for r in results]
    by = {r.broker: r for r in results}
    if "strom" in by and "kafka" in by:
        ratio = by["strom"].records_per_s / by["kafka"].records_per_s
        verdict = "goal met" if ratio >= GOAL else "floor met" if ratio >= FLOOR else "BELOW FLOOR"
        lines.append(f"target: strom/kafka >= {FLOOR}x (floor), >= {GOAL}x (goal); result: {ratio:.2f}x ({verdict})")
        phase = by["strom"].consume_records_per_s / by["kafka"].consume_records_per_s
        lines.append(f"consumption phase (first record to last): strom/kafka {phase:.2f}x; first record after "
                     f"{by['strom'].first_record_s:.2f} s (strom) and {by['kafka'].first_record_s:.2f} s (kafka)")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--brokers", default="strom,kafka")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--consumers", type=int, default=4)
    ap.add_argument("--size", type=int, default=100, help="value bytes per record")
    ap.add_argument("--quick", action="store_true", help="50,000 records: a check of the harness")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S,
                    help="seconds the consumers may take (a stalled run then ends with its account)")
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
