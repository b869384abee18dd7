"""The console's JSON API against a real broker: topics, messages, groups, offsets reset, read-only."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
import requests
from confluent_kafka import Consumer, Producer

from strom.core.testing import BrokerProcess
from tests.console.conftest import RunningConsole, start_console


def _until(fn, what: str, timeout: float = 20.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_overview_lists_the_broker_and_controller(console: RunningConsole, broker: BrokerProcess) -> None:
    d = requests.get(console.url + "/api/overview", timeout=20).json()
    assert [b["port"] for b in d["brokers"]] == [broker.port]
    assert d["controller"] is not None and d["cluster_id"]


def test_topic_create_configs_partitions_messages_delete(console: RunningConsole, broker: BrokerProcess) -> None:
    name = f"console-{uuid.uuid4().hex[:8]}"
    r = requests.post(console.url + "/api/topics", json={"name": name, "partitions": 2}, timeout=20)
    assert r.status_code == 201, r.text
    _until(lambda: name in [t["name"] for t in requests.get(console.url + "/api/topics", timeout=20).json()],
           "created topic listed")
    r = requests.post(f"{console.url}/api/topics/{name}/configs", json={"set": {"retention.ms": "12345"}}, timeout=20)
    assert {c["name"]: c["value"] for c in r.json()}["retention.ms"] == "12345"
    r = requests.post(f"{console.url}/api/topics/{name}/partitions", json={"partitions": 3}, timeout=20)
    assert r.status_code == 200, r.text
    _until(lambda: len(requests.get(f"{console.url}/api/topics/{name}", timeout=20).json()["partitions"]) == 3,
           "3 partitions")

    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        p.produce(name, key=f"k{i}", value=json.dumps({"n": i, "tag": "needle" if i == 17 else "hay"}),
                  partition=1, headers=[("h", b"\x00\x01")])
    assert p.flush(20) == 0
    # Sizes from DescribeLogDirs: partition 1's log holds the 30 records, as its files on disk say.
    on_disk = sum(f.stat().st_size for f in broker.data_dir.rglob(f"{name}-1/*.log"))
    assert on_disk > 0
    sizes = _until(lambda: {q["partition"]: q["size"] for q in
                            requests.get(f"{console.url}/api/topics/{name}", timeout=20).json()["partitions"]},
                   "partition sizes")
    assert sizes == {0: 0, 1: on_disk, 2: 0}
    listed = {t["name"]: t["size"] for t in requests.get(console.url + "/api/topics", timeout=20).json()}
    assert listed[name] == on_disk
    d = requests.get(f"{console.url}/api/topics/{name}/messages", params={"partition": "1", "offset": "5", "limit": "3"},
                     timeout=20).json()
    assert [m["offset"] for m in d["records"]] == [5, 6, 7]
    assert json.loads(d["records"][0]["value"]["json"]) == {"n": 5, "tag": "hay"}
    assert d["records"][0]["headers"][0]["hex"] == "00 01"
    d = requests.get(f"{console.url}/api/topics/{name}/messages", params={"partition": "1", "search": "needle"},
                     timeout=20).json()
    assert [m["key"]["text"] for m in d["records"]] == ["k17"]
    # A window shorter than the needle's offset finds nothing: the search is bounded.
    d = requests.get(f"{console.url}/api/topics/{name}/messages",
                     params={"partition": "1", "search": "needle", "window": "10"}, timeout=20).json()
    assert d["records"] == [] and d["scanned"] == 10

    r = requests.delete(f"{console.url}/api/topics/{name}", timeout=20)
    assert r.status_code == 200, r.text
    err = _until(lambda: (x := requests.get(f"{console.url}/api/topics/{name}", timeout=20)).status_code == 400
                 and x.json()["error"], "deleted topic gone")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in err


def test_group_lag_and_reset_of_an_empty_group(console: RunningConsole, broker: BrokerProcess) -> None:
    name, group = f"console-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    requests.post(console.url + "/api/topics", json={"name": name, "partitions": 1}, timeout=20).raise_for_status()
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce(name, value=str(i))
    assert p.flush(20) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([name])
    got = 0
    deadline = time.monotonic() + 30
    while got < 4 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
            if got == 4:
                c.commit(message=m, asynchronous=False)
    r = requests.post(f"{console.url}/api/groups/{group}/reset-offsets", json={"to": "earliest"}, timeout=20)
    assert r.status_code == 400 and "active member" in r.json()["error"]
    c.close()
    g = _until(lambda: (d := requests.get(f"{console.url}/api/groups/{group}", timeout=20).json())
               .get("members") == [] and d, "group empty")
    assert [(x["committed"], x["lag"]) for x in g["lag"]] == [(4, 6)]
    _until(lambda: requests.get(f"{console.url}/api/groups/{group}", timeout=20).json()["lag_history"],
           "lag sampled over time")
    r = requests.post(f"{console.url}/api/groups/{group}/reset-offsets", json={"to": "earliest"}, timeout=20)
    assert r.status_code == 200, r.text
    assert [(x["committed"], x["lag"]) for x in r.json()["lag"]] == [(0, 10)]


@pytest.fixture
def read_only_console(broker: BrokerProcess) -> Iterator[RunningConsole]:
    yield from start_console(broker.bootstrap, read_only=True)


def test_read_only_refuses_changes_with_a_message(read_only_console: RunningConsole) -> None:
    r = requests.post(read_only_console.url + "/api/topics", json={"name": "nope"}, timeout=20)
    assert r.status_code == 403 and "read-only" in r.json()["error"]
    assert requests.get(read_only_console.url + "/api/topics", timeout=20).status_code == 200


def test_errors_are_messages_not_tracebacks(console: RunningConsole) -> None:
    r = requests.get(console.url + "/api/connectors", timeout=20)
    assert r.status_code == 400 and "--connect-url" in r.json()["error"]
    r = requests.post(console.url + "/api/topics", json={"name": "bad/name"}, timeout=20)
    assert r.status_code == 400 and "Traceback" not in r.text and r.json()["error"]
