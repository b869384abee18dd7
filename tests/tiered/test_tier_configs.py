"""Tiered-storage topic configs with Kafka 4.3's rules and messages (issue 21 item 3, KIP-405 and
KIP-950): remote storage refused on a broker without ``remote.log.storage.system.enable`` and on
a topic whose cleanup policy is not delete; ``remote.log.copy.disable`` stops the copies but
keeps remote reads and remote retention; ``remote.storage.enable=false`` with
``remote.log.delete.on.disable=true`` deletes the remote data (without it: refused);
``remote.log.manager.copy.max.bytes.per.second`` bounds the copies. A restart with the tier
turned off while tiered topics exist serves the local data only and logs Kafka's message.
Real parts: strom's broker process, moto's S3 server, confluent-kafka, a second topic-based
metadata manager reading ``__remote_log_metadata``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from ref_fixtures import HasBootstrap, any_broker, kafka_ref  # noqa: F401  (strom beside Apache Kafka)
from tier_kit import list_offsets, local_bases, produce, tiered_down_to_active

from strom.core.testing import BrokerProcess, wait_for
from strom.plugins.hookspecs.storage import RemoteLogSegmentState, TopicIdPartition, kafka_uuid_parse
from strom.plugins.manager import get_plugin_manager, load_remote_log_metadata_manager

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from tests.tiered.conftest import TierConfig

pytestmark = pytest.mark.broker

TOPIC = "tiered"
SYSTEM_DISABLED = ("Tiered Storage functionality is disabled in the broker. "
                   "Topic cannot be configured with remote log storage.")
NOT_DELETE_POLICY = ("Remote log storage only supports topics with cleanup.policy=delete or "
                     "cleanup.policy being an empty list.")
DISABLE_WITHOUT_DELETE = "It is invalid to disable remote storage without deleting remote data."
COPY_DISABLED_RETENTION = ("When `remote.log.copy.disable` is set to true, the `local.retention.ms` and "
                           "`retention.ms` must be set to the identical value")


def remote_logs(s3: S3Client, bucket: str) -> list[int]:
    """Base offsets of the segment objects in the bucket."""
    return sorted(int(o["Key"].rsplit("/", 1)[1][:20])
                  for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
                  for o in page.get("Contents", []) if o["Key"].endswith(".log"))


def consume_keys(bootstrap: str, topic: str, count: int, start: int = 0) -> list[int]:
    """The keys (as ints) of ``count`` records from offset ``start``, read with confluent-kafka."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tier-configs", "enable.auto.commit": False,
                         "auto.offset.reset": "error"})
    consumer.assign([TopicPartition(topic, 0, start)])
    got: list[int] = []
    try:
        def more() -> bool:
            for m in consumer.consume(500, 1.0):
                assert m.error() is None, m.error()
                got.append(int(m.key() or b"-1"))
            return len(got) >= count
        wait_for(more, 60, f"{count} records of {topic}", interval=0, detail=lambda: f"{len(got)} read")
    finally:
        consumer.close()
    return got


def create(admin: AdminClient, topic: str, **config: str) -> None:
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)


def alter(admin: AdminClient, topic: str, **changes: str | None) -> None:
    """IncrementalAlterConfigs: SET each key, DELETE those given None (keyword ``a_b`` is ``a.b``)."""
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET if v is not None
                           else AlterConfigOpType.DELETE) for k, v in changes.items()]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(30)


def topic_config(admin: AdminClient, topic: str) -> dict[str, str | None]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return {k: e.value for k, e in admin.describe_configs([resource])[resource].result(30).items()}


def refused(call: object) -> KafkaError:
    assert callable(call)
    with pytest.raises(KafkaException) as e:
        call()
    error: KafkaError = e.value.args[0]
    return error


def test_remote_storage_refused_on_a_broker_without_the_tier(any_broker: HasBootstrap) -> None:  # noqa: F811
    """strom and Kafka 4.3.1, neither with remote.log.storage.system.enable: the same refusal."""
    admin = AdminClient({"bootstrap.servers": any_broker.bootstrap})
    suffix = time.monotonic_ns()
    error = refused(lambda: create(admin, f"{TOPIC}-{suffix}", **{"remote.storage.enable": "true"}))
    assert error.code() == KafkaError.INVALID_CONFIG and error.str() == SYSTEM_DISABLED
    create(admin, f"plain-{suffix}")
    error = refused(lambda: alter(admin, f"plain-{suffix}", remote_storage_enable="true"))
    assert error.code() == KafkaError.INVALID_CONFIG and error.str() == SYSTEM_DISABLED


def test_tiered_topic_configs_kafka_refuses(tier_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": tier_broker.bootstrap})
    for policy in ("compact", "compact,delete"):
        error = refused(lambda p=policy: create(admin, "refused", **{"remote.storage.enable": "true",
                                                                     "cleanup.policy": p}))
        assert error.code() == KafkaError.INVALID_CONFIG and error.str() == NOT_DELETE_POLICY, policy
    error = refused(lambda: create(admin, "refused", **{
        "remote.storage.enable": "true", "remote.log.copy.disable": "true", "local.retention.ms": "1000"}))
    assert error.code() == KafkaError.INVALID_CONFIG and error.str().startswith(COPY_DISABLED_RETENTION)
    create(admin, TOPIC, **{"remote.storage.enable": "true"})
    # KIP-950: turning remote storage off needs remote.log.delete.on.disable=true.
    error = refused(lambda: alter(admin, TOPIC, remote_storage_enable="false"))
    assert error.code() == KafkaError.INVALID_CONFIG and error.str().startswith(DISABLE_WITHOUT_DELETE)
    # An existing topic cannot turn compacted while tiered.
    error = refused(lambda: alter(admin, TOPIC, cleanup_policy="compact"))
    assert error.code() == KafkaError.INVALID_CONFIG and error.str() == NOT_DELETE_POLICY


def test_copy_disable_stops_copies_keeps_reads_and_remote_retention(tier_broker: BrokerProcess, s3: S3Client,
                                                                     s3_bucket: str) -> None:
    admin = AdminClient({"bootstrap.servers": tier_broker.bootstrap})
    create(admin, TOPIC, **{"remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1"})
    produce(tier_broker.bootstrap, TOPIC, 1000)
    local_start = tiered_down_to_active(tier_broker, TOPIC)
    copied = remote_logs(s3, s3_bucket)
    # Kafka refuses a local retention of its own with copies disabled: back to the total one (-2).
    alter(admin, TOPIC, remote_log_copy_disable="true", local_retention_bytes=None)
    wait_for(lambda: topic_config(admin, TOPIC).get("remote.log.copy.disable") == "true", 30,
             "the broker's metadata showing copies disabled")
    produce(tier_broker.bootstrap, TOPIC, 1000, first=1000)
    partition_dir = tier_broker.data_dir / "logs" / f"{TOPIC}-0"
    assert len(local_bases(partition_dir)) > 3  # new closed segments, candidates for copies
    # Remote reads go on: every record from offset 0, the first ones from S3 only.
    assert consume_keys(tier_broker.bootstrap, TOPIC, 2000) == list(range(2000))
    assert remote_logs(s3, s3_bucket) == copied  # many copy rounds meanwhile, no copy
    assert list_offsets(tier_broker.bootstrap, TOPIC, -5) == (0, local_start - 1)
    # Remote retention goes on: retention.bytes below the local data expires every remote segment
    # (the log start first, then the objects).
    alter(admin, TOPIC, retention_bytes=str(3 * 16384))
    wait_for(lambda: not remote_logs(s3, s3_bucket), 60, "the remote segments expired",
             detail=lambda: str(remote_logs(s3, s3_bucket)))
    assert list_offsets(tier_broker.bootstrap, TOPIC, -2) == (0, local_start)
    assert local_bases(partition_dir)[0] == local_start  # nothing uncopied left the disk


def test_disabling_with_delete_on_disable_deletes_the_remote_data(tier_broker: BrokerProcess, s3: S3Client,
                                                                   s3_bucket: str) -> None:
    admin = AdminClient({"bootstrap.servers": tier_broker.bootstrap})
    create(admin, TOPIC, **{"remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1"})
    produce(tier_broker.bootstrap, TOPIC, 1000)
    local_start = tiered_down_to_active(tier_broker, TOPIC)
    assert remote_logs(s3, s3_bucket)
    partition_dir = tier_broker.data_dir / "logs" / f"{TOPIC}-0"
    with open(partition_dir / "partition.metadata") as f:
        topic_id = next(line.split(":", 1)[1].strip() for line in f if line.startswith("topic_id:"))
    tip = TopicIdPartition(kafka_uuid_parse(topic_id), TOPIC, 0)

    alter(admin, TOPIC, remote_storage_enable="false", remote_log_delete_on_disable="true")
    wait_for(lambda: not remote_logs(s3, s3_bucket), 60, "the remote data deleted",
             detail=lambda: str(remote_logs(s3, s3_bucket)))
    # The log start moved to the local log start first (Kafka's maybeUpdateRemoteLogComponents).
    assert list_offsets(tier_broker.bootstrap, TOPIC, -2) == (0, local_start)
    assert consume_keys(tier_broker.bootstrap, TOPIC, 1000 - local_start, start=local_start) == \
        list(range(local_start, 1000))
    reader = load_remote_log_metadata_manager(get_plugin_manager(autoload=False, env={}), {
        "node.id": "99", "rlmm.config.remote.log.metadata.common.client.bootstrap.servers": tier_broker.bootstrap,
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1"})
    try:
        reader.on_partition_leadership_changes(set(), {tip})
        wait_for(lambda: not list(reader.list_remote_log_segments(tip)), 30, "no remote segment in the metadata")
    finally:
        reader.close()


def test_the_copy_quota_bounds_the_copy_rate(tmp_path: Path, s3_bucket: str, tier_config: TierConfig) -> None:
    rate = 40_000  # bytes per second, broker-wide; a segment is ~15 KB
    windows, window_s = 2, 1
    config = tier_config(s3_bucket, broker={
        "remote.log.manager.copy.max.bytes.per.second": str(rate),
        "remote.log.manager.copy.quota.window.num": str(windows),
        "remote.log.manager.copy.quota.window.size.seconds": str(window_s)})
    with BrokerProcess(tmp_path / "broker", config=config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        create(admin, TOPIC, **{"remote.storage.enable": "true", "segment.bytes": "16384"})
        produce(broker.bootstrap, TOPIC, 2500)  # ~300 KB in ~20 closed segments, closed at once
        partition_dir = broker.data_dir / "logs" / f"{TOPIC}-0"
        closed = local_bases(partition_dir)[:-1]
        with open(partition_dir / "partition.metadata") as f:
            topic_id = next(line.split(":", 1)[1].strip() for line in f if line.startswith("topic_id:"))
        tip = TopicIdPartition(kafka_uuid_parse(topic_id), TOPIC, 0)
        reader = load_remote_log_metadata_manager(get_plugin_manager(autoload=False, env={}), {
            "node.id": "99", "rlmm.config.remote.log.metadata.common.client.bootstrap.servers": broker.bootstrap,
            "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
            "rlmm.config.remote.log.metadata.topic.replication.factor": "1"})
        try:
            reader.on_partition_leadership_changes(set(), {tip})

            def finished() -> list[tuple[int, int]]:
                done = [(m.event_timestamp_ms, m.segment_size_in_bytes) for m in reader.list_remote_log_segments(tip)
                        if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]
                return sorted(done) if len(done) >= len(closed) else []

            done = wait_for(finished, 60, "every closed segment copied",
                            detail=lambda: str(len(list(reader.list_remote_log_segments(tip)))))
        finally:
            reader.close()
    # The broker's own clock stamped each COPY_SEGMENT_FINISHED: between any two finishes, the
    # bytes finished stay within the quota over that span plus the windows' burst and one
    # segment in flight (generous: no timing is asserted, only the rate bound).
    segment = max(size for _, size in done)
    for i, (t0, _) in enumerate(done):
        for t1, _ in done[i + 1:]:
            between = sum(size for t, size in done if t0 < t <= t1)
            assert between <= rate * ((t1 - t0) / 1000 + windows * window_s) + 2 * segment, (t0, t1, between)
    assert sum(size for _, size in done) > rate * windows * window_s * 3  # the quota had to hold copies back


def test_a_restart_with_the_tier_off_serves_local_data_and_names_the_way_out(
        tmp_path: Path, s3_bucket: str, tier_config: TierConfig) -> None:
    # Kafka 4.3 (KRaft): the broker starts; applying the tiered topic's config fails with
    # LogConfig's message (a non-fatal metadata publishing fault, logged), and the log, no longer
    # tiered, serves its local data only.
    with BrokerProcess(tmp_path / "broker", config=tier_config(s3_bucket)) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        create(admin, TOPIC, **{"remote.storage.enable": "true", "segment.bytes": "16384",
                                "local.retention.bytes": "1"})
        produce(broker.bootstrap, TOPIC, 1000)
        local_start = tiered_down_to_active(broker, TOPIC)
        broker.config["remote.log.storage.system.enable"] = "false"
        broker.restart()
        message = ("You have to delete all topics with the property remote.storage.enable=true before disabling "
                   "tiered storage cluster-wide")
        wait_for(lambda: any(message in line and f"topic {TOPIC} " in line for line in broker.log_text().splitlines()),
                 30, "Kafka's message naming the topic in the broker's log", detail=broker.log_tail)
        assert list_offsets(broker.bootstrap, TOPIC, -2) == (0, local_start)  # the local data only
        assert list_offsets(broker.bootstrap, TOPIC, -1) == (0, 1000)
        assert consume_keys(broker.bootstrap, TOPIC, 1000 - local_start, start=local_start) == \
            list(range(local_start, 1000))
