"""The hand-written FetchResponse encoder writes exactly what kio writes, for every version."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from strom.core.protocol import codec
from strom.core.protocol.fetch_response import PartitionRow, TopicRows, encode_fetch_response
from strom.core.protocol.messages import response_messages
from strom.core.records.pieces import RecordPieces

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
partitions = st.builds(
    PartitionRow, partition=st.integers(0, 2**31 - 1), error_code=st.sampled_from([0, 1, 3, 6, 74]),
    high_watermark=i64, last_stable_offset=i64, log_start_offset=i64,
    aborted=st.one_of(st.none(), st.lists(st.tuples(i64, i64), max_size=3)),
    records=st.one_of(st.none(), st.binary(max_size=300),
                      st.lists(st.binary(max_size=100), max_size=4).map(
                          lambda bs: RecordPieces(memoryview(b) for b in bs))))
topics = st.lists(st.builds(TopicRows, name=st.text("abc.-_", min_size=1, max_size=20),
                            topic_id=st.uuids(), partitions=st.lists(partitions, max_size=4)), max_size=3)


def _kio_frame(version: int, correlation: int, throttle: int, error: int, session: int,
               rows: list[TopicRows]) -> bytes:
    m = response_messages(1, version)
    responses = tuple(
        m.make("FetchableTopicResponse", topic=t.name, topic_id=t.topic_id, partitions=tuple(
            m.make("PartitionData", partition_index=p.partition, error_code=p.error_code,
                   high_watermark=p.high_watermark, last_stable_offset=p.last_stable_offset,
                   log_start_offset=p.log_start_offset,
                   aborted_transactions=None if p.aborted is None else tuple(
                       m.make("AbortedTransaction", producer_id=a, first_offset=b) for a, b in p.aborted),
                   records=None if p.records is None else bytes(p.records))
            for p in t.partitions))
        for t in rows)
    resp = m.make("FetchResponse", throttle_time=throttle, error_code=error, session_id=session,
                  responses=responses)
    return codec.encode_response(1, version, correlation, resp)


@settings(max_examples=60, deadline=None)
@given(version=st.integers(4, 17), correlation=i32, throttle=st.integers(0, 2**31 - 1),
       error=st.sampled_from([0, 70]), session=i32, rows=topics)
def test_matches_kio_byte_for_byte(version: int, correlation: int, throttle: int, error: int, session: int,
                                   rows: list[TopicRows]) -> None:
    fast = b"".join(encode_fetch_response(version, correlation, throttle, error, session, rows))
    assert fast == _kio_frame(version, correlation, throttle, error, session, rows)


def test_records_are_passed_through_without_copy() -> None:
    records = memoryview(b"x" * 1000)
    parts = encode_fetch_response(16, 1, 0, 0, 0, [TopicRows("t", uuid.uuid4(), [
        PartitionRow(0, 0, 10, 10, 0, None, records)])])
    assert any(part is records for part in parts)


def test_record_pieces_are_sent_as_their_views() -> None:
    # A remote read's batches span chunks: each view goes into the frame, none joined.
    chunks = [memoryview(bytearray(b"a" * 700))[100:], memoryview(b"b" * 300)]
    pieces = RecordPieces(chunks)
    parts = encode_fetch_response(16, 1, 0, 0, 0, [TopicRows("t", uuid.uuid4(), [
        PartitionRow(0, 0, 10, 10, 0, None, pieces)])])
    assert [p for p in parts if any(p is c for c in chunks)] == chunks
    frame = b"".join(parts)
    assert frame.endswith(b"a" * 600 + b"b" * 300 + b"\x00\x00\x00")  # partition, topic, response tags
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
