"""MirrorSourceConnector on a standalone worker between two strom brokers: records arrive
exact (keys, values, headers, timestamps, partition for partition), remote topics are created
with the source's partition count and synced configs, new topics and partitions are picked up
on refresh, offset syncs are written in Kafka's format, and cycles are refused."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewPartitions

from strom.connect.mirror.records import OffsetSync
from strom.core.testing import wait_for

from .conftest import Mirror

SOURCE = "org.apache.kafka.connect.mirror.MirrorSourceConnector"


def _records(n: int, partitions: int) -> list[dict[str, Any]]:
    return [{"partition": i % partitions, "key": None if i % 7 == 0 else f"k{i}".encode(),
             "value": None if i % 11 == 0 else f"v{i}".encode() * (1 + i % 5),
             "headers": [("h", f"x{i}".encode()), ("h", None)] if i % 3 == 0 else None,
             "timestamp": 1_700_000_000_000 + i} for i in range(n)]


def _offset_syncs(bootstrap: str, topic: str) -> list[OffsetSync]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "syncs-reader", "enable.auto.commit": False})
    try:
        _, end = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[OffsetSync] = []
        while len(out) < end:
            for m in c.consume(1000, 1.0):
                if m.error() is None:
                    out.append(OffsetSync.deserialize(m.key(), m.value()))
        return out
    finally:
        c.close()


def test_records_arrive_exact_with_configs_and_offset_syncs(mirror: Mirror) -> None:
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    mirror.create_topic(mirror.a, topic, 3, {"retention.ms": "3600000", "min.insync.replicas": "1"})
    sent = _records(3000, 3)
    mirror.produce(mirror.a, topic, sent)
    herder = mirror.herder(mirror.b, "src")
    herder.put_connector_config("mm-src", mirror.connector(SOURCE, "mm-src", ("A", mirror.a), ("B", mirror.b),
                                                           topics=topic, offset_lag_max="50"), False)
    remote = f"A.{topic}"
    wait_for(lambda: sum(mirror.end_offsets(mirror.b, remote).values()) >= len(sent), 90, f"{remote} complete")
    src = mirror.read_all(mirror.a, topic, 3)
    dst = mirror.read_all(mirror.b, remote, 3)
    assert len(dst) == len(src) == len(sent)  # no duplicates, nothing missing
    # partition for partition, offset for offset (the target topic was empty): key, value,
    # headers (repeated and null ones too) and timestamp unchanged
    assert dst == src
    # remote topic: the source's partition count and its set configs, minus excluded ones
    admin = AdminClient({"bootstrap.servers": mirror.b})
    assert len(admin.list_topics(remote, timeout=10).topics[remote].partitions) == 3
    res = ConfigResource(ConfigResource.Type.TOPIC, remote)
    configs = admin.describe_configs([res])[res].result(30)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # set on the source topic too, but in config.properties.exclude: not a topic config remotely
    assert configs["min.insync.replicas"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # offset syncs (on the source cluster by default) in Kafka's format, at most offset.lag.max apart
    syncs = wait_for(lambda: [s for s in _offset_syncs(mirror.a, "mm2-offset-syncs.B.internal") if s.topic == topic],
                     30, "offset syncs")
    for p in range(3):
        ups = [s for s in syncs if s.partition == p]
        assert ups and ups[0].upstream_offset == 0 and ups[0].downstream_offset == 0
        assert all(s.upstream_offset == s.downstream_offset for s in ups)  # empty target: same offsets
        assert all(b.downstream_offset - a.downstream_offset <= 51
                   for a, b in itertools.pairwise(ups) if b.upstream_offset > a.upstream_offset)


def test_new_topics_and_partitions_are_picked_up_and_cycles_refused(mirror: Mirror) -> None:
    base = f"disc-{uuid.uuid4().hex[:8]}"
    first, later = f"{base}-1", f"{base}-2"
    mirror.create_topic(mirror.a, first, 1)
    mirror.create_topic(mirror.a, f"B.{base}-cycle", 1)  # came from B: must not go back to B
    mirror.produce(mirror.a, first, [{"partition": 0, "value": b"one"}])
    mirror.produce(mirror.a, f"B.{base}-cycle", [{"partition": 0, "value": b"loop"}])
    herder = mirror.herder(mirror.b, "disc")
    herder.put_connector_config("mm-disc", mirror.connector(
        SOURCE, "mm-disc", ("A", mirror.a), ("B", mirror.b), topics=f"{base}.*,B\\.{base}.*",
        refresh_topics_interval_seconds="1"), False)
    wait_for(lambda: mirror.end_offsets(mirror.b, f"A.{first}").get(0) == 1, 60, "first topic mirrored")
    # a new topic, and a partition added to the first one
    mirror.create_topic(mirror.a, later, 2)
    mirror.produce(mirror.a, later, [{"partition": p, "value": b"x"} for p in (0, 1)])
    admin = AdminClient({"bootstrap.servers": mirror.a})
    admin.create_partitions([NewPartitions(first, 2)])[first].result(30)
    mirror.produce(mirror.a, first, [{"partition": 1, "value": b"two"}])
    wait_for(lambda: mirror.end_offsets(mirror.b, f"A.{later}") == {0: 1, 1: 1}, 60, "new topic mirrored")
    wait_for(lambda: mirror.end_offsets(mirror.b, f"A.{first}") == {0: 1, 1: 1}, 60, "added partition mirrored")
    assert mirror.end_offsets(mirror.b, f"A.B.{base}-cycle") == {}


def test_headerless_records_take_the_batch_path_with_exact_records_and_offset_syncs(mirror: Mirror) -> None:
    """Records without headers go as SourceRecordBatches acknowledged by commit_record_batch: the
    remote topic is still exact and the offset syncs are still Kafka's (first at 0, true pairs,
    at most offset.lag.max apart)."""
    topic = f"plain-{uuid.uuid4().hex[:8]}"
    mirror.create_topic(mirror.a, topic, 2, {})
    sent = [{**r, "headers": None} for r in _records(4000, 2)]
    mirror.produce(mirror.a, topic, sent)
    herder = mirror.herder(mirror.b, "src")
    herder.put_connector_config("mm-plain", mirror.connector(SOURCE, "mm-plain", ("A", mirror.a), ("B", mirror.b),
                                                             topics=topic, offset_lag_max="50"), False)
    remote = f"A.{topic}"
    wait_for(lambda: sum(mirror.end_offsets(mirror.b, remote).values()) >= len(sent), 90, f"{remote} complete")
    src = mirror.read_all(mirror.a, topic, 2)
    assert mirror.read_all(mirror.b, remote, 2) == src  # keys, values, timestamps, partitions, offsets

    def settled() -> list[OffsetSync] | None:
        syncs = [s for s in _offset_syncs(mirror.a, "mm2-offset-syncs.B.internal") if s.topic == topic]
        # the tail of each partition is synced once lag.max is reached or at the next commit
        return syncs if {s.partition for s in syncs} == {0, 1} else None

    syncs = wait_for(settled, 30, "offset syncs of both partitions")
    for p in range(2):
        ups = [s for s in syncs if s.partition == p]
        assert ups[0].upstream_offset == 0 and ups[0].downstream_offset == 0
        assert all(s.upstream_offset == s.downstream_offset for s in ups)  # empty target: same offsets
        assert all(b.downstream_offset - a.downstream_offset <= 51
                   for a, b in itertools.pairwise(ups) if b.upstream_offset > a.upstream_offset)
        assert len(ups) >= 2000 // 51  # a sync at least every offset.lag.max records, not one per batch
