"""The issue's word count, shared by the streams runtime tests and their subprocess script
(``RUNNER``, run_wordcount.py beside this module)."""

from __future__ import annotations

import collections
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.streams import Consumed, KafkaStreams, Produced, Serdes, StreamsBuilder, Topology
from strom.streams.runtime import ReadOnlyKeyValueStore

#: the script that runs the word count as a process of its own (for kill -9 tests)
RUNNER = Path(__file__).with_name("run_wordcount.py")
LONG = Serdes.long()
WORDS = [f"w{i:03d}" for i in range(60)]


def build(input_topic: str, output_topic: str) -> Topology:
    builder = StreamsBuilder()
    (builder.stream(input_topic, Consumed.with_(Serdes.string(), Serdes.string()))
        .flat_map_values(lambda line: line.lower().split())
        .group_by(lambda key, word: word)
        .count(materialized="word-counts")
        .to_stream()
        .to(output_topic, Produced.with_(Serdes.string(), Serdes.long())))
    return builder.build()


def kv_store(app: KafkaStreams, name: str) -> ReadOnlyKeyValueStore:
    """The key-value view of store ``name`` (``store()`` answers with the view of its kind)."""
    store = app.store(name)
    assert isinstance(store, ReadOnlyKeyValueStore), store
    return store


def read_records(bootstrap: str, topic: str, until: Callable[[list[Message]], bool],
                 timeout: float = 45.0) -> list[Message]:
    """Records of ``topic`` (read_committed, from the beginning) until ``until(records)`` or timeout."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{time.time_ns()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    parts = c.list_topics(topic, timeout=10).topics[topic].partitions
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
    out: list[Message] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not until(out):
            out.extend(m for m in c.consume(500, 0.3) if m.error() is None)
    finally:
        c.close()
    return out


def create_topics(bootstrap: str, *topics: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futs = admin.create_topics([NewTopic(t, num_partitions=n, replication_factor=1) for t, n in topics])
    for f in futs.values():
        f.result()


def make_lines(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS).upper() if rng.random() < 0.1 else rng.choice(WORDS)
                     for _ in range(rng.randint(1, 8))) for _ in range(n)]


def expected_counts(lines: list[str]) -> dict[str, int]:
    return dict(collections.Counter(w for line in lines for w in line.lower().split()))


def produce_lines(bootstrap: str, topic: str, lines: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, line in enumerate(lines):
        p.produce(topic, line.encode(), f"k{i}".encode())
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def read_counts(bootstrap: str, topic: str, expected: dict[str, int], timeout: float = 90.0,
                history: dict[str, list[int]] | None = None) -> dict[str, int]:
    """Reads ``topic`` (read_committed) until the last count per word equals ``expected`` or timeout."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time_ns()}",
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    # assign, not subscribe: no group join, so even a short read sees the data at once
    parts = c.list_topics(topic, timeout=10).topics[topic].partitions
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
    last: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and last != expected:
            for m in c.consume(1000, 0.5):
                if m.error():
                    continue
                word = (m.key() or b"").decode()
                value: Any = LONG.deserialize(topic, m.value())
                last[word] = value
                if history is not None:
                    history.setdefault(word, []).append(value)
    finally:
        c.close()
    return last
