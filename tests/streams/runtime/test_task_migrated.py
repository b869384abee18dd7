"""A stream thread that loses its group membership keeps running (Kafka Streams' TaskMigrated).

A thread stuck in processing for longer than ``max.poll.interval.ms`` is removed from the group
by its consumer; the commit that follows is refused by the coordinator (UNKNOWN_MEMBER_ID or
ILLEGAL_GENERATION; under exactly-once the offsets in the transaction are refused). Kafka Streams
treats that as TaskMigratedException: it abandons its tasks without committing, rejoins, and
reprocesses from the last committed offsets. The thread must not die.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from wordcount_app import LONG, create_topics, expected_counts, make_lines, produce_lines, read_counts

from strom.core.testing import BrokerProcess
from strom.streams import Consumed, KafkaStreams, Produced, Serdes, StreamsBuilder, Topology
from strom.streams.runtime import State

STALL_WORD = "stallhere"
POLL_INTERVAL_MS = 6000


def build_stalling(input_topic: str, output_topic: str, stalled: threading.Event) -> Topology:
    """Word count whose first sight of STALL_WORD blocks the thread past max.poll.interval.ms."""

    def maybe_stall(_key: Any, word: str) -> None:
        if word == STALL_WORD and not stalled.is_set():
            stalled.set()
            time.sleep(POLL_INTERVAL_MS / 1000 + 4)

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
                    last[(m.key() or b"").decode()] = LONG.deserialize(topic, m.value())
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
