"""A broker that only talks TLS and SCRAM: a throwaway CA, a SASL_SSL listener, a user, ACLs, produce and consume.

    python examples/secure_broker.py [--records 100]

1. **A throwaway CA** and a server certificate for 127.0.0.1/localhost, made here with the
   ``cryptography`` package (``pip install 'strom[test]'`` brings it) in a temporary directory;
   the broker reads its key store as one PEM file (``ssl.keystore.location``), clients trust the CA.
2. **A broker** with two listeners: ``SASL_SSL`` for clients (TLS + SCRAM-SHA-256 / SCRAM-SHA-512)
   and ``PLAINTEXT`` on 127.0.0.1 for the administrator (an operator's loopback port; leave it
   out in production and create the first user with ``strom storage format --add-scram``).
3. **A user**: ``alice`` gets a SCRAM-SHA-512 credential through AlterUserScramCredentials (what
   ``kafka-configs --alter --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users
   --entity-name alice`` sends). Only salted keys are stored, as records of the metadata log.
4. **ACLs**: the broker runs Kafka's StandardAuthorizer
   (``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer``) with the
   loopback administrator (``User:ANONYMOUS`` on PLAINTEXT) as its only super user, so alice can
   do nothing until granted: her first produce is refused with TOPIC_AUTHORIZATION_FAILED, then
   CreateAcls gives her WRITE and READ on the topic and READ on her group (what ``kafka-acls
   --add --allow-principal User:alice --producer --consumer --topic payments --group ...`` sends).
5. **Produce and consume** as alice over SASL_SSL with confluent-kafka; then a wrong password is
   shown to be refused with Kafka's SASL_AUTHENTICATION_FAILED message. The script checks every
   record and exits non-zero if one differs.

docs/security.md explains every key used here.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import logging
import re
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from strom.core.testing import BrokerProcess, wait_for

log = logging.getLogger("secure-broker-example")
TOPIC, USER, PASSWORD = "payments", "alice", "alice-secret"


def make_ca_and_keystore(directory: Path) -> tuple[Path, Path]:
    """A CA certificate and the broker's PEM key store (private key, certificate, CA)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "strom example CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    server = (x509.CertificateBuilder()
              .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
              .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
              .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                          x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                             critical=False)
              .sign(ca_key, hashes.SHA256()))
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    ca_path, keystore = directory / "ca.pem", directory / "broker.keystore.pem"
    ca_path.write_bytes(ca_pem)
    keystore.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption())
                         + server.public_bytes(serialization.Encoding.PEM) + ca_pem)
    keystore.chmod(0o600)
    return ca_path, keystore


def broker_config(keystore: Path) -> dict[str, str]:
    return {
        "listeners": "SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
        "listener.name.sasl_ssl.ssl.keystore.location": str(keystore),
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        # Sessions last an hour; clients re-authenticate on the same connection (KIP-368).
        "connections.max.reauth.ms": "3600000",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",  # only the loopback administrator's PLAINTEXT listener
    }


def grant_acls(admin: AdminClient, user: str, topic: str, group: str) -> None:
    """WRITE and READ on ``topic`` and READ on ``group`` for ``User:<user>`` from any host."""
    principal = f"User:{user}"
    bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*", op,
                           AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.READ)]
    bindings.append(AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, principal, "*",
                               AclOperation.READ, AclPermissionType.ALLOW))
    for future in admin.create_acls(bindings).values():
        future.result(30)


def refused_before_grant(client: dict[str, Any]) -> str:
    """Produce one record as the user before any ACL exists: Kafka's authorization error."""
    errors: list[str] = []
    producer = Producer({**client, "message.timeout.ms": 10000})
    producer.produce(TOPIC, b"too early", on_delivery=lambda err, _msg: errors.append(err.name() if err else "OK"))
    producer.flush(30)
    return errors[0] if errors else "no answer"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with tempfile.TemporaryDirectory(prefix="strom-secure-") as tmp:
        ca, keystore = make_ca_and_keystore(Path(tmp))
        log.info("1. throwaway CA in %s", tmp)
        with BrokerProcess(config=broker_config(keystore)) as broker:
            ports = dict(wait_for(lambda: {m.group(1): int(m.group(2)) for m in re.finditer(
                r"listening on (\w+)://[^:]+:(\d+) ", broker.log_text())}, timeout=30, what="the listeners"))
            secure, admin_port = f"127.0.0.1:{ports['SASL_SSL']}", f"127.0.0.1:{ports['PLAINTEXT']}"
            log.info("2. broker: SASL_SSL on %s, administrator's PLAINTEXT on %s", secure, admin_port)

            admin = AdminClient({"bootstrap.servers": admin_port})
            for future in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                    USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), PASSWORD.encode())]).values():
                future.result(30)
            for future in admin.create_topics([NewTopic(TOPIC, 3, 1)]).values():
                future.result(30)
            log.info("3. user %s has a SCRAM-SHA-512 credential; topic %s created", USER, TOPIC)
            group = f"{USER}-readers"
            client: dict[str, Any] = {"bootstrap.servers": secure, "security.protocol": "SASL_SSL",
                                      "ssl.ca.location": str(ca), "sasl.mechanism": "SCRAM-SHA-512",
                                      "sasl.username": USER, "sasl.password": PASSWORD}
            refusal = refused_before_grant(client)
            if refusal != "TOPIC_AUTHORIZATION_FAILED":
                log.error("alice's produce before any ACL answered %s, not TOPIC_AUTHORIZATION_FAILED", refusal)
                return 1
            grant_acls(admin, USER, TOPIC, group)
            log.info("4. ACLs: %s was refused (%s) until granted WRITE/READ on %s and READ on %s",
                     USER, refusal, TOPIC, group)
            producer = Producer(client)
            sent = [f"payment-{i}".encode() for i in range(args.records)]
            for value in sent:
                producer.produce(TOPIC, value, key=value[-1:])
            if producer.flush(60) != 0:
                log.error("not every record was delivered")
                return 1
            consumer = Consumer({**client, "group.id": group, "auto.offset.reset": "earliest"})
            consumer.subscribe([TOPIC])
            got: list[bytes] = []

            def poll() -> bool:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    got.append(msg.value() or b"")
                return len(got) >= len(sent)

            wait_for(poll, timeout=60, what="every record back", interval=0)
            consumer.close()
            if sorted(got) != sorted(sent):
                log.error("consumed records differ from those produced")
                return 1
            log.info("5. %d records produced and consumed as %s over SASL_SSL", len(got), USER)

            errors: list[KafkaError] = []
            intruder = Producer({**client, "sasl.password": "guess", "error_cb": errors.append,
                                 "client.id": f"intruder-{uuid.uuid4().hex[:4]}"})
            intruder.produce(TOPIC, b"x")
            refusal = wait_for(lambda: intruder.poll(0.2) is not None and next(
                (e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION), None), timeout=30,
                what="the wrong password to be refused")
            intruder.purge()
            log.info("   a wrong password is refused: %s", str(refusal).split(" (after")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
