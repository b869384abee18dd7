"""Split offset ranges into Spark input partitions, as spark-sql-kafka's KafkaOffsetRangeCalculator.

One :class:`KafkaInputPartition` per topic-partition offset range. With ``minPartitions`` larger
than the number of non-empty ranges, each range is split into pieces in proportion to its
share of the total records (at least one piece per range); ``maxRecordsPerPartition`` caps the
records of every piece.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from strom.spark_bridge.offsets import PartitionOffsets


@dataclass(frozen=True)
class OffsetRange:
    """Records ``[from_offset, until_offset)`` of one topic-partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return max(0, self.until_offset - self.from_offset)


class KafkaInputPartition(InputPartition):
    """The InputPartition Spark ships to an executor: one offset range."""

    def __init__(self, value: OffsetRange) -> None:
        super().__init__(value)
        self.value: OffsetRange = value


def offset_ranges(start: PartitionOffsets, end: PartitionOffsets) -> list[OffsetRange]:
    """Non-empty ranges for partitions present in ``end`` (missing starts are the caller's business)."""
    out = []
    for (topic, partition), until in sorted(end.items()):
        frm = start.get((topic, partition), until)
        if until > frm:
            out.append(OffsetRange(topic, partition, frm, until))
    return out


def _split(rng: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, rng.size))
    out = []
    for i in range(parts):
        lo = rng.from_offset + rng.size * i // parts
        hi = rng.from_offset + rng.size * (i + 1) // parts
        out.append(OffsetRange(rng.topic, rng.partition, lo, hi))
    return out


def plan_partitions(ranges: list[OffsetRange], *, min_partitions: int | None = None,
                    max_records_per_partition: int | None = None) -> list[KafkaInputPartition]:
    """Input partitions for ``ranges`` honouring minPartitions and maxRecordsPerPartition."""
    ranges = [r for r in ranges if r.size > 0]
    pieces: list[OffsetRange] = []
    total = sum(r.size for r in ranges)
    if min_partitions is not None and len(ranges) < min_partitions and total > 0:
        for r in ranges:
            pieces.extend(_split(r, max(1, round(r.size / total * min_partitions))))
    else:
        pieces = list(ranges)
    if max_records_per_partition is not None:
        capped: list[OffsetRange] = []
        for r in pieces:
            capped.extend(_split(r, math.ceil(r.size / max_records_per_partition)))
        pieces = capped
    return [KafkaInputPartition(r) for r in pieces]


def rate_limit(start: PartitionOffsets, latest: PartitionOffsets, max_records: int) -> PartitionOffsets:
    """Cap ``latest`` so at most ``max_records`` are read, shared out by each partition's backlog.

    spark-sql-kafka's rateLimit: every partition gets ``floor(backlog / total * max)`` (and its
    whole backlog when that share rounds to more); a partition never goes backwards.
    """
    backlog = {tp: max(0, off - start.get(tp, off)) for tp, off in latest.items()}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(latest)
    out: PartitionOffsets = {}
    for tp, off in latest.items():
        begin = start.get(tp, off)
        share = math.floor(backlog[tp] / total * max_records)
        out[tp] = min(off, begin + share)
    # Floors can leave the total short of max_records; nothing requires spending it exactly,
    # but ensure progress when every floor is 0 (many partitions, small limit).
    if all(out[tp] == start.get(tp, latest[tp]) for tp in latest):
        for tp, off in sorted(latest.items()):
            if off > start.get(tp, off):
                out[tp] = start.get(tp, off) + min(max_records, off - start.get(tp, off))
                break
    return out
