"""Fixtures of the end-to-end Streams tests: topics, producing, reading committed output, apps.

pytest's importlib mode puts no test folder on ``sys.path``, so the helpers are handed to the
tests as the :func:`streams_e2e` fixture, a :class:`StreamsE2E` bound to the session's broker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.testing import BrokerProcess
from strom.streams import KafkaStreams, Topology
from strom.streams.runtime import State

Rec = tuple[bytes | None, bytes | None, int]


class StreamsE2E:
    """Topics, records and applications on one broker."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def create_topics(self, *topics: tuple[str, int], config: dict[str, str] | None = None) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futs = admin.create_topics([NewTopic(t, num_partitions=n, replication_factor=1, config=config or {})
                                    for t, n in topics])
        for f in futs.values():
            f.result()

    def produce(self, topic: str, records: Iterable[tuple[Any, ...]],
                partition_of: Callable[[str | None], int] | None = None) -> int:
        """Produces (key, value, timestamp[, partition]) records as UTF-8; else ``partition_of(key)``
        picks the partition, else the producer's partitioner."""
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        n = 0
        for rec in records:
            key, value, ts = rec[:3]
            kw: dict[str, Any] = {"timestamp": ts}
            if len(rec) > 3:
                kw["partition"] = rec[3]
            elif partition_of is not None:
                kw["partition"] = partition_of(key)
            p.produce(topic, None if value is None else value.encode(), None if key is None else key.encode(), **kw)
            n += 1
            if n % 1000 == 0:
                p.poll(0)
        assert p.flush(30) == 0
        return n

    def read_committed(self, topic: str, until: Callable[[list[Rec]], bool], timeout: float = 60.0,
                       settle: float = 1.5) -> list[Rec]:
        """Every record of ``topic`` (read_committed) once ``until(records)`` holds, plus anything
        that arrives within ``settle`` seconds after (so a duplicate would be seen)."""
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"reader-{time.time_ns()}",
                      "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                      "enable.auto.commit": False})
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        settle_until: float | None = None
        try:
            while time.monotonic() < deadline:
                for m in c.consume(1000, 0.2):
                    if m.error() is None:
                        out.append((m.key(), m.value(), m.timestamp()[1]))
                if settle_until is None and until(out):
                    settle_until = time.monotonic() + settle
                if settle_until is not None and time.monotonic() >= settle_until:
                    break
        finally:
            c.close()
        return out

    def wait_consumed(self, group: str, topics: list[str], timeout: float = 60.0) -> None:
        """Waits until the application's committed input offsets reach the end of ``topics``."""
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            tps = [TopicPartition(t, p) for t in topics
                   for p in c.list_topics(t, timeout=10).topics[t].partitions]
            ends = {(tp.topic, tp.partition): c.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
            done: dict[tuple[str, int], int] = {}
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                done = {(tp.topic, tp.partition): tp.offset for tp in c.committed(tps, timeout=10)}
                if all(done[k] >= end for k, end in ends.items() if end > 0):
                    return
                time.sleep(0.2)  # the poll interval
            raise AssertionError(f"group {group} did not consume {topics} in {timeout}s: {done} vs {ends}")
        finally:
            c.close()

    def start(self, topology: Topology, app_id: str, state_dir: Path, **conf: Any) -> KafkaStreams:
        """An exactly_once_v2 application, returned once RUNNING (AssertionError after 60 s)."""
        app = KafkaStreams(topology, {"application.id": app_id, "bootstrap.servers": self.bootstrap,
                                      "processing.guarantee": "exactly_once_v2", "commit.interval.ms": 100,
                                      "state.dir": str(state_dir), **conf})
        app.start()
        try:
            wait_for(lambda: app.state() is State.RUNNING or app.state() is State.ERROR, 60,
                     f"application {app_id} to start")
        except AssertionError:
            app.close(10)
            raise
        if app.state() is not State.RUNNING:
            app.close(10)
            raise AssertionError(f"application {app_id} did not start: {app.state()} {app.errors()}")
        return app

    @staticmethod
    def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
        wait_for(condition, timeout, what)

    @staticmethod
    def latest_per_key(records: list[Rec]) -> dict[bytes | None, bytes | None]:
        """A table's final state from its update stream (None values delete)."""
        out: dict[bytes | None, bytes | None] = {}
        for k, v, _ in records:
            if v is None:
                out.pop(k, None)
            else:
                out[k] = v
        return out


def wait_for(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    """Polls ``condition`` every ``interval`` s until it holds; AssertionError naming ``what``
    after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


@pytest.fixture
def streams_e2e(broker: BrokerProcess) -> StreamsE2E:
    return StreamsE2E(broker.bootstrap)
