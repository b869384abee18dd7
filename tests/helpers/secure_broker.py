"""Helpers for tests of strom's TLS and SASL listeners (tests/security).

``listener_ports`` reads each listener's bound port from the broker's "listening on" log line
(only the first listener is announced on stdout); ``jaas_plain`` / ``jaas_scram`` build Kafka's
JAAS config strings; ``client_keystore`` writes a Java PEM key store (key + certificate) for a
client of :mod:`tls_certs`.
"""

from __future__ import annotations

import re
from pathlib import Path

from strom.core.testing import BrokerProcess, wait_for

_LISTENING = re.compile(r"listening on (\w+)://[^:]+:(\d+) ")


def listener_ports(broker: BrokerProcess) -> dict[str, int]:
    """Listener name -> port, from the broker's log (it logs every listener once it accepts)."""
    return dict(wait_for(lambda: {m.group(1): int(m.group(2)) for m in _LISTENING.finditer(broker.log_text())},
                         timeout=30, what="the broker's 'listening on' lines"))


def jaas_plain(users: dict[str, str], *, username: str = "admin", password: str = "admin-secret") -> str:
    options = " ".join(f'user_{name}="{pw}"' for name, pw in users.items())
    return (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{username}" '
            f'password="{password}" {options};')


def jaas_scram(username: str, password: str) -> str:
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{username}" password="{password}";'


def client_keystore(cert: Path, key: Path) -> Path:
    """A PEM key store file (private key, then certificate) beside ``cert``, as Java clients read them."""
    out = cert.with_suffix(".keystore.pem")
    out.write_bytes(key.read_bytes() + cert.read_bytes())
    return out
