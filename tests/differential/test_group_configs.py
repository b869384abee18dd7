"""Differential: the GROUP config resource (type 32, KIP-848 group configs) on strom and Kafka.

IncrementalAlterConfigs / AlterConfigs on a group are validated as Kafka 4.3.1 validates them
(names, values, the broker's group.consumer.min/max bounds: same code and message), describe as
Kafka's (GROUP_CONFIG override over the broker synonym), Kafka's own ``kafka-configs
--entity-type groups`` prints the same on both, and the group coordinator applies them: a
confluent-kafka ``group.protocol=consumer`` member of a group whose consumer.session.timeout.ms
is 3 s is fenced within seconds of a kill -9 while the broker's default is 45 s, and
ConsumerGroupHeartbeat hands out the group's consumer.heartbeat.interval.ms.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from diff_wire import WireClient, incremental_alter_configs, kio_schema
from kafka_ref import KafkaRef
from ref_fixtures import HasBootstrap, kafka_tool_output

from strom.core.testing import BrokerProcess, wait_for

GROUP = 32
SET, DELETE, APPEND = 0, 1, 2

Entry = tuple[object, ...]


def alter(bootstrap: str, name: str, ops: list[tuple[str, int, str | None]]) -> tuple[int, str | None]:
    return incremental_alter_configs(bootstrap, GROUP, name, ops)


def legacy_alter(bootstrap: str, name: str, configs: dict[str, str]) -> tuple[int, str | None]:
    m = kio_schema("alter_configs", 2)
    req = m.AlterConfigsRequest(resources=(m.AlterConfigsResource(
        resource_type=GROUP, resource_name=name,
        configs=tuple(m.AlterableConfig(name=k, value=v) for k, v in configs.items())),), validate_only=False)
    with WireClient(bootstrap) as c:
        r = c.request(req).responses[0]
    return int(r.error_code), r.error_message


def describe(bootstrap: str, name: str) -> tuple[int, dict[str, Entry]]:
    m = kio_schema("describe_configs", 4)
    req = m.DescribeConfigsRequest(resources=(m.DescribeConfigsResource(
        resource_type=GROUP, resource_name=name, configuration_keys=None),), include_synonyms=True,
        include_documentation=False)
    with WireClient(bootstrap) as c:
        res = c.request(req).results[0]
    return int(res.error_code), {c.name: (c.value, int(c.config_source), c.read_only, c.is_sensitive,
                                          int(c.config_type), tuple((s.name, s.value, int(s.source)) for s in c.synonyms))
                                 for c in res.configs}


CASES: list[tuple[str, list[tuple[str, int, str | None]]]] = [
    ("valid", [("consumer.session.timeout.ms", SET, "50000")]),
    ("valid", [("consumer.session.timeout.ms", SET, "10000")]),
    ("valid", [("consumer.session.timeout.ms", SET, "70000")]),
    ("valid", [("consumer.heartbeat.interval.ms", SET, "1000")]),
    ("valid", [("consumer.heartbeat.interval.ms", SET, "abc")]),
    ("valid", [("consumer.heartbeat.interval.ms", SET, "6000")]),
    ("valid", [("no.such.group.config", SET, "1")]),
    ("valid", [("share.auto.offset.reset", SET, "bad")]),
    ("valid", [("share.auto.offset.reset", SET, "earliest")]),
    ("valid", [("streams.num.standby.replicas", SET, "5")]),
    ("valid", [("consumer.session.timeout.ms", APPEND, "1")]),
    ("", [("consumer.session.timeout.ms", SET, "50000")]),
    ("valid", [("share.auto.offset.reset", DELETE, None)]),
]


def test_group_configs_are_checked_and_described_as_kafka(strom: HasBootstrap, kafka: KafkaRef) -> None:
    """strom answered "Unsupported resource type 32" to all of these before."""
    group = f"gc-{uuid.uuid4().hex[:8]}"
    for name, ops in CASES:
        resource = group if name == "valid" else name
        theirs, ours = alter(kafka.bootstrap, resource, ops), alter(strom.bootstrap, resource, ops)
        assert ours == theirs, f"{ops}: strom {ours}, Kafka {theirs}"
    legacy = f"gl-{uuid.uuid4().hex[:8]}"
    for b in (kafka, strom):
        assert legacy_alter(b.bootstrap, legacy, {"consumer.session.timeout.ms": "50000"}) == (0, None)
    # Kafka's broker learns the committed configs a moment later: poll until it shows them.
    for name in (group, legacy):
        def applied(n: str = name) -> tuple[int, dict[str, Entry]] | None:
            d = describe(kafka.bootstrap, n)
            return d if d[1]["consumer.session.timeout.ms"][1] == 8 else None

        theirs = wait_for(applied, timeout=30, what=f"Kafka to show the configs of {name}")
        assert describe(strom.bootstrap, name) == theirs
    code, entries = describe(strom.bootstrap, group)
    assert code == 0
    assert entries["consumer.session.timeout.ms"] == (
        "50000", 8, False, False, 3, (("consumer.session.timeout.ms", "50000", 8),
                                      ("group.consumer.session.timeout.ms", "45000", 5)))
    assert describe(strom.bootstrap, "") == describe(kafka.bootstrap, "")


def kafka_configs(bootstrap: str, *args: str) -> str:
    """Kafka's kafka-configs.sh (kafka.admin.ConfigCommand) of the reference's jars."""
    return kafka_tool_output("kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, *args)


def test_kafka_configs_tool_on_groups(strom: HasBootstrap, kafka: KafkaRef) -> None:
    """``kafka-configs --entity-type groups``: alter, describe --all and delete print the same
    against strom as against Kafka."""
    group = f"gt-{uuid.uuid4().hex[:8]}"
    steps = [("--entity-type", "groups", "--entity-name", group, "--alter", "--add-config",
              "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=6000"),
             ("--entity-type", "groups", "--entity-name", group, "--describe", "--all"),
             ("--entity-type", "groups", "--entity-name", group, "--alter", "--delete-config",
              "consumer.heartbeat.interval.ms")]
    printed = []
    for step in steps:
        ours = kafka_configs(strom.bootstrap, *step)
        printed.append(ours)
        theirs = kafka_configs(kafka.bootstrap, *step)
        deadline = time.monotonic() + 60
        # Kafka's broker applies a change a moment after it answers: describe again until then.
        while "--describe" in step and theirs != ours and time.monotonic() < deadline:
            time.sleep(0.5)
            theirs = kafka_configs(kafka.bootstrap, *step)
        assert ours == theirs
    assert "consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:" in printed[1]


# -- applied by the group coordinator (strom only) ------------------------------------------------

# The broker's bounds let a group ask for a short session (Kafka's minimum is 45 s); its own
# default session timeout stays Kafka's 45 s, so only the group config can fence a member quickly.
BOUNDS = {"group.consumer.min.session.timeout.ms": "1000", "group.consumer.min.heartbeat.interval.ms": "500",
          "offsets.topic.num.partitions": "3"}

CHILD_CONSUMER = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer"})
c.subscribe([sys.argv[3]], on_assign=lambda c, ps: print("assigned", len(ps), flush=True))
while True:
    c.poll(0.1)
"""


@pytest.fixture(scope="module")
def bounded_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("group-configs"), config=BOUNDS) as proc:
        yield proc


def _members(admin: AdminClient, group: str) -> int | None:
    try:
        return len(admin.describe_consumer_groups([group], request_timeout=10)[group].result().members)
    except KafkaException:
        return None


def test_group_session_timeout_is_applied(bounded_broker: BrokerProcess) -> None:
    """kill -9 of a KIP-848 member: fenced after its group's consumer.session.timeout.ms (3 s),
    not the broker's 45 s (the wait below gives up at 25 s)."""
    bootstrap = bounded_broker.bootstrap
    topic, group = f"gs-{uuid.uuid4().hex[:8]}", f"gs-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    assert alter(bootstrap, group, [("consumer.session.timeout.ms", SET, "3000"),
                                    ("consumer.heartbeat.interval.ms", SET, "1000")]) == (0, None)
    child = subprocess.Popen([sys.executable, "-c", CHILD_CONSUMER, bootstrap, group, topic],
                             stdout=subprocess.PIPE, text=True, env={**os.environ})
    try:
        assert child.stdout is not None and child.stdout.readline().startswith("assigned")
        wait_for(lambda: _members(admin, group) == 1, timeout=30, what="the member in the group")
        child.kill()
        child.wait(10)
        wait_for(lambda: _members(admin, group) == 0, timeout=25,
                 what="the killed member fenced by the group's 3 s session timeout")
    finally:
        child.kill()
        child.wait(10)


def test_group_heartbeat_interval_is_applied(bounded_broker: BrokerProcess) -> None:
    """ConsumerGroupHeartbeat answers the group's consumer.heartbeat.interval.ms (the broker's
    default, 5 s, for a group without one)."""
    topic = f"gh-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bounded_broker.bootstrap})  # referenced until the topic exists
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    configured, plain = f"gh-{uuid.uuid4().hex[:8]}", f"gh-{uuid.uuid4().hex[:8]}"
    assert alter(bounded_broker.bootstrap, configured, [("consumer.heartbeat.interval.ms", SET, "1500")]) == (0, None)
    m = kio_schema("consumer_group_heartbeat", 0)
    intervals = {}
    for group in (configured, plain):
        req = m.ConsumerGroupHeartbeatRequest(group_id=group, member_id=str(uuid.uuid4()), member_epoch=0,
                                              rebalance_timeout=timedelta(seconds=30),
                                              subscribed_topic_names=(topic,), topic_partitions=())
        deadline = time.monotonic() + 30
        while True:  # the group coordinator may still be loading its partition
            with WireClient(bounded_broker.bootstrap) as c:
                r = c.request(req)
            if int(r.error_code) == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert int(r.error_code) == 0, r
        intervals[group] = r.heartbeat_interval.total_seconds() * 1000
    assert intervals == {configured: 1500, plain: 5000}
