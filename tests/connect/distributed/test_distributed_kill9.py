"""Two `strom connect distributed` worker processes, driven through the REST API: a connector's
tasks spread over both; one worker is killed with kill -9 and its tasks resume on the other once
its session expires and the scheduled rebalance delay has passed."""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from strom.core.testing import BrokerProcess, wait_for

READY = "strom connect worker started"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


wait_for = functools.partial(wait_for, interval=0.25, ignore=(requests.RequestException,))


class WorkerProcess:
    def __init__(self, props: Path, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.worker_id = f"127.0.0.1:{port}"
        self.output: deque[str] = deque(maxlen=500)
        self.proc = subprocess.Popen([sys.executable, "-m", "strom.connect.cli", "distributed", str(props),
                                      "--override", f"listeners={self.url}"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
        ready = threading.Event()

        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line.rstrip())
                if READY in line:
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(60) or self.proc.poll() is not None:
            self.kill()
            raise AssertionError("worker did not start:\n" + "\n".join(self.output))

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def worker_props(connect_broker: BrokerProcess, tmp_path: Path) -> Path:
    s = uuid.uuid4().hex[:8]
    props = tmp_path / "worker.properties"
    props.write_text("\n".join([
        f"bootstrap.servers={connect_broker.bootstrap}", f"group.id=connect-k9-{s}",
        f"config.storage.topic=k9-cfg-{s}", f"offset.storage.topic=k9-off-{s}", f"status.storage.topic=k9-st-{s}",
        "config.storage.replication.factor=1", "offset.storage.replication.factor=1",
        "status.storage.replication.factor=1", "offset.storage.partitions=3", "status.storage.partitions=2",
        "session.timeout.ms=6000", "heartbeat.interval.ms=500", "scheduled.rebalance.max.delay.ms=1000",
        "offset.flush.interval.ms=200",
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        "value.converter=org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable=false",
    ]) + "\n")
    return props


@pytest.fixture
def workers(worker_props: Path) -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    try:
        started.append(WorkerProcess(worker_props, free_port()))
        started.append(WorkerProcess(worker_props, free_port()))
        yield started
    finally:
        for w in started:
            w.stop()


def consume_values(bootstrap: str, topic: str, want: set[str], timeout: float = 60.0) -> set[str]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    try:
        while not want <= seen and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error() and m.value() is not None:
                seen.add(json.loads(m.value() or b"null"))
    finally:
        c.close()
    return seen


def test_killed_worker_tasks_resume_on_the_survivor(workers: list[WorkerProcess], connect_broker: BrokerProcess,
                                                     tmp_path: Path, topic_name: str) -> None:
    a, b = workers
    by_id = {a.worker_id: a, b.worker_id: b}
    gen = {"connector.class": "DatagenConnector", "tasks.max": "4", "kafka.topic": f"{topic_name}-gen",
           "quickstart": "users", "rate": "20", "iterations": "-1"}
    source = tmp_path / "lines.txt"
    source.touch()
    fs = {"connector.class": "FileStreamSource", "file": str(source), "topic": topic_name}
    lines = [f"line-{i}" for i in range(4000)]

    def write_lines() -> None:
        with open(source, "a") as f:
            for line in lines:
                f.write(line + "\n")
                f.flush()
                time.sleep(0.002)
    writer = threading.Thread(target=write_lines, daemon=True)

    def create(name: str, config: dict[str, str]) -> Any:
        # Either worker: a follower forwards the write to the leader; 409 while the group forms.
        r = requests.post(f"{b.url}/connectors", json={"name": name, "config": config}, timeout=30)
        return r if r.status_code == 201 else None
    wait_for(lambda: create("gen", gen), what="connector gen created")
    wait_for(lambda: create("fs", fs), what="connector fs created")
    writer.start()

    def status(w: WorkerProcess, name: str) -> dict[str, Any]:
        return dict(requests.get(f"{w.url}/connectors/{name}/status", timeout=10).json())

    def spread() -> Any:
        tasks = status(a, "gen").get("tasks", [])
        ok = len(tasks) == 4 and all(t["state"] == "RUNNING" for t in tasks) \
            and {t["worker_id"] for t in tasks} == {a.worker_id, b.worker_id}
        fs_tasks = status(a, "fs").get("tasks", [])
        return ok and len(fs_tasks) == 1 and fs_tasks[0]["state"] == "RUNNING"
    wait_for(spread, what="RUNNING tasks spread over both workers")
    assert sorted(requests.get(f"{b.url}/connectors", timeout=10).json()) == ["fs", "gen"]

    # Kill -9 the worker that runs the file source's task, in the middle of the file.
    victim = by_id[status(a, "fs")["tasks"][0]["worker_id"]]
    survivor = a if victim is b else b
    # Once the first lines are in the topic the task is mid-file (the writer takes ~8 s for all).
    first = set(lines[:200])
    assert first <= consume_values(connect_broker.bootstrap, topic_name, first, timeout=30), "no lines flowing"
    victim.kill()

    def resumed() -> Any:
        for name, n in (("gen", 4), ("fs", 1)):
            st = status(survivor, name)
            if not (st["connector"]["worker_id"] == survivor.worker_id and st["connector"]["state"] == "RUNNING"
                    and len(st["tasks"]) == n and all(t["state"] == "RUNNING" and t["worker_id"] == survivor.worker_id
                                                      for t in st["tasks"])):
                return None
        return True
    # session.timeout.ms (6 s, the broker's minimum) + scheduled.rebalance.max.delay.ms (1 s) + slack
    wait_for(resumed, timeout=45, what="tasks resumed on the surviving worker")
    writer.join(60)
    # The resumed task starts from the offsets its killed predecessor flushed: nothing is lost
    # (records after the last flush may come twice).
    seen = consume_values(connect_broker.bootstrap, topic_name, set(lines))
    missing = set(lines) - seen
    assert not missing, f"{len(missing)} lines lost, e.g. {sorted(missing)[:5]}"
