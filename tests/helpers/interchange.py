"""A workload one broker writes and another must serve: the data-directory interchange tests.

``write_workload`` puts on a broker (strom's or Apache Kafka's, through confluent-kafka only)
what a data directory carries: a plain topic (3 partitions, keys, headers, explicit
timestamps, an idempotent producer), a compacted topic compacted before the stop, a
transactional topic with two committed transactions and an aborted one between them, the
committed offsets of a classic group and of a KIP-848 consumer group, and the finished
transaction of the transactional id. ``observe`` reads all of it back from any broker as
values that compare with ``==``: every record of every partition (read_uncommitted and
read_committed), each group's committed offsets, and the transaction's state as
DescribeTransactions and ListTransactions report it. The interchange tests observe on the
writer, stop it, start the other broker on a copy of its directories and observe again.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from diff_wire import WireClient
from kafka_ref import JVM_OPTS, classpath, ensure_jars
from kio.schema.list_transactions.v0.request import ListTransactionsRequest

logger = logging.getLogger(__name__)

PLAIN = "ix-plain"
COMPACTED = "ix-compacted"
TXN = "ix-txn"
TOPICS: dict[str, int] = {PLAIN: 3, COMPACTED: 1, TXN: 2}
CLASSIC_GROUP = "ix-classic"
CONSUMER_GROUP = "ix-kip848"
TRANSACTIONAL_ID = "ix-tx"
PLAIN_RECORDS = 300
COMPACT_KEYS = 40

# (partition, offset, key, value, headers, timestamp)
Record = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]


@dataclass
class Observed:
    """What a client sees of the workload on one broker."""

    records: dict[str, list[Record]] = field(default_factory=dict)  # read_uncommitted
    committed_reads: dict[str, list[Record]] = field(default_factory=dict)  # read_committed, TXN only
    offsets: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    transaction: tuple[str, int, int, int] = ("", -1, -1, -1)  # state, producer id, epoch, timeout
    listed: tuple[str, int, str] = ("", -1, "")  # ListTransactions: id, producer id, state


def _deadline_loop(timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        yield
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s: {what}")
        time.sleep(0.1)


def admin_for(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def wait_leaders(bootstrap: str, topics: dict[str, int], timeout: float = 60.0) -> None:
    """Until metadata shows every partition of ``topics`` with a leader."""
    admin = admin_for(bootstrap)
    last: object = None
    for _ in _deadline_loop(timeout, f"leaders for {topics} on {bootstrap}; last {last}"):
        try:
            md = admin.list_topics(timeout=5)
        except KafkaException as e:
            last = e
            continue
        ok = True
        for name, n in topics.items():
            t = md.topics.get(name)
            if t is None or t.error is not None or len(t.partitions) != n or any(
                    p.leader < 0 for p in t.partitions.values()):
                ok, last = False, (name, t and t.error, t and {p.id: p.leader for p in t.partitions.values()})
                break
        if ok:
            return


def _producer(bootstrap: str, **conf: Any) -> Producer:
    base: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 30000,
                            "log_level": 0}
    base.update(conf)
    return Producer(base)


def _produce(producer: Producer, topic: str, items: list[dict[str, Any]]) -> None:
    errors: list[object] = []
    for item in items:
        producer.produce(topic, on_delivery=lambda err, _msg: errors.append(err) if err else None, **item)
    left = producer.flush(30)
    assert left == 0 and not errors, (left, errors[:3])


def write_workload(bootstrap: str, *, compaction_timeout: float = 60.0) -> None:
    """Write the whole workload; returns once the compacted topic has been compacted."""
    admin = admin_for(bootstrap)
    futures = admin.create_topics([
        NewTopic(PLAIN, 3, 1),
        NewTopic(COMPACTED, 1, 1, config={"cleanup.policy": "compact", "segment.ms": "100",
                                          "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"}),
        NewTopic(TXN, 2, 1),
    ], operation_timeout=30)
    for f in futures.values():
        f.result(30)
    wait_leaders(bootstrap, TOPICS)

    # Plain: an idempotent producer (producer state snapshots), keys, headers, timestamps (an
    # hour old: older than retention.ms would be deleted by the next broker).
    ts0 = int(time.time() * 1000) - 3_600_000
    idempotent = _producer(bootstrap, **{"enable.idempotence": True})
    _produce(idempotent, PLAIN, [
        {"key": b"k%d" % i, "value": b"plain-%d" % i, "partition": i % 3, "timestamp": ts0 + i,
         "headers": [("h", b"%d" % i)] if i % 7 == 0 else None}
        for i in range(PLAIN_RECORDS)])

    # Compacted: three rounds over the same keys, each in its own segment, then one record so
    # the third round's segment is no longer active. Both brokers roll on segment.ms measured
    # in record time (the new batch's timestamp minus the segment's first), so rounds one
    # second apart in their timestamps roll at once, without waiting.
    plain = _producer(bootstrap)
    for round_ in range(3):
        _produce(plain, COMPACTED, [{"key": b"key-%d" % k, "value": b"v%d-%d" % (round_, k),
                                     "timestamp": ts0 + 1000 * round_} for k in range(COMPACT_KEYS)])
    _produce(plain, COMPACTED, [{"key": b"key-0", "value": b"last", "timestamp": ts0 + 3000}])
    # The cleaner has run once no overwritten value of the first two rounds is served.
    last: object = None
    for _ in _deadline_loop(compaction_timeout, f"compaction of {COMPACTED}; last {last}"):
        recs = read_partition(bootstrap, COMPACTED, 0)
        values = [r[3] for r in recs]
        last = len(values)
        if not any(v is not None and (v.startswith(b"v0-") or v.startswith(b"v1-")) for v in values):
            break

    # Transactions: commit, abort, commit, across both partitions.
    tx = _producer(bootstrap, **{"transactional.id": TRANSACTIONAL_ID, "transaction.timeout.ms": 60000})
    tx.init_transactions(30)
    for n, outcome in enumerate(("commit", "abort", "commit")):
        tx.begin_transaction()
        _produce(tx, TXN, [{"key": b"t%d-%d" % (n, i), "value": b"%s-%d-%d" % (outcome.encode(), n, i),
                            "partition": i % 2} for i in range(10)])
        if outcome == "commit":
            tx.commit_transaction(30)
        else:
            tx.abort_transaction(30)
    # A finished transaction: DescribeTransactions says CompleteCommit once the markers are in.
    for _ in _deadline_loop(30, "transaction CompleteCommit"):
        if describe_transaction(bootstrap)[0] == "CompleteCommit":
            break

    # Groups: a classic group and a KIP-848 consumer group, each joined, consuming and committing.
    commit_group(bootstrap, CLASSIC_GROUP, PLAIN, {0: 50, 1: 60, 2: 70}, protocol="classic")
    commit_group(bootstrap, CONSUMER_GROUP, TXN, {0: 7, 1: 9}, protocol="consumer")


def commit_group(bootstrap: str, group: str, topic: str, offsets: dict[int, int], *, protocol: str) -> None:
    """Join ``group`` subscribed to ``topic``, wait for the assignment, commit ``offsets``, leave."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                            "auto.offset.reset": "earliest", "group.protocol": protocol, "log_level": 0}
    if protocol == "classic":
        conf["session.timeout.ms"] = 10000
    consumer = Consumer(conf)
    try:
        consumer.subscribe([topic])
        for _ in _deadline_loop(60, f"assignment in {group}"):
            consumer.poll(0.2)
            if len(consumer.assignment()) == len(offsets):
                break
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def _bytes(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def read_partitions(bootstrap: str, partitions: list[tuple[str, int]], *, committed: bool = False,
                    timeout: float = 60.0) -> list[Record]:
    """Every record of ``partitions`` up to each one's end (the LSO with ``committed``), with one
    consumer, sorted by topic, partition, offset."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ix-read-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "enable.partition.eof": True, "log_level": 0,
                         "isolation.level": "read_committed" if committed else "read_uncommitted",
                         "fetch.wait.max.ms": 50})
    out: list[tuple[str, Record]] = []
    left = set(partitions)
    try:
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in partitions])
        for _ in _deadline_loop(timeout, f"end of {sorted(left)}"):
            for msg in consumer.consume(500, 0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        left.discard((msg.topic() or "", msg.partition() or 0))
                        continue
                    raise KafkaException(err)
                headers = tuple((str(h[0]), _bytes(h[1])) for h in (msg.headers() or []))
                out.append((msg.topic() or "", (msg.partition() or 0, msg.offset() or 0, _bytes(msg.key()),
                                                _bytes(msg.value()), headers, msg.timestamp()[1])))
            if not left:
                break
    finally:
        consumer.close()
    return [r for _, r in sorted(out, key=lambda tr: (tr[0], tr[1][0], tr[1][1]))]


def read_partition(bootstrap: str, topic: str, partition: int, *, committed: bool = False) -> list[Record]:
    return read_partitions(bootstrap, [(topic, partition)], committed=committed)


def describe_transaction(bootstrap: str, timeout: float = 60.0) -> tuple[str, int, int, int]:
    """DescribeTransactions of the workload's transactional id (state, producer id and epoch,
    timeout), once the coordinator answers without an error (it loads its log after a start)."""
    last: object = None
    with WireClient(bootstrap) as c:
        for _ in _deadline_loop(timeout, f"DescribeTransactions {TRANSACTIONAL_ID}; last {last}"):
            d = last = c.describe_transactions((TRANSACTIONAL_ID,))[0]
            if d["error_code"] == 0:
                return (d["transaction_state"], d["producer_id"], d["producer_epoch"], d["transaction_timeout_ms"])
    raise AssertionError("unreachable")


def list_transaction(bootstrap: str, timeout: float = 60.0) -> tuple[str, int, str]:
    """The workload's entry in ListTransactions (id, producer id, state)."""
    last: object = None
    with WireClient(bootstrap) as c:
        for _ in _deadline_loop(timeout, f"ListTransactions; last {last}"):
            resp = last = c.request(ListTransactionsRequest(state_filters=(), producer_id_filters=()))
            mine = [s for s in resp.transaction_states if s.transactional_id == TRANSACTIONAL_ID]
            if resp.error_code == 0 and mine:
                return (mine[0].transactional_id, int(mine[0].producer_id), mine[0].transaction_state)
    raise AssertionError("unreachable")


def observe(bootstrap: str) -> Observed:
    """Everything a client sees of the workload on the broker at ``bootstrap``."""
    obs = Observed()
    for topic, n in TOPICS.items():
        obs.records[topic] = read_partitions(bootstrap, [(topic, p) for p in range(n)])
    obs.committed_reads[TXN] = read_partitions(bootstrap, [(TXN, p) for p in range(TOPICS[TXN])], committed=True)
    admin = admin_for(bootstrap)
    for group in (CLASSIC_GROUP, CONSUMER_GROUP):
        res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
        obs.offsets[group] = {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions}
    obs.transaction = describe_transaction(bootstrap)
    obs.listed = list_transaction(bootstrap)
    return obs


def dump_log(files: list[Path], *flags: str) -> subprocess.CompletedProcess[str]:
    """Kafka's ``kafka-dump-log`` (``DumpLogSegments``, the reference's jars) on ``files``."""
    java = shutil.which("java")
    assert java is not None
    cmd = [java, "-Xmx256m", *JVM_OPTS, "-cp", classpath(ensure_jars()), "org.apache.kafka.tools.DumpLogSegments",
           "--files", ",".join(str(f) for f in files), *flags]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)
