"""Helpers for tests of the runtimes' client security and of Connect REST security.

:class:`ScramBroker` starts strom's broker with a PLAINTEXT listener (for the test's own admin,
which creates the SCRAM users) and a SASL_SSL listener (TLS from a throwaway CA of
:mod:`tls_certs`, SCRAM-SHA-256/512); :meth:`ScramBroker.kafka_props` gives a client's settings
by Kafka's names (``sasl.jaas.config`` with ScramLoginModule, a PEM ``ssl.truststore.location``),
as a Java client, a worker properties file or a Spark option would hold them — the runtimes
must translate them. :func:`basic_auth_jaas` writes a Connect credentials file and the JAAS file
naming it; :func:`rest_call` is a small https client with basic credentials. Certificates,
those of a mutual-TLS REST test included, come from :mod:`tls_certs`.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)
from secure_broker import jaas_scram, listener_ports
from tls_certs import Pki, make_pki

from strom.core.testing import BrokerProcess

BASIC_AUTH_EXTENSION = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
PROPERTY_FILE_LOGIN_MODULE = "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule"


class ScramBroker:
    """A broker with PLAINTEXT (admin) and SASL_SSL/SCRAM listeners; ``users`` are created at start."""

    def __init__(self, work_dir: Path, users: dict[str, str]) -> None:
        self.pki: Pki = make_pki(work_dir / "pki")
        self.users = users
        self.proc = BrokerProcess(work_dir / "broker", config={
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
            "listener.name.sasl_ssl.ssl.keystore.location": str(self.pki.server_keystore),
            "group.initial.rebalance.delay.ms": "100",
        })
        self.plain = self.secure = ""

    def __enter__(self) -> Self:
        self.proc.__enter__()
        ports = listener_ports(self.proc)
        self.plain = f"127.0.0.1:{ports['PLAINTEXT']}"
        self.secure = f"127.0.0.1:{ports['SASL_SSL']}"
        admin = AdminClient({"bootstrap.servers": self.plain})
        upserts: list[UserScramCredentialAlteration] = [UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                                password.encode()) for user, password in self.users.items()]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(30)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.proc.__exit__(exc_type, exc, tb)

    def kafka_props(self, user: str, password: str | None = None) -> dict[str, str]:
        """A client's SASL_SSL settings by Kafka's (Java client's) names, bootstrap included."""
        return {"bootstrap.servers": self.secure, "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": jaas_scram(user, self.users[user] if password is None else password),
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.pki.ca_cert)}


    def librdkafka_props(self, user: str) -> dict[str, str]:
        """The same for the test's own confluent-kafka clients, by librdkafka's names (independent
        of the translation under test)."""
        return {"bootstrap.servers": self.secure, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": user, "sasl.password": self.users[user], "ssl.ca.location": str(self.pki.ca_cert)}


def basic_auth_jaas(directory: Path, users: dict[str, str]) -> Path:
    """A credentials file (``user=password`` lines) and a JAAS file whose ``KafkaConnect`` section
    names it through PropertyFileLoginModule, as Kafka Connect's docs show; returns the JAAS file."""
    directory.mkdir(parents=True, exist_ok=True)
    creds = directory / "connect.password"
    creds.write_text("".join(f"{user}={password}\n" for user, password in users.items()))
    jaas = directory / "connect_jaas.conf"
    jaas.write_text(f'KafkaConnect {{\n  {PROPERTY_FILE_LOGIN_MODULE} required\n  file="{creds}";\n}};\n')
    return jaas


def rest_call(url: str, method: str = "GET", body: Any = None, *, ca: Path | None = None,
              auth: tuple[str, str] | None = None, timeout: float = 30,
              cert: Path | None = None) -> tuple[int, str, dict[str, str]]:
    """(status, body text, headers) of one REST request; https trusts ``ca`` and presents ``cert``
    (a PEM key store: key and certificate in one file) when given."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    context = ssl.create_default_context(cafile=str(ca)) if ca is not None else None
    if context is not None and cert is not None:
        context.load_cert_chain(str(cert))
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
            return resp.status, resp.read().decode(), dict(resp.headers.items())
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), dict(err.headers.items())
