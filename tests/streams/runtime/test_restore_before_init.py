"""Stores are restored before processors' ``init`` runs (Kafka's RESTORING -> RUNNING order).

A Processor API processor rebuilds an in-memory index of its key-value store in ``init`` and
answers, per record, whether the key was seen before. After a restart on an empty state dir (a
clean close) or after kill -9 under exactly_once_v2 (no checkpoint: local state wiped), the task
must restore the store from its changelog first, so ``init`` sees every committed entry and the
rebuilt index answers "seen" for old keys.

Run as a script (``bootstrap input output app_id state_dir``) it is the app process the kill -9
test kills.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.testing import BrokerProcess
from strom.streams import KafkaStreams, Processor, Record, Serdes, StoreSpec, StreamsError, Topology
from strom.streams.runtime import State
from strom.streams.runtime.task import StreamTask, TaskState

S = Serdes.string()
STORE = "remembered"
PARTITIONS = 2
KEYS = 40

#: (task id, store contents seen by ``init``) per ``init`` call in this process
InitLog = list[tuple[str, dict[str, str]]]


class Remember(Processor[str, str]):
    """Stores the last value per key; keeps an index of known keys rebuilt from the store in init."""

    def __init__(self, init_log: InitLog) -> None:
        self.init_log = init_log
        self.index: set[str] = set()

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(STORE)
        snapshot = dict(self.store.all())
        self.index = set(snapshot)  # the in-memory index a real app would rebuild here
        self.init_log.append((context.task_id, snapshot))

    def process(self, record: Record[str, str]) -> None:
        known = "seen" if record.key in self.index else "new"
        self.index.add(record.key)
        self.store.put(record.key, record.value)
        self.context.forward(record.with_value(f"{known}:{record.value}"))


def build(input_topic: str, output_topic: str, init_log: InitLog) -> Topology:
    t = Topology()
    t.add_source("src", input_topic, key_serde=S, value_serde=S)
    t.add_processor("remember", lambda: Remember(init_log), "src")
    t.add_state_store(StoreSpec(STORE, key_serde=S, value_serde=S), "remember")  # RocksDB, logged
    t.add_sink("sink", output_topic, "remember", key_serde=S, value_serde=S)
    return t


def config(bootstrap: str, app_id: str, state_dir: Path | str, guarantee: str) -> dict[str, Any]:
    return {"application.id": app_id, "bootstrap.servers": bootstrap, "processing.guarantee": guarantee,
            "commit.interval.ms": 100, "state.dir": str(state_dir),
            "consumer.session.timeout.ms": 6000}


def produce(bootstrap: str, topic: str, value_of: Callable[[int], str]) -> None:
    """One record per key k00..k39; key i goes to partition i % PARTITIONS."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(KEYS):
        p.produce(topic, value_of(i).encode(), f"k{i:02d}".encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0


def read_until(bootstrap: str, topic: str, want: Callable[[dict[str, str]], bool],
               timeout: float = 90.0) -> dict[str, str]:
    """Last output value per key (read_committed) once ``want`` holds for it, or at timeout."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    last: dict[str, str] = {}
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not want(last):
            for m in c.consume(500, 0.5):
                key, value = m.key(), m.value()
                if m.error() is None and key is not None and value is not None:
                    last[key.decode()] = value.decode()
    finally:
        c.close()
    return last


def expected_per_task(value_of: Callable[[int], str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {f"0_{p}": {} for p in range(PARTITIONS)}
    for i in range(KEYS):
        out[f"0_{i % PARTITIONS}"][f"k{i:02d}"] = value_of(i)
    return out


def first_value(i: int) -> str:
    return f"v{i}"


def _topics(bootstrap: str) -> tuple[str, str, str]:
    tag = uuid.uuid4().hex[:8]
    inp, out = f"rbi-in-{tag}", f"rbi-out-{tag}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futs = admin.create_topics([NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in (inp, out)])
    for f in futs.values():
        f.result()
    return inp, out, f"rbi-{tag}"


def _restart_and_check(bootstrap: str, inp: str, out: str, app_id: str, state_dir: Path,
                       guarantee: str) -> None:
    """Starts a new instance; every init must see its partition's committed entries, and the index
    it rebuilt must know every old key."""
    init_log: InitLog = []
    logs: list[str] = []
    app = KafkaStreams(build(inp, out, init_log), config(bootstrap, app_id, state_dir, guarantee),
                       log=logs.append)
    app.start()
    try:
        produce(bootstrap, inp, lambda i: f"again{i}")
        got = read_until(bootstrap, out, lambda d: len(d) == KEYS and all(":again" in v for v in d.values()))
        assert app.state() is State.RUNNING, app.errors()
        want = expected_per_task(first_value)
        assert init_log, "init never ran"
        assert {task for task, _ in init_log} == set(want)
        for task, snapshot in init_log:
            # the first init of a task runs right after restoration; later ones (a rebalance)
            # may also see the new values already written
            assert set(snapshot) == set(want[task]), (task, snapshot)
        first_inits = {task: snap for task, snap in reversed(init_log)}
        assert first_inits == want
        assert got == {f"k{i:02d}": f"seen:again{i}" for i in range(KEYS)}, got
        assert any(f"restoring store {STORE!r}" in line for line in logs), logs
        assert sum(app.restored_records().values()) >= KEYS
    finally:
        assert app.close(30)


def test_init_sees_restored_store_after_restart_on_fresh_state_dir(broker: BrokerProcess, tmp_path: Path) -> None:
    """Clean close, restart on an empty state dir: the store comes only from the changelog."""
    inp, out, app_id = _topics(broker.bootstrap)
    produce(broker.bootstrap, inp, first_value)
    init_log: InitLog = []
    app = KafkaStreams(build(inp, out, init_log),
                       config(broker.bootstrap, app_id, tmp_path / "a", "at_least_once"))
    app.start()
    try:
        got = read_until(broker.bootstrap, out, lambda d: len(d) == KEYS)
        assert got == {f"k{i:02d}": f"new:v{i}" for i in range(KEYS)}
        # a first run starts from empty stores
        assert init_log and all(snap == {} for _, snap in init_log)
    finally:
        assert app.close(30)
    _restart_and_check(broker.bootstrap, inp, out, app_id, tmp_path / "b", "at_least_once")


def test_init_sees_restored_store_after_kill9_exactly_once(broker: BrokerProcess, tmp_path: Path) -> None:
    """kill -9 under exactly_once_v2: no checkpoint, so the restart wipes the task's local state
    and restores it from the changelog before any processor's init runs."""
    inp, out, app_id = _topics(broker.bootstrap)
    produce(broker.bootstrap, inp, first_value)
    state_dir = tmp_path / "state"
    log_path = tmp_path / "app1.log"
    with log_path.open("w") as log_file:
        proc = subprocess.Popen([sys.executable, __file__, broker.bootstrap, inp, out, app_id, str(state_dir)],
                                stdout=log_file, stderr=subprocess.STDOUT)
        try:
            # every output record committed means every store write is in the committed changelog
            got = read_until(broker.bootstrap, out, lambda d: len(d) == KEYS)
            assert got == {f"k{i:02d}": f"new:v{i}" for i in range(KEYS)}, log_path.read_text()[-3000:]
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    for p in range(PARTITIONS):
        # the crash left local RocksDB data but no checkpoint: the restart must wipe it
        assert (state_dir / app_id / f"0_{p}").exists()
        assert not (state_dir / app_id / f"0_{p}" / ".checkpoint").exists()
    _restart_and_check(broker.bootstrap, inp, out, app_id, state_dir, "exactly_once_v2")


class FailingInit(Remember):
    """Remember whose init fails once the store is restored (a bug in user code at startup)."""

    def init(self, context: Any) -> None:
        super().init(context)
        raise RuntimeError("init failed")


def test_task_lifecycle_and_failed_init_releases_stores(broker: BrokerProcess, tmp_path: Path) -> None:
    """StreamTask on its own: CREATED -> RESTORING -> RUNNING, init only after restore; an init
    that raises leaves the task closed with its RocksDB store released, so it can reopen."""
    tag = uuid.uuid4().hex[:8]
    app_id = f"rbi-task-{tag}"
    changelog = f"{app_id}-{STORE}-changelog"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(changelog, num_partitions=1, replication_factor=1)]).values():
        f.result()
    p = Producer({"bootstrap.servers": broker.bootstrap})
    entries = {f"k{i}": f"v{i}" for i in range(25)}
    for k, v in entries.items():
        p.produce(changelog, v.encode(), k.encode(), partition=0)
    p.produce(changelog, None, b"k0", partition=0)  # a tombstone: k0 is deleted
    del entries["k0"]
    assert p.flush(30) == 0
    restore_conf = {"bootstrap.servers": broker.bootstrap, "group.id": f"{app_id}-restore"}

    def make(init_log: InitLog, fail: bool) -> StreamTask:
        t = Topology()
        t.add_source("src", f"rbi-task-in-{tag}", key_serde=S, value_serde=S)
        t.add_processor("remember", (lambda: FailingInit(init_log)) if fail else (lambda: Remember(init_log)),
                        "src")
        t.add_state_store(StoreSpec(STORE, key_serde=S, value_serde=S), "remember")
        sub = t.subtopologies()[0]
        return StreamTask(t, sub, 0, application_id=app_id, state_dir=str(tmp_path), emit=lambda *a: None,
                          exactly_once=True, default_key_serde=None, default_value_serde=None)

    failing_log: InitLog = []
    task = make(failing_log, fail=True)
    assert task.state is TaskState.CREATED and not failing_log
    assert task.restore(restore_conf, log=lambda line: None) == 26
    assert task.state is TaskState.RESTORING and not failing_log  # no processor exists yet
    with pytest.raises(RuntimeError, match="init failed"):
        task.start_processing()
    assert failing_log == [("0_0", entries)]  # init ran, after the restore
    task.close(clean=False)
    assert task.state is TaskState.CLOSED
    assert not (task.dir / ".checkpoint").exists()

    # the failed task released its RocksDB store: the task reopens (no checkpoint under EOS:
    # local state wiped, restored in full again)
    init_log: InitLog = []
    task = make(init_log, fail=False)
    try:
        assert task.restore(restore_conf, log=lambda line: None) == 26
        task.start_processing()
        assert task.state is TaskState.RUNNING
        assert init_log == [("0_0", entries)]
        with pytest.raises(StreamsError, match="restore in state RUNNING"):
            task.restore(restore_conf, log=lambda line: None)
    finally:
        task.close(clean=True)
    assert task.state is TaskState.CLOSED
    assert (task.dir / ".checkpoint").exists()


def main() -> None:
    bootstrap, inp, out, app_id, state_dir = sys.argv[1:6]
    app = KafkaStreams(build(inp, out, []), config(bootstrap, app_id, state_dir, "exactly_once_v2"))
    app.start()
    print("started", flush=True)
    while True:
        time.sleep(0.5)
        if app.state() is State.ERROR:
            print("ERROR", app.errors(), flush=True)
            sys.exit(1)


if __name__ == "__main__":
    main()
