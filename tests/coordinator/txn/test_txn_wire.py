"""Transaction APIs on the wire (raw kio requests against a broker subprocess): versions,
batched AddPartitionsToTxn, unknown partitions, error-code mapping, Describe/ListTransactions."""

from __future__ import annotations

import datetime
import importlib
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka_wire import connect, roundtrip
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i64

from strom.core.testing import BrokerProcess


def req(api: str, version: int) -> Any:
    """kio's request module of one API version."""
    return importlib.import_module(f"kio.schema.{api}.v{version}.request")


@pytest.fixture
def sock(broker: BrokerProcess) -> Iterator[socket.socket]:
    s = connect(broker.bootstrap)
    yield s
    s.close()


def _ms(v: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=v)


def init(sock: socket.socket, tid: str, timeout_ms: int = 60000, version: int = 4, pid: int = -1,
         epoch: int = -1) -> Any:
    mod = req("init_producer_id", version)
    kwargs: dict[str, Any] = {"transactional_id": tid, "transaction_timeout": _ms(timeout_ms)}
    if version >= 3:
        kwargs |= {"producer_id": i64(pid), "producer_epoch": i16(epoch)}
    return roundtrip(sock, mod.InitProducerIdRequest(**kwargs))


def add_v3(sock: socket.socket, tid: str, pid: int, epoch: int, topics: dict[str, list[int]]) -> dict[tuple[str, int], ErrorCode]:
    m = req("add_partitions_to_txn", 3)
    resp = roundtrip(sock, m.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=i64(pid), v3_and_below_producer_epoch=i16(epoch),
        v3_and_below_topics=tuple(m.AddPartitionsToTxnTopic(name=t, partitions=tuple(i32(p) for p in ps))
                                  for t, ps in topics.items())))
    return {(t.name, p.partition_index): p.partition_error_code
            for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}


def end(sock: socket.socket, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> ErrorCode:
    m = req("end_txn", version)
    return roundtrip(sock, m.EndTxnRequest(transactional_id=tid, producer_id=i64(pid), producer_epoch=i16(epoch),
                                           committed=commit)).error_code


@pytest.fixture
def topic(broker: BrokerProcess) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic
    name = f"w-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})   # must outlive the future
    admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])[name].result(30)
    return name


def test_transaction_round_trip_on_the_wire(sock: socket.socket, topic: str) -> None:
    tid = f"w-{uuid.uuid4().hex[:6]}"
    r = init(sock, tid)
    assert r.error_code == ErrorCode.none and r.producer_epoch == 0
    pid = int(r.producer_id)
    assert add_v3(sock, tid, pid, 0, {topic: [0, 1]}) == {(topic, 0): ErrorCode.none, (topic, 1): ErrorCode.none}
    resp = roundtrip(sock, req("add_offsets_to_txn", 3).AddOffsetsToTxnRequest(
        transactional_id=tid, producer_id=i64(pid), producer_epoch=i16(0), group_id="g1"))
    assert resp.error_code == ErrorCode.none
    d = roundtrip(sock, req("describe_transactions", 0).DescribeTransactionsRequest(transactional_ids=(tid, "no-such-id")))
    mine, missing = d.transaction_states
    assert (mine.error_code, mine.transaction_state, mine.producer_id, mine.producer_epoch) == (
        ErrorCode.none, "Ongoing", pid, 0)
    assert mine.transaction_timeout == _ms(60000)
    topics = {t.topic: sorted(t.partitions) for t in mine.topics}
    assert topics[topic] == [0, 1] and "__consumer_offsets" in topics
    assert missing.error_code == ErrorCode.transactional_id_not_found
    listed = roundtrip(sock, req("list_transactions", 1).ListTransactionsRequest(
        state_filters=("Ongoing", "Bogus"), producer_id_filters=(i64(pid),), duration_filter=i64(-1)))
    assert listed.unknown_state_filters == ("Bogus",)
    assert [(s.transactional_id, s.transaction_state) for s in listed.transaction_states] == [(tid, "Ongoing")]
    assert end(sock, tid, pid, 0, True) == ErrorCode.none
    assert end(sock, tid, pid, 0, True) == ErrorCode.none            # retry: same answer
    assert end(sock, tid, pid, 0, False) == ErrorCode.invalid_txn_state
    pattern = roundtrip(sock, req("list_transactions", 2).ListTransactionsRequest(
        state_filters=(), producer_id_filters=(), duration_filter=i64(-1), transactional_id_pattern=tid[:4] + ".*"))
    assert (tid, "CompleteCommit") in [(s.transactional_id, s.transaction_state) for s in pattern.transaction_states]


def test_unknown_partitions_fail_the_whole_request(sock: socket.socket, topic: str) -> None:
    tid = f"w-{uuid.uuid4().hex[:6]}"
    r = init(sock, tid)
    codes = add_v3(sock, tid, int(r.producer_id), 0, {topic: [0, 7], "no-such-topic": [0]})
    assert codes == {(topic, 0): ErrorCode.operation_not_attempted, (topic, 7): ErrorCode.unknown_topic_or_partition,
                     ("no-such-topic", 0): ErrorCode.unknown_topic_or_partition}
    # Nothing was added: the transaction never started (ListTransactions: Describe of an Empty id
    # carries start time -1, which kio's reader refuses to parse).
    listed = roundtrip(sock, req("list_transactions", 0).ListTransactionsRequest(
        state_filters=(), producer_id_filters=(i64(int(r.producer_id)),)))
    assert [(s.transactional_id, s.transaction_state) for s in listed.transaction_states] == [(tid, "Empty")]


def test_batched_add_partitions_and_verify_only(sock: socket.socket, topic: str) -> None:
    m = req("add_partitions_to_txn", 4)
    a, b = f"wa-{uuid.uuid4().hex[:6]}", f"wb-{uuid.uuid4().hex[:6]}"
    ra, rb = init(sock, a), init(sock, b)

    def txn(tid: str, pid: int, partitions: list[int], verify: bool, epoch: int = 0) -> Any:
        return m.AddPartitionsToTxnTransaction(
            transactional_id=tid, producer_id=i64(pid), producer_epoch=i16(epoch), verify_only=verify,
            topics=(m.AddPartitionsToTxnTopic(name=topic, partitions=tuple(i32(p) for p in partitions)),))

    def send(*txns: Any) -> dict[str, dict[int, ErrorCode]]:
        resp = roundtrip(sock, m.AddPartitionsToTxnRequest(transactions=txns))
        assert resp.error_code == ErrorCode.none
        return {r.transactional_id: {p.partition_index: p.partition_error_code
                                     for t in r.topic_results for p in t.results_by_partition}
                for r in resp.results_by_transaction}

    assert send(txn(a, int(ra.producer_id), [0], False), txn(b, int(rb.producer_id), [1], False, epoch=5)) == {
        a: {0: ErrorCode.none}, b: {1: ErrorCode.producer_fenced}}
    assert send(txn(a, int(ra.producer_id), [0, 1], True)) == {
        a: {0: ErrorCode.none, 1: ErrorCode.transaction_abortable}}


def test_fencing_errors_by_version(sock: socket.socket, topic: str) -> None:
    tid = f"w-{uuid.uuid4().hex[:6]}"
    first = init(sock, tid)
    second = init(sock, tid)
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    pid = int(first.producer_id)
    # PRODUCER_FENCED (KIP-588) for v2+, INVALID_PRODUCER_EPOCH for older clients.
    assert end(sock, tid, pid, 0, True, version=2) == ErrorCode.producer_fenced
    assert end(sock, tid, pid, 0, True, version=1) == ErrorCode.invalid_producer_epoch
    assert end(sock, tid, pid + 1000, 1, True) == ErrorCode.invalid_producer_id_mapping
    # KIP-360: the producer presents its (fenced) id and epoch: fenced as well.
    assert init(sock, tid, version=4, pid=pid, epoch=0).error_code == ErrorCode.producer_fenced
    assert init(sock, tid, version=3, pid=pid, epoch=0).error_code == ErrorCode.invalid_producer_epoch
    # With the current epoch it gets a bump.
    bumped = init(sock, tid, version=4, pid=pid, epoch=1)
    assert (bumped.error_code, bumped.producer_epoch) == (ErrorCode.none, 2)


def test_invalid_timeout_and_empty_id(sock: socket.socket) -> None:
    assert init(sock, "w-timeout", timeout_ms=900001).error_code == ErrorCode.invalid_transaction_timeout
    assert init(sock, "", version=0).error_code == ErrorCode.invalid_request
