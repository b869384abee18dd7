# mypy: disable-error-code="arg-type,union-attr"
# (kio types fields with phantom NewTypes - i32, TopicName, ProducerId - and loads response
# types as unions; plain ints/strs are what they are at run time, so only the checker objects.)
"""Differential: DescribeProducers (61) and WriteTxnMarkers (27) of strom against Apache Kafka 4.3.1.

These two APIs carry Kafka's hanging-transaction tooling (KIP-664: ``kafka-transactions.sh
describe-producers / find-hanging / abort``, ``Admin.describeProducers/abortTransaction``).

One scenario runs on each broker over raw requests (diff_wire): an idempotent producer writes a
batch; a transactional producer commits one transaction (EndTxn v5 bumps its epoch) and leaves a
second one open. DescribeProducers must then list both producers with their epoch, last
sequence, last timestamp, coordinator epoch and the open transaction's first offset (-1 for the
idempotent one). WriteTxnMarkers is sent the way ``Admin.abortTransaction`` sends it: a marker
with a stale producer epoch or coordinator epoch is refused, one for a topic or partition that
does not exist answers UNKNOWN_TOPIC_OR_PARTITION, and the right one aborts the open
transaction: the last stable offset reaches the high watermark, a read_committed fetch lists the
transaction as aborted and hides its records, and DescribeProducers shows no open transaction.
Garbage requests (no markers, a marker without partitions, one producer id in two markers,
illegal topic names, partitions that do not exist) are compared too.

Answers are reduced to what must agree: error names and messages, producer ids by role (the
clusters allocate different ids), epochs relative to InitProducerId's, offsets, timestamps as
"the batch's" or "the broker's clock". Each observation is its own test case; Kafka's answers in
``KAFKA_EXPECTED`` are checked against KIP-664 too, so a harness mistake cannot make a case vacuous.

The last test drives Kafka's own ``kafka-transactions.sh`` (``org.apache.kafka.tools.
TransactionsCommand`` from the reference's kafka-tools jar) against strom.
"""

from __future__ import annotations

import os
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from diff_wire import WireClient, assert_case_matches, kio_schema, visible
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka_ref import KafkaRef, classpath, ensure_jars
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.errors import ErrorCode
from ref_fixtures import HasBootstrap, needs_tools

from strom.core.testing import BrokerProcess

RUN = uuid.uuid4().hex[:8]
TXN_TIMEOUT_MS = 900_000  # the open transaction must outlive the scenario: no coordinator abort
GARBAGE_PID = 987_654_321  # a producer id neither cluster has handed out in a test session
Seen = dict[str, Any]


def name(code: int) -> str:
    return ErrorCode(int(code)).name


def batch(values: list[bytes], pid: int, epoch: int, seq: int, ts: int, transactional: bool) -> bytes:
    """A RecordBatch v2 with a fixed create time ``ts`` (DescribeProducers reports it back)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                        batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=ts, key=None, value=value, headers=[])
    return bytes(builder.build())


class Scenario:
    """Reduces broker-specific values: producer ids to roles, epochs relative, timestamps to kinds."""

    def __init__(self, c: WireClient, batch_ts: int) -> None:
        self.c = c
        self.batch_ts = batch_ts
        self.started_ms = int(time.time() * 1000)
        self.roles: dict[int, str] = {GARBAGE_PID: "X"}
        self.epochs: dict[int, int] = {GARBAGE_PID: 0}

    def pid(self, pid: int) -> str:
        return self.roles.get(pid, "other")

    def epoch(self, pid: int, epoch: int) -> str:
        return f"E{epoch - self.epochs.get(pid, 0):+d}"

    def timestamp(self, ts: int) -> str | int:
        if ts == self.batch_ts:
            return "batch"
        if self.started_ms - 5_000 <= ts <= int(time.time() * 1000) + 5_000:
            return "broker clock"
        return ts

    # -- DescribeProducers --------------------------------------------------------------------

    def describe_producers(self, topics: dict[str, list[int]]) -> list[Any]:
        resp = self.c.request(DescribeProducersRequest(topics=tuple(
            TopicRequest(name=t, partition_indexes=tuple(ps)) for t, ps in topics.items())))
        return [(t.name, [(int(p.partition_index), name(p.error_code), p.error_message,
                           sorted((self.pid(s.producer_id), self.epoch(s.producer_id, s.producer_epoch),
                                   int(s.last_sequence), self.timestamp(int(s.last_timestamp)),
                                   int(s.coordinator_epoch), int(s.current_txn_start_offset))
                                  for s in p.active_producers))
                          for p in t.partitions])
                for t in resp.topics]

    def raw_producer(self, topic: str, partition: int, pid: int) -> Any:
        resp = self.c.request(DescribeProducersRequest(topics=(TopicRequest(name=topic, partition_indexes=(partition,)),)))
        [state] = [s for s in resp.topics[0].partitions[0].active_producers if s.producer_id == pid]
        return state

    # -- WriteTxnMarkers ----------------------------------------------------------------------

    def write_markers(self, markers: list[tuple[int, int, bool, int, dict[str, list[int]]]],
                      version: int = 2, transaction_version: int = 0) -> list[Any]:
        """``(producer id, epoch, commit, coordinator epoch, {topic: partitions})`` per marker;
        the answer as (producer role, sorted (topic, partition, error))."""
        m = kio_schema("write_txn_markers", version)
        extra: dict[str, Any] = {"transaction_version": transaction_version} if version >= 2 else {}
        resp = self.c.request(m.WriteTxnMarkersRequest(markers=tuple(
            m.WritableTxnMarker(producer_id=pid, producer_epoch=epoch, transaction_result=commit,
                                coordinator_epoch=coord, **extra,
                                topics=tuple(m.WritableTxnMarkerTopic(name=t, partition_indexes=tuple(ps))
                                             for t, ps in parts.items()))
            for pid, epoch, commit, coord, parts in markers)))
        return sorted((self.pid(r.producer_id), sorted((t.name, int(p.partition_index), name(p.error_code))
                                                        for t in r.topics for p in t.partitions))
                      for r in resp.markers)

    # -- the log --------------------------------------------------------------------------------

    def offsets(self, topic: str) -> tuple[int, int]:
        """(high watermark, last stable offset) of partition 0."""
        return self.c.list_offset(topic, 0, 0), self.c.list_offset(topic, 0, 1)

    def log(self, topic: str, isolation: int) -> dict[str, Any]:
        fetched = self.c.fetch_log(topic, 0, isolation)
        batches = []
        for b in fetched["batches"]:
            values: list[Any] = list(b["values"])
            if b["control"]:  # control record key: version int16, type int16 (0 abort, 1 commit)
                values = [{0: "ABORT", 1: "COMMIT"}.get(struct.unpack(">hh", bytes(k))[1], k) for k in values]
            batches.append((b["base_offset"], "control" if b["control"] else "data", b["transactional"],
                            self.pid(b["producer_id"]), self.epoch(b["producer_id"], b["producer_epoch"]),
                            b["base_sequence"], values))
        return {"error": name(fetched["error_code"]), "high_watermark": fetched["high_watermark"],
                "last_stable_offset": fetched["last_stable_offset"],
                "aborted": [(self.pid(p), o) for p, o in fetched["aborted"]],
                "batches": batches, "read_committed_sees": visible(fetched)}


def produce(c: WireClient, tid: str | None, topic: str, records: bytes) -> str:
    """Produce v12 to partition 0, retried while a fresh topic's leader settles."""
    deadline = time.monotonic() + 15
    while True:
        code = c.produce_batches({(topic, 0): records}, 12, tid)[(topic, 0)]
        if name(code) not in ("not_leader_or_follower", "unknown_topic_or_partition", "not_enough_replicas",
                              "concurrent_transactions") or time.monotonic() > deadline:
            return name(code)
        time.sleep(0.2)


def wait_txn_state(c: WireClient, tid: str, state: str) -> str:
    return str(c.wait_txn_state(tid, (state,))["transaction_state"])


# -- the scenario --------------------------------------------------------------------------------

def observe(bootstrap: str) -> Seen:
    seen: Seen = {"crashed": []}
    try:
        with WireClient(bootstrap) as c:
            scenario(c, seen)
    except Exception as exc:  # recorded, and reported by test_no_scenario_crashed
        seen["crashed"].append(repr(exc))
    return seen


def scenario(c: WireClient, seen: Seen) -> None:
    topic, garbage, tid = f"tooling-{RUN}", f"tooling-garbage-{RUN}", f"tooling-txn-{RUN}"
    ts = int(time.time() * 1000) - 60_000  # a create time no broker clock produces
    s = Scenario(c, ts)
    c.create_topic(topic, 1)
    c.create_topic(garbage, 2)

    # An idempotent producer: offsets 0..2.
    code, ipid, iepoch = c.init_producer_id(None)
    s.roles[ipid], s.epochs[ipid] = "I", iepoch
    seen["idempotent_init"] = name(code)
    seen["idempotent_produce"] = produce(c, None, topic, batch([b"i0", b"i1", b"i2"], ipid, iepoch, 0, ts, False))

    # A transactional producer commits offsets 3..4 (marker at 5; EndTxn v5 bumps the epoch) ...
    c.wait_for_coordinator(tid, key_type=1)
    code, pid, epoch = c.init_producer_id(tid, TXN_TIMEOUT_MS)
    s.roles[pid], s.epochs[pid] = "P", epoch
    seen["txn_init"] = name(code)
    seen["txn1_produce"] = produce(c, tid, topic, batch([b"c0", b"c1"], pid, epoch, 0, ts, True))
    seen["describe_producers_txn1_open"] = s.describe_producers({topic: [0]})
    code, _, epoch1 = c.end_txn(tid, pid, epoch, commit=True, retry_concurrent=True)
    seen["txn1_commit"] = (name(code), s.epoch(pid, epoch1))
    seen["txn1_state"] = wait_txn_state(c, tid, "CompleteCommit")
    seen["describe_producers_txn1_committed"] = s.describe_producers({topic: [0]})
    # ... and leaves offsets 6..8 open.
    seen["txn2_produce"] = produce(c, tid, topic, batch([b"h0", b"h1", b"h2"], pid, epoch1, 0, ts, True))
    seen["describe_producers_txn2_open"] = s.describe_producers({topic: [0]})
    seen["offsets_txn2_open"] = s.offsets(topic)
    seen["log_txn2_open_read_committed"] = s.log(topic, 1)

    # DescribeProducers errors.
    seen["describe_producers_errors"] = s.describe_producers({
        f"tooling-nosuch-{RUN}": [0, 1], topic: [0, 7, -1], "bad name!": [0], "": [0], "..": [1],
        "t" * 250: [0], garbage: []})

    # WriteTxnMarkers refused: stale producer epoch, stale coordinator epoch, unknown partitions.
    coord = int(s.raw_producer(topic, 0, pid).coordinator_epoch)
    seen["coordinator_epoch_known"] = coord >= 0
    seen["marker_stale_producer_epoch"] = s.write_markers([(pid, epoch1 - 1, False, coord, {topic: [0]})])
    seen["marker_stale_coordinator_epoch"] = s.write_markers([(pid, epoch1, False, coord - 1, {topic: [0]})])
    seen["marker_unknown_partitions_v1"] = s.write_markers(
        [(pid, epoch1, False, coord, {f"tooling-nosuch-{RUN}": [0], topic: [5]})], version=1)
    # A TV2 marker carries the epoch EndTxn bumped: one at the current epoch with a transaction
    # open is stale (KIP-890).
    seen["marker_tv2_current_epoch_txn_open"] = s.write_markers([(pid, epoch1, False, coord, {topic: [0]})],
                                                                transaction_version=2)
    seen["offsets_after_refused_markers"] = s.offsets(topic)
    seen["describe_producers_after_refused_markers"] = s.describe_producers({topic: [0]})

    # Garbage that is answered, not refused.
    seen["markers_none"] = s.write_markers([])
    seen["marker_without_partitions"] = s.write_markers([(GARBAGE_PID, 0, False, 0, {})])
    seen["markers_same_pid_twice"] = s.write_markers([(GARBAGE_PID, 0, False, 3, {garbage: [0]}),
                                                      (GARBAGE_PID, 0, True, 3, {garbage: [1], topic: [9]})])
    seen["describe_producers_garbage_markers"] = s.describe_producers({garbage: [0, 1]})
    seen["log_garbage_markers"] = s.log(garbage, 0)

    # Admin.abortTransaction: ABORT at the producer's epoch and coordinator epoch (v2, TV0).
    seen["marker_abort"] = s.write_markers([(pid, epoch1, False, coord, {topic: [0]})])
    seen["offsets_after_abort"] = s.offsets(topic)
    seen["describe_producers_after_abort"] = s.describe_producers({topic: [0]})
    seen["log_after_abort_read_committed"] = s.log(topic, 1)
    seen["log_after_abort_read_uncommitted"] = s.log(topic, 0)
    # The same marker again: no transaction is open, Kafka writes it anyway.
    seen["marker_abort_retry"] = s.write_markers([(pid, epoch1, False, coord, {topic: [0]})])
    seen["offsets_after_abort_retry"] = s.offsets(topic)


# -- tests -------------------------------------------------------------------------------------

N = "none"
UTP = "unknown_topic_or_partition"
UTP_MSG = "This server does not host this topic-partition."

# KIP-664 and Kafka's handlers document these; the reference must give them, otherwise the
# comparison with strom would prove nothing.
KAFKA_EXPECTED: dict[str, Any] = {
    "describe_producers_txn2_open": [(f"tooling-{RUN}", [(0, N, None, [
        ("I", "E+0", 2, "batch", -1, -1), ("P", "E+1", 2, "batch", 0, 6)])])],
    "offsets_txn2_open": (9, 6),
    "marker_stale_producer_epoch": [("P", [(f"tooling-{RUN}", 0, "invalid_producer_epoch")])],
    "marker_stale_coordinator_epoch": [("P", [(f"tooling-{RUN}", 0, "transaction_coordinator_fenced")])],
    "marker_unknown_partitions_v1": [("P", [(f"tooling-{RUN}", 5, UTP), (f"tooling-nosuch-{RUN}", 0, UTP)])],
    "marker_tv2_current_epoch_txn_open": [("P", [(f"tooling-{RUN}", 0, "invalid_producer_epoch")])],
    "markers_none": [],
    "marker_abort": [("P", [(f"tooling-{RUN}", 0, N)])],
    "offsets_after_abort": (10, 10),
    "describe_producers_after_abort": [(f"tooling-{RUN}", [(0, N, None, [
        ("I", "E+0", 2, "batch", -1, -1), ("P", "E+1", 2, "broker clock", 0, -1)])])],
}


@pytest.fixture(scope="module")
def observations(strom: HasBootstrap, kafka: KafkaRef) -> Iterator[tuple[Seen, Seen]]:
    theirs = observe(kafka.bootstrap)
    ours = observe(strom.bootstrap)
    yield ours, theirs


CASES = [
    "idempotent_init", "idempotent_produce", "txn_init", "txn1_produce", "describe_producers_txn1_open",
    "txn1_commit", "txn1_state", "describe_producers_txn1_committed", "txn2_produce",
    "describe_producers_txn2_open", "offsets_txn2_open", "log_txn2_open_read_committed",
    "describe_producers_errors", "coordinator_epoch_known", "marker_stale_producer_epoch",
    "marker_stale_coordinator_epoch", "marker_unknown_partitions_v1", "marker_tv2_current_epoch_txn_open", "offsets_after_refused_markers",
    "describe_producers_after_refused_markers", "markers_none", "marker_without_partitions",
    "markers_same_pid_twice", "describe_producers_garbage_markers", "log_garbage_markers", "marker_abort",
    "offsets_after_abort", "describe_producers_after_abort", "log_after_abort_read_committed",
    "log_after_abort_read_uncommitted", "marker_abort_retry", "offsets_after_abort_retry",
]


@pytest.mark.parametrize("case", CASES)
def test_matches_kafka(case: str, observations: tuple[Seen, Seen]) -> None:
    ours, theirs = observations
    assert_case_matches(case, ours, theirs, KAFKA_EXPECTED)


@pytest.mark.parametrize("broker", ["strom", "kafka"])
def test_no_scenario_crashed(broker: str, observations: tuple[Seen, Seen]) -> None:
    ours, theirs = observations
    assert (ours if broker == "strom" else theirs)["crashed"] == []


def test_every_observation_is_a_case(observations: tuple[Seen, Seen]) -> None:
    ours, theirs = observations
    assert set(theirs) - {"crashed"} == set(CASES)
    assert set(ours) - {"crashed"} <= set(CASES)


# -- Kafka's own tool: kafka-transactions.sh against strom ----------------------------------------

def kafka_transactions(jar: Path, bootstrap: str, *args: str) -> list[dict[str, str]]:
    """Run ``kafka-transactions.sh --bootstrap-server B args...``; its table as one dict per row."""
    cmd = ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp",
           f"{classpath(ensure_jars())}{os.pathsep}{jar}", "org.apache.kafka.tools.TransactionsCommand",
           "--bootstrap-server", bootstrap, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    lines = [line for line in proc.stdout.splitlines() if "\t" in line]
    if not lines:
        return []
    header = [h.strip() for h in lines[0].split("\t") if h.strip()]
    return [dict(zip(header, (v.strip() for v in line.split("\t")), strict=False)) for line in lines[1:]]


@pytest.mark.parametrize("kind", ["strom", "kafka"])
def test_kafka_transactions_tool_finds_and_aborts_a_hanging_transaction(kind: str, tmp_path: Path) -> None:
    """describe-producers, find-hanging and abort of Kafka 4.3.1's kafka-transactions.sh against
    strom, and against a Kafka node set up the same way (so the expectations are Kafka's own).

    A hanging transaction is transactional data in a partition its coordinator does not know
    about (KAFKA-12671). Partition verification (KIP-890) prevents that, so this broker runs with
    ``transaction.partition.verification.enable=false`` and the producer writes with Produce v11
    without AddPartitionsToTxn: the coordinator keeps the id Empty while the partition holds an
    open transaction that nothing will ever end, with a timestamp an hour old.
    """
    jar = needs_tools()
    topic, tid = f"hanging-{RUN}", f"hanging-txn-{RUN}"
    now = int(time.time() * 1000)
    old = now - 3_600_000
    config = {"transaction.partition.verification.enable": "false"}
    broker: Any = (BrokerProcess(tmp_path / "strom", config=config) if kind == "strom"
                   else KafkaRef(tmp_path / "kafka", config=config))
    with broker, WireClient(broker.bootstrap) as c:
        pid, epoch = hanging_transaction(c, topic, tid, old, idempotent_ts=now)
        node_id = int(c.metadata(None).brokers[0].node_id)
        assert c.describe_transactions((tid,))[0]["transaction_state"] == "Empty"
        assert (c.list_offset(topic, 0, 0), c.list_offset(topic, 0, 1)) == (4, 2)

        producers = {int(r["ProducerId"]): r for r in
                     kafka_transactions(jar, broker.bootstrap, "describe-producers", "--topic", topic, "--partition", "0")}
        [ipid] = set(producers) - {pid}
        assert (producers[pid]["ProducerEpoch"], producers[pid]["LastSequence"], producers[pid]["LastTimestamp"],
                producers[pid]["CurrentTransactionStartOffset"]) == (str(epoch), "1", str(old), "2")
        assert (producers[ipid]["LastSequence"], producers[ipid]["LastTimestamp"],
                producers[ipid]["CurrentTransactionStartOffset"]) == ("1", str(now), "None")

        hanging = kafka_transactions(jar, broker.bootstrap, "find-hanging", "--broker-id", str(node_id))
        assert [(r["Topic"], r["Partition"], r["ProducerId"], r["StartOffset"]) for r in hanging] == \
            [(topic, "0", str(pid), "2")]

        assert kafka_transactions(jar, broker.bootstrap, "abort", "--topic", topic, "--partition", "0",
                                  "--start-offset", "2") == []
        # The marker went in at offset 4: the transaction is aborted and the partition stable.
        assert (c.list_offset(topic, 0, 0), c.list_offset(topic, 0, 1)) == (5, 5)
        fetched = c.fetch_log(topic, 0, 1)
        assert fetched["aborted"] == [(pid, 2)]
        assert visible(fetched) == [b"i0", b"i1"]
        after = {int(r["ProducerId"]): r for r in
                 kafka_transactions(jar, broker.bootstrap, "describe-producers", "--topic", topic, "--partition", "0")}
        assert after[pid]["CurrentTransactionStartOffset"] == "None"
        assert kafka_transactions(jar, broker.bootstrap, "find-hanging", "--broker-id", str(node_id)) == []


# -- authorization (strom only: the reference runs without an authorizer) -----------------------

# A third-party authorizer plugin, loaded by the broker through STROM_PLUGINS: it denies by
# client id, so one connection per role is enough (no SASL needed).
DENYING_AUTHORIZER = '''
from strom.plugins.hookspecs.authorizers import AclOperation, AuthorizationResult, ResourceType
from strom.plugins.markers import hookimpl

DENIED = {
    "no-read": {(AclOperation.READ, ResourceType.TOPIC)},
    "no-cluster": {(AclOperation.ALTER, ResourceType.CLUSTER), (AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)},
    "no-alter": {(AclOperation.ALTER, ResourceType.CLUSTER)},
}


class DenyByClientId:
    def __init__(self, config=None):
        pass

    def authorize(self, ctx, actions):
        denied = DENIED.get(ctx.client_id, set())
        return [AuthorizationResult.DENIED if (a.operation, a.resource.resource_type) in denied
                else AuthorizationResult.ALLOWED for a in actions]


@hookimpl
def strom_authorizers():
    return {"deny-by-client-id": DenyByClientId}
'''


def test_authorization(tmp_path: Path) -> None:
    """Kafka's checks: DescribeProducers needs READ on the topic (asked after the name check,
    before the existence check); WriteTxnMarkers needs ALTER or else CLUSTER_ACTION on the
    cluster, and without both every partition of every marker answers CLUSTER_AUTHORIZATION_FAILED
    (one entry per producer id, even for a marker without partitions) and nothing is written."""
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir()
    (plugin_dir / "txn_tooling_authorizer.py").write_text(DENYING_AUTHORIZER)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(plugin_dir), os.environ.get("PYTHONPATH")])),
           "STROM_PLUGINS": "txn_tooling_authorizer"}
    topic = f"authz-{RUN}"
    with BrokerProcess(tmp_path / "strom", config={"authorizer.class.name": "deny-by-client-id"}, env=env) as broker:
        with WireClient(broker.bootstrap) as c:
            c.create_topic(topic, 1)
            _, ipid, iepoch = c.init_producer_id(None)
            assert produce(c, None, topic, batch([b"a"], ipid, iepoch, 0, int(time.time() * 1000), False)) == "none"
        with WireClient(broker.bootstrap, client_id="no-read") as c:
            s = Scenario(c, 0)
            assert s.describe_producers({topic: [0], f"authz-nosuch-{RUN}": [0], "bad name!": [0]}) == [
                (topic, [(0, "topic_authorization_failed", "Topic authorization failed.", [])]),
                (f"authz-nosuch-{RUN}", [(0, "topic_authorization_failed", "Topic authorization failed.", [])]),
                ("bad name!", [(0, "invalid_topic_exception", "Topic name is invalid: 'bad name!' contains one or "
                                "more characters other than ASCII alphanumerics, '.', '_' and '-'", [])])]
        with WireClient(broker.bootstrap, client_id="no-cluster") as c:
            s = Scenario(c, 0)
            s.roles[ipid] = "I"
            assert s.write_markers([(ipid, iepoch, False, 0, {topic: [0], f"authz-nosuch-{RUN}": [1]}),
                                    (GARBAGE_PID, 0, True, 0, {})]) == [
                ("I", [(topic, 0, "cluster_authorization_failed"),
                       (f"authz-nosuch-{RUN}", 1, "cluster_authorization_failed")]),
                ("X", [])]
            assert s.offsets(topic) == (1, 1)  # nothing written
        with WireClient(broker.bootstrap, client_id="no-alter") as c:
            s = Scenario(c, 0)
            s.roles[ipid] = "I"
            assert s.write_markers([(ipid, iepoch, False, 0, {topic: [0]})]) == [("I", [(topic, 0, "none")])]
            assert s.offsets(topic) == (2, 2)  # CLUSTER_ACTION is enough: the marker is in


# -- faults (strom only) --------------------------------------------------------------------------

def hanging_transaction(c: WireClient, topic: str, tid: str, ts: int,
                        idempotent_ts: int | None = None) -> tuple[int, int]:
    """An idempotent batch at offsets 0..1 of ``topic``-0, then data of an open transaction at
    2..3 that its coordinator does not know about (Produce v11 without AddPartitionsToTxn: needs
    ``transaction.partition.verification.enable=false``), both with create time ``ts`` unless
    ``idempotent_ts`` is given; returns the transactional producer's (pid, epoch)."""
    c.create_topic(topic, 1)
    _, ipid, iepoch = c.init_producer_id(None)
    its = ts if idempotent_ts is None else idempotent_ts
    assert produce(c, None, topic, batch([b"i0", b"i1"], ipid, iepoch, 0, its, False)) == "none"
    c.wait_for_coordinator(tid, key_type=1)
    code, pid, epoch = c.init_producer_id(tid, TXN_TIMEOUT_MS)
    assert code == 0
    assert c.produce_batches({(topic, 0): batch([b"h0", b"h1"], pid, epoch, 0, ts, True)}, 11, tid) == {(topic, 0): 0}
    return pid, epoch


def test_producer_state_and_abort_survive_kill9(tmp_path: Path) -> None:
    """SIGKILL with a transaction open: after recovery DescribeProducers still lists it with the
    same fields, so the tooling can find it; abort it, SIGKILL again: it stays aborted."""
    topic, tid = f"kill9-{RUN}", f"kill9-txn-{RUN}"
    ts = int(time.time() * 1000) - 600_000
    broker = BrokerProcess(tmp_path / "strom", config={"transaction.partition.verification.enable": "false"})
    with broker:
        with WireClient(broker.bootstrap) as c:
            pid, epoch = hanging_transaction(c, topic, tid, ts)
            before = Scenario(c, ts)
            before.roles[pid], before.epochs[pid] = "P", epoch
            described = before.describe_producers({topic: [0]})
            coord = int(before.raw_producer(topic, 0, pid).coordinator_epoch)
        assert [p for p in described[0][1][0][3] if p[0] == "P"] == [("P", "E+0", 1, "batch", -1, 2)]
        broker.kill()
        broker.start()
        with WireClient(broker.bootstrap) as c:
            s = Scenario(c, ts)
            s.roles[pid], s.epochs[pid] = "P", epoch
            assert s.describe_producers({topic: [0]}) == described
            assert s.offsets(topic) == (4, 2)
            assert s.write_markers([(pid, epoch, False, max(coord, 0), {topic: [0]})]) == [("P", [(topic, 0, "none")])]
            assert s.offsets(topic) == (5, 5)
        broker.kill()
        broker.start()
        with WireClient(broker.bootstrap) as c:
            s = Scenario(c, ts)
            s.roles[pid], s.epochs[pid] = "P", epoch
            [(_, [(_, error, _, producers)])] = s.describe_producers({topic: [0]})
            assert error == "none"
            assert [p for p in producers if p[0] == "P"] == [("P", "E+0", 1, "broker clock", max(coord, 0), -1)]
            assert s.offsets(topic) == (5, 5)
            fetched = c.fetch_log(topic, 0, 1)
            assert fetched["aborted"] == [(pid, 2)]
            assert visible(fetched) == [b"i0", b"i1"]


def test_malformed_requests_close_only_their_connection(strom: HasBootstrap) -> None:
    """A WriteTxnMarkers / DescribeProducers body cut short or full of garbage: the broker drops
    that connection (it cannot tell where the next request starts) and keeps serving."""
    good = DescribeProducersRequest(topics=(TopicRequest(name=f"tooling-{RUN}", partition_indexes=(0,)),))
    for api_key, version, body in [(27, 2, b"\x02\x00\x00\x00"), (27, 1, b"\xff" * 40), (61, 0, b"\x05\x03ab")]:
        with WireClient(strom.bootstrap) as c, pytest.raises((ConnectionError, OSError)):
            c.send_raw(api_key, version, body, flexible=True)
    with WireClient(strom.bootstrap) as c:
        assert len(c.request(good).topics) == 1
