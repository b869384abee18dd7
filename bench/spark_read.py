"""Read a topic into a Spark DataFrame count: format "strom" vs spark-sql-kafka vs a plain consumer.

One strom broker (fresh data dir), one topic (``--partitions``, default 2), ``--records``
records (default 1,000,000) of ``--size`` bytes (default 100), produced once. Then, in the same
run and on the same data:

- **plain**: one confluent-kafka Consumer, partitions assigned from offset 0, ``consume(10000)``
  in a loop counting messages (error-checked) until it has them all: the floor any
  Python reader built on confluent-kafka can reach on one core.
- **strom**: ``spark.read.format("strom")...load().count()`` on ``local[2]``.
- **spark-sql-kafka**: ``spark.read.format("kafka")...load().count()`` in the same SparkSession;
  the connector (Scala 2.13, the installed Spark's version or the newest below it on Maven
  Central, see scripts/spark_ref/connector.py) is resolved through ``spark.jars.packages``.

Before timing, one untimed aggregate per Spark format (count, sum(offset), sum(length(value)),
partitions) is checked against what was produced: it proves both connectors read the bundled
broker correctly. Then ``--warmup`` (default 2) untimed counts per format warm the JVM's JIT and
the Python workers (the first counts of a fresh JVM cost up to twice the CPU). Each timed
figure is the best of ``--repeat`` runs (default 3); the plain consumer gets the same repeats. Prints rows/s and the ratios strom/spark-sql-kafka and
strom/plain (issue 6's floor: >= 0.5 and >= 0.7).

    python bench/spark_read.py                       # full size
    python bench/spark_read.py --records 200000      # quick
    python bench/spark_read.py --skip-kafka          # no Maven resolution
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from peers import StromBroker

from strom.core.testing import import_script

ROOT = Path(__file__).resolve().parents[1]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def produce(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_048_576,
                  "acks": 1, "queue.buffering.max.messages": 1_000_000})
    payload = b"x" * size
    failed: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    for i in range(records):
        while True:
            try:
                p.produce(topic, payload, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        if i % 100_000 == 0:
            p.poll(0)
    if p.flush(120) or failed:
        raise RuntimeError(f"produce failed: {failed[:3]}")


def read_plain(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-plain", "enable.auto.commit": False,
                  "fetch.queue.backoff.ms": 10, "isolation.level": "read_uncommitted"})
    c.list_topics(topic, timeout=10)  # metadata first: its lookup is not part of the read
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    n = 0
    t0 = time.perf_counter()
    while n < records:
        # Ask for no more than is left: librdkafka's batch consume waits for the full count
        # or the timeout, which would idle the last call for the whole timeout.
        for m in c.consume(min(10_000, records - n), 1.0):
            err = m.error()
            if err is None:
                n += 1
            elif err.code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(str(err))
    elapsed = time.perf_counter() - t0
    c.close()
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2,
                    help="untimed full counts per Spark format after the check (JIT warm-up)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--skip-kafka", action="store_true", help="leave spark-sql-kafka out")
    ap.add_argument("--json", type=Path, help="write settings and figures here")
    args = ap.parse_args()

    import pyspark
    from pyspark.sql import SparkSession

    import strom.spark_bridge

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    coordinate = note = None
    if not args.skip_kafka:
        # scripts/spark_ref is not a package: its connector.py is imported by path
        connector = import_script(ROOT / "scripts" / "spark_ref" / "connector.py")
        coordinate, note = connector.connector_coordinate(pyspark.__version__)
        if note:
            log(note)

    topic = "spark-read-bench"
    broker = StromBroker().start()
    results: dict[str, float] = {}
    exit_code = 0
    try:
        log(f"producing {args.records:,} records of {args.size} B to {args.partitions} partitions")
        produce(broker.bootstrap, topic, args.partitions, args.records, args.size)

        plain = [read_plain(broker.bootstrap, topic, args.partitions, args.records) for _ in range(args.repeat)]
        results["plain confluent-kafka consumer"] = min(plain)
        log(f"plain: {[round(x, 2) for x in plain]} s")

        builder = (SparkSession.builder.master(args.master).appName("strom-spark-read-bench")
                   .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.driver.memory", "2g")
                   .config("spark.sql.shuffle.partitions", "2"))
        if coordinate:
            builder = builder.config("spark.jars.packages", coordinate)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        strom.spark_bridge.register(spark)
        formats = {"strom": "strom"}
        if coordinate:
            formats["spark-sql-kafka"] = "kafka"

        def load(fmt: str) -> Any:
            return (spark.read.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap)
                    .option("subscribe", topic).option("startingOffsets", "earliest").load())

        per_part = [len(range(p, args.records, args.partitions)) for p in range(args.partitions)]
        expected = {"n": args.records, "offsets": sum(k * (k - 1) // 2 for k in per_part),
                    "bytes": args.records * args.size, "parts": args.partitions}
        for label, fmt in formats.items():
            row = load(fmt).selectExpr("count(*) AS n", "sum(offset) AS offsets",
                                       "sum(length(value)) AS bytes",
                                       "count(DISTINCT partition) AS parts").collect()[0]
            got = row.asDict()
            if got != expected:
                log(f"{label}: VERIFY FAILED: got {got}, expected {expected}")
                exit_code = 1
            else:
                log(f"{label}: verified {got}")

        for _ in range(args.warmup):
            for fmt in formats.values():
                load(fmt).count()
        for label, fmt in formats.items():
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                n = load(fmt).count()
                times.append(time.perf_counter() - t0)
                if n != args.records:
                    log(f"{label}: count {n} != {args.records}")
                    exit_code = 1
            log(f"{label}: {[round(x, 2) for x in times]} s")
            results[f"{label} (Spark {args.master})"] = min(times)
        spark.stop()
    finally:
        broker.stop()

    print(f"\nspark_read: {args.records:,} records x {args.size} B, {args.partitions} partitions, "
          f"strom broker, pyspark {pyspark.__version__}" + (f", connector {coordinate}" if coordinate else ""))
    if note:
        print(f"note: {note}")
    print(f"{'reader':45} {'seconds':>8} {'rows/s':>12}")
    for label, secs in results.items():
        print(f"{label:45} {secs:8.2f} {args.records / secs:12,.0f}")
    strom_s = results.get(f"strom (Spark {args.master})")
    ratios: dict[str, float] = {}
    if strom_s:
        for label, secs in results.items():
            if not label.startswith("strom"):
                ratios[label] = secs / strom_s
                print(f"ratio strom / {label}: {secs / strom_s:.2f}x (rows/s; >1 strom faster)")
    if args.json:
        args.json.write_text(json.dumps({"records": args.records, "size": args.size,
                                         "partitions": args.partitions, "pyspark": pyspark.__version__,
                                         "connector": coordinate, "note": note, "seconds": results,
                                         "ratios": ratios}, indent=2))
    return exit_code


if __name__ == "__main__":
    raise SystemExit(main())
