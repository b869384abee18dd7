"""End to end: a real broker using the third-party test plugin's authorizer and quota manager.

The broker is started with ``authorizer.class.name=strom_test_plugin.DenyTopics`` and
``client.quota.callback.class=strom_test_plugin.ThrottleClient``; real clients (confluent-kafka
and a raw socket speaking Produce v3) observe TOPIC_AUTHORIZATION_FAILED, a throttle time in
the response, and the muted channel.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.records.builder import SimpleRecord, build_batch
from strom.core.testing import BrokerProcess

PLUGIN_CONFIG = {
    "authorizer.class.name": "strom_test_plugin.DenyTopics",
    "client.quota.callback.class": "strom_test_plugin.ThrottleClient",
    "strom_test_plugin.throttle.ms": "500",
}
TOPIC_AUTHORIZATION_FAILED = 29


@pytest.fixture
def plugin_broker(fresh_broker: BrokerProcess, test_plugin_installed: str) -> Iterator[BrokerProcess]:
    fresh_broker.config.update(PLUGIN_CONFIG)
    fresh_broker.start()
    yield fresh_broker
    fresh_broker.stop()


def create_topics(bootstrap: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(n, num_partitions=1, replication_factor=1) for n in names],
                                   operation_timeout=30).values():
        fut.result(timeout=30)


def produce_one(bootstrap: str, topic: str, **extra: object) -> KafkaError | None:
    """Produce one record and return the delivery error (None on success)."""
    outcome: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20000,
                         "enable.idempotence": False, **extra})
    producer.produce(topic, b"value", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(30)
    assert outcome, "no delivery report within 30 s"
    return outcome[0]


def test_authorizer_denies_write_on_denied_topics(plugin_broker: BrokerProcess) -> None:
    suffix = uuid.uuid4().hex[:8]
    denied, allowed = f"denied-{suffix}", f"ok-{suffix}"
    create_topics(plugin_broker.bootstrap, denied, allowed)
    err = produce_one(plugin_broker.bootstrap, denied)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    assert produce_one(plugin_broker.bootstrap, allowed) is None


def test_quota_manager_throttles_only_its_client(plugin_broker: BrokerProcess) -> None:
    topic = f"q-{uuid.uuid4().hex[:8]}"
    create_topics(plugin_broker.bootstrap, topic)
    events: list[int] = []
    producer = Producer({"bootstrap.servers": plugin_broker.bootstrap, "client.id": "throttle-me",
                         "enable.idempotence": False, "linger.ms": 0,
                         "throttle_cb": lambda ev: events.append(int(ev.throttle_time * 1000))})
    for i in range(3):
        producer.produce(topic, f"v{i}".encode())
        producer.flush(30)
    deadline = time.monotonic() + 10
    while not any(t > 0 for t in events) and time.monotonic() < deadline:
        producer.poll(0.1)
    assert any(t >= 400 for t in events), events

    other: list[int] = []
    unthrottled = Producer({"bootstrap.servers": plugin_broker.bootstrap, "client.id": "someone-else",
                            "enable.idempotence": False,
                            "throttle_cb": lambda ev: other.append(int(ev.throttle_time * 1000))})
    unthrottled.produce(topic, b"x")
    unthrottled.flush(30)
    unthrottled.poll(0.5)
    assert not any(t > 0 for t in other), other


# -- raw socket: throttle_time_ms in the response and the muted channel ---------------------------


def _request(api_key: int, version: int, correlation_id: int, client_id: str, body: bytes) -> bytes:
    cid = client_id.encode()
    header = struct.pack(">hhih", api_key, version, correlation_id, len(cid)) + cid
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _produce_v3_body(topic: str, records: bytes) -> bytes:
    name = topic.encode()
    return (struct.pack(">hhi", -1, 1, 30000)  # transactional_id null, acks=1, timeout
            + struct.pack(">i", 1) + struct.pack(">h", len(name)) + name
            + struct.pack(">i", 1) + struct.pack(">ii", 0, len(records)) + records)


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            assert chunk, "connection closed by the broker"
            buf += chunk
        return buf

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def _parse_produce_v3(frame: bytes) -> tuple[int, int, int]:
    """(correlation id, error code of the single partition, throttle_time_ms)."""
    corr, n_topics = struct.unpack_from(">ii", frame, 0)
    assert n_topics == 1
    (name_len,) = struct.unpack_from(">h", frame, 8)
    pos = 10 + name_len
    (n_parts,) = struct.unpack_from(">i", frame, pos)
    assert n_parts == 1
    _index, error_code, _base, _append_time = struct.unpack_from(">ihqq", frame, pos + 4)
    (throttle_ms,) = struct.unpack_from(">i", frame, pos + 4 + 22)
    return corr, error_code, throttle_ms


def _produce_raw(bootstrap: str, topic: str, client_id: str) -> tuple[int, int, float]:
    """Produce v3 then ApiVersions v0 on one connection, pipelined.

    Returns (error code, throttle_time_ms, seconds between the two responses): a muted channel
    reads the next request only after the throttle time.
    """
    host, port = bootstrap.rsplit(":", 1)
    batch = build_batch([SimpleRecord(b"k", b"v")])
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(_request(0, 3, 7, client_id, _produce_v3_body(topic, batch))
                     + _request(18, 0, 8, client_id, b""))
        corr, error_code, throttle_ms = _parse_produce_v3(_read_frame(sock))
        first = time.monotonic()
        assert corr == 7
        (corr2,) = struct.unpack_from(">i", _read_frame(sock), 0)
        gap = time.monotonic() - first
        assert corr2 == 8
    return error_code, throttle_ms, gap


def test_raw_produce_gets_throttle_time_and_muted_channel(plugin_broker: BrokerProcess) -> None:
    topic = f"raw-{uuid.uuid4().hex[:8]}"
    create_topics(plugin_broker.bootstrap, topic)
    error_code, throttle_ms, gap = _produce_raw(plugin_broker.bootstrap, topic, "throttle-me")
    assert (error_code, throttle_ms) == (0, 500)
    assert gap >= 0.45, f"channel answered the next request {gap:.3f}s after a 500 ms throttle"

    error_code, throttle_ms, _ = _produce_raw(plugin_broker.bootstrap, topic, "someone-else")
    assert (error_code, throttle_ms) == (0, 0)

    denied = f"denied-{uuid.uuid4().hex[:8]}"
    create_topics(plugin_broker.bootstrap, denied)
    error_code, _, _ = _produce_raw(plugin_broker.bootstrap, denied, "someone-else")
    assert error_code == TOPIC_AUTHORIZATION_FAILED


# -- KIP-848: a third-party server-side assignor chosen by the client ------------------------------


def test_client_selects_third_party_assignor_with_group_remote_assignor(
        fresh_broker: BrokerProcess, test_plugin_installed: str) -> None:
    """``group.consumer.assignors`` makes the plugin's assignor available on the broker; a librdkafka
    consumer asks for it with ``group.remote.assignor`` and gets its unmistakable assignment."""
    import threading

    from confluent_kafka import Consumer

    fresh_broker.config.update({
        "group.consumer.assignors": "uniform,range,strom_test_plugin.first-takes-all",
        "group.consumer.heartbeat.interval.ms": "300",
    })
    fresh_broker.start()
    try:
        topic = f"asg-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=1)])[topic].result(30)
        group = f"g-{uuid.uuid4().hex[:8]}"
        owned: dict[int, set[int]] = {0: set(), 1: set()}
        lock = threading.Lock()
        consumers = []
        for i in range(2):
            def on_assign(_c: Consumer, parts: list, i: int = i) -> None:
                with lock:
                    owned[i] |= {p.partition for p in parts}

            def on_revoke(_c: Consumer, parts: list, i: int = i) -> None:
                with lock:
                    owned[i] -= {p.partition for p in parts}

            c = Consumer({"bootstrap.servers": fresh_broker.bootstrap, "group.id": group,
                          "group.protocol": "consumer",
                          "group.remote.assignor": "strom_test_plugin.first-takes-all"})
            c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
            consumers.append(c)
        deadline = time.monotonic() + 30
        sizes: list[int] = []
        while time.monotonic() < deadline:
            for c in consumers:
                c.poll(0.1)
            with lock:
                sizes = sorted(len(s) for s in owned.values())
            if sizes == [0, 6]:
                break
        assert sizes == [0, 6], f"expected one member with all 6 partitions, got {owned}"
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert described.partition_assignor == "strom_test_plugin.first-takes-all"
        for c in consumers:
            c.close()
    finally:
        fresh_broker.stop()


# -- KIP-932: a third-party share-group assignor ----------------------------------------------------


def describe_share_group(bootstrap: str, group: str) -> tuple[str, list[list[int]]]:
    """(assignor name, each member's assigned partitions) from ShareGroupDescribe."""
    from diff_wire import WireClient
    from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
    from kio.schema.types import GroupId

    with WireClient(bootstrap) as wire:
        d = wire.request(ShareGroupDescribeRequest(group_ids=(GroupId(group),),
                                                   include_authorized_operations=False)).groups[0]
    assert d.error_code == 0, d
    return d.assignor_name, sorted(sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions)
                                   for m in d.members)


def test_share_group_uses_third_party_assignor(fresh_broker: BrokerProcess, test_plugin_installed: str) -> None:
    """``group.share.assignors`` puts the plugin's share assignor first: two members of a share
    group on a two-partition topic each get both partitions (Kafka's SimpleAssignor, the
    default, gives one each), and ShareGroupDescribe names the assignor."""
    from share_fetch_kit import join_share_group, member_id

    fresh_broker.config.update({"group.share.assignors": "strom_test_plugin.everyone-gets-all,simple",
                                "group.share.assignment.interval.ms": "0"})
    fresh_broker.start()
    try:
        topic, group = f"sasg-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)
        for m in (member_id(), member_id()):
            join_share_group(fresh_broker.bootstrap, group, m, [topic])
        assignor, assigned = describe_share_group(fresh_broker.bootstrap, group)
        assert assignor == "strom_test_plugin.everyone-gets-all"
        assert assigned == [[0, 1], [0, 1]]
    finally:
        fresh_broker.stop()
