"""librdkafka (confluent-kafka) with ``group.protocol=consumer`` against a strom broker subprocess.

Three consumers join one group over a 6-partition topic while a producer writes, then one
leaves. Every assign/revoke/lost callback updates one ownership table: a partition handed to a
consumer while another still holds it fails the test. At the end every record was consumed and
the committed offsets are the partitions' end offsets.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.testing import BrokerProcess, wait_for

PARTITIONS = 6
HEARTBEAT_MS = 300  # group.consumer.heartbeat.interval.ms: fast reconciliation for the test


SESSION_MS = 3000  # group.consumer.session.timeout.ms of the kill test: a dead member is fenced quickly


def _broker(data: Path, **extra: str) -> BrokerProcess:
    return BrokerProcess(data, config={"group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
                                       "offsets.topic.num.partitions": "5", **extra})


@pytest.fixture
def kip848_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """Default session timeout (45 s): clients reconnecting after a restart are never fenced."""
    with _broker(tmp_path / "data") as proc:
        yield proc


@pytest.fixture
def short_session_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with _broker(tmp_path / "data", **{"group.consumer.session.timeout.ms": str(SESSION_MS)}) as proc:
        yield proc


class Ownership:
    """partition -> consumer name, updated from the rebalance callbacks of every consumer."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[int, str] = {}
        self.violations: list[str] = []
        self.history: list[tuple[str, str, list[int]]] = []

    def assign(self, who: str, parts: list[int]) -> None:
        with self.lock:
            self.history.append((who, "assign", parts))
            for p in parts:
                if p in self.owner and self.owner[p] != who:
                    self.violations.append(f"{who} got partition {p} still owned by {self.owner[p]}")
                self.owner[p] = who

    def release(self, who: str, parts: list[int], how: str) -> None:
        with self.lock:
            self.history.append((who, how, parts))
            for p in parts:
                if self.owner.get(p) == who:
                    del self.owner[p]

    def of(self, who: str) -> set[int]:
        with self.lock:
            return {p for p, w in self.owner.items() if w == who}


class Member(threading.Thread):
    """One consumer in its own thread: consumes, commits each record, commits again on revoke."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, owners: Ownership,
                 consumed: dict[tuple[int, int], int], consumed_lock: threading.Lock) -> None:
        super().__init__(name=name, daemon=True)
        self.who = name
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.owners, self.consumed, self.consumed_lock = owners, consumed, consumed_lock
        self.stop = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "group.protocol": "consumer",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": self.who})

        def on_assign(consumer: Consumer, parts: list[TopicPartition]) -> None:
            self.owners.assign(self.who, [tp.partition for tp in parts])

        def on_revoke(consumer: Consumer, parts: list[TopicPartition]) -> None:
            retry_commits(consumer, {tp.partition for tp in parts})
            forget(parts)
            self.owners.release(self.who, [tp.partition for tp in parts], "revoke")

        def on_lost(consumer: Consumer, parts: list[TopicPartition]) -> None:
            forget(parts)
            self.owners.release(self.who, [tp.partition for tp in parts], "lost")

        def forget(parts: list[TopicPartition]) -> None:
            # a later owner commits past these; retrying them on regaining the partition would
            # move its committed offset backwards
            for tp in parts:
                pending.pop(tp.partition, None)

        # Offsets whose commit was refused (an epoch bump racing it): committed again while the
        # partition is still ours, as an application would, else the last one of a partition
        # that receives nothing more would stay uncommitted.
        pending: dict[int, int] = {}

        def retry_commits(consumer: Consumer, partitions: set[int]) -> None:
            due = {p: off for p, off in pending.items() if p in partitions}
            if not due:
                return
            try:
                consumer.commit(offsets=[TopicPartition(self.topic, p, off) for p, off in due.items()],
                                asynchronous=False)
            except KafkaException as e:
                self.errors.append(f"commit: {e}")
                return
            for p in due:
                pending.pop(p, None)

        c.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        try:
            while not self.stop.is_set():
                if pending:
                    retry_commits(c, self.owners.of(self.who))
                msg = c.poll(0.1)
                if msg is None:
                    continue
                if msg.error():
                    self.errors.append(str(msg.error()))
                    continue
                p, off = msg.partition(), msg.offset()
                assert p is not None and off is not None  # set on every consumed record
                if p not in self.owners.of(self.who):
                    self.errors.append(f"{self.who} consumed {p}@{off} without owning it")
                with self.consumed_lock:
                    self.consumed[(p, off)] = self.consumed.get((p, off), 0) + 1
                try:
                    c.commit(offsets=[TopicPartition(self.topic, p, off + 1)], asynchronous=False)
                    pending.pop(p, None)
                except KafkaException as e:
                    # A commit racing an epoch bump may be refused (STALE_MEMBER_EPOCH): retried
                    # while we own the partition; a next owner consumes the record again.
                    self.errors.append(f"commit: {e}")
                    pending[p] = off + 1
            retry_commits(c, self.owners.of(self.who))
        finally:
            c.close()  # leaves the group (epoch -1)


def test_three_consumers_join_and_leave(kip848_broker: BrokerProcess) -> None:
    bootstrap = kip848_broker.bootstrap
    topic, group = f"kip848-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept referenced until the topic exists
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)

    produced = dict.fromkeys(range(PARTITIONS), 0)
    producing = threading.Event()
    producing.set()

    def produce() -> None:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        i = 0
        while producing.is_set():
            for part in range(PARTITIONS):
                p.produce(topic, value=f"{part}-{i}".encode(), partition=part)
                produced[part] += 1
            i += 1
            p.poll(0)
            time.sleep(0.02)
        p.flush(30)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()

    owners = Ownership()
    consumed: dict[tuple[int, int], int] = {}
    lock = threading.Lock()
    members = [Member(f"c{i}", bootstrap, group, topic, owners, consumed, lock) for i in range(3)]
    try:
        members[0].start()
        wait_for(lambda: len(owners.of("c0")) == PARTITIONS, what="c0 to own every partition")
        members[1].start()
        wait_for(lambda: len(owners.of("c0")) == len(owners.of("c1")) == 3, what="c0/c1 to own 3 each")
        members[2].start()
        wait_for(lambda: all(len(owners.of(m.who)) == 2 for m in members), what="2 partitions each")
        members[0].stop.set()
        members[0].join(30)
        wait_for(lambda: len(owners.of("c1")) == len(owners.of("c2")) == 3, what="c1/c2 to take over c0's partitions")
        producing.clear()
        producer.join(30)
        total = sum(produced.values())
        wait_for(lambda: len(consumed) == total, what=f"all {total} records consumed")
    finally:
        producing.clear()
        for m in members:
            m.stop.set()
        for m in members:
            if m.is_alive():
                m.join(30)

    assert not owners.violations, owners.violations
    assert not [e for m in members for e in m.errors if not e.startswith("commit:")]
    expected = {(p, o) for p in range(PARTITIONS) for o in range(produced[p])}
    assert set(consumed) == expected

    checker = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer"})
    try:
        committed = checker.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        checker.close()
    assert {tp.partition: tp.offset for tp in committed} == produced


def describe(admin: AdminClient, group: str) -> dict[str, tuple[int, ...]]:
    """member id -> its partitions, as ConsumerGroupDescribe reports them (group must be stable)."""
    g = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
    assert str(g.state).endswith("STABLE") and str(g.type).endswith("CONSUMER"), (g.state, g.type)
    assert g.partition_assignor == "uniform"
    return {m.member_id: tuple(sorted(tp.partition for tp in m.assignment.topic_partitions)) for m in g.members}


def test_group_survives_a_broker_restart(kip848_broker: BrokerProcess) -> None:
    """The group is rebuilt from ``__consumer_offsets``: same members and assignment, nobody fenced."""
    bootstrap = kip848_broker.bootstrap
    topic, group = f"kip848-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    owners = Ownership()
    consumed: dict[tuple[int, int], int] = {}
    members = [Member(f"c{i}", bootstrap, group, topic, owners, consumed, threading.Lock()) for i in range(2)]
    try:
        for m in members:
            m.start()
        wait_for(lambda: all(len(owners.of(m.who)) == 3 for m in members), what="3 partitions each")
        wait_for(lambda: len(_describe_or_none(admin, group) or ()) == 2, what="a stable group of two")
        before = describe(admin, group)
        kip848_broker.restart()
        # A new admin client: the old one may sit in reconnect backoff, which is not under test.
        admin = AdminClient({"bootstrap.servers": bootstrap})
        seen: list[object] = []

        def same() -> bool:
            seen.append(_describe_or_none(admin, group))
            return seen[-1] == before
        wait_for(same, what=f"the same group after the restart (before: {before})", detail=lambda: (
            f"last seen {seen[-3:]}; broker log:\n" + "\n".join(kip848_broker.log_text().splitlines()[-40:])))
        time.sleep(HEARTBEAT_MS * 5 / 1000)  # a few heartbeats with the epochs from before
        assert describe(admin, group) == before
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(30)
    assert not owners.violations, owners.violations
    assert [h for h in owners.history if h[1] == "lost"] == []


def _describe_or_none(admin: AdminClient, group: str) -> dict[str, tuple[int, ...]] | None:
    try:
        return describe(admin, group)
    except (KafkaException, AssertionError):
        return None


CHILD_CONSUMER = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer"})
c.subscribe([sys.argv[3]], on_assign=lambda c, ps: print("assigned", len(ps), flush=True))
while True:
    c.poll(0.1)
"""


def test_killed_member_is_fenced_after_the_session_timeout(short_session_broker: BrokerProcess) -> None:
    """kill -9 of a member: no leave is sent; the coordinator's session timer fences it."""
    bootstrap = short_session_broker.bootstrap
    topic, group = f"kip848-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    owners = Ownership()
    survivor = Member("c0", bootstrap, group, topic, owners, {}, threading.Lock())
    child = subprocess.Popen([sys.executable, "-c", CHILD_CONSUMER, bootstrap, group, topic],
                             stdout=subprocess.PIPE, text=True)
    try:
        survivor.start()
        wait_for(lambda: len(owners.of("c0")) == 3, what="the survivor to share the partitions")
        wait_for(lambda: len(_describe_or_none(admin, group) or ()) == 2, what="a stable group of two")
        child.kill()
        child.wait(10)
        killed_at = time.monotonic()
        wait_for(lambda: len(owners.of("c0")) == PARTITIONS, what="the survivor to get every partition")
        # Not before the session timeout: the dead member held its partitions until fenced.
        assert time.monotonic() - killed_at >= SESSION_MS / 1000 - 0.5
        assert len(describe(admin, group)) == 1
    finally:
        child.kill()
        child.wait(10)
        survivor.stop.set()
        survivor.join(30)
    assert not owners.violations, owners.violations
