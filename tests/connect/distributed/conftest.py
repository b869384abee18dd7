"""A broker for distributed-worker tests (short initial rebalance delay so groups form fast), and
a reader of an internal topic's raw records."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from strom.core.testing import BrokerProcess

RawRecords = list[tuple[int, bytes, bytes | None]]


def _read_all(broker: BrokerProcess, topic: str) -> RawRecords:
    """Every (partition, key, value) of the topic, each partition in log order."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    parts = c.list_topics(topic, timeout=10).topics[topic].partitions
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    out: RawRecords = []
    eof: set[int] = set()
    while len(eof) < len(parts):
        m = c.poll(5)
        assert m is not None
        if m.error():
            eof.add(m.partition() or 0)
        else:
            out.append((m.partition() or 0, m.key() or b"", m.value()))
    c.close()
    return out


@pytest.fixture
def read_all() -> Callable[[BrokerProcess, str], RawRecords]:
    """``read_all(broker, topic)``: the topic's raw records (what the stores wrote, byte for byte)."""
    return _read_all


@pytest.fixture(scope="module")
def connect_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("connect-dist"),
                       config={"group.initial.rebalance.delay.ms": "100"}) as proc:
        yield proc
