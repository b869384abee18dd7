"""The Connect worker's /metrics (REST server) under Kafka Connect's names, after a FileStreamSource
-> topic -> FileStreamSink pipeline moved N records on the bundled broker."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from strom.connect.plugins import PluginRegistry
from strom.connect.rest import RestServer
from strom.connect.runtime.config import WorkerConfig
from strom.connect.runtime.standalone import StandaloneHerder
from strom.core.testing import BrokerProcess, wait_for

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "strom.json"


def dashboard_metrics(prefix: str) -> set[str]:
    """The metric names starting with ``prefix`` that the Grafana dashboard's queries use."""
    exprs = [t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p.get("targets", ())]
    return {n for e in exprs for n in re.findall(r"\bkafka_[a-z_]+", e) if n.startswith(prefix)}


@pytest.fixture
def worker(broker: BrokerProcess, tmp_path: Path) -> Iterator[str]:
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
        yield rest.url
    finally:
        rest.stop()
        herder.stop()


def scrape(url: str) -> Samples:
    r = requests.get(url + "/metrics", timeout=30)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain")
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(r.text) for s in family.samples}


def test_connect_worker_and_task_metrics(worker: str, tmp_path: Path, topic_name: str,
                                         caplog: pytest.LogCaptureFixture) -> None:
    url = worker
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    lines = [f"line {i}" for i in range(321)]
    src.write_text("".join(line + "\n" for line in lines))
    empty = scrape(url)
    assert empty[("kafka_connect_connect_worker_metrics_connector_count", frozenset())] == 0
    assert requests.put(url + "/connectors/sink/config", timeout=30, json={
        "connector.class": "FileStreamSink", "file": str(dst), "topics": topic_name}).status_code == 201
    # The sink subscribes before the topic exists, and its consumer hands it an error event
    # (unknown topic) before any record: sink-record-read-total counts records, not such events
    # (the CI flake: 322 read of 321, when the source task was slow to create the topic).
    wait_for(lambda: any("consumer error" in r.getMessage() and topic_name in r.getMessage()
                         for r in caplog.records), timeout=30, what="the sink's unknown-topic error event")
    assert requests.post(url + "/connectors", timeout=30, json={"name": "src", "config": {
        "connector.class": "FileStreamSource", "file": str(src), "topic": topic_name}}).status_code == 201
    wait_for(lambda: dst.exists() and dst.read_text().splitlines() == lines, what="sink file")

    task = {"connector": "src", "task": "0"}
    sink_task = {"connector": "sink", "task": "0"}

    def settled() -> Samples | None:
        s = scrape(url)
        done = (s.get(("kafka_connect_source_task_metrics_source_record_write_total", frozenset(task.items()))) == 321
                and s.get(("kafka_connect_sink_task_metrics_sink_record_send_total",
                           frozenset(sink_task.items()))) == 321)
        return s if done else None

    s = wait_for(settled, timeout=20, what="task counters at 321")
    assert s[("kafka_connect_connect_worker_metrics_connector_count", frozenset())] == 2
    assert s[("kafka_connect_connect_worker_metrics_task_count", frozenset())] == 2
    for name in ("src", "sink"):
        labels = frozenset({"connector": name}.items())
        assert s[("kafka_connect_connect_worker_metrics_connector_running_task_count", labels)] == 1
        assert s[("kafka_connect_connect_worker_metrics_connector_failed_task_count", labels)] == 0
    assert s[("kafka_connect_source_task_metrics_source_record_poll_total", frozenset(task.items()))] == 321
    assert s[("kafka_connect_sink_task_metrics_sink_record_read_total", frozenset(sink_task.items()))] == 321
    assert s[("kafka_connect_sink_task_metrics_put_batch_avg_time_ms", frozenset(sink_task.items()))] >= 0
    assert s[("kafka_connect_sink_task_metrics_put_batch_max_time_ms", frozenset(sink_task.items()))] >= \
        s[("kafka_connect_sink_task_metrics_put_batch_avg_time_ms", frozenset(sink_task.items()))]

    used = dashboard_metrics("kafka_connect")
    assert len(used) >= 5 and used <= {name for name, _ in s}, used - {name for name, _ in s}
    assert requests.put(url + "/connectors/sink/pause", timeout=30).status_code == 202
    wait_for(lambda: scrape(url)[("kafka_connect_connect_worker_metrics_connector_paused_task_count",
                                  frozenset({"connector": "sink"}.items()))] == 1, timeout=20, what="paused task")
