"""``__share_group_state`` records: byte-for-byte Kafka 4.3.1's, and the state merge of updates."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strom.core.coordinator.runtime import java_hash_partition
from strom.core.coordinator.share.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    FetchedBatch,
    PersisterStateBatch,
    RecordState,
    SharePartition,
    SharePartitionConfig,
)
from strom.core.coordinator.share.state_records import (
    ShareGroupOffset,
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareUpdateKey,
    ShareUpdateValue,
    StateBatch,
    coordinator_key,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    merge_state_batches,
    parse_coordinator_key,
    topic_id_string,
)
from strom.core.errors import CorruptMessageError, InvalidRequestError

TOPIC_ID = uuid.UUID(bytes=bytes(range(1, 17)))

# Written by Kafka 4.3.1's generated classes (kafka-share-coordinator-4.3.1.jar) through
# MessageUtil.toCoordinatorTypePrefixedBytes (keys) and toVersionPrefixedBytes(0, value), for
# the same field values as below.
GOLDEN_SNAPSHOT_KEY = "0000000267310102030405060708090a0b0c0d0e0f1000000003"
GOLDEN_UPDATE_KEY = "0001000267310102030405060708090a0b0c0d0e0f1000000003"
GOLDEN_SNAPSHOT_VALUE = ("0000000000020000000100000005000000000000006400000000000003e800000000000007d0020000000000"
                         "00006400000000000000680200010001000400000007")
GOLDEN_UPDATE_VALUE = "00000000000200000005ffffffffffffffff02000000000000006900000000000000690400030000"
SNAPSHOT = ShareSnapshotValue(snapshot_epoch=2, state_epoch=1, leader_epoch=5, start_offset=100,
                              delivery_complete_count=7, create_timestamp=1000, write_timestamp=2000,
                              state_batches=[StateBatch(100, 104, 2, 1)])
UPDATE = ShareUpdateValue(snapshot_epoch=2, leader_epoch=5, start_offset=-1,
                          state_batches=[StateBatch(105, 105, 4, 3)])


def test_bytes_are_kafkas() -> None:
    assert encode_key(ShareSnapshotKey("g1", TOPIC_ID, 3)).hex() == GOLDEN_SNAPSHOT_KEY
    assert encode_key(ShareUpdateKey("g1", TOPIC_ID, 3)).hex() == GOLDEN_UPDATE_KEY
    assert (encode_value(SNAPSHOT) or b"").hex() == GOLDEN_SNAPSHOT_VALUE
    assert (encode_value(UPDATE) or b"").hex() == GOLDEN_UPDATE_VALUE
    assert encode_value(None) is None


def test_decode_round_trip() -> None:
    skey = decode_key(bytes.fromhex(GOLDEN_SNAPSHOT_KEY))
    ukey = decode_key(bytes.fromhex(GOLDEN_UPDATE_KEY))
    assert skey == ShareSnapshotKey("g1", TOPIC_ID, 3) and ukey == ShareUpdateKey("g1", TOPIC_ID, 3)
    assert decode_value(skey, bytes.fromhex(GOLDEN_SNAPSHOT_VALUE)) == SNAPSHOT
    assert decode_value(ukey, bytes.fromhex(GOLDEN_UPDATE_VALUE)) == UPDATE
    assert decode_value(skey, None) is None
    assert decode_key(b"\x00\x07rest") is None  # a record type of a later version: skipped
    with pytest.raises(CorruptMessageError):
        decode_key(b"\x00")
    with pytest.raises(CorruptMessageError):
        decode_value(skey, bytes.fromhex(GOLDEN_SNAPSHOT_VALUE)[:-5])


def test_coordinator_key_is_kafkas() -> None:
    assert topic_id_string(TOPIC_ID) == "AQIDBAUGBwgJCgsMDQ4PEA"  # Kafka's Uuid.toString()
    assert coordinator_key("g1", TOPIC_ID, 3) == "g1:AQIDBAUGBwgJCgsMDQ4PEA:3"
    assert 0 <= java_hash_partition(coordinator_key("g1", TOPIC_ID, 3), 50) < 50


def b(first: int, last: int, state: RecordState, count: int) -> PersisterStateBatch:
    return PersisterStateBatch(first, last, int(state), count)


def test_merge_newer_batches_win_offset_by_offset() -> None:
    cur = [b(0, 9, RecordState.AVAILABLE, 1)]
    got = merge_state_batches(cur, [b(3, 4, RecordState.ACKNOWLEDGED, 1), b(9, 12, RecordState.ARCHIVED, 2)], 0)
    assert got == [b(0, 2, RecordState.AVAILABLE, 1), b(3, 4, RecordState.ACKNOWLEDGED, 1),
                   b(5, 8, RecordState.AVAILABLE, 1), b(9, 12, RecordState.ARCHIVED, 2)]
    # The start offset cuts everything below it; equal neighbours join.
    got = merge_state_batches(got, [b(5, 8, RecordState.ACKNOWLEDGED, 1)], 4)
    assert got == [b(4, 8, RecordState.ACKNOWLEDGED, 1), b(9, 12, RecordState.ARCHIVED, 2)]
    assert merge_state_batches(got, [], 13) == []


def test_share_group_offset_applies_updates() -> None:
    s = ShareGroupOffset.from_snapshot(SNAPSHOT)
    assert s.to_snapshot() == SNAPSHOT
    s2 = s.apply_update(UPDATE)
    assert s2.start_offset == 100
    assert s2.state_batches == (b(100, 104, RecordState.ACKNOWLEDGED, 1), b(105, 105, RecordState.ARCHIVED, 3))
    s3 = s2.apply_update(ShareUpdateValue(2, -1, 105, -1, []))
    assert (s3.start_offset, s3.leader_epoch, s3.state_batches) == (105, 5, (b(105, 105, RecordState.ARCHIVED, 3),))


def test_share_partition_state_survives_the_persisted_form() -> None:
    """What a SharePartition writes (start offset + state batches, as a ShareUpdate folded into the
    snapshot) rebuilds the same in-flight state: acknowledged stays done, released is redelivered."""
    cfg = SharePartitionConfig(record_lock_duration_ms=1000)
    sp = SharePartition(cfg, 0)
    sp.acquire("m", [FetchedBatch(0, 9)], max_records=10, now_ms=0)
    sp.acknowledge("m", [AcknowledgementBatch(0, 3, (AcknowledgeType.ACCEPT,)),
                         AcknowledgementBatch(5, 5, (AcknowledgeType.RELEASE,)),
                         AcknowledgementBatch(6, 6, (AcknowledgeType.REJECT,))], now_ms=1)
    stored = ShareGroupOffset(0, 1, 0, 0).apply_update(
        ShareUpdateValue(0, 0, sp.start_offset, -1, [StateBatch(b.first_offset, b.last_offset, b.delivery_state,
                                                                b.delivery_count) for b in sp.state_batches()]))
    back = SharePartition(cfg, stored.start_offset, stored.state_batches)
    assert (back.start_offset, back.end_offset) == (4, 9)
    assert back.acquire("n", [FetchedBatch(4, 12)], max_records=100, now_ms=2) == [
        AcquiredRecords(4, 5, 2), AcquiredRecords(7, 9, 2), AcquiredRecords(10, 12, 1)]


@given(group=st.text(min_size=1).filter(lambda g: not g.endswith(":") and g != ":" * len(g)),
       topic=st.uuids(), partition=st.integers(-(2**31), 2**31 - 1))
def test_coordinator_key_parses_back(group: str, topic: uuid.UUID, partition: int) -> None:
    """FindCoordinator key type 2 reads back what the share coordinator hashes (Kafka's
    SharePartitionKey.getInstance of asCoordinatorKey), colons in the group id included."""
    assert parse_coordinator_key(coordinator_key(group, topic, partition)) == (group, topic, partition)


@pytest.mark.parametrize("key", ["", "g", f"g:{topic_id_string(TOPIC_ID)}", f":{topic_id_string(TOPIC_ID)}:0",
                                 f"g:{topic_id_string(TOPIC_ID)}: 1", f"g:{topic_id_string(TOPIC_ID)}:1_0",
                                 f"g:{topic_id_string(TOPIC_ID)}:2147483648", f"g:{TOPIC_ID}:0",
                                 f"g:{topic_id_string(TOPIC_ID)}=:0", "g:AAAAAAAAAAAAAAAAAAAA$A:0"])
def test_malformed_coordinator_key_is_invalid_request(key: str) -> None:
    with pytest.raises(InvalidRequestError):
        parse_coordinator_key(key)
