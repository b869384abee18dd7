"""Write DataFrame rows to Kafka (batch and streaming), as spark-sql-kafka's sink.

Columns: ``value`` (required, string or binary), ``key`` (optional, string or binary), ``topic``
(string; the ``topic`` option overrides it), ``partition`` (optional int; otherwise the
producer's partitioner), ``headers`` (optional ``array<struct<key string, value binary>>``).
Rows arrive as Arrow record batches (``DataSourceArrowWriter``) and go to one confluent-kafka
Producer per task; the task ends with ``flush()`` and fails if any record was not acknowledged
(at-least-once, like spark-sql-kafka).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from strom.spark_bridge.exceptions import ClientTimeoutError, KafkaClientError, OptionError, SinkSchemaError
from strom.spark_bridge.options import SinkOptions


@dataclass
class WriteResult(WriterCommitMessage):
    records: int


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """spark-sql-kafka's checks of the input columns, with its messages' gist."""
    names = {f.name.lower(): f for f in schema.fields}
    if "value" not in names:
        raise SinkSchemaError("required attribute 'value' not found in the DataFrame")
    for col in ("key", "value"):
        if col in names and not isinstance(names[col].dataType, StringType | BinaryType):
            raise SinkSchemaError(f"{col} attribute type must be a string or binary, "
                              f"got {names[col].dataType.simpleString()}")
    if options.topic is None and "topic" not in names:
        raise OptionError("topic", "topic option required when no 'topic' attribute is present; "
                          "use the topic option for setting a topic")
    if "topic" in names and not isinstance(names["topic"].dataType, StringType):
        raise SinkSchemaError(f"topic attribute type must be a string, got {names['topic'].dataType.simpleString()}")
    if "partition" in names and not isinstance(names["partition"].dataType, IntegerType):
        raise SinkSchemaError("partition attribute type must be an int, got "
                          f"{names['partition'].dataType.simpleString()}")
    if "headers" in names and not isinstance(names["headers"].dataType, ArrayType):
        raise SinkSchemaError("headers attribute type must be array<struct<key:string,value:binary>>")


DEFAULT_MAX_BLOCK_MS = 60000  # Kafka's producer max.block.ms


def _producer_config(options: SinkOptions) -> tuple[dict[str, Any], int]:
    """The librdkafka config and Kafka's ``max.block.ms`` (kafka.max.block.ms; librdkafka has no
    such key, so it is taken out here)."""
    conf: dict[str, Any] = {"linger.ms": 5}
    conf.update(options.kafka)
    try:
        max_block_ms = int(conf.pop("max.block.ms", DEFAULT_MAX_BLOCK_MS))
    except ValueError:
        raise OptionError("kafka.max.block.ms", f"expected an integer, got {options.kafka['max.block.ms']!r}") \
            from None
    return conf, max_block_ms


def _produce_blocking(producer: Producer, max_block_ms: int, topic: str, value: Any, key: Any,
                      on_delivery: Any, kwargs: dict[str, Any]) -> None:
    """The local queue is full: serve delivery reports until there is room (back-pressure), for at
    most ``max.block.ms``; past it the task fails naming the topic and the option."""
    deadline = time.monotonic() + max_block_ms / 1000
    while True:
        producer.poll(0.1)
        try:
            producer.produce(topic, value, key, on_delivery=on_delivery, **kwargs)
            return
        except BufferError:
            if time.monotonic() >= deadline:
                raise ClientTimeoutError(f"no room in the producer queue for a record to {topic} within "
                                         f"{max_block_ms} ms (kafka.max.block.ms)") from None


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    idx = batch.schema.get_field_index(name)
    if idx < 0:
        # Column names are case-insensitive in Spark.
        lowered = [n.lower() for n in batch.schema.names]
        if name not in lowered:
            return None
        idx = lowered.index(name)
    col = batch.column(idx)
    if (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)) and name in ("key", "value"):
        col = col.cast(pa.binary())
    result: list[Any] = col.to_pylist()
    return result


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row of ``batches``; returns the count once all are acknowledged."""
    conf, max_block_ms = _producer_config(options)
    try:
        producer = Producer(conf)
    except KafkaException as exc:
        raise OptionError("kafka.*", f"rejected by the Kafka client: {exc}") from None
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None and len(errors) < 5:
            errors.append(f"{msg.topic()}: {err}")

    count = 0
    produce = producer.produce
    for batch in batches:
        n = batch.num_rows
        values = _column(batch, "value") or [None] * n
        keys = _column(batch, "key") or [None] * n
        topics = [options.topic] * n if options.topic is not None else _column(batch, "topic")
        parts = _column(batch, "partition")
        headers = _column(batch, "headers")
        assert topics is not None
        for i in range(n):
            topic = topics[i]
            if topic is None:
                raise OptionError("topic", "null topic present in the data; use the topic option for "
                                  "setting a topic")
            kwargs: dict[str, Any] = {}
            if parts is not None and parts[i] is not None:
                kwargs["partition"] = parts[i]
            if headers is not None and headers[i]:
                kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            try:
                produce(topic, values[i], keys[i], on_delivery=on_delivery, **kwargs)
            except BufferError:
                _produce_blocking(producer, max_block_ms, topic, values[i], keys[i], on_delivery, kwargs)
            count += 1
        producer.poll(0)
    remaining = producer.flush(120)
    if remaining:
        raise KafkaClientError(f"{remaining} records were not acknowledged within 120 s")
    if errors:
        raise KafkaClientError("records were not written: " + "; ".join(errors))
    return count


class StromBatchWriter(DataSourceArrowWriter):
    """``df.write.format("strom")``."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema, options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return WriteResult(write_batches(self.options, iterator))


class StromStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("strom")``: every micro-batch is written by its tasks (at-least-once)."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema, options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return WriteResult(write_batches(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        return None

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        return None
