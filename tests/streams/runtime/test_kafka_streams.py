"""KafkaStreams end to end on the bundled broker: the issue's word count, exact counts."""

from __future__ import annotations

import itertools
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
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
from strom.streams import KafkaStreams, StreamsError
from strom.streams.runtime import State, StreamsConfig, StreamsConfigError


def _wait(cond: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_wordcount_exact(broker: BrokerProcess, tmp_path: Path, guarantee: str) -> None:
    tag = uuid.uuid4().hex[:8]
    text, counts, app_id = f"text-{tag}", f"counts-{tag}", f"wc-{tag}"
    create_topics(broker.bootstrap, (text, 3), (counts, 3))
    lines = make_lines(2000)
    expected = expected_counts(lines)
    produce_lines(broker.bootstrap, text, lines)
    app = KafkaStreams(build(text, counts), {
        "application.id": app_id, "bootstrap.servers": broker.bootstrap,
        "processing.guarantee": guarantee, "commit.interval.ms": 200, "state.dir": str(tmp_path)})
    app.start()
    try:
        history: dict[str, list[int]] = {}
        got = read_counts(broker.bootstrap, counts, expected, history=history)
        assert got == expected
        assert app.state() is State.RUNNING, app.errors()
        if guarantee == "exactly_once_v2":
            # no failure happened: each word's committed updates rise strictly to n (the record
            # cache sends one net update per word per commit, so some counts are skipped, but
            # a duplicate or a lost update would break the rise or the final value)
            for word, n in expected.items():
                h = history[word]
                assert h[-1] == n and all(a < b for a, b in itertools.pairwise(h)), (word, h)
            # and the cache did its job: fewer updates than input words
            assert sum(len(h) for h in history.values()) < sum(expected.values())
        # interactive queries: the local store agrees once its last updates are processed
        store = kv_store(app, "word-counts")
        assert _wait(lambda: dict(store.all()) == expected)
        word = sorted(expected)[0]
        assert store.get(word) == expected[word]
        assert store.get("no-such-word") is None
        lo, hi = sorted(expected)[3], sorted(expected)[9]
        assert dict(store.range(lo, hi)) == {w: n for w, n in expected.items() if lo <= w <= hi}
    finally:
        assert app.close(30)
    assert app.state() is State.NOT_RUNNING
    # internal topics exist with the expected names; the changelog is compacted
    from confluent_kafka.admin import AdminClient, ConfigResource
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics(timeout=10).topics
    assert len(md[f"{app_id}-word-counts-repartition"].partitions) == 3
    assert len(md[f"{app_id}-word-counts-changelog"].partitions) == 3
    res = ConfigResource(ConfigResource.Type.TOPIC, f"{app_id}-word-counts-changelog")
    cfg = admin.describe_configs([res])[res].result()
    assert cfg["cleanup.policy"].value == "compact"
    # task directories with a checkpoint file written at clean close
    assert (tmp_path / app_id / "1_0" / ".checkpoint").exists()


def test_restart_restores_from_changelog(broker: BrokerProcess, tmp_path: Path) -> None:
    """A second run with an empty state dir restores the counts from the changelog and continues."""
    tag = uuid.uuid4().hex[:8]
    text, counts, app_id = f"text-{tag}", f"counts-{tag}", f"wc-{tag}"
    create_topics(broker.bootstrap, (text, 2), (counts, 2))
    first, second = make_lines(800, seed=1), make_lines(800, seed=2)
    conf = {"application.id": app_id, "bootstrap.servers": broker.bootstrap,
            "processing.guarantee": "exactly_once_v2", "commit.interval.ms": 100}
    produce_lines(broker.bootstrap, text, first)
    app = KafkaStreams(build(text, counts), {**conf, "state.dir": str(tmp_path / "a")})
    app.start()
    try:
        assert read_counts(broker.bootstrap, counts, expected_counts(first)) == expected_counts(first)
    finally:
        assert app.close(30)
    produce_lines(broker.bootstrap, text, second)
    logs: list[str] = []
    app2 = KafkaStreams(build(text, counts), {**conf, "state.dir": str(tmp_path / "b")}, log=logs.append)
    app2.start()
    try:
        want = expected_counts(first + second)
        assert read_counts(broker.bootstrap, counts, want) == want
        assert any("restoring store 'word-counts'" in line for line in logs), logs
    finally:
        assert app2.close(30)


def test_config_errors_name_the_key() -> None:
    with pytest.raises(StreamsConfigError, match=r"processing\.guarantee"):
        StreamsConfig.load({"application.id": "a", "bootstrap.servers": "x", "processing.guarantee": "twice"})
    with pytest.raises(StreamsConfigError, match=r"num\.standby\.replicas"):
        StreamsConfig.load({"application.id": "a", "bootstrap.servers": "x", "num.standby.replicas": -1})
    assert StreamsConfig.load({"application.id": "a", "bootstrap.servers": "x",
                               "num.standby.replicas": 2}).num_standby_replicas == 2
    with pytest.raises(StreamsConfigError, match=r"application\.server"):
        StreamsConfig.load({"application.id": "a", "bootstrap.servers": "x", "application.server": "no-port"})
    # Kafka's older and newer names of the handler settings are both accepted
    c = StreamsConfig.load({"application.id": "a", "bootstrap.servers": "x",
                            "deserialization.exception.handler": "log-and-continue",
                            "default.production.exception.handler": "log-and-continue"})
    assert c.deserialization_exception_handler == c.production_exception_handler == "log-and-continue"
    with pytest.raises(StreamsError, match=r"strom\.iq\.http\.enable needs application\.server"):
        KafkaStreams(build("a", "b"), {"application.id": "a", "bootstrap.servers": "x",
                                       "strom.iq.http.enable": True})
    assert StreamsConfig.load({"application.id": "a", "bootstrap.servers": "x"}).commit_interval == 30000
    assert StreamsConfig.load({"application.id": "a", "bootstrap.servers": "x",
                               "processing.guarantee": "exactly_once_v2"}).commit_interval == 100


def test_missing_source_topic_is_an_error(broker: BrokerProcess, tmp_path: Path) -> None:
    app = KafkaStreams(build(f"nope-{uuid.uuid4().hex[:6]}", "out"), {
        "application.id": f"m-{uuid.uuid4().hex[:6]}", "bootstrap.servers": broker.bootstrap,
        "state.dir": str(tmp_path)})
    with pytest.raises(Exception, match="source topics missing"):
        app.start()
    assert app.state() is State.ERROR


def test_kill9_mid_stream_exactly_once(broker: BrokerProcess, tmp_path: Path) -> None:
    """kill -9 of the Streams process mid-stream, restart on the same state dir: counts exact and
    every committed count update appears exactly once (aborted output is never visible)."""
    import signal
    import subprocess

    tag = uuid.uuid4().hex[:8]
    text, counts, app_id = f"text-{tag}", f"counts-{tag}", f"wc-{tag}"
    create_topics(broker.bootstrap, (text, 2), (counts, 2))
    lines = make_lines(6000, seed=3)
    expected = expected_counts(lines)
    produce_lines(broker.bootstrap, text, lines[:4000])
    script = RUNNER
    args = [sys.executable, str(script), broker.bootstrap, text, counts, app_id, str(tmp_path)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # wait until some output is committed, then kill without warning; the last third of
        # the input is produced only afterwards, so the kill is always mid-stream
        partial: dict[str, int] = {}
        deadline = time.monotonic() + 60
        while not partial and time.monotonic() < deadline:
            partial = read_counts(broker.bootstrap, counts, {"__never__": 1}, timeout=1.0)
        assert partial, "no output before the kill"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        # the crash left no checkpoint: the tasks' state will be wiped and restored
        assert not (tmp_path / app_id / "1_0" / ".checkpoint").exists()
        produce_lines(broker.bootstrap, text, lines[4000:])
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        history: dict[str, list[int]] = {}
        got = read_counts(broker.bootstrap, counts, expected, timeout=120, history=history)
        assert got == expected
        for word, n in expected.items():
            assert history[word] == list(range(1, n + 1)), word
    finally:
        proc.kill()
        out = proc.communicate(timeout=10)[0]
    assert "restoring store 'word-counts'" in out, out[-3000:]


def test_two_instances_share_and_survive_leave(broker: BrokerProcess, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    text, counts, app_id = f"text-{tag}", f"counts-{tag}", f"wc-{tag}"
    create_topics(broker.bootstrap, (text, 4), (counts, 4))
    conf = {"application.id": app_id, "bootstrap.servers": broker.bootstrap,
            "processing.guarantee": "exactly_once_v2", "commit.interval.ms": 100,
            "consumer.session.timeout.ms": 6000}
    a = KafkaStreams(build(text, counts), {**conf, "state.dir": str(tmp_path / "a")})
    b = KafkaStreams(build(text, counts), {**conf, "state.dir": str(tmp_path / "b")})
    a.start()
    b.start()
    try:
        def tasks(app: KafkaStreams) -> set[str]:
            return {t.id for th in app._threads for t in list(th.tasks.values())}

        assert _wait(lambda: len(tasks(a)) + len(tasks(b)) == 8 and not tasks(a) & tasks(b)
                     and a.state() is State.RUNNING and b.state() is State.RUNNING, 90), (tasks(a), tasks(b))
        assert tasks(a) and tasks(b)
        first, second = make_lines(1500, seed=4), make_lines(1500, seed=5)
        produce_lines(broker.bootstrap, text, first)
        assert read_counts(broker.bootstrap, counts, expected_counts(first)) == expected_counts(first)
        assert b.close(30)
        produce_lines(broker.bootstrap, text, second)
        want = expected_counts(first + second)
        assert read_counts(broker.bootstrap, counts, want, timeout=120) == want
        assert _wait(lambda: len(tasks(a)) == 8, 30)
        assert dict(a.store("word-counts").all()) == want
    finally:
        a.close(30)
        b.close(30)
