# mypy: disable-error-code="arg-type,union-attr"
# (kio types fields with phantom NewTypes - i32, TopicName, i32Timedelta - and loads response
# types as unions; plain ints/strs are what they are at run time, so only the checker objects.)
"""Differential: Produce v13 (topic ids, KIP-516) and Fetch v18 of strom against Apache Kafka 4.3.1.

Every scenario runs on both brokers in the same test over raw requests (diff_wire's socket
client, kio's encoder and decoder, kafka-python's record builder), so no client library decides
anything. Produce v13 names topics by id: the happy path, an unknown id, the zero id, a known id
with a partition that does not exist, the id of a deleted topic, a request mixing known and
unknown ids, and a TV2 transactional Produce v13 (the partition added to the transaction by the
leader) that commits. Fetch v18 (request partitions carry the tagged ``high_watermark``) then
reads what was written. Answers are reduced to what must agree on both brokers - topic ids
become the names of the scenario's topics, producer ids are relative to InitProducerId - and
compared field by field; the batches read back are compared byte for byte. Produce and Fetch
v12 by name (an empty or unknown name, a missing partition) are compared too, since the v13
work touched the shared code. ``STROM_DIFF_SUBJECT=kafka`` runs the comparisons Kafka against Kafka.

strom only: the name behind a topic id is what gets authorized (the repo's DenyTopics test
plugin refuses WRITE on ``denied-*`` topics). The hand-written encoders' v13 (Produce) and v18 (Fetch) frames are also checked byte for byte
against kio's writer here (tests/broker covers the older versions).
"""

from __future__ import annotations

import struct
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from diff_wire import WireClient, build_batch, build_txn_batch, kio_schema
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords
from kio.schema.errors import ErrorCode
from ref_fixtures import HasBootstrap

from strom.core.protocol import codec
from strom.core.protocol.fetch_response import PartitionRow, TopicRows, encode_fetch_response
from strom.core.protocol.messages import response_messages
from strom.core.protocol.produce_response import PartitionResult, TopicResults, encode_produce_response
from strom.core.server.handlers import fetch, produce
from strom.core.testing import BrokerProcess

RUN = uuid.uuid4().hex[:8]
ZERO = uuid.UUID(int=0)
TS = 1_700_000_000_000  # a fixed CreateTime, so the batches read back are byte-comparable


def name(code: int) -> str:
    return ErrorCode(int(code)).name


# -- wire helpers (Produce v13 / Fetch v18 / Metadata / DeleteTopics) -------------------------------


def topic_id(c: WireClient, topic: str) -> uuid.UUID:
    meta = c.metadata([topic])
    tid = meta.topics[0].topic_id
    assert tid is not None and tid != ZERO, meta
    return tid


def produce_v13(c: WireClient, parts: dict[tuple[uuid.UUID | None, int], bytes],
                transactional_id: str | None = None, acks: int = -1) -> Any:
    """One Produce v13 request naming topics by id; the decoded response."""
    m = kio_schema("produce", 13)
    by_topic: dict[uuid.UUID | None, list[Any]] = {}
    for (tid, p), records in parts.items():
        by_topic.setdefault(tid, []).append(m.PartitionProduceData(index=p, records=records))
    return c.request(m.ProduceRequest(
        transactional_id=transactional_id, acks=acks, timeout=timedelta(seconds=30),
        topic_data=tuple(m.TopicProduceData(topic_id=t, partition_data=tuple(ps)) for t, ps in by_topic.items())))


def fetch_v18(c: WireClient, parts: dict[uuid.UUID, list[int]], isolation: int = 0,
              high_watermark: int = 2**63 - 1) -> Any:
    """One Fetch v18 from offset 0 of each partition, no waiting; ``high_watermark`` is the
    tagged field a replica fetcher would send (a consumer leaves it at its default)."""
    m = kio_schema("fetch", 18)
    return c.request(m.FetchRequest(
        max_wait=timedelta(milliseconds=0), min_bytes=0, max_bytes=1 << 24, isolation_level=isolation,
        session_id=0, session_epoch=-1, rack_id="",
        topics=tuple(m.FetchTopic(topic_id=tid, partitions=tuple(m.FetchPartition(
            partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=1 << 20, high_watermark=high_watermark) for p in ps)) for tid, ps in parts.items()),
        forgotten_topics_data=()))


def delete_topic(c: WireClient, topic: str) -> None:
    """DeleteTopics v6 by name, then until Metadata no longer knows the topic."""
    m = kio_schema("delete_topics", 6)
    resp = c.request(m.DeleteTopicsRequest(topics=(m.DeleteTopicState(name=topic, topic_id=None),),
                                           timeout=timedelta(seconds=30)))
    assert resp.responses[0].error_code == 0, resp
    deadline = time.monotonic() + 20
    while c.metadata([topic]).topics[0].error_code == 0:
        assert time.monotonic() < deadline, f"{topic} still in Metadata"
        time.sleep(0.1)


def wait_ready(c: WireClient, tid: uuid.UUID, partitions: list[int]) -> None:
    """Until Fetch by topic id answers every partition without error: Kafka's replica manager
    learns of a new topic from the metadata log a moment after Metadata shows its leaders."""
    deadline = time.monotonic() + 20
    while True:
        resp = fetch_v18(c, {tid: partitions})
        if all(p.error_code == 0 for t in resp.responses for p in t.partitions):
            return
        assert time.monotonic() < deadline, resp
        time.sleep(0.1)


def produce_retrying(c: WireClient, parts: dict[tuple[uuid.UUID | None, int], bytes],
                     transactional_id: str | None = None) -> Any:
    """Produce v13 retried on the transient answers a client retries (a new topic's partition
    not yet known to the leader's transaction machinery). One partition only: a retry must not
    append twice to a partition that took the first attempt."""
    assert len(parts) == 1
    transient = {ErrorCode.not_enough_replicas, ErrorCode.not_leader_or_follower, ErrorCode.concurrent_transactions}
    deadline = time.monotonic() + 15
    while True:
        resp = produce_v13(c, parts, transactional_id)
        codes = {p.error_code for t in resp.responses for p in t.partition_responses}
        if not codes & transient or time.monotonic() > deadline:
            return resp
        time.sleep(0.2)


class Names:
    """Maps the topic ids of one broker back to the scenario's topic names (ids differ per cluster)."""

    def __init__(self, ids: dict[uuid.UUID, str]) -> None:
        self.ids = ids

    def __call__(self, tid: uuid.UUID | None) -> str:
        if tid is None or tid == ZERO:
            return "ZERO"
        return self.ids.get(tid, "UNKNOWN-ID")

    def produce(self, resp: Any) -> dict[str, Any]:
        """A Produce v13 answer, field by field, keyed by topic and partition (Kafka builds the
        response from hash maps, so its topic order is not the request's)."""
        out: dict[str, Any] = {"throttle_time": resp.throttle_time.total_seconds(),
                               "node_endpoints": [(e.node_id, e.port) for e in resp.node_endpoints]}
        for t in resp.responses:
            for p in t.partition_responses:
                out[f"{self(t.topic_id)}-{p.index}"] = {
                    "error": name(p.error_code), "base_offset": p.base_offset,
                    "log_append_time": p.log_append_time, "log_start_offset": p.log_start_offset,
                    "record_errors": [(e.batch_index, e.batch_index_error_message) for e in p.record_errors],
                    "error_message": p.error_message,
                    "current_leader": (p.current_leader.leader_id, p.current_leader.leader_epoch)}
        return out

    def fetch(self, resp: Any, pid: int = -1) -> dict[str, Any]:
        """A Fetch v18 answer, field by field; records as raw bytes and as decoded batches."""
        out: dict[str, Any] = {"error": name(resp.error_code), "session_id": resp.session_id,
                               "throttle_time": resp.throttle_time.total_seconds(),
                               "node_endpoints": list(resp.node_endpoints)}
        for t in resp.responses:
            for p in t.partitions:
                out[f"{self(t.topic_id)}-{p.partition_index}"] = {
                    "error": name(p.error_code), "high_watermark": p.high_watermark,
                    "last_stable_offset": p.last_stable_offset, "log_start_offset": p.log_start_offset,
                    "aborted": None if p.aborted_transactions is None else [
                        ("P" if a.producer_id == pid else a.producer_id, a.first_offset)
                        for a in p.aborted_transactions],
                    "preferred_read_replica": p.preferred_read_replica,
                    "diverging_epoch": (p.diverging_epoch.epoch, p.diverging_epoch.end_offset),
                    "current_leader": (p.current_leader.leader_id >= 0, p.current_leader.leader_epoch),
                    "snapshot_id": (p.snapshot_id.end_offset, p.snapshot_id.epoch),
                    "records_null": p.records is None, "batches": batches(p.records, pid)}
        return out


def batches(records: Any, pid: int) -> list[tuple[Any, ...]]:
    """Each batch: base offset, control, transactional, producer (relative), epoch, base sequence,
    record (offset, timestamp, key, value); a control record as COMMIT/ABORT."""
    out = []
    mr = MemoryRecords(bytes(records or b""))
    while (b := mr.next_batch()) is not None:
        rows: list[Any] = []
        for r in b:
            if b.is_control_batch:
                rows.append({0: "ABORT", 1: "COMMIT"}.get(struct.unpack(">hh", bytes(r.key))[1]))
            else:
                rows.append((r.offset, r.timestamp, r.key, r.value))
        owner = "P" if b.producer_id == pid and pid >= 0 else b.producer_id
        out.append((b.base_offset, b.is_control_batch, b.is_transactional, owner, b.producer_epoch,
                    b.base_sequence, rows))
    return out


def untimed(fetched: dict[str, Any]) -> dict[str, Any]:
    """A reduced Fetch answer without record timestamps (diff_wire's transactional batches are
    stamped with the time they are built)."""
    out = dict(fetched)
    for key, part in fetched.items():
        if isinstance(part, dict) and "batches" in part:
            out[key] = {**part, "batches": [(*b[:6], [r if isinstance(r, str) else (r[0], r[2], r[3]) for r in b[6]])
                                            for b in part["batches"]]}
    return out


def raw_data_batches(records: Any) -> bytes:
    return bytes(records or b"")


def differences(got: dict[str, Any], want: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Field paths where strom's reduced answer differs from Kafka's: (strom, kafka)."""
    out: dict[str, tuple[Any, Any]] = {}
    for key in sorted(set(got) | set(want)):
        a, b = got.get(key, "<absent>"), want.get(key, "<absent>")
        if isinstance(a, dict) and isinstance(b, dict):
            out.update({f"{key}.{k}": v for k, v in differences(a, b).items()})
        elif a != b:
            out[key] = (a, b)
    return out


def each_broker(strom: HasBootstrap, kafka: HasBootstrap) -> list[tuple[str, str]]:
    return [("strom", strom.bootstrap), ("kafka", kafka.bootstrap)]


# -- differential scenarios -------------------------------------------------------------------------


def test_both_advertise_produce_v13_and_fetch_v18(strom: HasBootstrap, kafka: HasBootstrap) -> None:
    seen: dict[str, Any] = {}
    for who, bootstrap in each_broker(strom, kafka):
        with WireClient(bootstrap) as c:
            versions = c.api_versions()
            seen[who] = (versions[0][1], versions[1][1])
    assert seen["kafka"] == (13, 18), seen
    assert seen["strom"] == seen["kafka"]


def test_produce_v13_by_topic_id_then_fetch_v18(strom: HasBootstrap, kafka: HasBootstrap) -> None:
    """Happy path, unknown id, zero id, missing partition and a mixed request; then Fetch v18."""
    topic = f"pfv-{RUN}"
    seen: dict[str, dict[str, Any]] = {}
    raw: dict[str, dict[str, bytes]] = {}
    for who, bootstrap in each_broker(strom, kafka):
        with WireClient(bootstrap) as c:
            c.create_topic(topic, 2)
            tid = topic_id(c, topic)
            names = Names({tid: topic})
            stranger = uuid.uuid4()
            wait_ready(c, tid, [0, 1])
            first = produce_v13(c, {
                (tid, 0): build_batch([(b"k0", b"v0"), (None, b"v1")], TS),
                (tid, 1): build_batch([(b"k1", b"w0")], TS)})
            second = produce_v13(c, {(tid, 0): build_batch([(None, b"v2")], TS + 1)})
            unknown = produce_v13(c, {(stranger, 0): build_batch([(None, b"x")], TS)})
            zero = produce_v13(c, {(None, 0): build_batch([(None, b"x")], TS)})
            missing = produce_v13(c, {(tid, 7): build_batch([(None, b"x")], TS)})
            mixed = produce_v13(c, {(tid, 1): build_batch([(None, b"w1")], TS),
                                    (stranger, 3): build_batch([(None, b"x")], TS)})
            assert {t.topic_id for t in unknown.responses} == {stranger}, unknown  # echoes the id asked by
            consumer = fetch_v18(c, {tid: [0, 1]})
            replica_hint = fetch_v18(c, {tid: [0, 1]}, high_watermark=-1)  # the tag set: same answer
            committed = fetch_v18(c, {tid: [0, 1]}, isolation=1)
            fetch_unknown = fetch_v18(c, {stranger: [0]})
            fetch_missing = fetch_v18(c, {tid: [1, 7]})
            seen[who] = {"first": names.produce(first), "second": names.produce(second),
                         "unknown": names.produce(unknown), "zero": names.produce(zero),
                         "missing": names.produce(missing), "mixed": names.produce(mixed),
                         "fetch": names.fetch(consumer), "fetch_hw_tag": names.fetch(replica_hint),
                         "fetch_committed": names.fetch(committed), "fetch_unknown": names.fetch(fetch_unknown),
                         "fetch_missing": names.fetch(fetch_missing)}
            raw[who] = {f"{p.partition_index}": raw_data_batches(p.records)
                        for t in consumer.responses for p in t.partitions}
    kafka_seen = seen["kafka"]
    # Kafka's answers, checked against KIP-516 so a harness mistake cannot make the comparison vacuous.
    assert kafka_seen["first"][f"{topic}-0"]["error"] == "none"
    assert kafka_seen["second"][f"{topic}-0"]["base_offset"] == 2
    assert kafka_seen["unknown"]["UNKNOWN-ID-0"]["error"] == "unknown_topic_id"
    assert kafka_seen["fetch"][f"{topic}-0"]["high_watermark"] == 3
    diff = differences(seen["strom"], kafka_seen)
    assert diff == {}, "\n".join(f"{k}: strom {a!r} kafka {b!r}" for k, (a, b) in diff.items())
    assert raw["strom"] == raw["kafka"]  # the batches as stored: offsets, epochs, CRCs


def test_produce_v13_to_a_deleted_topic_id(strom: HasBootstrap, kafka: HasBootstrap) -> None:
    topic = f"pfv-deleted-{RUN}"
    seen: dict[str, Any] = {}
    for who, bootstrap in each_broker(strom, kafka):
        with WireClient(bootstrap) as c:
            c.create_topic(topic, 1)
            tid = topic_id(c, topic)
            names = Names({tid: topic})
            ok = produce_retrying(c, {(tid, 0): build_batch([(None, b"before")], TS)})
            delete_topic(c, topic)
            deadline = time.monotonic() + 20
            while True:  # Kafka's broker learns of the deletion from the metadata log a moment later
                gone = produce_v13(c, {(tid, 0): build_batch([(None, b"after")], TS)})
                code = gone.responses[0].partition_responses[0].error_code
                if code == ErrorCode.unknown_topic_id or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            seen[who] = {"before": names.produce(ok), "after": names.produce(gone),
                         "fetch": names.fetch(fetch_v18(c, {tid: [0]}))}
    assert seen["kafka"]["after"][f"{topic}-0"]["error"] == "unknown_topic_id", seen["kafka"]
    assert differences(seen["strom"], seen["kafka"]) == {}


def test_produce_v12_still_by_name(strom: HasBootstrap, kafka: HasBootstrap) -> None:
    """v12 names topics: an empty or unknown name is an unknown topic, never an unknown id;
    Fetch v12 by name of a missing partition answers like Fetch v18 by id."""
    topic = f"pfv-v12-{RUN}"
    seen: dict[str, Any] = {}
    for who, bootstrap in each_broker(strom, kafka):
        with WireClient(bootstrap) as c:
            c.create_topic(topic, 1)
            wait_ready(c, topic_id(c, topic), [0])
            m = kio_schema("produce", 12)
            resp = c.request(m.ProduceRequest(transactional_id=None, acks=1, timeout=timedelta(seconds=30),
                                              topic_data=tuple(m.TopicProduceData(name=n, partition_data=(
                                                  m.PartitionProduceData(index=0, records=build_batch(
                                                      [(None, b"v")], TS)),)) for n in ("", f"nope-{RUN}", topic))))
            f = kio_schema("fetch", 12)
            fetched = c.request(f.FetchRequest(
                max_wait=timedelta(milliseconds=0), min_bytes=0, isolation_level=0, forgotten_topics_data=(),
                topics=(f.FetchTopic(topic=topic, partitions=tuple(f.FetchPartition(
                    partition=p, fetch_offset=0, partition_max_bytes=1 << 20) for p in (0, 5))),)))
            seen[who] = {
                "produce": {f"{t.name}-{p.index}": (name(p.error_code), p.base_offset, p.error_message)
                            for t in resp.responses for p in t.partition_responses},
                "fetch": {f"{t.topic}-{p.partition_index}": (
                    name(p.error_code), p.high_watermark, None if p.aborted_transactions is None
                    else len(p.aborted_transactions), len(p.records or b""))
                    for t in fetched.responses for p in t.partitions}}
    assert seen["kafka"]["produce"][f"{topic}-0"][0] == "none", seen["kafka"]
    diff = differences(seen["strom"], seen["kafka"])
    assert diff == {}, "\n".join(f"{k}: strom {a!r} kafka {b!r}" for k, (a, b) in diff.items())


def test_transactional_produce_v13_commits(strom: HasBootstrap, kafka: HasBootstrap) -> None:
    """TV2: Produce v13 adds the partition to the transaction itself (no AddPartitionsToTxn),
    EndTxn v5 commits; Fetch v18 read_committed sees the data and the COMMIT marker."""
    topic = f"pfv-txn-{RUN}"
    seen: dict[str, Any] = {}
    for who, bootstrap in each_broker(strom, kafka):
        with WireClient(bootstrap) as c:
            c.create_topic(topic, 1)
            tid = topic_id(c, topic)
            names = Names({tid: topic})
            txn_id = f"pfv-txn-{RUN}-{who}"
            c.wait_for_coordinator(txn_id, key_type=1)
            code, pid, epoch = c.init_producer_id(txn_id)
            assert code == 0
            first = produce_retrying(c, {(tid, 0): build_txn_batch([b"t0", b"t1"], pid, epoch, 0)}, txn_id)
            ongoing = untimed(names.fetch(fetch_v18(c, {tid: [0]}, isolation=1), pid))
            second = produce_v13(c, {(tid, 0): build_txn_batch([b"t2"], pid, epoch, 2)}, txn_id)
            end = c.end_txn(txn_id, pid, epoch, commit=True)
            deadline = time.monotonic() + 20
            while True:  # the COMMIT marker is written after EndTxn answers
                done = untimed(names.fetch(fetch_v18(c, {tid: [0]}, isolation=1), pid))
                if done[f"{topic}-0"]["last_stable_offset"] == 4 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            seen[who] = {"first": names.produce(first), "ongoing": ongoing, "second": names.produce(second),
                         "end": (name(end[0]), end[1] == pid, end[2] - epoch), "committed": done}
    kafka_seen = seen["kafka"]
    assert kafka_seen["first"][f"{topic}-0"]["error"] == "none", kafka_seen
    assert kafka_seen["end"] == ("none", True, 1), kafka_seen  # TV2: EndTxn bumps the epoch
    assert kafka_seen["committed"][f"{topic}-0"]["batches"][-1][6] == ["COMMIT"]
    diff = differences(seen["strom"], kafka_seen)
    assert diff == {}, "\n".join(f"{k}: strom {a!r} kafka {b!r}" for k, (a, b) in diff.items())


# -- strom only: authorization of topics named by id -------------------------------------------------


def _deny_topics_plugin() -> None:
    """The repo's third-party test plugin (its DenyTopics authorizer refuses WRITE on topics
    named ``denied-*``), pip-installed editable as tests/plugins does, for the broker process."""
    plugin_dir = Path(__file__).resolve().parents[1] / "data" / "strom_test_plugin"
    probe = [sys.executable, "-c", "import strom_test_plugin"]
    if subprocess.run(probe, capture_output=True, check=False).returncode != 0:
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-e", str(plugin_dir)],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr


def test_produce_v13_authorizes_the_name_behind_the_id(tmp_path: Path) -> None:
    """The id is resolved to its name before authorization: WRITE denied on the name answers
    TOPIC_AUTHORIZATION_FAILED under the id asked by, next to an allowed topic and an unknown id."""
    _deny_topics_plugin()
    config = {"authorizer.class.name": "strom_test_plugin.DenyTopics"}
    with BrokerProcess(tmp_path, config=config) as broker, WireClient(broker.bootstrap) as c:
        denied, allowed = f"denied-{RUN}", f"allowed-{RUN}"
        c.create_topic(denied, 1)
        c.create_topic(allowed, 1)
        ids = {topic_id(c, denied): denied, topic_id(c, allowed): allowed}
        by_name = {n: i for i, n in ids.items()}
        stranger = uuid.uuid4()
        resp = produce_v13(c, {(by_name[denied], 0): build_batch([(None, b"no")], TS),
                               (by_name[allowed], 0): build_batch([(None, b"yes")], TS),
                               (stranger, 0): build_batch([(None, b"?")], TS)}, acks=1)
        got = {Names(ids)(t.topic_id): [(p.index, name(p.error_code), p.base_offset) for p in t.partition_responses]
               for t in resp.responses}
        assert got == {denied: [(0, "topic_authorization_failed", -1)], allowed: [(0, "none", 0)],
                       "UNKNOWN-ID": [(0, "unknown_topic_id", -1)]}
        assert {t.topic_id for t in resp.responses} == {*ids, stranger}


# -- the hand-written encoders at the new versions ---------------------------------------------------

i64 = st.integers(-(2**63), 2**63 - 1)
produce_parts = st.builds(
    PartitionResult, partition=st.integers(0, 2**31 - 1), error_code=st.sampled_from([0, 3, 100]),
    base_offset=i64, log_start_offset=i64, log_append_time=st.one_of(st.just(-1), st.integers(0, 4_102_444_800_000)),
    error_message=st.one_of(st.none(), st.text(max_size=50)), record_errors=st.just(()))
produce_topics = st.lists(st.builds(TopicResults, name=st.just(""), partitions=st.lists(produce_parts, max_size=5),
                                    topic_id=st.one_of(st.none(), st.uuids())), max_size=3)


@settings(max_examples=60, deadline=None)
@given(correlation=st.integers(0, 2**31 - 1), throttle=st.integers(0, 2**31 - 1), rows=produce_topics)
def test_produce_v13_response_matches_kio(correlation: int, throttle: int, rows: list[TopicResults]) -> None:
    assert produce.VERSIONS[1] == 13
    m = response_messages(produce.API_KEY, 13)
    resp = m.make("ProduceResponse", throttle_time=throttle, responses=tuple(
        m.make("TopicProduceResponse", topic_id=t.topic_id, partition_responses=tuple(
            m.make("PartitionProduceResponse", index=p.partition, error_code=p.error_code, base_offset=p.base_offset,
                   log_append_time=p.log_append_time, log_start_offset=p.log_start_offset, record_errors=(),
                   error_message=p.error_message) for p in t.partitions)) for t in rows))
    assert encode_produce_response(13, correlation, throttle, rows) == codec.encode_response(0, 13, correlation, resp)


def test_produce_v12_response_still_names_topics() -> None:
    rows = [TopicResults("orders", [PartitionResult(0, 0, 5, -1, 0, None)], uuid.uuid4())]
    frame = encode_produce_response(12, 1, 0, rows)
    topic_id = rows[0].topic_id
    assert topic_id is not None
    assert b"orders" in frame and topic_id.bytes not in frame


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.builds(TopicRows, name=st.just("t"), topic_id=st.uuids(), partitions=st.lists(st.builds(
    PartitionRow, partition=st.integers(0, 100), error_code=st.sampled_from([0, 100]), high_watermark=i64,
    last_stable_offset=i64, log_start_offset=i64, aborted=st.one_of(st.none(), st.lists(st.tuples(i64, i64),
                                                                                            max_size=2)),
    records=st.one_of(st.none(), st.binary(max_size=64))), max_size=3)), max_size=2))
def test_fetch_v18_response_matches_kio(rows: list[TopicRows]) -> None:
    assert fetch.VERSIONS[1] == 18
    m = response_messages(fetch.API_KEY, 18)
    resp = m.make("FetchResponse", throttle_time=0, error_code=0, session_id=0, responses=tuple(
        m.make("FetchableTopicResponse", topic_id=t.topic_id, partitions=tuple(
            m.make("PartitionData", partition_index=p.partition, error_code=p.error_code,
                   high_watermark=p.high_watermark, last_stable_offset=p.last_stable_offset,
                   log_start_offset=p.log_start_offset,
                   aborted_transactions=None if p.aborted is None else tuple(
                       m.make("AbortedTransaction", producer_id=a, first_offset=b) for a, b in p.aborted),
                   records=None if p.records is None else bytes(p.records)) for p in t.partitions)) for t in rows))
    fast = b"".join(encode_fetch_response(18, 9, 0, 0, 0, rows))
    assert fast == codec.encode_response(1, 18, 9, resp)


@pytest.mark.parametrize("high_watermark", [-1, 0, 12345, 2**63 - 1])
def test_fetch_v18_request_decodes_the_high_watermark_tag(high_watermark: int) -> None:
    """strom's request decoder reads the tagged field (and the fields after it) of a v18 frame."""
    import io

    from kio.serial import entity_writer

    m = kio_schema("fetch", 18)
    tid = uuid.uuid4()
    req = m.FetchRequest(
        max_wait=timedelta(milliseconds=5), min_bytes=1, max_bytes=1000, isolation_level=1, session_id=0,
        session_epoch=-1, rack_id="r", forgotten_topics_data=(),
        topics=(m.FetchTopic(topic_id=tid, partitions=(
            m.FetchPartition(partition=2, current_leader_epoch=4, fetch_offset=77, last_fetched_epoch=-1,
                             log_start_offset=-1, partition_max_bytes=999, high_watermark=high_watermark),
            m.FetchPartition(partition=3, current_leader_epoch=4, fetch_offset=78, last_fetched_epoch=-1,
                             log_start_offset=-1, partition_max_bytes=998))),))
    buf = io.BytesIO()
    entity_writer(type(req))(buf, req)
    header = struct.pack(">hhih", 1, 18, 42, 1) + b"c" + b"\x00"
    frame = header + buf.getvalue()
    parsed, pos = codec.parse_header(frame)
    got = codec.decode_request(parsed, frame, pos)
    (topic,) = got.topics
    assert topic.topic_id == tid
    assert [(p.partition, p.fetch_offset, p.partition_max_bytes, p.high_watermark) for p in topic.partitions] == \
        [(2, 77, 999, high_watermark), (3, 78, 998, 2**63 - 1)]
    assert got.rack_id == "r" and int(got.isolation_level) == 1
