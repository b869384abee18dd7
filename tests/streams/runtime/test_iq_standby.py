"""Interactive queries across two instances (key metadata, the HTTP endpoint answering for a
remote key) and standby replicas (fail-over restores only the remainder), on the bundled broker."""

from __future__ import annotations

import random
import socket
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from confluent_kafka import Consumer, Producer, TopicPartition
from wordcount_app import (
    RUNNER,
    build,
    create_topics,
    expected_counts,
    kv_store,
    make_lines,
    produce_lines,
    read_counts,
)

from strom.core.testing import BrokerProcess
from strom.partitioner import murmur2_partition
from strom.streams import Consumed, KafkaStreams, Serdes, StreamsBuilder, TimeWindows
from strom.streams.processor.stores import AUTO_SERDE
from strom.streams.runtime import State
from strom.streams.runtime.queries import ReadOnlyKeyValueStore, ReadOnlyWindowStore
from strom.streams.runtime.standby import place_standbys


def _wait(cond: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tasks(app: KafkaStreams) -> set[str]:
    return {t.id for th in app._threads for t in list(th.tasks.values())}


def test_murmur2_matches_librdkafka(broker: BrokerProcess, topic_name: str) -> None:
    """Our partition of a key is the one librdkafka's murmur2 partitioner (Kafka's) picks."""
    create_topics(broker.bootstrap, (topic_name, 7))
    p = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    got: dict[bytes, int] = {}
    keys = [f"key-{i}".encode() * (i % 5 + 1) for i in range(200)] + [b"", b"a", b"ab", b"abc"]
    def delivered(err: Any, m: Any) -> None:
        got[m.key()] = m.partition()

    for k in keys:
        p.produce(topic_name, b"v", k, on_delivery=delivered)
    assert p.flush(30) == 0
    assert {k: murmur2_partition(k, 7) for k in keys} == got


def test_place_standbys_ring() -> None:
    owners = {(0, 0): "a", (0, 1): "b", (0, 2): "c", (1, 0): "a"}
    assert place_standbys(owners, ["b", "a", "c"], 1) == {(0, 0): ["b"], (0, 1): ["c"], (0, 2): ["a"], (1, 0): ["b"]}
    assert place_standbys(owners, ["a", "b", "c"], 5)[(0, 2)] == ["a", "b"]  # never more than the others
    assert place_standbys({(0, 0): "a"}, ["a"], 1) == {(0, 0): []}


def test_interactive_queries_two_instances(broker: BrokerProcess, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    text, counts, app_id = f"text-{tag}", f"counts-{tag}", f"iq-{tag}"
    create_topics(broker.bootstrap, (text, 4), (counts, 4))
    servers = [f"127.0.0.1:{_port()}", f"127.0.0.1:{_port()}"]
    conf = {"application.id": app_id, "bootstrap.servers": broker.bootstrap, "commit.interval.ms": 100,
            "consumer.session.timeout.ms": 6000, "strom.iq.http.enable": True}
    apps = [KafkaStreams(build(text, counts), {**conf, "state.dir": str(tmp_path / str(i)),
                                               "application.server": servers[i]}, log=lambda line: None)
            for i in range(2)]
    for a in apps:
        a.start()
    try:
        assert _wait(lambda: len(_tasks(apps[0])) == 4 and len(_tasks(apps[1])) == 4
                     and all(a.state() is State.RUNNING for a in apps), 90)
        lines = make_lines(1500, seed=11)
        want = expected_counts(lines)
        produce_lines(broker.bootstrap, text, lines)
        assert read_counts(broker.bootstrap, counts, want) == want
        stores = [kv_store(a, "word-counts") for a in apps]
        assert all(isinstance(s, ReadOnlyKeyValueStore) for s in stores)
        assert _wait(lambda: {**dict(stores[0].all()), **dict(stores[1].all())} == want)
        # every instance agrees on each key's owner, and the owner is the one holding it
        remote: dict[int, str] = {}
        for word, n in want.items():
            metas = [a.query_metadata_for_key("word-counts", word) for a in apps]
            assert metas[0] == metas[1]
            owner = servers.index(str(metas[0].active_host))
            assert stores[owner].get(word) == n
            assert stores[1 - owner].get(word) is None
            assert metas[0].partition == murmur2_partition(AUTO_SERDE.serialize("", word) or b"", 4)
            remote.setdefault(owner, word)
            sm = apps[0].metadata_for_key("word-counts", word)
            assert sm is not None and str(sm.host_info) == servers[owner]
        assert set(remote) == {0, 1}
        md = apps[1].streams_metadata()
        assert sorted(str(m.host_info) for m in md) == sorted(servers)
        assert all("word-counts" in m.state_store_names and len(m.topic_partitions) == 4 for m in md)
        # HTTP: a key owned by the other instance is answered with a redirect naming it
        word = remote[1]
        r = requests.get(f"http://{servers[0]}/stores/word-counts/keys/{word}", allow_redirects=False, timeout=10)
        assert r.status_code == 307
        assert r.headers["Location"] == f"http://{servers[1]}/stores/word-counts/keys/{word}"
        assert r.json()["owner"] == servers[1]
        followed = requests.get(f"http://{servers[0]}/stores/word-counts/keys/{word}", timeout=10)
        assert followed.status_code == 200 and followed.json()["value"] == want[word]
        assert followed.json()["host"] == servers[1]
        local = requests.get(f"http://{servers[0]}/stores/word-counts/keys/{remote[0]}", timeout=10)
        assert local.status_code == 200 and local.json() == {
            "store": "word-counts", "key": remote[0], "value": want[remote[0]], "host": servers[0]}
        assert local.history == []  # answered directly
        missing = requests.get(f"http://{servers[0]}/stores/word-counts/keys/zzz-none", timeout=10)
        assert missing.status_code == 404
        assert requests.get(f"http://{servers[0]}/stores/nope/keys/x", timeout=10).status_code == 404
        meta = requests.get(f"http://{servers[1]}/metadata", timeout=10).json()
        assert sorted(m["host"] for m in meta) == sorted(servers)
    finally:
        for a in apps:
            a.close(30)


def test_window_store_query(broker: BrokerProcess, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    views, out = f"views-{tag}", f"wout-{tag}"
    create_topics(broker.bootstrap, (views, 2), (out, 2))
    b = StreamsBuilder()
    (b.stream(views, Consumed.with_(Serdes.string(), Serdes.string()))
     .group_by_key().windowed_by(TimeWindows.of_size_and_grace(1000, 10_000)).count(materialized="views-per-sec"))
    # recent timestamps: the broker's time retention would delete records from 1970
    base = (time.time_ns() // 1_000_000_000 - 120) * 1000
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):  # page p<i%3> at t = base + i*200 ms
        p.produce(views, b"x", f"p{i % 3}".encode(), timestamp=base + i * 200)
    assert p.flush(30) == 0
    server = f"127.0.0.1:{_port()}"
    app = KafkaStreams(b.build(), {"application.id": f"w-{tag}", "bootstrap.servers": broker.bootstrap,
                                   "commit.interval.ms": 100, "state.dir": str(tmp_path),
                                   "application.server": server, "strom.iq.http.enable": True},
                       log=lambda line: None)
    app.start()
    try:
        store = app.store("views-per-sec")
        assert isinstance(store, ReadOnlyWindowStore)
        want: dict[tuple[str, int], int] = {}
        for i in range(30):
            w = (base + i * 200) // 1000 * 1000
            want[(f"p{i % 3}", w)] = want.get((f"p{i % 3}", w), 0) + 1
        assert _wait(lambda: {(w.key, w.window.start): v for w, v in store.all()} == want, 60), list(store.all())
        assert list(store.fetch("p0", base + 1000, base + 2000)) == [
            (w, n) for (k, w), n in sorted(want.items()) if k == "p0" and base + 1000 <= w <= base + 2000]
        assert store.fetch("p1", base + 1000) == want[("p1", base + 1000)]
        r = requests.get(f"http://{server}/stores/views-per-sec/keys/p2", timeout=10)
        assert r.status_code == 200
        assert r.json()["windows"] == [[w, n] for (k, w), n in sorted(want.items()) if k == "p2"]
    finally:
        assert app.close(30)


def _changelog_size(bootstrap: str, topic: str, partitions: list[int]) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions)
    finally:
        c.close()


def test_standby_failover_restores_only_the_remainder(broker: BrokerProcess, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    text, counts, app_id = f"text-{tag}", f"counts-{tag}", f"sb-{tag}"
    create_topics(broker.bootstrap, (text, 4), (counts, 4))
    conf: dict[str, Any] = {"application.id": app_id, "bootstrap.servers": broker.bootstrap,
                            "commit.interval.ms": 100, "consumer.session.timeout.ms": 6000,
                            "num.standby.replicas": 1}
    a = KafkaStreams(build(text, counts), {**conf, "state.dir": str(tmp_path / "a")}, log=lambda line: None)
    b = KafkaStreams(build(text, counts), {**conf, "state.dir": str(tmp_path / "b")}, log=lambda line: None)
    a.start()
    b.start()
    try:
        assert _wait(lambda: len(_tasks(a)) == 4 and len(_tasks(b)) == 4
                     and all(x.state() is State.RUNNING for x in (a, b)), 90)
        # a large vocabulary: the changelog (last write per key per commit) gets thousands of records
        rng = random.Random(21)
        lines = [" ".join(f"v{rng.randrange(6000):04d}" for _ in range(5)) for _ in range(3000)]
        want = expected_counts(lines)
        produce_lines(broker.bootstrap, text, lines)
        assert read_counts(broker.bootstrap, counts, want) == want
        b_store_tasks = {t for t in _tasks(b) if t.startswith("1_")}
        assert len(b_store_tasks) == 2  # the count's sub-topology: 2 of its 4 tasks on b
        parts = [int(t.split("_")[1]) for t in b_store_tasks]
        changelog = f"{app_id}-word-counts-changelog"
        size = _changelog_size(broker.bootstrap, changelog, parts)
        assert size > 2000, size
        # a keeps warm copies of b's count tasks, caught up with their changelogs
        a_standbys = a.standbys
        assert a_standbys is not None
        assert _wait(lambda: set(a_standbys.stats()) == b_store_tasks
                     and sum(a_standbys.stats().values()) >= size, 60), (a_standbys.stats(), size)
        assert b.standbys is not None and {t for t in b.standbys.stats()} == {t for t in _tasks(a)
                                                                               if t.startswith("1_")}
        assert b.close(30)
        assert _wait(lambda: len(_tasks(a)) == 8 and a.state() is State.RUNNING, 60)
        restored = a.restored_records()
        taken_over = sum(restored[t] for t in b_store_tasks)
        # the standby had applied everything but what b committed in its last moments
        assert taken_over < size / 10, (restored, size)
        more = make_lines(500, seed=22)
        produce_lines(broker.bootstrap, text, more)
        want2 = expected_counts(lines + more)
        assert read_counts(broker.bootstrap, counts, want2) == want2
        store = a.store("word-counts")
        assert _wait(lambda: dict(store.all()) == want2)
    finally:
        a.close(30)
        b.close(30)


def test_standby_takeover_after_kill9_exactly_once(broker: BrokerProcess, tmp_path: Path) -> None:
    """Under exactly_once_v2, instance b (a subprocess) is killed with SIGKILL; a, which kept
    standbys of b's count tasks, takes them over restoring only a small remainder, and the
    committed counts stay exact, each update seen once."""
    import signal
    import subprocess

    tag = uuid.uuid4().hex[:8]
    text, counts, app_id = f"text-{tag}", f"counts-{tag}", f"sk-{tag}"
    create_topics(broker.bootstrap, (text, 4), (counts, 4))
    script = RUNNER
    proc = subprocess.Popen([sys.executable, str(script), broker.bootstrap, text, counts, app_id,
                             str(tmp_path / "b"), "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    a = KafkaStreams(build(text, counts), {
        "application.id": app_id, "bootstrap.servers": broker.bootstrap, "processing.guarantee": "exactly_once_v2",
        "statestore.cache.max.bytes": 0,  # every update is checked below
        "commit.interval.ms": 100, "consumer.session.timeout.ms": 6000, "num.standby.replicas": 1,
        "state.dir": str(tmp_path / "a")}, log=lambda line: None)
    a.start()
    try:
        assert _wait(lambda: len(_tasks(a)) == 4 and a.state() is State.RUNNING, 90)
        rng = random.Random(31)
        lines = [" ".join(f"v{rng.randrange(5000):04d}" for _ in range(5)) for _ in range(3000)]
        first, second = lines[:2400], lines[2400:]
        produce_lines(broker.bootstrap, text, first)
        assert read_counts(broker.bootstrap, counts, expected_counts(first)) == expected_counts(first)
        b_tasks = {f"1_{p}" for p in range(4)} - _tasks(a)
        assert len(b_tasks) == 2
        a_standbys = a.standbys
        assert a_standbys is not None
        size = _changelog_size(broker.bootstrap, f"{app_id}-word-counts-changelog",
                               [int(t[2:]) for t in b_tasks])
        assert _wait(lambda: set(a_standbys.stats()) == b_tasks
                     and sum(a_standbys.stats().values()) >= size * 0.9, 60), (a_standbys.stats(), size)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        produce_lines(broker.bootstrap, text, second)
        history: dict[str, list[int]] = {}
        want = expected_counts(lines)
        assert read_counts(broker.bootstrap, counts, want, timeout=120, history=history) == want
        for word, n in want.items():
            assert history[word] == list(range(1, n + 1)), word
        assert _wait(lambda: len(_tasks(a)) == 8, 30)
        restored = a.restored_records()
        # the standbys' stores (handed over, or closed with a checkpoint once the group showed
        # them active on a) were reused: only a small remainder came from the changelog
        assert sum(restored[t] for t in b_tasks) < size / 10, (restored, size)
    finally:
        proc.kill()
        proc.communicate(timeout=10)
        a.close(30)
