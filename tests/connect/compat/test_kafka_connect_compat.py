"""A Kafka Connect worker (Java, from Maven Central) and a strom.connect worker take turns over
the same Connect cluster (group.id and the three internal topics) on the bundled broker.

Each direction: one kind of worker creates a FileStreamSource connector with SMTs through its
REST API, copies some lines and stops; the other kind starts on the same topics, lists the
connector with the same config, info and task list through its REST API, and runs it from the
source offset the first one stored: the lines appended meanwhile arrive exactly once, shaped by
the same transformations, and nothing is read twice.
"""

from __future__ import annotations

import json
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from compat_workers import KConnectRef, StromConnectProcess, wait_for, worker_base
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.testing import BrokerProcess

pytestmark = pytest.mark.usefixtures("kconnect_jars")

FIRST, MORE = 20, 10


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def read_topic(bootstrap: str, topic: str, partitions: int = 1) -> list[tuple[bytes | None, bytes | None,
                                                                             list[tuple[str, bytes]]]]:
    """Every record now in ``topic`` (key, value, headers), from the beginning."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"compat-read-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "log_level": 0})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = {p: consumer.get_watermark_offsets(tp, timeout=10)[1] for p, tp in enumerate(tps)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
        seen = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + 30
        while any(seen[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            seen[msg.partition() or 0] = (msg.offset() or 0) + 1
            headers = [(str(h[0]), h[1].encode() if isinstance(h[1], str) else bytes(h[1] or b""))
                       for h in (msg.headers() or [])]
            out.append((msg.key(), msg.value(), headers))
        return out
    finally:
        consumer.close()


def connector_config(name: str, source: Path, topic: str) -> dict[str, str]:
    """FileStreamSource by its Java class name, with converters and four SMTs in the config."""
    return {
        "name": name,
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasks.max": "1", "file": str(source), "topic": f"raw-{topic}",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "transforms": "hoist,origin,route,tag",
        "transforms.hoist.type": "org.apache.kafka.connect.transforms.HoistField$Value",
        "transforms.hoist.field": "line",
        "transforms.origin.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.origin.static.field": "origin", "transforms.origin.static.value": "compat",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": "raw-(.*)", "transforms.route.replacement": "out-$1",
        "transforms.tag.type": "org.apache.kafka.connect.transforms.InsertHeader",
        "transforms.tag.header": "via", "transforms.tag.value.literal": "compat-test",
    }


def expected_records(lines: list[str]) -> list[tuple[None, dict[str, str], list[tuple[str, bytes]]]]:
    return [(None, {"line": line, "origin": "compat"}, [("via", b"compat-test")]) for line in lines]


def decoded(records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]) -> list[Any]:
    return [(k, json.loads(v) if v is not None else None, h) for k, v, h in records]


def rest_ok(worker: KConnectRef | StromConnectProcess, method: str, path: str, body: Any = None,
            status: int = 200) -> Any:
    code, out = worker.rest(method, path, body)
    assert code == status, f"{method} {path}: {code} {out}"
    return out


def running(worker: KConnectRef | StromConnectProcess, name: str) -> Any:
    code, st = worker.rest("GET", f"/connectors/{name}/status")
    if code != 200 or st["connector"]["state"] != "RUNNING" or not st["tasks"]:
        return None
    return st if all(t["state"] == "RUNNING" for t in st["tasks"]) else None


def committed_position(worker: KConnectRef | StromConnectProcess, name: str) -> int | None:
    """The FileStreamSource offset the worker reports through GET /connectors/{c}/offsets."""
    code, body = worker.rest("GET", f"/connectors/{name}/offsets")
    if code != 200 or not body["offsets"]:
        return None
    (entry,) = body["offsets"]
    return int(entry["offset"]["position"])


def view(worker: KConnectRef | StromConnectProcess, name: str) -> dict[str, Any]:
    """What one worker's REST API says about the connector."""
    info = rest_ok(worker, "GET", f"/connectors/{name}")
    return {
        "connectors": rest_ok(worker, "GET", "/connectors"),
        "config": rest_ok(worker, "GET", f"/connectors/{name}/config"),
        "info": {**info, "tasks": sorted(info["tasks"], key=lambda t: t["task"])},
        "tasks": [t["id"] for t in rest_ok(worker, "GET", f"/connectors/{name}/tasks")],
        # Task configs are each runtime's own: Kafka's FileStreamSourceConnector hands its task the
        # whole connector config, strom's only what the task reads (both name Kafka's task class in
        # ``task.class``, so either worker can run the other's tasks); a leader rewrites task
        # configs that differ from its own. What the task does is the same: compare the keys the
        # task reads.
        "task_config": [{k: t["config"].get(k) for k in ("file", "topic")}
                        for t in rest_ok(worker, "GET", f"/connectors/{name}/tasks")],
    }


def first_then_second(broker: BrokerProcess, tmp_path: Path, first_kind: str, *,
                      crash: bool = False) -> dict[str, str]:
    """Run one handover; return the cluster's worker settings (group, internal topics).

    ``crash``: the first worker is killed with SIGKILL while the appended lines are being read
    (nothing lost; lines after its last committed offset may come twice, as in Kafka Connect),
    and undecodable records are put in the config topic before the second worker starts (both
    Kafka Connect and strom skip them).
    """
    base = worker_base(broker.bootstrap)
    suffix = base["group.id"].removeprefix("compat-")
    name, source = f"file-src-{suffix}", tmp_path / "in.txt"
    topic = f"out-{suffix}"
    create_topic(broker.bootstrap, f"raw-{suffix}")  # RegexRouter sends nothing there; both need it
    create_topic(broker.bootstrap, topic)
    # ASCII only: Kafka's FileStreamSourceTask counts its "position" in chars but seeks in bytes
    # on restart, while strom's counts bytes; the two agree only on ASCII files.
    lines = [f"line {i}" for i in range(FIRST + MORE)]
    source.write_text("".join(f"{x}\n" for x in lines[:FIRST]), encoding="utf-8")
    config = connector_config(name, source, suffix)

    def make(kind: str) -> KConnectRef | StromConnectProcess:
        if kind == "java":
            return KConnectRef(broker.bootstrap, base, work_dir=tmp_path / "java")
        return StromConnectProcess(base, tmp_path / "strom")

    second_kind = "strom" if first_kind == "java" else "java"
    first = make(first_kind)
    try:
        first.start()
        created = rest_ok(first, "POST", "/connectors", {"name": name, "config": config}, status=201)
        assert created["name"] == name and created["config"] == config
        wait_for(lambda: running(first, name), what=f"{first_kind} runs the connector")
        wait_for(lambda: len(read_topic(broker.bootstrap, topic)) >= FIRST, what=f"{FIRST} records")
        size = source.stat().st_size
        wait_for(lambda: committed_position(first, name) == size, what=f"{first_kind} commits offset {size}")
        before = view(first, name)
        if crash:
            with source.open("a", encoding="utf-8") as f:  # read by the first worker as it dies
                f.write("".join(f"{x}\n" for x in lines[FIRST:]))
            time.sleep(1.2)  # Kafka's FileStreamSourceTask looks for new lines once a second
            first.kill()
    except BaseException:
        print(f"--- {first_kind} worker log ---\n{first.log_tail(150)}")  # shown by pytest on failure
        raise
    finally:
        first.stop()

    assert before["config"] == config
    assert before["info"] == {"name": name, "config": config, "tasks": [{"connector": name, "task": 0}],
                              "type": "source"}
    if crash:
        put_garbage(broker.bootstrap, base["config.storage.topic"], name)
    else:
        with source.open("a", encoding="utf-8") as f:  # written while no worker runs the connector
            f.write("".join(f"{x}\n" for x in lines[FIRST:]))

    second = make(second_kind)
    try:
        second.start()
        after = view(second, name)
        # The second kind of worker lists the connector exactly as the first stored it.
        assert after == before
        wait_for(lambda: running(second, name), what=f"{second_kind} runs the connector")
        total = source.stat().st_size
        wait_for(lambda: committed_position(second, name) == total,
                 what=f"{second_kind} continues to offset {total}")
        wait_for(lambda: len(read_topic(broker.bootstrap, topic)) >= FIRST + MORE, what="the appended lines")
        time.sleep(1.5)  # a worker that re-read the file from its start would add records now
        got = decoded(read_topic(broker.bootstrap, topic))
        if crash:
            # At least once: the committed lines exactly once, then every later line, in order,
            # possibly sent again by the second worker after the first one's uncommitted tries.
            assert got[:FIRST] == expected_records(lines[:FIRST])
            tail = expected_records(lines[FIRST:])
            assert [r for i, r in enumerate(got[FIRST:]) if r not in got[FIRST:FIRST + i]] == tail
        else:
            # Every line once, in order, transformed alike by both workers.
            assert got == expected_records(lines)
        status = running(second, name)
        assert status is not None and status["type"] == "source"
        assert {t["worker_id"] for t in status["tasks"]} == {f"127.0.0.1:{second.port}"}
    except BaseException:
        print(f"--- {second_kind} worker log ---\n{second.log_tail(150)}")
        raise
    finally:
        second.stop()
    return base


def put_garbage(bootstrap: str, topic: str, name: str) -> None:
    """Records no Connect worker can decode, under keys of the kinds it reads: a truncated
    connector config, a task config that is not JSON, and a commit of another connector."""
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, key=b"connector-broken", value=b'{"properties":{"connector.cl')
    producer.produce(topic, key=f"task-{name}-7".encode(), value=b"\x00\xffnot json")
    producer.produce(topic, key=b"commit-broken", value=b"[1,2")
    assert producer.flush(30) == 0


def test_java_worker_creates_strom_worker_continues(broker: BrokerProcess, tmp_path: Path) -> None:
    first_then_second(broker, tmp_path, "java")


def test_strom_worker_creates_java_worker_continues(broker: BrokerProcess, tmp_path: Path) -> None:
    first_then_second(broker, tmp_path, "strom")


@pytest.mark.parametrize("first_kind", ["java", "strom"])
def test_worker_killed_the_other_kind_resumes_past_garbage(broker: BrokerProcess, tmp_path: Path,
                                                           first_kind: str) -> None:
    first_then_second(broker, tmp_path, first_kind, crash=True)


def keys_by_partition(bootstrap: str, topic: str) -> dict[bytes, set[int]]:
    """key -> the partitions holding records with that key."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = len(admin.list_topics(topic, timeout=10).topics[topic].partitions)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"compat-keys-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "log_level": 0})
    out: dict[bytes, set[int]] = {}
    try:
        for p in range(partitions):
            end = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            if end == 0:
                continue
            consumer.assign([TopicPartition(topic, p, 0)])
            seen, deadline = 0, time.monotonic() + 20
            while seen < end and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                seen = (msg.offset() or 0) + 1
                out.setdefault(msg.key() or b"", set()).add(p)
        return out
    finally:
        consumer.close()


def test_both_workers_put_each_internal_key_in_one_partition(broker: BrokerProcess, tmp_path: Path) -> None:
    base = first_then_second(broker, tmp_path, "java")
    for role in ("offset", "status"):
        topic = base[f"{role}.storage.topic"]
        split = {k: sorted(ps) for k, ps in keys_by_partition(broker.bootstrap, topic).items() if len(ps) > 1}
        assert split == {}, f"{topic}: keys in several partitions: {split}"


def test_mixed_cluster_java_and_strom_in_one_group(broker: BrokerProcess, tmp_path: Path) -> None:
    """Both kinds of worker in the same group at once (connect protocol v2, "sessioned"): the
    Java worker, first in, leads; creates sent to the strom follower are forwarded to it; the
    assignor spreads connectors over both; when the Java worker stops, strom takes over all."""
    base = worker_base(broker.bootstrap)
    suffix = base["group.id"].removeprefix("compat-")
    names = [f"mix{n}-{suffix}" for n in range(3)]
    configs: dict[str, dict[str, str]] = {}
    for n, name in enumerate(names):
        source = tmp_path / f"in{n}.txt"
        source.write_text("".join(f"line {n}-{i}\n" for i in range(FIRST)), encoding="utf-8")
        create_topic(broker.bootstrap, f"raw-{suffix}{n}")
        create_topic(broker.bootstrap, f"out-{suffix}{n}")
        configs[name] = connector_config(name, source, f"{suffix}{n}")

    java = KConnectRef(broker.bootstrap, base, work_dir=tmp_path / "java")
    strom = StromConnectProcess(base, tmp_path / "strom")
    workers: list[KConnectRef | StromConnectProcess] = [java, strom]
    try:
        java.start()
        strom.start()
        for name in names:  # through the follower: forwarded to the Java leader
            rest_ok(strom, "POST", "/connectors", {"name": name, "config": configs[name]}, status=201)
        def listed_by(w: KConnectRef | StromConnectProcess) -> bool:
            code, out = w.rest("GET", "/connectors")
            assert code in (200, 409, 500), (code, out)  # 409/500: mid-rebalance, ask again
            return code == 200 and sorted(out) == sorted(names)

        def has_all(n: int) -> bool:
            return len(read_topic(broker.bootstrap, f"out-{suffix}{n}")) == FIRST

        def on_strom_only(name: str) -> bool:
            st = running(strom, name)
            return st is not None and {t["worker_id"] for t in st["tasks"]} == {f"127.0.0.1:{strom.port}"}

        def config_is(w: KConnectRef | StromConnectProcess, name: str) -> bool:
            # a worker answers 409 (strom) or 500 (Kafka Connect) while the group rebalances
            code, out = w.rest("GET", f"/connectors/{name}/config")
            assert code in (200, 409, 500), (code, out)
            return code == 200 and out == configs[name]

        for w in workers:
            wait_for(partial(listed_by, w), what="all listed")
            for name in names:
                wait_for(partial(config_is, w, name), what=f"config of {name}")
        both = {f"127.0.0.1:{java.port}", f"127.0.0.1:{strom.port}"}

        def spread_over_both() -> bool:
            statuses = [running(java, name) for name in names]
            return all(statuses) and {t["worker_id"] for st in statuses for t in st["tasks"]} == both

        try:
            wait_for(spread_over_both, what="every connector RUNNING, tasks on both workers")
        except AssertionError as exc:  # say what each worker reports, traces included
            seen = {f"{type(w).__name__}:{w.port}": [w.rest("GET", f"/connectors/{n}/status") for n in names]
                    for w in workers}
            raise AssertionError(f"{exc}; statuses: {seen}") from None
        for n in range(3):
            wait_for(partial(has_all, n), what=f"records of connector {n}")

        java.stop()  # strom is left alone: it leads and runs everything
        for name in names:
            wait_for(partial(on_strom_only, name), what=f"{name} RUNNING on strom")
        for n in range(3):
            got = decoded(read_topic(broker.bootstrap, f"out-{suffix}{n}"))
            assert got == expected_records([f"line {n}-{i}" for i in range(FIRST)])
    except BaseException:
        for w in workers:
            print(f"--- {type(w).__name__} log ---\n{w.log_tail(120)}")
        raise
    finally:
        strom.stop()
        java.stop()
