"""Differential: client quotas on strom and Apache Kafka 4.3.1.

Kafka's own ``kafka-configs`` (``kafka.admin.ConfigCommand``) alters and describes quotas of
users, clients, users+clients and ips, default entities included, and prints the same on both
brokers, its refusals too (a fractional byte rate, a zero rate: ClientQuotaControlManager's
messages). DescribeClientQuotas over the wire answers the same entries for exact, default and
"any" filters, strict or not, and the same errors for bad filters; AlterClientQuotas the same
codes and messages for each refused entity.

The brokers are the session's shared ones: entity names are unique per run, and a default
entity (global) is set to a value no test reaches and removed at the end.
"""

from __future__ import annotations

import subprocess
import uuid
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from diff_wire import WireClient
from kafka_ref import KafkaRef, classpath, ensure_jars
from kio.schema.alter_client_quotas.v1 import request as alter_req
from kio.schema.create_partitions.v3 import request as parts_v3
from kio.schema.create_topics.v5 import request as create_v5
from kio.schema.create_topics.v7 import request as create_v7
from kio.schema.delete_topics.v5 import request as delete_v5
from kio.schema.describe_client_quotas.v1 import request as describe_req
from kio.schema.types import TopicName
from kio.static.primitive import f64, i8, i32, i32Timedelta
from ref_fixtures import HasBootstrap, skip_without_java

from strom.core.testing import wait_for

TIMEOUT = i32Timedelta.parse(timedelta(seconds=30))
HUGE = "1000000000000"  # a default entity's value no test comes near


def _start(bootstrap: str, args: tuple[str, ...]) -> subprocess.Popen[str]:
    cmd = ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath(ensure_jars()),
           "kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=180)
    # The error output ends with the cause (a stack trace's line numbers are the tool's own).
    causes = [line for line in err.splitlines() if "Exception:" in line or line.startswith("Error")]
    return proc.returncode, out.strip(), causes[-1].strip() if causes else ""


def kafka_configs(*bootstraps: str, args: tuple[str, ...]) -> list[tuple[int, str, str]]:
    """Kafka's kafka-configs.sh against each broker at once: (exit code, standard output, the
    cause it printed) of each."""
    skip_without_java()
    procs = [_start(b, args) for b in bootstraps]
    return [_result(p) for p in procs]


def same_on_both(strom: HasBootstrap, kafka: KafkaRef, step: tuple[str, ...]) -> tuple[int, str, str]:
    ours, theirs = kafka_configs(strom.bootstrap, kafka.bootstrap, args=step)
    # The entities of one describe come in the order of the answer's entries, which Kafka takes
    # from a hash map: compare the lines as a set, in strom's order.
    assert (ours[0], sorted(ours[1].splitlines()), ours[2]) == \
        (theirs[0], sorted(theirs[1].splitlines()), theirs[2]), f"kafka-configs {' '.join(step)}"
    return ours


@pytest.mark.slow  # ~30 s: a JVM per tool run
def test_kafka_configs_alter_and_describe(strom: HasBootstrap, kafka: KafkaRef) -> None:
    u = f"qu-{uuid.uuid4().hex[:6]}"
    c = f"qc-{uuid.uuid4().hex[:6]}"
    steps: list[tuple[str, ...]] = [
        ("--alter", "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048", "--entity-type", "users",
         "--entity-name", u),
        ("--alter", "--add-config", "request_percentage=50.5", "--entity-type", "clients", "--entity-name", c),
        ("--alter", "--add-config", "producer_byte_rate=100,controller_mutation_rate=2.5", "--entity-type", "users",
         "--entity-name", u, "--entity-type", "clients", "--entity-name", c),
        ("--alter", "--add-config", f"consumer_byte_rate={HUGE}", "--entity-type", "users", "--entity-name", u,
         "--entity-type", "clients", "--entity-default"),
        ("--alter", "--add-config", "connection_creation_rate=10", "--entity-type", "ips", "--entity-name", "10.9.8.7"),
        ("--alter", "--add-config", "producer_byte_rate=10.5", "--entity-type", "users", "--entity-name", u),
        ("--alter", "--add-config", "producer_byte_rate=0", "--entity-type", "users", "--entity-name", u),
        ("--describe", "--entity-type", "users", "--entity-name", u),
        ("--describe", "--entity-type", "users", "--entity-name", u, "--entity-type", "clients"),
        ("--describe", "--entity-type", "ips", "--entity-name", "10.9.8.7"),
        ("--alter", "--delete-config", "consumer_byte_rate", "--entity-type", "users", "--entity-name", u),
    ]
    for step in steps:
        same_on_both(strom, kafka, step)
    # What they print is what Kafka prints for these (not just the same failure twice).
    assert same_on_both(strom, kafka, ("--describe", "--entity-type", "users", "--entity-name", u))[1] == (
        f"Quota configs for user-principal '{u}' are producer_byte_rate=1024.0")


@pytest.mark.slow  # ~25 s
def test_kafka_configs_default_entities(strom: HasBootstrap, kafka: KafkaRef) -> None:
    steps: list[tuple[str, ...]] = [
        ("--alter", "--add-config", f"consumer_byte_rate={HUGE}", "--entity-type", "users", "--entity-default"),
        ("--alter", "--add-config", f"request_percentage={HUGE}", "--entity-type", "clients", "--entity-default"),
        ("--alter", "--add-config", f"producer_byte_rate={HUGE}", "--entity-type", "users", "--entity-default",
         "--entity-type", "clients", "--entity-default"),
        ("--describe", "--entity-type", "users", "--entity-default"),
        ("--describe", "--entity-type", "users", "--entity-default", "--entity-type", "clients"),
    ]
    cleanup: list[tuple[str, ...]] = [
        ("--alter", "--delete-config", "consumer_byte_rate", "--entity-type", "users", "--entity-default"),
        ("--alter", "--delete-config", "request_percentage", "--entity-type", "clients", "--entity-default"),
        ("--alter", "--delete-config", "producer_byte_rate", "--entity-type", "users", "--entity-default",
         "--entity-type", "clients", "--entity-default"),
    ]
    try:
        for step in steps:
            same_on_both(strom, kafka, step)
    finally:
        for step in cleanup:
            same_on_both(strom, kafka, step)


def _alter(client: WireClient, entity: tuple[tuple[str, str | None], ...], ops: tuple[tuple[str, float | None], ...],
           ) -> list[tuple[int, str | None]]:
    req = alter_req.AlterClientQuotasRequest(entries=(alter_req.EntryData(
        entity=tuple(alter_req.EntityData(entity_type=t, entity_name=n) for t, n in entity),
        ops=tuple(alter_req.OpData(key=k, value=f64(float(v or 0.0)), remove=v is None) for k, v in ops)),),
        validate_only=False)
    return [(int(e.error_code), e.error_message) for e in client.request(req).entries]


def _describe(client: WireClient, components: tuple[tuple[str, int, str | None], ...], strict: bool) -> Any:
    resp = client.request(describe_req.DescribeClientQuotasRequest(components=tuple(
        describe_req.ComponentData(entity_type=t, match_type=i8(m), match=n) for t, m, n in components),
        strict=strict))
    entries = None if resp.entries is None else sorted(
        (tuple(sorted((e.entity_type, e.entity_name or "<default>") for e in entry.entity)),
         tuple(sorted((v.key, v.value) for v in entry.values))) for entry in resp.entries)
    return int(resp.error_code), resp.error_message, entries


def test_wire_answers_match(strom: HasBootstrap, kafka: KafkaRef) -> None:
    u = f"wu-{uuid.uuid4().hex[:6]}"
    alters: list[tuple[tuple[tuple[str, str | None], ...], tuple[tuple[str, float | None], ...]]] = [
        (((("user", u),)), (("producer_byte_rate", 1000.0), ("consumer_byte_rate", 2000.0))),
        ((("user", u), ("client-id", "a")), (("request_percentage", 10.0),)),
        ((("user", u), ("client-id", None)), (("controller_mutation_rate", 5.0),)),
        ((("user", u),), (("producer_byte_rate", 1.5),)),
        ((("user", u),), (("producer_byte_rate", 5.0), ("producer_byte_rate", 6.0))),
        ((("user", u),), (("bogus", 5.0),)),
        ((("user", u),), (("producer_byte_rate", -1.0),)),
        ((("user", u), ("ip", "1.2.3.4")), (("connection_creation_rate", 5.0),)),
        ((("ip", "1.2.3.4"),), (("connection_creation_rate", 2.5),)),
        ((("ip", "1.2.3.4"),), (("producer_byte_rate", 5.0),)),
        ((("group", "g"),), (("producer_byte_rate", 5.0),)),
        ((("user", ""),), (("producer_byte_rate", 5.0),)),
        ((), (("producer_byte_rate", 5.0),)),
        ((("user", u),), (("request_percentage", None),)),
    ]
    filters: list[tuple[tuple[tuple[str, int, str | None], ...], bool]] = [
        ((("user", 0, u),), False), ((("user", 0, u),), True),
        ((("user", 0, u), ("client-id", 2, None)), False), ((("user", 0, u), ("client-id", 2, None)), True),
        ((("user", 0, u), ("client-id", 1, None)), True), ((("user", 0, u), ("client-id", 0, "a")), True),
        ((("user", 0, None),), False), ((("user", 1, "x"),), False), ((("user", 2, "x"),), False),
        ((("user", 0, u), ("user", 2, None)), False), ((("ip", 2, None), ("user", 0, u)), False),
        ((("group", 2, None),), False), ((("", 2, None),), False), ((("user", 7, None),), False),
    ]
    with WireClient(strom.bootstrap) as ours, WireClient(kafka.bootstrap) as theirs:
        for entity, ops in alters:
            assert _alter(ours, entity, ops) == _alter(theirs, entity, ops), (entity, ops)
        for components, strict in filters:
            assert _describe(ours, components, strict) == _describe(theirs, components, strict), (components, strict)


def _create(bootstrap: str, client_id: str, version: Any, name: str,
            partitions: int) -> tuple[int, str | None, float, str]:
    """CreateTopics on a connection of its own (a throttled one is muted): (code, message,
    throttle s, name)."""
    with WireClient(bootstrap, client_id=client_id) as client:
        resp = client.request(version.CreateTopicsRequest(topics=(version.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1, assignments=(), configs=()),),
            timeout=timedelta(seconds=30), validate_only=False))
    [topic] = resp.topics
    return int(topic.error_code), topic.error_message, resp.throttle_time.total_seconds(), name


def test_controller_mutation_quota_matches(strom: HasBootstrap, kafka: KafkaRef) -> None:
    """KIP-599 on both: a client at 1 partition/s may take the bucket (11) below zero once; then
    CreateTopics v7 is refused with THROTTLING_QUOTA_EXCEEDED and the refill time, v5 is let
    through and throttled."""
    answers = []
    for broker in (strom, kafka):
        client = f"mut-{uuid.uuid4().hex[:6]}"
        with WireClient(broker.bootstrap) as admin:
            assert _alter(admin, (("client-id", client),), (("controller_mutation_rate", 1.0),)) == [(0, None)]
        first = _create(broker.bootstrap, client, create_v7, f"mq-{uuid.uuid4().hex[:8]}", 15)
        refused = _create(broker.bootstrap, client, create_v7, f"mq-{uuid.uuid4().hex[:8]}", 1)
        old = _create(broker.bootstrap, client, create_v5, f"mq-{uuid.uuid4().hex[:8]}", 1)
        # DeleteTopics v5 and CreatePartitions v3 are strict too.
        with WireClient(broker.bootstrap, client_id=client) as c:
            deleted = c.request(delete_v5.DeleteTopicsRequest(topic_names=(TopicName(first[3]),), timeout=TIMEOUT))
        with WireClient(broker.bootstrap, client_id=client) as c:
            grown = c.request(parts_v3.CreatePartitionsRequest(topics=(parts_v3.CreatePartitionsTopic(
                name=TopicName(first[3]), count=i32(20), assignments=None),), timeout=TIMEOUT, validate_only=False))
        answers.append((first[:2], refused[:2], old[:2],
                        [(int(r.error_code), r.error_message) for r in deleted.responses],
                        [(int(r.error_code), r.error_message) for r in grown.results]))
        assert 1.0 < refused[2] <= 4.0 and 1.0 < old[2] <= 5.0, (broker, refused, old)
    assert answers[0] == answers[1]
    assert answers[0][1][0] == 89


def _starved_consumer(bootstrap: str) -> tuple[int, int]:
    """A consumer at consumer_byte_rate=10 on 10 KB of records: (throttle reports, records) once
    it has been throttled twice."""
    suffix = uuid.uuid4().hex[:8]
    topic, client = f"fq-{suffix}", f"starved-{suffix}"
    producer = Producer({"bootstrap.servers": bootstrap})
    for _ in range(5):
        producer.produce(topic, b"y" * 2_000)
    assert producer.flush(30) == 0
    with WireClient(bootstrap) as admin:
        assert _alter(admin, (("client-id", client),), (("consumer_byte_rate", 10.0),)) == [(0, None)]
    throttles: list[float] = []
    records = 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client, "group.id": client,
                         "auto.offset.reset": "earliest", "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    consumer.subscribe([topic])
    try:
        def throttled() -> bool:
            nonlocal records
            msg = consumer.poll(0.2)
            records += msg is not None and msg.error() is None
            return len(throttles) >= 2
        wait_for(throttled, timeout=60, what="two throttled fetches")
    finally:
        consumer.close()
    return min(len(throttles), 2), records


def test_throttled_fetch_is_empty_on_both(strom: HasBootstrap, kafka: KafkaRef) -> None:
    assert _starved_consumer(strom.bootstrap) == _starved_consumer(kafka.bootstrap) == (2, 0)
