"""KIP-405 contracts of the storage hookspec: Kafka's state machines, ids and data classes (no broker)."""

from __future__ import annotations

import uuid

import pytest

from strom.plugins.hookspecs.storage import (
    REMOTE_STORAGE_MANAGER_ALIASES,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteState,
    TopicIdPartition,
    kafka_uuid_parse,
    kafka_uuid_str,
    plugin_name,
    prefixed_configs,
)

S = RemoteLogSegmentState

# Kafka's RemoteLogSegmentState.isValidTransition, written out as the full table (None = no state yet).
VALID = {
    (None, S.COPY_SEGMENT_STARTED),
    (S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_STARTED), (S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED),
    (S.COPY_SEGMENT_STARTED, S.DELETE_SEGMENT_STARTED),
    (S.COPY_SEGMENT_FINISHED, S.COPY_SEGMENT_FINISHED), (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED),
    (S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_STARTED), (S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED),
    (S.DELETE_SEGMENT_FINISHED, S.DELETE_SEGMENT_FINISHED),
}


def test_segment_state_ids_and_transitions_are_kafkas() -> None:
    assert [(s.name, s.value) for s in S] == [("COPY_SEGMENT_STARTED", 0), ("COPY_SEGMENT_FINISHED", 1),
                                              ("DELETE_SEGMENT_STARTED", 2), ("DELETE_SEGMENT_FINISHED", 3)]
    for source in (None, *S):
        for target in S:
            assert S.is_valid_transition(source, target) == ((source, target) in VALID), (source, target)


def test_partition_delete_state_transitions() -> None:
    P = RemotePartitionDeleteState
    assert [p.value for p in P] == [0, 1, 2]
    assert P.is_valid_transition(None, P.DELETE_PARTITION_MARKED)
    assert not P.is_valid_transition(None, P.DELETE_PARTITION_STARTED)
    assert P.is_valid_transition(P.DELETE_PARTITION_MARKED, P.DELETE_PARTITION_STARTED)
    assert P.is_valid_transition(P.DELETE_PARTITION_STARTED, P.DELETE_PARTITION_FINISHED)
    assert not P.is_valid_transition(P.DELETE_PARTITION_MARKED, P.DELETE_PARTITION_FINISHED)
    assert not P.is_valid_transition(P.DELETE_PARTITION_FINISHED, P.DELETE_PARTITION_MARKED)


def test_kafka_uuid_strings() -> None:
    # Kafka's Uuid.toString of 0x0000..01 is base64url without padding.
    one = uuid.UUID(int=1)
    assert kafka_uuid_str(one) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert kafka_uuid_parse("AAAAAAAAAAAAAAAAAAAAAQ") == one
    tip = TopicIdPartition(one, "orders", 3)
    assert str(tip) == "AAAAAAAAAAAAAAAAAAAAAQ:orders-3"


def test_metadata_update_applies_state_and_keeps_custom_metadata() -> None:
    tip = TopicIdPartition(uuid.uuid4(), "t", 0)
    seg = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(tip), 0, 9, 1000, 1, 2000, 512, {0: 0},
                                   custom_metadata=b"x")
    done = seg.create_with_update(RemoteLogSegmentMetadataUpdate(seg.segment_id, 3000, None,
                                                                 S.COPY_SEGMENT_FINISHED, 2))
    assert (done.state, done.custom_metadata, done.broker_id, done.event_timestamp_ms) == \
        (S.COPY_SEGMENT_FINISHED, b"x", 2, 3000)
    with pytest.raises(ValueError):
        RemoteLogSegmentMetadataUpdate(seg.segment_id, 1, None, S.COPY_SEGMENT_STARTED, 1)
    with pytest.raises(ValueError):
        RemoteLogSegmentMetadata(seg.segment_id, 5, 4, 0, 1, 0, 0, {0: 5})
    other = RemoteLogSegmentId.generate_new(tip)
    with pytest.raises(ValueError):
        seg.create_with_update(RemoteLogSegmentMetadataUpdate(other, 1, None, S.COPY_SEGMENT_FINISHED, 1))


def test_config_prefix_and_aliases() -> None:
    assert prefixed_configs({"rsm.config.chunk.size": 4, "rsm.configx": 1, "node.id": 1}, "rsm.config.") == \
        {"chunk.size": 4}
    assert plugin_name(" io.aiven.kafka.tieredstorage.RemoteStorageManager ", REMOTE_STORAGE_MANAGER_ALIASES) == "s3"
    assert plugin_name("my-rsm", REMOTE_STORAGE_MANAGER_ALIASES) == "my-rsm"
