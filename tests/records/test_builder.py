"""Build/decode of v2 batches: varints, property round trips, control records, and a
differential check against kafka-python's independent RecordBatch implementation."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from strom.core.errors import CorruptMessageError, InvalidRecordError, UnsupportedForMessageFormatError
from strom.core.records import batch as batch_mod
from strom.core.records.batch import BATCH_OVERHEAD, BatchHeader, iter_headers, read_header
from strom.core.records.builder import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    Record,
    SimpleRecord,
    build_batch,
    build_control_batch,
    build_keyed_batch,
    decode_batch,
    decode_records,
    decode_varint,
    encode_varint,
    parse_control_record,
    parse_records,
    read_control_record,
)

CODECS = [0, 1, 2, 3, 4]
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


# ----------------------------------------------------------------------------- varints

@pytest.mark.parametrize(
    ("value", "encoded"),
    [  # zig-zag varints as in Kafka's ByteUtils / protobuf
        (0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-2, b"\x03"), (63, b"\x7e"), (-64, b"\x7f"),
        (64, b"\x80\x01"), (300, b"\xd8\x04"), (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
        (INT64_MAX, b"\xfe" + b"\xff" * 8 + b"\x01"), (INT64_MIN, b"\xff" * 9 + b"\x01"),
    ],
)
def test_varint_vectors(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert decode_varint(encoded) == (value, len(encoded))


@given(st.integers(INT64_MIN, INT64_MAX))
def test_varint_round_trip(value: int) -> None:
    enc = encode_varint(value)
    assert decode_varint(enc + b"\x99") == (value, len(enc))


def test_varint_truncated_and_overlong() -> None:
    with pytest.raises(InvalidRecordError):
        decode_varint(b"\x80\x80")
    with pytest.raises(InvalidRecordError):
        decode_varint(b"\xff" * 11)


# ----------------------------------------------------------------------------- header

def test_header_layout_offsets() -> None:
    raw = build_batch([SimpleRecord(b"k", b"v", (), 1234)], base_offset=77, producer_id=9,
                      producer_epoch=3, base_sequence=5, partition_leader_epoch=4)
    h = read_header(raw)
    assert struct.unpack_from(">q", raw, 0)[0] == h.base_offset == 77
    assert struct.unpack_from(">i", raw, 8)[0] == h.batch_length == len(raw) - 12
    assert struct.unpack_from(">i", raw, 12)[0] == h.partition_leader_epoch == 4
    assert raw[16] == h.magic == 2
    assert struct.unpack_from(">I", raw, 17)[0] == h.crc == crc32c.crc32c(raw[21:])
    assert struct.unpack_from(">q", raw, 43)[0] == h.producer_id == 9
    assert struct.unpack_from(">i", raw, 57)[0] == h.records_count == 1
    assert h.size == len(raw) and h.last_offset == 77 and h.next_offset == 78
    assert (h.compression, h.timestamp_type, h.is_transactional, h.is_control) == (0, 0, False, False)
    assert h.last_sequence == 5


def test_header_attribute_properties() -> None:
    raw = build_batch([SimpleRecord(b"k", b"v")], compression=4, timestamp_type=1, transactional=True,
                      producer_id=1, producer_epoch=0, base_sequence=0, delete_horizon=True)
    h = read_header(raw)
    assert h.compression == 4 and h.timestamp_type == 1 and h.is_transactional and h.has_delete_horizon
    assert h.attributes == 4 | 0x08 | 0x10 | 0x40


def test_last_sequence_wraps() -> None:
    h = BatchHeader(0, 49, -1, 2, 0, 0, 9, -1, -1, 1, 0, 2**31 - 5, 10)
    assert h.last_sequence == 4


def test_read_header_short_buffer() -> None:
    with pytest.raises(CorruptMessageError, match="batch at byte 3"):
        read_header(b"\x00" * 63, 3)


def test_iter_headers_stops_at_partial_batch() -> None:
    a = build_batch([SimpleRecord(b"a", b"1")], base_offset=0)
    b = build_batch([SimpleRecord(b"b", b"2"), SimpleRecord(b"c", b"3")], base_offset=1)
    buf = a + b + b[:-1]
    got = list(iter_headers(buf))
    assert [(p, h.base_offset, h.records_count) for p, h in got] == [(0, 0, 1), (len(a), 1, 2)]
    assert list(iter_headers(buf[:10])) == []


def test_iter_headers_rejects_tiny_batch_length() -> None:
    raw = bytearray(build_batch([SimpleRecord(b"a", b"1")]))
    struct.pack_into(">i", raw, 8, 10)
    with pytest.raises(CorruptMessageError, match="batch_length 10"):
        list(iter_headers(raw))


# ----------------------------------------------------------------------------- round trips

header_keys = st.text(max_size=8)
maybe_bytes = st.one_of(st.none(), st.binary(max_size=300))
headers_st = st.lists(st.tuples(header_keys, maybe_bytes), max_size=4).map(tuple)
timestamps = st.integers(0, 2**42)
simple_records = st.lists(
    st.builds(SimpleRecord, maybe_bytes, maybe_bytes, headers_st, timestamps), min_size=1, max_size=30
)


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=40, deadline=None)
@given(records=simple_records, base_offset=st.integers(0, 2**62), epoch=st.integers(-1, 2**31 - 1))
def test_simple_round_trip(codec: int, records: list[SimpleRecord], base_offset: int, epoch: int) -> None:
    raw = build_batch(records, base_offset=base_offset, compression=codec, partition_leader_epoch=epoch)
    decoded = decode_batch(raw)
    h = decoded.header
    assert h.compression == codec and h.records_count == len(records)
    assert h.base_offset == base_offset and h.last_offset_delta == len(records) - 1
    assert h.base_timestamp == records[0].timestamp
    assert h.max_timestamp == max(r.timestamp for r in records if r.timestamp is not None)  # all set here
    got = list(decode_records(raw, check_crc=True))
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in got] == [
        (base_offset + i, r.timestamp, r.key, r.value, tuple(r.headers)) for i, r in enumerate(records)
    ]
    # Kafka-python, an independent decoder, reads the same records.
    kp = DefaultRecordBatch(bytes(raw))
    assert kp.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value, [tuple(x) for x in r.headers]) for r in kp] == [
        (base_offset + i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(records)
    ]


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=25, deadline=None)
@given(
    records=st.lists(
        st.builds(Record, st.integers(0, 2**31 - 1), st.integers(-(2**40), 2**40), maybe_bytes, maybe_bytes,
                  headers_st),
        max_size=10,
    ),
    base_ts=st.integers(2**40, 2**42),  # record timestamps stay >= 0, as Kafka requires
)
def test_record_round_trip_with_gaps(codec: int, records: list[Record], base_ts: int) -> None:
    """Records with arbitrary deltas (as compaction leaves them) survive build/decode unchanged."""
    lod = max((r.offset_delta for r in records), default=5)
    raw = build_batch(records, compression=codec, base_timestamp=base_ts, last_offset_delta=lod)
    decoded = decode_batch(raw)
    assert decoded.records == [r._replace(headers=tuple(r.headers)) for r in records]
    assert decoded.header.last_offset_delta == lod
    assert decoded.header.base_timestamp == base_ts
    assert decoded.header.max_timestamp == max((base_ts + r.timestamp_delta for r in records), default=-1)


def test_empty_batch_as_left_by_compaction() -> None:
    raw = build_batch([], base_offset=100, last_offset_delta=9, base_timestamp=5, max_timestamp=7)
    d = decode_batch(raw)
    assert d.records == [] and d.header.records_count == 0 and d.header.next_offset == 110
    assert len(raw) == BATCH_OVERHEAD


def test_default_timestamp_is_now() -> None:
    from strom.core.records.builder import now_ms

    before = now_ms()
    d = decode_batch(build_batch([SimpleRecord(b"k", b"v"), SimpleRecord(None, b"w")]))
    after = now_ms()
    assert before <= d.header.base_timestamp <= d.header.max_timestamp <= after
    assert [r.timestamp_delta for r in d.records] == [0, 0]


def test_log_append_time_uses_max_timestamp() -> None:
    raw = build_batch([SimpleRecord(b"a", b"1", (), 10), SimpleRecord(b"b", b"2", (), 20)],
                      timestamp_type=1, max_timestamp=999)
    assert [r.timestamp for r in decode_records(raw)] == [999, 999]


def test_decode_records_over_several_batches_and_partial_tail() -> None:
    a = build_batch([SimpleRecord(b"a", b"1", (), 1)], base_offset=0, compression=1)
    b = build_batch([SimpleRecord(b"b", b"2", (), 2), SimpleRecord(b"c", b"3", (), 3)], base_offset=1,
                    compression=4)
    got = list(decode_records(a + b + a[:30]))
    assert [(r.offset, r.key, r.header.compression) for r in got] == [(0, b"a", 1), (1, b"b", 4), (2, b"c", 4)]


# ----------------------------------------------------------------------------- bad input

def test_decode_batch_checks_crc() -> None:
    raw = bytearray(build_batch([SimpleRecord(b"k", b"value", (), 1)]))
    raw[-2] ^= 0x01  # last byte of the value (the final byte is the header count)
    with pytest.raises(CorruptMessageError, match=r"CRC mismatch \(stored 0x[0-9a-f]{8}, computed"):
        decode_batch(raw)
    assert decode_batch(raw, check_crc=False).records[0].value == b"valud"


def test_decode_batch_bad_magic_and_truncation() -> None:
    raw = bytearray(build_batch([SimpleRecord(b"k", b"v", (), 1)]))
    with pytest.raises(CorruptMessageError):
        decode_batch(raw[:-1])
    raw[16] = 1
    with pytest.raises(UnsupportedForMessageFormatError):
        decode_batch(raw)


def test_parse_records_structure_errors() -> None:
    one = build_batch([SimpleRecord(b"k", b"v", (("h", b"x"),), 1)])[BATCH_OVERHEAD:]
    assert len(parse_records(one, 1)) == 1
    with pytest.raises(InvalidRecordError, match="truncated"):
        parse_records(one, 2)  # count says 2, only 1 there
    with pytest.raises(InvalidRecordError, match="bytes left"):
        parse_records(one + b"\x00", 1)
    with pytest.raises(InvalidRecordError):
        parse_records(one[:-1], 1)
    bad_len = bytearray(one)
    bad_len[0] += 2  # record length claims more than its fields
    with pytest.raises(InvalidRecordError):
        parse_records(bytes(bad_len) + b"\x00\x00", 1)
    # header key of length -1 (null) is not allowed
    rec = bytearray(b"\x00" + encode_varint(0) + encode_varint(0) + encode_varint(-1) + encode_varint(-1)
                    + encode_varint(1) + encode_varint(-1) + encode_varint(-1))
    with pytest.raises(InvalidRecordError, match="null header key"):
        parse_records(encode_varint(len(rec)) + bytes(rec), 1)


# ----------------------------------------------------------------------------- control records

@pytest.mark.parametrize("commit", [True, False])
def test_control_batch(commit: bool) -> None:
    raw = build_control_batch(commit, producer_id=4242, producer_epoch=7, coordinator_epoch=3,
                              base_offset=50, timestamp=1000, partition_leader_epoch=2)
    d = decode_batch(raw)
    h = d.header
    assert h.is_control and h.is_transactional and h.producer_id == 4242 and h.producer_epoch == 7
    assert h.base_sequence == -1 and h.records_count == 1 and h.base_offset == 50
    assert h.partition_leader_epoch == 2 and h.max_timestamp == 1000
    (rec,) = d.records
    assert rec.key == struct.pack(">hh", 0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    assert rec.value == struct.pack(">hi", 0, 3)
    marker = parse_control_record(rec.key, rec.value)
    assert marker.commit is commit and marker.coordinator_epoch == 3 and marker.version == 0
    # kafka-python recognises it as a control record of the same kind.
    (kp,) = list(DefaultRecordBatch(raw))
    assert DefaultRecordBatch(raw).is_control_batch and kp.commit is commit


@settings(max_examples=50, deadline=None)
@given(commit=st.booleans(), producer_id=st.integers(0, INT64_MAX), epoch=st.integers(0, 32767),
       coordinator_epoch=st.integers(-(2**31), 2**31 - 1), timestamp=st.integers(0, 2**50),
       leader_epoch=st.integers(-1, 2**31 - 1))
def test_control_batch_is_the_generic_encoding(commit: bool, producer_id: int, epoch: int, coordinator_epoch: int,
                                               timestamp: int, leader_epoch: int) -> None:
    """The marker is laid out by hand; it must be byte for byte what build_batch makes of it."""
    key = struct.pack(">hh", 0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    generic = build_batch([SimpleRecord(key, struct.pack(">hi", 0, coordinator_epoch), (), timestamp)],
                          producer_id=producer_id, producer_epoch=epoch, transactional=True, control=True,
                          partition_leader_epoch=leader_epoch)
    raw = build_control_batch(commit, producer_id, epoch, coordinator_epoch, timestamp=timestamp,
                              partition_leader_epoch=leader_epoch)
    assert raw == generic
    # Read back at an offset inside a larger buffer, as the log reads it.
    buf = bytearray(b"\xff" * 7 + raw)
    marker = read_control_record(buf, 7, read_header(buf, 7))
    assert marker is not None and marker.commit is commit and marker.coordinator_epoch == coordinator_epoch


@settings(max_examples=50, deadline=None)
@given(records=st.lists(st.tuples(st.none() | st.binary(max_size=300), st.none() | st.binary(max_size=300)),
                        min_size=1, max_size=8),
       timestamp=st.integers(0, 2**50), producer=st.booleans())
def test_keyed_batch_is_the_generic_encoding(records: list[tuple[bytes | None, bytes | None]], timestamp: int,
                                             producer: bool) -> None:
    """The coordinators' batch builder makes what build_batch makes of the same records."""
    pid, epoch = (77, 3) if producer else (-1, -1)
    generic = build_batch([SimpleRecord(k, v, (), timestamp) for k, v in records], producer_id=pid,
                          producer_epoch=epoch, transactional=producer)
    assert build_keyed_batch(records, timestamp=timestamp, producer_id=pid, producer_epoch=epoch,
                             transactional=producer) == generic
    with pytest.raises(ValueError):
        build_keyed_batch([])


def test_read_control_record_edge_cases() -> None:
    raw = build_control_batch(True, 9, 1, 4, timestamp=1000)
    h = read_header(raw)
    # A control batch the cleaner emptied: no record, no marker.
    emptied = build_batch([], producer_id=9, producer_epoch=1, transactional=True, control=True,
                          base_timestamp=1000, max_timestamp=1000)
    assert read_control_record(emptied, 0, read_header(emptied)) is None
    # A compressed control batch (no broker writes one, but a log may hold it) is decoded.
    key, value = struct.pack(">hh", 0, CONTROL_ABORT), struct.pack(">hi", 0, 6)
    zipped = build_batch([SimpleRecord(key, value, (), 1000)], compression=1, producer_id=9, producer_epoch=1,
                         transactional=True, control=True)
    marker = read_control_record(zipped, 0, read_header(zipped))
    assert marker is not None and not marker.commit and marker.coordinator_epoch == 6
    # A record cut short is an error, not an IndexError.
    with pytest.raises(InvalidRecordError):
        read_control_record(raw[:BATCH_OVERHEAD + 6], 0, h)
    # A key that is not a marker's is refused as parse_control_record refuses it.
    bad = build_batch([SimpleRecord(b"\x00", b"", (), 1000)], producer_id=9, producer_epoch=1,
                      transactional=True, control=True)
    with pytest.raises(InvalidRecordError):
        read_control_record(bad, 0, read_header(bad))


def test_parse_control_record_bad() -> None:
    with pytest.raises(InvalidRecordError):
        parse_control_record(b"\x00", b"")
    with pytest.raises(InvalidRecordError):
        parse_control_record(struct.pack(">hh", 0, 1), b"\x00")


# ----------------------------------------------------------------------------- kafka-python -> strom

@pytest.mark.parametrize("codec", CODECS)
def test_decode_kafka_python_compressible_batch(codec: int) -> None:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=2**30)
    for i in range(500):
        builder.append(i, timestamp=1000 + i, key=b"key-%d" % (i % 7), value=b"v" * 200,
                       headers=[("h", b"%d" % i)])
    raw = bytes(builder.build())
    assert read_header(raw).compression == codec
    got = list(decode_records(raw, check_crc=True))
    assert [(r.offset, r.timestamp, r.key, r.headers) for r in got] == [
        (i, 1000 + i, b"key-%d" % (i % 7), (("h", b"%d" % i),)) for i in range(500)
    ]
    assert all(r.value == b"v" * 200 for r in got)


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=25, deadline=None)
@given(records=simple_records, producer=st.booleans())
def test_decode_kafka_python_batches(codec: int, records: list[SimpleRecord], producer: bool) -> None:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=2**30)
    if producer:
        builder.set_producer_state(producer_id=77, producer_epoch=1, base_sequence=10, is_transactional=True)
    for i, r in enumerate(records):
        builder.append(i, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers))
    raw = bytes(builder.build())
    d = decode_batch(raw)
    # kafka-python stores a batch uncompressed when compressing does not make it smaller.
    assert d.header.compression in (codec, 0) and d.header.records_count == len(records)
    assert d.header.is_transactional is producer
    if producer:
        assert (d.header.producer_id, d.header.producer_epoch, d.header.base_sequence) == (77, 1, 10)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decode_records(raw, check_crc=True)] == [
        (i, r.timestamp, r.key, r.value, tuple(r.headers)) for i, r in enumerate(records)
    ]


def test_batch_module_constants() -> None:
    assert batch_mod.BATCH_OVERHEAD == 61 == batch_mod.HEADER_STRUCT.size
    assert batch_mod.MIN_BATCH_LENGTH == 49
