"""Kafka's Java client and tools against strom's secure listeners (issue 23 item 6; reference jars).

* ``kafka-configs --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'
  --entity-type users`` and ``--describe`` (Kafka's ConfigCommand over AlterUserScramCredentials
  and DescribeUserScramCredentials), then the Java producer and consumer over SASL_SSL with that
  user; a wrong password is Kafka's SaslAuthenticationException.
* The Java client over mutual TLS with a PEM key store, its certificate mapped to ``User:alice``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from java_client import ClientRun, JavaClient
from ref_fixtures import java_client, kafka_tool
from secure_broker import client_keystore, jaas_scram, listener_ports
from tls_certs import Pki, make_pki

from strom.core.testing import BrokerProcess

__all__ = ["java_client"]  # the fixture, imported for this module's tests


class Cluster:
    def __init__(self, broker: BrokerProcess, pki: Pki) -> None:
        self.broker = broker
        self.pki = pki
        ports = listener_ports(broker)
        self.plain = f"127.0.0.1:{ports['PLAINTEXT']}"
        self.sasl_ssl = f"127.0.0.1:{ports['SASL_SSL']}"
        self.mtls = f"127.0.0.1:{ports['MTLS']}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    pki = make_pki(tmp_path_factory.mktemp("pki"), {"alice": "CN=alice,OU=eng,O=strom"})
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SSL,CONTROLLER:PLAINTEXT",
        "ssl.keystore.location": str(pki.server_keystore),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.location": str(pki.ca_cert),
        "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([a-z]+),.*$/$1/",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
    }
    with BrokerProcess(config=config) as broker:
        yield Cluster(broker, pki)




def _ok(run: ClientRun) -> ClientRun:
    assert run.returncode == 0 and not run.ops("fatal"), run.describe()
    return run


def test_kafka_configs_scram_then_java_client_over_sasl_ssl(cluster: Cluster, java_client: JavaClient) -> None:
    altered = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", cluster.plain, "--alter", "--add-config",
                         "SCRAM-SHA-256=[iterations=8192,password=admin-secret]", "--entity-type", "users",
                         "--entity-name", "admin")
    assert altered.returncode == 0, altered.stderr
    assert "Completed updating config for user admin." in altered.stdout, altered.stdout
    described = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", cluster.plain, "--describe",
                           "--entity-type", "users", "--entity-name", "admin")
    assert described.returncode == 0, described.stderr
    assert "SCRAM credential configs for user-principal 'admin' are SCRAM-SHA-256=iterations=8192" in \
        described.stdout, described.stdout

    topic = f"java-scram-{uuid.uuid4().hex[:8]}"
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
             "sasl.jaas.config": jaas_scram("admin", "admin-secret"), "ssl.truststore.type": "PEM",
             "ssl.truststore.location": str(cluster.pki.ca_cert)}
    produced = _ok(java_client.run("produce", cluster.sasl_ssl, topic, "5", props=props))
    assert produced.one("produce")["errors"] == 0, produced.describe()
    consumed = _ok(java_client.run("consume", cluster.sasl_ssl, topic, "5", props=props))
    assert len(consumed.ops("record")) == 5, consumed.describe()

    wrong = java_client.run("produce", cluster.sasl_ssl, topic, "1",
                            props={**props, "sasl.jaas.config": jaas_scram("admin", "wrong"), "max.block.ms": "10000"})
    text = wrong.describe()
    assert "SaslAuthenticationException" in text and "invalid credentials with SASL mechanism SCRAM-SHA-256" in text, \
        text


def test_java_client_over_mtls_maps_its_certificate(cluster: Cluster, java_client: JavaClient, tmp_path: Path) -> None:
    topic = f"java-mtls-{uuid.uuid4().hex[:8]}"
    granted = kafka_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", cluster.plain, "--add", "--allow-principal",
                         "User:alice", "--operation", "All", "--topic", topic)
    assert granted.returncode == 0, granted.stderr
    cert, key = cluster.pki.clients["alice"]
    props = {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
             "ssl.truststore.location": str(cluster.pki.ca_cert), "ssl.keystore.type": "PEM",
             "ssl.keystore.location": str(client_keystore(cert, key))}
    produced = _ok(java_client.run("produce", cluster.mtls, topic, "3", props=props))
    assert produced.one("produce")["errors"] == 0, produced.describe()
    # Without the ACL's principal the same certificate would be denied: another topic is refused.
    denied = java_client.run("produce", cluster.mtls, f"other-{uuid.uuid4().hex[:6]}", "1",
                             props={**props, "max.block.ms": "10000"})
    assert "TopicAuthorizationException" in denied.describe() or "not authorized" in denied.describe().lower(), \
        denied.describe()
