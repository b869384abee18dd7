"""Classic consumer groups with real clients: confluent-kafka, kafka-python, aiokafka."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.testing import BrokerProcess, wait_for

PARTITIONS = 6


def make_topic(bootstrap: str, partitions: int = PARTITIONS) -> str:
    name = f"grp-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the future resolves
    admin.create_topics([NewTopic(name, partitions)])[name].result(30)
    return name


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int = PARTITIONS) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for part in range(partitions):
        for i in range(per_partition):
            p.produce(topic, value=f"{part}-{i}".encode(), partition=part)
    assert p.flush(30) == 0


class Member(threading.Thread):
    """A confluent-kafka group consumer polling in its own thread, tracking partition ownership."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, strategy: str,
                 owners: dict[int, str], lock: threading.Lock, violations: list[str],
                 consumed: dict[tuple[int, int], int], extra: dict[str, Any] | None = None) -> None:
        super().__init__(daemon=True, name=name)
        self.member = name
        self.owners, self.lock, self.violations, self.consumed = owners, lock, violations, consumed
        self.stop_flag = threading.Event()
        self.assigned: set[int] = set()
        self.rebalances = 0
        self.commit_errors: list[int] = []
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "classic",
                "partition.assignment.strategy": strategy, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
                **(extra or {})}
        self.consumer = Consumer(conf)
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_revoke)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.rebalances += 1
        with self.lock:
            for tp in partitions:
                holder = self.owners.get(tp.partition)
                if holder is not None and holder != self.member:
                    self.violations.append(f"{self.member} got {tp.partition} still owned by {holder}")
                self.owners[tp.partition] = self.member
                self.assigned.add(tp.partition)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.rebalances += 1
        # Commit what was processed before giving the partitions away (no offset lost).
        with contextlib.suppress(KafkaException):
            consumer.commit(asynchronous=False)
        with self.lock:
            for tp in partitions:
                if self.owners.get(tp.partition) == self.member:
                    del self.owners[tp.partition]
                self.assigned.discard(tp.partition)

    def run(self) -> None:
        try:
            while not self.stop_flag.is_set():
                msg = self.consumer.poll(0.1)
                if msg is None or msg.error():
                    continue
                partition, offset = msg.partition() or 0, msg.offset() or 0
                with self.lock:
                    owner = self.owners.get(partition)
                    if owner != self.member:
                        self.violations.append(f"{self.member} read {partition} owned by {owner}")
                    key = (partition, offset)
                    self.consumed[key] = self.consumed.get(key, 0) + 1
                try:
                    self.consumer.commit(message=msg, asynchronous=False)
                except KafkaException as e:
                    # A commit sent with the generation the coordinator has just replaced gets
                    # ILLEGAL_GENERATION (REBALANCE_IN_PROGRESS while the new one syncs), from Kafka
                    # too: the record is read again by its next owner, which the test tolerates.
                    self.commit_errors.append(e.args[0].code())
        finally:
            # An unclosed librdkafka consumer is destroyed by the garbage collector, which can then
            # block a later test for good once the broker is gone: always close.
            self.consumer.close()

    def leave(self) -> None:
        self.stop_flag.set()
        if self.ident is None:  # never started: run() will not close the consumer
            self.consumer.close()
        elif self.is_alive():
            self.join(30)


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_three_members_join_and_leave_without_double_ownership(group_broker: BrokerProcess, strategy: str) -> None:
    bootstrap = group_broker.bootstrap
    topic = make_topic(bootstrap)
    group = f"g-{uuid.uuid4().hex[:8]}"
    owners: dict[int, str] = {}
    lock = threading.Lock()
    violations: list[str] = []
    consumed: dict[tuple[int, int], int] = {}

    members: list[Member] = []

    def member(name: str) -> Member:
        m = Member(name, bootstrap, group, topic, strategy, owners, lock, violations, consumed)
        members.append(m)
        m.start()
        return m

    def total_owned() -> int:
        with lock:
            return len(owners)

    try:
        produce(bootstrap, topic, 20)
        a = member("a")
        wait_for(lambda: len(a.assigned) == PARTITIONS, what="a owns every partition")
        b = member("b")
        wait_for(lambda: bool(b.assigned and a.assigned) and total_owned() == PARTITIONS, what="a and b share")
        produce(bootstrap, topic, 20)
        c = member("c")
        wait_for(lambda: all(m.assigned for m in (a, b, c)) and total_owned() == PARTITIONS,
                 what="three members share")
        assert sorted(len(m.assigned) for m in (a, b, c)) == [2, 2, 2]
        produce(bootstrap, topic, 20)
        b.leave()
        wait_for(lambda: len(a.assigned) + len(c.assigned) == PARTITIONS, what="a and c take over from b")
        c.leave()
        wait_for(lambda: len(a.assigned) == PARTITIONS, what="a owns every partition again")
        wait_for(lambda: len(consumed) == PARTITIONS * 60, what="every record consumed")
    finally:
        for m in members:
            m.leave()
    assert violations == []
    assert all(not m.is_alive() for m in members)
    rebalance_errors = {KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS}
    assert {code for m in members for code in m.commit_errors} <= rebalance_errors
    # Every record was read; the committed offsets cover all of them.
    checker = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    committed = checker.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    checker.close()
    assert [tp.offset for tp in committed] == [60] * PARTITIONS


def test_offset_commit_fetch_round_trip_with_metadata(group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic = make_topic(bootstrap, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 42, metadata="hello"), TopicPartition(topic, 1, 7)],
             asynchronous=False)
    got = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
    assert [(tp.offset, tp.metadata) for tp in got] == [(42, "hello"), (7, None)]  # librdkafka reports "" as None
    with pytest.raises(KafkaException) as info:
        c.commit(offsets=[TopicPartition(topic, 0, 43, metadata="x" * 5000)], asynchronous=False)
    assert "METADATA_TOO_LARGE" in str(info.value).upper()
    assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 42
    c.close()


def test_static_member_rejoins_without_rebalance(group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic = make_topic(bootstrap)
    group = f"g-{uuid.uuid4().hex[:8]}"
    owners: dict[int, str] = {}
    lock = threading.Lock()
    violations: list[str] = []
    consumed: dict[tuple[int, int], int] = {}
    a = Member("a", bootstrap, group, topic, "range", owners, lock, violations, consumed,
               {"group.instance.id": "inst-a"})
    b = Member("b", bootstrap, group, topic, "range", owners, lock, violations, consumed,
               {"group.instance.id": "inst-b"})
    members = [a, b]
    try:
        a.start()
        b.start()
        wait_for(lambda: len(a.assigned) == 3 and len(b.assigned) == 3, what="a stable group of two")
        # An observation window, not a wait for a condition: callbacks still in flight land
        # before the baseline is taken.
        time.sleep(1.0)
        a_rebalances, b_partitions = a.rebalances, set(b.assigned)
        b.leave()  # a static member's close sends no LeaveGroup: the group keeps its slot
        with lock:
            for p in b_partitions:
                owners.pop(p, None)
        # Created only now: a subscribed librdkafka consumer joins from its background thread.
        b2 = Member("b2", bootstrap, group, topic, "range", owners, lock, violations, consumed,
                    {"group.instance.id": "inst-b"})
        members.append(b2)
        b2.start()
        wait_for(lambda: b2.assigned == b_partitions, what="the rejoined static member gets b's partitions")
        # An observation window: that nothing happens (no rebalance of a) cannot be polled for.
        time.sleep(1.5)
        assert a.rebalances == a_rebalances, "a static rejoin must not rebalance the other members"
    finally:
        for m in members:
            m.leave()
    assert violations == []


def test_describe_list_delete_groups(group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic = make_topic(bootstrap, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "classic",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": "describe-me"})
    c.subscribe([topic])
    wait_for(lambda: (c.poll(0.1), len(c.assignment()) == 2)[1], what="assignment")
    c.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    desc = admin.describe_consumer_groups([group])[group].result(10)
    assert desc.state.name == "STABLE" and desc.partition_assignor == "range"
    assert [m.client_id for m in desc.members] == ["describe-me"]
    assert sorted(tp.partition for tp in desc.members[0].assignment.topic_partitions) == [0, 1]
    with pytest.raises(KafkaException) as info:
        admin.delete_consumer_groups([group])[group].result(10)
    assert "NON_EMPTY_GROUP" in str(info.value)
    c.close()
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(10).valid}
    assert listed[group].state.name == "EMPTY"
    admin.delete_consumer_groups([group])[group].result(10)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}
    fresh = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    assert fresh.committed([TopicPartition(topic, 0)], timeout=10)[0].offset < 0
    fresh.close()
    with pytest.raises(KafkaException) as info:
        admin.delete_consumer_groups([group])[group].result(10)
    assert "GROUP_ID_NOT_FOUND" in str(info.value)


def test_kafka_python_group_consumer(group_broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer

    bootstrap = group_broker.bootstrap
    topic = make_topic(bootstrap, 3)
    produce(bootstrap, topic, 10, 3)
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=15000)
    seen = []
    for msg in consumer:
        seen.append((msg.partition, msg.offset))
        if len(seen) == 30:
            break
    consumer.commit()
    consumer.close()
    assert len(set(seen)) == 30
    check = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    assert [tp.offset for tp in check.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)] == [10] * 3
    check.close()


def test_aiokafka_group_consumer(group_broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP

    bootstrap = group_broker.bootstrap
    topic = make_topic(bootstrap, 3)
    produce(bootstrap, topic, 10, 3)
    group = f"g-{uuid.uuid4().hex[:8]}"

    async def run() -> tuple[int, list[int | None]]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            count = 0
            while count < 30:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                count += sum(len(v) for v in batch.values())
            await consumer.commit()
            return count, [await consumer.committed(ATP(topic, p)) for p in range(3)]
        finally:
            await consumer.stop()

    count, committed = asyncio.run(run())
    assert count == 30 and committed == [10, 10, 10]
