"""Produce-path validation of client batches and in-place offset assignment.

Follows Kafka's ``UnifiedLog.analyzeAndValidateRecords`` + ``LogValidator`` for magic v2:

- the buffer holds whole batches only (a partial trailing batch is CORRUPT_MESSAGE);
- magic must be 2 (Produce v3+ accepts nothing else: INVALID_RECORD, as Kafka 4 answers);
- a client batch's base offset must be 0 (INVALID_RECORD);
- batch size above ``max.message.bytes`` is MESSAGE_TOO_LARGE;
- CRC-32C over [attributes, end) must match (CORRUPT_MESSAGE);
- codec id must be 0..4 (UNSUPPORTED_COMPRESSION_TYPE);
- records_count >= 1 and == last_offset_delta + 1 (INVALID_RECORD);
- no control batches from clients, producer id implies a sequence (INVALID_RECORD);
- CreateTime timestamps within ``message.timestamp.{before,after}.max.ms`` (INVALID_TIMESTAMP);
- Kafka takes exactly one v2 batch per partition in a produce request (INVALID_RECORD otherwise).

Uncompressed batches on non-compacted topics get no per-record Python work: the timestamp
bounds are checked on the header's base and max timestamps, which hold the first record's and
the largest timestamp. Compressed batches and compacted topics are decoded: record framing,
count, consecutive offset deltas, keys (compacted) and every timestamp are checked. Kafka
rewrites a compressed batch whose inner offsets are not 0..n-1; we reject it instead (no
client writes one).
"""

from __future__ import annotations

import struct
import sys
from typing import NamedTuple

import crc32c

from strom.core.exceptions import (
    CorruptMessageError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
)
from strom.core.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    CURRENT_MAGIC,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    NO_TIMESTAMP,
    PARTITION_LEADER_EPOCH_OFFSET,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    Buffer,
)
from strom.core.records.builder import parse_records, records_section

_MAX_LONG = sys.maxsize  # Kafka's Long.MAX_VALUE: the "no limit" default of the timestamp bounds
_MAX_CODEC = 4

_pack_long_at = struct.Struct(">q").pack_into
_pack_int_at = struct.Struct(">i").pack_into
_pack_uint_at = struct.Struct(">I").pack_into
_pack_short_at = struct.Struct(">h").pack_into
_unpack_header = HEADER_STRUCT.unpack_from
_make_header = BatchHeader._make

_ATTRS_OFFSET = ATTRIBUTES_OFFSET
_MAX_TS_OFFSET = 35


class AssignResult(NamedTuple):
    """What :func:`assign_offsets` did: the last offset assigned, the largest batch max timestamp
    and the last offset of the batch that carries it (Kafka's shallow offset of max timestamp)."""

    last_offset: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int

    @property
    def offset_of_max_timestamp(self) -> int:
        return self.shallow_offset_of_max_timestamp


_make_assign_result = AssignResult._make


def _check_timestamp(ts: int, pos: int, what: str, now_ms: int, before_max: int, after_max: int) -> None:
    if ts == NO_TIMESTAMP:
        return
    diff = now_ms - ts
    if diff > before_max or -diff > after_max:
        raise InvalidTimestampError(
            f"batch at byte {pos}: {what} {ts} is out of range; it should be within "
            f"[{now_ms - before_max}, {now_ms + after_max}]"
        )


def validate_produce_batches(
    buf: Buffer,
    *,
    max_batch_bytes: int,
    compacted: bool = False,
    now_ms: int,
    timestamp_before_max_ms: int = _MAX_LONG,
    timestamp_after_max_ms: int = _MAX_LONG,
    log_append_time: bool = False,
    single_batch: bool = True,
) -> list[tuple[int, BatchHeader]]:
    """Validate the records of one partition of a Produce request; return ``[(pos, header)]``.

    ``log_append_time`` is the topic's ``message.timestamp.type == LogAppendTime`` (no timestamp
    bounds then). ``single_batch=False`` accepts several batches (Kafka does not, for v2).
    Raises the :mod:`strom.core.exceptions` error whose Kafka code the broker should answer.
    """
    end = len(buf)
    if end == 0:
        raise InvalidRecordError("produce request holds no record batch")
    view = memoryview(buf)
    out: list[tuple[int, BatchHeader]] = []
    pos = 0
    while pos < end:
        if end - pos < BATCH_OVERHEAD:
            raise CorruptMessageError(
                f"batch at byte {pos}: {end - pos} trailing bytes, a batch header needs {BATCH_OVERHEAD}"
            )
        header = _make_header(_unpack_header(view, pos))
        if header.magic != CURRENT_MAGIC:
            raise InvalidRecordError(
                f"batch at byte {pos}: magic {header.magic}; produce requests may only hold magic 2 batches"
            )
        batch_length = header.batch_length
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptMessageError(
                f"batch at byte {pos}: batch_length {batch_length} is below the minimum {MIN_BATCH_LENGTH}"
            )
        size = batch_length + LOG_OVERHEAD
        batch_end = pos + size
        if batch_end > end:
            raise CorruptMessageError(
                f"batch at byte {pos}: batch_length {batch_length} needs {size} bytes, only {end - pos} left"
            )
        if header.base_offset != 0:
            raise InvalidRecordError(
                f"batch at byte {pos}: the base offset of a produced batch should be 0, but it is "
                f"{header.base_offset}"
            )
        if size > max_batch_bytes:
            raise MessageTooLargeError(
                f"batch at byte {pos}: {size} bytes exceeds the maximum of {max_batch_bytes} (max.message.bytes)"
            )
        computed = crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET:batch_end])
        if computed != header.crc:
            raise CorruptMessageError(
                f"batch at byte {pos}: CRC mismatch (stored 0x{header.crc:08x}, computed 0x{computed:08x})"
            )
        attributes = header.attributes
        codec = attributes & COMPRESSION_MASK
        if codec > _MAX_CODEC:
            raise UnsupportedCompressionTypeError(f"batch at byte {pos}: unknown compression codec id {codec}")
        count = header.records_count
        if count <= 0:
            raise InvalidRecordError(f"batch at byte {pos}: invalid record count {count}")
        if header.last_offset_delta + 1 != count:
            raise InvalidRecordError(
                f"batch at byte {pos}: inconsistent offset range [0, {header.last_offset_delta}] and "
                f"count of records {count}"
            )
        if attributes & CONTROL_MASK:
            raise InvalidRecordError(f"batch at byte {pos}: clients are not allowed to write control records")
        if header.producer_id >= 0 and header.base_sequence < 0:
            raise InvalidRecordError(
                f"batch at byte {pos}: invalid sequence number {header.base_sequence} in a batch with "
                f"producer id {header.producer_id}"
            )
        check_ts = not log_append_time
        if check_ts and attributes & TIMESTAMP_TYPE_MASK:
            raise InvalidTimestampError(
                f"batch at byte {pos}: producer should not set timestamp type to LogAppendTime"
            )
        if codec or compacted:
            _validate_records(view, pos, header, compacted, check_ts, now_ms,
                              timestamp_before_max_ms, timestamp_after_max_ms)
        elif check_ts:
            # Header-level bounds: no per-record work on the uncompressed path. Both within
            # [now - before, now + after] is _check_timestamp's test passed, without two calls.
            base_ts, max_ts = header.base_timestamp, header.max_timestamp
            if not (now_ms - timestamp_before_max_ms <= base_ts <= now_ms + timestamp_after_max_ms
                    and now_ms - timestamp_before_max_ms <= max_ts <= now_ms + timestamp_after_max_ms):
                _check_timestamp(base_ts, pos, "base timestamp", now_ms,
                                 timestamp_before_max_ms, timestamp_after_max_ms)
                _check_timestamp(max_ts, pos, "max timestamp", now_ms,
                                 timestamp_before_max_ms, timestamp_after_max_ms)
        out.append((pos, header))
        pos = batch_end
    if single_batch and len(out) > 1:
        raise InvalidRecordError(f"produce request holds {len(out)} record batches for one partition; expected 1")
    return out


def _validate_records(view: memoryview, pos: int, header: BatchHeader, compacted: bool, check_ts: bool,
                      now_ms: int, before_max: int, after_max: int) -> None:
    """Decode a batch's records and check framing, offsets, keys and timestamps."""
    records = parse_records(records_section(view, pos, header), header.records_count)
    base_ts = header.base_timestamp
    # Bounds as absolute timestamps, so the loop compares plain ints.
    lo = now_ms - before_max
    hi = now_ms + after_max
    for index, (offset_delta, ts_delta, key, _value, _headers) in enumerate(records):
        if offset_delta != index:
            raise InvalidRecordError(
                f"batch at byte {pos}: record {index} has offset delta {offset_delta}; "
                "inner offsets must be consecutive from 0"
            )
        if compacted and key is None:
            raise InvalidRecordError(
                f"batch at byte {pos}: record {index}: Compacted topic cannot accept message without key"
            )
        if check_ts:
            ts = base_ts + ts_delta
            if (ts < lo or ts > hi) and ts != NO_TIMESTAMP:
                _check_timestamp(ts, pos, f"timestamp of record {index}", now_ms, before_max, after_max)


def assign_offsets(
    buf: bytearray,
    positions: list[tuple[int, BatchHeader]],
    first_offset: int,
    leader_epoch: int,
    log_append_time_ms: int | None,
) -> AssignResult:
    """Give validated batches their offsets, patching ``buf`` in place.

    Writes base_offset and partition_leader_epoch (outside the CRC, so the CRC stays valid).
    With ``log_append_time_ms`` (topic uses LogAppendTime) also sets the timestamp-type bit and
    max_timestamp to it and rewrites the CRC, as Kafka's ``setMaxTimestamp`` does; the base
    timestamp is left alone. ``positions`` is updated in place with the patched headers.
    """
    offset = first_offset
    max_timestamp = NO_TIMESTAMP
    offset_of_max = -1
    for i, (pos, header) in enumerate(positions):
        _pack_long_at(buf, pos, offset)
        _pack_int_at(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
        last = offset + header.last_offset_delta
        if log_append_time_ms is not None:
            attributes = header.attributes | TIMESTAMP_TYPE_MASK
            _pack_short_at(buf, pos + _ATTRS_OFFSET, attributes)
            _pack_long_at(buf, pos + _MAX_TS_OFFSET, log_append_time_ms)
            crc = crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET:pos + header.batch_length + LOG_OVERHEAD])
            _pack_uint_at(buf, pos + CRC_OFFSET, crc)
            header = header._replace(base_offset=offset, partition_leader_epoch=leader_epoch,
                                     attributes=attributes, max_timestamp=log_append_time_ms, crc=crc)
        else:
            # base_offset and partition_leader_epoch are the first and third fields (_replace is
            # twice as slow, and this runs for every produced batch; _make skips the Python
            # __new__ the constructor goes through).
            header = _make_header((offset, header.batch_length, leader_epoch, *header[3:]))
            if header.max_timestamp > max_timestamp:
                max_timestamp = header.max_timestamp
                offset_of_max = last
        positions[i] = (pos, header)
        offset = last + 1
    last_offset = offset - 1
    if log_append_time_ms is not None and positions:
        # Kafka (v2, uncompressed): with LogAppendTime the max timestamp's offset is the last one.
        max_timestamp = log_append_time_ms
        offset_of_max = last_offset
    return _make_assign_result((last_offset, max_timestamp, offset_of_max))  # without the Python __new__
