"""The hand-written AddPartitionsToTxn response (a producer's, v0-3) writes exactly what kio writes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from strom.core.protocol import codec
from strom.core.protocol.messages import response_messages
from strom.core.server.handlers import add_partitions_to_txn as apt

# Partitions of up to three topics (names with multi-byte characters too), any error codes.
codes = st.dictionaries(
    st.tuples(st.sampled_from(["t", "orders", "é-" + "x" * 200]), st.integers(0, 2**31 - 1)),
    st.sampled_from([0, 3, 29, 47, 48, 49, 51, 53, 55]), max_size=12)


@settings(max_examples=200, deadline=None)
@given(version=st.integers(0, apt.BATCHED_SINCE - 1), correlation=st.integers(-(2**31), 2**31 - 1),
       throttle=st.integers(0, 2**31 - 1), codes=codes)
def test_matches_kio_byte_for_byte(version: int, correlation: int, throttle: int,
                                   codes: dict[tuple[str, int], int]) -> None:
    m = response_messages(apt.API_KEY, version)
    expected = codec.encode_response(apt.API_KEY, version, correlation, m.make(
        "AddPartitionsToTxnResponse", throttle_time=throttle,
        results_by_topic_v3_and_below=tuple(apt._topic_results(m, codes))))
    assert apt.ProducerAnswer(throttle, codes).frame_parts(version, correlation) == expected
