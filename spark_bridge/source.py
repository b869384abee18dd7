"""The "strom" PySpark data source: batch and streaming reads, batch and streaming writes.

``spark.read.format("strom")`` / ``spark.readStream.format("strom")`` take spark-sql-kafka's
options (see :mod:`strom.spark_bridge.options`). Planning (partition discovery, offset lookups)
runs on the driver through :class:`~strom.spark_bridge.offsets.KafkaMetadata`; each input
partition (one offset range) is read on an executor by :func:`~strom.spark_bridge.fetch.read_range`,
which yields Arrow record batches. Streaming offsets are spark-sql-kafka's JSON
``{"topic":{"partition":next_offset}}``, so checkpoints read the same.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from strom.spark_bridge.exceptions import OptionError
from strom.spark_bridge.fetch import read_range
from strom.spark_bridge.offsets import KafkaMetadata, PartitionOffsets, from_json_dict, to_json_dict
from strom.spark_bridge.options import SourceOptions, parse_sink_options, parse_source_options
from strom.spark_bridge.planning import (
    KafkaInputPartition,
    OffsetRange,
    offset_ranges,
    plan_partitions,
    rate_limit,
)
from strom.spark_bridge.schema import arrow_schema, kafka_schema

log = logging.getLogger(__name__)


class StromDataSource(DataSource):
    """Kafka topics as a Spark data source named ``strom`` (spark-sql-kafka's options and schema)."""

    @classmethod
    def name(cls) -> str:
        return "strom"

    def _source_options(self, streaming: bool) -> SourceOptions:
        return parse_source_options(dict(self.options), streaming=streaming)

    def schema(self) -> StructType:
        from strom.spark_bridge.options import parse_bool

        opts = {k.lower(): v for k, v in self.options.items()}
        return kafka_schema(parse_bool(opts, "includeheaders", False))

    def reader(self, schema: StructType) -> DataSourceReader:
        return StromBatchReader(self._source_options(streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StromStreamReader(self._source_options(streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from strom.spark_bridge.sink import StromBatchWriter

        return StromBatchWriter(parse_sink_options(dict(self.options)), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from strom.spark_bridge.sink import StromStreamWriter

        return StromStreamWriter(parse_sink_options(dict(self.options)), schema)


class _ReadMixin:
    """The executor half shared by batch and stream readers: one offset range -> record batches."""

    options: SourceOptions
    arrow: pa.Schema

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        rng = partition.value
        assert isinstance(rng, OffsetRange)
        return read_range(rng, self.options.kafka, self.arrow,
                          include_headers=self.options.include_headers,
                          fail_on_data_loss=self.options.fail_on_data_loss,
                          poll_timeout_ms=self.options.poll_timeout_ms,
                          group_prefix=self.options.group_id_prefix)


def _check_ranges(start: PartitionOffsets, end: PartitionOffsets) -> None:
    for tp, until in sorted(end.items()):
        frm = start.get(tp)
        if frm is not None and until < frm:
            raise OptionError("endingOffsets", f"ending offset {until} of {tp[0]}-{tp[1]} is before its "
                              f"starting offset {frm}")


class StromBatchReader(_ReadMixin, DataSourceReader):
    """Batch read: startingOffsets..endingOffsets of every subscribed partition."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.arrow = arrow_schema(schema)

    def partitions(self) -> Sequence[InputPartition]:
        md = KafkaMetadata(self.options)
        try:
            tps = md.partitions()
            start = md.resolve(self.options.starting, tps, option="startingOffsets", starting=True)
            end = md.resolve(self.options.ending, tps, option="endingOffsets", starting=False)
        finally:
            md.close()
        _check_ranges(start, end)
        parts = plan_partitions(offset_ranges(start, end), min_partitions=self.options.min_partitions,
                                max_records_per_partition=self.options.max_records_per_partition)
        # Spark needs at least one partition to run a job; an empty range reads nothing.
        return parts or [KafkaInputPartition(OffsetRange("", 0, 0, 0))]


class StromStreamReader(_ReadMixin, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch streaming read with maxOffsetsPerTrigger admission control and AvailableNow."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.arrow = arrow_schema(schema)
        self._md: KafkaMetadata | None = None
        self._target: PartitionOffsets | None = None  # Trigger.AvailableNow's fixed end

    def __getstate__(self) -> dict[str, Any]:
        # Executors get a pickled copy for read(); the driver's admin client stays behind.
        state = self.__dict__.copy()
        state["_md"] = None
        return state

    @property
    def md(self) -> KafkaMetadata:
        if self._md is None:
            self._md = KafkaMetadata(self.options)
        return self._md

    def initialOffset(self) -> dict[str, Any]:
        tps = self.md.partitions()
        start = self.md.resolve(self.options.starting, tps, option="startingOffsets", starting=True)
        return to_json_dict(start)

    def _latest(self) -> PartitionOffsets:
        latest = self.md.latest(self.md.partitions())
        if self._target is not None:
            # AvailableNow: nothing beyond what existed when the query started; partitions added
            # since are not read in this run.
            latest = {tp: min(off, self._target[tp]) for tp, off in latest.items() if tp in self._target}
        return latest

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.md.latest(self.md.partitions())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = from_json_dict(start)
        latest = self._latest()
        # Partitions that appeared since ``start`` begin at their earliest offset.
        new = [tp for tp in latest if tp not in begin]
        full_begin = {**begin, **self.md.earliest(new)} if new else begin
        # Partitions that went away keep their start so the offset never moves backwards.
        for tp, off in begin.items():
            if tp not in latest:
                latest[tp] = off
        # A deleted-and-recreated or truncated partition can report less than ``start``.
        for tp, off in list(latest.items()):
            if off < full_begin.get(tp, off):
                if self.options.fail_on_data_loss:
                    from strom.spark_bridge.exceptions import DataLossError

                    raise DataLossError(f"{tp[0]}-{tp[1]}: latest offset {off} is below the checkpointed "
                                        f"offset {full_begin[tp]} (topic recreated or truncated); set "
                                        "failOnDataLoss=false to continue from the new end")
                log.warning("%s-%s went back from %s to %s; continuing from there", tp[0], tp[1],
                            full_begin[tp], off)
                full_begin[tp] = off
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(full_begin, latest, limit.max_rows)
        return to_json_dict(latest)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return to_json_dict(self.md.latest(self.md.partitions()))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = from_json_dict(start)
        stop = from_json_dict(end)
        new = [tp for tp in stop if tp not in begin]
        if new:
            begin.update(self.md.earliest(new))
        return plan_partitions(offset_ranges(begin, stop), min_partitions=self.options.min_partitions,
                               max_records_per_partition=self.options.max_records_per_partition)

    def commit(self, end: dict[str, Any]) -> None:
        # Offsets live in Spark's checkpoint; nothing is committed to Kafka (as spark-sql-kafka).
        return None

    def stop(self) -> None:
        if self._md is not None:
            self._md.close()
            self._md = None
