"""A Spark pipeline on Kafka topics through the "strom" data source (the example of issue 6).

    python examples/spark_pipeline.py                          # starts its own bundled broker
    python examples/spark_pipeline.py --bootstrap 127.0.0.1:9092   # or use `strom dev` / any Kafka

Produces sample orders (JSON values keyed by order id) to the topic ``orders``, reads the topic
with ``spark.read.format("strom")``, totals the amounts per customer in Spark, and writes the
result both back to Kafka (topic ``order-totals``, key = customer, value = JSON) and to Parquet
(``--out``, default ./.strom-examples/spark-pipeline under the working directory). Finally reads ``order-totals`` back and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from contextlib import ExitStack
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import strom.spark_bridge
from strom.core.testing import BrokerProcess
from strom.core.tools.common import require_broker

CUSTOMERS = ["ada", "grace", "linus", "barbara", "ken"]


def produce_orders(bootstrap: str, count: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=10).topics
    new = [NewTopic(t, num_partitions=3, replication_factor=1) for t in ("orders", "order-totals")
           if t not in existing]
    for fut in (admin.create_topics(new).values() if new else []):
        fut.result(30)
    rng = random.Random(42)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        order = {"id": i, "customer": rng.choice(CUSTOMERS), "amount": round(rng.uniform(1, 100), 2)}
        p.produce("orders", key=str(i).encode(), value=json.dumps(order).encode())
    p.flush(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", help="an existing cluster; default: start a bundled broker")
    ap.add_argument("--orders", type=int, default=10_000)
    ap.add_argument("--out", default=str(Path.cwd() / ".strom-examples" / "spark-pipeline"),
                    help="Parquet output directory (default: ./.strom-examples/spark-pipeline)")
    args = ap.parse_args()

    with ExitStack() as stack:
        if args.bootstrap:
            require_broker(args.bootstrap)  # no broker: say to start `strom dev`, no trace
        bootstrap = args.bootstrap or stack.enter_context(BrokerProcess()).bootstrap
        print(f"broker: {bootstrap}")
        produce_orders(bootstrap, args.orders)

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = (SparkSession.builder.master("local[2]").appName("strom-spark-pipeline")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
                 .getOrCreate())
        stack.callback(spark.stop)
        spark.sparkContext.setLogLevel("ERROR")
        strom.spark_bridge.register(spark)

        orders = (spark.read.format("strom").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", "orders").option("startingOffsets", "earliest").load()
                  .select(F.from_json(F.col("value").cast("string"),
                                      "id long, customer string, amount double").alias("o"))
                  .select("o.*"))
        totals = (orders.groupBy("customer")
                  .agg(F.count("*").alias("orders"), F.round(F.sum("amount"), 2).alias("total"))
                  .cache())

        totals.write.mode("overwrite").parquet(args.out)
        (totals.select(F.col("customer").alias("key"),
                       F.to_json(F.struct("customer", "orders", "total")).alias("value"))
         .write.format("strom").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", "order-totals").mode("append").save())

        print(f"parquet: {args.out}")
        spark.read.parquet(args.out).orderBy("customer").show()
        print("topic order-totals:")
        (spark.read.format("strom").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", "order-totals").load()
         .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition", "offset")
         .orderBy("key").show(truncate=False))


if __name__ == "__main__":
    main()
