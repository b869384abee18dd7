"""bench/streams_bench.py (and bench/streams_wordcount.py), scaled down, against strom's broker.

Timing never decides a test. What is checked is what the benchmark's figures rest on: each
workload's check reads the output topic back and fails on a wrong, missing or duplicated
result (so "exact" in the table means something), the peak RSS counts a process's children,
and a tiny run of all three workloads is exact for strom.streams and for Kafka Streams.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Protocol

import pytest
import streams_bench
from confluent_kafka import Producer

from strom.core.testing import java_problem


class Bootstrapped(Protocol):
    """The session's ``broker`` fixture, as these tests use it (named so that only the tests
    asking for it get the broker tier)."""

    @property
    def bootstrap(self) -> str: ...


def fresh_topic(bootstrap: str, prefix: str) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    streams_bench._create(bootstrap, topic, 2)
    return topic


def test_compare_counts_finds_a_wrong_count_and_an_extra_key() -> None:
    truth = {"a": 2, "b": 1}
    assert streams_bench.compare_counts(dict(truth), truth).exact
    off = streams_bench.compare_counts({"a": 3, "b": 1}, truth)
    assert not off.exact and "1 of 2 counts differ" in off.detail and "a: 3 != 2" in off.detail
    extra = streams_bench.compare_counts({"a": 2, "b": 1, "c": 1}, truth)
    assert not extra.exact and "1 unexpected keys" in extra.detail
    assert not streams_bench.compare_counts({"a": 2}, truth).exact


def test_peak_rss_includes_children() -> None:
    """A child holding 64 MiB raises the tree's peak by at least that (the JVM's RocksDB or a
    forked helper must not go uncounted)."""
    alone = streams_bench.peak_rss_bytes(os.getpid())
    assert alone is not None and alone > 0
    child = subprocess.Popen([sys.executable, "-c",
                              "import sys; b = bytearray(64 << 20); print('ready', flush=True); sys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        with_child = streams_bench.peak_rss_bytes(os.getpid())
        assert with_child is not None and with_child >= alone + (64 << 20)
    finally:
        child.communicate("")


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in records:
        producer.produce(topic, value, key=key)
    assert producer.flush(30) == 0


def test_wordcount_check_reads_the_output_and_catches_an_off_count(broker: Bootstrapped) -> None:
    w = streams_bench.wordcount_workload(broker.bootstrap, 2, 200, 4, 30)
    truth: Counter[bytes] = Counter()
    for _key, line in streams_bench.read_topic(broker.bootstrap, w.inputs[0]):
        truth.update(line.lower().split())
    right = [(word, n.to_bytes(8, "big")) for word, n in truth.items()]
    right_topic = fresh_topic(broker.bootstrap, "wc-right")
    _produce(broker.bootstrap, right_topic, right)
    assert w.check(broker.bootstrap, right_topic).exact
    # A later, wrong count of one word is what the check must see (the last count wins).
    word, n = right[0][0], truth[right[0][0]]
    off_topic = fresh_topic(broker.bootstrap, "wc-off")
    _produce(broker.bootstrap, off_topic, [*right, (word, (n + 1).to_bytes(8, "big"))])
    off = w.check(broker.bootstrap, off_topic)
    assert not off.exact and "1 of " in off.detail


def test_join_check_catches_missing_duplicated_and_wrong_orders(broker: Bootstrapped) -> None:
    w = streams_bench.join_workload(broker.bootstrap, 2, 100, 10)
    assert w.live_stream is not None
    orders = fresh_topic(broker.bootstrap, "join-orders")
    w.live_stream(orders)
    table = dict(streams_bench.read_topic(broker.bootstrap, w.inputs[0]))
    joined = [(k, v + b"|" + table[k]) for k, v in streams_bench.read_topic(broker.bootstrap, orders)]
    assert len(joined) == 100
    right = fresh_topic(broker.bootstrap, "join-right")
    _produce(broker.bootstrap, right, joined)
    assert w.check(broker.bootstrap, right).exact
    other = next(k for k in table if k != joined[2][0])
    # order 0 missing, order 1 twice, order 2 with another customer's value
    bad = [joined[1], joined[1], (joined[2][0], joined[2][1].split(b"|")[0] + b"|" + table[other]), *joined[3:]]
    bad_topic = fresh_topic(broker.bootstrap, "join-bad")
    _produce(broker.bootstrap, bad_topic, bad)
    result = w.check(broker.bootstrap, bad_topic)
    assert not result.exact
    assert "1 orders missing" in result.detail and "1 orders duplicated" in result.detail
    assert "1 wrong values" in result.detail


@pytest.mark.broker  # main() starts a strom broker of its own
@pytest.mark.reference  # Kafka Streams' jars and a JVM
def test_tiny_run_of_all_workloads_is_exact(tmp_path: Path) -> None:
    """strom.streams and Kafka Streams 4.3.1, exactly_once_v2, all three workloads, tiny sizes."""
    problem = java_problem()
    if problem is not None:
        pytest.skip(problem)
    out = tmp_path / "out.json"
    code = streams_bench.main(["--quick", "--lines", "2000", "--words", "5", "--records", "5000",
                               "--keys", "50", "--span-minutes", "5", "--customers", "200",
                               "--only", "strom,kstreams", "--guarantees", "exactly_once_v2",
                               "--json", str(out)])
    doc = json.loads(out.read_text())
    runs = {(r["workload"], r["framework"]): r for r in doc["results"]}
    assert set(runs) == {(w, f) for w in ("wordcount", "windowed", "join") for f in ("strom", "kstreams")}
    for r in runs.values():
        assert r["error"] is None and r["exact"], r
        assert r["peak_rss_bytes"] > 0 and r["seconds"] > 0
    assert runs[("join", "strom")]["load_seconds"] > 0
    assert code == 0
