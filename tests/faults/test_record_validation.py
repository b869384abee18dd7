"""Malformed records inside CRC-valid batches, sent as raw Produce v9 frames to a broker process.

Each batch below is one that a broker which checks only the batch header acknowledges (it used
to: two records at one offset, consumers re-reading a batch, records that vanish). Kafka's
LogValidator / DefaultRecord refuse them: INVALID_RECORD (87), or INVALID_TIMESTAMP (32) for a
record timestamp out of the topic's bounds, with Produce v8+ ``record_errors`` naming the
record's index in the batch. Nothing of a refused batch is appended: a consumer afterwards reads
exactly the good records, at consecutive offsets.
"""

from __future__ import annotations

import datetime
import socket
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import crc32c
import pytest
from ck_helpers import create_topic, read_partition
from confluent_kafka.admin import AdminClient
from kafka_wire import connect, roundtrip
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from strom.core.records.builder import Record, SimpleRecord, build_batch, encode_records, encode_varint
from strom.core.testing import BrokerProcess

INVALID_TIMESTAMP = 32
INVALID_RECORD = 87
HOUR = 3_600_000


def seal(section: bytes, count: int, *, base_ts: int, max_ts: int | None = None,
         last_offset_delta: int | None = None, compression: int = 0) -> bytes:
    """A v2 batch around a records section as given (any bytes), header and CRC consistent."""
    lod = count - 1 if last_offset_delta is None else last_offset_delta
    body = struct.pack(">hiqqqhii", compression, lod, base_ts, base_ts if max_ts is None else max_ts,
                       -1, -1, -1, count) + section
    return struct.pack(">qiibI", 0, len(body) + 9, -1, 2, crc32c.crc32c(body)) + body


def records_of(n: int, ts: int, first: int = 0) -> list[Record]:
    return [Record(i, 0, b"k%d" % (first + i), b"v%d" % (first + i)) for i in range(n)]


def section(recs: list[Record]) -> bytes:
    return encode_records(recs)


def produce(sock: socket.socket, topic: str, batch: bytes, correlation: int = 1) -> Any:
    request = ProduceRequest(
        transactional_id=None, acks=i16(-1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topic_data=(TopicProduceData(name=TopicName(topic), partition_data=(
            PartitionProduceData(index=i32(0), records=Records(batch)),)),))
    response = roundtrip(sock, request, correlation_id=correlation)
    (topic_response,) = response.responses
    (partition,) = topic_response.partition_responses
    return partition


@pytest.fixture
def sock(broker: BrokerProcess) -> Iterator[socket.socket]:
    s = connect(broker.bootstrap)
    try:
        yield s
    finally:
        s.close()


def now() -> int:
    return int(time.time() * 1000)


def _fewer_declared(ts: int) -> bytes:
    # Three records inside, the header says two: a byte-for-byte third record trails.
    return seal(section(records_of(3, ts)), 2, base_ts=ts)


def _more_declared(ts: int) -> bytes:
    return seal(section(records_of(3, ts)), 4, base_ts=ts)


def _duplicate_offset_delta(ts: int) -> bytes:
    recs = records_of(3, ts)
    recs[2] = recs[2]._replace(offset_delta=1)  # two records at offset delta 1
    return seal(section(recs), 3, base_ts=ts)


def _invalid_varint(ts: int) -> bytes:
    # The second record's length: ten bytes with the continuation bit set.
    first = section(records_of(1, ts))
    return seal(first + b"\xff" * 10 + section(records_of(1, ts, 1))[1:], 2, base_ts=ts)


def _length_past_batch_end(ts: int) -> bytes:
    body = section(records_of(2, ts))
    first_len = len(section(records_of(1, ts)))
    return seal(body[:first_len] + encode_varint(500) + body[first_len + 1:], 2, base_ts=ts)


def _trailing_bytes(ts: int) -> bytes:
    return seal(section(records_of(2, ts)) + b"\x00\x00\x00", 2, base_ts=ts)


def _large_with_trailing_bytes(ts: int) -> bytes:
    # Over 64 KiB of records: the Python walk that names the error runs in a worker thread.
    recs = [Record(i, 0, b"k", bytes(100)) for i in range(1000)]
    return seal(section(recs) + b"\x00", 1000, base_ts=ts)


def _negative_header_count(ts: int) -> bytes:
    # attributes, ts delta 0, offset delta 0, key "k", value "v", header count -1
    rec = b"\x00\x00\x00" + b"\x02k" + b"\x02v" + encode_varint(-1)
    return seal(encode_varint(len(rec)) + rec, 1, base_ts=ts)


def _null_header_key(ts: int) -> bytes:
    rec = b"\x00\x00\x00" + b"\x02k" + b"\x02v" + encode_varint(1) + encode_varint(-1) + b"\x02x"
    return seal(encode_varint(len(rec)) + rec, 1, base_ts=ts)


MALFORMED: dict[str, tuple[Callable[[int], bytes], int, str]] = {
    # name: (batch, record index in record_errors, text of the error message)
    "record count lower than the records held": (_fewer_declared, 1, "records still remaining"),
    "record count higher than the records held": (_more_declared, 3, "premature EOF"),
    "duplicate offset deltas": (_duplicate_offset_delta, 2, "offset delta 1"),
    "invalid varint": (_invalid_varint, 1, "varint is too long"),
    "record length past the batch end": (_length_past_batch_end, 1, "Invalid record size"),
    "trailing bytes after the last record": (_trailing_bytes, 1, "records still remaining"),
    "trailing bytes after a large batch": (_large_with_trailing_bytes, 999, "records still remaining"),
    "negative header count": (_negative_header_count, 0, "invalid number of record headers"),
    "null header key": (_null_header_key, 0, "negative header key size"),
}


def test_malformed_batches_are_refused_and_not_appended(broker: BrokerProcess, sock: socket.socket,
                                                        topic_name: str) -> None:
    create_topic(AdminClient({"bootstrap.servers": broker.bootstrap}), topic_name)
    ts = now()
    good = 0
    for correlation, (name, (make, index, text)) in enumerate(MALFORMED.items(), start=1):
        # A good batch before each bad one: the bad one must leave no trace between them.
        ok = produce(sock, topic_name, build_batch([SimpleRecord(b"g", b"good-%d" % good, (), ts)]),
                     correlation * 2)
        assert int(ok.error_code) == 0 and ok.base_offset == good, name
        good += 1
        bad = produce(sock, topic_name, make(ts), correlation * 2 + 1)
        assert int(bad.error_code) == INVALID_RECORD, f"{name}: answered {bad.error_code}"
        errors = [(int(e.batch_index), e.batch_index_error_message)
                  for e in bad.record_errors]
        assert [i for i, _ in errors] == [index], f"{name}: {errors}"
        assert text in (errors[0][1] or ""), f"{name}: {errors}"
        assert text in (bad.error_message or ""), f"{name}: {bad.error_message}"
        assert broker.alive
    got = read_partition(broker.bootstrap, topic_name, 0, good, 0)
    assert [(m.offset(), m.value()) for m in got] == [(i, b"good-%d" % i) for i in range(good)]


def test_record_timestamp_out_of_bounds_behind_a_plausible_header(broker: BrokerProcess, sock: socket.socket,
                                                                  topic_name: str) -> None:
    """The header's max timestamp is now, the middle record is two hours ahead: Kafka checks
    every record (message.timestamp.after.max.ms, one hour here) and answers INVALID_TIMESTAMP
    with the record's index."""
    create_topic(AdminClient({"bootstrap.servers": broker.bootstrap}), topic_name,
                 config={"message.timestamp.after.max.ms": str(HOUR)})
    ts = now()
    recs = records_of(3, ts)
    recs[1] = recs[1]._replace(timestamp_delta=2 * HOUR)
    bad = produce(sock, topic_name, seal(section(recs), 3, base_ts=ts, max_ts=ts))
    assert int(bad.error_code) == INVALID_TIMESTAMP
    assert bad.error_message == "One or more records have been rejected due to invalid timestamp"
    [(index, message)] = [(int(e.batch_index), e.batch_index_error_message)
                          for e in bad.record_errors]
    assert index == 1 and message.startswith(f"Timestamp {ts + 2 * HOUR} of message with offset 1 is out of range")
    ok = produce(sock, topic_name, seal(section(records_of(3, ts)), 3, base_ts=ts), 2)
    assert int(ok.error_code) == 0 and ok.base_offset == 0


def test_keyless_record_on_compacted_topic_gets_kafkas_record_error(broker: BrokerProcess, sock: socket.socket,
                                                                   topic_name: str) -> None:
    create_topic(AdminClient({"bootstrap.servers": broker.bootstrap}), topic_name,
                 config={"cleanup.policy": "compact"})
    ts = now()
    recs = records_of(3, ts)
    recs[1] = recs[1]._replace(key=None)
    bad = produce(sock, topic_name, seal(section(recs), 3, base_ts=ts))
    assert int(bad.error_code) == INVALID_RECORD
    kafka_message = f"Compacted topic cannot accept message without key in topic partition {topic_name}-0"
    assert [(int(e.batch_index), e.batch_index_error_message) for e in bad.record_errors] == \
        [(1, kafka_message)]
    assert bad.error_message == (
        "One or more records have been rejected due to 1 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{kafka_message}')]")
