"""A batch read through the "strom" source on a Spark standalone cluster (master + worker on localhost).

The executor is a separate JVM started by the worker, with its own Python workers: this proves the
source pickles, plans on the driver and reads on a remote executor, not only in local mode.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from spark_helpers import create_topic, produce, spark_builder

import strom.spark_bridge
from strom.core.testing import BrokerProcess, import_script

# scripts/spark_ref is not on the tests' import path: the script is imported by its path.
SparkStandalone = import_script(Path(__file__).resolve().parents[2] / "scripts" / "spark_ref"
                                / "spark_standalone.py").SparkStandalone


@pytest.fixture(scope="module")
def cluster_spark() -> Iterator[SparkSession]:
    with SparkStandalone(worker_cores=2, worker_memory="1g") as cluster:
        session = (spark_builder(cluster.master_url)
                   .config("spark.driver.host", "127.0.0.1")
                   .config("spark.executor.memory", "512m")
                   .config("spark.pyspark.python", sys.executable)
                   .getOrCreate())
        session.sparkContext.setLogLevel("ERROR")
        strom.spark_bridge.register(session)
        try:
            yield session
        finally:
            session.stop()


def test_batch_read_on_standalone_cluster(cluster_spark: SparkSession, broker: BrokerProcess,
                                          topic_name: str) -> None:
    assert str(cluster_spark.sparkContext.master).startswith("spark://")
    create_topic(broker.bootstrap, topic_name, 3)
    produce(broker.bootstrap, topic_name, [(i % 3, None, f"v{i}".encode()) for i in range(300)])
    df = (cluster_spark.read.format("strom").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic_name)
          .option("endingOffsets", json.dumps({topic_name: {"0": 90, "1": -1, "2": -1}})).load())
    by_partition = {r.partition: r["count"] for r in df.groupBy("partition").count().collect()}
    assert by_partition == {0: 90, 1: 100, 2: 100}
    # The tasks ran on the worker's executor, not in the driver.
    executors = cluster_spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()
    assert executors >= 2  # the driver's block manager plus at least one executor
