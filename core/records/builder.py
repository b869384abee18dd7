"""Build and decode RecordBatch v2 batches (the records section, varints, compression, CRC).

Used where records really must be touched: broker-written batches (control markers, metadata
log, group/transaction coordinators), compressed-batch validation, compaction, tests and tools.
The produce/fetch hot path does not come here.

A record inside a batch is Kafka's ``DefaultRecord``::

    length          varint   (bytes after this field)
    attributes      int8     (unused, 0)
    timestampDelta  varlong  (relative to the batch's base_timestamp)
    offsetDelta     varint   (relative to the batch's base_offset)
    keyLength       varint   (-1 = null key), key bytes
    valueLength     varint   (-1 = null value), value bytes
    headerCount     varint
    headers         [keyLength varint, key utf-8, valueLength varint (-1 = null), value]

Varints are zig-zag encoded protobuf varints, as in Kafka's ``ByteUtils``.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from typing import NamedTuple, overload

import crc32c

from strom.core.errors import CorruptMessageError, InvalidRecordError, UnsupportedForMessageFormatError
from strom.core.records import codecs
from strom.core.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CURRENT_MAGIC,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    Buffer,
    iter_headers,
    read_header,
)

Headers = tuple[tuple[str, bytes | None], ...]

# Control record types (key of a control record: version int16, type int16).
CONTROL_ABORT = 0
CONTROL_COMMIT = 1

_PREFIX = struct.Struct(">qiibI")  # base_offset .. crc: the part in front of the CRC'd bytes
_SUFFIX = struct.Struct(">hiqqqhii")  # attributes .. records_count: the CRC'd part of the header
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")
# A control record up to its key: length 16 (zig-zag 32), attributes, timestamp and offset
# deltas 0, key length 4 (zig-zag 8); then the key, value length 6 (zig-zag 12), the value and
# a header count of 0.
_CONTROL_RECORD_HEAD = bytes([32, 0, 0, 0, 8])
_CONTROL_VALUE_LEN = bytes([12])
# Where a marker record's key, value length and value sit after the batch header, and its size
# up to the end of its value.
_MARKER_KEY_AT = len(_CONTROL_RECORD_HEAD)
_MARKER_VALUE_LEN_AT = _MARKER_KEY_AT + _CONTROL_KEY.size
_MARKER_VALUE_AT = _MARKER_VALUE_LEN_AT + 1
_MARKER_RECORD_SIZE = _MARKER_VALUE_AT + _CONTROL_VALUE.size


class Record(NamedTuple):
    """A record as stored in a batch: deltas relative to the batch's base offset / timestamp."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


class SimpleRecord(NamedTuple):
    """A record as a producer sees it; ``timestamp`` None means "now" when the batch is built."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int | None = None


class DecodedBatch(NamedTuple):
    header: BatchHeader
    records: list[Record]


class LogRecord(NamedTuple):
    """A record with its absolute offset and timestamp, and the header of its batch."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    header: BatchHeader


class ControlRecord(NamedTuple):
    """A transaction marker (control record of type abort or commit)."""

    version: int
    type: int
    coordinator_epoch: int

    @property
    def commit(self) -> bool:
        return self.type == CONTROL_COMMIT


# ---------------------------------------------------------------------------------------------
# varints


def _write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (signed, up to 64 bits) as a zig-zag varint."""
    v = (value << 1) ^ (value >> 63)
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read a zig-zag varint at ``pos``; return ``(value, next_pos)``. IndexError on truncation."""
    b = buf[pos]
    pos += 1
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos
    result = b & 0x7F
    shift = 7
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise InvalidRecordError(f"varint longer than 10 bytes at byte {pos}")


# The value of each one-byte zig-zag varint (0x00..0x7F), for the inline fast path of parse_records.
_ZIGZAG_BYTE = tuple((b >> 1) ^ -(b & 1) for b in range(0x80))


def encode_varint(value: int) -> bytes:
    out = bytearray()
    _write_varint(out, value)
    return bytes(out)


def decode_varint(buf: bytes, pos: int = 0) -> tuple[int, int]:
    try:
        return _read_varint(buf, pos)
    except IndexError:
        raise InvalidRecordError(f"truncated varint at byte {pos}") from None


# ---------------------------------------------------------------------------------------------
# encoding


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(1)  # zig-zag(-1)
    else:
        _write_varint(out, len(data))
        out += data


def _encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, key: bytes | None,
                   value: bytes | None, headers: Sequence[tuple[str, bytes | None]]) -> None:
    body = bytearray(b"\x00")  # attributes: unused in v2
    _write_varint(body, timestamp_delta)
    _write_varint(body, offset_delta)
    _write_bytes(body, key)
    _write_bytes(body, value)
    _write_varint(body, len(headers))
    for hkey, hvalue in headers:
        if hkey is None:
            raise ValueError("record header keys cannot be null")
        _write_bytes(body, hkey.encode("utf-8"))
        _write_bytes(body, hvalue)
    _write_varint(out, len(body))
    out += body


def encode_records(records: Sequence[Record]) -> bytes:
    """The uncompressed records section for ``records``."""
    out = bytearray()
    for r in records:
        _encode_record(out, r.offset_delta, r.timestamp_delta, r.key, r.value, r.headers)
    return bytes(out)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def build_batch(
    records: Sequence[Record | SimpleRecord],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    timestamp_type: int = 0,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    delete_horizon: bool = False,
    compression_level: int | None = None,
) -> bytes:
    """Encode one v2 batch.

    ``SimpleRecord``s get offset delta = their index and absolute timestamps (None = now).
    ``Record``s carry their own deltas, relative to ``base_timestamp``. ``base_timestamp``
    defaults to the first record's timestamp when it is a ``SimpleRecord`` (what the Java
    producer does), else to now; ``max_timestamp`` to the largest record timestamp (-1 for an
    empty batch); ``last_offset_delta`` to the last record's offset delta (compaction keeps
    batches with gaps, and even empty ones, so both may be given explicitly).
    ``delete_horizon`` sets attribute bit 6 (base_timestamp then holds the delete horizon).
    """
    if compression not in codecs.CODEC_NAMES:
        codecs.codec_name(compression)  # raises UnsupportedCompressionTypeError
    now: int | None = None
    resolved: list[tuple[int, int | None, bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]] = []
    # First pass: absolute timestamps for SimpleRecords, deltas for Records.
    for index, rec in enumerate(records):
        if isinstance(rec, SimpleRecord):
            ts = rec.timestamp
            if ts is None:
                if now is None:
                    now = now_ms()
                ts = now
            resolved.append((index, ts, rec.key, rec.value, rec.headers))
        else:
            resolved.append((rec.offset_delta, None, rec.key, rec.value, rec.headers))
    if base_timestamp is None:
        if resolved and resolved[0][1] is not None:
            base_timestamp = resolved[0][1]
        elif resolved:
            base_timestamp = now if now is not None else now_ms()
        else:
            base_timestamp = NO_TIMESTAMP
    body = bytearray()
    max_ts = NO_TIMESTAMP
    for rec, (offset_delta, ts, key, value, headers) in zip(records, resolved, strict=True):
        if ts is None:
            delta = rec.timestamp_delta  # type: ignore[union-attr]  # a Record
            ts = base_timestamp + delta
        else:
            delta = ts - base_timestamp
        if ts > max_ts:
            max_ts = ts
        _encode_record(body, offset_delta, delta, key, value, headers)
    if max_timestamp is None:
        max_timestamp = max_ts
    if last_offset_delta is None:
        last_offset_delta = resolved[-1][0] if resolved else 0

    attributes = compression & COMPRESSION_MASK
    if timestamp_type == TIMESTAMP_LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    if delete_horizon:
        attributes |= DELETE_HORIZON_MASK

    payload = codecs.compress(compression, body, compression_level) if compression else body
    return _seal_batch(payload, len(records), attributes, last_offset_delta, base_timestamp, max_timestamp,
                       producer_id, producer_epoch, base_sequence, base_offset, partition_leader_epoch)


def _seal_batch(payload: bytes | bytearray, count: int, attributes: int, last_offset_delta: int,
                base_timestamp: int, max_timestamp: int, producer_id: int, producer_epoch: int,
                base_sequence: int, base_offset: int, partition_leader_epoch: int) -> bytes:
    """The batch header in front of an encoded (and maybe compressed) records section, CRC included."""
    crc_part = _SUFFIX.pack(attributes, last_offset_delta, base_timestamp, max_timestamp,
                            producer_id, producer_epoch, base_sequence, count) + payload
    crc = crc32c.crc32c(crc_part)
    # batch_length counts everything after itself: leader epoch, magic, crc, then crc_part.
    batch_length = len(crc_part) + ATTRIBUTES_OFFSET - LOG_OVERHEAD
    return _PREFIX.pack(base_offset, batch_length, partition_leader_epoch, CURRENT_MAGIC, crc) + crc_part


def build_keyed_batch(records: Sequence[tuple[bytes | None, bytes | None]], *, timestamp: int | None = None,
                      producer_id: int = -1, producer_epoch: int = -1, transactional: bool = False) -> bytes:
    """An uncompressed batch of ``(key, value)`` records with one timestamp and no headers.

    What the coordinators write (their state records): the same bytes as :func:`build_batch`
    makes of ``SimpleRecord(key, value, (), timestamp)``s, without its general-case bookkeeping.
    """
    if not records:
        raise ValueError("a batch needs at least one record")
    ts = now_ms() if timestamp is None else timestamp
    body = bytearray()
    for offset_delta, (key, value) in enumerate(records):
        _encode_record(body, offset_delta, 0, key, value, ())
    attributes = TRANSACTIONAL_MASK if transactional else 0
    return _seal_batch(body, len(records), attributes, len(records) - 1, ts, ts, producer_id, producer_epoch,
                       -1, 0, -1)


def build_control_batch(
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker batch: one control record (key version 0 + type, value version 0 +
    coordinator epoch), transactional and control bits set, no sequence.

    The record is laid out directly (the coordinator writes one per partition per transaction):
    attributes 0, timestamp and offset deltas 0, a 4-byte key, a 6-byte value, no headers.
    """
    ts = now_ms() if timestamp is None else timestamp
    record = (_CONTROL_RECORD_HEAD + _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
              + _CONTROL_VALUE_LEN + _CONTROL_VALUE.pack(0, coordinator_epoch) + b"\x00")
    return _seal_batch(record, 1, TRANSACTIONAL_MASK | CONTROL_MASK, 0, ts, ts, producer_id, producer_epoch,
                       -1, base_offset, partition_leader_epoch)


def read_control_record(buf: Buffer, pos: int, header: BatchHeader) -> ControlRecord | None:
    """The control record of the control batch at ``pos`` (None when the cleaner emptied it).

    Reads only the one record a control batch holds; raises InvalidRecordError if malformed.
    """
    if header.records_count <= 0 or header.batch_length + LOG_OVERHEAD <= BATCH_OVERHEAD:
        return None
    if header.attributes & COMPRESSION_MASK:
        records = decode_batch(buf, pos, check_crc=False).records
        return parse_control_record(records[0].key, records[0].value) if records else None
    p = pos + BATCH_OVERHEAD
    # A marker laid out as build_control_batch (and Kafka) writes it: key and value read in place,
    # what the varint walk below finds for that layout. Anything else takes the walk.
    if len(buf) >= p + _MARKER_RECORD_SIZE and buf[p:p + _MARKER_KEY_AT] == _CONTROL_RECORD_HEAD \
            and buf[p + _MARKER_VALUE_LEN_AT] == _CONTROL_VALUE_LEN[0]:
        version, ctype = _CONTROL_KEY.unpack_from(buf, p + _MARKER_KEY_AT)
        if ctype in (CONTROL_ABORT, CONTROL_COMMIT):
            return ControlRecord(version, ctype, _CONTROL_VALUE.unpack_from(buf, p + _MARKER_VALUE_AT)[1])
    try:
        _length, p = _read_varint(buf, p)
        p += 1  # attributes
        _timestamp_delta, p = _read_varint(buf, p)
        _offset_delta, p = _read_varint(buf, p)
        key, p = _read_bytes(buf, p)
        value, p = _read_bytes(buf, p)
    except IndexError:
        raise InvalidRecordError(f"control batch at byte {pos} is truncated") from None
    return parse_control_record(key, value)


def parse_control_record(key: Buffer | None, value: Buffer | None) -> ControlRecord:
    """Read a transaction marker's key and value; raises InvalidRecordError if malformed."""
    if key is None or len(key) < 4:
        raise InvalidRecordError(f"control record key must be at least 4 bytes, got {key!r}")
    version, ctype = _CONTROL_KEY.unpack_from(key)
    if ctype not in (CONTROL_ABORT, CONTROL_COMMIT):
        # Other control types (e.g. KRaft's leader change) carry other values.
        return ControlRecord(version, ctype, -1)
    if value is None or len(value) < 6:
        raise InvalidRecordError(f"transaction marker value must be at least 6 bytes, got {value!r}")
    _vversion, coordinator_epoch = _CONTROL_VALUE.unpack_from(value)
    return ControlRecord(version, ctype, coordinator_epoch)


# ---------------------------------------------------------------------------------------------
# decoding


# A slice has its buffer's type: records decoded from bytes hold bytes (parse_records), a marker
# read in place from a memoryview (read_control_record) a view.
@overload
def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]: ...
@overload
def _read_bytes(buf: Buffer, pos: int) -> tuple[Buffer | None, int]: ...
def _read_bytes(buf: Buffer, pos: int) -> tuple[Buffer | None, int]:
    n, pos = _read_varint(buf, pos)
    if n < 0:
        if n != -1:
            raise InvalidRecordError(f"invalid negative length {n} at byte {pos}")
        return None, pos
    end = pos + n
    if end > len(buf):
        raise InvalidRecordError(f"length {n} at byte {pos} runs past the end of the records ({len(buf)})")
    return buf[pos:end], end


def parse_records(data: bytes, count: int) -> list[Record]:
    """Decode ``count`` records from an uncompressed records section that must hold exactly them.

    Raises :class:`InvalidRecordError` on malformed structure (Kafka's ``DefaultRecord.readFrom``
    answers INVALID_RECORD for these too).
    """
    if count < 0:
        raise InvalidRecordError(f"invalid record count {count}")
    out: list[Record] = []
    append = out.append
    read_varint = _read_varint
    read_bytes = _read_bytes
    size = len(data)
    pos = 0
    zigzag = _ZIGZAG_BYTE
    # Single-byte varints (values -64..63) and null keys and values are decoded inline: they are
    # the common case for deltas, lengths of small keys and header counts, and a call per field
    # dominates otherwise.
    try:
        for i in range(count):
            length, pos = (zigzag[b], pos + 1) if (b := data[pos]) < 0x80 else read_varint(data, pos)
            end = pos + length
            if length < 0 or end > size:
                raise InvalidRecordError(
                    f"record {i}: length {length} at byte {pos} does not fit the {size} bytes of records"
                )
            # pos is the (unused) attributes byte; a length of 1 is zig-zag -1: null
            ts_delta, pos = (zigzag[b], pos + 2) if (b := data[pos + 1]) < 0x80 else read_varint(data, pos + 1)
            offset_delta, pos = (zigzag[b], pos + 1) if (b := data[pos]) < 0x80 else read_varint(data, pos)
            key, pos = (None, pos + 1) if data[pos] == 1 else read_bytes(data, pos)
            value, pos = (None, pos + 1) if data[pos] == 1 else read_bytes(data, pos)
            b = data[pos]
            headers: Headers = ()
            if b == 0:
                pos += 1
            else:
                n_headers, pos = read_varint(data, pos)
                if n_headers < 0:
                    raise InvalidRecordError(f"record {i}: invalid header count {n_headers}")
                hlist: list[tuple[str, bytes | None]] = []
                for _ in range(n_headers):
                    hkey, pos = read_bytes(data, pos)
                    if hkey is None:
                        raise InvalidRecordError(f"record {i}: null header key")
                    hvalue, pos = read_bytes(data, pos)
                    hlist.append((hkey.decode("utf-8"), hvalue))
                headers = tuple(hlist)
            if pos != end:
                raise InvalidRecordError(
                    f"record {i}: declared size {length} but its fields take {length + pos - end} bytes"
                )
            append(Record(offset_delta, ts_delta, key, value, headers))
    except IndexError:
        raise InvalidRecordError(f"records truncated: {count} declared, ended inside record {len(out)}") from None
    except UnicodeDecodeError as exc:
        raise InvalidRecordError(f"record {len(out)}: header key is not UTF-8: {exc}") from None
    if pos != size:
        raise InvalidRecordError(
            f"{size - pos} bytes left after the {count} declared records"
        )
    return out


def records_section(buf: Buffer, pos: int, header: BatchHeader) -> bytes:
    """The batch's records section, decompressed."""
    start = pos + BATCH_OVERHEAD
    end = pos + header.batch_length + LOG_OVERHEAD
    raw = memoryview(buf)[start:end]
    codec = header.compression
    if codec == 0:
        return bytes(raw)
    return codecs.decompress(codec, raw)


def verify_crc(buf: Buffer, pos: int, header: BatchHeader) -> None:
    end = pos + header.batch_length + LOG_OVERHEAD
    computed = crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET:end])
    if computed != header.crc:
        raise CorruptMessageError(
            f"batch at byte {pos}: CRC mismatch (stored 0x{header.crc:08x}, computed 0x{computed:08x})"
        )


def decode_batch(buf: Buffer, pos: int = 0, *, check_crc: bool = True) -> DecodedBatch:
    """Decode the whole batch starting at ``pos`` (header and records)."""
    header = read_header(buf, pos)
    if header.magic != CURRENT_MAGIC:
        raise UnsupportedForMessageFormatError(f"batch at byte {pos}: magic {header.magic}, only 2 is supported")
    if header.batch_length + LOG_OVERHEAD < BATCH_OVERHEAD or pos + header.size > len(buf):
        raise CorruptMessageError(
            f"batch at byte {pos}: batch_length {header.batch_length} does not fit the {len(buf) - pos} bytes left"
        )
    if check_crc:
        verify_crc(buf, pos, header)
    return DecodedBatch(header, parse_records(records_section(buf, pos, header), header.records_count))


def decode_records(buf: Buffer, *, check_crc: bool = False) -> Iterator[LogRecord]:
    """Yield every record of every whole batch in ``buf`` (a fetch response or segment slice).

    Control batches are yielded too (check ``record.header.is_control``). With LogAppendTime a
    record's timestamp is the batch's max_timestamp, as Kafka defines it.
    """
    for pos, header in iter_headers(buf):
        if header.magic != CURRENT_MAGIC:
            raise UnsupportedForMessageFormatError(f"batch at byte {pos}: magic {header.magic}, only 2 is supported")
        if check_crc:
            verify_crc(buf, pos, header)
        base_offset = header.base_offset
        log_append = header.attributes & TIMESTAMP_TYPE_MASK
        base_ts = header.base_timestamp
        for rec in parse_records(records_section(buf, pos, header), header.records_count):
            ts = header.max_timestamp if log_append else base_ts + rec.timestamp_delta
            yield LogRecord(base_offset + rec.offset_delta, ts, rec.key, rec.value, rec.headers, header)


def crc_of(buf: Buffer, pos: int, header: BatchHeader) -> int:
    """CRC-32C the batch at ``pos`` should carry."""
    return crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET:pos + header.batch_length + LOG_OVERHEAD])


__all__ = [
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "ControlRecord",
    "DecodedBatch",
    "LogRecord",
    "Record",
    "SimpleRecord",
    "build_batch",
    "build_control_batch",
    "crc_of",
    "decode_batch",
    "decode_records",
    "decode_varint",
    "encode_records",
    "encode_varint",
    "parse_control_record",
    "parse_records",
    "records_section",
    "verify_crc",
]
