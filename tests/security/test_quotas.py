"""Client quotas on strom's broker (issue 23 item 4): AlterClientQuotas / DescribeClientQuotas
over the wire, the quotas surviving a restart, KIP-599's controller mutation quota, and
throttled responses (throttle_time_ms with the channel muted) once a byte-rate quota is set.

The rate test proper (a producer and a consumer held to their byte rate) is
tests/security/test_quotas_rate.py (slow).
"""

from __future__ import annotations

import datetime
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acl_broker import AclBroker
from confluent_kafka import Consumer, Producer
from kafka_wire import connect, decode_response, encode_request, read_frame, wait_closed
from kio.schema.alter_client_quotas.v1 import request as alter_req
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_partitions.v3 import request as create_parts_req
from kio.schema.create_topics.v5 import request as create_v5
from kio.schema.create_topics.v7 import request as create_v7
from kio.schema.delete_topics.v5 import request as delete_v5
from kio.schema.describe_client_quotas.v1 import request as describe_req
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import f64, i8, i16, i32, i32Timedelta

from strom.core.testing import BrokerProcess, wait_for

pytestmark = pytest.mark.broker


def call(bootstrap: str, entity: Any, client_id: str = "strom-tests") -> Any:
    """One request on a connection of its own (a throttled answer mutes its connection)."""
    with connect(bootstrap) as sock:
        return _call(sock, entity, client_id)


def _call(sock: socket.socket, entity: Any, client_id: str) -> Any:
    sock.sendall(encode_request(entity, 7, client_id))
    payload = read_frame(sock)
    assert payload is not None, f"connection closed instead of answering {type(entity).__name__}"
    _, body = decode_response(int(entity.__api_key__), int(entity.__version__), payload)
    return body


def alter(bootstrap: str, entity: dict[str, str | None], ops: dict[str, float | None],
          validate_only: bool = False) -> tuple[int, str | None]:
    """Set (a value) or remove (None) quotas of one entity; its (error code, message)."""
    req = alter_req.AlterClientQuotasRequest(entries=(alter_req.EntryData(
        entity=tuple(alter_req.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()),
        ops=tuple(alter_req.OpData(key=k, value=f64(v or 0.0), remove=v is None) for k, v in ops.items())),),
        validate_only=validate_only)
    [entry] = call(bootstrap, req).entries
    return int(entry.error_code), entry.error_message


def describe(bootstrap: str, components: list[tuple[str, int, str | None]], strict: bool = False) -> Any:
    return call(bootstrap, describe_req.DescribeClientQuotasRequest(components=tuple(
        describe_req.ComponentData(entity_type=t, match_type=i8(m), match=name) for t, m, name in components),
        strict=strict))


def described(response: Any) -> dict[frozenset[tuple[str, str | None]], dict[str, float]]:
    assert response.error_code == 0, response.error_message
    return {frozenset((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries}


EXACT, DEFAULT, ANY = 0, 1, 2
TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=30))


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("quotas")) as proc:
        yield proc


def test_alter_and_describe_with_filters(quota_broker: BrokerProcess) -> None:
    bs = quota_broker.bootstrap
    u = f"u-{uuid.uuid4().hex[:6]}"
    assert alter(bs, {"user": u}, {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}) == (0, None)
    assert alter(bs, {"user": u, "client-id": "c1"}, {"request_percentage": 12.5}) == (0, None)
    assert alter(bs, {"user": u, "client-id": None}, {"controller_mutation_rate": 3.0}) == (0, None)
    assert alter(bs, {"client-id": None}, {"producer_byte_rate": 4096.0}) == (0, None)
    assert alter(bs, {"ip": "127.0.0.1"}, {"connection_creation_rate": 100.0}) == (0, None)

    # Non-strict: every entity naming this user, whatever else it names.
    got = described(describe(bs, [("user", EXACT, u)]))
    assert got == {frozenset({("user", u)}): {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
                   frozenset({("user", u), ("client-id", "c1")}): {"request_percentage": 12.5},
                   frozenset({("user", u), ("client-id", None)}): {"controller_mutation_rate": 3.0}}
    # Strict: only entities made of exactly the filter's types.
    assert list(described(describe(bs, [("user", EXACT, u)], strict=True))) == [frozenset({("user", u)})]
    assert list(described(describe(bs, [("user", EXACT, u), ("client-id", DEFAULT, None)], strict=True))) == [
        frozenset({("user", u), ("client-id", None)})]
    assert list(described(describe(bs, [("client-id", DEFAULT, None)], strict=True))) == [
        frozenset({("client-id", None)})]
    # "Any specified name" is any entity with that type, the default included (Kafka's containsKey).
    specified = described(describe(bs, [("user", EXACT, u), ("client-id", ANY, None)]))
    assert set(specified) == {frozenset({("user", u), ("client-id", "c1")}), frozenset({("user", u), ("client-id", None)})}
    assert described(describe(bs, [("ip", ANY, None)])) == {
        frozenset({("ip", "127.0.0.1")}): {"connection_creation_rate": 100.0}}

    # Removing the last key removes the entity.
    assert alter(bs, {"user": u, "client-id": "c1"}, {"request_percentage": None}) == (0, None)
    assert frozenset({("user", u), ("client-id", "c1")}) not in described(describe(bs, [("user", EXACT, u)]))
    # validate_only checks and writes nothing.
    assert alter(bs, {"user": u}, {"producer_byte_rate": 1.0}, validate_only=True) == (0, None)
    assert described(describe(bs, [("user", EXACT, u)], strict=True))[frozenset({("user", u)})][
        "producer_byte_rate"] == 1024.0


@pytest.mark.parametrize(("entity", "ops", "message"), [
    ({"user": "x"}, {"producer_byte_rate": 10.5}, "producer_byte_rate cannot be a fractional value."),
    ({"user": "x"}, {"producer_byte_rate": 0.0}, "Quota producer_byte_rate must be greater than 0"),
    ({"user": "x"}, {"connection_creation_rate": 5.0}, "Invalid configuration key connection_creation_rate"),
    ({"ip": "127.0.0.1"}, {"producer_byte_rate": 5.0}, "Invalid configuration key producer_byte_rate"),
    ({"ip": "1.2.3.4", "user": "x"}, {"connection_creation_rate": 5.0},
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ({"group": "g"}, {"producer_byte_rate": 5.0}, "Unhandled client quota entity type: group"),
    ({"user": ""}, {"producer_byte_rate": 5.0}, "Empty user not supported"),
    ({}, {"producer_byte_rate": 5.0}, "Invalid empty client quota entity"),
])
def test_alter_refusals_name_the_problem(quota_broker: BrokerProcess, entity: dict[str, str | None],
                                         ops: dict[str, float | None], message: str) -> None:
    assert alter(quota_broker.bootstrap, entity, ops) == (int(ErrorCode.invalid_request), message)


def test_describe_refusals(quota_broker: BrokerProcess) -> None:
    bs = quota_broker.bootstrap
    bad = describe(bs, [("ip", ANY, None), ("user", ANY, None)])
    assert (bad.error_code, bad.entries) == (ErrorCode.invalid_request, None)
    assert bad.error_message == ("Invalid entity filter component combination. IP filter component should not be "
                                 "used with user or clientId filter component.")
    exact_null = describe(bs, [("user", EXACT, None)])
    assert exact_null.error_message == "Request specified MATCH_TYPE_EXACT, but set match string to null."
    unknown = describe(bs, [("group", ANY, None)])
    assert (unknown.error_code, unknown.error_message) == (ErrorCode.unsupported_version, "Unsupported entity type group")


def test_quotas_survive_a_restart_and_still_throttle(fresh_broker: BrokerProcess) -> None:
    fresh_broker.start()
    bs = fresh_broker.bootstrap
    assert alter(bs, {"client-id": "slow-producer"}, {"producer_byte_rate": 1024.0}) == (0, None)
    assert alter(bs, {"user": None}, {"consumer_byte_rate": 5000.0}) == (0, None)
    fresh_broker.restart()
    bs = fresh_broker.bootstrap
    assert described(describe(bs, [])) == {frozenset({("client-id", "slow-producer")}): {"producer_byte_rate": 1024.0},
                                           frozenset({("user", None)}): {"consumer_byte_rate": 5000.0}}
    # 30 KB at 1 KB/s in one request: past the windowed rate's allowance (11 windows' worth), so the
    # broker answers with a throttle time, which librdkafka reports through throttle_cb.
    throttles: list[int] = []
    producer = Producer({"bootstrap.servers": bs, "client.id": "slow-producer", "linger.ms": 100,
                         "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000))})
    topic = f"q-{uuid.uuid4().hex[:8]}"
    for _ in range(3):
        producer.produce(topic, b"x" * 10_000)
    assert producer.flush(60) == 0
    wait_for(lambda: (producer.poll(0.1), throttles)[1], timeout=30, what="a throttle reported to the producer")
    assert max(throttles) > 1000


def _create_topics(bs: str, version: Any, names: list[str], partitions: int, client_id: str) -> Any:
    topics = tuple(version.CreatableTopic(name=TopicName(n), num_partitions=i32(partitions), replication_factor=i16(1),
                                          assignments=(), configs=()) for n in names)
    return call(bs, version.CreateTopicsRequest(topics=topics, timeout=TIMEOUT, validate_only=False), client_id)


def test_controller_mutation_quota(quota_broker: BrokerProcess) -> None:
    bs = quota_broker.bootstrap
    client = f"mutator-{uuid.uuid4().hex[:6]}"
    # 1 partition a second: Kafka's token bucket holds 11 s (quota.window.num x size) of it.
    assert alter(bs, {"client-id": client}, {"controller_mutation_rate": 1.0}) == (0, None)
    first = f"m-{uuid.uuid4().hex[:8]}"
    # Within the burst while the bucket is positive: created (and the bucket goes below zero).
    ok = _create_topics(bs, create_v7, [first], 20, client)
    assert [t.error_code for t in ok.topics] == [ErrorCode.none]
    # Strict (v6+): refused with THROTTLING_QUOTA_EXCEEDED and the time until the bucket refills.
    late = f"m-{uuid.uuid4().hex[:8]}"
    refused = _create_topics(bs, create_v7, [late], 1, client)
    assert [(t.error_code, t.error_message) for t in refused.topics] == [
        (ErrorCode.throttling_quota_exceeded, None)]  # no message, as Kafka 4.3.1
    assert 5000 < refused.throttle_time.total_seconds() * 1000 <= 11000
    # DeleteTopics v5 and CreatePartitions v3 are strict too.
    deleted = call(bs, delete_v5.DeleteTopicsRequest(topic_names=(TopicName(first),), timeout=TIMEOUT), client)
    assert [r.error_code for r in deleted.responses] == [ErrorCode.throttling_quota_exceeded]
    grown = call(bs, create_parts_req.CreatePartitionsRequest(topics=(create_parts_req.CreatePartitionsTopic(
        name=TopicName(first), count=i32(25), assignments=None),), timeout=TIMEOUT, validate_only=False), client)
    assert [r.error_code for r in grown.results] == [ErrorCode.throttling_quota_exceeded]
    # An older client (v5) cannot understand the error: created, and throttled instead.
    permissive = _create_topics(bs, create_v5, [late], 1, client)
    assert [t.error_code for t in permissive.topics] == [ErrorCode.none]
    assert permissive.throttle_time.total_seconds() > 5
    # Another client is not limited.
    other = _create_topics(bs, create_v7, [f"m-{uuid.uuid4().hex[:8]}"], 30, "someone-else")
    assert [t.error_code for t in other.topics] == [ErrorCode.none]


def test_kafka_default_is_on_and_unlimited_is_selectable(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", config={"client.quota.callback.class": "unlimited"}) as proc:
        assert alter(proc.bootstrap, {"client-id": None}, {"producer_byte_rate": 1.0}) == (0, None)
        throttles: list[float] = []
        producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 5,
                             "throttle_cb": lambda event: throttles.append(event.throttle_time)})
        for _ in range(10):
            producer.produce(f"u-{uuid.uuid4().hex[:8]}", b"x" * 10_000)
        assert producer.flush(60) == 0
        producer.poll(0.5)
        assert throttles == []  # stored, but the unlimited plugin never throttles


def test_connection_creation_rate_per_ip(tmp_path: Path) -> None:
    """Kafka's ConnectionQuotas: past the IP's connection_creation_rate a new connection is
    accepted but never served, and closed once the rate is back under the quota; the other
    connections are served meanwhile."""
    config = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
    with BrokerProcess(tmp_path / "data", config=config) as proc:
        kept = connect(proc.bootstrap)  # opened before the quota: served throughout
        assert alter(proc.bootstrap, {"ip": "127.0.0.1"}, {"connection_creation_rate": 2.0}) == (0, None)
        versions = ApiVersionsRequest(client_software_name="strom-tests", client_software_version="1")
        served, held = 0, []
        for _ in range(8):
            sock = connect(proc.bootstrap)
            sock.sendall(encode_request(versions, 1))
            sock.settimeout(1.0)
            try:
                answered = read_frame(sock) is not None
            except TimeoutError:
                answered = False
            if answered:
                served += 1
                sock.close()
            else:
                held.append(sock)
        try:
            assert served >= 1 and held, f"{served} served, {len(held)} held"
            # The held ones are closed by the broker (after the throttle time) without an answer.
            assert all(wait_closed(sock, timeout=15) for sock in held)
            assert _call(kept, versions, "kept").error_code == 0
        finally:
            for sock in [kept, *held]:
                sock.close()
        assert proc.wait_for_log("connection_creation_rate", timeout=5)


def _throttled(config: dict[str, Any], topic: str) -> list[float]:
    """Produce 30 KB in one request; the throttle times the broker reported."""
    throttles: list[float] = []
    producer = Producer({**config, "linger.ms": 100, "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    for _ in range(3):
        producer.produce(topic, b"x" * 10_000)
    assert producer.flush(60) == 0
    producer.poll(0.2)
    return throttles


def test_user_quota_follows_the_sasl_principal(tmp_path: Path) -> None:
    """A /users/admin quota applies to the SASL/PLAIN principal User:admin, not to the same
    client id as User:ANONYMOUS on the PLAINTEXT listener."""
    with AclBroker(tmp_path / "data") as cluster:
        assert alter(cluster.plain, {"user": "admin"}, {"producer_byte_rate": 1024.0}) == (0, None)
        topic = f"q-{uuid.uuid4().hex[:8]}"
        assert _throttled({"bootstrap.servers": cluster.plain, "client.id": "same"}, topic) == []
        assert _throttled(cluster.client("admin", **{"client.id": "same"}), topic)


def test_a_throttled_fetch_is_answered_empty(quota_broker: BrokerProcess) -> None:
    """Kafka's handleFetchRequest: over consumer_byte_rate the fetch carries the throttle time and
    no records (its bytes are taken back off the quota), so a consumer whose quota is far below
    what one fetch returns gets throttle reports and nothing else."""
    bs = quota_broker.bootstrap
    topic, client = f"f-{uuid.uuid4().hex[:8]}", f"starved-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": bs})
    for _ in range(5):
        producer.produce(topic, b"y" * 2_000)
    assert producer.flush(30) == 0
    assert alter(bs, {"client-id": client}, {"consumer_byte_rate": 10.0}) == (0, None)
    throttles: list[float] = []
    received: list[bytes] = []
    consumer = Consumer({"bootstrap.servers": bs, "client.id": client, "group.id": client,
                         "auto.offset.reset": "earliest", "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    consumer.subscribe([topic])
    try:
        def throttled() -> bool:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                received.append(msg.value() or b"")
            return len(throttles) >= 2
        wait_for(throttled, timeout=60, what="two throttled fetches")
    finally:
        consumer.close()
    assert received == []
    # Another client reads the same records at once.
    other = Consumer({"bootstrap.servers": bs, "group.id": f"other-{client}", "auto.offset.reset": "earliest"})
    other.subscribe([topic])
    try:
        msg = wait_for(lambda: other.poll(0.5), timeout=30, what="a record for an unthrottled client")
        assert msg.error() is None and msg.value() == b"y" * 2_000
    finally:
        other.close()
