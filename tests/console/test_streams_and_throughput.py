"""The console finds a running Kafka Streams application through its consumer group, and the
overview's throughput comes from log-end offsets sampled over time."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import requests
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strom.console.kafka import is_streams
from strom.core.testing import BrokerProcess, wait_for
from strom.streams import Consumed, KafkaStreams, Produced, Serdes, StreamsBuilder
from tests.console.conftest import RunningConsole


def test_a_streams_app_is_listed_with_its_threads_tasks_and_lag(console: RunningConsole, broker: BrokerProcess,
                                                                 tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    src, out, app_id = f"in-{tag}", f"out-{tag}", f"console-app-{tag}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(src, 2, 1), NewTopic(out, 1, 1)]).values():
        f.result(30)
    b = StreamsBuilder()
    (b.stream(src, Consumed.with_(Serdes.string(), Serdes.string()))
     .map_values(lambda v: v + "!")
     .to(out, Produced.with_(Serdes.string(), Serdes.string())))
    app = KafkaStreams(b.build(), {"application.id": app_id, "bootstrap.servers": broker.bootstrap,
                                   "state.dir": str(tmp_path / "state"), "commit.interval.ms": "100"})
    app.start()
    try:
        p = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(20):
            p.produce(src, key=f"k{i}", value=str(i))
        assert p.flush(20) == 0

        def listed() -> dict[str, object] | None:
            apps = requests.get(console.url + "/api/streams", timeout=30).json()
            mine = [a for a in apps if a["application_id"] == app_id]
            if mine and mine[0]["members"] and sum(len(m["assignment"]) for m in mine[0]["members"]) == 2 \
                    and mine[0]["lag"] and mine[0]["total_lag"] == 0:
                return mine[0]
            return None
        a = wait_for(listed, timeout=40, what="the streams app listed with 2 tasks and no lag")
        assert all("-StreamThread-" in m["client_id"] for m in a["members"])
        # A plain consumer's group is not a Streams application.
        assert not is_streams("orders", [{"client_id": "rdkafka"}])
    finally:
        app.close(30)


def test_throughput_now_follows_produced_records(console: RunningConsole, broker: BrokerProcess) -> None:
    topic = f"tput-{uuid.uuid4().hex[:8]}"
    requests.get(console.url + "/api/overview", timeout=30)  # the first API call starts the sampler
    p = Producer({"bootstrap.servers": broker.bootstrap})
    deadline = time.monotonic() + 30

    def moving() -> bool:
        # Keep producing until a sample taken while records arrive shows a positive rate.
        for i in range(200):
            p.produce(topic, value=str(i))
        p.flush(10)
        d = requests.get(console.url + "/api/overview", timeout=30).json()
        return bool(d["throughput"]) and d["throughput"][-1]["records_per_s"] > 0
    wait_for(moving, timeout=max(1.0, deadline - time.monotonic()), what="throughput above 0")
