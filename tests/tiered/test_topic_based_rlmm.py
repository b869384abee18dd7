"""The topic-based RemoteLogMetadataManager against strom's broker: Kafka's records in
``__remote_log_metadata``, state transitions enforced, caches rebuilt by consuming the topic."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from strom.core.exceptions import ConfigError
from strom.core.testing import BrokerProcess, wait_for
from strom.plugins.exceptions import RemoteResourceNotFoundError
from strom.plugins.hookspecs.storage import (
    RemoteLogMetadataManager,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from strom.plugins.manager import get_plugin_manager, load_remote_log_metadata_manager
from strom.tiered.exceptions import RemoteSegmentUnknownError, RemoteStateTransitionError
from strom.tiered.remote_log_metadata_serde import deserialize, metadata_partition
from strom.tiered.topic_based_rlmm import REMOTE_LOG_METADATA_TOPIC, TopicBasedRemoteLogMetadataManager

S = RemoteLogSegmentState
PARTITIONS = 3
KAFKA_RLMM = "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager"


@pytest.fixture(scope="module")
def metadata_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("rlmm-broker")) as broker:
        yield broker


def rlmm_config(bootstrap: str, **extra: str) -> dict[str, str]:
    return {"remote.log.metadata.manager.class.name": KAFKA_RLMM, "node.id": "1",
            "rlmm.config.remote.log.metadata.common.client.bootstrap.servers": bootstrap,
            "rlmm.config.remote.log.metadata.topic.num.partitions": str(PARTITIONS),
            "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
            "rlmm.config.remote.log.metadata.consume.wait.ms": "30000",
            **{f"rlmm.config.{k}": v for k, v in extra.items()}}


def load(bootstrap: str) -> RemoteLogMetadataManager:
    return load_remote_log_metadata_manager(get_plugin_manager(autoload=False, env={}), rlmm_config(bootstrap))


def segment(tip: TopicIdPartition, start: int, end: int, epochs: dict[int, int]) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(tip), start, end, max_timestamp_ms=start,
                                    broker_id=1, event_timestamp_ms=1, segment_size_in_bytes=100 * (end - start + 1),
                                    segment_leader_epochs=epochs)


def update(m: RemoteLogSegmentMetadata, state: RemoteLogSegmentState) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(m.segment_id, 2, None, state, 1)


def test_segments_states_and_rebuild_from_the_topic(metadata_broker: BrokerProcess) -> None:
    tip = TopicIdPartition(uuid.uuid4(), "orders", 0)
    other = TopicIdPartition(uuid.uuid4(), "other", 1)
    rlmm = load(metadata_broker.bootstrap)
    assert isinstance(rlmm, TopicBasedRemoteLogMetadataManager)
    try:
        with pytest.raises(RemoteResourceNotFoundError):
            list(rlmm.list_remote_log_segments(tip))
        rlmm.on_partition_leadership_changes({tip}, set())
        a, b = segment(tip, 0, 99, {0: 0}), segment(tip, 100, 199, {0: 100, 1: 150})
        c = segment(tip, 200, 299, {1: 200})
        for m in (a, b, c):
            rlmm.add_remote_log_segment_metadata(m)
        rlmm.update_remote_log_segment_metadata(update(a, S.COPY_SEGMENT_FINISHED))
        rlmm.update_remote_log_segment_metadata(update(b, S.COPY_SEGMENT_FINISHED))
        # c stays COPY_SEGMENT_STARTED: listed, never read.
        assert [(m.start_offset, m.state) for m in rlmm.list_remote_log_segments(tip)] == \
            [(0, S.COPY_SEGMENT_FINISHED), (100, S.COPY_SEGMENT_FINISHED), (200, S.COPY_SEGMENT_STARTED)]
        found = rlmm.remote_log_segment_metadata(tip, 0, 120)
        assert found is not None and found.segment_id == b.segment_id
        assert rlmm.remote_log_segment_metadata(tip, 0, 160) is None  # epoch 0 ends at 149 in b
        assert rlmm.remote_log_segment_metadata(tip, 1, 250) is None  # only in the unfinished c
        assert rlmm.highest_offset_for_epoch(tip, 0) == 149
        assert rlmm.highest_offset_for_epoch(tip, 1) == 199
        assert [m.start_offset for m in rlmm.list_remote_log_segments(tip, 1)] == [100, 200]
        assert rlmm.remote_log_size(tip, 1) == b.segment_size_in_bytes + c.segment_size_in_bytes

        with pytest.raises(RemoteStateTransitionError):
            rlmm.update_remote_log_segment_metadata(update(c, S.DELETE_SEGMENT_FINISHED))
        with pytest.raises(RemoteSegmentUnknownError):
            rlmm.update_remote_log_segment_metadata(update(segment(tip, 5, 6, {0: 5}), S.COPY_SEGMENT_FINISHED))
        with pytest.raises(RemoteStateTransitionError):
            rlmm.add_remote_log_segment_metadata(
                RemoteLogSegmentMetadata(a.segment_id, 0, 99, 0, 1, 1, 1, {0: 0}, state=S.COPY_SEGMENT_FINISHED))
        # An abandoned copy is cleaned up: STARTED -> DELETE_SEGMENT_STARTED -> FINISHED, then gone.
        rlmm.update_remote_log_segment_metadata(update(c, S.DELETE_SEGMENT_STARTED))
        rlmm.update_remote_log_segment_metadata(update(c, S.DELETE_SEGMENT_FINISHED))
        assert [m.start_offset for m in rlmm.list_remote_log_segments(tip)] == [0, 100]
        expected = [(m.segment_id, m.state) for m in rlmm.list_remote_log_segments(tip)]
    finally:
        rlmm.close()

    # A new manager (a restarted broker) rebuilds the same state from the topic alone.
    again = load(metadata_broker.bootstrap)
    try:
        again.on_partition_leadership_changes(set(), {tip, other})
        assert [(m.segment_id, m.state) for m in again.list_remote_log_segments(tip)] == expected
        assert again.highest_offset_for_epoch(tip, 0) == 149
        assert list(again.list_remote_log_segments(other)) == []
        # Partition deletion: MARKED -> STARTED -> FINISHED, in order only.
        mark = RemotePartitionDeleteMetadata(tip, RemotePartitionDeleteState.DELETE_PARTITION_MARKED, 3, 1)
        again.put_remote_partition_delete_metadata(mark)
        with pytest.raises(RemoteStateTransitionError):
            again.put_remote_partition_delete_metadata(
                RemotePartitionDeleteMetadata(tip, RemotePartitionDeleteState.DELETE_PARTITION_FINISHED, 4, 1))
        again.on_stopped_partitions({tip})
        with pytest.raises(RemoteResourceNotFoundError):
            list(again.list_remote_log_segments(tip))
    finally:
        again.close()


def test_records_in_the_topic_are_kafkas(metadata_broker: BrokerProcess) -> None:
    tip = TopicIdPartition(uuid.uuid4(), "bytes", 2)
    rlmm = load(metadata_broker.bootstrap)
    try:
        rlmm.on_partition_leadership_changes({tip}, set())
        m = segment(tip, 0, 9, {0: 0})
        rlmm.add_remote_log_segment_metadata(m)
        rlmm.update_remote_log_segment_metadata(update(m, S.COPY_SEGMENT_FINISHED))
    finally:
        rlmm.close()
    consumer = Consumer({"bootstrap.servers": metadata_broker.bootstrap, "group.id": "rlmm-check",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(REMOTE_LOG_METADATA_TOPIC, metadata_partition(tip, PARTITIONS), 0)])
    mine: list[object] = []

    def read_both() -> bool:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            assert msg.key() is None
            record = deserialize(msg.value() or b"")
            if getattr(record, "segment_id", None) == m.segment_id:
                mine.append(record)
        return len(mine) == 2

    try:
        wait_for(read_both, 30, "both records of the segment in __remote_log_metadata")
    finally:
        consumer.close()
    assert mine == [m, update(m, S.COPY_SEGMENT_FINISHED)]


def test_missing_bootstrap_names_the_key() -> None:
    config = rlmm_config("unused")
    del config["rlmm.config.remote.log.metadata.common.client.bootstrap.servers"]
    with pytest.raises(ConfigError) as e:
        load_remote_log_metadata_manager(get_plugin_manager(autoload=False, env={}), config)
    assert e.value.key == "rlmm.config.remote.log.metadata.common.client.bootstrap.servers"
    bad = {**rlmm_config("unused"), "rlmm.config.remote.log.metadata.topic.num.partitions": "0"}
    with pytest.raises(ConfigError) as e:
        load_remote_log_metadata_manager(get_plugin_manager(autoload=False, env={}), bad)
    assert e.value.key == "rlmm.config.remote.log.metadata.topic.num.partitions"
