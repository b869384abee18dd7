"""__consumer_offsets record codec: Kafka's bytes, round trips, corrupt input."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strom.core.coordinator.group import records as R
from strom.core.exceptions import KafkaError


def test_offset_commit_key_matches_kafka_bytes() -> None:
    # int16 version 1, int16-length "g", int16-length "t", int32 partition 3 (non-flexible).
    key, value = R.encode_record(R.OffsetCommitKey("g", "t", 3), R.OffsetCommitValue(5, 2, "meta", 1000))
    assert key.hex() == "0001" + "000167" + "000174" + "00000003"
    # value v3: offset, leader epoch, metadata, commit timestamp
    assert value is not None and value.hex() == "0003" + "0000000000000005" + "00000002" + "00046d657461" + "00000000000003e8"
    assert R.decode_key(key) == (1, R.OffsetCommitKey("g", "t", 3))
    assert R.decode_value(1, value) == R.OffsetCommitValue(5, 2, "meta", 1000)


def test_tombstone_and_unknown_record_type() -> None:
    _key, value = R.encode_record(R.GroupMetadataKey("grp"), None)
    assert value is None and R.decode_value(2, None) is None
    assert R.decode_key(b"\x00\x7f" + b"\x00\x01x") is None  # a record type this build does not know: skipped


@given(st.text(max_size=20), st.integers(-1, 2**31 - 1), st.text(max_size=10) | st.none(),
       st.binary(max_size=50), st.binary(max_size=50), st.sampled_from([0, 1, 2, 3, 4]))
def test_group_metadata_round_trip(group_id: str, generation: int, protocol: str | None, sub: bytes, asg: bytes,
                                   version: int) -> None:
    member = R.MemberMetadata("m-1", "inst" if version >= 3 else None, "client", "/127.0.0.1",
                              300000 if version >= 1 else 0, 45000, sub, asg)
    value = R.GroupMetadataValue("consumer", generation, protocol, "m-1", 77 if version >= 2 else -1, [member])
    assert R.GroupMetadataValue.decode(value.encode(version), version) == value


def test_consumer_group_records_round_trip() -> None:
    tid = uuid.uuid4()
    member = R.ConsumerGroupMemberMetadataValue(
        "inst", None, "client", "/h", ["a", "b"], None, 5000, "uniform",
        R.ClassicMemberMetadata(10000, [R.ClassicProtocol("range", b"\x00\x01")]))
    for key, value in [
        (R.ConsumerGroupMemberMetadataKey("g", "m"), member),
        (R.ConsumerGroupMetadataKey("g"), R.ConsumerGroupMetadataValue(7, metadata_hash=99)),
        (R.ConsumerGroupCurrentMemberAssignmentKey("g", "m"), R.ConsumerGroupCurrentMemberAssignmentValue(
            3, 2, 0, [R.TopicPartitions(tid, [0, 1])], [])),
        (R.ConsumerGroupTargetAssignmentMemberKey("g", "m"), R.ConsumerGroupTargetAssignmentMemberValue(
            [R.TopicPartitions(tid, [2])])),
        (R.ConsumerGroupPartitionMetadataKey("g"), R.ConsumerGroupPartitionMetadataValue(
            [R.TopicMetadata(tid, "t", 3, [R.PartitionMetadata(0, ["r1"])])])),
    ]:
        k, v = R.encode_record(key, value)
        known = R.decode_key(k)
        assert known is not None
        record_type, decoded_key = known
        assert decoded_key == key
        assert R.decode_value(record_type, v) == value


@pytest.mark.parametrize("cut", [1, 3, 9, 15])
def test_truncated_records_are_corrupt(cut: int) -> None:
    key, value = R.encode_record(R.OffsetCommitKey("group", "topic", 1), R.OffsetCommitValue(9, -1, "x" * 10, 1))
    assert value is not None
    with pytest.raises(KafkaError):
        R.decode_value(1, value[:cut])
    with pytest.raises(KafkaError):
        R.decode_key(key[:cut])


def _member_value(classic: R.ClassicMemberMetadata | None) -> R.ConsumerGroupMemberMetadataValue:
    return R.ConsumerGroupMemberMetadataValue("i", None, "c", "h", ["t"], None, 5000, None, classic)


def test_member_value_with_classic_metadata_matches_kafka_bytes() -> None:
    # ClassicMemberMetadata is a tagged *nullable* struct: Kafka's generated writer puts a uvarint 1
    # presence marker before it (counted in the tagged size) and its reader treats 0 as null.
    classic = R.ClassicMemberMetadata(10000, [R.ClassicProtocol("range", b"\x00\x01")])
    untagged = "0269" "00" "0263" "0268" "02" "0274" "00" "00001388" "00"
    struct_hex = "00002710" "02" "0672616e6765" "030001" "00" "00"   # 16 bytes
    data = _member_value(classic).encode(0)
    assert data.hex() == untagged + "01" + "00" + "11" + "01" + struct_hex
    assert R.ConsumerGroupMemberMetadataValue.decode(data, 0) == _member_value(classic)
    # null (the default) is not written at all
    assert _member_value(None).encode(0).hex() == untagged + "00"
    # a tagged null marker (uvarint 0) decodes as null, as in Kafka's reader
    assert R.ConsumerGroupMemberMetadataValue.decode(bytes.fromhex(untagged + "01" + "00" + "01" + "00"), 0) \
        == _member_value(None)


def test_offset_commit_value_flexible_v4_bytes() -> None:
    # v4 is the first flexible OffsetCommitValue version: compact string, tagged-field section.
    data = R.OffsetCommitValue(5, 2, "m", 1000).encode(4)
    assert data.hex() == "0000000000000005" + "00000002" + "026d" + "00000000000003e8" + "00"
    assert R.OffsetCommitValue.decode(data, 4) == R.OffsetCommitValue(5, 2, "m", 1000)


def test_unsupported_value_version_is_corrupt() -> None:
    with pytest.raises(KafkaError):
        R.decode_value(1, b"\x00\x09" + b"\x00" * 20)
