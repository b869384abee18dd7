"""PySpark Python data source "strom": Spark reads and writes Kafka topics through confluent-kafka.

``register(spark)`` makes ``spark.read.format("strom")``, ``readStream``, ``write`` and
``writeStream`` available in a session; options, schema and checkpointed offsets are
spark-sql-kafka's. ``DefaultSource`` is the name PySpark's data source auto-discovery looks for
(in top-level modules named ``pyspark_*``; see ``pyspark_strom.py`` beside this file).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.spark_bridge.source import StromDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DefaultSource = StromDataSource

__all__ = ["DefaultSource", "StromDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Register the "strom" format in ``spark`` (idempotent)."""
    spark.dataSource.register(StromDataSource)
