"""kill -9 of a standalone worker (``strom connect standalone`` subprocess) mid-run, then a restart:

- directory source: every row of every file is in the topic (at least once) and every file ends
  in finished.path;
- datagen (seeded) -> topic -> JDBC sink (upsert) into a real PostgreSQL: the table ends with
  exactly the generated rows.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

import psycopg
from confluent_kafka import Consumer, TopicPartition

from strom.connect.connectors.datagen import generate
from strom.core.testing import BrokerProcess

READY = "strom connect worker started"
FILES, ROWS = 12, 3000


def start_worker(args: list[str], log: deque[str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "strom.core.cli", "connect", "standalone", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.append(line.rstrip())
            if READY in line:
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(60) or proc.poll() is not None:
        proc.kill()
        raise AssertionError("worker did not start:\n" + "\n".join(log))
    return proc


def wait_until(check: object, timeout: float, what: str, log: deque[str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}:\n" + "\n".join(list(log)[-40:]))


def test_kill9_mid_directory_resumes_without_loss(broker: BrokerProcess, tmp_path: Path, topic_name: str) -> None:
    inbox, done, err = tmp_path / "in", tmp_path / "done", tmp_path / "err"
    inbox.mkdir()
    for f in range(FILES):
        rows = "".join(f"{f}-{r},{'x' * 40}\n" for r in range(ROWS))
        (inbox / f"part-{f:03d}.csv").write_text("id,payload\n" + rows)
    worker = tmp_path / "worker.properties"
    worker.write_text("\n".join([
        f"bootstrap.servers={broker.bootstrap}", "listeners=http://127.0.0.1:0",
        f"offset.storage.file.filename={tmp_path / 'offsets.dat'}", "offset.flush.interval.ms=100",
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        "value.converter=org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable=false",
    ]) + "\n")
    conn = tmp_path / "dir.properties"
    conn.write_text("\n".join([
        "name=dir", "connector.class=DirectorySource", f"input.path={inbox}", f"finished.path={done}",
        f"error.path={err}", f"topic={topic_name}", "batch.size=200", "poll.interval.ms=50", "key.field=id",
    ]) + "\n")
    log: deque[str] = deque(maxlen=500)
    args = [str(worker), str(conn)]

    first = start_worker(args, log)
    try:
        wait_until(lambda: done.exists() and any(done.iterdir()), 120, "a first finished file", log)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # no shutdown hooks: offsets only as last flushed
        first.wait()

    second = start_worker(args, log)
    try:
        wait_until(lambda: not any(inbox.iterdir()) and done.exists() and len(list(done.iterdir())) == FILES,
                   180, "all files finished", log)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(60)
    assert not err.exists() or not any(err.iterdir())

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"check-{topic_name}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        md = consumer.list_topics(topic_name, timeout=30)
        parts = [TopicPartition(topic_name, p) for p in md.topics[topic_name].partitions]
        ends = {p.partition: consumer.get_watermark_offsets(p, timeout=30)[1] for p in parts}
        consumer.assign([TopicPartition(topic_name, p.partition, 0) for p in parts])
        seen: set[str] = set()
        read = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + 120
        while any(read[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1.0):
                if msg.error():
                    continue
                partition, offset, raw, key = msg.partition(), msg.offset(), msg.value(), msg.key()
                assert partition is not None and offset is not None and raw is not None and key is not None
                read[partition] = offset + 1
                value = json.loads(raw)
                assert key.decode() == value["id"]
                seen.add(value["id"])
    finally:
        consumer.close()
    expected = {f"{f}-{r}" for f in range(FILES) for r in range(ROWS)}
    missing = sorted(expected - seen)
    assert not missing, f"{len(missing)} rows missing, e.g. {missing[:5]}; ends {ends}; read {read}"
    assert seen == expected  # nothing lost; duplicates of the unflushed tail are allowed


def test_kill9_datagen_to_postgres_ends_exact(broker: BrokerProcess, tmp_path: Path, topic_name: str,
                                             pg_database: str) -> None:
    n = 6000
    dsn = pg_database.removeprefix("jdbc:").split("?")[0]
    worker = tmp_path / "worker.properties"
    worker.write_text("\n".join([
        f"bootstrap.servers={broker.bootstrap}", "listeners=http://127.0.0.1:0",
        f"offset.storage.file.filename={tmp_path / 'offsets.dat'}", "offset.flush.interval.ms=100",
        "key.converter=org.apache.kafka.connect.json.JsonConverter",
        "value.converter=org.apache.kafka.connect.json.JsonConverter",
        # The killed worker's sink consumer stays in the group until its session times out.
        "consumer.session.timeout.ms=6000", "consumer.heartbeat.interval.ms=1000",
    ]) + "\n")
    source = tmp_path / "dg.properties"
    source.write_text("\n".join([
        "name=dg", "connector.class=Datagen", f"kafka.topic={topic_name}", "quickstart=orders",
        f"iterations={n}", "max.interval=0", "random.seed=11", "batch.size=200",
    ]) + "\n")
    sink = tmp_path / "jdbc.properties"
    sink.write_text("\n".join([
        "name=pg", "connector.class=JdbcSink", f"topics={topic_name}", f"connection.url={pg_database}",
        "auto.create=true", "insert.mode=upsert", "pk.mode=record_value", "pk.fields=orderid", "batch.size=500",
        "transforms=flat", "transforms.flat.type=org.apache.kafka.connect.transforms.Flatten$Value",
    ]) + "\n")

    def count() -> int:
        try:
            with psycopg.connect(dsn, user="postgres") as conn:
                row = conn.execute(f'SELECT count(*) FROM "{topic_name}"').fetchone()
        except psycopg.errors.UndefinedTable:
            return 0
        return int(row[0]) if row else 0

    log: deque[str] = deque(maxlen=500)
    args = [str(worker), str(source), str(sink)]
    first = start_worker(args, log)
    try:
        wait_until(lambda: count() > 0, 120, "first rows in PostgreSQL", log)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    second = start_worker(args, log)
    try:
        wait_until(lambda: count() == n, 180, f"{n} rows in PostgreSQL", log)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(60)
    expected = [(r["orderid"], r["itemid"], r["orderunits"], r["address"]["city"])
                for r in generate("orders", n, 11)]
    with psycopg.connect(dsn, user="postgres") as conn:
        rows = conn.execute(f'SELECT orderid, itemid, orderunits, "address.city" FROM "{topic_name}" '
                            "ORDER BY orderid").fetchall()
    assert rows == expected
