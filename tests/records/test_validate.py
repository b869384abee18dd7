"""Produce-path validation (one test per Kafka error) and in-place offset assignment."""

from __future__ import annotations

import struct

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from strom.core.errors import (
    CorruptMessageError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
)
from strom.core.records.batch import iter_headers, read_header
from strom.core.records.builder import Record, SimpleRecord, build_batch, build_control_batch, decode_records
from strom.core.records.validate import assign_offsets, record_errors_of, validate_produce_batches

NOW = 1_700_000_000_000
HOUR = 3_600_000
CODECS = [0, 1, 2, 3, 4]


def records(n: int = 3, ts: int = NOW, key: bytes | None = b"k") -> list[SimpleRecord]:
    return [SimpleRecord(key, b"value-%d" % i, (("h", b"x"),), ts) for i in range(n)]


def validate(buf: bytes | bytearray | memoryview, **kw: object) -> list:
    args: dict = {"max_batch_bytes": 1 << 20, "compacted": False, "now_ms": NOW,
                  "timestamp_before_max_ms": HOUR, "timestamp_after_max_ms": HOUR, "log_append_time": False}
    args.update(kw)
    return validate_produce_batches(buf, **args)


def patch(raw: bytes, offset: int, fmt: str, value: int, *, fix_crc: bool = True) -> bytearray:
    """Overwrite a header field; keep the CRC right so only the intended check can fire."""
    out = bytearray(raw)
    struct.pack_into(fmt, out, offset, value)
    if fix_crc:
        struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return out


# ----------------------------------------------------------------------------- accepted input

@pytest.mark.parametrize("codec", CODECS)
def test_valid_batch(codec: int) -> None:
    raw = build_batch(records(5), compression=codec)
    [(pos, header)] = validate(raw)
    assert pos == 0 and header == read_header(raw)
    assert validate(memoryview(bytearray(raw)))[0][1] == header


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_validate(codec: int) -> None:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                        producer_id=5, producer_epoch=0, base_sequence=0, batch_size=2**30)
    for i in range(200):
        builder.append(i, timestamp=NOW - i, key=b"k%d" % i, value=b"x" * 100, headers=[])
    raw = bytes(builder.build())
    [(_, header)] = validate(raw, compacted=True)
    assert header.records_count == 200 and header.compression == codec


def test_multiple_batches_need_opt_in() -> None:
    a, b = build_batch(records(2)), build_batch(records(3), compression=4)
    with pytest.raises(InvalidRecordError, match="2 record batches"):
        validate(a + b)
    got = validate(a + b, single_batch=False)
    assert [(p, h.records_count) for p, h in got] == [(0, 2), (len(a), 3)]


# ----------------------------------------------------------------------------- structure / CRC

def test_empty_buffer() -> None:
    with pytest.raises(InvalidRecordError, match="no record batch"):
        validate(b"")


@pytest.mark.parametrize("where", [25, 40, 61, -1, -5])
def test_corrupt_byte_fails_crc(where: int) -> None:
    raw = bytearray(build_batch(records(3)))
    raw[where] ^= 0x40
    with pytest.raises(CorruptMessageError, match=r"batch at byte 0: CRC mismatch \(stored 0x"):
        validate(raw)


def test_corrupt_crc_field() -> None:
    raw = bytearray(build_batch(records(3), compression=1))
    raw[18] ^= 0xFF
    with pytest.raises(CorruptMessageError, match="CRC mismatch"):
        validate(raw)


@pytest.mark.parametrize("cut", [1, 10, 100])
def test_truncated_batch(cut: int) -> None:
    raw = build_batch(records(10))
    with pytest.raises(CorruptMessageError, match="only"):
        validate(raw[:-cut])


def test_trailing_partial_batch_after_whole_one() -> None:
    raw = build_batch(records(2))
    with pytest.raises(CorruptMessageError, match=f"batch at byte {len(raw)}"):
        validate(raw + raw[:70], single_batch=False)
    with pytest.raises(CorruptMessageError, match="trailing bytes"):
        validate(raw + raw[:20], single_batch=False)


def test_bad_magic() -> None:
    raw = patch(build_batch(records(1)), 16, ">b", 1, fix_crc=False)
    with pytest.raises(InvalidRecordError, match="magic 1"):
        validate(raw)


def test_batch_length_too_small() -> None:
    raw = patch(build_batch(records(1)), 8, ">i", 20, fix_crc=False)
    with pytest.raises(CorruptMessageError, match="batch_length 20"):
        validate(raw)


def test_base_offset_must_be_zero() -> None:
    raw = build_batch(records(1), base_offset=5)
    with pytest.raises(InvalidRecordError, match="should be 0, but it is 5"):
        validate(raw)


def test_oversize_batch() -> None:
    raw = build_batch(records(50))
    validate(raw, max_batch_bytes=len(raw))
    with pytest.raises(MessageTooLargeError, match=f"{len(raw)} bytes exceeds the maximum of {len(raw) - 1}"):
        validate(raw, max_batch_bytes=len(raw) - 1)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec(codec: int) -> None:
    raw = patch(build_batch(records(1)), 21, ">h", codec)
    with pytest.raises(UnsupportedCompressionTypeError, match=f"codec id {codec}"):
        validate(raw)


# ----------------------------------------------------------------------------- counts / kinds

def test_zero_record_count() -> None:
    raw = patch(build_batch(records(1)), 57, ">i", 0)
    with pytest.raises(InvalidRecordError, match="invalid record count 0"):
        validate(raw)


def test_count_disagrees_with_last_offset_delta() -> None:
    raw = patch(build_batch(records(3)), 57, ">i", 2)
    with pytest.raises(InvalidRecordError, match="inconsistent offset range"):
        validate(raw)
    raw = patch(build_batch(records(3)), 23, ">i", 5)
    with pytest.raises(InvalidRecordError, match="inconsistent offset range"):
        validate(raw)


def test_compressed_count_disagrees_with_records() -> None:
    # Header says 3 records (and last_offset_delta 2) but only 2 are inside.
    two = [Record(0, 0, b"a", b"1"), Record(1, 0, b"b", b"2")]
    raw = patch(build_batch(two, compression=3, base_timestamp=NOW, last_offset_delta=2), 57, ">i", 3)
    with pytest.raises(InvalidRecordError, match="premature EOF") as info:
        validate(raw)
    assert record_errors_of(info.value)[0][0] == 2


def test_compressed_offsets_must_be_consecutive() -> None:
    recs = [Record(0, 0, b"a", b"1"), Record(2, 0, b"b", b"2")]
    raw = build_batch(recs, compression=2, base_timestamp=NOW, last_offset_delta=1)
    with pytest.raises(InvalidRecordError, match="offset delta 2"):
        validate(raw)


def test_compressed_payload_corrupt_with_valid_crc() -> None:
    raw = bytearray(build_batch(records(20), compression=4))
    raw[70] ^= 0xFF  # inside the zstd frame
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    with pytest.raises((CorruptMessageError, InvalidRecordError)):
        validate(raw)


def test_control_batch_from_client() -> None:
    raw = build_control_batch(True, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=NOW)
    with pytest.raises(InvalidRecordError, match="control records"):
        validate(raw)


def test_producer_id_without_sequence() -> None:
    raw = build_batch(records(1), producer_id=7, producer_epoch=0, base_sequence=-1)
    with pytest.raises(InvalidRecordError, match="invalid sequence number -1"):
        validate(raw)


# ----------------------------------------------------------------------------- keys / compaction

@pytest.mark.parametrize("codec", CODECS)
def test_keyless_record_on_compacted_topic(codec: int) -> None:
    recs = [*records(2), SimpleRecord(None, b"no key", (), NOW)]
    raw = build_batch(recs, compression=codec)
    validate(raw, compacted=False)
    with pytest.raises(InvalidRecordError, match="Compacted topic cannot accept message without key"):
        validate(raw, compacted=True)


@pytest.mark.parametrize("compacted", [False, True])
def test_uncompressed_records_are_walked(compacted: bool) -> None:
    """Garbage inside a CRC-valid uncompressed batch is refused on every topic (it used to pass
    a header-only check when the topic was not compacted)."""
    raw = bytearray(build_batch(records(3)))
    raw[61:] = b"\xff" * (len(raw) - 61)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    with pytest.raises(InvalidRecordError, match="record 0: varint is too long"):
        validate(raw, compacted=compacted)


# ----------------------------------------------------------------------------- timestamps

@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("ts", [NOW - HOUR - 1, NOW + HOUR + 1])
def test_timestamp_out_of_range(codec: int, ts: int) -> None:
    raw = build_batch(records(2, ts=ts), compression=codec)
    with pytest.raises(InvalidTimestampError, match="rejected due to invalid timestamp") as info:
        validate(raw)
    assert [(i, "out of range" in m) for i, m in record_errors_of(info.value)] == [(0, True), (1, True)]
    validate(raw, log_append_time=True)  # LogAppendTime topics ignore client timestamps
    validate(raw, timestamp_before_max_ms=2 * HOUR, timestamp_after_max_ms=2 * HOUR)


def test_timestamp_edges_accepted() -> None:
    validate(build_batch(records(1, ts=NOW - HOUR)))
    validate(build_batch(records(1, ts=NOW + HOUR)))
    validate(build_batch(records(1, ts=-1)))  # NO_TIMESTAMP is not range checked


def test_middle_record_timestamp_checked_when_decoding() -> None:
    recs = [SimpleRecord(b"a", b"1", (), NOW), SimpleRecord(b"b", b"2", (), NOW - 2 * HOUR),
            SimpleRecord(b"c", b"3", (), NOW)]
    for raw in (build_batch(recs, compression=1), build_batch(recs)):
        with pytest.raises(InvalidTimestampError) as info:
            validate(raw, compacted=True)
        [(index, message)] = record_errors_of(info.value)
        assert index == 1 and message.startswith(f"Timestamp {NOW - 2 * HOUR} of message with offset 1 is out")


def test_client_must_not_set_log_append_time() -> None:
    raw = build_batch(records(1), timestamp_type=1)
    with pytest.raises(InvalidTimestampError, match="LogAppendTime"):
        validate(raw)
    validate(raw, log_append_time=True)


# ----------------------------------------------------------------------------- assign_offsets

def test_assign_offsets_create_time() -> None:
    a = build_batch(records(3, ts=NOW - 5))
    b = build_batch([SimpleRecord(b"k", b"v", (), NOW - 1), SimpleRecord(b"k", b"v", (), NOW - 9)], compression=4)
    c = build_batch(records(1, ts=NOW - 7))
    buf = bytearray(a + b + c)
    positions = validate(buf, single_batch=False)
    result = assign_offsets(buf, positions, first_offset=1000, leader_epoch=7, log_append_time_ms=None)
    assert result.last_offset == 1005
    assert result.max_timestamp == NOW - 1
    assert result.shallow_offset_of_max_timestamp == result.offset_of_max_timestamp == 1004
    # Headers re-read from the buffer match what positions now hold; the CRC is untouched.
    assert list(iter_headers(buf)) == positions
    assert [(h.base_offset, h.partition_leader_epoch) for _, h in positions] == [(1000, 7), (1003, 7), (1005, 7)]
    assert [r.offset for r in decode_records(buf, check_crc=True)] == list(range(1000, 1006))
    for pos, h in positions:
        kp = DefaultRecordBatch(bytes(buf[pos:pos + h.size]))
        assert kp.validate_crc() and kp.base_offset == h.base_offset and kp.leader_epoch == 7


@pytest.mark.parametrize("codec", CODECS)
def test_assign_offsets_log_append_time(codec: int) -> None:
    buf = bytearray(build_batch(records(4, ts=NOW - 50_000), compression=codec))
    positions = validate(buf, log_append_time=True)
    append_time = NOW + 123
    result = assign_offsets(buf, positions, first_offset=42, leader_epoch=3, log_append_time_ms=append_time)
    assert result == (45, append_time, 45)
    (_, h), = positions
    assert h == read_header(buf)
    assert h.timestamp_type == 1 and h.max_timestamp == append_time and h.base_offset == 42
    assert h.base_timestamp == NOW - 50_000  # Kafka leaves the base timestamp alone
    got = list(decode_records(buf, check_crc=True))
    assert [(r.offset, r.timestamp) for r in got] == [(42 + i, append_time) for i in range(4)]
    kp = DefaultRecordBatch(bytes(buf))
    assert kp.validate_crc() and kp.timestamp_type == 1
    assert [r.timestamp for r in kp] == [append_time] * 4


def test_assign_offsets_empty_positions() -> None:
    assert assign_offsets(bytearray(), [], 10, 0, None) == (9, -1, -1)


def test_large_batches_are_handed_off_the_loop() -> None:
    """With inline_bytes, a compressed batch that expands past it, or an uncompressed one over
    four times it, raises ValidateOffLoop; the same call without inline_bytes validates it."""
    from strom.core.records.validate import ValidateOffLoop

    recs = [SimpleRecord(b"k", bytes(1000), (), NOW) for _ in range(2000)]  # ~2 MB of records
    for codec, inline in ((4, 1 << 20), (0, 256 << 10)):
        raw = build_batch(recs, compression=codec)
        with pytest.raises(ValidateOffLoop):
            validate(raw, max_batch_bytes=1 << 24, inline_bytes=inline)
        [(_, header)] = validate(raw, max_batch_bytes=1 << 24)
        assert header.records_count == 2000
    validate(build_batch(recs[:10], compression=4), inline_bytes=1 << 20)  # small: stays inline
