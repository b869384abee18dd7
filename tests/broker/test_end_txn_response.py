"""The hand-written EndTxn response writes exactly what kio writes, for every version."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from strom.core.protocol import codec
from strom.core.protocol.messages import response_messages
from strom.core.server.handlers import end_txn


@settings(max_examples=200, deadline=None)
@given(version=st.integers(*end_txn.VERSIONS), correlation=st.integers(-(2**31), 2**31 - 1),
       throttle=st.integers(0, 2**31 - 1), code=st.sampled_from([0, 15, 47, 48, 51, 53, 90, 125]),
       producer_id=st.integers(-1, 2**63 - 1), producer_epoch=st.integers(-1, 2**15 - 1))
def test_matches_kio_byte_for_byte(version: int, correlation: int, throttle: int, code: int, producer_id: int,
                                   producer_epoch: int) -> None:
    m = response_messages(end_txn.API_KEY, version)
    fields = {"throttle_time": throttle, "error_code": code}
    if version >= end_txn.TV2_SINCE:
        fields |= {"producer_id": producer_id, "producer_epoch": producer_epoch}
    expected = codec.encode_response(end_txn.API_KEY, version, correlation, m.make("EndTxnResponse", **fields))
    answer = end_txn.EndTxnAnswer(throttle, code, producer_id, producer_epoch)
    assert answer.frame_parts(version, correlation) == expected
