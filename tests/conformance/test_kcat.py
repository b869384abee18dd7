"""kcat (the librdkafka command-line client) against the broker: metadata, keyed produce, read back."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from strom.core.testing import BrokerProcess

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat not installed (scripts/setup-test-deps.sh installs it)")


def _kcat(*args: str, stdin: str | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    assert KCAT is not None
    proc = subprocess.run([KCAT, *args], input=stdin, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"kcat {' '.join(args)} exited {proc.returncode}: {proc.stderr}"
    return proc


def test_kcat_produce_list_consume(broker: BrokerProcess, topic_name: str) -> None:
    lines = [f"key{i}:value {i} with spaces" for i in range(25)] + ["k-colon:v:with:colons", "lastkey:"]
    # -K: splits each line at the first colon into key and value; the topic is auto-created.
    _kcat("-P", "-b", broker.bootstrap, "-t", topic_name, "-K:", "-X", "enable.idempotence=false",
          stdin="\n".join(lines) + "\n")

    listing = _kcat("-L", "-b", broker.bootstrap).stdout
    host_port = broker.bootstrap
    assert "1 brokers:" in listing, listing
    assert f"at {host_port}" in listing or f"at {host_port.replace('127.0.0.1', 'localhost')}" in listing, listing
    assert f'topic "{topic_name}" with 1 partitions' in listing, listing

    out = _kcat("-C", "-b", broker.bootstrap, "-t", topic_name, "-o", "beginning", "-e", "-f", "%k:%s\n").stdout
    assert out.splitlines() == lines

    # Offsets as kcat prints them: contiguous from 0.
    offs = _kcat("-C", "-b", broker.bootstrap, "-t", topic_name, "-o", "beginning", "-e", "-f", "%o\n").stdout
    assert offs.split() == [str(i) for i in range(len(lines))]
