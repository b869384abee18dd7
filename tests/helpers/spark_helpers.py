"""Helpers shared by the Spark bridge tests (imported by plain name: tests/helpers is on sys.path through tests/conftest.py)."""

from __future__ import annotations

import os
import sys

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession


def spark_builder(master: str = "local[2]") -> SparkSession.Builder:
    # Executors' Python workers must run this interpreter (it has strom installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return (SparkSession.builder.master(master)
            .appName("strom-spark-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.memory", "1g")
            .config("spark.sql.session.timeZone", "UTC"))


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes | None, bytes]],
            headers: list[tuple[str, str | bytes | None]] | None = None) -> None:
    """``records`` are (partition, key, value); fails the test if any is not acknowledged."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    errors: list[object] = []
    for part, key, value in records:
        p.produce(topic, value=value, key=key, partition=part, headers=headers,
                  on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert p.flush(30) == 0
    assert not errors, errors
