"""QuorumController: create/delete topics, partitions, configs, brokers, producer ids; errors."""

from __future__ import annotations

import uuid
from typing import Any

from strom.core.config import BrokerConfig
from strom.core.controller.quorum_controller import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    AlterConfigsResource,
    CreatableTopic,
    CreatePartitionsTopic,
)
from strom.core.metadata.bootstrap import LATEST_METADATA_VERSION
from strom.core.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE

OK = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
INVALID_REQUEST = 42
INVALID_TOPIC = 17
UNKNOWN_TOPIC_ID = 100


async def test_create_topics_writes_partitions_and_configs(config: BrokerConfig, open_system: Any) -> None:
    system = await open_system(config)
    try:
        [res] = await system.controller.create_topics(
            [CreatableTopic("orders", 3, 1, configs={"cleanup.policy": "compact", "retention.ms": "1000"})])
        assert res.error_code == OK, res.error_message
        assert res.num_partitions == 3 and res.replication_factor == 1
        assert res.configs["cleanup.policy"] == "compact" and res.configs["segment.bytes"] == "1073741824"
        image = system.image
        topic = image.topic("orders")
        assert topic is not None and topic.topic_id == res.topic_id
        assert image.topic_by_id(res.topic_id) is topic
        for p in range(3):
            reg = image.partition("orders", p)
            assert reg is not None
            assert (reg.replicas, reg.isr, reg.leader, reg.leader_epoch) == ((1,), (1,), 1, 0)
        assert dict(image.topic_configs("orders")) == {"cleanup.policy": "compact", "retention.ms": "1000"}
        assert image.metadata_version == LATEST_METADATA_VERSION == 30  # 4.3-IV0
    finally:
        await system.close()


async def test_defaults_and_validation_errors(config: BrokerConfig, open_system: Any) -> None:
    system = await open_system(config)
    c = system.controller
    try:
        [ok] = await c.create_topics([CreatableTopic("a.b")])
        assert ok.error_code == OK and ok.num_partitions == config.num_partitions
        results = await c.create_topics([
            CreatableTopic("a.b"),                                  # exists
            CreatableTopic("a_b"),                                  # collides with a.b
            CreatableTopic(".."),
            CreatableTopic("bad name!"),
            CreatableTopic("x" * 250),
            CreatableTopic("zero", 0, 1),
            CreatableTopic("rf", 1, 3),                             # only one broker
            CreatableTopic("rf0", 1, 0),
            CreatableTopic("cfg", 1, 1, configs={"no.such.key": "1"}),
            CreatableTopic("cfg2", 1, 1, configs={"retention.ms": "soon"}),
            CreatableTopic("dup"), CreatableTopic("dup"),
            CreatableTopic("manual", 2, -1, assignments={0: [1]}),
            CreatableTopic("manual2", assignments={0: [7]}),
            CreatableTopic("good", 2, 1),
        ])
        codes = {r.name + str(i): r.error_code for i, r in enumerate(results)}
        assert list(codes.values()) == [
            TOPIC_ALREADY_EXISTS, INVALID_TOPIC, INVALID_TOPIC, INVALID_TOPIC, INVALID_TOPIC,
            INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_REPLICATION_FACTOR,
            INVALID_CONFIG, INVALID_CONFIG, INVALID_REQUEST, INVALID_REQUEST, INVALID_REQUEST,
            INVALID_REPLICA_ASSIGNMENT, OK]
        assert "collides with existing topic: a.b" in (results[1].error_message or "")
        assert "no.such.key" in (results[8].error_message or "")
        assert "retention.ms" in (results[9].error_message or "")
        assert set(system.image.topics) == {"a.b", "good"}
    finally:
        await system.close()


async def test_validate_only_writes_nothing(config: BrokerConfig, open_system: Any) -> None:
    system = await open_system(config)
    try:
        end = system.raft.end_offset
        [r] = await system.controller.create_topics([CreatableTopic("v", 2, 1)], validate_only=True)
        assert r.error_code == OK and r.num_partitions == 2
        assert system.image.topic("v") is None and system.raft.end_offset == end
    finally:
        await system.close()


async def test_one_request_is_one_batch(config: BrokerConfig, open_system: Any) -> None:
    system = await open_system(config)
    try:
        before = system.raft.end_offset
        await system.controller.create_topics([CreatableTopic("t1", 2, 1), CreatableTopic("t2", 1, 1)])
        batches = system.raft.log.read(before)
        assert len(batches) == 1  # topic, partitions and configs of both topics, atomically
    finally:
        await system.close()


async def test_delete_topics_by_name_and_id(config: BrokerConfig, open_system: Any) -> None:
    system = await open_system(config)
    c = system.controller
    try:
        [a, b] = await c.create_topics([CreatableTopic("a", 1, 1, configs={"retention.ms": "5"}),
                                        CreatableTopic("b", 1, 1)])
        missing = uuid.uuid4()
        res = await c.delete_topics(["a", b.topic_id, "nope", missing])
        assert [r.error_code for r in res] == [OK, OK, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID]
        assert res[1].name == "b"
        assert not system.image.topics and not system.image.topics_by_id
        assert system.image.topic_configs("a") == {}  # configs go with the topic
        # Re-creating gets a new id.
        [again] = await c.create_topics([CreatableTopic("a", 1, 1)])
        assert again.error_code == OK and again.topic_id != a.topic_id
    finally:
        await system.close()


async def test_create_partitions(config: BrokerConfig, open_system: Any) -> None:
    system = await open_system(config)
    c = system.controller
    try:
        await c.create_topics([CreatableTopic("p", 2, 1)])
        res = await c.create_partitions([CreatePartitionsTopic("p", 5), CreatePartitionsTopic("p", 1),
                                         CreatePartitionsTopic("nope", 3)])
        assert [r.error_code for r in res] == [OK, INVALID_PARTITIONS, UNKNOWN_TOPIC_OR_PARTITION]
        topic = system.image.topic("p")
        assert topic is not None and sorted(topic.partitions) == [0, 1, 2, 3, 4]
        [same] = await c.create_partitions([CreatePartitionsTopic("p", 5)])
        assert same.error_code == INVALID_PARTITIONS
        [bad] = await c.create_partitions([CreatePartitionsTopic("p", 6, [[9]])])
        assert bad.error_code == INVALID_REPLICA_ASSIGNMENT
    finally:
        await system.close()


async def test_incremental_alter_configs(config: BrokerConfig, open_system: Any) -> None:
    system = await open_system(config)
    c = system.controller
    try:
        await c.create_topics([CreatableTopic("c", 1, 1, configs={"retention.ms": "100"})])
        res = await c.incremental_alter_configs([
            AlterConfigsResource(TOPIC_RESOURCE, "c", [("retention.ms", OP_DELETE, None),
                                                       ("segment.bytes", OP_SET, "1000"),
                                                       ("cleanup.policy", OP_APPEND, "compact")]),
            AlterConfigsResource(TOPIC_RESOURCE, "missing", [("segment.bytes", OP_SET, "1000")]),
            AlterConfigsResource(TOPIC_RESOURCE, "c", [("segment.bytes", OP_SET, "-5")]),
            AlterConfigsResource(TOPIC_RESOURCE, "c", [("segment.bytes", OP_APPEND, "5")]),
            AlterConfigsResource(BROKER_RESOURCE, "", [("log.retention.ms", OP_SET, "5000")]),
            # Unknown broker keys are the forwarding broker's business (Kafka's controller keeps
            # them); the controller validates group configs against the broker's bounds itself.
            AlterConfigsResource(32, "g", [("consumer.session.timeout.ms", OP_SET, "1000")]),
        ])
        assert [r.error_code for r in res] == [OK, UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG, INVALID_CONFIG,
                                              OK, INVALID_CONFIG]
        assert dict(system.image.topic_configs("c")) == {"segment.bytes": "1000", "cleanup.policy": "delete,compact"}
        # min.insync.replicas is the cluster default the controller writes at bootstrap, as Kafka 4 does.
        assert dict(system.image.resource_configs(BROKER_RESOURCE, "")) == {"log.retention.ms": "5000",
                                                                           "min.insync.replicas": "1"}
        [r] = await c.incremental_alter_configs(
            [AlterConfigsResource(TOPIC_RESOURCE, "c", [("cleanup.policy", OP_SUBTRACT, "delete")])])
        assert r.error_code == OK and system.image.topic_configs("c")["cleanup.policy"] == "compact"
        [v] = await c.incremental_alter_configs(
            [AlterConfigsResource(TOPIC_RESOURCE, "c", [("segment.bytes", OP_SET, "2000")])], validate_only=True)
        assert v.error_code == OK and system.image.topic_configs("c")["segment.bytes"] == "1000"
    finally:
        await system.close()


async def test_legacy_alter_configs_replaces_everything(config: BrokerConfig, open_system: Any) -> None:
    system = await open_system(config)
    c = system.controller
    try:
        await c.create_topics([CreatableTopic("l", 1, 1, configs={"retention.ms": "100", "segment.bytes": "999"})])
        [r] = await c.legacy_alter_configs([AlterConfigsResource(TOPIC_RESOURCE, "l", [("flush.ms", OP_SET, "7")])])
        assert r.error_code == OK
        assert dict(system.image.topic_configs("l")) == {"flush.ms": "7"}
    finally:
        await system.close()


async def test_brokers_and_producer_ids(config: BrokerConfig, open_system: Any, listeners: Any) -> None:
    system = await open_system(config, register=False)
    c = system.controller
    try:
        [r] = await c.create_topics([CreatableTopic("early", 1, 1)])
        assert r.error_code == INVALID_REPLICATION_FACTOR  # no broker registered yet
        inc = uuid.uuid4()
        epoch = await c.register_broker(1, listeners, "rack-a", inc)
        assert await c.register_broker(1, listeners, "rack-a", inc) == epoch  # idempotent
        broker = system.image.broker(1)
        assert broker is not None and broker.rack == "rack-a" and not broker.fenced
        ep = broker.endpoint("PLAINTEXT")
        assert ep is not None and (ep.host, ep.port) == ("127.0.0.1", 9092)
        assert await c.allocate_producer_ids(1, epoch) == (0, 1000)
        assert await c.allocate_producer_ids(1, epoch) == (1000, 1000)
        assert system.image.next_producer_id == 2000
        try:
            await c.allocate_producer_ids(1, epoch + 100)
            raise AssertionError("stale broker epoch accepted")
        except Exception as e:
            assert getattr(e, "errno", None) == 77
    finally:
        await system.close()
