"""The broker's Prometheus /metrics (strom.metrics.listener), scraped after real clients worked.

One broker with its metrics on a free port serves the module. Counters are compared against what
the clients did and what the log holds: bytes in equal the partitions' log sizes (the batches as
appended, which is how Kafka's BytesInPerSec counts them), records in equal the records sent.
"""

from __future__ import annotations

import contextlib
import re
import socket
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from strom.core.config import BrokerConfig
from strom.core.testing import BrokerProcess, wait_for
from strom.core.tools.run import DEV_METRICS_LISTENER, dev_config

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class MetricsBroker:
    def __init__(self, proc: BrokerProcess) -> None:
        self.proc = proc
        assert proc.wait_for_log("serving metrics on", 30), proc.log_tail()
        found = re.search(r"serving metrics on (http://\S+)", proc.log_text())
        assert found is not None
        self.url = found.group(1)

    def scrape(self) -> Samples:
        with urllib.request.urlopen(self.url, timeout=10) as resp:
            assert resp.headers["Content-Type"].startswith("text/plain")
            text = resp.read().decode()
        out: Samples = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out[(s.name, frozenset(s.labels.items()))] = s.value
        return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, match: Callable[[dict[str, str]], bool]) -> float:
    return sum(v for (n, labels), v in samples.items() if n == name and match(dict(labels)))


@pytest.fixture(scope="module")
def mbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsBroker]:
    with BrokerProcess(tmp_path_factory.mktemp("metrics"),
                       config={"strom.metrics.listener": "http://127.0.0.1:0"}) as proc:
        yield MetricsBroker(proc)


def _create(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(15)


def _log_size(samples: Samples, topic: str) -> float:
    return total(samples, "kafka_log_log_size", lambda lb: lb.get("topic") == topic)


def test_bytes_and_records_in_and_out_per_topic(mbroker: MetricsBroker) -> None:
    bootstrap = mbroker.proc.bootstrap
    _create(bootstrap, "metrics-a", 3)
    _create(bootstrap, "metrics-b", 1)
    before = mbroker.scrape()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    for i in range(300):
        producer.produce("metrics-a", key=str(i).encode(), value=b"v" * (i % 50))
    for _ in range(120):
        producer.produce("metrics-b", value=b"w" * 200)
    assert producer.flush(30) == 0
    after = mbroker.scrape()

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("kafka_server_brokertopicmetrics_messagesin_total", topic="metrics-a") == 300
    assert moved("kafka_server_brokertopicmetrics_messagesin_total", topic="metrics-b") == 120
    assert moved("kafka_server_brokertopicmetrics_messagesin_total") == 420
    size_a, size_b = _log_size(after, "metrics-a"), _log_size(after, "metrics-b")
    assert size_a > 300 and size_b > 120 * 200
    # The appended batches are the log's bytes (offsets are patched in place).
    assert moved("kafka_server_brokertopicmetrics_bytesin_total", topic="metrics-a") == size_a
    assert moved("kafka_server_brokertopicmetrics_bytesin_total", topic="metrics-b") == size_b
    assert moved("kafka_server_brokertopicmetrics_bytesin_total") == size_a + size_b
    assert total(after, "kafka_log_log_logendoffset", lambda lb: lb.get("topic") == "metrics-a") == 300

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "metrics-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["metrics-a"])
        got, deadline = 0, time.monotonic() + 30
        while got < 300 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
        assert got == 300
        # Each batch is fetched once: bytes out equal the log's bytes.
        wait_for(lambda: value(mbroker.scrape(), "kafka_server_brokertopicmetrics_bytesout_total",
                               topic="metrics-a") - value(before, "kafka_server_brokertopicmetrics_bytesout_total",
                                                          topic="metrics-a") == size_a,
                 timeout=10, what="bytes out of metrics-a = its log size")
        assert value(mbroker.scrape(), "kafka_server_brokertopicmetrics_bytesout_total", topic="metrics-b") == 0
    finally:
        consumer.close()


def test_request_counts_and_latency_per_api(mbroker: MetricsBroker) -> None:
    bootstrap = mbroker.proc.bootstrap
    _create(bootstrap, "metrics-req", 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
    producer.produce("metrics-req", value=b"warm")  # metadata and connection first
    assert producer.flush(15) == 0
    before = mbroker.scrape()
    for i in range(25):  # flushed one by one: one Produce request each
        producer.produce("metrics-req", value=str(i).encode())
        assert producer.flush(15) == 0
    after = mbroker.scrape()

    def produce(samples: Samples, name: str) -> float:
        return total(samples, name, lambda lb: lb.get("request") == "Produce")

    assert produce(after, "kafka_network_requestmetrics_requests_total") - \
        produce(before, "kafka_network_requestmetrics_requests_total") == 25
    versions = {dict(labels)["version"] for (n, labels), v in after.items()
                if n == "kafka_network_requestmetrics_requests_total" and dict(labels)["request"] == "Produce"}
    assert versions and all(v.isdigit() for v in versions)
    # The latency histogram counts the same requests.
    assert produce(after, "kafka_network_requestmetrics_totaltimems_count") == \
        produce(after, "kafka_network_requestmetrics_requests_total")
    assert value(after, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="+Inf") == \
        produce(after, "kafka_network_requestmetrics_requests_total")
    assert produce(after, "kafka_network_requestmetrics_totaltimems_sum") > 0
    assert total(after, "kafka_network_requestmetrics_requests_total",
                 lambda lb: lb.get("request") == "Metadata") >= 1
    assert total(after, "kafka_network_requestmetrics_requests_total",
                 lambda lb: lb.get("request") == "ApiVersions") >= 1
    assert value(after, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT",
                 networkProcessor="0") >= 1
    assert value(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(after, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0


def test_consumer_group_lag_is_log_end_minus_committed(mbroker: MetricsBroker) -> None:
    bootstrap = mbroker.proc.bootstrap
    _create(bootstrap, "metrics-lag", 2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(50):
        producer.produce("metrics-lag", value=b"x", partition=i % 2)
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "metrics-lag-group",
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("metrics-lag", 0, 10), TopicPartition("metrics-lag", 1, 25)],
                        asynchronous=False)
    finally:
        consumer.close()
    samples = mbroker.scrape()
    for partition, committed in ((0, 10), (1, 25)):
        labels = {"consumergroup": "metrics-lag-group", "topic": "metrics-lag", "partition": str(partition)}
        assert value(samples, "kafka_consumergroup_current_offset", **labels) == committed
        end = value(samples, "kafka_log_log_logendoffset", topic="metrics-lag", partition=str(partition))
        assert end == 25
        assert value(samples, "kafka_consumergroup_lag", **labels) == end - committed


def test_a_taken_metrics_port_does_not_stop_the_broker(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with BrokerProcess(tmp_path / "data", config={"strom.metrics.listener": f"http://127.0.0.1:{port}"}) as proc:
            assert proc.alive
            assert proc.wait_for_log("not serving metrics on", 10), proc.log_tail()
            assert "serving metrics on http" not in proc.log_text().replace("not serving metrics on", "")
            admin = AdminClient({"bootstrap.servers": proc.bootstrap})
            assert admin.list_topics(timeout=10).brokers


def test_strom_dev_starts_when_9404_is_taken(tmp_path: Path) -> None:
    """`strom dev` with its default metrics listener, port 9404 held by someone else (this test,
    or another broker already serving there): one log line, and the broker serves clients."""
    with contextlib.ExitStack() as stack:
        holder = stack.enter_context(socket.socket())
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        with contextlib.suppress(OSError):  # taken already: the same situation
            holder.bind(("127.0.0.1", 9404))
            holder.listen()
        proc = stack.enter_context(BrokerProcess(tmp_path / "data"))
        assert proc.wait_for_log("not serving metrics on http://127.0.0.1:9404", 10), proc.log_tail()
        assert AdminClient({"bootstrap.servers": proc.bootstrap}).list_topics(timeout=10).brokers
        assert proc.alive


def test_strom_dev_serves_metrics_on_9404_and_broker_start_does_not() -> None:
    assert DEV_METRICS_LISTENER == "http://127.0.0.1:9404"
    assert dev_config(Path("/nonexistent"), 0, {}).strom_metrics_listener == DEV_METRICS_LISTENER
    assert dev_config(Path("/nonexistent"), 0, {"strom.metrics.listener": ""}).strom_metrics_listener == ""
    assert BrokerConfig.load(None, {"node.id": "1", "process.roles": "broker,controller",
                                    "listeners": "PLAINTEXT://127.0.0.1:0",
                                    "controller.quorum.voters": "1@127.0.0.1:0"}).strom_metrics_listener == ""


DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "strom.json"


def dashboard_metrics(*prefixes: str) -> set[str]:
    """The metric names the Grafana dashboard's queries use that start with one of ``prefixes``."""
    import json

    exprs = [t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p.get("targets", ())]
    return {n for e in exprs for n in re.findall(r"\bkafka_[a-z_]+", e) if n.startswith(prefixes)}


def test_the_dashboard_uses_metrics_the_broker_serves(mbroker: MetricsBroker) -> None:
    bootstrap = mbroker.proc.bootstrap
    _create(bootstrap, "metrics-dash", 1)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "metrics-dash-group"})
    try:
        consumer.commit(offsets=[TopicPartition("metrics-dash", 0, 0)], asynchronous=False)
    finally:
        consumer.close()
    served = {name for name, _ in mbroker.scrape()}
    used = dashboard_metrics("kafka_server", "kafka_network", "kafka_log", "kafka_controller", "kafka_consumergroup")
    assert len(used) >= 10
    assert used <= served, used - served
