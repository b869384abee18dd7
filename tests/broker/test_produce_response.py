"""The hand-written ProduceResponse encoder writes exactly what kio writes, for every version."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from strom.core.protocol import codec
from strom.core.protocol.messages import response_messages
from strom.core.protocol.produce_response import PartitionResult, TopicResults, encode_produce_response
from strom.core.server.handlers import produce

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
partitions = st.builds(
    PartitionResult, partition=st.integers(0, 2**31 - 1), error_code=st.sampled_from([0, 1, 2, 6, 45, 46, 47]),
    base_offset=i64, log_start_offset=i64,
    log_append_time=st.one_of(st.just(-1), st.integers(0, 4_102_444_800_000)),  # kio's datetimes end at 9999
    error_message=st.one_of(st.none(), st.text(max_size=200)),
    record_errors=st.lists(st.tuples(st.integers(0, 2**31 - 1), st.one_of(st.none(), st.text(max_size=50))),
                           max_size=3))
topics = st.lists(st.builds(TopicResults, name=st.text(min_size=1, max_size=300),
                            partitions=st.lists(partitions, max_size=20),
                            topic_id=st.one_of(st.none(), st.uuids())), max_size=3)


def _kio_frame(version: int, correlation: int, throttle: int, rows: list[TopicResults]) -> bytes:
    m = response_messages(produce.API_KEY, version)
    responses = tuple(
        m.make("TopicProduceResponse", name=t.name, topic_id=t.topic_id, partition_responses=tuple(
            m.make("PartitionProduceResponse", index=p.partition, error_code=p.error_code, base_offset=p.base_offset,
                   log_append_time=p.log_append_time, log_start_offset=p.log_start_offset,
                   record_errors=tuple(m.make("BatchIndexAndErrorMessage", batch_index=i, batch_index_error_message=e)
                                       for i, e in p.record_errors) if version >= 8 else (),
                   error_message=p.error_message)
            for p in t.partitions))
        for t in rows)
    resp = m.make("ProduceResponse", responses=responses, throttle_time=throttle)
    return codec.encode_response(produce.API_KEY, version, correlation, resp)


@settings(max_examples=150, deadline=None)
@given(version=st.integers(*produce.VERSIONS), correlation=i32, throttle=st.integers(0, 2**31 - 1), rows=topics)
def test_matches_kio_byte_for_byte(version: int, correlation: int, throttle: int, rows: list[TopicResults]) -> None:
    assert encode_produce_response(version, correlation, throttle, rows) == _kio_frame(version, correlation,
                                                                                       throttle, rows)


def test_frame_decodes_with_kio() -> None:
    """A decoder that does not share the encoder's code reads the frame back (v12, flexible)."""
    from kio.serial import entity_reader

    rows = [TopicResults("orders", [PartitionResult(3, 0, 4096, -1, 0, None),
                                    PartitionResult(5, 47, -1, -1, -1, "fenced")])]
    frame = encode_produce_response(12, 77, 0, rows)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert int.from_bytes(frame[4:8], "big") == 77
    body, _ = entity_reader(codec.response_class(0, 12))(frame, 9)
    (topic,) = body.responses
    assert topic.name == "orders"
    assert [(p.index, int(p.error_code), p.base_offset, p.error_message) for p in topic.partition_responses] == \
        [(3, 0, 4096, None), (5, 47, -1, "fenced")]
