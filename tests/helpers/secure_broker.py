"""Helpers for tests of strom's TLS and SASL listeners (tests/security).

``listener_ports`` reads each listener's bound port from the broker's "listening on" log line
(only the first listener is announced on stdout); ``jaas_plain`` / ``jaas_scram`` build Kafka's
JAAS config strings; ``client_keystore`` writes a Java PEM key store (key + certificate) for a
client of :mod:`tls_certs`; ``consume_values`` reads a topic back through a secured consumer.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer

from strom.core.testing import BrokerProcess, wait_for

_LISTENING = re.compile(r"listening on (\w+)://[^:]+:(\d+) ")


def listener_ports(broker: BrokerProcess) -> dict[str, int]:
    """Listener name -> port, from the broker's log (it logs every listener once it accepts)."""
    return dict(wait_for(lambda: {m.group(1): int(m.group(2)) for m in _LISTENING.finditer(broker.log_text())},
                         timeout=30, what="the broker's 'listening on' lines"))


def jaas_plain(users: dict[str, str], *, username: str = "admin", password: str = "admin-secret") -> str:
    """PlainLoginModule with the client credentials ``username``/``password`` and, for a broker's
    listener, the ``user_<name>`` options of ``users`` (none: a client's config)."""
    options = "".join(f' user_{name}="{pw}"' for name, pw in users.items())
    return (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{username}" '
            f'password="{password}"{options};')


def jaas_scram(username: str, password: str) -> str:
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{username}" password="{password}";'


def client_keystore(cert: Path, key: Path) -> Path:
    """A PEM key store file (private key, then certificate) beside ``cert``, as Java clients read them."""
    out = cert.with_suffix(".keystore.pem")
    out.write_bytes(key.read_bytes() + cert.read_bytes())
    return out


def consume_values(config: dict[str, Any], topic: str, n: int, *, timeout: float = 30) -> list[bytes]:
    """The values of the first ``n`` records of ``topic``, read by a new consumer group with
    ``config`` (its security settings and bootstrap) from the earliest offset. Poll errors (an
    authentication still under way) are skipped until the deadline."""
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []

    def poll() -> bool:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value() or b"")
        return len(got) >= n

    try:
        wait_for(poll, timeout=timeout, what=f"{n} records of {topic} with {config.get('security.protocol')}",
                 interval=0)
    finally:
        consumer.close()
    return got
