"""``strom dev`` defaults ``group.initial.rebalance.delay.ms`` to 0, as Kafka's quickstart
``config/server.properties`` does, so a development group's first join does not wait 3 s;
``strom broker start`` keeps Kafka's default of 3000 ms. Checked on what the running broker
reports (DescribeConfigs of the BROKER resource through confluent-kafka), not on timing: the
dev default is a static broker setting (STATIC_BROKER_CONFIG, as Kafka shows a value from its
properties file), an ``--override`` still wins over it, and the plain broker shows the default
with source DEFAULT_CONFIG.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from strom.core.testing import READY_PREFIX, BrokerProcess

KEY = "group.initial.rebalance.delay.ms"


def broker_setting(bootstrap: str, key: str = KEY) -> tuple[str, str]:
    """The broker's value and source of ``key`` as DescribeConfigs reports it (node 1)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    res = ConfigResource(ResourceType.BROKER, "1")
    entries = admin.describe_configs([res], request_timeout=30)[res].result(timeout=60)
    entry = entries[key]
    return entry.value, ConfigSource(entry.source).name


def test_dev_defaults_the_initial_rebalance_delay_to_zero(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "dev") as proc:
        assert broker_setting(proc.bootstrap) == ("0", "STATIC_BROKER_CONFIG")


def test_an_override_wins_over_the_dev_default(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "dev", config={KEY: "3000"}) as proc:
        assert broker_setting(proc.bootstrap) == ("3000", "STATIC_BROKER_CONFIG")


@pytest.fixture
def started_broker(tmp_path: Path) -> Iterator[str]:
    """``strom broker start`` on a formatted node whose properties leave the delay unset; its
    bootstrap address."""
    props = tmp_path / "server.properties"
    props.write_text(
        "process.roles=broker,controller\n"
        "node.id=1\n"
        "listeners=PLAINTEXT://127.0.0.1:0\n"
        "controller.quorum.voters=1@127.0.0.1:0\n"
        f"log.dirs={tmp_path / 'logs'}\n"
        f"metadata.log.dir={tmp_path / 'meta'}\n")
    cli = [sys.executable, "-m", "strom.core.cli"]
    formatted = subprocess.run([*cli, "storage", "format", "--config", str(props)], capture_output=True,
                               text=True, timeout=120, check=False)
    assert formatted.returncode == 0, formatted.stderr
    proc = subprocess.Popen([*cli, "broker", "start", "--config", str(props)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            start_new_session=True)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    try:
        while not (line := lines.get(timeout=60)).startswith(READY_PREFIX):
            pass
        yield line.strip()[len(READY_PREFIX):]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_broker_start_keeps_kafkas_default(started_broker: str) -> None:
    assert broker_setting(started_broker) == ("3000", "DEFAULT_CONFIG")
