"""The worker against a real broker: source → topic, topic → sink, DLQ, failures, kill -9.

Connectors come from ``strom_test_connect_plugins`` (tests/helpers); converters are the
built-in ones. Each test uses its own topics on the session's broker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import strom_test_connect_plugins as tp
from confluent_kafka import OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from strom.connect.converters import PLUGINS as CONVERTERS
from strom.connect.plugins import PluginRegistry
from strom.connect.runtime.config import WorkerConfig
from strom.connect.runtime.herder import ConnectorTaskId, State
from strom.connect.runtime.offsets import FileOffsetBackingStore, OffsetStorageReaderImpl
from strom.connect.runtime.standalone import StandaloneHerder
from strom.connect.runtime.worker_sink_task import WorkerSinkTask
from strom.core.testing import BrokerProcess
from strom.core.testing import wait_for as wait_until

HELPERS = Path(__file__).resolve().parents[2] / "helpers"  # strom_test_connect_plugins, for the subprocess


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def registry() -> PluginRegistry:
    return PluginRegistry(classes=[*CONVERTERS, tp.SeqSource, tp.FileCollectSink, tp.FailOnValue, tp.GatedTxnSource,
                                   tp.HangOnStopSource])


@pytest.fixture
def make_herder(broker: BrokerProcess, tmp_path: Path) -> Iterator[Callable[..., StandaloneHerder]]:
    herders: list[StandaloneHerder] = []

    def make(**overrides: Any) -> StandaloneHerder:
        conf = {"bootstrap.servers": broker.bootstrap, "offset.storage.file.filename": str(tmp_path / "offsets"),
                "offset.flush.interval.ms": "300", "key.converter": "StringConverter",
                "value.converter": "StringConverter", "listeners": "http://127.0.0.1:0", **overrides}
        h = StandaloneHerder(WorkerConfig.from_mapping(conf), registry())
        h.start()
        herders.append(h)
        return h

    yield make
    for h in herders:
        h.stop()


def consume_all(bootstrap: str, topic: str, expected: int, *, read_committed: bool = False,
                timeout: float = 60.0, distinct: bool = False) -> list[Any]:
    """Records of ``topic`` from the start until ``expected`` (distinct values if asked) or timeout."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uid("check"), "auto.offset.reset": "earliest",
                  "enable.auto.commit": False,
                  "isolation.level": "read_committed" if read_committed else "read_uncommitted"})
    deadline = time.monotonic() + timeout
    # assign(), not subscribe(): no group rebalance delay before the first fetch
    parts = wait_until(lambda: c.list_topics(topic, timeout=5).topics[topic].partitions, timeout, "topic")
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
    out: list[Any] = []
    seen: set[bytes | None] = set()
    try:
        while (len(seen) if distinct else len(out)) < expected and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    out.append(m)
                    seen.add(m.value())
    finally:
        c.close()
    return out


def group_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futs = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    res = next(iter(futs.values())).result(30)
    return {(t.topic, t.partition): t.offset for t in res.topic_partitions or () if t.offset >= 0}


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0


def file_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eos", [False, True], ids=["at-least-once", "exactly-once"])
def test_source_records_reach_the_topic_and_offsets_the_file(
        broker: BrokerProcess, make_herder: Callable[..., StandaloneHerder], tmp_path: Path, eos: bool) -> None:
    topic = uid("src")
    overrides = {"exactly.once.source.support": "enabled"} if eos else {}
    herder = make_herder(**overrides)
    created, info = herder.put_connector_config("seq", {
        "connector.class": "SeqSource", "topic": topic, "count": "300", "batch": "50", "tasks.max": "2",
        "transforms": "dropOdd", "transforms.dropOdd.type": "FailOnValue", "transforms.dropOdd.needle": "never",
    }, False)
    assert created and len(info.tasks) == 2
    msgs = consume_all(broker.bootstrap, topic, 600, read_committed=eos)
    values = sorted(m.value().decode() for m in msgs)
    assert values == sorted(f"v-{t}-{n}" for t in range(2) for n in range(300))
    assert {m.key() for m in msgs} == {f"k-{n}".encode() for n in range(300)}
    status = herder.connector_status("seq")
    assert status.connector.state == State.RUNNING and [t.state for t in status.tasks] == [State.RUNNING] * 2
    assert herder.connector_active_topics("seq") == [topic]
    herder.stop()  # clean stop: final offsets are written
    store = FileOffsetBackingStore(tmp_path / "offsets")
    store.start()
    reader = OffsetStorageReaderImpl(store, "seq")
    assert reader.offset({"task": 0}) == {"n": 299} and reader.offset({"task": 1}) == {"n": 299}
    # A restarted worker resumes after the committed offsets: nothing is sent again. One more
    # record per task (n=300) shows the restarted tasks ran: once both are in the topic, a task
    # that resumed from the start instead would have re-sent its 300 earlier records before them.
    again = make_herder(**overrides)
    again.put_connector_config("seq", {"connector.class": "SeqSource", "topic": topic, "count": "301",
                                       "tasks.max": "2"}, False)
    last = {b"v-0-300", b"v-1-300"}
    wait_until(lambda: last <= {m.value() for m in consume_all(broker.bootstrap, topic, 602,
                                                                   read_committed=eos, timeout=5)},
               timeout=60, what="the restarted tasks' records n=300")
    after = sorted(m.value().decode() for m in consume_all(broker.bootstrap, topic, 603, read_committed=eos,
                                                           timeout=3))
    assert after == sorted(f"v-{t}-{n}" for t in range(2) for n in range(301))


def test_sink_offsets_are_committed_only_after_flush(
        broker: BrokerProcess, make_herder: Callable[..., StandaloneHerder], tmp_path: Path) -> None:
    topic, out = uid("sink"), tmp_path / "sink.txt"
    values = [f"r{i}" for i in range(200)]
    produce(broker.bootstrap, topic, [v.encode() for v in values])
    herder = make_herder()
    conf = {"connector.class": "FileCollectSink", "topics": topic, "file": str(out)}
    herder.put_connector_config("collect", {**conf, "flush.fail.times": "1000000"}, False)
    task = herder.worker._tasks[ConnectorTaskId("collect", 0)].task
    assert isinstance(task, WorkerSinkTask)
    failing: WorkerSinkTask = task
    # getattr: the task thread sets its counters in start(), which may not have run yet
    wait_until(lambda: getattr(failing.task, "flushes", 0) >= 3 and failing.records_put >= 200,
               what="failing flushes")
    herder.delete_connector("collect")  # the final commit's flush fails too
    assert file_lines(out) == []
    assert group_offsets(broker.bootstrap, "connect-collect") == {}  # nothing committed past a failed flush

    # Flushes succeed now; the first puts fail with RetriableException and are retried.
    herder.put_connector_config("collect", {**conf, "put.retriable.times": "2"}, False)
    wait_until(lambda: len(file_lines(out)) >= 200, what="sink file")
    wait_until(lambda: group_offsets(broker.bootstrap, "connect-collect") == {(topic, 0): 200},
               what="committed offsets")
    assert file_lines(out) == values  # each record exactly once: retried batches are not duplicated
    task = herder.worker._tasks[ConnectorTaskId("collect", 0)].task
    assert isinstance(task, WorkerSinkTask) and task.task.retriable_puts == 0
    offsets = herder.connector_offsets("collect").to_json()
    assert offsets == {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
                                    "offset": {"kafka_offset": 200}}]}


def test_dead_letter_queue_for_sink_and_source(
        broker: BrokerProcess, make_herder: Callable[..., StandaloneHerder], tmp_path: Path) -> None:
    topic, dlq, out = uid("in"), uid("dlq"), tmp_path / "sink.txt"
    produce(broker.bootstrap, topic, [b'{"a": 1}', b"not json {", b'{"a": 3}', b'{"a": "report-me"}'])
    herder = make_herder()
    herder.put_connector_config("tolerant", {
        "connector.class": "FileCollectSink", "topics": topic, "file": str(out),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "errors.tolerance": "all", "errors.log.enable": "true", "put.report.on": "report-me",
        "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true"}, False)
    wait_until(lambda: len(file_lines(out)) == 2, what="good records in the sink")
    assert file_lines(out) == ["{'a': 1}", "{'a': 3}"]
    bad, reported = consume_all(broker.bootstrap, dlq, 2)
    assert bad.value() == b"not json {"
    # A record the task handed to its errant record reporter, with the stage TASK_PUT.
    assert reported.value() == b'{"a": "report-me"}'
    rh = {k: v.decode() for k, v in reported.headers()}
    assert rh["__connect.errors.stage"] == "TASK_PUT" and rh["__connect.errors.offset"] == "3"
    assert "refusing" in rh["__connect.errors.exception.message"]
    h = {k: v.decode() for k, v in bad.headers()}
    assert h["__connect.errors.topic"] == topic
    assert h["__connect.errors.partition"] == "0" and h["__connect.errors.offset"] == "1"
    assert h["__connect.errors.connector.name"] == "tolerant" and h["__connect.errors.task.id"] == "0"
    assert h["__connect.errors.stage"] == "VALUE_CONVERTER"
    assert h["__connect.errors.class.name"] == "org.apache.kafka.connect.json.JsonConverter"
    assert "DataException" in h["__connect.errors.exception.class.name"]
    # The task went on, and its offset passed the poison record.
    wait_until(lambda: group_offsets(broker.bootstrap, "connect-tolerant") == {(topic, 0): 4},
               what="offsets past the poison record")

    # Source side: a record whose transformation fails goes to the DLQ (strom's addition).
    dest, sdlq = uid("dest"), uid("sdlq")
    herder.put_connector_config("src", {
        "connector.class": "SeqSource", "topic": dest, "count": "10", "poison.at": "4",
        "transforms": "check", "transforms.check.type": "FailOnValue", "transforms.check.needle": "poison",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": sdlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true"}, False)
    good = consume_all(broker.bootstrap, dest, 9)
    assert sorted(m.value().decode() for m in good) == sorted(f"v-0-{n}" for n in range(10) if n != 4)
    (sbad,) = consume_all(broker.bootstrap, sdlq, 1)
    sh = {k: v.decode() for k, v in sbad.headers()}
    assert json.loads(sbad.value()) == "v-0-4-poison" and json.loads(sbad.key()) == "k-4"
    assert sh["__connect.errors.topic"] == dest and sh["__connect.errors.stage"] == "TRANSFORMATION"
    assert json.loads(sh["__connect.errors.source.offset"]) == {"n": 4}
    assert sh["__connect.errors.class.name"].endswith("FailOnValue")
    assert sh["__connect.errors.exception.class.name"] == "strom.connect.exceptions.DataException"
    assert "value contains 'poison'" in sh["__connect.errors.exception.stacktrace"]


def test_failed_task_reports_trace_and_restarts_when_enabled(
        broker: BrokerProcess, make_herder: Callable[..., StandaloneHerder], tmp_path: Path) -> None:
    topic = uid("fail")
    produce(broker.bootstrap, topic, [b"ok", b"boom", b"ok2"])
    herder = make_herder()
    herder.put_connector_config("fragile", {
        "connector.class": "FileCollectSink", "topics": topic, "file": str(tmp_path / "f.txt"),
        "put.fail.on": "boom", "errors.restart.enable": "true", "errors.restart.max.retries": "2",
        "errors.restart.backoff.ms": "100"}, False)
    tid = ConnectorTaskId("fragile", 0)
    wait_until(lambda: herder.worker.task_restarts(tid) == 2
               and herder.task_status(tid).state == State.FAILED, what="restarts exhausted")
    st = herder.task_status(tid)
    assert st.trace and "cannot write 'boom'" in st.trace and "ConnectException" in st.trace
    assert herder.connector_status("fragile").to_json()["tasks"][0]["state"] == "FAILED"
    # A manual restart works and the connector keeps failing on the same record (nothing skipped).
    herder.restart_task(tid)
    wait_until(lambda: herder.task_status(tid).state == State.FAILED, what="failure after restart")


def test_standalone_kill_9_loses_nothing(broker: BrokerProcess, tmp_path: Path) -> None:
    """A standalone worker running source → topic → sink is killed with SIGKILL mid-stream and
    started again: every source record reaches the topic and the sink file (at-least-once)."""
    topic, out = uid("k9"), tmp_path / "sink.txt"
    count = 2000
    worker = tmp_path / "worker.properties"
    worker.write_text(f"bootstrap.servers={broker.bootstrap}\noffset.storage.file.filename={tmp_path / 'off'}\n"
                      "offset.flush.interval.ms=200\nkey.converter=StringConverter\n"
                      "value.converter=StringConverter\nlisteners=http://127.0.0.1:0\n"
                      # the killed worker's sink consumer leaves the group by session timeout
                      "consumer.session.timeout.ms=6000\nconsumer.heartbeat.interval.ms=1000\n")
    source = tmp_path / "source.properties"
    source.write_text(f"name=seq\nconnector.class=SeqSource\ntopic={topic}\ncount={count}\nbatch=5\n"
                      "poll.delay.ms=25\n")
    sink = tmp_path / "sink.json"
    sink.write_text(json.dumps({"name": "collect", "config": {
        "connector.class": "FileCollectSink", "topics": topic, "file": str(out)}}))
    env = {**os.environ, "PYTHONPATH": str(HELPERS) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "STROM_PLUGINS": "strom_test_connect_plugins", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "strom.connect.cli", "standalone", str(worker), str(source), str(sink)]
    log = tmp_path / "worker.log"

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(cmd, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
                                start_new_session=True)

    def ready_url() -> str | None:
        lines = log.read_text().splitlines() if log.exists() else []
        return next((ln.split(": ", 1)[1] for ln in lines if ln.startswith("strom connect worker started")), None)

    proc = start()
    try:
        url = wait_until(lambda: ready_url() or proc.poll() is not None, 60, "worker start")
        assert proc.poll() is None, log.read_text()[-3000:]
        # The worker's REST API answers for the connectors given on the command line.
        import requests

        status = requests.get(f"{url}/connectors/collect/status", timeout=10).json()
        assert status["connector"]["state"] == "RUNNING" and status["type"] == "sink"
        assert requests.get(f"{url}/connectors", timeout=10).json() == ["collect", "seq"]
        wait_until(lambda: len(file_lines(out)) > 100 or proc.poll() is not None, 90, "sink progress")
        assert proc.poll() is None, log.read_text()[-3000:]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        before = len(file_lines(out))
        assert before < count  # really mid-stream
        proc = start()
        expected = {f"v-0-{n}" for n in range(count)}
        wait_until(lambda: expected <= set(file_lines(out)) or proc.poll() is not None, 120, "all records")
        assert proc.poll() is None, log.read_text()[-5000:]
        assert expected <= set(file_lines(out))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    in_topic = {m.value().decode() for m in consume_all(broker.bootstrap, topic, count, distinct=True)}
    assert expected <= in_topic


def test_pause_stop_alter_offsets_resume(
        broker: BrokerProcess, make_herder: Callable[..., StandaloneHerder]) -> None:
    from strom.connect.exceptions import BadRequestError
    from strom.connect.runtime.herder import ConnectorOffset, ConnectorOffsets

    topic = uid("ctl")
    herder = make_herder()
    herder.put_connector_config("ctl", {"connector.class": "SeqSource", "topic": topic, "count": "50"}, False)
    assert len(consume_all(broker.bootstrap, topic, 50)) == 50
    herder.pause_connector("ctl")
    wait_until(lambda: herder.connector_status("ctl").tasks[0].state == State.PAUSED, what="paused task")
    assert herder.connector_status("ctl").connector.state == State.PAUSED
    with pytest.raises(BadRequestError, match="STOPPED"):
        herder.reset_connector_offsets("ctl")
    herder.stop_connector("ctl")
    status = herder.connector_status("ctl")
    assert status.connector.state == State.STOPPED and status.tasks == ()
    assert herder.connector_offsets("ctl").to_json() == {
        "offsets": [{"partition": {"task": 0}, "offset": {"n": 49}}]}
    msg = herder.alter_connector_offsets("ctl", ConnectorOffsets((ConnectorOffset({"task": 0}, {"n": 39}),)))
    assert "altered successfully" in msg
    herder.resume_connector("ctl")  # the task resumes after n=39: ten records again
    msgs = consume_all(broker.bootstrap, topic, 60)
    assert sorted(m.value().decode() for m in msgs[50:]) == sorted(f"v-0-{n}" for n in range(40, 50))
    assert herder.connector_status("ctl").connector.state == State.RUNNING


def test_sink_tasks_share_partitions_through_rebalances(
        broker: BrokerProcess, make_herder: Callable[..., StandaloneHerder], tmp_path: Path) -> None:
    from confluent_kafka.admin import NewTopic

    topic, out, events = uid("two"), tmp_path / "sink.txt", tmp_path / "events.txt"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(100):
        p.produce(topic, f"r{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    herder = make_herder()
    herder.put_connector_config("two", {"connector.class": "FileCollectSink", "topics": topic, "file": str(out),
                                        "tasks.max": "2", "events.file": str(events)}, False)
    wait_until(lambda: len(file_lines(out)) >= 100, what="all records")
    assert sorted(file_lines(out)) == sorted(f"r{i}" for i in range(100))
    wait_until(lambda: group_offsets(broker.bootstrap, "connect-two") == {(topic, 0): 50, (topic, 1): 50},
               what="offsets of both partitions")
    tasks = [herder.worker._tasks[ConnectorTaskId("two", i)].task for i in range(2)]
    assert sorted(tp.partition for t in tasks if isinstance(t, WorkerSinkTask) for tp in t.assigned) == [0, 1]
    opened = [line for line in file_lines(events) if line.startswith("open")]
    assert opened and {int(x) for line in opened for x in line[5:].strip("[]").split(",") if x} == {0, 1}
    herder.delete_connector("two")
    closes = [line for line in file_lines(events) if line.startswith("close")]
    assert closes, "close() must be called when partitions go away"


def test_exactly_once_aborts_the_transaction_of_a_failed_task(
        broker: BrokerProcess, make_herder: Callable[..., StandaloneHerder], tmp_path: Path) -> None:
    topic = uid("eos")
    herder = make_herder(**{"exactly.once.source.support": "enabled"})
    # Two polls of 10: the first transaction commits, the second fails at n=15 and is aborted.
    herder.put_connector_config("eos", {
        "connector.class": "SeqSource", "topic": topic, "count": "20", "batch": "10", "poison.at": "15",
        "transforms": "check", "transforms.check.type": "FailOnValue", "transforms.check.needle": "poison"}, False)
    tid = ConnectorTaskId("eos", 0)
    wait_until(lambda: herder.task_status(tid).state == State.FAILED, what="failed task")
    assert "Tolerance exceeded" in (herder.task_status(tid).trace or "")
    committed = consume_all(broker.bootstrap, topic, 11, read_committed=True, timeout=5)
    assert sorted(m.value().decode() for m in committed) == sorted(f"v-0-{n}" for n in range(10))
    # (records 10..14 may or may not have reached the log before the abort; read_committed never sees them)
    herder.stop()
    store = FileOffsetBackingStore(tmp_path / "offsets")
    store.start()  # only the committed transaction's offset reached the file
    assert OffsetStorageReaderImpl(store, "eos").offset({"task": 0}) == {"n": 9}


@pytest.mark.parametrize("stopping", [False, True], ids=["running", "stopping"])
def test_exactly_once_task_fenced_during_its_commit(
        broker: BrokerProcess, make_herder: Callable[..., StandaloneHerder], stopping: bool) -> None:
    """A newer producer takes the task's transactional.id between the records of a transaction
    and its commit (zombie fencing): the commit is refused, the broker aborted the transaction
    (read_committed sees none of it), and the task's producer is closed without hanging. A running
    task fails with a trace naming the fencing; a task being stopped ends as a stopped one, not
    FAILED (the flake of test_zombie_of_old_generation_is_fenced: its old tasks are stopped while
    the round fences them)."""
    from strom.connect.runtime.distributed.fencing import fence_producers

    topic, gate_name = uid("fenced"), uid("gate")
    gate = tp.GATES.setdefault(gate_name, tp.Gate())
    herder = make_herder(**{"exactly.once.source.support": "enabled", "task.shutdown.graceful.timeout.ms": "20000"})
    herder.put_connector_config("gated", {"connector.class": "GatedTxnSource", "topic": topic, "count": "10",
                                          "gate": gate_name, "transaction.boundary": "connector"}, False)
    tid = ConnectorTaskId("gated", 0)
    assert gate.in_transaction.wait(60), "the task never opened its transaction"
    assert len(consume_all(broker.bootstrap, topic, 10, timeout=30)) == 10  # in the log, uncommitted
    fence_producers({"bootstrap.servers": broker.bootstrap}, ["connect-standalone-gated-0"], 30)
    task = herder.worker._tasks[tid].task  # the task's thread, to see how it ended
    if stopping:
        # The stop waits for the task's thread, which is parked in poll until the gate opens.
        stopper = threading.Thread(target=herder.stop_connector, args=("gated",), daemon=True)
        stopper.start()
        wait_until(task.stopping.is_set, what="the task asked to stop")
        gate.release.set()
        stopper.join(30)
        assert not stopper.is_alive(), "stopping a fenced task hung"
        assert not task.is_alive() and tid not in herder.worker.task_ids()
        assert task.failure is None, f"a task fenced while stopping failed: {task.failure!r}"
    else:
        gate.release.set()
        wait_until(lambda: herder.task_status(tid).state == State.FAILED, timeout=60, what="the fenced task FAILED")
        trace = herder.task_status(tid).trace or ""
        assert "was fenced" in trace and "connect-standalone-gated-0" in trace, trace
        wait_until(lambda: not task.is_alive(), timeout=30, what="the fenced task's thread ended")
    assert consume_all(broker.bootstrap, topic, 1, read_committed=True, timeout=3) == []


def test_source_task_fails_naming_the_bound_when_the_broker_stays_away(
        fresh_broker: BrokerProcess, tmp_path: Path) -> None:
    """The broker goes away for good: records wait in the producer (back-pressure) until their
    bound runs out, then the task FAILs with a trace naming the bound. Even with
    errors.tolerance=all a timed-out delivery is not a record error: nothing is skipped silently."""
    fresh_broker.start()
    topic = uid("away")
    herder = StandaloneHerder(WorkerConfig.from_mapping({
        "bootstrap.servers": fresh_broker.bootstrap, "offset.storage.file.filename": str(tmp_path / "offsets"),
        "offset.flush.interval.ms": "300", "key.converter": "StringConverter", "value.converter": "StringConverter",
        "listeners": "http://127.0.0.1:0", "producer.delivery.timeout.ms": "3000", "producer.max.block.ms": "3000",
        "producer.queue.buffering.max.messages": "500", "producer.reconnect.backoff.max.ms": "500"}), registry())
    herder.start()
    try:
        herder.put_connector_config("seq", {"connector.class": "SeqSource", "topic": topic, "count": "100000000",
                                            "batch": "100", "poll.delay.ms": "5", "errors.tolerance": "all"}, False)
        tid = ConnectorTaskId("seq", 0)
        wait_until(lambda: len(consume_all(fresh_broker.bootstrap, topic, 1, timeout=5)) >= 1, timeout=60,
                   what="records flowing")
        fresh_broker.kill()
        wait_until(lambda: herder.task_status(tid).state == State.FAILED, timeout=60,
                   what="the task FAILED once its bound ran out")
        trace = herder.task_status(tid).trace or ""
        assert "delivery.timeout.ms" in trace or "max.block.ms" in trace, trace
    finally:
        herder.stop()


def test_worker_stop_is_bounded_when_connectors_hang_on_stop(broker: BrokerProcess, tmp_path: Path) -> None:
    """Two connectors whose stop() never returns: the worker stops them in parallel and gives up
    after one task.shutdown.graceful.timeout.ms (Kafka's stopAndAwaitConnectors); before, it
    called each stop() in turn and waited on the first for good."""
    gate_names = {name: uid(name) for name in ("hang-a", "hang-b")}
    gates = {name: tp.GATES.setdefault(gate, tp.Gate()) for name, gate in gate_names.items()}
    herder = StandaloneHerder(WorkerConfig.from_mapping({
        "bootstrap.servers": broker.bootstrap, "offset.storage.file.filename": str(tmp_path / "offsets"),
        "key.converter": "StringConverter", "value.converter": "StringConverter", "listeners": "http://127.0.0.1:0",
        "task.shutdown.graceful.timeout.ms": "1000"}), registry())
    herder.start()
    try:
        for name, gate_name in gate_names.items():
            herder.put_connector_config(name, {"connector.class": "HangOnStopSource", "gate": gate_name}, False)
        stopper = threading.Thread(target=herder.stop, daemon=True)
        stopper.start()
        stopper.join(30)
        assert not stopper.is_alive(), "the worker waited for a connector that hangs on stop"
        assert all(g.in_transaction.is_set() for g in gates.values()), "not every connector was asked to stop"
        assert not any(g.release.is_set() for g in gates.values())  # both still hanging: stop did not wait
    finally:
        for g in gates.values():
            g.release.set()
