"""TLS listeners: SSL, mutual TLS and principals from client certificates (issue 23 items 1 and 6).

One broker, four listeners at once: PLAINTEXT (the admin's, ANONYMOUS is a super user), SSL
(server certificate only), MTLS (mapped to SSL; ``ssl.client.auth=required``, a trust store
and ``ssl.principal.mapping.rules`` under ``listener.name.mtls.``) and OPT (mapped to SSL;
``ssl.client.auth=requested``, the trust store as ``ssl.truststore.certificates`` PEM text). The StandardAuthorizer
decides with the principal the certificate maps to, so an ACL for ``User:alice`` shows that the
name reached it. Clients: confluent-kafka, kafka-python, aiokafka, kcat.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
)
from confluent_kafka.admin import ResourceType as CkResourceType
from secure_broker import consume_values, listener_ports
from tls_certs import Pki, make_pki

from strom.core.testing import BrokerProcess, wait_for

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
RULES = "RULE:^CN=([A-Za-z]+),OU=eng,O=strom$/$1/L,DEFAULT"
CLIENTS = {"alice": "CN=Alice,OU=eng,O=strom", "mallory": "CN=mallory,OU=ops,O=strom"}


class TlsCluster:
    def __init__(self, broker: BrokerProcess, pki: Pki) -> None:
        self.broker = broker
        self.pki = pki
        ports = listener_ports(broker)
        self.plain = f"127.0.0.1:{ports['PLAINTEXT']}"
        self.ssl = f"127.0.0.1:{ports['SSL']}"
        self.mtls = f"127.0.0.1:{ports['MTLS']}"
        self.opt = f"127.0.0.1:{ports['OPT']}"

    def client(self, who: str | None = None, *, mtls: bool = True, **extra: Any) -> dict[str, Any]:
        config: dict[str, Any] = {"bootstrap.servers": self.mtls if mtls else self.ssl, "security.protocol": "SSL",
                                  "ssl.ca.location": str(self.pki.ca_cert), **extra}
        if who is not None:
            cert, key = self.pki.clients[who]
            config.update({"ssl.certificate.location": str(cert), "ssl.key.location": str(key)})
        return config

    def grant(self, principal: str, topic: str) -> None:
        admin = AdminClient({"bootstrap.servers": self.plain})
        bindings = [AclBinding(CkResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*",
                               AclOperation.ALL, AclPermissionType.ALLOW),
                    AclBinding(CkResourceType.GROUP, "g-", ResourcePatternType.PREFIXED, principal, "*",
                               AclOperation.READ, AclPermissionType.ALLOW)]
        for future in admin.create_acls(bindings).values():
            future.result(30)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsCluster]:
    pki = make_pki(tmp_path_factory.mktemp("pki"), CLIENTS, key_password="keystore-secret")
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0,OPT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,OPT:SSL,CONTROLLER:PLAINTEXT",
        "listener.name.opt.ssl.client.auth": "requested",
        "listener.name.opt.ssl.truststore.certificates": pki.ca_cert.read_text(),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": pki.server_cert.read_text(),
        "ssl.keystore.key": pki.server_key.read_text(),
        "ssl.key.password": "keystore-secret",
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": str(pki.ca_cert),
        "listener.name.mtls.ssl.principal.mapping.rules": RULES,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
    }
    with BrokerProcess(config=config) as broker:
        yield TlsCluster(broker, pki)


def _produce(config: dict[str, Any], topic: str, n: int = 3) -> list[KafkaError | None]:
    results: list[KafkaError | None] = []
    producer = Producer({"message.timeout.ms": 10000, **config})
    for i in range(n):
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda err, _msg: results.append(err))
    producer.flush(30)
    return results


def test_ssl_listener_serves_confluent_kafka(tls: TlsCluster) -> None:
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    assert _produce(tls.client(mtls=False), topic) == [None] * 3  # ANONYMOUS: a super user here
    assert consume_values(tls.client(mtls=False), topic, 3) == [b"v0", b"v1", b"v2"]


def test_a_plaintext_client_on_the_tls_listener_is_closed(tls: TlsCluster) -> None:
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": tls.ssl, "error_cb": errors.append})
    producer.produce("x", b"x")
    wait_for(lambda: producer.poll(0.2) is not None and errors, timeout=30, what="a transport error")
    producer.purge()
    assert wait_for(lambda: "TLS handshake with 127.0.0.1:" in tls.broker.log_text(), timeout=10,
                    what="the TLS handshake warning")


def test_mtls_without_a_client_certificate_is_refused(tls: TlsCluster) -> None:
    errors: list[KafkaError] = []
    producer = Producer({**tls.client(), "error_cb": errors.append})
    producer.produce("x", b"x")
    wait_for(lambda: producer.poll(0.2) is not None and any(
        e.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN) for e in errors),
        timeout=30, what="the refused TLS handshake")
    producer.purge()


def test_principal_from_certificate_mapping_rules(tls: TlsCluster) -> None:
    """CN=Alice,OU=eng,O=strom maps to ``alice`` (the RULE, lower-cased); mallory's DN matches no
    RULE and stays the whole DN (DEFAULT). ACLs for those exact principals decide."""
    topic = f"mtls-{uuid.uuid4().hex[:8]}"
    _produce({"bootstrap.servers": tls.plain}, topic, 1)
    tls.grant("User:alice", topic)
    assert _produce(tls.client("alice"), topic) == [None] * 3
    denied = _produce(tls.client("mallory"), topic, 1)
    assert denied[0] is not None and denied[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, denied
    tls.grant("User:CN=mallory,OU=ops,O=strom", topic)
    assert _produce(tls.client("mallory"), topic, 1) == [None]
    assert consume_values(tls.client("alice"), topic, 5) == [b"v0", b"v0", b"v1", b"v2", b"v0"]  # plain, alice, mallory


def test_mtls_with_kafka_python_and_aiokafka(tls: TlsCluster) -> None:
    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    topic = f"mtls-py-{uuid.uuid4().hex[:8]}"
    _produce({"bootstrap.servers": tls.plain}, topic, 1)
    tls.grant("User:alice", topic)
    cert, key = tls.pki.clients["alice"]
    producer = KafkaProducer(bootstrap_servers=tls.mtls, security_protocol="SSL", ssl_cafile=str(tls.pki.ca_cert),
                             ssl_certfile=str(cert), ssl_keyfile=str(key))
    producer.send(topic, b"kafka-python").get(timeout=30)
    producer.close()
    context = ssl.create_default_context(cafile=str(tls.pki.ca_cert))
    context.load_cert_chain(str(cert), str(key))

    async def aio() -> None:
        p = AIOKafkaProducer(bootstrap_servers=tls.mtls, security_protocol="SSL", ssl_context=context)
        await p.start()
        try:
            await p.send_and_wait(topic, b"aiokafka")
        finally:
            await p.stop()

    asyncio.run(aio())
    assert sorted(consume_values(tls.client("alice"), topic, 3)) == [b"aiokafka", b"kafka-python", b"v0"]


def test_requested_client_auth_takes_a_certificate_when_sent(tls: TlsCluster) -> None:
    """ssl.client.auth=requested: without a certificate the client is ANONYMOUS (a super user
    here); with mallory's (no RULE matches, no ACL) it is that DN, and denied."""
    topic = f"opt-{uuid.uuid4().hex[:8]}"
    assert _produce({**tls.client(), "bootstrap.servers": tls.opt}, topic, 1) == [None]
    denied = _produce({**tls.client("mallory"), "bootstrap.servers": tls.opt}, topic, 1)
    assert denied[0] is not None and denied[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, denied


@pytest.mark.skipif(KCAT is None, reason="kcat not installed (scripts/setup-test-deps.sh installs it)")
def test_mtls_with_kcat(tls: TlsCluster, tmp_path: Path) -> None:
    assert KCAT is not None
    topic = f"mtls-kcat-{uuid.uuid4().hex[:8]}"
    _produce({"bootstrap.servers": tls.plain}, topic, 1)
    tls.grant("User:alice", topic)
    cert, key = tls.pki.clients["alice"]
    base = [KCAT, "-b", tls.mtls, "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={tls.pki.ca_cert}",
            "-X", f"ssl.certificate.location={cert}", "-X", f"ssl.key.location={key}"]
    produced = subprocess.run([*base, "-P", "-t", topic], input="kcat-line\n", capture_output=True, text=True,
                              timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run([*base, "-C", "-t", topic, "-o", "beginning", "-e", "-c", "2"], capture_output=True,
                              text=True, timeout=60)
    assert consumed.returncode == 0 and consumed.stdout.split() == ["v0", "kcat-line"], consumed
