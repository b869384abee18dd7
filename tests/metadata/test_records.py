"""Metadata record codec: hypothesis round trips, Kafka's byte layout, corrupt input."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strom.core.errors import CorruptMessageError
from strom.core.metadata.records import (
    AbortTransactionRecord,
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ClearElrRecord,
    ClientQuotaRecord,
    ConfigRecord,
    ControllerEndpoint,
    ControllerFeature,
    DelegationTokenRecord,
    EntityData,
    FeatureLevelRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveDelegationTokenRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnknownMetadataRecordError,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    ZkMigrationStateRecord,
    decode_record,
    encode_record,
)
from strom.core.protocol.message_codec import Message
from strom.core.raft.control_records import LeaderChangeMessage, Voter

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
ids = st.uuids()
names = st.text(max_size=30)
int_lists = st.lists(i32, max_size=6)
opt_int_lists = st.none() | int_lists

records = st.one_of(
    st.builds(TopicRecord, names, ids),
    st.builds(PartitionRecord, partition_id=i32, topic_id=ids, replicas=int_lists, isr=int_lists,
              removing_replicas=int_lists, adding_replicas=int_lists, leader=i32,
              leader_recovery_state=st.integers(-128, 127), leader_epoch=i32, partition_epoch=i32,
              directories=st.lists(ids, max_size=3), eligible_leader_replicas=opt_int_lists,
              last_known_elr=opt_int_lists),
    st.builds(ConfigRecord, st.integers(-128, 127), names, names, st.none() | names),
    st.builds(PartitionChangeRecord, partition_id=i32, topic_id=ids, isr=opt_int_lists, leader=i32,
              replicas=opt_int_lists, removing_replicas=opt_int_lists, adding_replicas=opt_int_lists,
              leader_recovery_state=st.integers(-128, 127), directories=st.none() | st.lists(ids, max_size=3),
              eligible_leader_replicas=opt_int_lists, last_known_elr=opt_int_lists),
    st.builds(RegisterBrokerRecord, broker_id=i32, is_migrating_zk_broker=st.booleans(), incarnation_id=ids,
              broker_epoch=i64,
              end_points=st.lists(st.builds(BrokerEndpoint, names, names, st.integers(0, 65535),
                                            st.integers(-(2**15), 2**15 - 1)), max_size=3),
              rack=st.none() | names, fenced=st.booleans(), in_controlled_shutdown=st.booleans(),
              log_dirs=st.lists(ids, max_size=3), cordoned_log_dirs=st.none() | st.lists(ids, max_size=2)),
    st.builds(RemoveTopicRecord, ids),
    st.builds(FeatureLevelRecord, names, st.integers(-(2**15), 2**15 - 1)),
    st.builds(ProducerIdsRecord, i32, i64, i64),
    st.just(NoOpRecord()),
    st.builds(UnregisterBrokerRecord, i32, i64),
    st.builds(FenceBrokerRecord, i32, i64),
    st.builds(UnfenceBrokerRecord, i32, i64),
    st.builds(BrokerRegistrationChangeRecord, broker_id=i32, broker_epoch=i64, fenced=st.integers(-128, 127),
              in_controlled_shutdown=st.integers(-128, 127), log_dirs=st.lists(ids, max_size=3),
              cordoned_log_dirs=st.none() | st.lists(ids, max_size=2)),
    st.builds(UserScramCredentialRecord, names, st.integers(-128, 127), st.binary(max_size=40),
              st.binary(max_size=40), st.binary(max_size=40), i32),
    st.builds(RemoveUserScramCredentialRecord, names, st.integers(-128, 127)),
    st.builds(AccessControlEntryRecord, ids, *[st.integers(-128, 127)], names, st.integers(-128, 127), names,
              names, st.integers(-128, 127), st.integers(-128, 127)),
    st.builds(RemoveAccessControlEntryRecord, ids),
    st.builds(ClientQuotaRecord, st.lists(st.builds(EntityData, names, st.none() | names), max_size=2),
              names, st.floats(allow_nan=False), st.booleans()),
    st.builds(DelegationTokenRecord, names, names, st.lists(names, max_size=3), i64, i64, i64, names),
    st.builds(RemoveDelegationTokenRecord, names),
    st.builds(ZkMigrationStateRecord, st.integers(-128, 127)),
    st.builds(AbortTransactionRecord, st.none() | names),
    st.builds(RegisterControllerRecord, i32, ids, st.booleans(),
              st.lists(st.builds(ControllerEndpoint, names, names, st.integers(0, 65535),
                                 st.integers(-(2**15), 2**15 - 1)), max_size=2),
              st.lists(st.builds(ControllerFeature, names, st.integers(-(2**15), 2**15 - 1),
                                 st.integers(-(2**15), 2**15 - 1)), max_size=2)),
    st.builds(ClearElrRecord, names),
)


@given(records)
def test_round_trip_at_highest_version(record: Message) -> None:
    assert decode_record(encode_record(record)) == record


@given(st.builds(TopicRecord, names, ids) | st.builds(ConfigRecord, st.integers(0, 4), names, names,
                                                       st.none() | names))
def test_round_trip_version_zero_types(record: Message) -> None:
    assert decode_record(encode_record(record, 0)) == record


def test_partition_record_v0_drops_later_fields() -> None:
    rec = PartitionRecord(partition_id=1, topic_id=uuid.uuid4(), replicas=[1, 2], isr=[1], leader=1,
                          leader_epoch=3, partition_epoch=4, directories=[uuid.uuid4(), uuid.uuid4()])
    back = decode_record(encode_record(rec, 0))
    assert isinstance(back, PartitionRecord)
    assert back.directories == [] and back.replicas == [1, 2] and back.leader_epoch == 3


def test_feature_level_record_bytes_match_kafka() -> None:
    # frame 1, api key 12, version 0, compact string "metadata.version", int16 27, no tagged fields
    assert encode_record(FeatureLevelRecord("metadata.version", 27)) == (
        b"\x01\x0c\x00\x11metadata.version\x00\x1b\x00")


def test_topic_record_bytes_match_kafka() -> None:
    tid = uuid.UUID(bytes=bytes(range(16)))
    assert encode_record(TopicRecord("ab", tid)) == b"\x01\x02\x00\x03ab" + bytes(range(16)) + b"\x00"


def test_partition_change_writes_only_set_tagged_fields() -> None:
    tid = uuid.UUID(int=5)
    body = encode_record(PartitionChangeRecord(partition_id=0, topic_id=tid, leader=3))[3:]
    # partition id, topic id, then one tagged field: tag 1, size 4, leader 3
    assert body == b"\x00\x00\x00\x00" + tid.bytes + b"\x01\x01\x04\x00\x00\x00\x03"


def test_control_message_round_trip() -> None:
    msg = LeaderChangeMessage(0, 1, [Voter(1)], [Voter(1)])
    assert LeaderChangeMessage.decode(msg.encode(0), 0) == msg


def test_unknown_record_type_is_refused_with_a_clear_message() -> None:
    # Kafka's MetadataRecordSerde refuses an unknown type (no header bit marks one skippable).
    with pytest.raises(UnknownMetadataRecordError, match=r"metadata record type 99 \(version 0\) is unknown"):
        decode_record(b"\x01\x63\x00abc")
    with pytest.raises(UnknownMetadataRecordError, match="RegisterBrokerRecord version 5 is not supported"):
        decode_record(b"\x01\x00\x05")


@pytest.mark.parametrize("data", [
    b"",                                       # nothing
    b"\x00\x02\x00",                           # frame version 0 (Kafka rejects it)
    b"\x01\x02\x00\x05ab",                     # string longer than the data
    encode_record(TopicRecord("x", uuid.UUID(int=1)))[:-5],  # truncated uuid
    encode_record(TopicRecord("x", uuid.UUID(int=1))) + b"\x00",  # trailing garbage
    b"\x01\x03\x09",                           # PartitionRecord version 9
    b"\x01\x02\x00\xff\xff\xff\xff\xff\xff",   # overlong varint
])
def test_corrupt_input_raises(data: bytes) -> None:
    with pytest.raises(CorruptMessageError):
        decode_record(data)


@given(st.binary(max_size=64))
def test_random_bytes_never_crash_differently(data: bytes) -> None:
    with contextlib.suppress(CorruptMessageError):
        decode_record(data)
