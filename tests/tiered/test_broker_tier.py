"""The remote tier wired into strom's broker (issue 21): a broker started with
``remote.log.storage.system.enable=true`` loads the S3 manager and the topic-based metadata
manager (a client of the broker itself) and copies the closed segments of the partitions it leads
of a ``remote.storage.enable`` topic, off the event loop. Real parts: the broker process,
confluent-kafka, moto's S3 server, a second topic-based metadata manager reading what the broker
recorded."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.testing import BrokerProcess, wait_for
from strom.plugins.hookspecs.storage import RemoteLogSegmentState, TopicIdPartition, kafka_uuid_parse
from strom.plugins.manager import get_plugin_manager, load_remote_log_metadata_manager
from strom.tiered.topic_based_rlmm import TopicBasedRemoteLogMetadataManager

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from tests.tiered.conftest import S3Config

pytestmark = pytest.mark.broker

TOPIC = "tiered"


def tier_config(s3_config: dict[str, str]) -> dict[str, str]:
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": "200",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        **s3_config,
    }


@pytest.fixture
def tier_broker(tmp_path: Path, s3_bucket: str, s3_rsm_config: S3Config) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "broker", config=tier_config(s3_rsm_config(s3_bucket))) as broker:
        yield broker


def topic_id_partition(partition_dir: Path, topic: str, partition: int) -> TopicIdPartition:
    for line in (partition_dir / "partition.metadata").read_text().splitlines():
        if line.startswith("topic_id:"):
            return TopicIdPartition(kafka_uuid_parse(line.split(":", 1)[1].strip()), topic, partition)
    raise AssertionError(f"no topic id in {partition_dir}")


def local_bases(partition_dir: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in partition_dir.glob("*.log"))


def produce(bootstrap: str, topic: str, count: int) -> None:
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4000})
    for i in range(count):
        producer.produce(topic, os.urandom(100), key=str(i).encode(),
                         on_delivery=lambda e, m: errors.append(e) if e else None)
    assert producer.flush(60) == 0 and not errors, errors[:3]


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
