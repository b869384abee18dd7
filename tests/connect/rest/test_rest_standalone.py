"""The REST API over the real StandaloneHerder on the bundled broker, through a real HTTP client.

A FileStreamSource -> topic -> FileStreamSink pipeline is created, inspected, stopped, its
offsets read and altered, and deleted, all over HTTP, as a Kafka Connect user would.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from strom.connect.plugins import PluginRegistry
from strom.connect.rest import RestServer
from strom.connect.runtime.config import WorkerConfig
from strom.connect.runtime.standalone import StandaloneHerder
from strom.core.testing import BrokerProcess, wait_for


@pytest.fixture
def worker(broker: BrokerProcess, tmp_path: Path) -> Iterator[tuple[StandaloneHerder, str]]:
    config = WorkerConfig.from_mapping({
        "bootstrap.servers": broker.bootstrap, "listeners": "http://127.0.0.1:0",
        "offset.storage.file.filename": str(tmp_path / "offsets.dat"), "offset.flush.interval.ms": "200",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
    })
    herder = StandaloneHerder(config, PluginRegistry())
    rest = RestServer.from_worker_config(herder, config)
    herder.start()
    rest.start()
    try:
        yield herder, rest.url
    finally:
        rest.stop()
        herder.stop()


def test_file_pipeline_over_rest(worker: tuple[StandaloneHerder, str], tmp_path: Path, topic_name: str) -> None:
    _, url = worker
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    lines = [f"line {i}" for i in range(200)]
    src.write_text("".join(line + "\n" for line in lines))

    root = requests.get(url + "/", timeout=30).json()
    assert root["kafka_cluster_id"] and root["version"]
    assert requests.get(url + "/health", timeout=30).json()["status"] == "healthy"

    r = requests.post(url + "/connectors", timeout=30, json={"name": "src", "config": {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "file": str(src),
        "topic": topic_name, "tasks.max": "1"}})
    assert r.status_code == 201, r.text
    assert r.json()["type"] == "source" and r.json()["config"]["name"] == "src"
    r = requests.put(url + "/connectors/sink/config", timeout=30, json={
        "connector.class": "FileStreamSink", "file": str(dst), "topics": topic_name})
    assert r.status_code == 201, r.text
    assert requests.post(url + "/connectors", timeout=30,
                         json={"name": "src", "config": {"connector.class": "FileStreamSource",
                                                         "topic": "x"}}).status_code == 409

    wait_for(lambda: dst.exists() and dst.read_text().splitlines() == lines, what="sink file")
    status = wait_for(lambda: (s := requests.get(url + "/connectors/src/status", timeout=30).json())
                      and s["tasks"] and s["tasks"][0]["state"] == "RUNNING" and s, what="RUNNING")
    assert status["connector"]["state"] == "RUNNING" and status["type"] == "source"
    assert requests.get(url + "/connectors/src/tasks/0/status", timeout=30).json()["state"] == "RUNNING"
    tasks = requests.get(url + "/connectors/src/tasks", timeout=30).json()
    assert tasks[0]["id"] == {"connector": "src", "task": 0} and tasks[0]["config"]["file"] == str(src)
    assert sorted(requests.get(url + "/connectors", timeout=30).json()) == ["sink", "src"]
    expanded = requests.get(url + "/connectors?expand=status&expand=info", timeout=30).json()
    assert expanded["sink"]["info"]["type"] == "sink" and expanded["sink"]["status"]["name"] == "sink"
    wait_for(lambda: requests.get(url + "/connectors/src/topics", timeout=30).json()
             == {"src": {"topics": [topic_name]}}, what="active topics")

    # Source offsets are Kafka's FileStreamSource shape.
    size = src.stat().st_size
    wait_for(lambda: requests.get(url + "/connectors/src/offsets", timeout=30).json() == {
        "offsets": [{"partition": {"filename": str(src)}, "offset": {"position": size}}]}, what="offsets")

    # Offsets can be changed only once stopped; then a restart re-reads from the new position.
    new: dict[str, Any] = {"offsets": [{"partition": {"filename": str(src)}, "offset": {"position": size - len("line 199\n")}}]}
    running = requests.patch(url + "/connectors/src/offsets", json=new, timeout=30)
    assert running.status_code == 400 and running.json()["error_code"] == 400
    assert requests.put(url + "/connectors/src/stop", timeout=30).status_code == 202
    wait_for(lambda: requests.get(url + "/connectors/src/status", timeout=30).json()["connector"]["state"]
             == "STOPPED", what="STOPPED")
    r = requests.patch(url + "/connectors/src/offsets", json=new, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json() == {"message": "The offsets for this connector have been altered successfully"}
    assert requests.put(url + "/connectors/src/resume", timeout=30).status_code == 202
    wait_for(lambda: dst.read_text().splitlines() == [*lines, "line 199"], what="replayed last line")

    assert requests.post(url + "/connectors/src/restart?includeTasks=true", timeout=30).status_code == 202
    assert requests.post(url + "/connectors/src/tasks/0/restart", timeout=30).status_code == 204
    assert requests.put(url + "/connectors/sink/pause", timeout=30).status_code == 202
    wait_for(lambda: requests.get(url + "/connectors/sink/status", timeout=30).json()["connector"]["state"]
             == "PAUSED", what="PAUSED")
    assert requests.delete(url + "/connectors/src", timeout=30).status_code == 204
    assert requests.delete(url + "/connectors/sink", timeout=30).status_code == 204
    assert requests.get(url + "/connectors", timeout=30).json() == []
    assert requests.get(url + "/connectors/src", timeout=30).status_code == 404


def test_plugins_config_and_validate(worker: tuple[StandaloneHerder, str]) -> None:
    _, url = worker
    plugins = requests.get(url + "/connector-plugins", timeout=30).json()
    classes = {p["class"] for p in plugins}
    assert {"org.apache.kafka.connect.file.FileStreamSourceConnector",
            "org.apache.kafka.connect.file.FileStreamSinkConnector"} <= classes
    assert {p["type"] for p in plugins} == {"source", "sink"}
    every = requests.get(url + "/connector-plugins?connectorsOnly=false", timeout=30).json()
    assert {"converter", "transformation", "predicate"} <= {p["type"] for p in every}

    keys = requests.get(url + "/connector-plugins/FileStreamSource/config", timeout=30).json()
    by_name = {k["name"]: k for k in keys}
    assert by_name["topic"]["required"] is True and by_name["topic"]["type"] == "STRING"
    assert by_name["batch.size"]["default_value"] == "2000" and by_name["batch.size"]["type"] == "INT"
    insert_field = requests.get(url + "/connector-plugins/InsertField$Value/config", timeout=30)
    assert insert_field.status_code == 200 and isinstance(insert_field.json(), list)
    assert requests.get(url + "/connector-plugins/NoSuchThing/config", timeout=30).status_code == 404

    bad = requests.put(url + "/connector-plugins/FileStreamSource/config/validate", timeout=30,
                       json={"connector.class": "FileStreamSource", "file": "/tmp/x"}).json()
    assert bad["name"] == "FileStreamSource" and bad["error_count"] >= 1
    topic_errors = [c["value"]["errors"] for c in bad["configs"] if c["value"]["name"] == "topic"]
    assert topic_errors and topic_errors[0]
    good = requests.put(url + "/connector-plugins/FileStreamSource/config/validate", timeout=30,
                        json={"name": "v", "file": "/tmp/x", "topic": "t"}).json()
    assert good["error_count"] == 0


def test_invalid_connector_is_rejected(worker: tuple[StandaloneHerder, str]) -> None:
    _, url = worker
    r = requests.post(url + "/connectors", timeout=30,
                      json={"name": "bad", "config": {"connector.class": "FileStreamSource", "file": "/x"}})
    assert r.status_code == 400 and "topic" in r.json()["message"]
    r = requests.post(url + "/connectors", timeout=30,
                      json={"name": "bad", "config": {"connector.class": "NoSuchConnector"}})
    assert r.status_code == 400
    assert requests.get(url + "/connectors", timeout=30).json() == []
