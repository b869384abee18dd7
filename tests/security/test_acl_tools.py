"""Kafka's own ``kafka-acls.sh`` (``org.apache.kafka.tools.AclCommand``) and the Java producer
against strom's StandardAuthorizer broker.

The tool adds, lists and removes ACLs through the Java admin client (CreateAcls, DescribeAcls,
DeleteAcls as Kafka's clients send them) as the super user ``User:admin`` over SASL/PLAIN
(``--command-config``); the Java producer (idempotent, Kafka's default) of ``User:alice`` is
refused with TopicAuthorizationException without an ACL and delivers once the tool granted
``--producer`` (tests/helpers/acl_broker.py has the broker).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from acl_broker import AclBroker
from confluent_kafka.admin import AdminClient, NewTopic
from java_client import JavaClient
from ref_fixtures import kafka_tool_output, needs_tools

ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
pytestmark = pytest.mark.broker  # AclBroker starts strom's broker (the tier markers see only known names)


def kafka_acls(cluster: AclBroker, config_dir: Path, *args: str) -> str:
    """Run kafka-acls.sh as the super user with ``args``; its standard output (it must exit 0)."""
    command_config = config_dir / "admin.properties"
    command_config.write_text("".join(f"{k}={v}\n" for k, v in cluster.java_client("admin").items()))
    return kafka_tool_output(ACL_COMMAND, "--bootstrap-server", cluster.sasl, "--command-config", str(command_config),
                             *args, timeout=120)


@pytest.fixture(scope="module")
def java() -> JavaClient:
    needs_tools()
    return JavaClient().build()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, java: JavaClient) -> Iterator[AclBroker]:
    with AclBroker(tmp_path_factory.mktemp("acl-tools") / "data") as broker:
        yield broker


def test_kafka_acls_add_list_remove(cluster: AclBroker, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic, prefix = f"tool-{suffix}", f"tool-{suffix}-"
    out = kafka_acls(cluster, tmp_path, "--add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
                     "--operation", "Read", "--operation", "Write", "--topic", topic)
    assert "Adding ACLs for resource" in out
    kafka_acls(cluster, tmp_path, "--add", "--deny-principal", "User:bob", "--deny-host", "10.1.2.3",
               "--operation", "Write", "--resource-pattern-type", "prefixed", "--topic", prefix)
    kafka_acls(cluster, tmp_path, "--add", "--allow-principal", "User:alice", "--consumer", "--topic", topic,
               "--group", f"g-{suffix}")

    listed = kafka_acls(cluster, tmp_path, "--list", "--topic", topic)
    assert f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)" in listed
    entries = {line.strip() for line in listed.splitlines() if line.strip().startswith("(principal=")}
    assert entries == {f"(principal=User:{who}, host=*, operation={op}, permissionType=ALLOW)"
                       for who in ("alice", "bob") for op in ("READ", "WRITE")} | {
        "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)"}
    # --principal lists what applies to one principal, across resources (MATCH filters).
    bob = kafka_acls(cluster, tmp_path, "--list", "--principal", "User:bob")
    assert "(principal=User:bob, host=10.1.2.3, operation=WRITE, permissionType=DENY)" in bob
    assert f"name={prefix}, patternType=PREFIXED" in bob

    kafka_acls(cluster, tmp_path, "--remove", "--force", "--allow-principal", "User:bob", "--operation", "Write",
               "--topic", topic)
    listed = kafka_acls(cluster, tmp_path, "--list", "--topic", topic)
    assert "(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)" not in listed
    assert "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)" in listed
    kafka_acls(cluster, tmp_path, "--remove", "--force", "--topic", topic)
    kafka_acls(cluster, tmp_path, "--remove", "--force", "--resource-pattern-type", "prefixed", "--topic", prefix)
    kafka_acls(cluster, tmp_path, "--remove", "--force", "--group", f"g-{suffix}")
    assert "principal=" not in kafka_acls(cluster, tmp_path, "--list", "--principal", "User:bob")


def test_java_producer_denied_until_granted(cluster: AclBroker, java: JavaClient, tmp_path: Path) -> None:
    topic = f"java-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(cluster.client("admin"))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    props = {"max.block.ms": "15000", "delivery.timeout.ms": "20000", "request.timeout.ms": "10000",
             **cluster.java_client("alice")}
    denied = java.run("produce", cluster.sasl, topic, "1", props=props)
    assert [line.get("error") for line in denied.ops("sent")] == ["TopicAuthorizationException"], denied.describe()
    kafka_acls(cluster, tmp_path, "--add", "--allow-principal", "User:alice", "--producer", "--topic", topic)
    granted = java.run("produce", cluster.sasl, topic, "3", props=props)
    assert granted.one("produce")["errors"] == 0, granted.describe()
