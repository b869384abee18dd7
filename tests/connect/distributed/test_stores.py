"""The Kafka-backed config, status and offset stores on the bundled broker: what one store writes,
another (as on another worker, or after a restart) reads back in Kafka Connect's format."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from strom.connect.exceptions import ConnectException
from strom.connect.runtime.distributed.config_store import KafkaConfigBackingStore, RestartRequest
from strom.connect.runtime.distributed.offset_store import KafkaOffsetBackingStore
from strom.connect.runtime.distributed.status_store import KafkaStatusBackingStore, Status, TopicStatus
from strom.connect.runtime.offsets import serialize_key, serialize_offset
from strom.core.testing import BrokerProcess
from strom.partitioner import murmur2_partition


def confs(broker: BrokerProcess) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    base = {"bootstrap.servers": broker.bootstrap}
    return dict(base), dict(base), dict(base)


@pytest.fixture
def topic() -> str:
    return f"connect-{uuid.uuid4().hex[:8]}"


def config_store(broker: BrokerProcess, topic: str, events: list[tuple[str, str]] | None = None) -> KafkaConfigBackingStore:
    p, c, a = confs(broker)
    store = KafkaConfigBackingStore(topic, p, c, a, replication_factor=3,
                                    listener=(lambda k, n: events.append((k, n))) if events is not None else None)
    store.start()
    return store


def test_config_store_round_trip_and_kafka_format(connect_broker: BrokerProcess, topic: str, read_all: Any) -> None:
    events: list[tuple[str, str]] = []
    a = config_store(connect_broker, topic)
    try:
        a.put_connector_config("my-conn", {"connector.class": "FileStreamSource", "tasks.max": "2"}, "PAUSED")
        a.put_task_configs("my-conn", [{"task": "0"}, {"task": "1"}])
        a.put_target_state("my-conn", "STOPPED")
        a.put_connector_config("gone", {"connector.class": "X"})
        a.remove_connector_config("gone")
        a.put_restart_request(RestartRequest("my-conn", True, False))
        a.refresh()
        b = config_store(connect_broker, topic, events)  # a second worker reading from the start
        try:
            s = b.snapshot()
            assert s.connectors() == ["my-conn"]
            assert s.connector_configs["my-conn"] == {"connector.class": "FileStreamSource", "tasks.max": "2"}
            assert s.tasks("my-conn") == [("my-conn", 0), ("my-conn", 1)]
            assert s.task_config(("my-conn", 1)) == {"task": "1"}
            assert s.target_state("my-conn") == "STOPPED"
            assert s.offset == a.snapshot().offset > 0
            assert ("connector-removed", "gone") in events
            assert b.take_restart_requests()[-1] == RestartRequest("my-conn", True, False)
        finally:
            b.stop()
    finally:
        a.stop()
    raw = {k.decode(): (json.loads(v) if v is not None else None) for _, k, v in read_all(connect_broker, topic)}
    assert raw["connector-my-conn"] == {"properties": {"connector.class": "FileStreamSource", "tasks.max": "2"}}
    assert raw["task-my-conn-1"] == {"properties": {"task": "1"}}
    assert raw["commit-my-conn"] == {"tasks": 2}
    assert raw["target-state-my-conn"] == {"state": "PAUSED", "state.v2": "STOPPED"}
    assert raw["connector-gone"] is None
    assert raw["restart-connector-my-conn"] == {"include-tasks": True, "only-failed": False}
    admin = AdminClient({"bootstrap.servers": connect_broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    assert admin.describe_configs([res])[res].result(10)["cleanup.policy"].value == "compact"


def test_uncommitted_task_configs_are_not_applied(connect_broker: BrokerProcess, topic: str) -> None:
    a = config_store(connect_broker, topic)
    try:
        a.put_connector_config("c", {"k": "v"})
        a.put_task_configs("c", [{"n": "0"}])
        # A leader that died between task records and the commit: the old set stays in force.
        a.log.send_all([(b"task-c-0", b'{"properties":{"n":"new0"}}'), (b"task-c-1", b'{"properties":{"n":"new1"}}')])
        a.refresh()
        assert a.snapshot().tasks("c") == [("c", 0)] and a.snapshot().task_config(("c", 0)) == {"n": "0"}
        # A commit of more tasks than were written makes the connector inconsistent (no tasks).
        a.log.send(b"commit-c", b'{"tasks":3}')
        a.refresh()
        assert a.snapshot().tasks("c") == [] and "c" in a.snapshot().inconsistent
        # Garbage values are skipped, the reader keeps going.
        a.log.send_all([(b"connector-bad", b"{not json"), (b"connector-d", b'{"properties":{"x":"1"}}')])
        a.refresh()
        assert a.snapshot().connectors() == ["c", "d"]
    finally:
        a.stop()


def test_config_topic_with_two_partitions_is_refused(connect_broker: BrokerProcess, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": connect_broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1, config={"cleanup.policy": "compact"})])[topic].result(10)
    p, c, a = confs(connect_broker)
    with pytest.raises(ConnectException, match="exactly 1 partition"):
        KafkaConfigBackingStore(topic, p, c, a, replication_factor=1).start()


def test_non_compacted_topic_is_refused(connect_broker: BrokerProcess, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": connect_broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "delete"})])[topic].result(10)
    p, c, a = confs(connect_broker)
    with pytest.raises(ConnectException, match="compact"):
        KafkaStatusBackingStore(topic, p, c, a, partitions=1, replication_factor=1).start()


def test_status_store(connect_broker: BrokerProcess, topic: str, read_all: Any) -> None:
    p, c, a = confs(connect_broker)
    s1 = KafkaStatusBackingStore(topic, p, c, a, partitions=3, replication_factor=1)
    s1.start()
    try:
        s1.put(Status("conn-x", None, "RUNNING", "w1:8083", None, 3))
        s1.put(Status("conn-x", 0, "FAILED", "w1:8083", "Traceback...", 3))
        s1.put(Status("conn-x", 1, "RUNNING", "w2:8083", None, 3))
        s1.put_topic(TopicStatus("orders", "conn-x", 0, 1234))
        s2 = KafkaStatusBackingStore(topic, p, c, a, partitions=3, replication_factor=1)
        s2.start()
        try:
            assert s2.get("conn-x") == Status("conn-x", None, "RUNNING", "w1:8083", None, 3)
            assert [t.state for t in s2.get_all("conn-x")] == ["FAILED", "RUNNING"]
            task_status = s2.get_task("conn-x", 0)
            assert task_status is not None and task_status.trace == "Traceback..."
            assert s2.topics("conn-x") == ["orders"]
            s1.delete_connector("conn-x", 2)
            s1.delete_topics("conn-x")
            s2.refresh()
            assert s2.get("conn-x") is None and s2.get_all("conn-x") == [] and s2.topics("conn-x") == []
        finally:
            s2.stop()
    finally:
        s1.stop()
    raw = {k.decode() for _, k, _ in read_all(connect_broker, topic)}
    assert {"status-connector-conn-x", "status-task-conn-x-0", "status-topic-orders:connector-conn-x"} <= raw


@pytest.fixture
def offset_stores(connect_broker: BrokerProcess, topic: str) -> Iterator[tuple[KafkaOffsetBackingStore, KafkaOffsetBackingStore]]:
    p, c, a = confs(connect_broker)
    s1 = KafkaOffsetBackingStore(topic, p, c, a, partitions=5, replication_factor=1)
    s2 = KafkaOffsetBackingStore(topic, p, c, a, partitions=5, replication_factor=1)
    s1.start()
    s2.start()
    yield s1, s2
    s1.stop()
    s2.stop()


def test_offset_store_shared_between_workers(offset_stores: tuple[KafkaOffsetBackingStore, KafkaOffsetBackingStore],
                                             connect_broker: BrokerProcess, topic: str, read_all: Any) -> None:
    s1, s2 = offset_stores
    keys = [serialize_key("src", {"file": f"/f{i}"}) for i in range(20)]
    s1.set({k: serialize_offset({"position": i}) for i, k in enumerate(keys)})
    got = s2.get(keys)
    assert all(json.loads(got[k] or b"") == {"position": i} for i, k in enumerate(keys))
    s2.set({keys[0]: None})
    assert s1.get([keys[0]]) == {keys[0]: None}
    # Kafka Connect writes map keys in its own order: a lookup by our canonical key still finds them.
    prod = Producer({"bootstrap.servers": connect_broker.bootstrap})
    prod.produce(topic, key=b'["src", {"z": 1, "a": 2}]', value=b'{"o": 9}')
    prod.flush(10)
    assert s1.get([serialize_key("src", {"a": 2, "z": 1})]) == {serialize_key("src", {"a": 2, "z": 1}): b'{"o": 9}'}
    # Partitioned like Java's producer (murmur2), whichever way the store wrote them.
    for part, key, _ in read_all(connect_broker, topic):
        if key in keys:
            assert part == murmur2_partition(key, 5)


def test_unreachable_cluster_is_a_clear_error(topic: str) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    conf = {"bootstrap.servers": dead}
    with pytest.raises(ConnectException, match="cannot reach"):
        KafkaConfigBackingStore(topic, conf, conf, conf).start(timeout=2)
