"""Transactions end to end with confluent-kafka against a real broker subprocess.

A read_committed consumer must see every committed record exactly once and no aborted one:
plain commit/abort, a zombie producer fenced by a newer instance, a read-process-write loop
with ``send_offsets_to_transaction`` and injected aborts, a transaction timeout, and kill -9 of
the broker in the middle of a transaction.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.testing import BrokerProcess, wait_for

FAST_TXN = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "300",
            "transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5"}


def new_topic(bootstrap: str, partitions: int = 2) -> str:
    name = f"txn-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        t = admin.list_topics(name, timeout=10).topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return name
        time.sleep(0.1)
    raise AssertionError(f"topic {name} never became ready")


def txn_producer(bootstrap: str, tid: str, **conf: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5,
                  "transaction.timeout.ms": 60000, **conf})
    p.init_transactions(30)
    return p


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed",
             timeout: float = 30.0) -> list[bytes]:
    """Every record value up to the end of each partition (LSO for read_committed)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True,
                  "fetch.wait.max.ms": 100})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        values: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError(f"did not reach the end of {topic}: {at_end} after {len(values)} records")
            msg = c.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(int(msg.partition() or 0))
                    continue
                raise KafkaException(err)
            at_end.discard(int(msg.partition() or 0))
            values.append(msg.value() or b"")
        return values
    finally:
        c.close()


def last_stable_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    """Partition's high end as a read_committed consumer sees it: ListOffsets at read_committed
    answers the last stable offset."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lso-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1])
    finally:
        c.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def txn_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker with a fast timeout sweep, on a fixed port so clients survive its restart."""
    proc = BrokerProcess(tmp_path / "data", port=free_port(), config=FAST_TXN)
    proc.start()
    try:
        yield proc
    finally:
        if proc.alive:
            proc.kill()


def test_committed_records_once_aborted_never(broker: BrokerProcess) -> None:
    topic = new_topic(broker.bootstrap)
    p = txn_producer(broker.bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
    expected = []
    for round_, commit in enumerate([True, False, True, False, True]):
        p.begin_transaction()
        for i in range(20):
            value = f"{round_}-{i}".encode()
            p.produce(topic, value, partition=i % 2)
            if commit:
                expected.append(value)
        if commit:
            p.commit_transaction(30)
        else:
            p.flush(30)   # the aborted records are in the log before the ABORT marker
            p.abort_transaction(30)
    p.flush(10)
    committed = read_all(broker.bootstrap, topic, 2)
    assert sorted(committed) == sorted(expected)
    assert len(committed) == len(set(committed))
    assert len(read_all(broker.bootstrap, topic, 2, "read_uncommitted")) == 100


def test_zombie_producer_is_fenced(broker: BrokerProcess) -> None:
    topic = new_topic(broker.bootstrap, 1)
    tid = f"tx-{uuid.uuid4().hex[:6]}"
    zombie = txn_producer(broker.bootstrap, tid)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie-1", partition=0)
    zombie.flush(30)
    fresh = txn_producer(broker.bootstrap, tid)   # aborts the zombie's transaction, bumps the epoch
    fresh.begin_transaction()
    fresh.produce(topic, b"fresh", partition=0)
    fresh.commit_transaction(30)
    with pytest.raises(KafkaException) as e:
        zombie.produce(topic, b"zombie-2", partition=0)
        zombie.commit_transaction(30)
    err = e.value.args[0]
    assert err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                         KafkaError.INVALID_PRODUCER_EPOCH), err
    assert read_all(broker.bootstrap, topic, 1) == [b"fresh"]


def test_read_process_write_with_injected_aborts(broker: BrokerProcess) -> None:
    source = new_topic(broker.bootstrap, 2)
    sink = new_topic(broker.bootstrap, 2)
    group = f"rpw-{uuid.uuid4().hex[:6]}"
    feeder = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    inputs = [f"in-{i}".encode() for i in range(60)]
    for i, v in enumerate(inputs):
        feeder.produce(source, v, partition=i % 2)
    assert feeder.flush(30) == 0

    producer = txn_producer(broker.bootstrap, f"rpw-{uuid.uuid4().hex[:6]}")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "fetch.wait.max.ms": 100})
    parts = [TopicPartition(source, p) for p in range(2)]
    consumer.assign(parts)
    done = 0
    iteration = 0
    deadline = time.monotonic() + 90
    try:
        while done < len(inputs):
            assert time.monotonic() < deadline, f"processed {done} of {len(inputs)}"
            msgs = [m for m in consumer.consume(7, 1.0) if m.error() is None]
            if not msgs:
                continue
            iteration += 1
            producer.begin_transaction()
            for m in msgs:
                producer.produce(sink, b"out-" + (m.value() or b""), partition=int(m.partition() or 0))
            positions = consumer.position(parts)
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            if iteration % 3 == 0:
                assert producer.flush(30) == 0   # the aborted output really reaches the log
                producer.abort_transaction(30)
                # Rewind to the last committed offsets, as an application does after an abort.
                for tp in consumer.committed(parts, 30):
                    consumer.seek(TopicPartition(source, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
            else:
                producer.commit_transaction(30)
                done += len(msgs)
    finally:
        consumer.close()
    assert iteration >= 3   # at least one abort happened
    outputs = read_all(broker.bootstrap, sink, 2)
    assert sorted(outputs) == sorted(b"out-" + v for v in inputs)   # each exactly once
    check = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = check.committed(parts, 30)
    finally:
        check.close()
    assert sum(tp.offset for tp in committed) == len(inputs)


def test_transaction_timeout_aborts_and_fences(txn_broker: BrokerProcess) -> None:
    topic = new_topic(txn_broker.bootstrap, 1)
    slow = txn_producer(txn_broker.bootstrap, f"tx-{uuid.uuid4().hex[:6]}", **{"transaction.timeout.ms": 1500})
    slow.begin_transaction()
    slow.produce(topic, b"too-slow", partition=0)
    slow.flush(30)
    # The broker aborts it (its sweep runs every 300 ms) with an epoch bump and an ABORT marker
    # after the record: the last stable offset moves from 0 to the log end (2). An open
    # transaction also reads as empty under read_committed, so the read below only shows the
    # abort once the LSO has moved.
    wait_for(lambda: last_stable_offset(txn_broker.bootstrap, topic) == 2, timeout=30,
             what="the broker to abort the timed-out transaction (LSO 2: the record and its ABORT marker)")
    assert read_all(txn_broker.bootstrap, topic, 1) == []
    assert read_all(txn_broker.bootstrap, topic, 1, isolation="read_uncommitted") == [b"too-slow"]
    with pytest.raises(KafkaException):
        slow.commit_transaction(30)


def test_kill_9_mid_transaction(txn_broker: BrokerProcess) -> None:
    """Ongoing transactions at kill -9: one is committed after the restart, one is abandoned and
    aborted by its timeout; committed-before-kill data stays; read_committed readers agree."""
    topic = new_topic(txn_broker.bootstrap, 2)
    before = txn_producer(txn_broker.bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
    before.begin_transaction()
    for i in range(10):
        before.produce(topic, f"before-{i}".encode(), partition=i % 2)
    before.commit_transaction(30)

    survivor = txn_producer(txn_broker.bootstrap, f"tx-{uuid.uuid4().hex[:6]}",
                            **{"transaction.timeout.ms": 60000})
    abandoned = txn_producer(txn_broker.bootstrap, f"tx-{uuid.uuid4().hex[:6]}",
                             **{"transaction.timeout.ms": 2000})
    for prod, tag in ((survivor, "survivor"), (abandoned, "abandoned")):
        prod.begin_transaction()
        for i in range(10):
            prod.produce(topic, f"{tag}-{i}".encode(), partition=i % 2)
        assert prod.flush(30) == 0
    txn_broker.kill()
    txn_broker.start()

    committed_ok = True
    try:
        survivor.commit_transaction(60)
    except KafkaException as e:
        print("survivor commit failed:", e)
        committed_ok = False   # allowed: then the transaction must be aborted entirely
        survivor.abort_transaction(30)
    # The abandoned producer never comes back: its transaction must be aborted by the timeout.
    # A later committed transaction becomes readable only once the LSO passes the abandoned one.
    sentinel = txn_producer(txn_broker.bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
    sentinel.begin_transaction()
    for p in range(2):
        sentinel.produce(topic, f"sentinel-{p}".encode(), partition=p)
    sentinel.commit_transaction(30)
    deadline = time.monotonic() + 30
    while True:
        first = read_all(txn_broker.bootstrap, topic, 2)
        if sum(v.startswith(b"sentinel") for v in first) == 2:
            break
        assert time.monotonic() < deadline, "the abandoned transaction was never aborted"
        time.sleep(0.5)
    second = read_all(txn_broker.bootstrap, topic, 2)
    assert sorted(first) == sorted(second)
    expected = {f"before-{i}".encode() for i in range(10)} | {b"sentinel-0", b"sentinel-1"}
    if committed_ok:
        expected |= {f"survivor-{i}".encode() for i in range(10)}
    assert sorted(first) == sorted(expected)
    abandoned.purge()
