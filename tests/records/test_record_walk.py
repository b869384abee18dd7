"""Property tests of the produce-path record walk (strom.core.records.validate).

Two walks decide whether a batch's records are valid: aiokafka's compiled reader with a
canonical-size check (the fast path) and the Python transcription of Kafka's DefaultRecord
reader (the reference). The properties: every batch builder.py writes (any records, any codec)
is accepted; and on mutated batches the produce-path verdict is always the reference walk's,
so the fast path never accepts what Kafka's reader would refuse.
"""

from __future__ import annotations

import struct

import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strom.core.exceptions import KafkaError
from strom.core.records.builder import SimpleRecord, build_batch, decode_batch
from strom.core.records.validate import (
    _compiled_walk,
    _walk_records,
    record_errors_of,
    validate_produce_batches,
)

NOW = 1_700_000_000_000
HOUR = 3_600_000
NO_LIMIT = 1 << 62

keys = st.one_of(st.none(), st.binary(max_size=40))
values = st.one_of(st.none(), st.binary(max_size=300), st.builds(lambda n: bytes(n), st.integers(0, 20_000)))
headers = st.lists(st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=20))), max_size=3)
timestamps = st.one_of(st.integers(NOW - 2 * HOUR, NOW + 2 * HOUR), st.just(-1))
records = st.lists(st.builds(SimpleRecord, keys, values, headers, timestamps), min_size=1, max_size=60)


def validate(buf: bytes | bytearray, **kw: object) -> None:
    args: dict = {"max_batch_bytes": 1 << 24, "now_ms": NOW, "timestamp_before_max_ms": HOUR,
                  "timestamp_after_max_ms": HOUR, "topic_partition": "t-0"}
    args.update(kw)
    validate_produce_batches(buf, **args)


def reference(batch: bytes, compacted: bool = False) -> KafkaError | None:
    """The reference walk's verdict on an uncompressed batch: the error, or None."""
    count = struct.unpack_from(">i", batch, 57)[0]
    base_ts = struct.unpack_from(">q", batch, 27)[0]
    try:
        _walk_records(batch, 61, len(batch), count, base_ts, True, NOW, NOW - HOUR, NOW + HOUR, compacted, "t-0")
    except KafkaError as exc:
        return exc
    return None


def verdict(batch: bytes | bytearray, compacted: bool = False) -> KafkaError | None:
    try:
        validate(batch, compacted=compacted)
    except KafkaError as exc:
        return exc
    return None


def reseal(batch: bytearray) -> bytearray:
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return batch


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=records, codec=st.sampled_from([0, 1, 2, 3, 4]))
def test_every_built_batch_is_accepted_unless_a_timestamp_is_out_of_bounds(recs: list[SimpleRecord],
                                                                         codec: int) -> None:
    batch = build_batch(recs, compression=codec)
    out_of_bounds = [i for i, r in enumerate(recs)
                     if r.timestamp != -1 and abs((r.timestamp or 0) - NOW) > HOUR]
    error = verdict(batch)
    if not out_of_bounds:
        assert error is None, error
        validate(batch, compacted=True) if all(r.key is not None for r in recs) else None
        # Decoding the same batch gives back the records (the walk did not misread them).
        assert [(r.key, r.value) for r in decode_batch(batch).records] == [(r.key, r.value) for r in recs]
    else:
        assert error is not None and int(error.code) == 32
        assert [i for i, _ in record_errors_of(error)] == out_of_bounds


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=records, data=st.data(), compacted=st.booleans())
def test_mutated_batches_get_the_reference_verdict(recs: list[SimpleRecord], data: st.DataObject,
                                                   compacted: bool) -> None:
    recs = [r._replace(timestamp=NOW) for r in recs]
    batch = bytearray(build_batch(recs))
    kind = data.draw(st.sampled_from(["set", "insert", "delete", "count", "append"]))
    if kind == "count":
        n = data.draw(st.integers(1, 70))
        struct.pack_into(">i", batch, 57, n)
        struct.pack_into(">i", batch, 23, n - 1)
    elif kind == "append":
        batch += data.draw(st.binary(min_size=1, max_size=12))
    else:
        at = data.draw(st.integers(61, len(batch) - 1))
        if kind == "set":
            batch[at] = data.draw(st.integers(0, 255))
        elif kind == "insert":
            batch[at:at] = data.draw(st.binary(min_size=1, max_size=6))
        else:
            del batch[at:at + data.draw(st.integers(1, 6))]
            if len(batch) <= 61:
                return
    reseal(batch)
    expected = reference(bytes(batch), compacted)
    got = verdict(batch, compacted)
    assert (got is None) == (expected is None), (got, expected)
    if got is not None and expected is not None:
        assert int(got.code) == int(expected.code)
        assert record_errors_of(got) == record_errors_of(expected)


@settings(max_examples=300, deadline=None)
@given(section=st.binary(max_size=200), count=st.integers(1, 20))
def test_arbitrary_bytes_never_escape_as_anything_but_kafka_errors(section: bytes, count: int) -> None:
    body = struct.pack(">hiqqqhii", 0, count - 1, NOW, NOW, -1, -1, -1, count) + section
    batch = struct.pack(">qiibI", 0, len(body) + 9, -1, 2, crc32c.crc32c(body)) + body
    assert (verdict(batch) is None) == (reference(batch) is None)


def _one_record_batch(body: bytes) -> bytes:
    section = bytes([len(body) << 1]) + body
    payload = struct.pack(">hiqqqhii", 0, 0, NOW, NOW, -1, -1, -1, 1) + section
    return struct.pack(">qiibI", 0, len(payload) + 9, -1, 2, crc32c.crc32c(payload)) + payload


def test_where_aiokafkas_reader_and_kafkas_differ_kafka_decides() -> None:
    """aiokafka reads a record's attribute byte as a varint and takes 10-byte varints; Kafka
    reads one byte and at most 5. Both records below are whole to aiokafka, not to Kafka."""
    # attributes 0x80: to aiokafka attributes 0x80 0x00, then ts 0, offset 0, null key, null
    # value, no headers; to Kafka attributes 0x80, ts 0, offset 0, key "", value null, and a
    # header count of -1.
    attrs = _one_record_batch(b"\x80\x00\x00\x00\x01\x01\x00")
    error = verdict(attrs)
    assert error is not None and "invalid number of record headers -1" in str(error)
    # The key length 0 written in six bytes.
    overlong = _one_record_batch(b"\x00\x00\x00" + b"\x80" * 5 + b"\x00" + b"\x01\x00")
    error = verdict(overlong)
    assert error is not None and "varint is too long" in str(error)
    # The same records written as Kafka writes them are fine.
    assert verdict(_one_record_batch(b"\x00\x00\x00\x01\x01\x00")) is None
    assert verdict(_one_record_batch(b"\x00\x00\x00\x00\x01\x00")) is None


def test_non_minimal_encoding_kafka_accepts_is_accepted() -> None:
    """A record length written in two bytes (0x8e 0x00 = 7): not what clients write, so the
    compiled walk hands it to the reference walk, which accepts it as Kafka does."""
    body = b"\x00\x00\x00\x02k\x02v\x00"
    section = b"\x90\x00" + body  # 8 << 1 = 16 = 0x10, written as 0x90 0x00
    payload = struct.pack(">hiqqqhii", 0, 0, NOW, NOW, -1, -1, -1, 1) + section
    batch = struct.pack(">qiibI", 0, len(payload) + 9, -1, 2, crc32c.crc32c(payload)) + payload
    assert verdict(batch) is None


def test_compiled_walk_takes_fields_and_records_longer_than_its_table() -> None:
    """Keys, values and records over 32 KiB (past the size table) are still counted exactly,
    so the compiled walk accepts the batch by itself."""
    recs = [SimpleRecord(b"k" * 40_000, bytes(70_000), (("h", b"x" * 33_000),), NOW), SimpleRecord(None, b"v", (), NOW)]
    batch = build_batch(recs)
    assert _compiled_walk(memoryview(batch), NOW, NOW - HOUR, NOW + HOUR, False)
    assert verdict(batch) is None
