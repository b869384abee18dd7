"""Kafka's own ``kafka-acls.sh`` (``org.apache.kafka.tools.AclCommand``) and the Java producer
against strom's StandardAuthorizer broker.

The tool adds, lists and removes ACLs through the Java admin client (CreateAcls, DescribeAcls,
DeleteAcls as Kafka's clients send them); the Java producer (idempotent, Kafka's default) is
refused with TopicAuthorizationException without an ACL and delivers once the tool granted
WRITE. The principal is ``User:ANONYMOUS``, a super user only while it grants itself the right
to manage ACLs (see test_acl_broker.py).
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from java_client import JavaClient
from kafka_ref import classpath, ensure_jars
from ref_fixtures import needs_tools

from strom.core.testing import BrokerProcess

STANDARD = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
ACL_COMMAND = "org.apache.kafka.tools.AclCommand"


def kafka_acls(bootstrap: str, *args: str) -> str:
    """Run kafka-acls.sh with ``args``; its standard output (it must exit 0)."""
    cmd = ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath(ensure_jars()), ACL_COMMAND,
           "--bootstrap-server", bootstrap, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"kafka-acls {args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def java() -> JavaClient:
    needs_tools()
    return JavaClient().build()


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory, java: JavaClient) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("acl-tools"), config={**STANDARD, "super.users": "User:ANONYMOUS"})
    with proc:
        kafka_acls(proc.bootstrap, "--add", "--allow-principal", "User:ANONYMOUS", "--operation", "Alter",
                   "--operation", "Describe", "--operation", "Create", "--cluster")
        del proc.config["super.users"]
        proc.restart()
        yield proc


def test_kafka_acls_add_list_remove(locked: BrokerProcess) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic, prefix = f"tool-{suffix}", f"tool-{suffix}-"
    out = kafka_acls(locked.bootstrap, "--add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
                     "--operation", "Read", "--operation", "Write", "--topic", topic)
    assert "Adding ACLs for resource" in out
    kafka_acls(locked.bootstrap, "--add", "--deny-principal", "User:bob", "--deny-host", "10.1.2.3",
               "--operation", "Write", "--resource-pattern-type", "prefixed", "--topic", prefix)
    kafka_acls(locked.bootstrap, "--add", "--allow-principal", "User:alice", "--consumer", "--topic", topic,
               "--group", f"g-{suffix}")

    listed = kafka_acls(locked.bootstrap, "--list", "--topic", topic)
    assert f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)" in listed
    entries = {line.strip() for line in listed.splitlines() if line.strip().startswith("(principal=")}
    assert entries == {f"(principal=User:{who}, host=*, operation={op}, permissionType=ALLOW)"
                       for who in ("alice", "bob") for op in ("READ", "WRITE")} | {
        "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)"}
    # --principal lists what applies to one principal, across resources (MATCH filters).
    bob = kafka_acls(locked.bootstrap, "--list", "--principal", "User:bob")
    assert "(principal=User:bob, host=10.1.2.3, operation=WRITE, permissionType=DENY)" in bob
    assert f"name={prefix}, patternType=PREFIXED" in bob

    kafka_acls(locked.bootstrap, "--remove", "--force", "--allow-principal", "User:bob", "--operation", "Write",
               "--topic", topic)
    listed = kafka_acls(locked.bootstrap, "--list", "--topic", topic)
    assert "(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)" not in listed
    assert "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)" in listed
    kafka_acls(locked.bootstrap, "--remove", "--force", "--topic", topic)
    kafka_acls(locked.bootstrap, "--remove", "--force", "--resource-pattern-type", "prefixed", "--topic", prefix)
    kafka_acls(locked.bootstrap, "--remove", "--force", "--group", f"g-{suffix}")
    assert "principal=" not in kafka_acls(locked.bootstrap, "--list", "--principal", "User:bob")


def test_java_producer_denied_until_granted(locked: BrokerProcess, java: JavaClient) -> None:
    topic = f"java-{uuid.uuid4().hex[:8]}"
    # CREATE on the cluster came with the management rights: the topic can be made.
    admin = AdminClient({"bootstrap.servers": locked.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    props = {"max.block.ms": "15000", "delivery.timeout.ms": "20000", "request.timeout.ms": "10000"}
    denied = java.run("produce", locked.bootstrap, topic, "1", props=props)
    assert [line.get("error") for line in denied.ops("sent")] == ["TopicAuthorizationException"], denied.describe()
    kafka_acls(locked.bootstrap, "--add", "--allow-principal", "User:ANONYMOUS", "--producer", "--topic", topic)
    granted = java.run("produce", locked.bootstrap, topic, "3", props=props)
    assert granted.one("produce")["errors"] == 0, granted.describe()
