"""ShareFetch / ShareAcknowledge with confluent-kafka's ShareConsumer (librdkafka's share consumer).

Small, fast cases of the data path with the real client: implicit acknowledgement shares a topic
between members exactly once (each record delivered to one member; only a member closing right
after a poll may see its last poll redelivered, as on Apache Kafka, so the members here
acknowledge with commit_sync before they close); explicit RELEASE redelivers with a higher
delivery count; REJECT never redelivers. The large end-to-end runs (five members, kills, broker
restarts) live in tests/share/.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable, Iterator

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from strom.core.testing import BrokerProcess


@pytest.fixture
def topic_and_group(broker: BrokerProcess) -> Iterator[tuple[str, str]]:
    topic, group = f"sc-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(30)
    yield topic, group


def produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, str(i).encode(), partition=i % 2)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def consumer(bootstrap: str, group: str, topic: str, **config: str) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **config})
    c.subscribe([topic])
    return c


def data(messages: Iterable[Message]) -> list[Message]:
    out = []
    for m in messages:
        assert m.error() is None, m.error()
        out.append(m)
    return out


def key(m: Message) -> tuple[int, int]:
    partition, offset = m.partition(), m.offset()
    assert partition is not None and offset is not None
    return partition, offset


def delivery_count(m: Message) -> int:
    count = m.delivery_count()
    assert count is not None
    return count


def test_implicit_acknowledgement_shares_records_exactly_once(broker: BrokerProcess,
                                                              topic_and_group: tuple[str, str]) -> None:
    topic, group = topic_and_group
    n = 20_000
    produce(broker.bootstrap, topic, n)
    seen: dict[tuple[int, int], int] = {}
    lock = threading.Lock()
    done = threading.Event()
    errors: list[BaseException] = []

    def member(index: int) -> None:
        try:
            c = consumer(broker.bootstrap, group, topic)
            deadline = time.monotonic() + 60
            while not done.is_set() and time.monotonic() < deadline:
                for m in data(c.poll(0.5)):
                    k = key(m)
                    with lock:
                        assert k not in seen, f"{k} delivered to member {index} and {seen[k]}"
                        seen[k] = index
                        if len(seen) == n:
                            done.set()
            c.commit_sync(30)  # the last poll's records, accepted before closing
            c.close()
        except BaseException as e:
            errors.append(e)
            done.set()

    threads = [threading.Thread(target=member, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not errors, errors
    assert sorted(seen) == sorted((o % 2, o // 2) for o in range(n))


def test_explicit_release_redelivers_and_reject_does_not(broker: BrokerProcess,
                                                         topic_and_group: tuple[str, str]) -> None:
    topic, group = topic_and_group
    produce(broker.bootstrap, topic, 4)  # offsets 0, 1 on each partition
    c = consumer(broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        first: dict[tuple[int, int], int] = {}
        deadline = time.monotonic() + 30
        while len(first) < 4:
            assert time.monotonic() < deadline, first
            for m in data(c.poll(0.5)):
                first[key(m)] = delivery_count(m)
                # Offset 0: release (comes back); offset 1: reject (never again).
                c.acknowledge(m, AcknowledgeType.RELEASE if m.offset() == 0 else AcknowledgeType.REJECT)
            c.commit_sync(30)
        assert set(first.values()) == {1}
        again: dict[tuple[int, int], int] = {}
        deadline = time.monotonic() + 30
        while len(again) < 2:
            assert time.monotonic() < deadline, again
            for m in data(c.poll(0.5)):
                again[key(m)] = delivery_count(m)
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(30)
        assert again == {(0, 0): 2, (1, 0): 2}
        # Nothing else comes: the rejected records are archived, the released ones accepted now.
        end = time.monotonic() + 2
        while time.monotonic() < end:
            assert data(c.poll(0.5)) == []
    finally:
        c.close()
