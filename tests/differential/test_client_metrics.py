"""Differential: KIP-714 client metrics on strom and Kafka 4.3.1.

CLIENT_METRICS config resources (type 16) are validated and described as Kafka does, Kafka's
``kafka-client-metrics.sh`` prints the same against both, ListConfigResources (74, KIP-1142)
lists the same resources, GetTelemetrySubscriptions / PushTelemetry (71 / 72) answer the same
sequence of requests with the same codes, and librdkafka (confluent-kafka 2.16), which pushes
metrics when the broker advertises the two APIs, pushes them to strom successfully.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from diff_wire import WireClient, kio_schema
from diff_wire import incremental_alter_configs as alter
from kafka_ref import KafkaRef
from ref_fixtures import HasBootstrap, kafka_tool_output

from strom.core.testing import wait_for

CLIENT_METRICS, GROUP = 16, 32
SET, APPEND = 0, 2


def describe(bootstrap: str, name: str) -> tuple[int, str | None, dict[str, tuple[Any, ...]]]:
    m = kio_schema("describe_configs", 4)
    req = m.DescribeConfigsRequest(resources=(m.DescribeConfigsResource(
        resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=None),), include_synonyms=True,
        include_documentation=False)
    with WireClient(bootstrap) as c:
        res = c.request(req).results[0]
    return int(res.error_code), res.error_message or None, {
        c.name: (c.value, int(c.config_source), c.read_only, c.is_sensitive, int(c.config_type),
                 tuple((s.name, s.value, int(s.source)) for s in c.synonyms)) for c in res.configs}


def list_resources(bootstrap: str, types: list[int] | None) -> tuple[int, list[tuple[str, int]]]:
    """ListConfigResources v1 (``types``) or v0 (None: the client-metrics names only)."""
    m = kio_schema("list_config_resources", 0 if types is None else 1)
    req = m.ListConfigResourcesRequest() if types is None else m.ListConfigResourcesRequest(resource_types=tuple(types))
    with WireClient(bootstrap) as c:
        r = c.request(req)
    return int(r.error_code), sorted((x.resource_name, int(getattr(x, "resource_type", CLIENT_METRICS)))
                                     for x in r.config_resources)


def alter_cases(run: str) -> list[tuple[str, list[tuple[str, int, str | None]]]]:
    return [
        (f"{run}-a", [("metrics", SET, "org.apache.kafka.producer."), ("interval.ms", SET, "1000"),
                      ("match", SET, "client_id=abc.*")]),
        (f"{run}-b", [("interval.ms", SET, "10")]),
        (f"{run}-b", [("interval.ms", SET, "3600001")]),
        (f"{run}-b", [("match", SET, "bad")]),
        (f"{run}-b", [("match", SET, "foo=bar")]),
        (f"{run}-b", [("match", SET, "client_id=[")]),
        (f"{run}-b", [("bogus", SET, "1")]),
        (f"{run}-b", [("metrics", APPEND, "a.b")]),
        ("", [("metrics", SET, "x")]),
        (f"{run}-c", [("metrics", SET, "*")]),
    ]


def test_subscriptions_are_checked_described_and_listed_as_kafka(strom: HasBootstrap, kafka: KafkaRef) -> None:
    run = f"cm-{uuid.uuid4().hex[:6]}"
    try:
        _check_subscriptions(run, strom, kafka)
    finally:  # the session's brokers serve other tests' clients: no subscription left behind
        for b in (kafka, strom):
            for name in (f"{run}-a", f"{run}-c"):
                alter(b.bootstrap, CLIENT_METRICS, name, [(k, 1, None) for k in ("metrics", "interval.ms", "match")])


def _check_subscriptions(run: str, strom: HasBootstrap, kafka: KafkaRef) -> None:
    for name, ops in alter_cases(run):
        theirs, ours = alter(kafka.bootstrap, CLIENT_METRICS, name, ops), alter(strom.bootstrap, CLIENT_METRICS, name, ops)
        assert ours == theirs, f"{name} {ops}: strom {ours}, Kafka {theirs}"
    for name in (f"{run}-a", f"{run}-c", ""):
        def applied(n: str = name) -> tuple[int, str | None, dict[str, tuple[Any, ...]]] | None:
            d = describe(kafka.bootstrap, n)  # Kafka's broker applies a change a moment later
            return d if n == "" or d[2].get("metrics", (None, 5))[1] == 7 else None

        theirs = wait_for(applied, timeout=30, what=f"Kafka to describe {name!r}")
        assert describe(strom.bootstrap, name) == theirs
    assert alter(strom.bootstrap, GROUP, f"{run}-g", [("consumer.heartbeat.interval.ms", SET, "6000")]) == (0, None)
    assert alter(kafka.bootstrap, GROUP, f"{run}-g", [("consumer.heartbeat.interval.ms", SET, "6000")]) == (0, None)
    for types in ([CLIENT_METRICS], [GROUP], [4, 8], [99], None):
        def listed(t: list[int] | None = types) -> tuple[int, list[tuple[str, int]]] | None:
            # Only this test's resources (and the brokers'): other tests on the same brokers
            # leave groups and subscriptions of their own (share-group tests set GROUP configs).
            def mine(answer: tuple[int, list[tuple[str, int]]]) -> tuple[int, list[tuple[str, int]]]:
                return answer[0], [(n, rt) for n, rt in answer[1] if n.startswith(run) or rt in (4, 8)]

            theirs = mine(list_resources(kafka.bootstrap, t))
            return theirs if theirs == mine(list_resources(strom.bootstrap, t)) else None

        wait_for(listed, timeout=30, what=f"the same ListConfigResources {types} on both")
    code, everything = list_resources(strom.bootstrap, [])
    assert code == 0 and {(f"{run}-a", 16), (f"{run}-g", 32), ("1", 4), ("1", 8)} <= set(everything)


def client_metrics_tool(bootstrap: str, *args: str) -> str:
    """Kafka's kafka-client-metrics.sh (org.apache.kafka.tools.ClientMetricsCommand)."""
    return kafka_tool_output("org.apache.kafka.tools.ClientMetricsCommand", "--bootstrap-server", bootstrap, *args)


def test_kafka_client_metrics_tool(strom: HasBootstrap, kafka: KafkaRef) -> None:
    """``kafka-client-metrics.sh --alter / --describe / --delete`` print the same on both (it
    failed on strom: no CLIENT_METRICS resource, no ListConfigResources)."""
    name = f"cmt-{uuid.uuid4().hex[:6]}"
    steps = [("--alter", "--name", name, "--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.",
              "--interval", "1000", "--match", "client_id=abc.*"),
             ("--describe", "--name", name),
             ("--delete", "--name", name)]
    printed = []
    for step in steps:
        ours = client_metrics_tool(strom.bootstrap, *step)
        theirs = client_metrics_tool(kafka.bootstrap, *step)
        deadline = time.monotonic() + 60
        while "--describe" in step and theirs != ours and time.monotonic() < deadline:
            time.sleep(0.5)  # Kafka's broker applies the change a moment after it answers
            theirs = client_metrics_tool(kafka.bootstrap, *step)
        assert ours == theirs
        printed.append(ours)
    assert printed[1] == (f"Client metrics configs for {name} are:\n  interval.ms=1000\n  match=client_id=abc.*\n"
                          "  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer.\n")


def telemetry_conversation(bootstrap: str, client_id: str) -> list[tuple[Any, ...]]:
    """Get (new instance), Get again at once, pushes with a wrong then the right subscription id,
    a terminating push twice, a push from an unknown instance: what the broker answers."""
    g, p = kio_schema("get_telemetry_subscriptions", 0), kio_schema("push_telemetry", 0)

    def push(c: WireClient, instance: uuid.UUID | None, sub: int, terminating: bool) -> int:
        r = c.request(p.PushTelemetryRequest(client_instance_id=instance, subscription_id=sub, terminating=terminating,
                                             compression_type=0, metrics=b"\x0a\x00"))
        return int(r.error_code)

    out: list[tuple[Any, ...]] = []
    with WireClient(bootstrap, client_id=client_id) as c:
        r = c.request(g.GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)))
        instance, sub = r.client_instance_id, int(r.subscription_id)
        out.append(("get", int(r.error_code), instance is not None and instance.int != 0, tuple(r.accepted_compression_types),
                    r.push_interval.total_seconds(), int(r.telemetry_max_bytes), r.delta_temporality,
                    tuple(r.requested_metrics)))
        again = c.request(g.GetTelemetrySubscriptionsRequest(client_instance_id=instance))
        out.append(("again", int(again.error_code), again.client_instance_id))
        out.append(("wrong id", push(c, instance, sub + 1, False)))
        out.append(("too soon", push(c, instance, sub, False)))
        out.append(("terminating", push(c, instance, sub, True)))
        out.append(("terminating again", push(c, instance, sub, True)))
        out.append(("unknown instance", push(c, uuid.uuid4(), 1, False)))
    return out


def test_telemetry_requests_answer_as_kafka(strom: HasBootstrap, kafka: KafkaRef) -> None:
    """With a subscription for one client id (every metric, 500 ms), the same answers on both."""
    client_id = f"tel-{uuid.uuid4().hex[:6]}"
    name = f"{client_id}-all"
    ops: list[tuple[str, int, str | None]] = [("metrics", SET, "*"), ("interval.ms", SET, "500"),
                                              ("match", SET, f"client_id={client_id}")]
    for b in (kafka, strom):
        assert alter(b.bootstrap, CLIENT_METRICS, name, ops) == (0, None)
    try:
        def served() -> list[tuple[Any, ...]] | None:
            conversation = telemetry_conversation(kafka.bootstrap, client_id)
            return conversation if conversation[0][-1] == ("*",) else None

        theirs = wait_for(served, timeout=30, what="Kafka to serve the subscription")
        ours = telemetry_conversation(strom.bootstrap, client_id)
        assert ours == theirs
        assert ours[0] == ("get", 0, True, (4, 3, 1, 2), 0.5, 1048576, True, ("*",))
        # A client no subscription matches asks for nothing.
        other = telemetry_conversation(strom.bootstrap, "nobody-subscribed")[0]
        assert other == ("get", 0, True, (4, 3, 1, 2), 300.0, 1048576, True, ())
    finally:
        for b in (kafka, strom):
            alter(b.bootstrap, CLIENT_METRICS, name, [(k, 1, None) for k, _, _ in ops])


def test_librdkafka_pushes_metrics_to_strom(strom: HasBootstrap) -> None:
    """confluent-kafka 2.16 asks strom for its subscription and pushes (zstd-compressed
    OpenTelemetry) metrics at the subscription's interval; strom accepts every push."""
    client_id = f"rdk-{uuid.uuid4().hex[:6]}"
    name = f"{client_id}-sub"
    assert alter(strom.bootstrap, CLIENT_METRICS, name, [("metrics", SET, "org.apache.kafka."),
                                                         ("interval.ms", SET, "500"),
                                                         ("match", SET, f"client_id={client_id}")]) == (0, None)
    topic = f"{client_id}-t"
    admin = AdminClient({"bootstrap.servers": strom.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger(f"rdkafka.{client_id}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(Collect())
    producer = Producer({"bootstrap.servers": strom.bootstrap, "client.id": client_id, "debug": "telemetry",
                         "enable.metrics.push": True}, logger=logger)
    try:
        def pushed() -> int:
            producer.produce(topic, b"x")
            producer.poll(0.2)
            return sum("PushTelemetryRequest succeeded" in line for line in lines)

        wait_for(lambda: pushed() >= 2, timeout=30, what="two accepted pushes")
        assert any("Parsing: push interval 500" in line for line in lines)
        assert not [line for line in lines if "PushTelemetryRequest failed" in line]
        producer.flush(10)
    finally:
        alter(strom.bootstrap, CLIENT_METRICS, name, [("metrics", 1, None), ("interval.ms", 1, None),
                                                      ("match", 1, None)])
