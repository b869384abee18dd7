"""``strom dev`` defaults ``group.initial.rebalance.delay.ms`` to 0, as Kafka's quickstart
``config/server.properties`` does, so a development group's first join does not wait 3 s;
``strom broker start`` keeps Kafka's default of 3000 ms. Checked on what the running broker
reports (DescribeConfigs of the BROKER resource through confluent-kafka), not on timing: the
dev default is a static broker setting (STATIC_BROKER_CONFIG, as Kafka shows a value from its
properties file), an ``--override`` still wins over it, and the plain broker shows the default
with source DEFAULT_CONFIG.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_broker import broker_start
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from strom.core.testing import BrokerProcess

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
    with broker_start(tmp_path) as bootstrap:
        yield bootstrap


def test_broker_start_keeps_kafkas_default(started_broker: str) -> None:
    assert broker_setting(started_broker) == ("3000", "DEFAULT_CONFIG")
