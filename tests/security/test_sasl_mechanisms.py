"""SASL on the wire: PLAIN, OAUTHBEARER (unsecured JWT), the v0 handshake, KIP-368 re-authentication,
the SASL state machine's refusals, and the principal reaching the authorizer (issue 23 items 2, 6).

One broker with a PLAINTEXT listener and a SASL_PLAINTEXT listener offering PLAIN (users from
``listener.name.sasl_plaintext.plain.sasl.jaas.config``, sessions of 3 s through
``listener.name.sasl_plaintext.plain.connections.max.reauth.ms``), OAUTHBEARER and
SCRAM-SHA-256. Protocol details are checked with raw frames (tests/helpers/kafka_wire), client
behaviour with confluent-kafka, kafka-python and aiokafka.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import Iterator
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
from kafka_wire import connect, encode_request, frame, read_frame, roundtrip, wait_closed
from kio.schema.metadata.v1.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from secure_broker import jaas_plain, listener_ports

from strom.core.testing import BrokerProcess, wait_for

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
REAUTH_MS = 3000
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class SaslCluster:
    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        ports = listener_ports(broker)
        self.plain = f"127.0.0.1:{ports['PLAINTEXT']}"
        self.sasl = f"127.0.0.1:{ports['SASL_PLAINTEXT']}"

    def client(self, mechanism: str = "PLAIN", user: str = "alice", password: str | None = None,
               **extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": self.sasl, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                "sasl.username": user, "sasl.password": USERS.get(user, "") if password is None else password,
                **extra}


@pytest.fixture(scope="module")
def sasl() -> Iterator[SaslCluster]:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas_plain(USERS),
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": str(REAUTH_MS),
        # The StandardAuthorizer sees the SASL principal; PLAINTEXT's ANONYMOUS and admin are super users.
        "authorizer.class.name": STANDARD,
        "super.users": "User:admin;User:ANONYMOUS",
    }
    with BrokerProcess(config=config) as broker:
        yield SaslCluster(broker)


def _handshake(sock: Any, mechanism: str = "PLAIN") -> Any:
    return roundtrip(sock, SaslHandshakeRequest(mechanism=mechanism))


def _authenticate(sock: Any, token: bytes, correlation_id: int = 2) -> Any:
    return roundtrip(sock, SaslAuthenticateRequest(auth_bytes=token), correlation_id)


def _plain(user: str, password: str) -> bytes:
    return f"\0{user}\0{password}".encode()


def _metadata_works(sock: Any) -> bool:
    return len(roundtrip(sock, MetadataRequest(topics=()), 9).brokers) == 1


def _auth_error(config: dict[str, Any]) -> str:
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append})
    producer.produce("never", b"x")

    def failed() -> str | None:
        producer.poll(0.2)
        return next((e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION), None)

    try:
        return str(wait_for(failed, timeout=30, what="an authentication error", interval=0))
    finally:
        producer.purge()
        producer.flush(0)


def _produce(config: dict[str, Any], topic: str, n: int = 3) -> list[KafkaError | None]:
    results: list[KafkaError | None] = []
    producer = Producer(config)
    for i in range(n):
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda err, _msg: results.append(err))
    producer.flush(30)
    return results


# -- PLAIN -----------------------------------------------------------------------------------


def test_plain_right_password_works_wrong_one_is_refused(sasl: SaslCluster) -> None:
    topic = f"plain-{uuid.uuid4().hex[:8]}"
    assert _produce(sasl.client(user="admin"), topic) == [None, None, None]
    assert "Authentication failed: Invalid username or password" in _auth_error(sasl.client(password="wrong"))
    assert "Authentication failed: Invalid username or password" in _auth_error(sasl.client(user="mallory",
                                                                                            password="x"))
    assert "wrong" not in "".join(line for line in sasl.broker.log_text().splitlines() if "failed authent" in line)


def test_plain_with_kafka_python_and_aiokafka(sasl: SaslCluster) -> None:
    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=sasl.sasl, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_plain_username="admin", sasl_plain_password="admin-secret")
    producer.send("kp-plain", b"x").get(timeout=30)
    producer.close()

    async def aio() -> None:
        p = AIOKafkaProducer(bootstrap_servers=sasl.sasl, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_plain_username="admin", sasl_plain_password="admin-secret")
        await p.start()
        try:
            await p.send_and_wait("aio-plain", b"x")
        finally:
            await p.stop()

    asyncio.run(aio())


def test_principal_reaches_the_authorizer(sasl: SaslCluster) -> None:
    """alice gets WRITE on her topic; bob, authenticated as well, is denied it (User:bob, not ANONYMOUS)."""
    topic = f"acl-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(sasl.client(user="admin"))
    binding = AclBinding(CkResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.ALL, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(30)
    assert _produce(sasl.client(user="admin"), topic, 1) == [None]  # creates the topic
    assert _produce(sasl.client(user="alice"), topic, 1) == [None]
    denied = _produce({**sasl.client(user="bob"), "message.timeout.ms": 5000}, topic, 1)
    assert len(denied) == 1 and denied[0] is not None
    assert denied[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, denied[0]


# -- the state machine -------------------------------------------------------------------------


def test_v0_handshake_then_bare_tokens(sasl: SaslCluster) -> None:
    """SaslHandshake v0: the PLAIN token follows as a bare frame, answered by a bare (empty) frame."""
    with connect(sasl.sasl) as sock:
        response = roundtrip(sock, SaslHandshakeV0(mechanism="PLAIN"))
        assert response.error_code == 0 and "PLAIN" in response.mechanisms
        sock.sendall(frame(_plain("alice", "alice-secret")))
        assert read_frame(sock) == b""
        assert _metadata_works(sock)


def test_v0_bare_token_with_a_wrong_password_closes_silently(sasl: SaslCluster) -> None:
    with connect(sasl.sasl) as sock:
        roundtrip(sock, SaslHandshakeV0(mechanism="PLAIN"))
        sock.sendall(frame(_plain("alice", "nope")))
        assert wait_closed(sock)


def test_requests_before_authentication_close_the_connection(sasl: SaslCluster) -> None:
    with connect(sasl.sasl) as sock:
        sock.sendall(encode_request(MetadataRequest(topics=()), 1))
        assert wait_closed(sock)


def test_unsupported_mechanism_gets_the_enabled_list_then_a_close(sasl: SaslCluster) -> None:
    with connect(sasl.sasl) as sock:
        response = _handshake(sock, "GSSAPI")
        assert response.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert list(response.mechanisms) == ["PLAIN", "OAUTHBEARER", "SCRAM-SHA-256"]
        assert wait_closed(sock)


def test_wrong_password_answers_sasl_authentication_failed_and_closes(sasl: SaslCluster) -> None:
    with connect(sasl.sasl) as sock:
        assert _handshake(sock).error_code == 0
        response = _authenticate(sock, _plain("alice", "nope"))
        assert response.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert response.error_message == "Authentication failed: Invalid username or password"
        assert wait_closed(sock)


def test_sasl_requests_on_a_plaintext_listener_are_illegal_state(sasl: SaslCluster) -> None:
    with connect(sasl.plain) as sock:
        assert _handshake(sock).error_code == 34  # ILLEGAL_SASL_STATE
        assert _metadata_works(sock)


# -- KIP-368 -----------------------------------------------------------------------------------


def test_session_lifetime_reauthentication_and_expiry(sasl: SaslCluster) -> None:
    with connect(sasl.sasl) as sock:
        assert _handshake(sock).error_code == 0
        first = _authenticate(sock, _plain("alice", "alice-secret"))
        assert first.error_code == 0
        assert first.session_lifetime.total_seconds() * 1000 == REAUTH_MS
        assert _metadata_works(sock)
        # Re-authenticate on the same connection: a new session.
        assert _handshake(sock).error_code == 0
        again = _authenticate(sock, _plain("alice", "alice-secret"), 3)
        assert again.error_code == 0 and again.session_lifetime.total_seconds() * 1000 == REAUTH_MS
        renewed = time.monotonic()
        # The session ends REAUTH_MS after the re-authentication: requests work until then, and the
        # first request after it closes the connection.
        closed_after: float | None = None
        deadline = renewed + REAUTH_MS / 1000 + 10
        while time.monotonic() < deadline:
            sock.sendall(encode_request(MetadataRequest(topics=()), 9))
            if read_frame(sock) is None:
                closed_after = time.monotonic() - renewed
                break
            time.sleep(0.2)  # paces the probe requests; the condition is the close above
        assert closed_after is not None, "the connection outlived its session"
        assert closed_after >= REAUTH_MS / 1000 - 0.3
    wait_for(lambda: "expired without re-authentication" in sasl.broker.log_text(), timeout=10,
             what="the broker's line about the expired session")


def test_reauthentication_cannot_change_principal_or_mechanism(sasl: SaslCluster) -> None:
    with connect(sasl.sasl) as sock:
        _handshake(sock)
        assert _authenticate(sock, _plain("alice", "alice-secret")).error_code == 0
        _handshake(sock)
        response = _authenticate(sock, _plain("bob", "bob-secret"), 3)
        assert response.error_code == 58
        assert response.error_message == "Cannot change principals during re-authentication from User:alice: User:bob"
        assert wait_closed(sock)
    with connect(sasl.sasl) as sock:
        _handshake(sock)
        assert _authenticate(sock, _plain("alice", "alice-secret")).error_code == 0
        assert _handshake(sock, "SCRAM-SHA-256").error_code == 0  # Kafka answers, then refuses the token
        assert wait_closed(sock)


def test_confluent_kafka_reauthenticates_instead_of_being_cut_off(sasl: SaslCluster) -> None:
    """librdkafka re-authenticates before the 3 s session ends (KIP-368): producing for three
    sessions' time loses nothing and the broker never closes an expired session."""
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    before = sasl.broker.log_text().count("expired without re-authentication")
    producer = Producer(sasl.client(user="admin"))
    errors: list[KafkaError | None] = []
    end = time.monotonic() + 3 * REAUTH_MS / 1000
    sent = 0
    while time.monotonic() < end:
        producer.produce(topic, b"x", on_delivery=lambda err, _msg: errors.append(err))
        sent += 1
        producer.poll(0.1)
    producer.flush(30)
    assert errors == [None] * sent
    assert sasl.broker.log_text().count("expired without re-authentication") == before


# -- OAUTHBEARER -------------------------------------------------------------------------------


def _jws(claims: dict[str, Any]) -> str:
    def b64(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    return f"{b64({'alg': 'none'})}.{b64(claims)}."


def _oauth_token(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def test_oauthbearer_unsecured_with_confluent_kafka(sasl: SaslCluster) -> None:
    config = {"bootstrap.servers": sasl.sasl, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
              "enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": "principal=admin"}
    assert _produce(config, f"oauth-{uuid.uuid4().hex[:8]}", 2) == [None, None]


def test_oauthbearer_token_expiry_bounds_the_session_and_expired_tokens_are_refused(sasl: SaslCluster) -> None:
    now = time.time()
    with connect(sasl.sasl) as sock:
        assert _handshake(sock, "OAUTHBEARER").error_code == 0
        response = _authenticate(sock, _oauth_token(_jws({"sub": "carol", "iat": now, "exp": now + 60})))
        assert response.error_code == 0
        assert 50_000 < response.session_lifetime.total_seconds() * 1000 <= 60_000
        assert _metadata_works(sock)
    with connect(sasl.sasl) as sock:
        _handshake(sock, "OAUTHBEARER")
        challenge = _authenticate(sock, _oauth_token(_jws({"sub": "carol", "exp": now - 60})))
        assert challenge.error_code == 0 and json.loads(challenge.auth_bytes) == {"status": "invalid_token"}
        refused = _authenticate(sock, b"\x01", 3)
        assert refused.error_code == 58 and refused.error_message == '{"status":"invalid_token"}'
        assert wait_closed(sock)
    with connect(sasl.sasl) as sock:  # a signed token is not an unsecured one
        _handshake(sock, "OAUTHBEARER")
        token = _jws({"sub": "carol", "exp": now + 60}).replace(
            base64.urlsafe_b64encode(b'{"alg": "none"}').decode().rstrip("="),
            base64.urlsafe_b64encode(b'{"alg": "HS256"}').decode().rstrip("=")) + "c2ln"
        assert json.loads(_authenticate(sock, _oauth_token(token)).auth_bytes) == {"status": "invalid_token"}
