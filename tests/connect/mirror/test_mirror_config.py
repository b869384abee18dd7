"""mm2.properties and the MirrorMaker connector configs read as Kafka reads them; the
replication policies; the internal record formats byte for byte; the offset-sync store's
translation (rounds down, never skips, within offset.lag.max however old the offset)."""

from __future__ import annotations

import itertools
import logging
import struct

import pytest

from strom.connect.exceptions import ConfigException
from strom.connect.mirror.checkpoint import OffsetSyncStore
from strom.connect.mirror.config import (
    MIRROR_CHECKPOINT_CONNECTOR,
    MIRROR_HEARTBEAT_CONNECTOR,
    MIRROR_SOURCE_CONNECTOR,
    MirrorCheckpointConfig,
    MirrorHeartbeatConfig,
    MirrorMakerConfig,
    MirrorSourceConfig,
    SourceAndTarget,
)
from strom.connect.mirror.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    replication_policy,
)
from strom.connect.mirror.records import Checkpoint, Heartbeat, OffsetSync
from strom.connect.mirror.source import _PartitionState, is_cycle, should_replicate_topic

MM2 = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:9092",
    "B.bootstrap.servers": "b:9092",
    "A->B.enabled": "true",
    "A->B.topics": "orders.*, payments",
    "B.consumer.fetch.min.bytes": "1024",
    "producer.linger.ms": "5",
    "offset.lag.max": "50",
    "replication.factor": "1",
    "tasks.max": "3",
}


def test_kafka_defaults() -> None:
    src = MirrorSourceConfig({"source.cluster.alias": "A"})
    assert src.target_cluster_alias == "target"
    assert src.values["topics"] == [".*"]
    assert src.values["topics.exclude"] == [r".*[\-\.]internal", r".*\.replica", "__.*"]
    assert src.max_offset_lag == 100
    assert src.refresh_topics_interval_s == 600 and src.sync_topic_configs_interval_s == 600
    assert src.replication_factor == 2 and src.offset_syncs_replication_factor == 3
    assert src.offset_syncs_topic_location == "source" and src.offset_syncs_topic == "mm2-offset-syncs.target.internal"
    assert "min.insync.replicas" in "".join(src.values["config.properties.exclude"]).replace("\\", "")
    cp = MirrorCheckpointConfig({"source.cluster.alias": "A", "target.cluster.alias": "B"})
    assert cp.values["groups"] == [".*"] and cp.values["groups.exclude"] == ["console-consumer-.*", "connect-.*", "__.*"]
    assert cp.emit_checkpoints_interval_s == 60 and cp.sync_group_offsets_interval_s == -1
    assert cp.refresh_groups_interval_s == 600 and cp.checkpoints_topic == "A.checkpoints.internal"
    hb = MirrorHeartbeatConfig({"source.cluster.alias": "A"})
    assert hb.emit_heartbeats_interval_s == 1 and hb.heartbeats_topic == "heartbeats"


def test_offset_syncs_topic_location_target_names_the_source() -> None:
    cfg = MirrorSourceConfig({"source.cluster.alias": "A", "target.cluster.alias": "B",
                              "offset-syncs.topic.location": "target"})
    assert cfg.offset_syncs_topic == "mm2-offset-syncs.A.internal"
    with pytest.raises(ConfigException) as e:
        MirrorSourceConfig({"source.cluster.alias": "A", "offset-syncs.topic.location": "elsewhere"})
    assert "offset-syncs.topic.location" in str(e.value)


@pytest.mark.parametrize(("key", "value"), [("offset.lag.max", "lots"), ("refresh.topics.enabled", "yes"),
                                            ("emit.heartbeats.interval.seconds", "-5")])
def test_bad_value_is_an_error_naming_the_key(key: str, value: str) -> None:
    props = {"source.cluster.alias": "A", key: value}
    config_class = MirrorHeartbeatConfig if key.startswith("emit.heartbeats") else MirrorSourceConfig
    with pytest.raises(ConfigException) as e:
        config_class(props)
    assert key in str(e.value)


def test_checkpoint_connector_refuses_nothing_to_do() -> None:
    with pytest.raises(ConfigException) as e:
        MirrorCheckpointConfig({"source.cluster.alias": "A", "emit.checkpoints.enabled": "false"})
    assert "emit.checkpoints.enabled" in str(e.value)


def test_deprecated_aliases_feed_new_names() -> None:
    cfg = MirrorSourceConfig({"source.cluster.alias": "A", "topics.blacklist": "x.*"})
    assert cfg.values["topics.exclude"] == ["x.*"]
    assert not cfg.topic_filter.should_replicate_topic("xy") and cfg.topic_filter.should_replicate_topic("yx")


def test_client_configs_take_cluster_then_client_overrides() -> None:
    cfg = MirrorSourceConfig({"name": "m", "source.cluster.alias": "A", "target.cluster.alias": "B",
                              "source.cluster.bootstrap.servers": "a:1", "source.cluster.group.id": "ignored",
                              "consumer.fetch.min.bytes": "7", "source.consumer.fetch.min.bytes": "9",
                              "target.cluster.bootstrap.servers": "b:1", "target.admin.request.timeout.ms": "3",
                              "admin.timeout.ms": "2000", "consumer.poll.timeout.ms": "500"})
    consumer = cfg.source_consumer_config("replication-consumer")
    assert consumer["bootstrap.servers"] == "a:1" and consumer["fetch.min.bytes"] == "9"
    assert "group.id" not in consumer  # only client keys pass from source.cluster.*
    assert consumer["enable.auto.commit"] == "false" and consumer["auto.offset.reset"] == "earliest"
    assert consumer["client.id"] == "A->B|m|replication-consumer"
    admin = cfg.target_admin_config("target-admin")
    assert admin["bootstrap.servers"] == "b:1" and admin["request.timeout.ms"] == "3"
    # MM2's own admin.timeout.ms / consumer.poll.timeout.ms are not client keys (librdkafka refuses them)
    assert "timeout.ms" not in admin and "poll.timeout.ms" not in consumer


def test_mm2_properties_flows_and_connector_configs() -> None:
    mm = MirrorMakerConfig(MM2)
    # A->B enabled; B->A exists for heartbeats only (Kafka's clusterPairs).
    assert mm.cluster_pairs() == [SourceAndTarget("A", "B"), SourceAndTarget("B", "A")]
    src = mm.connector_base_config(SourceAndTarget("A", "B"), MIRROR_SOURCE_CONNECTOR)
    assert src["name"] == "MirrorSourceConnector" and src["connector.class"] == MIRROR_SOURCE_CONNECTOR
    assert src["source.cluster.alias"] == "A" and src["target.cluster.alias"] == "B"
    assert src["source.cluster.bootstrap.servers"] == "a:9092" and src["target.cluster.bootstrap.servers"] == "b:9092"
    assert src["target.consumer.fetch.min.bytes"] == "1024"
    assert src["tasks.max"] == "3"  # a Connect framework key passes too
    assert src["topics"] == "orders.*, payments" and src["enabled"] == "true" and src["offset.lag.max"] == "50"
    cfg = MirrorSourceConfig(src)
    assert cfg.topic_filter.should_replicate_topic("orders-eu") and not cfg.topic_filter.should_replicate_topic("x")
    back = mm.connector_base_config(SourceAndTarget("B", "A"), MIRROR_HEARTBEAT_CONNECTOR)
    assert back["enabled"] == "false"  # disabled flow: heartbeats only
    worker = mm.worker_config(SourceAndTarget("A", "B"))
    assert worker["bootstrap.servers"] == "b:9092" and worker["group.id"] == "A-mm2"
    assert worker["offset.storage.topic"] == "mm2-offsets.A.internal"
    assert worker["config.storage.topic"] == "mm2-configs.A.internal"
    assert worker["status.storage.topic"] == "mm2-status.A.internal"
    assert worker["key.converter"].endswith("ByteArrayConverter")
    checkpoint = mm.connector_base_config(SourceAndTarget("A", "B"), MIRROR_CHECKPOINT_CONNECTOR)
    assert MirrorCheckpointConfig(checkpoint).checkpoints_topic == "A.checkpoints.internal"


def test_heartbeats_off_drops_reverse_flow() -> None:
    mm = MirrorMakerConfig({**MM2, "emit.heartbeats.enabled": "false"})
    assert mm.cluster_pairs() == [SourceAndTarget("A", "B")]


def test_unknown_key_is_a_warning_naming_it(caplog: pytest.LogCaptureFixture) -> None:
    mm = MirrorMakerConfig({**MM2, "A->B.topicz": "x", "C.bootstrap.servers": "c:1", "offset.lag.maxx": "1"})
    with caplog.at_level(logging.WARNING, logger="strom.connect.mirror.config"):
        mm.validate()
    warned = caplog.text
    for key in ("A->B.topicz", "C.bootstrap.servers", "offset.lag.maxx"):
        assert f"'{key}'" in warned
    # known keys are not warned about ('A->B.topics' is named only as the suggestion for the typo)
    assert "configuration 'A->B.topics'" not in warned and "'producer.linger.ms'" not in warned
    assert "'A->B.topicz' was supplied but isn't a known config. (did you mean 'A->B.topics'?)" in warned


def test_bad_value_in_mm2_properties_names_the_key() -> None:
    with pytest.raises(ConfigException) as e:
        MirrorMakerConfig({**MM2, "A->B.sync.group.offsets.enabled": "maybe"}).validate()
    assert "sync.group.offsets.enabled" in str(e.value)
    with pytest.raises(ConfigException) as e:
        MirrorMakerConfig({"clusters": "A, B", "A.bootstrap.servers": "a:1", "A->B.enabled": "true"}).validate()
    assert "B.bootstrap.servers" in str(e.value)


def test_default_replication_policy() -> None:
    p = DefaultReplicationPolicy()
    assert p.format_remote_topic("A", "orders") == "A.orders"
    assert p.topic_source("A.orders") == "A" and p.upstream_topic("A.orders") == "orders"
    assert p.topic_source("orders") is None and p.original_topic("B.A.orders") == "orders"
    assert p.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal" and p.checkpoints_topic("A") == "A.checkpoints.internal"
    assert p.is_heartbeats_topic("heartbeats") and p.is_heartbeats_topic("A.heartbeats")
    assert p.is_internal_topic("__consumer_offsets") and p.is_internal_topic("mm2-offset-syncs.B.internal")
    q = replication_policy("DefaultReplicationPolicy", {"replication.policy.separator": "_"})
    assert q.format_remote_topic("A", "orders") == "A_orders" and q.checkpoints_topic("A") == "A_checkpoints_internal"


def test_identity_replication_policy() -> None:
    p = replication_policy("org.apache.kafka.connect.mirror.IdentityReplicationPolicy", {"source.cluster.alias": "A"})
    assert isinstance(p, IdentityReplicationPolicy)
    assert p.format_remote_topic("A", "orders") == "orders" and p.topic_source("orders") == "A"
    assert p.format_remote_topic("A", "heartbeats") == "A.heartbeats"
    with pytest.raises(ConfigException):
        replication_policy("no.such.Policy", {})


def test_cycles_are_refused() -> None:
    cfg = MirrorSourceConfig({"source.cluster.alias": "B", "target.cluster.alias": "A"})
    assert is_cycle(cfg, "A.orders") and is_cycle(cfg, "C.A.orders") and not is_cycle(cfg, "C.orders")
    assert not should_replicate_topic(cfg, "A.orders") and should_replicate_topic(cfg, "orders")
    assert should_replicate_topic(cfg, "C.heartbeats") and not should_replicate_topic(cfg, "__consumer_offsets")


def test_record_formats_are_kafkas() -> None:
    s = OffsetSync("orders", 3, 100, 42)
    assert s.record_key() == struct.pack(">h", 6) + b"orders" + struct.pack(">i", 3)
    assert s.record_value() == struct.pack(">qq", 100, 42)
    assert OffsetSync.deserialize(s.record_key(), s.record_value()) == s
    c = Checkpoint("g1", "A.orders", 0, 10, 7, "meta")
    assert c.record_key() == b"\x00\x02g1\x00\x08A.orders\x00\x00\x00\x00"
    assert c.record_value() == struct.pack(">hqq", 0, 10, 7) + b"\x00\x04meta"
    assert Checkpoint.deserialize(c.record_key(), c.record_value()) == c
    h = Heartbeat("A", "B", 1234)
    assert h.record_key() == b"\x00\x01A\x00\x01B" and h.record_value() == struct.pack(">hq", 0, 1234)
    assert Heartbeat.deserialize(h.record_key(), h.record_value()) == h


def test_offset_sync_writer_cadence() -> None:
    state = _PartitionState(max_offset_lag=10)
    synced = []
    for up in range(100):
        if state.update(up, up + 1000):
            synced.append(up)
            state.reset()
    # first record, then at least every offset.lag.max downstream records
    assert synced[0] == 0 and all(b - a <= 11 for a, b in itertools.pairwise(synced))
    assert state.update(200, 1101)  # a gap upstream always syncs


def _store(syncs: list[tuple[int, int]]) -> OffsetSyncStore:
    store = OffsetSyncStore()
    for up, down in syncs:
        store.add(OffsetSync("t", 0, up, down))
    store.read_to_end = True
    return store


def test_translation_rounds_down_and_never_skips() -> None:
    store = _store([(0, 0), (100, 50), (200, 150)])
    assert store.translate_downstream("t", 0, 100) == 50
    assert store.translate_downstream("t", 0, 150) == 51  # one past the earlier sync, not 100
    assert store.translate_downstream("t", 0, 10_000) == 151
    assert store.translate_downstream("t", 1, 5) is None
    assert _store([(10, 0)]).translate_downstream("t", 0, 5) == -1
    not_read = OffsetSyncStore()
    not_read.add(OffsetSync("t", 0, 0, 0))
    assert not_read.translate_downstream("t", 0, 0) is None


def test_far_lagging_offset_translates_within_offset_lag_max() -> None:
    lag_max = 100
    state, syncs = _PartitionState(lag_max), []
    for up in range(200_000):  # downstream = upstream + 7: a topic that existed before
        if state.update(up, up + 7):
            syncs.append((up, up + 7))
            state.reset()
    store = _store(syncs)
    for committed in (1, 99, 12_345, 100_000, 199_999):
        got = store.translate_downstream("t", 0, committed)
        assert got is not None and got <= committed + 7  # never skips
        assert committed + 7 - got <= lag_max  # within offset.lag.max of the truth


def test_rewind_drops_contradicted_syncs() -> None:
    store = _store([(0, 0), (100, 100), (200, 200)])
    store.add(OffsetSync("t", 0, 150, 300))  # task restarted from 150: duplicates downstream
    assert store.translate_downstream("t", 0, 250) == 301
    assert store.translate_downstream("t", 0, 120) == 101
