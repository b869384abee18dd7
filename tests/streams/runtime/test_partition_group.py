"""A task of several input partitions processes its records in timestamp order (Kafka Streams'
PartitionGroup, KIP-353 / KIP-695, issue 26), on the real broker.

* stream-table join with both topics filled before the application starts and the table's
  records older than every order: Kafka Streams reads the table first and joins every order
  (strom used to process in fetch order and could join none);
* a merge of two pre-filled streams with interleaved timestamps comes out in timestamp order;
* the unit part: PartitionGroup's choice, ties and max.task.idle.ms on plain records.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.testing import BrokerProcess
from strom.streams import Consumed, KafkaStreams, Produced, Serdes, StreamsBuilder, Topology
from strom.streams.runtime import State
from strom.streams.runtime.partition_group import PartitionGroup

S = Serdes.string()
T0 = int(time.time() * 1000) - 3600 * 1000  # an hour ago: within retention
ORDERS = 4000
CUSTOMERS = 200


class _Rec:
    """A record as the queue sees it (timestamp only)."""

    def __init__(self, ts: int, tag: str) -> None:
        self.ts = ts
        self.tag = tag

    def timestamp(self) -> tuple[int, int]:
        return (1, self.ts)


def _drain(group: PartitionGroup, now: int) -> list[str]:
    out: list[str] = []
    while group.ready_to_process(now):
        nxt = group.next_run(now)
        assert nxt is not None
        out.extend(r.tag for r in nxt[1] if isinstance(r, _Rec))
    return out


def test_partition_group_picks_smallest_head_and_keeps_partition_order() -> None:
    a, b = ("a", 0), ("b", 0)
    g = PartitionGroup([a, b], 0)
    # b's 5 goes backwards: it stays behind b's 7 (partition order), then competes with a's heads
    g.add_records(a, [_Rec(1, "a1"), _Rec(4, "a4"), _Rec(6, "a6")])
    g.add_records(b, [_Rec(2, "b2"), _Rec(7, "b7"), _Rec(5, "b5"), _Rec(8, "b8")])
    # every partition has data: processable until a queue empties, then it waits for the fetcher
    assert _drain(g, 0) == ["a1", "b2", "a4", "a6"]
    assert not g.ready_to_process(0)
    g.at_end(a)  # a is at its end: with max.task.idle.ms=0 the deadline is now
    assert _drain(g, 0) == ["b7", "b5", "b8"]
    assert g.enforced_processing_total >= 1


def test_partition_group_tie_goes_to_the_other_partition_and_idle_waits() -> None:
    a, b = ("a", 0), ("b", 0)
    g = PartitionGroup([a, b], 1000)
    g.add_records(a, [_Rec(1, "a1"), _Rec(3, "a3")])
    g.add_records(b, [_Rec(3, "b3")])
    assert _drain(g, 0) == ["a1", "b3"]  # a's 3 ties with b's head: b goes first (Kafka's heap)
    g.at_end(b)
    assert not g.ready_to_process(0)  # b empty at its end: wait max.task.idle.ms
    assert not g.ready_to_process(999)
    assert _drain(g, 1000) == ["a3"]
    never = PartitionGroup([a, b], -1)
    never.add_records(a, [_Rec(9, "a9")])
    assert _drain(never, 0) == ["a9"]  # -1: never waits


# -- on the broker ---------------------------------------------------------------------------


def _create(bootstrap: str, *topics: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, num_partitions=n, replication_factor=1) for t, n in topics]).values():
        f.result()


def _produce(bootstrap: str, topic: str, records: list[tuple[str, str, int, int]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, (key, value, ts, partition) in enumerate(records):
        p.produce(topic, value.encode(), key.encode(), timestamp=ts, partition=partition)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def _read(bootstrap: str, topic: str, n: int, timeout: float = 60.0) -> list[tuple[str, str, int, int]]:
    """The first ``n`` records of ``topic`` (key, value, timestamp, partition), in each partition's order."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out: list[tuple[str, str, int, int]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < n and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    out.append(((m.key() or b"").decode(), (m.value() or b"").decode(), m.timestamp()[1],
                                m.partition() or 0))
    finally:
        c.close()
    return out


@pytest.fixture
def start_app(broker: BrokerProcess, tmp_path: Path) -> Iterator[Callable[[Topology], KafkaStreams]]:
    apps: list[KafkaStreams] = []

    def start(topology: Topology, **conf: Any) -> KafkaStreams:
        app = KafkaStreams(topology, {"application.id": f"pg-{uuid.uuid4().hex[:8]}",
                                      "bootstrap.servers": broker.bootstrap, "commit.interval.ms": 200,
                                      "state.dir": str(tmp_path), **conf})
        apps.append(app)
        app.start()
        deadline = time.monotonic() + 60
        while app.state() is not State.RUNNING and time.monotonic() < deadline:
            assert app.state() is not State.ERROR
            time.sleep(0.05)
        return app

    yield start
    for app in apps:
        app.close(30)


def test_stream_table_join_prefilled_joins_every_order(broker: BrokerProcess,
                                                        start_app: Callable[[Topology], KafkaStreams]) -> None:
    tag = uuid.uuid4().hex[:8]
    orders, customers, out = f"orders-{tag}", f"customers-{tag}", f"joined-{tag}"
    _create(broker.bootstrap, (orders, 2), (customers, 2), (out, 2))
    # orders first on the broker, table newer in the log but older in time: Kafka Streams
    # processes the table first (smaller timestamps) and joins every order
    _produce(broker.bootstrap, orders, [(f"c{i % CUSTOMERS}", f"o{i}", T0 + 10_000 + i, i % CUSTOMERS % 2)
                                        for i in range(ORDERS)])
    _produce(broker.bootstrap, customers, [(f"c{k}", f"name{k}", T0 + k, k % 2) for k in range(CUSTOMERS)])
    builder = StreamsBuilder()
    table = builder.table(customers, Consumed.with_(S, S))
    (builder.stream(orders, Consumed.with_(S, S))
        .join(table, lambda order, name: f"{order}@{name}")
        .to(out, Produced.with_(S, S)))
    start_app(builder.build())
    got = _read(broker.bootstrap, out, ORDERS)
    assert len(got) == ORDERS, f"{len(got)} of {ORDERS} orders joined"
    assert sorted(v for _, v, _, _ in got) == sorted(f"o{i}@name{i % CUSTOMERS}" for i in range(ORDERS))


def test_merge_of_prefilled_streams_comes_out_in_timestamp_order(
        broker: BrokerProcess, start_app: Callable[[Topology], KafkaStreams]) -> None:
    tag = uuid.uuid4().hex[:8]
    left, right, out = f"left-{tag}", f"right-{tag}", f"merged-{tag}"
    _create(broker.bootstrap, (left, 1), (right, 1), (out, 1))
    n = 2000
    # interleaved in time, each in runs of 7 so that batches must be cut across partitions
    _produce(broker.bootstrap, left, [("k", f"l{i}", T0 + 2 * i - (i // 7) % 2, 0) for i in range(n)])
    _produce(broker.bootstrap, right, [("k", f"r{i}", T0 + 2 * i + 1, 0) for i in range(n)])
    builder = StreamsBuilder()
    a = builder.stream(left, Consumed.with_(S, S))
    b = builder.stream(right, Consumed.with_(S, S))
    a.merge(b).to(out, Produced.with_(S, S))
    start_app(builder.build())
    got = _read(broker.bootstrap, out, 2 * n)
    assert len(got) == 2 * n
    stamps = [ts for _, _, ts, _ in got]
    assert stamps == sorted(stamps)
