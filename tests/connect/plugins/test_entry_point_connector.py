"""A third-party connector installed as a package (tests/data/strom_test_plugin, entry point
group ``strom.plugins``) is found through the real plugin manager with autoload: it resolves by
its alias, simple and qualified names, is listed like Kafka's /connector-plugins, and runs in a
StandaloneHerder on the bundled broker, resuming from its committed offsets after a restart.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from strom.connect.exceptions import PluginNotFoundError
from strom.connect.plugins import PluginDesc, PluginRegistry, PluginType
from strom.connect.runtime.config import WorkerConfig
from strom.connect.runtime.herder import ConnectorTaskId
from strom.connect.runtime.standalone import StandaloneHerder
from strom.core.testing import BrokerProcess, wait_for
from strom.plugins.manager import get_plugin_manager, plugin_names

connect_mod = pytest.importorskip(
    "strom_test_plugin.connect",
    reason="install the test plugin: pip install --no-deps -e tests/data/strom_test_plugin")
CountdownSourceConnector = connect_mod.CountdownSourceConnector
QUALIFIED = "strom_test_plugin.connect.CountdownSourceConnector"


@pytest.fixture(scope="module")
def registry() -> PluginRegistry:
    # Autoload explicitly on, whatever STROM_DISABLE_PLUGIN_AUTOLOAD says in the environment.
    pm = get_plugin_manager(autoload=True, env={})
    assert "strom_test_plugin" in plugin_names(pm)  # registered from its entry point
    return PluginRegistry(pm)


@pytest.mark.parametrize("name", ["CountdownSource", "CountdownSourceConnector", QUALIFIED])
def test_resolves_by_alias_and_names(registry: PluginRegistry, name: str) -> None:
    assert registry.connector_class(name) is CountdownSourceConnector


def test_listed_as_source_plugin_with_its_version(registry: PluginRegistry) -> None:
    assert PluginDesc(QUALIFIED, PluginType.SOURCE, "0.1.0") in registry.plugin_descs("source")
    # The built-ins are still there beside it.
    assert registry.connector_class("FileStreamSource").__name__ == "FileStreamSourceConnector"


def test_not_found_without_autoload() -> None:
    """The connector comes from the entry point only: without autoload it is unknown."""
    without = PluginRegistry(get_plugin_manager(autoload=False, env={}))
    with pytest.raises(PluginNotFoundError, match="CountdownSource"):
        without.connector_class("CountdownSource")


def values_in(bootstrap: str, topic: str) -> list[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"plug-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "log_level": 0})
    try:
        end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[str] = []
        deadline = time.monotonic() + 20
        while len(out) < end and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                out.append((msg.value() or b"").decode())
        return out
    finally:
        consumer.close()


def test_runs_in_standalone_herder(registry: PluginRegistry, broker: BrokerProcess, tmp_path: Path,
                                   topic_name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    config = WorkerConfig.from_mapping({
        "bootstrap.servers": broker.bootstrap, "offset.storage.file.filename": str(tmp_path / "offsets.dat"),
        "offset.flush.interval.ms": "200",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
    })
    conn = {"name": "countdown", "connector.class": "CountdownSource", "tasks.max": "2",
            "topic": topic_name, "count": "12", "prefix": "cd"}
    expected = sorted(f"cd-{t}-{n}" for t in range(2) for n in range(12))

    herder = StandaloneHerder(config, registry)
    herder.start()
    try:
        created, info = herder.put_connector_config("countdown", conn, False)
        assert created and info.name == "countdown"
        wait_for(lambda: sorted(values_in(broker.bootstrap, topic_name)) == expected, what="24 countdown records")
        status = herder.connector_status("countdown").to_json()
        assert status["type"] == "source" and status["connector"]["state"] == "RUNNING"
        assert [t["state"] for t in status["tasks"]] == ["RUNNING", "RUNNING"]
    finally:
        herder.stop()  # a clean stop commits the last offsets ({"left": 0}) after flushing

    # A restarted herder on the same offsets file resumes below the committed countdown:
    # raising count must not re-send anything already sent, only the new top values.
    herder = StandaloneHerder(config, PluginRegistry(get_plugin_manager(autoload=True, env={})))
    herder.start()
    try:
        herder.put_connector_config("countdown", {**conn, "count": "15"}, False)
        # Both tasks started from the committed offsets ({"left": 0}): next to emit is -1, so
        # nothing can be sent again; a restart that missed the offsets would start at 14.
        def resumed_at_the_bottom() -> bool:
            tasks = [herder.worker._tasks.get(ConnectorTaskId("countdown", i)) for i in range(2)]
            return all(t is not None and getattr(getattr(t.task, "task", None), "next", None) == -1 for t in tasks)
        wait_for(resumed_at_the_bottom, what="the restarted tasks resumed from the committed offsets")
        assert sorted(values_in(broker.bootstrap, topic_name)) == expected
        assert herder.connector_status("countdown").to_json()["tasks"][0]["state"] == "RUNNING"
    finally:
        herder.stop()
