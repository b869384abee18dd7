"""The platform's main job: a connector feeds a Streams app, and Spark reads the result.

    pip install -e '.[spark]' && python examples/pipeline.py

1. **Broker**: the bundled strom broker starts as a subprocess on a free port.
2. **Connect**: a standalone strom.connect worker runs the datagen source connector (Confluent's
   ``pageviews`` quickstart, seeded) writing ``--records`` page views as JSON to ``pageviews``.
3. **Streams**: a strom.streams application (exactly_once_v2) counts the views per page into a
   RocksDB store with a changelog and writes the counts to ``pageview-counts``.
4. **Spark**: ``spark.read.format("strom")`` reads ``pageview-counts`` (read_committed), keeps the
   latest count per page, checks that the counts add up to the records the connector produced,
   and prints the most viewed pages.

Each step prints its progress; the script exits non-zero if the numbers do not add up.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from strom.connect.plugins import PluginRegistry
from strom.connect.runtime.config import WorkerConfig
from strom.connect.runtime.standalone import StandaloneHerder
from strom.core.testing import BrokerProcess
from strom.streams import Consumed, KafkaStreams, Produced, Serdes, StreamsBuilder

SOURCE_TOPIC = "pageviews"
COUNTS_TOPIC = "pageview-counts"


def step(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def create_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, num_partitions=3, replication_factor=1)
                                   for t in (SOURCE_TOPIC, COUNTS_TOPIC)])
    for future in futures.values():
        future.result(30)


def run_connector(bootstrap: str, workdir: Path, records: int) -> StandaloneHerder:
    config = WorkerConfig.from_mapping({
        "bootstrap.servers": bootstrap,
        "offset.storage.file.filename": str(workdir / "connect.offsets"),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
    })
    herder = StandaloneHerder(config, PluginRegistry())
    herder.start()
    herder.put_connector_config("pageviews-datagen", {
        "connector.class": "DatagenConnector", "tasks.max": "1", "kafka.topic": SOURCE_TOPIC,
        "quickstart": "pageviews", "iterations": str(records), "random.seed": "7",
        "max.interval": "0",
    }, allow_replace=False)
    return herder


def run_streams(bootstrap: str, workdir: Path) -> KafkaStreams:
    builder = StreamsBuilder()
    (builder.stream(SOURCE_TOPIC, Consumed.with_(Serdes.string(), Serdes.json()))
        .group_by(lambda key, view: view["pageid"])
        .count(materialized="views-per-page")
        .to_stream()
        .to(COUNTS_TOPIC, Produced.with_(Serdes.string(), Serdes.long())))
    app = KafkaStreams(builder.build(), {
        "application.id": "pageview-counts", "bootstrap.servers": bootstrap,
        "processing.guarantee": "exactly_once_v2", "commit.interval.ms": 500,
        "state.dir": str(workdir / "streams")})
    app.start()
    return app


def wait_counted(app: KafkaStreams, records: int, timeout: float) -> int:
    """Until the Streams store has counted every record (or the timeout); returns the total."""
    store = app.store("views-per-page")
    deadline = time.monotonic() + timeout
    total = last = 0
    while time.monotonic() < deadline:
        if app.errors():
            raise RuntimeError(f"the Streams application failed: {app.errors()[0]!r}")
        total = sum(n for _, n in store.all())
        if total >= records:
            return total
        if total != last:
            step(f"  streams: {total:,}/{records:,} page views counted")
            last = total
        time.sleep(1.0)
    return total


def read_with_spark(bootstrap: str) -> tuple[int, list[tuple[str, int]]]:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import strom.spark_bridge

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the broker is on loopback too
    spark = (SparkSession.builder.master("local[2]").appName("strom-platform")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    strom.spark_bridge.register(spark)
    try:
        updates = (spark.read.format("strom")
                   .option("kafka.bootstrap.servers", bootstrap)
                   .option("subscribe", COUNTS_TOPIC)
                   .option("kafka.isolation.level", "read_committed")
                   .load())
        # the value is a Kafka LongSerializer's 8 big-endian bytes; the last update per page wins
        counts = (updates
                  .select(F.col("key").cast("string").alias("page"), "offset", "partition",
                          F.conv(F.hex("value"), 16, 10).cast("long").alias("views"))
                  .groupBy("page")
                  .agg(F.max_by("views", "offset").alias("views")))
        rows = counts.orderBy(F.desc("views"), "page").collect()
        return sum(r["views"] for r in rows), [(r["page"], r["views"]) for r in rows]
    finally:
        spark.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=50_000, help="page views the connector produces")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="strom-platform-") as tmp, BrokerProcess() as broker:
        workdir = Path(tmp)
        step(f"1. broker up: bootstrap.servers={broker.bootstrap}; worker and Streams state in {workdir} "
             "(removed at the end)")
        create_topics(broker.bootstrap)
        herder = run_connector(broker.bootstrap, workdir, args.records)
        step(f"2. connect: datagen connector writing {args.records:,} page views to {SOURCE_TOPIC!r}")
        app = None
        try:
            app = run_streams(broker.bootstrap, workdir)
            step(f"3. streams: counting views per page into {COUNTS_TOPIC!r} (exactly_once_v2)")
            total = wait_counted(app, args.records, args.timeout)
            step(f"   streams: {total:,} page views counted; closing the app (final commit)")
        finally:
            if app is not None:
                app.close(60)
            herder.stop()
        if total != args.records:
            print(f"error: the Streams store counted {total:,} page views, expected {args.records:,}",
                  file=sys.stderr)
            return 1

        step(f"4. spark: reading {COUNTS_TOPIC!r} with format('strom')")
        spark_total, pages = read_with_spark(broker.bootstrap)
        step(f"   spark: {len(pages)} pages, {spark_total:,} views in all")
        for page, views in pages[:5]:
            print(f"     {page:<10} {views:>7,}")
        if spark_total != args.records:
            print(f"error: Spark read {spark_total:,} views, expected {args.records:,}", file=sys.stderr)
            return 1
    step("done: connector -> topic -> Streams -> topic -> Spark, every page view accounted for")
    return 0


if __name__ == "__main__":
    sys.exit(main())
