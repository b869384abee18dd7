"""SASL/SCRAM over SASL_SSL with real clients (issue 23 items 2 and 6).

One broker with a PLAINTEXT listener (for the admin that creates users) and a SASL_SSL
listener (TLS with a throwaway CA, SCRAM-SHA-256 and SCRAM-SHA-512). Users are created with
AlterUserScramCredentials (confluent-kafka's admin, and Kafka's own kafka-configs) or
``strom storage format --add-scram``; confluent-kafka, kafka-python, aiokafka, kcat and the Java
client produce and consume with the right password and are refused with Kafka's error for a
wrong one; the broker logs one WARNING with the client's address and the mechanism, never the
password.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from secure_broker import consume_values, jaas_scram, listener_ports
from tls_certs import Pki, make_pki

from strom.core.testing import BrokerProcess, wait_for

WRONG = "Authentication failed during authentication due to invalid credentials with SASL mechanism"
KCAT = shutil.which("kcat") or shutil.which("kafkacat")


class ScramCluster:
    def __init__(self, broker: BrokerProcess, pki: Pki) -> None:
        self.broker = broker
        self.pki = pki
        ports = listener_ports(broker)
        self.plain = f"127.0.0.1:{ports['PLAINTEXT']}"
        self.secure = f"127.0.0.1:{ports['SASL_SSL']}"

    def client(self, mechanism: str, user: str, password: str, **extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": self.secure, "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
                "sasl.username": user, "sasl.password": password, "ssl.ca.location": str(self.pki.ca_cert), **extra}

    def add_user(self, user: str, password: str, mechanism: ScramMechanism = ScramMechanism.SCRAM_SHA_256,
                 iterations: int = 4096) -> None:
        admin = AdminClient({"bootstrap.servers": self.plain})
        futures = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, iterations), password.encode())])
        for future in futures.values():
            future.result(30)


def _config(pki: Pki) -> dict[str, str]:
    return {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
            "listener.name.sasl_ssl.ssl.keystore.location": str(pki.server_keystore)}


@pytest.fixture(scope="module")
def scram(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScramCluster]:
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    with BrokerProcess(config=_config(pki)) as broker:
        yield ScramCluster(broker, pki)


def _describe(admin: AdminClient, users: list[str]) -> dict[str, Future[Any]]:
    """DescribeUserScramCredentials for named users: one future per user."""
    futures = admin.describe_user_scram_credentials(users)
    assert isinstance(futures, dict)
    return futures


def _produce_consume(config: dict[str, Any], topic: str, n: int = 5) -> list[bytes]:
    producer = Producer(config)
    for i in range(n):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    return consume_values(config, topic, n)


def _auth_error(config: dict[str, Any]) -> KafkaError:
    """The authentication error a confluent-kafka producer with ``config`` reports."""
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append})
    producer.produce("never", b"x")

    def failed() -> KafkaError | None:
        producer.poll(0.2)
        return next((e for e in errors if e.code() == KafkaError._AUTHENTICATION), None)

    try:
        return wait_for(failed, timeout=30, what="an authentication error", interval=0)
    finally:
        producer.purge()
        producer.flush(0)


@pytest.mark.parametrize("mechanism", [ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512])
def test_confluent_kafka_right_password_works_wrong_one_is_refused(scram: ScramCluster,
                                                                   mechanism: ScramMechanism) -> None:
    name = "SCRAM-SHA-256" if mechanism == ScramMechanism.SCRAM_SHA_256 else "SCRAM-SHA-512"
    user = f"alice-{name[-3:]}"
    scram.add_user(user, "alice-secret", mechanism, iterations=8192)
    topic = f"scram-{uuid.uuid4().hex[:8]}"
    assert _produce_consume(scram.client(name, user, "alice-secret"), topic) == [f"v{i}".encode() for i in range(5)]

    error = _auth_error(scram.client(name, user, "not-the-password"))
    assert f"{WRONG} {name}" in error.str(), error.str()
    # An unknown user gets the same answer: the reply does not tell whether the user exists.
    error = _auth_error(scram.client(name, "nobody", "whatever"))
    assert f"{WRONG} {name}" in error.str(), error.str()
    log = wait_for(lambda: scram.broker.log_text() if f"(SASL mechanism {name})" in scram.broker.log_text() else None,
                   timeout=10, what="the failed-authentication warning")
    warnings = [line for line in log.splitlines() if "failed authentication" in line and name in line]
    assert warnings and all("WARNING" in w and "127.0.0.1:" in w for w in warnings), warnings
    assert "not-the-password" not in log and "alice-secret" not in log


def test_wrong_mechanism_for_the_user_is_refused(scram: ScramCluster) -> None:
    """A SCRAM-SHA-256 user has no SCRAM-SHA-512 credential."""
    scram.add_user("only256", "pw-256-secret")
    error = _auth_error(scram.client("SCRAM-SHA-512", "only256", "pw-256-secret"))
    assert f"{WRONG} SCRAM-SHA-512" in error.str()


def test_describe_and_alter_scram_credentials(scram: ScramCluster) -> None:
    admin = AdminClient({"bootstrap.servers": scram.plain})
    scram.add_user("carol", "carol-secret", ScramMechanism.SCRAM_SHA_256, 4096)
    scram.add_user("carol2", "x-secret", ScramMechanism.SCRAM_SHA_512, 10000)
    described = {u: f.result(30) for u, f in _describe(admin, ["carol", "carol2"]).items()}
    every = admin.describe_user_scram_credentials()
    assert not isinstance(every, dict) and {"carol", "carol2"} <= set(every.result(30))  # no names: every user
    assert [(i.mechanism, i.iterations) for i in described["carol"].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 4096)]
    assert [(i.mechanism, i.iterations) for i in described["carol2"].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 10000)]
    with pytest.raises(Exception, match="does not exist"):
        _describe(admin, ["no-such-user"])["no-such-user"].result(30)
    # Kafka's checks: too few iterations, deleting what does not exist.
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw")])
    with pytest.raises(Exception, match="Too few iterations"):
        futures["dave"].result(30)
    futures = admin.alter_user_scram_credentials([UserScramCredentialDeletion("eve", ScramMechanism.SCRAM_SHA_256)])
    with pytest.raises(Exception, match="does not exist"):
        futures["eve"].result(30)
    # Deleting carol's credential stops her from authenticating.
    for future in admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)]).values():
        future.result(30)
    error = _auth_error(scram.client("SCRAM-SHA-256", "carol", "carol-secret"))
    assert f"{WRONG} SCRAM-SHA-256" in error.str()


def test_kafka_python_scram(scram: ScramCluster, caplog: pytest.LogCaptureFixture) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import KafkaTimeoutError

    scram.add_user("kp-user", "kp-secret")
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    common: dict[str, Any] = {"bootstrap_servers": scram.secure, "security_protocol": "SASL_SSL",
                              "sasl_mechanism": "SCRAM-SHA-256", "ssl_cafile": str(scram.pki.ca_cert),
                              "ssl_check_hostname": True}
    producer = KafkaProducer(**common, sasl_plain_username="kp-user", sasl_plain_password="kp-secret")
    producer.send(topic, b"from-kafka-python").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, **common, sasl_plain_username="kp-user", sasl_plain_password="kp-secret",
                             auto_offset_reset="earliest")
    got: list[bytes] = []

    def poll() -> bool:
        got.extend(r.value for rs in consumer.poll(timeout_ms=500).values() for r in rs)
        return bool(got)

    wait_for(poll, timeout=30, what="kafka-python's record")
    consumer.close()
    assert got == [b"from-kafka-python"]
    # kafka-python reports the refusal (SaslAuthenticationFailedError, Kafka's message) in its log
    # and gives up bootstrapping.
    with pytest.raises(KafkaTimeoutError):
        KafkaProducer(**common, sasl_plain_username="kp-user", sasl_plain_password="wrong", max_block_ms=5000,
                      api_version=(2, 8, 0)).send(topic, b"x").get(timeout=10)
    assert f"SaslAuthenticationFailedError: {WRONG} SCRAM-SHA-256" in caplog.text


def test_aiokafka_scram(scram: ScramCluster) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.errors import KafkaError as AIOError

    scram.add_user("aio-user", "aio-secret", ScramMechanism.SCRAM_SHA_512)
    topic = f"aio-{uuid.uuid4().hex[:8]}"
    tls = ssl.create_default_context(cafile=str(scram.pki.ca_cert))

    def common(password: str) -> dict[str, Any]:
        return {"bootstrap_servers": scram.secure, "security_protocol": "SASL_SSL", "ssl_context": tls,
                "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "aio-user", "sasl_plain_password": password}

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**common("aio-secret"))
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"from-aiokafka")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, **common("aio-secret"), auto_offset_reset="earliest")
        await consumer.start()
        try:
            msg = await asyncio.wait_for(consumer.getone(), 30)
        finally:
            await consumer.stop()
        bad = AIOKafkaProducer(**common("wrong"), request_timeout_ms=5000)
        with pytest.raises(AIOError):
            await bad.start()
        await bad.stop()
        return [msg.value]

    assert asyncio.run(run()) == [b"from-aiokafka"]


@pytest.mark.skipif(KCAT is None, reason="kcat not installed (scripts/setup-test-deps.sh installs it)")
def test_kcat_scram(scram: ScramCluster) -> None:
    assert KCAT is not None
    scram.add_user("kcat-user", "kcat-secret")
    topic = f"kcat-{uuid.uuid4().hex[:8]}"

    def kcat(password: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([KCAT, "-b", scram.secure, "-X", "security.protocol=SASL_SSL", "-X",
                               "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=kcat-user", "-X",
                               f"sasl.password={password}", "-X", f"ssl.ca.location={scram.pki.ca_cert}", *args],
                              input=stdin, capture_output=True, text=True, timeout=60)

    produced = kcat("kcat-secret", "-P", "-t", topic, stdin="a\nb\n")
    assert produced.returncode == 0, produced.stderr
    consumed = kcat("kcat-secret", "-C", "-t", topic, "-o", "beginning", "-e", "-c", "2")
    assert consumed.returncode == 0 and consumed.stdout.split() == ["a", "b"], consumed
    refused = kcat("wrong", "-L", "-m", "10")
    assert refused.returncode != 0 and WRONG in refused.stderr, refused.stderr


def test_storage_format_add_scram(tmp_path: Path) -> None:
    """``strom storage format --add-scram``: the user exists on the first start."""
    pki = make_pki(tmp_path / "pki")
    data = tmp_path / "data"
    props = tmp_path / "server.properties"
    props.write_text(f"node.id=1\nprocess.roles=broker,controller\nlisteners=PLAINTEXT://127.0.0.1:0\n"
                     f"log.dirs={data / 'logs'}\nmetadata.log.dir={data / 'metadata'}\n"
                     "controller.quorum.voters=1@127.0.0.1:0\n")
    bad = subprocess.run([sys.executable, "-m", "strom.core.cli", "storage", "format", "-c", str(props),
                          "--add-scram", "SCRAM-SHA-512=[password=x]"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "You must supply 'name' to add-scram" in bad.stderr, bad.stderr
    assert not data.exists(), "a refused --add-scram left a half-formatted directory"
    formatted = subprocess.run([sys.executable, "-m", "strom.core.cli", "storage", "format", "-c", str(props),
                                "--add-scram", "SCRAM-SHA-512=[name=frank,iterations=8192,password=frank-secret]"],
                               capture_output=True, text=True, timeout=60)
    assert formatted.returncode == 0, formatted.stderr
    with BrokerProcess(data, config=_config(pki)) as broker:
        cluster = ScramCluster(broker, pki)
        got = _produce_consume(cluster.client("SCRAM-SHA-512", "frank", "frank-secret"), "formatted", n=2)
        assert got == [b"v0", b"v1"]
        admin = AdminClient({"bootstrap.servers": cluster.plain})
        described = _describe(admin, ["frank"])["frank"].result(30)
        assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
            (ScramMechanism.SCRAM_SHA_512, 8192)]


def test_credentials_survive_a_restart(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    with BrokerProcess(tmp_path / "data", config=_config(pki)) as broker:
        cluster = ScramCluster(broker, pki)
        cluster.add_user("grace", "grace-secret")
        broker.restart()
        cluster = ScramCluster(broker, pki)
        assert _produce_consume(cluster.client("SCRAM-SHA-256", "grace", "grace-secret"), "restart", n=1) == [b"v0"]


def test_jaas_helper_is_kafkas_syntax() -> None:
    from strom.core.security.jaas import parse_single

    entry = parse_single(jaas_scram("u", "p"))
    assert entry.login_module.endswith("ScramLoginModule") and entry.options == {"username": "u", "password": "p"}
