"""confluent-kafka (librdkafka) against the broker: admin APIs, produce/fetch round trips.

Every expectation is Kafka's documented behaviour as a librdkafka client observes it; the
broker is a real subprocess (session fixture ``broker``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from ck_helpers import (
    Rec,
    consume_n,
    create_topic,
    make_consumer,
    make_producer,
    produce_all,
    read_partition,
    to_rec,
    wait_for_topic,
)
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    OffsetSpec,
    ResourceType,
)

from strom.core.config import TOPIC_CONFIG_DEFS
from strom.core.testing import BrokerProcess

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _source(entry: ConfigEntry) -> int:
    """The entry's ConfigSource as an int (librdkafka hands back an int or the enum)."""
    source: Any = entry.source
    return int(getattr(source, "value", source))


DYNAMIC_TOPIC = ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def _describe_topic_configs(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(ResourceType.TOPIC, topic)
    return dict(admin.describe_configs([res])[res].result(30))


# -- admin ------------------------------------------------------------------------------------


def test_create_topic_with_partitions_and_configs(admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name, partitions=3, config={"retention.ms": "123456", "cleanup.policy": "delete"})
    wait_for_topic(admin, topic_name, 3)
    md = admin.list_topics(timeout=10)
    assert topic_name in md.topics
    assert sorted(md.topics[topic_name].partitions) == [0, 1, 2]
    assert len(md.brokers) == 1
    broker_id = next(iter(md.brokers))
    for p in md.topics[topic_name].partitions.values():
        assert p.leader == broker_id
        assert p.replicas == [broker_id] and p.isrs == [broker_id]

    desc = admin.describe_topics(TopicCollection([topic_name]))[topic_name].result(30)
    assert desc.name == topic_name
    assert not desc.is_internal
    assert [p.id for p in desc.partitions] == [0, 1, 2]
    assert all(p.leader is not None and p.leader.id == broker_id for p in desc.partitions)

    configs = _describe_topic_configs(admin, topic_name)
    assert configs["retention.ms"].value == "123456"
    assert _source(configs["retention.ms"]) == DYNAMIC_TOPIC
    assert not configs["retention.ms"].is_default


def test_create_existing_topic_fails(admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name)
    with pytest.raises(KafkaException) as info:
        create_topic(admin, topic_name)
    assert info.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_describe_configs_has_every_key_with_defaults(admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name)
    configs = _describe_topic_configs(admin, topic_name)
    expected = {d.name for d in TOPIC_CONFIG_DEFS}
    missing = expected - set(configs)
    assert not missing, f"DescribeConfigs lacks {sorted(missing)}"
    # Kafka's defaults as a client sees them (static broker defaults, not dynamic).
    assert configs["cleanup.policy"].value == "delete"
    assert configs["max.message.bytes"].value == "1048588"
    assert configs["message.timestamp.type"].value == "CreateTime"
    assert configs["retention.ms"].value == "604800000"
    assert configs["segment.bytes"].value == "1073741824"
    for name in ("cleanup.policy", "retention.ms", "segment.bytes"):
        assert _source(configs[name]) != DYNAMIC_TOPIC, name


def test_incremental_alter_configs(admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name)
    res = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
    ])
    admin.incremental_alter_configs([res])[res].result(30)
    configs = _describe_topic_configs(admin, topic_name)
    assert configs["retention.ms"].value == "86400000"
    assert _source(configs["retention.ms"]) == DYNAMIC_TOPIC
    assert configs["cleanup.policy"].value == "compact"

    # DELETE falls back to the default.
    res = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([res])[res].result(30)
    configs = _describe_topic_configs(admin, topic_name)
    assert configs["retention.ms"].value == "604800000"
    assert _source(configs["retention.ms"]) != DYNAMIC_TOPIC


def test_incremental_alter_configs_rejects_bad_value(admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name)
    res = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "not-a-number", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as info:
        admin.incremental_alter_configs([res])[res].result(30)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_create_partitions(admin: AdminClient, topic_name: str, broker: BrokerProcess) -> None:
    create_topic(admin, topic_name, partitions=1)
    admin.create_partitions([NewPartitions(topic_name, 4)])[topic_name].result(30)
    wait_for_topic(admin, topic_name, 4)
    producer = make_producer(broker.bootstrap)
    recs = produce_all(producer, topic_name, [{"value": b"p3", "partition": 3}])
    assert recs[0].partition == 3 and recs[0].offset == 0
    # Shrinking is refused.
    with pytest.raises(KafkaException) as info:
        admin.create_partitions([NewPartitions(topic_name, 2)])[topic_name].result(30)
    assert info.value.args[0].code() == KafkaError.INVALID_PARTITIONS


def test_delete_topics(admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name)
    admin.delete_topics([topic_name], operation_timeout=30)[topic_name].result(30)
    deadline = time.monotonic() + 20
    while topic_name in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, "deleted topic still listed"
        time.sleep(0.1)
    with pytest.raises(KafkaException) as info:
        admin.delete_topics([topic_name], operation_timeout=30)[topic_name].result(30)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_cluster(admin: AdminClient) -> None:
    cluster = admin.describe_cluster().result(30)
    assert cluster.cluster_id
    assert len(cluster.nodes) == 1
    assert cluster.controller is not None


# -- produce / fetch --------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_per_compression(codec: str, broker: BrokerProcess, admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name, partitions=2)
    wait_for_topic(admin, topic_name, 2)
    base_ts = int(time.time() * 1000) - 60_000
    messages = []
    for i in range(200):
        m: dict[str, object] = {
            "key": None if i % 17 == 0 else f"k{i}".encode(),
            "value": None if i % 31 == 5 else (f"value-{i}-" * (i % 7 + 1)).encode(),
            "headers": [("h1", f"v{i}".encode()), ("empty", b""), ("h1", b"dup")] if i % 3 else [],
            "timestamp": base_ts + i,
            "partition": i % 2,
        }
        messages.append(m)
    producer = make_producer(broker.bootstrap, **{"compression.type": codec, "linger.ms": 20})
    delivered = produce_all(producer, topic_name, messages)
    for p in (0, 1):
        sent = sorted((r for r in delivered if r.partition == p), key=lambda r: r.offset)
        assert [r.offset for r in sent] == list(range(len(sent))), "offsets not contiguous from 0"
        got = [to_rec(m) for m in read_partition(broker.bootstrap, topic_name, p, len(sent), 0)]
        assert got == sent
    consumer = make_consumer(broker.bootstrap)
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    first = consume_n(consumer, 1)[0]
    consumer.close()
    assert first.timestamp()[0] == TIMESTAMP_CREATE_TIME


def test_seek_into_middle_of_batch(broker: BrokerProcess, admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name)
    # One large linger so the 50 records share one batch: the broker returns the whole batch
    # from its first offset; the client must drop the records before the one sought.
    producer = make_producer(broker.bootstrap, **{"linger.ms": 200, "compression.type": "lz4"})
    delivered = produce_all(producer, topic_name, [{"value": f"v{i}".encode()} for i in range(50)])
    assert [r.offset for r in delivered] == list(range(50))
    got = read_partition(broker.bootstrap, topic_name, 0, 10, 25)
    assert [m.offset() for m in got] == list(range(25, 35))
    assert got[0].value() == b"v25"

    # Seek on a live consumer too.
    consumer = make_consumer(broker.bootstrap)
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    consume_n(consumer, 3)
    consumer.seek(TopicPartition(topic_name, 0, 40))
    after = consume_n(consumer, 10)
    consumer.close()
    assert [m.offset() for m in after] == list(range(40, 50))


def test_list_offsets(broker: BrokerProcess, admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name)
    tp = TopicPartition(topic_name, 0)
    empty = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(30)
    assert empty.offset == 0
    base = int(time.time() * 1000) - 100_000
    # Timestamps out of order: max timestamp is at offset 3.
    stamps = [base + 10, base + 20, base + 30, base + 90, base + 40, base + 50]
    producer = make_producer(broker.bootstrap)
    for ts in stamps:  # separate batches: flush after each
        produce_all(producer, topic_name, [{"value": str(ts).encode(), "timestamp": ts}])

    def lo(spec: OffsetSpec) -> tuple[int, int]:
        r = admin.list_offsets({tp: spec})[tp].result(30)
        return r.offset, r.timestamp

    assert lo(OffsetSpec.earliest())[0] == 0
    assert lo(OffsetSpec.latest())[0] == len(stamps)
    assert lo(OffsetSpec.for_timestamp(base + 25)) == (2, base + 30)  # first offset with ts >= target
    assert lo(OffsetSpec.for_timestamp(base + 10)) == (0, base + 10)
    assert lo(OffsetSpec.for_timestamp(base + 45))[0] == 3  # base+90 at offset 3 is the first >= target
    assert lo(OffsetSpec.for_timestamp(base + 1000))[0] == -1  # none: offset -1
    assert lo(OffsetSpec.max_timestamp()) == (3, base + 90)


def test_delete_records_moves_log_start(broker: BrokerProcess, admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name)
    producer = make_producer(broker.bootstrap)
    for i in range(10):  # one batch per record, so the deletion point falls on a batch boundary
        produce_all(producer, topic_name, [{"value": f"v{i}".encode()}])
    futs = admin.delete_records([TopicPartition(topic_name, 0, 6)])
    fut = next(iter(futs.values()))
    deleted = fut.result(30)
    assert deleted.low_watermark == 6

    consumer = make_consumer(broker.bootstrap)
    low, high = consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
    consumer.close()
    assert (low, high) == (6, 10)
    earliest = admin.list_offsets({TopicPartition(topic_name, 0): OffsetSpec.earliest()})
    assert next(iter(earliest.values())).result(30).offset == 6

    # Offset 0 is now out of range: with reset=error the client reports it ...
    consumer = make_consumer(broker.bootstrap, **{"auto.offset.reset": "error"})
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    deadline = time.monotonic() + 20
    err: KafkaError | None = None
    while err is None and time.monotonic() < deadline:
        for m in consumer.consume(10, timeout=1):
            assert m.error() is not None, f"read offset {m.offset()} below the log start"
            err = m.error()
    consumer.close()
    assert err is not None
    assert err.code() in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET), err
    assert "out of range" in err.str().lower() or err.code() == KafkaError.OFFSET_OUT_OF_RANGE, err

    # ... and with reset=earliest it lands at the new log start.
    got = read_partition(broker.bootstrap, topic_name, 0, 4, 0, conf={"auto.offset.reset": "earliest"})
    assert [(m.offset(), m.value()) for m in got] == [(i, f"v{i}".encode()) for i in range(6, 10)]


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(acks: str, broker: BrokerProcess, admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name)
    producer = make_producer(broker.bootstrap, acks=acks)
    delivered = produce_all(producer, topic_name, [{"value": f"a{i}".encode()} for i in range(100)])
    if acks != "0":
        assert [r.offset for r in delivered] == list(range(100))
    got = read_partition(broker.bootstrap, topic_name, 0, 100, 0)
    assert [(m.offset(), m.value()) for m in got] == [(i, f"a{i}".encode()) for i in range(100)]


def test_large_record_limits(broker: BrokerProcess, admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name)  # max.message.bytes default 1048588
    producer = make_producer(broker.bootstrap, **{"message.max.bytes": 4_000_000, "compression.type": "none"})
    big = bytes(range(256)) * (900 * 1024 // 256)
    rec = produce_all(producer, topic_name, [{"value": big, "key": b"big"}])[0]
    assert rec.offset == 0
    got = read_partition(broker.bootstrap, topic_name, 0, 1, 0)
    assert got[0].value() == big

    too_big = b"x" * (1_100_000)
    with pytest.raises(KafkaException) as info:
        produce_all(producer, topic_name, [{"value": too_big}])
    assert info.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    # Nothing was appended.
    tp = TopicPartition(topic_name, 0)
    assert admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(30).offset == 1


def test_log_append_time_topic(broker: BrokerProcess, admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name, config={"message.timestamp.type": "LogAppendTime"})
    old = int(time.time() * 1000) - 3_600_000
    before = int(time.time() * 1000)
    producer = make_producer(broker.bootstrap, **{"compression.type": "gzip"})
    produce_all(producer, topic_name, [{"value": f"v{i}".encode(), "timestamp": old + i} for i in range(5)])
    producer2 = make_producer(broker.bootstrap)
    produce_all(producer2, topic_name, [{"value": b"plain", "timestamp": old}])
    after = int(time.time() * 1000)
    got = read_partition(broker.bootstrap, topic_name, 0, 6, 0)
    for m in got:
        ts_type, ts = m.timestamp()
        assert ts_type == TIMESTAMP_LOG_APPEND_TIME, (m.offset(), ts_type)
        assert before - 5_000 <= ts <= after + 5_000, (m.offset(), ts, before, after)


def test_long_poll_wakes_on_produce(broker: BrokerProcess, admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name)
    # The fetch would wait up to 25 s; the record produced after 1 s must arrive well within
    # the 15 s consume timeout, i.e. the produce wakes the parked fetch.
    consumer = make_consumer(broker.bootstrap, **{"fetch.wait.max.ms": 25_000, "fetch.min.bytes": 1})
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    consumer.consume(1, timeout=0.5)  # let the first (empty) fetch get parked

    def later() -> None:
        time.sleep(1.0)
        produce_all(make_producer(broker.bootstrap), topic_name, [{"value": b"wake"}])

    t = threading.Thread(target=later)
    t.start()
    try:
        got = consume_n(consumer, 1, timeout=15)
    finally:
        t.join()
        consumer.close()
    assert got[0].value() == b"wake" and got[0].offset() == 0


def test_auto_create_topic_on_metadata(broker: BrokerProcess, topic_name: str) -> None:
    producer = make_producer(broker.bootstrap)
    rec = produce_all(producer, topic_name, [{"value": b"auto"}])[0]
    assert rec == Rec(0, 0, None, b"auto", (), rec.timestamp)
