"""Columnar record batches: many records as columns, each record built only if someone asks.

Kafka Connect hands records around one object at a time. In Python, building that object is most
of what a simple pipeline costs: ~1 µs per record for a SourceRecord or a SinkRecord, more than
producing or consuming the record. These two classes let a task and the worker skip it.

* A source task may return a :class:`SourceRecordBatch` from ``poll()`` instead of a list: records
  from one source partition to one topic, given as columns. The worker produces straight from the
  columns when nothing needs the records themselves (no transformations, no ``commit_record``
  override, no exactly-once transaction boundary per record).
* A sink task's ``put()`` receives a :class:`SinkRecordBatch` when the worker's fast path applies
  (one topic, no headers, no transformations). A task that knows the class reads the columns.

Both are read-only ``Sequence`` s of records, so a task or transformation that iterates or
indexes them works unchanged: the records are built on first touch (all at once) and kept.

Thread-safety: none needed; a batch belongs to the task thread that made or received it.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import repeat
from typing import Any, TypeVar, overload

from strom.connect.api.records import NO_TIMESTAMP_TYPE, SinkRecord, SourceRecord
from strom.connect.data.schema import Schema

R = TypeVar("R", SourceRecord, SinkRecord)


class _RecordColumns(Sequence[R]):
    """What both batch kinds share: a ``values`` column that sets the length, and the lazily
    built records behind the Sequence protocol."""

    __slots__ = ("_records", "topic", "values")
    _records: list[R] | None
    topic: str
    values: Sequence[Any]

    @abstractmethod
    def _build(self) -> list[R]:
        """Build every record from the columns."""

    def records(self) -> list[R]:
        """The records as objects (built on the first call, then kept)."""
        if self._records is None:
            self._records = self._build()
        return self._records

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, index: int) -> R: ...

    @overload
    def __getitem__(self, index: slice) -> list[R]: ...

    def __getitem__(self, index: int | slice) -> R | list[R]:
        return self.records()[index]

    def __iter__(self) -> Iterator[R]:
        return iter(self.records())

    def __bool__(self) -> bool:
        return len(self.values) > 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _RecordColumns):
            return self.records() == other.records()
        if isinstance(other, list):
            return self.records() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable-ish container semantics, like list

    def __repr__(self) -> str:
        return f"{type(self).__name__}(topic={self.topic!r}, records={len(self)})"


class SourceRecordBatch(_RecordColumns[SourceRecord]):
    """Records read from one source partition, bound for one topic, as columns.

    ``source_offsets[i]`` is the source offset after ``values[i]`` (a Sequence; it may compute
    its items lazily: the worker reads only the last one unless it builds the records). ``keys``
    ``None`` means every key is null; ``kafka_partition`` ``None`` lets the producer's
    partitioner choose, as for a SourceRecord. ``timestamps`` (one per record) overrides the
    single ``timestamp``.
    """

    __slots__ = (
        "kafka_partition",
        "key_schema",
        "keys",
        "source_offsets",
        "source_partition",
        "timestamp",
        "timestamps",
        "value_schema",
    )

    def __init__(self, source_partition: Mapping[str, Any] | None,
                 source_offsets: Sequence[Mapping[str, Any] | None], topic: str,
                 value_schema: Schema | None, values: Sequence[Any], *, key_schema: Schema | None = None,
                 keys: Sequence[Any] | None = None, kafka_partition: int | None = None,
                 timestamp: int | None = None, timestamps: Sequence[int | None] | None = None) -> None:
        if len(source_offsets) != len(values):
            raise ValueError(f"{len(source_offsets)} source offsets for {len(values)} values")
        if keys is not None and len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys for {len(values)} values")
        if timestamps is not None and len(timestamps) != len(values):
            raise ValueError(f"{len(timestamps)} timestamps for {len(values)} values")
        self.source_partition = source_partition
        self.source_offsets = source_offsets
        self.topic = topic
        self.kafka_partition = kafka_partition
        self.key_schema = key_schema
        self.keys = keys
        self.value_schema = value_schema
        self.values = values
        self.timestamp = timestamp
        self.timestamps = timestamps
        self._records: list[SourceRecord] | None = None

    def last_source_offset(self) -> Mapping[str, Any] | None:
        """The offset to commit once every record of the batch is written."""
        return self.source_offsets[-1] if len(self.values) else None

    def _build(self) -> list[SourceRecord]:
        sp, topic, part, ks, vs, ts = (self.source_partition, self.topic, self.kafka_partition, self.key_schema,
                                       self.value_schema, self.timestamp)
        keys = repeat(None) if self.keys is None else self.keys
        stamps: Iterable[int | None] = repeat(ts) if self.timestamps is None else self.timestamps
        return [SourceRecord(sp, off, topic, part, ks, k, vs, v, t)
                for off, k, v, t in zip(self.source_offsets, keys, self.values, stamps, strict=False)]  # lengths checked in __init__


class SinkRecordBatch(_RecordColumns[SinkRecord]):
    """Records consumed from one topic, as columns (``kafka_partitions[i]``, ``kafka_offsets[i]``,
    ``keys[i]``, ``values[i]`` describe record ``i``; each column has one schema).

    ``timestamps`` holds ``(timestamp_type, timestamp)`` pairs as confluent-kafka's
    ``Message.timestamp()`` returns them (type 0: none, 1: create time, 2: log-append time);
    ``None`` means no timestamps.
    """

    __slots__ = ("_timestamps", "kafka_offsets", "kafka_partitions", "key_schema", "keys", "value_schema")

    def __init__(self, topic: str, kafka_partitions: Sequence[int], kafka_offsets: Sequence[int],
                 key_schema: Schema | None, keys: Sequence[Any], value_schema: Schema | None, values: Sequence[Any],
                 timestamps: Sequence[tuple[int, int]] | None = None) -> None:
        n = len(values)
        if not (len(kafka_partitions) == len(kafka_offsets) == len(keys) == n) or (
                timestamps is not None and len(timestamps) != n):
            raise ValueError("every column of a SinkRecordBatch needs one item per record")
        self.topic = topic
        self.kafka_partitions = kafka_partitions
        self.kafka_offsets = kafka_offsets
        self.key_schema = key_schema
        self.keys = keys
        self.value_schema = value_schema
        self.values = values
        self._timestamps = timestamps
        self._records: list[SinkRecord] | None = None

    def _build(self) -> list[SinkRecord]:
        stamps: Iterable[tuple[int, int]] = repeat((0, -1)) if self._timestamps is None else self._timestamps
        topic, ks, vs, names = self.topic, self.key_schema, self.value_schema, _TS_TYPES
        return [SinkRecord(topic, part, ks, key, vs, value, off, ts[1] if ts[0] else None,
                           names.get(ts[0], NO_TIMESTAMP_TYPE))
                for part, key, value, off, ts in zip(self.kafka_partitions, self.keys, self.values,
                                                     self.kafka_offsets, stamps, strict=self._timestamps is not None)]


# confluent-kafka's timestamp types -> Kafka's TimestampType names.
_TS_TYPES = {1: "CreateTime", 2: "LogAppendTime"}

__all__ = ["SinkRecordBatch", "SourceRecordBatch"]
