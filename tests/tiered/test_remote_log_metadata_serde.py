"""``__remote_log_metadata`` record bytes and partitioning, checked against Kafka's own.

The expected hex strings and partition numbers were printed by Kafka 4.3.1's
``RemoteLogMetadataSerde.serialize`` and ``RemoteLogMetadataTopicPartitioner(50)`` (jshell with
``.cache/kafka-ref/lib/*.jar`` on the class path) for the values built here.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strom.plugins.hookspecs.storage import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from strom.tiered.remote_log_metadata_serde import (
    RemoteLogMetadata,
    RemoteLogMetadataSerdeError,
    RemoteLogSegmentMetadataSnapshot,
    deserialize,
    metadata_partition,
    serialize,
)

TOPIC_ID = uuid.UUID("0123456789abcdef" "fedcba9876543210")
TIP = TopicIdPartition(TOPIC_ID, "orders", 7)
SID = RemoteLogSegmentId(TIP, uuid.UUID("1111111111111111" "2222222222222222"))
SEGMENT = RemoteLogSegmentMetadata(SID, 100, 199, 1700000000123, 1, 1700000000456, 4096, {0: 100, 3: 150})

KAFKA = {
    "segment": "010000076f72646572730123456789abcdeffedcba987654321000000007001111111111111111222222222222222200"
               "000000000000006400000000000000c7000000010000018bcfe5687b0000018bcfe569c8030000000000000000000000"
               "64000000000300000000000000960000001000000000",
    "segment_txn_empty": "010000076f72646572730123456789abcdeffedcba98765432100000000700111111111111111122222222222222"
                         "2200000000000000006400000000000000c7000000010000018bcfe5687b0000018bcfe569c8030000000000000000"
                         "00000064000000000300000000000000960000001000040102030001000101",
    "update": "010100076f72646572730123456789abcdeffedcba987654321000000007001111111111111111222222222222222200"
              "000000020000018bcfe56b15000100",
    "delete": "010200076f72646572730123456789abcdeffedcba98765432100000000700000000030000018bcfe56be70100",
}


def test_records_are_byte_for_byte_kafkas() -> None:
    from dataclasses import replace

    records: dict[str, RemoteLogMetadata] = {
        "segment": SEGMENT,
        "segment_txn_empty": replace(SEGMENT, custom_metadata=b"\x01\x02\x03", txn_index_empty=True),
        "update": RemoteLogSegmentMetadataUpdate(SID, 1700000000789, None, RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 2),
        "delete": RemotePartitionDeleteMetadata(TIP, RemotePartitionDeleteState.DELETE_PARTITION_STARTED,
                                                1700000000999, 3),
    }
    for name, record in records.items():
        assert serialize(record).hex() == KAFKA[name], name
        assert deserialize(bytes.fromhex(KAFKA[name])) == record, name


def test_metadata_partition_is_kafkas() -> None:
    assert [metadata_partition(TopicIdPartition(TOPIC_ID, "orders", p), 50) for p in range(8)] == \
        [11, 2, 38, 12, 10, 20, 3, 26]
    other = uuid.UUID(int=(((1 << 64) - 1) << 64) | 42)  # Uuid(-1L, 42L)
    assert [metadata_partition(TopicIdPartition(other, "x", p), 50) for p in range(4)] == [17, 41, 15, 13]


@given(start=st.integers(0, 2**62), length=st.integers(0, 2**20), size=st.integers(0, 2**31 - 1),
       custom=st.none() | st.binary(max_size=40), state=st.sampled_from(list(RemoteLogSegmentState)),
       epochs=st.dictionaries(st.integers(0, 2**31 - 1), st.integers(0, 2**62), min_size=1, max_size=5),
       txn_empty=st.booleans(), topic=st.text(min_size=1, max_size=20))
def test_round_trips(start: int, length: int, size: int, custom: bytes | None, state: RemoteLogSegmentState,
                     epochs: dict[int, int], txn_empty: bool, topic: str) -> None:
    sid = RemoteLogSegmentId(TopicIdPartition(uuid.uuid4(), topic, 3), uuid.uuid4())
    m = RemoteLogSegmentMetadata(sid, start, start + length, 5, 1, 6, size, epochs, custom, state, txn_empty)
    assert deserialize(serialize(m)) == m
    snap = RemoteLogSegmentMetadataSnapshot(sid.id, start, start + length, 5, 1, 6, size, custom, state, epochs,
                                            txn_empty)
    assert deserialize(serialize(snap)) == snap


@pytest.mark.parametrize("data", [b"", b"\x02\x00\x00", b"\x01\x09\x00", b"\x01\x00\x01",
                                  bytes.fromhex(KAFKA["update"])[:-3], bytes.fromhex(KAFKA["update"]) + b"\x00"])
def test_bad_bytes_raise(data: bytes) -> None:
    with pytest.raises(RemoteLogMetadataSerdeError):
        deserialize(data)
