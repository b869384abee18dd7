"""The remote log manager's copy rounds, with real parts throughout: segments written by strom's
broker, the S3 manager against moto's server, the topic-based metadata manager on a live broker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from strom.core.testing import BrokerProcess
from strom.plugins.hookspecs.storage import (
    IndexType,
    RemoteLogSegmentState,
    RemoteStorageManager,
    kafka_uuid_str,
)
from strom.plugins.manager import (
    get_plugin_manager,
    load_remote_log_metadata_manager,
    load_remote_storage_manager,
)
from strom.tiered.remote_log_manager import (
    DirectoryTieredLog,
    RemoteLogManager,
    leader_epoch_checkpoint_bytes,
    leader_epoch_slice,
)
from strom.tiered.topic_based_rlmm import TopicBasedRemoteLogMetadataManager

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from tests.tiered.conftest import S3Config, StromSegments

S = RemoteLogSegmentState
pytestmark = pytest.mark.broker  # strom_segments and metadata_broker start strom's broker


@pytest.fixture(scope="module")
def metadata_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("rlm-broker")) as broker:
        yield broker


@pytest.fixture
def rlmm(metadata_broker: BrokerProcess) -> Iterator[TopicBasedRemoteLogMetadataManager]:
    manager = load_remote_log_metadata_manager(get_plugin_manager(autoload=False, env={}), {
        "node.id": "1", "rlmm.config.remote.log.metadata.common.client.bootstrap.servers": metadata_broker.bootstrap,
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "rlmm.config.remote.log.metadata.consume.wait.ms": "30000"})
    assert isinstance(manager, TopicBasedRemoteLogMetadataManager)
    yield manager
    manager.close()


def rsm_for(config: dict[str, str]) -> RemoteStorageManager:
    rsm = load_remote_storage_manager(get_plugin_manager(autoload=False, env={}), config)
    assert rsm is not None
    return rsm


def test_leader_epoch_slices() -> None:
    entries = [(0, 0), (2, 50), (5, 120)]
    assert leader_epoch_slice(entries, 40, 99) == {0: 40, 2: 50}
    assert leader_epoch_slice(entries, 120, 130) == {5: 120}
    assert leader_epoch_slice(entries, 60, 70) == {2: 60}
    assert leader_epoch_checkpoint_bytes(entries, 99) == b"0\n2\n0 0\n2 50\n"


def test_rounds_copy_closed_segments_below_the_lso_oldest_first_once(
        strom_segments: StromSegments, rlmm: TopicBasedRemoteLogMetadataManager, s3: S3Client, s3_bucket: str,
        s3_rsm_config: S3Config) -> None:
    segments = strom_segments.small
    tip = segments[0].topic_id_partition
    partition_dir = segments[0].partition_dir
    rsm = rsm_for(s3_rsm_config(s3_bucket))
    manager = RemoteLogManager(rsm, rlmm, broker_id=1)
    # The LSO inside the third segment: only the first two are wholly below it.
    manager.on_leadership_change({tip: DirectoryTieredLog(partition_dir, segments[2].base_offset + 1)}, set())
    first = manager.copy_round(tip)
    assert first.failed is None and first.cleaned_up == []
    assert [m.start_offset for m in first.copied] == [segments[0].base_offset, segments[1].base_offset]
    assert [(m.start_offset, m.end_offset, m.state) for m in rlmm.list_remote_log_segments(tip)] == \
        [(s.base_offset, s.next_offset - 1, S.COPY_SEGMENT_FINISHED) for s in segments[:2]]
    assert manager.copy_round(tip).copied == []  # nothing new below the LSO

    # The LSO at the log end: every closed segment, never the active one.
    all_closed = DirectoryTieredLog(partition_dir, segments[-1].next_offset + 10_000)
    manager.on_leadership_change({tip: all_closed}, set())
    rest = manager.copy_round(tip)
    assert [m.start_offset for m in rest.copied] == [s.base_offset for s in segments[2:]]
    remote = list(rlmm.list_remote_log_segments(tip))
    assert [m.start_offset for m in remote] == [s.base_offset for s in segments]
    last = remote[-1]
    with rsm.fetch_log_segment(last, 0) as stream:
        assert stream.read() == segments[-1].path(".log").read_bytes()
    with rsm.fetch_index(last, IndexType.LEADER_EPOCH) as stream:
        assert stream.read().startswith(b"0\n1\n0 ")
    found = rlmm.remote_log_segment_metadata(tip, 0, segments[1].base_offset + 3)
    assert found is not None and found.start_offset == segments[1].base_offset
    manager.on_stopped_partitions({tip})


def test_a_copy_left_unfinished_is_invisible_then_cleaned_up_and_copied_again(
        strom_segments: StromSegments, rlmm: TopicBasedRemoteLogMetadataManager, s3: S3Client, s3_bucket: str,
        s3_rsm_config: S3Config) -> None:
    seg = strom_segments.txn[0]
    tip = seg.topic_id_partition
    rsm = rsm_for(s3_rsm_config(s3_bucket))
    rlmm.on_partition_leadership_changes({tip}, set())
    # What a broker killed mid-upload leaves: COPY_SEGMENT_STARTED recorded, the log object uploaded.
    crashed = seg.metadata()
    rlmm.add_remote_log_segment_metadata(crashed)
    rsm.copy_log_segment_data(crashed, seg.data())
    assert rlmm.remote_log_segment_metadata(tip, 0, seg.base_offset) is None  # readers never see it

    manager = RemoteLogManager(rsm, rlmm, broker_id=1)
    manager.on_leadership_change({tip: DirectoryTieredLog(seg.partition_dir, seg.next_offset)}, set())
    result = manager.copy_round(tip)
    assert result.failed is None
    assert result.cleaned_up == [crashed.segment_id]
    assert [m.start_offset for m in result.copied] == [seg.base_offset]
    remote = list(rlmm.list_remote_log_segments(tip))
    assert [(m.segment_id == crashed.segment_id, m.state) for m in remote] == [(False, S.COPY_SEGMENT_FINISHED)]
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=s3_bucket).get("Contents", [])]
    assert not [k for k in keys if kafka_uuid_str(crashed.segment_id.id) in k]
    assert len(keys) == 3  # one segment: .log, .indexes, .rsm-manifest


def test_a_failed_upload_is_cleaned_up_and_retried_next_round(
        strom_segments: StromSegments, rlmm: TopicBasedRemoteLogMetadataManager, s3: S3Client,
        s3_rsm_config: S3Config) -> None:
    seg = strom_segments.txn[1]
    tip = seg.topic_id_partition
    bucket = f"later-{uuid.uuid4().hex[:8]}"  # does not exist yet: S3 answers NoSuchBucket
    manager = RemoteLogManager(rsm_for(s3_rsm_config(bucket)), rlmm, broker_id=1)
    # Only this segment is eligible: the LSO is its end, and earlier ones are treated as remote.
    rlmm.on_partition_leadership_changes({tip}, set())
    manager.on_leadership_change({tip: DirectoryTieredLog(seg.partition_dir, seg.next_offset)}, set())
    failed = manager.copy_round(tip)
    assert failed.failed is not None and failed.copied == []
    # Its cleanup could not delete from S3 either: left DELETE_SEGMENT_STARTED, never read.
    attempt = [m for m in rlmm.list_remote_log_segments(tip) if m.state is not S.COPY_SEGMENT_FINISHED]
    assert [(m.start_offset, m.state) for m in attempt] == [(seg.base_offset, S.DELETE_SEGMENT_STARTED)]
    assert rlmm.remote_log_segment_metadata(tip, 0, seg.base_offset) is None
    s3.create_bucket(Bucket=bucket)
    retried = manager.copy_round(tip)
    assert retried.failed is None and retried.cleaned_up == [attempt[0].segment_id]
    assert seg.base_offset in [m.start_offset for m in retried.copied]
    assert {m.state for m in rlmm.list_remote_log_segments(tip)} == {S.COPY_SEGMENT_FINISHED}


def test_scheduled_rounds_run_off_the_callers_thread(
        strom_segments: StromSegments, rlmm: TopicBasedRemoteLogMetadataManager, s3_bucket: str,
        s3_rsm_config: S3Config) -> None:
    seg = strom_segments.small[0]
    tip = seg.topic_id_partition
    manager = RemoteLogManager(rsm_for(s3_rsm_config(s3_bucket)), rlmm, broker_id=1,
                               config={"remote.log.manager.task.interval.ms": "3600000"})
    manager.on_leadership_change({tip: DirectoryTieredLog(seg.partition_dir, seg.next_offset)}, set())
    manager.start()
    try:
        futures = manager.submit_rounds()  # the scheduler's first round may be this one
        result = futures[tip].result(timeout=60)
        assert result.failed is None
        assert [m.state for m in rlmm.list_remote_log_segments(tip) if m.start_offset == seg.base_offset] \
            == [S.COPY_SEGMENT_FINISHED]
    finally:
        manager.close()
