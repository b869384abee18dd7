"""The DataFrame schema of a Kafka source and sink, as spark-sql-kafka defines it.

Source rows: ``key binary, value binary, topic string, partition int, offset long,
timestamp timestamp, timestampType int`` and, with ``includeHeaders=true``,
``headers array<struct<key: string, value: binary>>``. The Arrow schema is derived with
PySpark's own conversion so record batches yielded by ``read()`` match it exactly (PySpark
compares the two, nullability included).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

if TYPE_CHECKING:
    import pyarrow as pa

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def kafka_schema(include_headers: bool = False) -> StructType:
    """spark-sql-kafka's source schema (every field nullable, as there)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema PySpark expects for ``schema`` (timestamps in UTC microseconds)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")
