"""The remote tier wired into strom's broker (issue 21): a broker started with
``remote.log.storage.system.enable=true`` loads the S3 manager and the topic-based metadata
manager (a client of the broker itself) and copies the closed segments of the partitions it leads
of a ``remote.storage.enable`` topic, off the event loop. Real parts: the broker process,
confluent-kafka, moto's S3 server, a second topic-based metadata manager reading what the broker
recorded."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tier_kit import consume_all, list_offsets, local_bases, produce, topic_id_partition

from strom.core.testing import BrokerProcess, wait_for
from strom.plugins.hookspecs.storage import RemoteLogSegmentState
from strom.plugins.manager import get_plugin_manager, load_remote_log_metadata_manager
from strom.tiered.topic_based_rlmm import TopicBasedRemoteLogMetadataManager

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from tests.tiered.conftest import TierConfig

pytestmark = pytest.mark.broker

TOPIC = "tiered"


def test_closed_segments_of_a_tiered_topic_reach_s3_and_the_metadata_topic(
        tier_broker: BrokerProcess, s3: S3Client, s3_bucket: str) -> None:
    admin = AdminClient({"bootstrap.servers": tier_broker.bootstrap})
    for f in admin.create_topics([
            NewTopic(TOPIC, 1, 1, config={"remote.storage.enable": "true", "segment.bytes": "16384"}),
            NewTopic("local-only", 1, 1, config={"segment.bytes": "16384"})]).values():
        f.result(30)
    produce(tier_broker.bootstrap, TOPIC, 2000)
    produce(tier_broker.bootstrap, "local-only", 500)
    partition_dir = tier_broker.data_dir / "logs" / f"{TOPIC}-0"
    closed = local_bases(partition_dir)[:-1]
    assert len(closed) >= 5
    tip = topic_id_partition(partition_dir, TOPIC, 0)

    reader = load_remote_log_metadata_manager(get_plugin_manager(autoload=False, env={}), {
        "node.id": "99", "rlmm.config.remote.log.metadata.common.client.bootstrap.servers": tier_broker.bootstrap,
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1"})
    assert isinstance(reader, TopicBasedRemoteLogMetadataManager)
    try:
        reader.on_partition_leadership_changes(set(), {tip})

        def finished() -> list[int]:
            starts = [m.start_offset for m in reader.list_remote_log_segments(tip)
                      if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]
            return starts if starts[:len(closed)] == closed else []

        starts = wait_for(finished, 60, "every closed segment COPY_SEGMENT_FINISHED",
                          detail=lambda: str(list(reader.list_remote_log_segments(tip))))
        assert starts == sorted(set(starts))  # each once, oldest first
        remote = {m.start_offset: m for m in reader.list_remote_log_segments(tip)}
        for base in closed:
            m = remote[base]
            assert m.segment_size_in_bytes == (partition_dir / f"{base:020d}.log").stat().st_size
            assert m.broker_id == 1
    finally:
        reader.close()

    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=s3_bucket)
            for o in page.get("Contents", [])]
    logs = sorted(k for k in keys if k.endswith(".log"))
    assert [int(k.rsplit("/", 1)[1][:20]) for k in logs][:len(closed)] == closed
    assert all(f"/{TOPIC}-" in k for k in keys)  # nothing of the topic without remote.storage.enable


def test_local_retention_deletes_only_copied_segments_and_keeps_the_log_start(
        tier_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": tier_broker.bootstrap})
    # local.retention.bytes=1: every closed segment is due locally the moment it is copied.
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1, config={
            "remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1"}),
            NewTopic("uncopied", 1, 1, config={  # copy disabled: Kafka refuses a local retention of its own
                "remote.storage.enable": "true", "segment.bytes": "16384", "remote.log.copy.disable": "true"})]).values():
        f.result(30)
    produce(tier_broker.bootstrap, "uncopied", 1000)
    uncopied = local_bases(tier_broker.data_dir / "logs" / "uncopied-0")
    assert len(uncopied) >= 3
    produce(tier_broker.bootstrap, TOPIC, 2000)
    partition_dir = tier_broker.data_dir / "logs" / f"{TOPIC}-0"
    tip = topic_id_partition(partition_dir, TOPIC, 0)
    _, end = list_offsets(tier_broker.bootstrap, TOPIC, -1)
    assert end == 2000

    reader = load_remote_log_metadata_manager(get_plugin_manager(autoload=False, env={}), {
        "node.id": "99", "rlmm.config.remote.log.metadata.common.client.bootstrap.servers": tier_broker.bootstrap,
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1"})
    try:
        reader.on_partition_leadership_changes(set(), {tip})
        # The disk keeps only the hot tail: the active segment.
        wait_for(lambda: len(local_bases(partition_dir)) == 1, 60, "local segments deleted down to the active one",
                 detail=lambda: str(local_bases(partition_dir)))
        local_start = local_bases(partition_dir)[0]
        assert local_start > 0

        def finished_segments() -> list[Any]:
            return [m for m in reader.list_remote_log_segments(tip)
                    if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]

        # The reader is a second metadata manager consuming __remote_log_metadata: it catches up
        # with the broker's records a little after the broker deleted the local segments.
        wait_for(lambda: (f := finished_segments()) and f[-1].end_offset >= local_start - 1, 60,
                 "the reader sees the finished copies up to the local start",
                 detail=lambda: str([(m.start_offset, m.end_offset) for m in finished_segments()]))
        finished = finished_segments()
        # Every offset below the local start is in a finished remote segment, contiguously from 0.
        assert finished[0].start_offset == 0
        assert all(a.end_offset + 1 == b.start_offset for a, b in itertools.pairwise(finished))
        assert finished[-1].end_offset == local_start - 1
    finally:
        reader.close()
    # Retention passes ran over both topics meanwhile: nothing not in remote storage left the disk.
    assert local_bases(tier_broker.data_dir / "logs" / "uncopied-0") == uncopied
    assert list_offsets(tier_broker.bootstrap, "uncopied", -5) == (0, -1)
    assert list_offsets(tier_broker.bootstrap, TOPIC, -2) == (0, 0)  # the log start stays
    assert list_offsets(tier_broker.bootstrap, TOPIC, -4) == (0, local_start)  # earliest local
    assert list_offsets(tier_broker.bootstrap, TOPIC, -5) == (0, local_start - 1)  # latest tiered


def test_a_consumer_reads_from_offset_0_through_s3_record_for_record(tier_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": tier_broker.bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1, config={
            "remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1"})]).values():
        f.result(30)
    sent = produce(tier_broker.bootstrap, TOPIC, 3000)
    partition_dir = tier_broker.data_dir / "logs" / f"{TOPIC}-0"
    wait_for(lambda: len(local_bases(partition_dir)) == 1, 60, "local segments deleted down to the active one",
             detail=lambda: str(local_bases(partition_dir)))
    local_start = local_bases(partition_dir)[0]
    assert local_start > 2000  # most of the data is in S3 only
    got = consume_all(tier_broker.bootstrap, TOPIC, len(sent))
    assert [o for o, _, _ in got] == list(range(len(sent)))
    assert [(k, v) for _, k, v in got] == sent
    # Small fetches cross the remote/local boundary batch by batch; read_committed too.
    small: dict[str, str | int] = {"fetch.max.bytes": 5000, "message.max.bytes": 5000,
                                   "max.partition.fetch.bytes": 5000, "isolation.level": "read_committed"}
    got = consume_all(tier_broker.bootstrap, TOPIC, len(sent), **small)
    assert [(k, v) for _, k, v in got] == sent


def test_after_a_restart_the_remote_part_is_read_again(tmp_path: Path, s3_bucket: str,
                                                       tier_config: TierConfig) -> None:
    with BrokerProcess(tmp_path / "broker", config=tier_config(s3_bucket)) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic(TOPIC, 1, 1, config={
                "remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1"})]).values():
            f.result(30)
        sent = produce(broker.bootstrap, TOPIC, 2000)
        partition_dir = broker.data_dir / "logs" / f"{TOPIC}-0"
        wait_for(lambda: len(local_bases(partition_dir)) == 1, 60, "local segments deleted down to the active one")
        local_start = local_bases(partition_dir)[0]
        broker.restart()
        assert local_bases(partition_dir)[0] == local_start
        assert list_offsets(broker.bootstrap, TOPIC, -2) == (0, 0)  # the remote part is still the log's
        assert list_offsets(broker.bootstrap, TOPIC, -4) == (0, local_start)
        wait_for(lambda: list_offsets(broker.bootstrap, TOPIC, -5) == (0, local_start - 1), 60,
                 "the remote log manager back on the partition")
        got = consume_all(broker.bootstrap, TOPIC, len(sent))
        assert [(k, v) for _, k, v in got] == sent


def test_read_committed_skips_aborted_transactions_read_from_s3(tier_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": tier_broker.bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1, config={
            "remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1"})]).values():
        f.result(30)
    txn = Producer({"bootstrap.servers": tier_broker.bootstrap, "transactional.id": "tier-txn", "batch.size": 4000})
    txn.init_transactions(30)
    committed: list[bytes] = []
    for n in range(24):
        txn.begin_transaction()
        values = [f"{n}-{i}".encode() * 20 for i in range(40)]
        for value in values:
            txn.produce(TOPIC, value)
        if n % 3 == 2:
            assert txn.flush(30) == 0  # in the log before the abort (librdkafka purges unsent ones)
            txn.abort_transaction(30)
        else:
            txn.commit_transaction(30)
            committed += values
    partition_dir = tier_broker.data_dir / "logs" / f"{TOPIC}-0"
    wait_for(lambda: len(local_bases(partition_dir)) == 1, 60, "local segments deleted down to the active one",
             detail=lambda: str(local_bases(partition_dir)))
    assert local_bases(partition_dir)[0] > 500  # aborted transactions among the remote data
    got = consume_all(tier_broker.bootstrap, TOPIC, len(committed), **{"isolation.level": "read_committed"})
    assert [v for _, _, v in got] == committed


def test_total_retention_deletes_remote_segments_after_moving_the_log_start(
        tier_broker: BrokerProcess, s3: S3Client, s3_bucket: str) -> None:
    admin = AdminClient({"bootstrap.servers": tier_broker.bootstrap})
    # retention.bytes over local plus remote: about 3 segments' worth is kept in all.
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1, config={
            "remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1",
            "retention.bytes": str(3 * 16384)})]).values():
        f.result(30)
    produce(tier_broker.bootstrap, TOPIC, 3000)
    partition_dir = tier_broker.data_dir / "logs" / f"{TOPIC}-0"

    def remote_logs() -> list[int]:
        return sorted(int(o["Key"].rsplit("/", 1)[1][:20])
                      for page in s3.get_paginator("list_objects_v2").paginate(Bucket=s3_bucket)
                      for o in page.get("Contents", []) if o["Key"].endswith(".log"))

    def expired() -> bool:  # the log start first, then the deletions: done when they meet
        remote = remote_logs()
        return len(local_bases(partition_dir)) == 1 and remote[:1] > [0] and \
            list_offsets(tier_broker.bootstrap, TOPIC, -2) == (0, remote[0])

    wait_for(expired, 60,
             "old remote segments expired", detail=lambda: f"local {local_bases(partition_dir)}, "
                                                           f"remote {remote_logs()}")
    remote = remote_logs()
    assert remote_logs()[0] > 0 and len(remote) <= 5  # 3000 records fill 20+ segments
    code, start = list_offsets(tier_broker.bootstrap, TOPIC, -2)
    assert code == 0 and start == remote[0]  # the log start moved to the oldest segment kept
    got = consume_all(tier_broker.bootstrap, TOPIC, 3000 - start, **{"auto.offset.reset": "earliest"})
    assert got[0][0] == start and [o for o, _, _ in got] == list(range(start, 3000))


def test_deleting_a_tiered_topic_deletes_its_remote_segments(tier_broker: BrokerProcess, s3: S3Client,
                                                              s3_bucket: str) -> None:
    admin = AdminClient({"bootstrap.servers": tier_broker.bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1, config={
            "remote.storage.enable": "true", "segment.bytes": "16384"})]).values():
        f.result(30)
    produce(tier_broker.bootstrap, TOPIC, 1000)
    partition_dir = tier_broker.data_dir / "logs" / f"{TOPIC}-0"
    tip = topic_id_partition(partition_dir, TOPIC, 0)
    closed = local_bases(partition_dir)[:-1]

    def objects() -> list[str]:
        return [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=s3_bucket)
                for o in page.get("Contents", [])]

    wait_for(lambda: sum(k.endswith(".log") for k in objects()) == len(closed), 60, "every closed segment in S3")
    for f in admin.delete_topics([TOPIC]).values():
        f.result(30)
    wait_for(lambda: not objects(), 60, "the deleted topic's objects gone from S3", detail=lambda: str(objects()))
    reader = load_remote_log_metadata_manager(get_plugin_manager(autoload=False, env={}), {
        "node.id": "99", "rlmm.config.remote.log.metadata.common.client.bootstrap.servers": tier_broker.bootstrap,
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1"})
    try:
        reader.on_partition_leadership_changes(set(), {tip})
        # DELETE_SEGMENT_FINISHED removes a segment from the metadata: nothing left to read.
        wait_for(lambda: not list(reader.list_remote_log_segments(tip)), 30, "no remote segment in the metadata")
    finally:
        reader.close()


@pytest.mark.parametrize(("topic_config", "message"), [
    ({"remote.storage.enable": "true", "cleanup.policy": "compact"}, "Remote log storage only supports topics with cleanup.policy=delete"),
    ({"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "2000"}, "local.retention.ms"),
])
def test_a_tiered_topic_config_kafka_refuses_is_refused(tier_broker: BrokerProcess, topic_config: dict[str, str],
                                                       message: str) -> None:
    admin = AdminClient({"bootstrap.servers": tier_broker.bootstrap})
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic("refused", 1, 1, config=topic_config)])["refused"].result(30)
    error = refused.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG and message in error.str()


@pytest.mark.parametrize(("config", "key"), [
    ({"remote.log.storage.system.enable": "true"}, "remote.log.storage.manager.class.name"),
    ({"remote.log.storage.system.enable": "true", "remote.log.storage.manager.class.name": "no-such-tier"},
     "remote.log.storage.manager.class.name"),
    ({"log.local.retention.ms": "-3"}, "log.local.retention.ms"),
    ({"remote.log.manager.task.interval.ms": "0"}, "remote.log.manager.task.interval.ms"),
])
def test_a_bad_tier_setting_stops_the_broker_naming_the_key(tmp_path: Path, config: dict[str, str],
                                                             key: str) -> None:
    broker = BrokerProcess(tmp_path / "broker", config=config, startup_timeout=30)
    with pytest.raises(RuntimeError, match=key.replace(".", r"\.")):
        broker.start()
