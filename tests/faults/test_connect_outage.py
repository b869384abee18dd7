"""Connect workers ride out broker outages: kill -9 and restart of the broker, and a SIGSTOP stall
longer than the producer's ``request.timeout.ms``, while a source and a sink connector run.

A real ``strom connect`` worker process (standalone or distributed) runs FileStreamSource (a file
a writer thread keeps appending numbered lines to) into a topic and FileStreamSink from that topic
into another file. The broker is a real process on its own data directory. After the outages:

- every line written reaches the topic and every line of the topic reaches the sink file
  (duplicates only as at-least-once allows; none in the topic under
  ``exactly.once.source.support=enabled``, read with ``isolation.level=read_committed``);
- the worker process is the one started at the beginning (never restarted);
- REST status says every connector and task is RUNNING.

The CI slice does ``STROM_CONNECT_OUTAGE_KILLS`` (default 3) kills 3-5 s apart; ``bench/connect_outage.py``
runs the full length (10 kills) repeatedly and counts passes.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.testing import BrokerProcess, wait_for

log = logging.getLogger(__name__)

READY = "strom connect worker started: "
KILLS = int(os.environ.get("STROM_CONNECT_OUTAGE_KILLS", "3"))
SEED = int(os.environ.get("STROM_CONNECT_OUTAGE_SEED", str(random.randrange(1 << 30))))
DOWN_S = 1.5  # how long the broker stays dead before it is started again
LINES_PER_S = 400
# The producer's request.timeout.ms in the stall test: the stall lasts longer than this.
REQUEST_TIMEOUT_MS = 4000
PARTITIONS = 2


class WorkerProcess:
    """A ``strom connect`` worker subprocess; its REST URL comes from the line it prints once ready."""

    def __init__(self, mode: str, props: Path) -> None:
        self.output: deque[str] = deque(maxlen=3000)
        self.proc = subprocess.Popen([sys.executable, "-m", "strom.connect.cli", mode, str(props)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
        self.pid = self.proc.pid
        self.url = ""
        ready = threading.Event()

        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line.rstrip())
                if READY in line and not self.url:
                    self.url = line.split(READY, 1)[1].strip().rstrip("/")
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True, name="worker-output").start()
        if not ready.wait(60) or not self.url:
            self.kill()
            raise AssertionError("worker did not start:\n" + self.tail())

    def tail(self, n: int = 60) -> str:
        return "\n".join(list(self.output)[-n:])

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

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


class LineWriter:
    """Appends ``line-NNNNNNN`` lines to the source file at a steady rate on a thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.written = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="line-writer")

    def _run(self) -> None:
        batch = max(1, LINES_PER_S // 20)
        with open(self.path, "a") as f:
            while not self._stop.wait(0.05):
                f.write("".join(f"line-{self.written + i:07d}\n" for i in range(batch)))
                f.flush()
                self.written += batch

    def start(self) -> None:
        self._thread.start()

    def finish(self) -> set[str]:
        self._stop.set()
        self._thread.join(10)
        return {f"line-{i:07d}" for i in range(self.written)}


def _worker_props(tmp_path: Path, bootstrap: str, distributed: bool, eos: bool, stall: bool) -> Path:
    s = uuid.uuid4().hex[:8]
    lines = [
        f"bootstrap.servers={bootstrap}", "listeners=http://127.0.0.1:0",
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        "value.converter=org.apache.kafka.connect.storage.StringConverter",
        "offset.flush.interval.ms=500",
        # Reconnect quickly after the broker comes back (librdkafka backs off up to 10 s).
        "producer.reconnect.backoff.max.ms=500", "consumer.reconnect.backoff.max.ms=500",
        "admin.reconnect.backoff.max.ms=500",
    ]
    if stall:
        lines.append(f"producer.request.timeout.ms={REQUEST_TIMEOUT_MS}")
    if distributed:
        lines += [
            f"group.id=outage-{s}", f"config.storage.topic=outage-cfg-{s}", f"offset.storage.topic=outage-off-{s}",
            f"status.storage.topic=outage-st-{s}", "config.storage.replication.factor=1",
            "offset.storage.replication.factor=1", "status.storage.replication.factor=1",
            "offset.storage.partitions=2", "status.storage.partitions=2",
            "session.timeout.ms=10000", "heartbeat.interval.ms=1000", "scheduled.rebalance.max.delay.ms=1000",
        ]
        if eos:
            lines.append("exactly.once.source.support=enabled")
    else:
        lines.append(f"offset.storage.file.filename={tmp_path / 'offsets.dat'}")
    props = tmp_path / "worker.properties"
    props.write_text("\n".join(lines) + "\n")
    return props


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)


def _read_topic(bootstrap: str, topic: str) -> list[str]:
    """Every value of the topic as a read_committed consumer sees it, up to the end offsets."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)}
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out: list[str] = []
        eof: set[int] = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + 60
        while len(eof) < PARTITIONS:
            assert time.monotonic() < deadline, f"reading {topic} back did not reach its end offsets {ends}"
            m = c.poll(1.0)
            if m is None:
                continue
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition() or 0)
                    continue
                raise AssertionError(f"reading {topic}: {err}")
            value = m.value()
            assert value is not None
            out.append(value.decode())
        return out
    finally:
        c.close()


def _status_running(url: str, name: str) -> bool:
    st = requests.get(f"{url}/connectors/{name}/status", timeout=10).json()
    tasks = st.get("tasks", [])
    return bool(st.get("connector", {}).get("state") == "RUNNING" and tasks
                and all(t.get("state") == "RUNNING" for t in tasks))


def _statuses(url: str) -> str:
    try:
        return str({n: requests.get(f"{url}/connectors/{n}/status", timeout=5).json() for n in ("src", "snk")})
    except requests.RequestException as exc:
        return f"REST unreachable: {exc}"


class Rig:
    """A broker, a worker running the two connectors, and the files between them."""

    def __init__(self, tmp_path: Path, *, distributed: bool, eos: bool = False, stall: bool = False) -> None:
        self.tmp_path = tmp_path
        self.eos = eos
        self.topic = f"outage-{uuid.uuid4().hex[:8]}"
        self.source = tmp_path / "source.txt"
        self.sink = tmp_path / "sink.txt"
        self.source.touch()
        self.broker = BrokerProcess(tmp_path / "data", config={"group.initial.rebalance.delay.ms": "100"})
        self.broker.start()
        _create_topic(self.broker.bootstrap, self.topic)
        props = _worker_props(tmp_path, self.broker.bootstrap, distributed, eos, stall)
        self.worker = WorkerProcess("distributed" if distributed else "standalone", props)
        self.writer = LineWriter(self.source)

    def create_connectors(self) -> None:
        def create(name: str, config: dict[str, str]) -> bool:
            r = requests.post(f"{self.worker.url}/connectors", json={"name": name, "config": config}, timeout=30)
            return r.status_code == 201  # 409 while a distributed worker's group forms

        wait_for(lambda: create("src", {"connector.class": "FileStreamSource", "file": str(self.source),
                                        "topic": self.topic, "batch.size": "200"}),
                 what="source connector created", ignore=(requests.RequestException,))
        wait_for(lambda: create("snk", {"connector.class": "FileStreamSink", "file": str(self.sink),
                                        "topics": self.topic}),
                 what="sink connector created", ignore=(requests.RequestException,))
        wait_for(lambda: _status_running(self.worker.url, "src") and _status_running(self.worker.url, "snk"),
                 what="both connectors RUNNING", ignore=(requests.RequestException,),
                 detail=lambda: _statuses(self.worker.url))

    def sink_lines(self) -> list[str]:
        return self.sink.read_text().splitlines() if self.sink.exists() else []

    def wait_flowing(self) -> None:
        """Lines pass end to end: the source reached the topic and the sink file grows."""
        before = len(self.sink_lines())
        wait_for(lambda: len(self.sink_lines()) > before, timeout=60, what="lines reaching the sink file",
                 detail=self.worker.tail)

    def close(self) -> None:
        self.writer.finish()
        self.worker.stop()
        self.broker.kill()

    def check(self) -> None:
        """Nothing lost end to end, duplicates only as allowed, the worker never restarted, all RUNNING."""
        written = self.writer.finish()
        assert written, "the writer wrote nothing"
        wait_for(lambda: written <= set(self.sink_lines()), timeout=90,
                 what=f"all {len(written)} lines in the sink file",
                 detail=lambda: f"{len(written - set(self.sink_lines()))} missing; statuses "
                                f"{_statuses(self.worker.url)}\n{self.worker.tail()}")
        in_topic = _read_topic(self.broker.bootstrap, self.topic)
        missing = written - set(in_topic)
        assert not missing, f"{len(missing)} lines never reached the topic, e.g. {sorted(missing)[:5]}"
        dups = {line: n for line, n in Counter(in_topic).items() if n > 1}
        log.info("topic: %d records for %d lines (%d duplicated); sink file: %d lines", len(in_topic),
                 len(written), len(dups), len(self.sink_lines()))
        if self.eos:
            assert not dups, f"{len(dups)} lines duplicated under exactly-once, e.g. {sorted(dups.items())[:5]}"
        assert set(in_topic) <= set(self.sink_lines()), "a record of the topic is not in the sink file"
        assert self.worker.alive and self.worker.proc.pid == self.worker.pid, \
            "the worker process died:\n" + self.worker.tail()
        wait_for(lambda: _status_running(self.worker.url, "src") and _status_running(self.worker.url, "snk"),
                 timeout=30, what="every connector and task RUNNING at the end",
                 ignore=(requests.RequestException,), detail=lambda: _statuses(self.worker.url))


@pytest.fixture
def rig_factory(tmp_path: Path) -> Iterator[Any]:
    rigs: list[Rig] = []

    def make(**kwargs: Any) -> Rig:
        rig = Rig(tmp_path, **kwargs)
        rigs.append(rig)
        return rig

    try:
        yield make
    finally:
        for rig in rigs:
            rig.close()


def _kill_cycles(rig: Rig) -> None:
    rng = random.Random(SEED)
    log.info("broker kill cycles: %d, seed %d", KILLS, SEED)
    for i in range(KILLS):
        time.sleep(rng.uniform(3.0, 5.0))  # traffic between the kills: a schedule, not a condition
        log.info("kill -9 of the broker, cycle %d", i + 1)
        rig.broker.kill()
        time.sleep(DOWN_S)  # the outage itself
        rig.broker.start()
    rig.wait_flowing()


@pytest.mark.slow
@pytest.mark.parametrize("distributed,eos", [(False, False), (True, False), (True, True)],
                         ids=["standalone", "distributed", "distributed-eos"])
def test_connect_survives_broker_kill9_cycles(rig_factory: Any, distributed: bool, eos: bool) -> None:
    rig: Rig = rig_factory(distributed=distributed, eos=eos)
    rig.create_connectors()
    rig.writer.start()
    rig.wait_flowing()
    _kill_cycles(rig)
    rig.check()


@pytest.mark.slow
@pytest.mark.parametrize("distributed,eos", [(False, False), (True, True)], ids=["standalone", "distributed-eos"])
def test_connect_survives_broker_stall_longer_than_request_timeout(rig_factory: Any, distributed: bool,
                                                                    eos: bool) -> None:
    rig: Rig = rig_factory(distributed=distributed, eos=eos, stall=True)
    rig.create_connectors()
    rig.writer.start()
    rig.wait_flowing()
    proc = rig.broker.proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        time.sleep(REQUEST_TIMEOUT_MS / 1000 + 3)  # the stall itself: longer than request.timeout.ms
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    rig.wait_flowing()
    rig.check()
