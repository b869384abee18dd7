"""Issue 28 item 6 for MirrorMaker: the source cluster down when the connector starts and
killed -9 mid-replication is back-pressure, never a failure: the connector and its tasks stay
RUNNING, discovery is retried within seconds (not at the next refresh.topics.interval, 10
minutes by default), and once the cluster is back every record arrives (at least once)."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest

from strom.core.testing import BrokerProcess, wait_for

from .conftest import Mirror

SOURCE = "org.apache.kafka.connect.mirror.MirrorSourceConnector"


def test_source_cluster_down_at_start_and_killed_mid_replication(
        fresh_broker: BrokerProcess, cluster_b: BrokerProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    a = fresh_broker.start()
    mirror = Mirror(a.bootstrap, cluster_b.bootstrap, tmp_path)
    topic = f"fault-{uuid.uuid4().hex[:8]}"
    mirror.create_topic(mirror.a, topic, 2)
    first = [{"partition": i % 2, "value": f"a{i}".encode()} for i in range(1000)]
    mirror.produce(mirror.a, topic, first)
    a.kill()  # down before the connector starts
    try:
        herder = mirror.herder(mirror.b, "fault")
        with caplog.at_level(logging.WARNING, logger="strom.connect.mirror"):
            herder.put_connector_config("mm-fault", mirror.connector(
                SOURCE, "mm-fault", ("A", mirror.a), ("B", mirror.b), topics=topic, admin_timeout_ms="2000"), False)
            wait_for(lambda: "initial topic discovery did not finish" in caplog.text, 30, "a retriable failure logged")
        assert herder.connector_status("mm-fault").connector.state.value == "RUNNING"
        a.start()  # back: discovery retried within seconds, tasks start, records flow
        wait_for(lambda: sum(mirror.end_offsets(mirror.b, f"A.{topic}").values()) >= 1000, 60, "first batch on B")
        a.kill()  # killed -9 while the tasks consume
        a.start()
        second = [{"partition": i % 2, "value": f"b{i}".encode()} for i in range(1000)]
        mirror.produce(mirror.a, topic, second)
        wait_for(lambda: sum(mirror.end_offsets(mirror.b, f"A.{topic}").values()) >= 2000, 90, "second batch on B")
        got = {r[3] for r in mirror.read_all(mirror.b, f"A.{topic}", 2)}
        assert got == {r["value"] for r in first + second}  # nothing missing
        status = herder.connector_status("mm-fault")
        assert status.connector.state.value == "RUNNING"
        assert status.tasks and all(t.state.value == "RUNNING" for t in status.tasks)
    finally:
        for h in mirror.herders:
            h.stop()
