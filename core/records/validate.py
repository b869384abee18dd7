"""Produce-path validation of client batches and in-place offset assignment.

Follows Kafka's ``UnifiedLog.analyzeAndValidateRecords`` + ``LogValidator`` + ``DefaultRecord``
for magic v2:

- the buffer holds whole batches only (a partial trailing batch is CORRUPT_MESSAGE);
- magic must be 2 (Produce v3+ accepts nothing else: INVALID_RECORD, as Kafka 4 answers);
- a client batch's base offset must be 0 (INVALID_RECORD);
- batch size above ``max.message.bytes`` is MESSAGE_TOO_LARGE;
- CRC-32C over [attributes, end) must match (CORRUPT_MESSAGE);
- codec id must be 0..4 (UNSUPPORTED_COMPRESSION_TYPE);
- records_count >= 1 and == last_offset_delta + 1 (INVALID_RECORD);
- no control batches from clients, producer id implies a sequence (INVALID_RECORD);
- Kafka takes exactly one v2 batch per partition in a produce request (INVALID_RECORD otherwise);
- every record of every batch, compressed or not, is read as ``DefaultRecord.readFrom`` reads it:
  each varint and length inside the record and the batch, the header count and header keys,
  exactly ``records_count`` records and no byte after the last (INVALID_RECORD); then
  ``LogValidator.validateRecord``: a key on compacted topics (INVALID_RECORD) and, for
  CreateTime, each record's timestamp within ``message.timestamp.{before,after}.max.ms``
  (INVALID_TIMESTAMP). Those two collect an error per record and answer with them as Produce
  v8+ ``record_errors`` and Kafka's error message (:func:`record_errors_of`).

Where strom is stricter than Kafka: inner offset deltas must run 0..n-1 (Kafka rewrites a
compressed batch whose deltas do not, and stores an uncompressed one as it came: two records at
one offset); a varint of a 32-bit field must fit 32 bits (Kafka silently truncates it, which
any 64-bit reader then reads differently).

Cost: the record walk runs in compiled code, aiokafka's Cython v2 batch reader, plus a few
Python operations per record (``bench/records_micro.py`` prints the cost per million records).
aiokafka reads a record's attribute byte as a varint and accepts 10-byte varints where Kafka
takes 5, so its walk only counts when every record is encoded as Kafka's and the other clients'
writers encode them (each varint minimal: the sizes of the fields it returns add up to exactly
the bytes of the batch); anything else, and every batch it refuses, goes through
:func:`_walk_records`, the Python transcription of Kafka's reader, which decides and names the
record. Its over-reads (up to 10 bytes past a varint that runs off the end) are kept inside
memory that exists: the byte after the walked range must be a zero, else the batch is copied.

Compressed batches are decompressed with a bound (``max_decompressed_bytes``; past it the batch
is INVALID_RECORD) and, when ``inline_bytes`` is given, a batch that expands past it raises
:class:`ValidateOffLoop` so the caller can validate the request in a worker thread instead of on
the event loop.
"""

from __future__ import annotations

import logging
import struct
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple

import crc32c

from strom.core.errors import (
    CorruptMessageError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
)
from strom.core.records import codecs
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

log = logging.getLogger(__name__)

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

# Above this many bytes of records, a batch that needs the Python walk (it is malformed, or
# encoded unlike any client's writer) is walked off the event loop when the caller allows it:
# the walk costs about a microsecond per record.
SLOW_WALK_INLINE_BYTES = 64 * 1024

# An uncompressed batch over this many times ``inline_bytes`` is walked off the event loop too
# (the compiled walk reads ~400 MB/s of 100-byte records: 4 MiB is about 10 ms).
UNCOMPRESSED_INLINE_FACTOR = 4

RecordError = tuple[int, str]


class ValidateOffLoop(Exception):
    """Validating this request inline would hold the event loop too long (a compressed batch
    expands past ``inline_bytes``, or a large batch needs the Python walk): validate it again
    in a worker thread, without ``inline_bytes``."""


def record_errors_of(exc: BaseException) -> tuple[RecordError, ...]:
    """The per-record errors (batch index, message) a validation error carries: Produce v8+
    ``record_errors``, as Kafka's ``RecordValidationException`` carries them."""
    errors: tuple[RecordError, ...] = getattr(exc, "record_errors", ())
    return errors


def _in(tp: str) -> str:
    return f" in topic partition {tp}" if tp else ""


def _rejected(cls: type[KafkaError], message: str, errors: Sequence[RecordError]) -> KafkaError:
    exc = cls(message)
    # The KafkaError classes are generated one per code; the per-record errors ride on the
    # instance (read back with record_errors_of) so `except InvalidRecordError` still holds.
    vars(exc)["record_errors"] = tuple(errors)
    return exc


def _before_append(message: str) -> InvalidRecordError:
    """INVALID_RECORD for what Kafka refuses before it tries the append (ProduceRequest.validateRecords:
    no batch, a batch not of magic 2, more than one batch), which it answers without the
    partition's log start offset: see :func:`refused_before_append`."""
    exc = InvalidRecordError(message)
    vars(exc)["before_append"] = True
    return exc


def refused_before_append(exc: BaseException) -> bool:
    """Whether Kafka would refuse these records before the append (no log start offset then)."""
    return bool(getattr(exc, "before_append", False))


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
    topic_partition: str = "",
    max_decompressed_bytes: int | None = None,
    inline_bytes: int | None = None,
) -> list[tuple[int, BatchHeader]]:
    """Validate the records of one partition of a Produce request; return ``[(pos, header)]``.

    ``log_append_time`` is the topic's ``message.timestamp.type == LogAppendTime`` (no timestamp
    bounds then). ``single_batch=False`` accepts several batches (Kafka does not, for v2).
    ``topic_partition`` names the partition in Kafka's per-record messages.
    ``max_decompressed_bytes`` bounds what a compressed batch may expand to (INVALID_RECORD past
    it); with ``inline_bytes`` the call raises :class:`ValidateOffLoop` rather than do more than
    that many bytes' worth of decompression or Python record walk.
    Raises the :mod:`strom.core.exceptions` error whose Kafka code the broker should answer.
    """
    end = len(buf)
    if end == 0:
        raise _before_append("produce request holds no record batch")
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
            raise _before_append(
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
        if check_ts:
            lo = now_ms - timestamp_before_max_ms
            hi = now_ms + timestamp_after_max_ms
        else:
            lo, hi = -_MAX_LONG, _MAX_LONG
        if codec:
            limit = max_decompressed_bytes
            if inline_bytes is not None and (limit is None or inline_bytes < limit):
                limit = inline_bytes
            try:
                records = codecs.decompress(codec, view[pos + BATCH_OVERHEAD:batch_end], limit)
            except codecs.DecompressionLimitError as exc:
                if limit != max_decompressed_bytes:
                    raise ValidateOffLoop() from None
                raise _rejected(
                    InvalidRecordError,
                    f"batch at byte {pos}: {exc.codec} records decompress to more than {exc.limit} bytes "
                    f"(strom.decompression.max.bytes){_in(topic_partition)}",
                    [(0, f"decompressed size exceeds {exc.limit} bytes")]) from None
            # The compiled reader wants a batch: this one's header without its codec bits, then the
            # records; two zero bytes after them keep its over-reads in this buffer.
            plain = bytearray(view[pos:pos + BATCH_OVERHEAD])
            _pack_short_at(plain, _ATTRS_OFFSET, attributes & ~COMPRESSION_MASK)
            plain += records
            plain += b"\x00\x00"
            batch_view = memoryview(plain)[:-2]
        else:
            if inline_bytes is not None and size > UNCOMPRESSED_INLINE_FACTOR * inline_bytes:
                raise ValidateOffLoop()  # a topic with a large max.message.bytes: milliseconds of walk
            batch_view = view[pos:batch_end]
            # Over-reads stay in the buffer when the batch's last byte ends any varint and the
            # next byte is a zero: bytes/bytearray keep a NUL after their end.
            if view[batch_end - 1] >= 0x80 or (
                    view[batch_end] if batch_end < end else (0 if isinstance(buf, (bytes, bytearray)) else 1)):
                padded = bytearray(batch_view)
                padded += b"\x00\x00"
                batch_view = memoryview(padded)[:-2]
        if not _compiled_walk(batch_view, header.base_timestamp, lo, hi, compacted):
            if inline_bytes is not None and len(batch_view) > SLOW_WALK_INLINE_BYTES:
                raise ValidateOffLoop()
            _walk_records(batch_view, BATCH_OVERHEAD, len(batch_view), count, header.base_timestamp,
                          check_ts, now_ms, lo, hi, compacted, topic_partition, pos)
        out.append((pos, header))
        pos = batch_end
    if single_batch and len(out) > 1:
        raise _before_append(f"produce request holds {len(out)} record batches for one partition; expected 1")
    return out


def _usize(n: int) -> int:
    """Bytes of the zig-zag varint of ``n`` (any int64)."""
    z = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


# _FIELD[n]: bytes of a length n written as Kafka writes it, its zig-zag varint and n bytes
# (a key, a value, a whole record). One list lookup instead of two and an addition, per field
# of every record; longer fields take the IndexError branch (zero-cost when not raised).
_FIELD = [_usize(n) + n for n in range(1 << 15)]


# aiokafka's DefaultRecordBatch, imported on first use: importing it loads aiokafka's client
# package (~60 ms), which the broker's tools and a broker that is never produced to can skip.
_compiled_batch: Any = None


def _load_compiled_batch() -> Any:
    global _compiled_batch
    try:
        from aiokafka.record._crecords.default_records import DefaultRecordBatch
    except ImportError as exc:  # aiokafka installed without its binary extension
        log.warning("aiokafka's compiled record reader cannot be imported (%s): every produced record is read "
                    "by the Python walk, about 5x slower; install aiokafka's binary wheel (pip install "
                    "--force-reinstall 'aiokafka>=0.11')", exc)
        _compiled_batch = _no_compiled_reader
        return _no_compiled_reader
    _compiled_batch = DefaultRecordBatch
    return DefaultRecordBatch


def _no_compiled_reader(batch: memoryview) -> Any:
    raise ImportError("aiokafka.record._crecords")  # _compiled_walk answers False: the Python walk decides


def _compiled_walk(batch: memoryview, base_ts: int, lo: int, hi: int, compacted: bool) -> bool:
    """True when aiokafka's compiled reader walks the batch to its last byte, every record has
    offset delta = its index, a timestamp in [lo, hi], a key if ``compacted``, and every field
    is minimally encoded (the canonical sizes of the fields add up to exactly the batch's
    bytes: then aiokafka's reading and Kafka's are the same). False means "decide with
    :func:`_walk_records`": the batch may still be valid."""
    field = _FIELD
    usize = _usize
    total = 0
    i = 0
    # Timestamps whose delta is one varint byte (-64..63) and within the bounds: the usual case.
    near_lo = max(lo, base_ts - 64)
    near_hi = min(hi, base_ts + 63)
    try:
        for r in (_compiled_batch or _load_compiled_batch())(batch):
            if r.offset != i:
                return False
            t = r.timestamp  # None for NO_TIMESTAMP: the comparison raises, the walk decides
            # attributes and the timestamp delta (the offset deltas are summed after the loop)
            if near_lo <= t <= near_hi:
                body = 2
            elif lo <= t <= hi:
                body = 1 + usize(t - base_ts)
            else:
                return False
            k = r.key
            if k is None:
                if compacted:
                    return False
                body += 1
            else:
                try:
                    body += field[len(k)]
                except IndexError:
                    body += usize(len(k)) + len(k)
            v = r.value
            if v is None:
                body += 1
            else:
                try:
                    body += field[len(v)]
                except IndexError:
                    body += usize(len(v)) + len(v)
            h = r.headers
            if h:
                body += usize(len(h))
                for hk, hv in h:
                    n = len(hk.encode())
                    body += usize(n) + n + (1 if hv is None else usize(len(hv)) + len(hv))
            else:
                body += 1
            try:
                total += field[body]
            except IndexError:
                total += usize(body) + body
            i += 1
    except Exception:  # aiokafka's CorruptRecordException, a header key that is not UTF-8, ...
        return False
    # Offset deltas 0..i-1: 64 of one byte, 8128 of two, then three.
    if i <= 64:
        total += i
    elif i <= 8192:
        total += 64 + 2 * (i - 64)
    else:
        total += 64 + 2 * 8128 + sum(usize(n) for n in range(8192, i))
    return total == len(batch) - BATCH_OVERHEAD


# ---------------------------------------------------------------------------------------------
# The reference walk: Kafka's DefaultRecord.readFrom and LogValidator.validateRecord, in Python.

class _Malformed(Exception):
    pass


def _zigzag(data: Buffer, pos: int, end: int, long: bool) -> tuple[int, int]:
    """Kafka's ``ByteUtils.readVarint`` (at most 5 bytes, the value must fit 32 bits) or, with
    ``long``, ``readVarlong`` (at most 10 bytes); the messages are Kafka's."""
    kind, max_shift = ("varlong", 70) if long else ("varint", 35)
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise _Malformed(f"premature end of a {kind}")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift >= max_shift:
            raise _Malformed("varlong is too long, most significant bit in the 10th byte is set" if long
                             else "varint is too long, the most significant bit in the 5th byte is set")
    if long:
        result &= 0xFFFFFFFFFFFFFFFF
    elif result > 0xFFFFFFFF:
        raise _Malformed(f"varint {result} does not fit 32 bits")
    return (result >> 1) ^ -(result & 1), pos


def _varint32(data: Buffer, pos: int, end: int) -> tuple[int, int]:
    return _zigzag(data, pos, end, False)


def _varint64(data: Buffer, pos: int, end: int) -> tuple[int, int]:
    return _zigzag(data, pos, end, True)


def _skip_field(data: Buffer, pos: int, end: int, what: str) -> tuple[int, int]:
    """Read a nullable field's length (-1: null) and step over its bytes: ``(length, next_pos)``."""
    length, pos = _varint32(data, pos, end)
    if length >= 0:
        pos += length
        if pos > end:
            raise _Malformed(f"{what} of {length} bytes runs past the end of the record")
    return length, pos


def _walk_records(data: Buffer, start: int, end: int, count: int, base_ts: int, check_ts: bool, now_ms: int,
                  lo: int, hi: int, compacted: bool, tp: str, batch_pos: int = 0) -> None:
    """Read ``count`` records from ``data[start:end]`` as Kafka does and validate each.

    A framing error (a length, varint or count that does not fit) raises InvalidRecordError at
    once with the record's index as its record error; key and timestamp errors are collected
    over the whole batch and raised as Kafka's ``processRecordErrors`` does.
    """
    where = f"batch at byte {batch_pos}"
    errors: list[RecordError] = []
    timestamp_errors = False
    pos = start
    index = 0
    try:
        for index in range(count):
            if pos >= end:
                raise _Malformed(f"Incorrect declared batch size, premature EOF reached: the batch declares "
                                 f"{count} records and holds {index}")
            length, pos = _varint32(data, pos, end)
            record_start = pos
            record_end = pos + length
            if length < 0 or record_end > end:
                raise _Malformed(f"Invalid record size: expected {length} bytes in record payload, but "
                                 f"instead the buffer has only {end - pos} remaining bytes")
            if pos >= record_end:
                raise _Malformed("Invalid record size: the record has no attributes byte")
            pos += 1  # attributes: unused in v2, any value
            ts_delta, pos = _varint64(data, pos, record_end)
            offset_delta, pos = _varint32(data, pos, record_end)
            key_len, pos = _skip_field(data, pos, record_end, "key")
            _, pos = _skip_field(data, pos, record_end, "value")
            num_headers, pos = _varint32(data, pos, record_end)
            if num_headers < 0:
                raise _Malformed(f"Found invalid number of record headers {num_headers}")
            if num_headers > record_end - pos:
                raise _Malformed(f"Found invalid number of record headers. {num_headers} is larger than the "
                                 "remaining size of the record")
            for _ in range(num_headers):
                header_key_len, pos = _varint32(data, pos, record_end)
                if header_key_len < 0:
                    raise _Malformed(f"Invalid negative header key size {header_key_len}")
                pos += header_key_len
                if pos > record_end:
                    raise _Malformed(f"header key of {header_key_len} bytes runs past the end of the record")
                _, pos = _skip_field(data, pos, record_end, "header value")
            if pos != record_end:
                raise _Malformed(f"Invalid record size: expected to read {length} bytes in record payload, "
                                 f"but instead read {pos - record_start}")
            if offset_delta != index:
                errors.append((index, f"Record {index} has offset delta {offset_delta}: the offset deltas of a "
                                      f"batch must run 0..{count - 1}{_in(tp)}"))
            elif compacted and key_len < 0:
                errors.append((index, f"Compacted topic cannot accept message without key{_in(tp)}"))
            elif check_ts:
                ts = base_ts + ts_delta
                if (ts < lo or ts > hi) and ts != NO_TIMESTAMP:
                    timestamp_errors = True
                    errors.append((index, f"Timestamp {ts} of message with offset {offset_delta} is out of range. "
                                          f"The timestamp should be within [{lo}, {hi}]"))
        if pos != end:
            index = count - 1
            raise _Malformed(f"Incorrect declared batch size, records still remaining in file: {end - pos} "
                             f"bytes after record {count - 1}")
    except _Malformed as exc:
        message = f"{where}: record {index}: {exc}"
        raise _rejected(InvalidRecordError, f"{message}{_in(tp)}", [(index, str(exc))]) from None
    if errors:
        if timestamp_errors:
            raise _rejected(InvalidTimestampError,
                            "One or more records have been rejected due to invalid timestamp", errors)
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
        raise _rejected(InvalidRecordError,
                        f"One or more records have been rejected due to {len(errors)} record errors in total, "
                        f"and only showing the first three errors at most: [{shown}]", errors)


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
