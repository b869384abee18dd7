"""The official Java client's transactional producer (kafka-clients 4.3.1, through
scripts/java_client/ClientCheck.java) against strom and against Apache Kafka.

Kafka 4.3.1 finalizes ``transaction.version=2`` on a new cluster, and so does strom, so the
client speaks KIP-890 "transaction version 2": no AddPartitionsToTxn/AddOffsetsToTxn, Produce
v12+, EndTxn v5 bumping the producer epoch. Each test runs on both brokers (``any_broker``); the
Kafka run proves the expectation is Kafka's behaviour. The ``tv1`` tests format a broker of each
kind with ``transaction.version=1`` and check the client falls back to TV1 (AddPartitionsToTxn,
AddOffsetsToTxn, no epoch bump per transaction) with the same results.

Scenarios: commits and aborts of many transactions; read-process-write with
sendOffsetsToTransaction; a zombie fenced by a second producer with its transactional.id;
transactions the coordinator aborts on transaction.timeout.ms; and a kill -9 of the broker
while a transaction is open (the broker restarts; a new producer aborts the leftover).

Records are checked with an independent client (confluent-kafka / librdkafka), reading
``read_committed`` and ``read_uncommitted`` up to the end of every partition.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from java_client import ClientRun, JavaClient
from kafka_ref import KafkaRef
from ref_fixtures import SHARED_BROKER_CONFIG, HasBootstrap, skip_without_java

from strom.core.testing import BrokerProcess

PARTITIONS = 3
N_TXNS = 20
PER_TXN = 50
ABORT_EVERY = 3
VALUE_BYTES = 100

# What the fenced producer's calls throw after a second producer with its transactional.id ran
# initTransactions (measured on Kafka 4.3.1, the same with transaction.version 2 and 1; strom
# must match): the Produce with the old epoch fails INVALID_PRODUCER_EPOCH, which the client
# makes an abortable InvalidProducerEpochException (so commit rethrows it), and the abort's
# EndTxn gets PRODUCER_FENCED.
ZOMBIE_ERRORS = {
    "zombieSend": "InvalidProducerEpochException",
    "zombieCommit": "InvalidProducerEpochException",
    "zombieAbort": "ProducerFencedException",
}

TV1 = {"transaction.version": 1}

# After the coordinator aborted two transactions for exceeding transaction.timeout.ms: what one
# producer's commit (then abort) and the other's abort (then a new transaction) give, "ok" or
# the exception class, per transaction version (measured on Kafka 4.3.1). TV2 makes the abort
# benign (EndTxn returns the epoch the timeout abort bumped to) and the commit
# INVALID_TXN_STATE, fatal; under TV1 the timeout abort fenced both producers.
TIMEOUT_OUTCOMES = {
    2: {"commitAfterTimeout": "InvalidTxnStateException", "abortAfterCommitFailed": "KafkaException",
        "abortAfterTimeout": "ok", "nextTxn": "ok"},
    1: {"commitAfterTimeout": "ProducerFencedException", "abortAfterCommitFailed": "ProducerFencedException",
        "abortAfterTimeout": "ProducerFencedException", "nextTxn": "ProducerFencedException"},
}


# ---- helpers -----------------------------------------------------------------------------------

def new_topic(bootstrap: str, partitions: int = PARTITIONS) -> str:
    name = f"jtx-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def read_all(bootstrap: str, topic: str, isolation: str, timeout: float = 60.0) -> list[Message]:
    """Every record of every partition up to its end (LSO for read_committed), in fetch order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "enable.partition.eof": True, "log_level": 0})
    try:
        parts = list(consumer.list_topics(topic, timeout=20).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        out: list[Message] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < len(parts):
            assert time.monotonic() < deadline, f"{topic}: only partitions {at_end} reached their end"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, err
                partition = msg.partition()
                assert partition is not None
                at_end.add(partition)
                continue
            out.append(msg)
        return out
    finally:
        consumer.close()


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw", "log_level": 0})
    try:
        parts = consumer.list_topics(topic, timeout=20).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1] for p in parts}
    finally:
        consumer.close()


def header(msg: Message, name: str) -> str:
    headers = msg.headers() or []
    assert isinstance(headers, list)  # librdkafka hands headers back as (key, bytes) pairs
    for key, value in headers:
        if key == name:
            assert isinstance(value, bytes)
            return value.decode()
    raise AssertionError(f"no header {name!r} in {msg.headers()}")


def check_ran(run: ClientRun) -> None:
    assert run.returncode == 0, run.describe()
    assert not run.ops("fatal"), run.describe()


def describe(run: ClientRun, *extra: str) -> str:
    """A run's output without the bulky per-record offsets."""
    lines = [{k: v for k, v in line.items() if k != "sent"} for line in run.lines]
    slim = ClientRun(run.args, run.returncode, lines, run.stderr)
    return "\n".join([slim.describe(), *extra])


# ---- scenario bodies (shared by the TV2 tests on both brokers and the TV1 strom tests) ---------

def check_commit_abort(bootstrap: str, java_client: JavaClient, tv2: bool) -> None:
    """N transactions of M records, every ABORT_EVERY-th aborted; read back exactly the rest."""
    topic = new_topic(bootstrap)
    run = java_client.run("txn", bootstrap, topic, str(N_TXNS), str(PER_TXN),
                          "--abort-every", str(ABORT_EVERY), "--value-bytes", str(VALUE_BYTES),
                          "--txn-id", f"tx-{topic}", timeout=300)
    check_ran(run)
    ctx = describe(run)
    txns = run.ops("txn")
    assert [t["txn"] for t in txns] == list(range(N_TXNS)), ctx
    aborted_txns = {t for t in range(N_TXNS) if (t + 1) % ABORT_EVERY == 0}
    for t in txns:
        assert t["ok"] is True and t["sendErrors"] == 0, ctx
        assert t["outcome"] == ("abort" if t["txn"] in aborted_txns else "commit"), ctx
    summary = run.one("txnSummary")
    assert summary["committed"] == N_TXNS - len(aborted_txns), ctx
    assert summary["aborted"] == len(aborted_txns) and summary["failed"] == 0, ctx
    assert summary["initTv2"] is tv2 and summary["tv2"] is tv2, ctx
    if tv2:
        # KIP-890: every EndTxn (commit or abort) returns the producer epoch + 1.
        assert [t["epoch"] for t in txns] == [summary["initEpoch"] + i + 1 for i in range(N_TXNS)], ctx
    else:
        assert {t["epoch"] for t in txns} == {summary["initEpoch"]}, ctx

    # Where each record went: j -> (partition, offset), from the send callbacks.
    placed: dict[int, tuple[int, int]] = {}
    txns_per_partition: dict[int, set[int]] = {}
    for t in txns:
        for r, (partition, offset) in enumerate(t["sent"]):
            placed[t["txn"] * PER_TXN + r] = (partition, offset)
            txns_per_partition.setdefault(partition, set()).add(t["txn"])
    assert len(set(placed.values())) == N_TXNS * PER_TXN, ctx

    committed = [j for j in range(N_TXNS * PER_TXN) if j // PER_TXN not in aborted_txns]
    got = read_all(bootstrap, topic, "read_committed")
    seqs = [int(header(m, "seq")) for m in got]
    assert Counter(seqs) == Counter(committed), ctx  # exactly the committed records, once each
    for m in got:
        j = int(header(m, "seq"))
        assert placed[j] == (m.partition(), m.offset()), (j, ctx)
        assert m.key() == f"key-{j}".encode() and header(m, "txn") == str(j // PER_TXN)
        assert len(m.value() or b"") == VALUE_BYTES
    for partition in range(PARTITIONS):
        in_partition = [int(header(m, "seq")) for m in got if m.partition() == partition]
        assert in_partition == sorted(in_partition), f"partition {partition} out of send order"

    # The aborted records are in the log too (read_uncommitted sees them), and every
    # transaction left one control marker in each partition it wrote to.
    everything = read_all(bootstrap, topic, "read_uncommitted")
    assert sorted(int(header(m, "seq")) for m in everything) == list(range(N_TXNS * PER_TXN))
    hw = high_watermarks(bootstrap, topic)
    for partition, written in txns_per_partition.items():
        records = sum(1 for p, _ in placed.values() if p == partition)
        assert hw[partition] == records + len(written), (partition, hw, ctx)


def produce_input(bootstrap: str, topic: str, n: int) -> None:
    # One record per batch, so the reader's small per-partition fetches interleave partitions.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "batch.num.messages": 1, "log_level": 0})
    for i in range(n):
        producer.produce(topic, key=f"key-{i}", value=f"in-{i}", partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def group_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


def check_read_process_write(bootstrap: str, java_client: JavaClient, tv2: bool) -> None:
    """Consume -> produce -> sendOffsetsToTransaction -> commit, with aborts (one of them last)."""
    n_input, n_txns, batch, abort_every = 300, 6, 20, 3
    source, sink = new_topic(bootstrap), new_topic(bootstrap)
    group = f"rpw-{uuid.uuid4().hex[:8]}"
    produce_input(bootstrap, source, n_input)
    run = java_client.run("rpw", bootstrap, source, sink, group, str(n_txns), "--batch", str(batch),
                          "--abort-every", str(abort_every), "--txn-id", f"rpw-{group}",
                          "--partition-fetch-bytes", "300", timeout=300)
    check_ran(run)
    ctx = describe(run)
    txns = run.ops("txn")
    assert [t["txn"] for t in txns] == list(range(n_txns)), ctx
    for t in txns:
        assert t["ok"] is True and t["records"] > 0, ctx
        assert t["outcome"] == ("abort" if (t["txn"] + 1) % abort_every == 0 else "commit"), ctx
        assert t["generation"] >= 1, ctx  # a subscribed member, so TxnOffsetCommit carries it
    summary = run.one("rpwSummary")
    assert summary["initTv2"] is tv2 and summary["tv2"] is tv2, ctx
    assert summary["committed"] == n_txns - n_txns // abort_every and summary["failed"] == 0, ctx

    # Positions after the committed transactions only. After an abort the loop rewinds to the
    # batch start, so committed positions only grow and the last committed one per partition wins.
    expected: dict[int, int] = {}
    for t in txns:
        if t["outcome"] == "commit":
            for p, pos in t["offsets"].items():
                expected[int(p)] = max(expected.get(int(p), 0), pos)
    last = txns[-1]
    assert last["outcome"] == "abort", ctx
    for p, (first, _) in last["input"].items():
        # The aborted last batch's offsets were sent but must not be the committed ones.
        assert expected.get(int(p), 0) <= first < last["offsets"][p], ctx
    committed = group_offsets(bootstrap, group, source)
    want = {p: expected.get(p, -1001) for p in range(PARTITIONS)}  # -1001: OFFSET_INVALID, none
    assert committed == want, (committed, want, ctx)
    seen_by_java = {int(p): -1001 if o is None else o for p, o in summary["groupOffsets"].items()}
    assert seen_by_java == {p: want[p] for p in seen_by_java}, ctx

    # The output holds each consumed input record of the committed transactions exactly once.
    out = read_all(bootstrap, sink, "read_committed")
    sources = Counter(header(m, "src") for m in out)
    assert sources == Counter(f"{p}:{o}" for p, end in expected.items() for o in range(end)), ctx
    assert len(out) == sum(t["records"] for t in txns if t["outcome"] == "commit"), ctx
    for m in out:
        p, o = (int(x) for x in header(m, "src").split(":"))
        i = o * PARTITIONS + p  # produce_input's round robin
        assert m.key() == f"key-{i}".encode() and m.value() == f"in-{i}".encode(), ctx
    uncommitted = read_all(bootstrap, sink, "read_uncommitted")
    assert len(uncommitted) == sum(t["records"] for t in txns), ctx


def check_zombie(bootstrap: str, java_client: JavaClient, tv2: bool) -> dict[str, Any]:
    """A second producer's initTransactions fences the first; returns the step lines by name."""
    topic = new_topic(bootstrap, partitions=1)
    run = java_client.run("zombie", bootstrap, topic, "--txn-id", f"zombie-{topic}", timeout=180)
    check_ran(run)
    ctx = describe(run)
    steps = {line["op"]: line for line in run.lines}
    for name in ("firstInit", "firstSend", "secondInit", "secondCommit"):
        assert steps[name]["ok"] is True, ctx
    first, second = steps["firstInit"], steps["secondInit"]
    assert first["tv2"] is tv2 and second["tv2"] is tv2, ctx
    assert second["producerId"] == first["producerId"] and second["epoch"] > first["epoch"], ctx
    for name in ZOMBIE_ERRORS:
        assert steps[name]["ok"] is False, ctx
    # Only the fencer's record is committed; the zombie's first record was aborted (its
    # transaction was ended by the fencing InitProducerId), its second was rejected.
    got = read_all(bootstrap, topic, "read_committed")
    assert [(m.key(), m.value()) for m in got] == [(b"fencer", b"fencer-0")], ctx
    everything = read_all(bootstrap, topic, "read_uncommitted")
    assert [m.value() for m in everything] == [b"zombie-0", b"fencer-0"], ctx
    return steps


def check_timeout_abort(bootstrap: str, java_client: JavaClient, tv2: bool) -> None:
    """The coordinator aborts timed-out transactions; the producers' next calls match Kafka's."""
    topic = new_topic(bootstrap, partitions=1)
    run = java_client.run("timeout", bootstrap, topic, "--txn-id", f"timeout-{topic}",
                          "--timeout-ms", "2000", timeout=180)
    check_ran(run)
    ctx = describe(run)
    steps = {line["op"]: line for line in run.lines}
    assert steps["init"]["ok"] and steps["send"]["ok"], ctx
    assert steps["init"]["aborter"]["tv2"] is tv2 and steps["init"]["committer"]["tv2"] is tv2, ctx
    assert steps["timedOut"]["ok"] is True, ctx  # both transactions ended without the clients
    assert steps["send"]["offsets"] == [0, 1] and steps["timedOut"]["lso"] == 4, ctx  # 2 records, 2 markers
    outcomes = {name: "ok" if steps[name]["ok"] else steps[name]["error"]
                for name in TIMEOUT_OUTCOMES[2 if tv2 else 1]}
    assert outcomes == TIMEOUT_OUTCOMES[2 if tv2 else 1], ctx
    start = steps["init"]["aborter"]["epoch"]
    if tv2:
        assert steps["abortAfterCommitFailed"]["cause"] == "InvalidTxnStateException", ctx
        # The abort adopted the epoch the timeout abort bumped to; the commit bumped again.
        assert steps["abortAfterTimeout"]["epoch"] == start + 1 and steps["nextTxn"]["epoch"] == start + 2, ctx
    committed = [(m.key(), m.value()) for m in read_all(bootstrap, topic, "read_committed")]
    assert committed == ([(b"aborter", b"a-1")] if tv2 else []), ctx
    everything = [m.value() for m in read_all(bootstrap, topic, "read_uncommitted")]
    assert everything == [b"a-0", b"c-0", *([b"a-1"] if tv2 else [])], ctx


# ---- tests on both brokers (transaction.version=2) ---------------------------------------------

def test_commit_and_abort(any_broker: HasBootstrap, java_client: JavaClient) -> None:
    check_commit_abort(any_broker.bootstrap, java_client, tv2=True)


def test_read_process_write(any_broker: HasBootstrap, java_client: JavaClient) -> None:
    check_read_process_write(any_broker.bootstrap, java_client, tv2=True)


def test_zombie_fencing(any_broker: HasBootstrap, java_client: JavaClient) -> None:
    steps = check_zombie(any_broker.bootstrap, java_client, tv2=True)
    errors = {name: steps[name]["error"] for name in ZOMBIE_ERRORS}
    assert errors == ZOMBIE_ERRORS, steps


def test_timeout_abort(any_broker: HasBootstrap, java_client: JavaClient) -> None:
    check_timeout_abort(any_broker.bootstrap, java_client, tv2=True)


# ---- both brokers formatted with transaction.version=1 ------------------------------------------



@pytest.fixture(scope="module", params=["strom", "kafka"])
def tv1_broker(request: pytest.FixtureRequest,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[HasBootstrap]:
    """A broker of the module's own whose cluster was formatted with transaction.version=1."""
    data: Path = tmp_path_factory.mktemp(f"{request.param}-tv1")
    if request.param == "strom":
        with BrokerProcess(data, features=TV1) as proc:
            yield proc
        return
    skip_without_java()
    ref = KafkaRef(features=TV1, data_dir=data, config=SHARED_BROKER_CONFIG)
    try:
        yield ref.start()
    finally:
        ref.close()


def test_tv1_commit_and_abort(tv1_broker: HasBootstrap, java_client: JavaClient) -> None:
    check_commit_abort(tv1_broker.bootstrap, java_client, tv2=False)


def test_tv1_read_process_write(tv1_broker: HasBootstrap, java_client: JavaClient) -> None:
    check_read_process_write(tv1_broker.bootstrap, java_client, tv2=False)


def test_tv1_zombie_fencing(tv1_broker: HasBootstrap, java_client: JavaClient) -> None:
    steps = check_zombie(tv1_broker.bootstrap, java_client, tv2=False)
    errors = {name: steps[name]["error"] for name in ZOMBIE_ERRORS}
    assert errors == ZOMBIE_ERRORS, steps


def test_tv1_timeout_abort(tv1_broker: HasBootstrap, java_client: JavaClient) -> None:
    check_timeout_abort(tv1_broker.bootstrap, java_client, tv2=False)


# ---- kill -9 with a transaction open -----------------------------------------------------------

class Crashable(Protocol):
    bootstrap: str

    def kill(self) -> None: ...

    def start(self) -> Any: ...

    def log_text(self) -> str: ...


@pytest.fixture(params=["strom", "kafka"])
def crash_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Crashable]:
    """A broker of the test's own (default features), to kill -9 and start again."""
    broker: BrokerProcess | KafkaRef
    if request.param == "strom":
        broker = BrokerProcess(tmp_path / "strom")
    else:
        skip_without_java()
        broker = KafkaRef(tmp_path / "kafka", config=SHARED_BROKER_CONFIG)
    try:
        yield broker.start()
    finally:
        broker.kill()


def test_crash_with_open_transaction(crash_broker: Crashable, java_client: JavaClient) -> None:
    """Broker killed while a transaction is open: after restart the committed data is intact,
    the open transaction stays invisible, and a new producer with the transactional.id aborts
    it (InitProducerId) and commits its own."""
    n_txns, per_txn, open_records = 4, 20, 15
    bootstrap = crash_broker.bootstrap
    topic = new_topic(bootstrap)
    txn_id = f"crash-{topic}"
    first = java_client.run("txn", bootstrap, topic, str(n_txns), str(per_txn), "--abort-every", "2",
                            "--txn-id", txn_id, "--leave-open", str(open_records), timeout=180)
    check_ran(first)
    ctx = describe(first)
    assert all(t["ok"] for t in first.ops("txn")), ctx
    assert first.one("leftOpen")["records"] == open_records, ctx
    committed = [t["txn"] * per_txn + r for t in first.ops("txn") if t["outcome"] == "commit"
                 for r in range(per_txn)]
    opened = list(range(n_txns * per_txn, n_txns * per_txn + open_records))

    def committed_seqs() -> list[int]:
        return sorted(int(header(m, "seq")) for m in read_all(bootstrap, topic, "read_committed"))

    assert committed_seqs() == committed, ctx
    crash_broker.kill()
    crash_broker.start()
    after = f"{ctx}\nbroker log tail:\n" + "\n".join(crash_broker.log_text().splitlines()[-60:])
    # Recovered: the open transaction still holds back read_committed readers.
    assert committed_seqs() == committed, after
    second = java_client.run("txn", bootstrap, topic, "1", str(per_txn), "--txn-id", txn_id,
                             "--first-txn", str(n_txns + 1), timeout=180)
    check_ran(second)
    assert [t["ok"] for t in second.ops("txn")] == [True], describe(second, after)
    # Kafka 4.3.1 (TV2): the fencing InitProducerId bumps the epoch once to abort the open
    # transaction and once more for the new producer; the producer id stays.
    before, init = first.one("txnSummary"), second.one("init")
    assert (init["producerId"], init["epoch"]) == (before["producerId"], before["epoch"] + 2), \
        describe(second, after)
    new = list(range((n_txns + 1) * per_txn, (n_txns + 2) * per_txn))
    assert committed_seqs() == committed + new, describe(second, after)
    everything = sorted(int(header(m, "seq")) for m in read_all(bootstrap, topic, "read_uncommitted"))
    assert everything == list(range(n_txns * per_txn)) + opened + new, describe(second, after)
