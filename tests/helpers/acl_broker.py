"""A strom broker for ACL tests: StandardAuthorizer, SASL/PLAIN users, fixed ports.

Two listeners on ports chosen up front (so a restart keeps them): PLAINTEXT, whose principal
``User:ANONYMOUS`` is a super user as in Kafka's own setups of this kind (the reference broker's
inter-broker traffic needs one), and SASL_PLAINTEXT with the PLAIN users of :data:`USERS`
(``User:admin`` is a super user too; ``alice`` and ``bob`` have only the ACLs a test gives
them). Used by tests/security/test_acl_*.py and tests/differential/test_acls.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from diff_wire import WireClient, kio_schema
from secure_broker import jaas_plain

from strom.core.testing import BrokerProcess, free_port

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
SUPER_USERS = "User:admin;User:ANONYMOUS"


def security_config() -> dict[str, str]:
    """The SASL and authorizer keys (Kafka's names) both strom and Kafka take."""
    return {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas_plain(USERS),
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": SUPER_USERS,
    }


class AclBroker:
    """A :class:`BrokerProcess` with the two listeners; ``sasl`` / ``plain`` are their bootstraps."""

    def __init__(self, data_dir: Path, **extra: str) -> None:
        plain_port, sasl_port = free_port(), free_port()
        self.plain = f"127.0.0.1:{plain_port}"
        self.sasl = f"127.0.0.1:{sasl_port}"
        self.process = BrokerProcess(data_dir, port=plain_port, config={
            "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            **security_config(), **extra})

    def start(self) -> AclBroker:
        self.process.start()
        return self

    def restart(self) -> None:
        self.process.restart()

    def stop(self) -> None:
        self.process.stop()

    def __enter__(self) -> AclBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.process.stop()

    def client(self, user: str, **extra: Any) -> dict[str, Any]:
        """confluent-kafka settings for PLAIN ``user`` on the SASL listener."""
        return {"bootstrap.servers": self.sasl, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": user, "sasl.password": USERS[user], **extra}

    def java_client(self, user: str) -> dict[str, str]:
        """The same for Kafka's Java clients (kafka-acls.sh --command-config, ClientCheck --prop)."""
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": jaas_plain({}, username=user, password=USERS[user])}


def sasl_wire_client(bootstrap: str, user: str) -> WireClient:
    """A raw wire client (tests/helpers/diff_wire.py) authenticated as PLAIN ``user``."""
    client = WireClient(bootstrap)
    handshake = kio_schema("sasl_handshake", 1)
    assert client.request(handshake.SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    authenticate = kio_schema("sasl_authenticate", 2)
    token = b"\0" + user.encode() + b"\0" + USERS[user].encode()
    assert client.request(authenticate.SaslAuthenticateRequest(auth_bytes=token)).error_code == 0
    return client
