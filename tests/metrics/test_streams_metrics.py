"""A Streams application's /metrics (strom.metrics.listener) under Kafka Streams' names, after it
processed N records from the bundled broker."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import requests
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families
from wordcount_app import create_topics, read_records

from strom.core.testing import BrokerProcess, wait_for
from strom.streams import Consumed, KafkaStreams, Produced, Serdes, StreamsBuilder

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "strom.json"


def dashboard_metrics(prefix: str) -> set[str]:
    """The metric names starting with ``prefix`` that the Grafana dashboard's queries use."""
    exprs = [t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p.get("targets", ())]
    return {n for e in exprs for n in re.findall(r"\bkafka_[a-z_]+", e) if n.startswith(prefix)}


def scrape(url: str) -> Samples:
    r = requests.get(url, timeout=30)
    assert r.status_code == 200
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(r.text) for s in family.samples}


def test_stream_thread_metrics_after_n_records(broker: BrokerProcess, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    src, out, app_id = f"in-{tag}", f"out-{tag}", f"metrics-{tag}"
    create_topics(broker.bootstrap, (src, 2), (out, 1))
    n = 257
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(n):
        producer.produce(src, str(i).encode(), f"k{i}".encode())
    assert producer.flush(30) == 0

    b = StreamsBuilder()
    (b.stream(src, Consumed.with_(Serdes.string(), Serdes.string()))
     .map_values(lambda v: v + "!")
     .to(out, Produced.with_(Serdes.string(), Serdes.string())))
    app = KafkaStreams(b.build(), {
        "application.id": app_id, "bootstrap.servers": broker.bootstrap, "state.dir": str(tmp_path / "state"),
        "commit.interval.ms": "100", "strom.metrics.listener": "http://127.0.0.1:0"})
    app.start()
    try:
        assert app.metrics_url is not None
        assert len(read_records(broker.bootstrap, out, lambda recs: len(recs) >= n)) == n
        thread = f"{app_id}-StreamThread-1"
        labels = frozenset({"thread_id": thread}.items())

        def committed() -> Samples | None:
            s = scrape(app.metrics_url or "")
            done = s.get(("kafka_streams_stream_thread_metrics_process_total", labels)) == n and \
                s.get(("kafka_streams_stream_thread_metrics_commit_total", labels), 0) >= 1
            return s if done else None

        s = wait_for(committed, timeout=20, what=f"process_total {n} and a commit")
        assert s[("kafka_streams_stream_thread_metrics_poll_total", labels)] >= 1
        assert s[("kafka_streams_stream_thread_metrics_commit_latency_avg", labels)] > 0
        assert s[("kafka_streams_stream_thread_metrics_commit_latency_max", labels)] >= \
            s[("kafka_streams_stream_thread_metrics_commit_latency_avg", labels)]
        assert s[("kafka_streams_stream_thread_metrics_active_tasks", labels)] == 2
        assert s[("kafka_streams_stream_metrics_alive_stream_threads", frozenset({"client_id": app_id}.items()))] == 1
        used = dashboard_metrics("kafka_streams")
        assert len(used) >= 3 and used <= {name for name, _ in s}, used - {name for name, _ in s}
    finally:
        app.close(30)
    # closed: the port is given back
    try:
        requests.get(app.metrics_url or "", timeout=2)
        raise AssertionError("metrics still served after close")
    except requests.ConnectionError:
        pass
