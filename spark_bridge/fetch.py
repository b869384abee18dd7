"""Read one offset range from Kafka into Arrow record batches (executor side).

A confluent-kafka Consumer is assigned the range's partition at its first offset (no group
membership, nothing committed) and consumed in chunks of up to ``CHUNK`` messages; each chunk
becomes one ``pyarrow.RecordBatch`` built column by column (``map`` over the C methods of
``Message``, no per-row tuples), which PySpark hands to the JVM as is.

Data loss (failOnDataLoss): records before the partition's log start offset are gone (retention,
DeleteRecords) — raise :class:`DataLossError` when failOnDataLoss is true, otherwise log a
warning and read from the log start. With read_committed the consumer skips aborted records and
control markers, so the range ends when the consumer's position reaches its end, not when a
record with offset ``end - 1`` arrives.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa
from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, Message, TopicPartition

from strom.spark_bridge.exceptions import ClientTimeoutError, DataLossError, KafkaClientError, is_transient
from strom.spark_bridge.planning import OffsetRange

log = logging.getLogger(__name__)

CHUNK = 10_000
# Longest wait of one batch consume (see _read).
CONSUME_WAIT = 0.2

_value = Message.value
_key = Message.key
_offset = Message.offset
_timestamp = Message.timestamp
_headers = Message.headers
_error = Message.error


def consumer_config(kafka: dict[str, str], group_prefix: str) -> dict[str, Any]:
    """librdkafka settings of an executor's consumer; the user's ``kafka.*`` win where they overlap."""
    conf: dict[str, Any] = {
        # A group id is required by librdkafka even without subscribe(); spark-sql-kafka uses
        # a unique "<prefix>-<uuid>-executor" so no two queries share one.
        "group.id": f"{group_prefix}-{uuid.uuid4()}-executor",
        # librdkafka pauses fetching for fetch.queue.backoff.ms (1 s by default) whenever its
        # queue is full; a Spark task drains it as fast as it can, so a short backoff keeps the
        # partition flowing.
        "fetch.queue.backoff.ms": 10,
        # librdkafka defaults to read_committed; Kafka's Java client (and so spark-sql-kafka)
        # to read_uncommitted.
        "isolation.level": "read_uncommitted",
    }
    conf.update(kafka)
    conf.update({
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
    })
    return conf


def _data_loss(message: str, fail_on_data_loss: bool) -> None:
    if fail_on_data_loss:
        raise DataLossError(message + ". Some data may have been lost because it is no longer "
                            "available in Kafka (retention or DeleteRecords). If you want your query "
                            "to continue despite this, set the source option failOnDataLoss=false.")
    log.warning("%s; skipping them (failOnDataLoss=false)", message)


def _to_batch(msgs: list[Message], rng: OffsetRange, schema: pa.Schema,
              include_headers: bool) -> pa.RecordBatch:
    n = len(msgs)
    # (type, ms) pairs flattened straight into one int64 array: no per-row tuple unpacking.
    stamps = np.fromiter(chain.from_iterable(map(_timestamp, msgs)), dtype=np.int64, count=2 * n)
    first: int = msgs[0].offset()  # type: ignore[assignment]  # set on every record
    last: int = msgs[-1].offset()  # type: ignore[assignment]
    # Offsets within a partition only grow, so n records spanning n offsets are contiguous
    # (gaps come from compaction, aborted transactions and markers).
    offsets = (np.arange(first, last + 1, dtype=np.int64) if last - first + 1 == n
               else np.fromiter(map(_offset, msgs), dtype=np.int64, count=n))
    arrays: list[pa.Array] = [
        pa.array(list(map(_key, msgs)), type=pa.binary()),
        pa.array(list(map(_value, msgs)), type=pa.binary()),
        pa.repeat(pa.scalar(rng.topic, pa.string()), n),
        pa.repeat(pa.scalar(rng.partition, pa.int32()), n),
        pa.array(offsets),
        pa.array(stamps[1::2] * 1000, type=pa.int64()).cast(schema.field("timestamp").type),
        # librdkafka: 0 none, 1 CreateTime, 2 LogAppendTime; Kafka/Spark: -1, 0, 1.
        pa.array((stamps[0::2] - 1).astype(np.int32)),
    ]
    if include_headers:
        arrays.append(pa.array([h if h is not None else [] for h in map(_headers, msgs)],
                               type=schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def read_range(rng: OffsetRange, kafka: dict[str, str], schema: pa.Schema, *, include_headers: bool,
               fail_on_data_loss: bool, poll_timeout_ms: int,
               group_prefix: str = "spark-kafka-source") -> Iterator[pa.RecordBatch]:
    """Yield the records of ``rng`` as record batches in ``schema`` (kafka_schema's Arrow form)."""
    if rng.size <= 0:
        return
    consumer = Consumer(consumer_config(kafka, group_prefix))
    try:
        yield from _read(consumer, rng, schema, include_headers, fail_on_data_loss, poll_timeout_ms)
    finally:
        consumer.close()


def _log_start(consumer: Consumer, rng: OffsetRange, poll_timeout_ms: int) -> int:
    """The partition's log start offset; a broker away is retried within kafkaConsumer.pollTimeoutMs."""
    tp = f"{rng.topic}-{rng.partition}"
    deadline = time.monotonic() + poll_timeout_ms / 1000.0
    while True:
        try:
            low, _high = consumer.get_watermark_offsets(TopicPartition(rng.topic, rng.partition),
                                                        timeout=max(deadline - time.monotonic(), 0.5), cached=False)
            return int(low)
        except KafkaException as exc:
            if not is_transient(exc):
                raise KafkaClientError(f"cannot read the offsets of {tp}: {exc}") from None
            if time.monotonic() >= deadline:
                raise ClientTimeoutError(f"cannot read the offsets of {tp} within {poll_timeout_ms} ms "
                                         f"(kafkaConsumer.pollTimeoutMs): {exc}") from None
            log.warning("reading the offsets of %s failed, retrying: %s", tp, exc)


def _read(consumer: Consumer, rng: OffsetRange, schema: pa.Schema, include_headers: bool,
          fail_on_data_loss: bool, poll_timeout_ms: int) -> Iterator[pa.RecordBatch]:
    tp = f"{rng.topic}-{rng.partition}"
    timeout = poll_timeout_ms / 1000.0
    low = _log_start(consumer, rng, poll_timeout_ms)
    start, end = rng.from_offset, rng.until_offset
    if start < low:
        _data_loss(f"offsets [{start}, {min(low, end)}) of {tp} are before the log start offset {low}",
                   fail_on_data_loss)
        start = low
        if start >= end:
            return
    consumer.assign([TopicPartition(rng.topic, rng.partition, start)])
    position = start
    deadline = time.monotonic() + timeout
    while position < end:
        # librdkafka's batch consume returns only when it has num_messages or the timeout
        # expired: ask for no more than the range still holds, and wait briefly, so the tail
        # of a range never idles for a whole timeout (the EOF event comes only after a later
        # fetch). Gaps (markers, aborted or compacted records) cost a short wait each.
        want = max(1, min(CHUNK, end - position))
        msgs = consumer.consume(num_messages=want, timeout=min(CONSUME_WAIT, timeout))
        if not msgs:
            if time.monotonic() > deadline:
                raise ClientTimeoutError(f"no records from {tp} for {poll_timeout_ms} ms while reading "
                                         f"[{position}, {end}) (kafkaConsumer.pollTimeoutMs)")
            continue
        if not all(m.error() is not None and is_transient(m.error()) for m in msgs):
            deadline = time.monotonic() + timeout  # progress (records or the partition end)
        eof_at: int | None = None
        if any(map(_error, msgs)):
            good = []
            for m in msgs:
                err = m.error()
                if err is None:
                    good.append(m)
                elif err.code() == KafkaError._PARTITION_EOF:
                    eof_at = m.offset()
                elif is_transient(err):
                    # The broker went away or restarts: librdkafka reconnects and fetches on from
                    # its position; the pollTimeoutMs deadline bounds how long no record comes.
                    log.warning("reading %s: %s (retrying)", tp, err)
                elif err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    # Records deleted while we read: restart from the new log start.
                    low, _ = consumer.get_watermark_offsets(TopicPartition(rng.topic, rng.partition),
                                                            timeout=timeout, cached=False)
                    _data_loss(f"offsets [{position}, {min(low, end)}) of {tp} were deleted while reading",
                               fail_on_data_loss)
                    if low >= end:
                        return
                    position = low
                    consumer.assign([TopicPartition(rng.topic, rng.partition, low)])
                    good = []
                    break
                else:
                    raise KafkaClientError(f"error reading {tp}: {err}")
            msgs = good
        if msgs:
            last: int = msgs[-1].offset()  # type: ignore[assignment]  # set on every record
            if last >= end:
                # librdkafka prefetches past the range: keep only offsets below its end.
                cut = len(msgs)
                while cut and (msgs[cut - 1].offset() or 0) >= end:
                    cut -= 1
                msgs = msgs[:cut]
                position = end
            else:
                position = last + 1
            if msgs:
                yield _to_batch(msgs, rng, schema, include_headers)
        if eof_at is not None and position < end:
            # Reached the partition end; with read_committed the rest of the range may be
            # aborted records or markers that are never delivered: the position says.
            pos = consumer.position([TopicPartition(rng.topic, rng.partition)])[0].offset
            if pos != OFFSET_END and pos >= 0:
                position = max(position, pos)
            if eof_at >= end:
                position = end
