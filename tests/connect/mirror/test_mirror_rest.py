"""MirrorSourceConnector in a distributed strom Connect worker, created through the REST API
with the JSON Kafka documents for running MM2 connectors on a Connect cluster (Kafka's class
name, its keys); the connector and its tasks run, validation lists MM2's keys, records arrive."""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from compat_workers import StromConnectProcess

from strom.core.testing import wait_for

from .conftest import Mirror

BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"


def _call(method: str, url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        text = resp.read().decode()
        return json.loads(text) if text else None


def test_mirror_source_through_the_rest_api(mirror: Mirror, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    topic = f"rest-{tag}"
    mirror.create_topic(mirror.a, topic, 2)
    mirror.produce(mirror.a, topic, [{"partition": i % 2, "value": f"v{i}".encode()} for i in range(500)])
    worker = StromConnectProcess({
        "bootstrap.servers": mirror.b, "group.id": f"connect-{tag}", "config.storage.topic": f"cfg-{tag}",
        "offset.storage.topic": f"off-{tag}", "status.storage.topic": f"st-{tag}",
        "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1", "key.converter": BYTES, "value.converter": BYTES,
        "header.converter": BYTES}, tmp_path / "worker")
    with worker:
        plugins = {p["class"] for p in _call("GET", f"{worker.url}/connector-plugins")}
        assert {"org.apache.kafka.connect.mirror.MirrorSourceConnector",
                "org.apache.kafka.connect.mirror.MirrorCheckpointConnector",
                "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector"} <= plugins
        config = {  # Kafka's MirrorConnectorConfig javadoc example, pointed at our clusters
            "name": "MirrorSourceConnector",
            "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
            "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
            "source.cluster.alias": "A", "target.cluster.alias": "B",
            "source.cluster.bootstrap.servers": mirror.a, "target.cluster.bootstrap.servers": mirror.b,
            "topics": f"rest-{tag}.*", "tasks.max": "2", "sync.topic.acls.enabled": "false",
        }
        validated = _call("PUT", f"{worker.url}/connector-plugins/MirrorSourceConnector/config/validate", config)
        assert validated["error_count"] == 0
        assert {"offset.lag.max", "topics.exclude", "sync.topic.configs.enabled"} <= \
            {c["definition"]["name"] for c in validated["configs"]}
        _call("POST", f"{worker.url}/connectors", {"name": config["name"], "config": config})

        def running() -> bool:
            st = _call("GET", f"{worker.url}/connectors/MirrorSourceConnector/status")
            return st["connector"]["state"] == "RUNNING" and len(st["tasks"]) == 2 and \
                all(t["state"] == "RUNNING" for t in st["tasks"])

        wait_for(running, 60, "connector and 2 tasks RUNNING", detail=lambda: worker.log_tail(20))
        wait_for(lambda: sum(mirror.end_offsets(mirror.b, f"A.{topic}").values()) == 500, 60, "records on B",
                 detail=lambda: worker.log_tail(20))
