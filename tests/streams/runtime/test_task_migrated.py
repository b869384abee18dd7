"""A stream thread that loses its group membership keeps running (Kafka Streams' TaskMigrated).

A thread stuck in processing for longer than ``max.poll.interval.ms`` is removed from the group
by its consumer; the commit that follows is refused by the coordinator (UNKNOWN_MEMBER_ID or
ILLEGAL_GENERATION; under exactly-once the offsets in the transaction are refused). Kafka Streams
treats that as TaskMigratedException: it abandons its tasks without committing, rejoins, and
reprocesses from the last committed offsets. The thread must not die.

Under exactly_once_v2 a thread stuck past ``transaction.timeout.ms`` has its transaction aborted
by the coordinator, which bumps the producer's epoch: the thread's producer is fenced. Kafka
Streams treats that as TaskMigrated too and replaces the thread's producer; the output stays
exactly once, and the changelog offsets the stores record stay exact (no full restore later).
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from wordcount_app import LONG, create_topics, expected_counts, make_lines, produce_lines, read_counts

from strom.core.testing import BrokerProcess
from strom.streams import Consumed, KafkaStreams, Produced, Serdes, StreamsBuilder, Topology
from strom.streams.runtime import State
from strom.streams.state import read_checkpoint, task_dir

STALL_WORD = "stallhere"
POLL_INTERVAL_MS = 6000


def build_stalling(input_topic: str, output_topic: str, stalled: threading.Event,
                   seconds: float = POLL_INTERVAL_MS / 1000 + 4) -> Topology:
    """Word count whose first sight of STALL_WORD blocks the thread for ``seconds`` (by default
    past max.poll.interval.ms)."""

    def maybe_stall(_key: Any, word: str) -> None:
        if word == STALL_WORD and not stalled.is_set():
            stalled.set()
            time.sleep(seconds)

    builder = StreamsBuilder()
    (builder.stream(input_topic, Consumed.with_(Serdes.string(), Serdes.string()))
        .flat_map_values(lambda line: line.lower().split())
        .peek(maybe_stall)
        .group_by(lambda key, word: word)
        .count(materialized="word-counts")
        .to_stream()
        .to(output_topic, Produced.with_(Serdes.string(), Serdes.long())))
    return builder.build()


def read_until(bootstrap: str, topic: str, done: Any, timeout: float = 120.0) -> dict[str, int]:
    """The last count per word (read_committed) once ``done(counts)`` holds, or at the timeout."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    parts = c.list_topics(topic, timeout=10).topics[topic].partitions
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
    last: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not done(last):
            for m in c.consume(1000, 0.5):
                if not m.error():
                    n = LONG.deserialize(topic, m.value())
                    assert n is not None, "a count is never a tombstone"
                    last[(m.key() or b"").decode()] = n
    finally:
        c.close()
    return last


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_thread_survives_losing_its_membership(broker: BrokerProcess, tmp_path: Path, guarantee: str) -> None:
    tag = uuid.uuid4().hex[:8]
    text, counts = f"text-{tag}", f"counts-{tag}"
    create_topics(broker.bootstrap, (text, 2), (counts, 2))
    stalled = threading.Event()
    app = KafkaStreams(build_stalling(text, counts, stalled), {
        "application.id": f"migrated-{tag}", "bootstrap.servers": broker.bootstrap,
        "processing.guarantee": guarantee, "commit.interval.ms": 100, "state.dir": str(tmp_path),
        "consumer.session.timeout.ms": POLL_INTERVAL_MS, "consumer.max.poll.interval.ms": POLL_INTERVAL_MS})
    app.start()
    try:
        first = make_lines(500, seed=11)
        produce_lines(broker.bootstrap, text, first)
        assert read_counts(broker.bootstrap, counts, expected_counts(first)) == expected_counts(first)
        second = [*make_lines(200, seed=12), STALL_WORD, *make_lines(200, seed=13)]
        produce_lines(broker.bootstrap, text, second)
        want = expected_counts(first + second)
        # at-least-once may count the input after the last commit twice, never lose it
        got = read_until(broker.bootstrap, counts,
                         lambda last: set(last) == set(want) and all(last[w] >= n for w, n in want.items()))
        assert stalled.is_set()
        assert app.state() is State.RUNNING, [th.error for th in app._threads]
        assert set(got) == set(want) and all(got[w] >= n for w, n in want.items()), (got, want)
        if guarantee == "exactly_once_v2":
            # the refused transaction was aborted and its input processed again, once
            assert read_counts(broker.bootstrap, counts, want, timeout=30) == want
    finally:
        app.close(30)


# A broker whose coordinator sweeps timed-out transactions every 300 ms (Kafka's default is 10 s),
# and applications whose transactions time out after 1.5 s: a 4 s stall outlives its transaction.
SWEEP = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "300"}
TXN_TIMEOUT_MS = 1500
STALL_S = 4.0


@pytest.fixture(scope="module")
def sweeping_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("sweeping"), config=SWEEP) as proc:
        yield proc


def _wait(cond: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.2)
    return bool(cond())


def _changelog_ends(bootstrap: str, checkpoints: dict[str, dict[tuple[str, int], int]]) -> dict[tuple[str, int], int]:
    """The high watermark of every changelog partition named in ``checkpoints``."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"hw-{uuid.uuid4().hex}"})
    try:
        return {tp: c.get_watermark_offsets(TopicPartition(*tp), timeout=10)[1]
                for offsets in checkpoints.values() for tp in offsets}
    finally:
        c.close()


class _Log:
    """The application's log lines, kept for assertions and echoed to stderr."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        print(line, file=sys.stderr, flush=True)


def _eos_app(bootstrap: str, text: str, counts: str, app_id: str, state_dir: Path, stalled: threading.Event,
             log: _Log, commit_interval_ms: int = 100) -> KafkaStreams:
    return KafkaStreams(build_stalling(text, counts, stalled, seconds=STALL_S), {
        "application.id": app_id, "bootstrap.servers": bootstrap, "processing.guarantee": "exactly_once_v2",
        "commit.interval.ms": commit_interval_ms, "state.dir": str(state_dir),
        "producer.transaction.timeout.ms": TXN_TIMEOUT_MS,
        # no record cache: every single count update must be committed, once
        "statestore.cache.max.bytes": 0}, log=log)


def _tracebacks(app: KafkaStreams) -> list[str]:
    return ["".join(traceback.format_exception(e)) for e in app.errors()]


def _assert_exactly_once(bootstrap: str, counts: str, lines: list[str]) -> None:
    """The last count of every word is right and each count update was committed exactly once."""
    want = expected_counts(lines)
    history: dict[str, list[int]] = {}
    assert read_counts(bootstrap, counts, want, timeout=60, history=history) == want
    for word, n in want.items():
        assert history[word] == list(range(1, n + 1)), (word, history[word])


def test_eos_thread_survives_its_transaction_timing_out(sweeping_broker: BrokerProcess, tmp_path: Path) -> None:
    """A transaction stalled past transaction.timeout.ms is aborted by the coordinator, which
    bumps the producer's epoch: librdkafka reports the producer fenced (and confluent-kafka may
    surface that as a SystemError from flush(), the delivery callback having run with the fatal
    error pending). The thread closes its tasks, gets a new producer and carries on: every count
    update is committed exactly once. Afterwards the changelog offsets the stores record are still
    exact: a clean close checkpoints the changelog ends, and a restart restores nothing."""
    bootstrap = sweeping_broker.bootstrap
    tag = uuid.uuid4().hex[:8]
    text, counts, app_id = f"text-{tag}", f"counts-{tag}", f"timedout-{tag}"
    state_dir = tmp_path / "state"
    create_topics(bootstrap, (text, 2), (counts, 2))
    stalled = threading.Event()
    log = _Log()
    app = _eos_app(bootstrap, text, counts, app_id, state_dir, stalled, log)
    app.start()
    lines: list[str] = []
    try:
        lines += make_lines(300, seed=21)
        produce_lines(bootstrap, text, lines)
        assert read_counts(bootstrap, counts, expected_counts(lines)) == expected_counts(lines)
        lines += [*make_lines(100, seed=22), STALL_WORD, *make_lines(100, seed=23)]
        produce_lines(bootstrap, text, lines[300:])
        _assert_exactly_once(bootstrap, counts, lines)
        assert stalled.is_set()
        assert app.state() is State.RUNNING, _tracebacks(app)
        # the stall did fence the producer, and the thread replaced it
        assert sum(th.producers_replaced for th in app._threads) >= 1, log.lines[-20:]
        # the thread goes on committing with its new producer
        lines += make_lines(200, seed=24)
        produce_lines(bootstrap, text, lines[-200:])
        want = expected_counts(lines)
        assert read_counts(bootstrap, counts, want, timeout=60) == want
    finally:
        closed = app.close(30)
    assert closed and app.state() is State.NOT_RUNNING, _tracebacks(app)

    # A clean close checkpoints each store with the end of its changelog: every record up to
    # the last transaction's commit marker (the checkpointed offset is the last record's + 1).
    store_tasks = sorted(p.name for p in (state_dir / app_id).iterdir() if p.name.startswith("1_"))
    assert len(store_tasks) == 2, store_tasks
    checkpoints = {t: read_checkpoint(task_dir(state_dir, app_id, t)) for t in store_tasks}
    assert all(checkpoints.values()), checkpoints
    ends = _changelog_ends(bootstrap, checkpoints)
    for offsets in checkpoints.values():
        for tp, offset in offsets.items():
            assert ends[tp] - 1 <= offset <= ends[tp], (tp, offset, ends[tp])

    # ...so a restart restores nothing, and goes on counting exactly once
    stalled.set()  # no second stall
    app = _eos_app(bootstrap, text, counts, app_id, state_dir, stalled, log)
    app.start()
    try:
        assert _wait(lambda: app.state() is State.RUNNING
                     and set(app.restored_records()) >= set(store_tasks), 60), app.state()
        restored = app.restored_records()
        assert all(restored[t] == 0 for t in store_tasks), restored
        lines += make_lines(100, seed=25)
        produce_lines(bootstrap, text, lines[-100:])
        _assert_exactly_once(bootstrap, counts, lines)
    finally:
        closed = app.close(30)
    assert closed and app.state() is State.NOT_RUNNING, _tracebacks(app)


@pytest.mark.parametrize("commit_interval_ms", [100, 30000])
def test_eos_close_while_the_transaction_times_out(sweeping_broker: BrokerProcess, tmp_path: Path,
                                                   commit_interval_ms: int) -> None:
    """Closing the application while its transaction is being timed out. With commits every
    100 ms the fence is met by the commit right after the stall (the thread replaces its producer
    and rejoins, then stops); with commits every 30 s nothing was committed yet and the fence is
    met by the last commit at shutdown (or, on a loaded machine, by the records still in the
    producer when the coordinator aborted). Either way, as in Kafka, the thread closes its tasks
    without committing and ends cleanly (not ERROR), and after a restart every input line is
    counted exactly once."""
    bootstrap = sweeping_broker.bootstrap
    tag = uuid.uuid4().hex[:8]
    text, counts, app_id = f"text-{tag}", f"counts-{tag}", f"closing-{tag}"
    state_dir = tmp_path / "state"
    create_topics(bootstrap, (text, 2), (counts, 2))
    stalled = threading.Event()
    log = _Log()
    app = _eos_app(bootstrap, text, counts, app_id, state_dir, stalled, log, commit_interval_ms)
    app.start()
    lines = make_lines(200, seed=31)
    try:
        produce_lines(bootstrap, text, lines)
        if commit_interval_ms == 100:
            assert read_counts(bootstrap, counts, expected_counts(lines)) == expected_counts(lines)
        lines += [*make_lines(100, seed=32), STALL_WORD, *make_lines(100, seed=33)]
        produce_lines(bootstrap, text, lines[200:])
        assert stalled.wait(30)
    finally:
        closed = app.close(30)  # returns once the stall is over and the thread has ended
    assert closed and app.state() is State.NOT_RUNNING, _tracebacks(app)
    assert any("fenced" in line for line in log.lines), log.lines[-20:]
    if commit_interval_ms == 30000:
        # Usually the last commit at shutdown meets the fence. On a loaded machine the producer may
        # still hold the records of before the stall when the coordinator aborts, and then their
        # ProduceRequest meets it first (seen once in CI): the thread's fenced-producer path, which
        # the 100 ms case covers. Either way nothing may have been committed.
        assert any("last commit failed" in line or "its producer was fenced" in line
                   for line in log.lines), log.lines[-20:]
        assert read_counts(bootstrap, counts, {"__never__": 1}, timeout=2) == {}  # nothing committed

    app = _eos_app(bootstrap, text, counts, app_id, state_dir, stalled, log)
    app.start()
    try:
        _assert_exactly_once(bootstrap, counts, lines)
        assert app.state() is State.RUNNING, _tracebacks(app)
    finally:
        closed = app.close(30)
    assert closed and app.state() is State.NOT_RUNNING, _tracebacks(app)
