"""Per-partition assignment epochs (KIP-1251, Kafka 4.3) and the offset commits they allow.

A member's partitions carry the member epoch they were assigned at; an OffsetCommit with an
epoch older than the member's is accepted for a partition held since that epoch or earlier,
a newer epoch is always STALE_MEMBER_EPOCH, and one refused partition refuses the whole
request. The state-machine tests drive a real ``ConsumerGroup`` through the real record codec;
the broker tests speak the wire protocol to a broker subprocess, restart included.
"""

from __future__ import annotations

import importlib
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from group_harness import Cluster
from kafka_wire import connect, roundtrip
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i64

from strom.core.coordinator.group import records as R
from strom.core.coordinator.group.consumer_group import ConsumerGroup, HeartbeatRequest
from strom.core.coordinator.group.consumer_group_member import MemberState, normalize
from strom.core.errors import CorruptMessageError, KafkaError
from strom.core.testing import BrokerProcess

STALE = ErrorCode.stale_member_epoch

# -- the state machine, no broker ----------------------------------------------------------------


class Group(Cluster):
    """The harness's group, with commit checks and a member's assignment epochs by name."""

    def __init__(self, topics: dict[str, int], assignors: str = "range") -> None:
        super().__init__(topics, assignors=assignors)

    def beat(self, member_id: str, epoch: int, owned: dict[uuid.UUID, frozenset[int]] | None,
             topics: tuple[str, ...] | None = None, instance_id: str | None = None) -> int:
        req = HeartbeatRequest(member_id, epoch, instance_id=instance_id,
                               rebalance_timeout_ms=30000 if epoch == 0 else -1,
                               subscribed_topic_names=topics, owned=owned)
        return self.heartbeat(req)[0]

    def epochs(self, member_id: str) -> dict[tuple[str, int], int]:
        names = {v: k for k, v in self.ids.items()}
        m = self.group.members[member_id]
        return {(names[t], p): e for t, es in m.assignment_epochs.items() for p, e in es.items()}

    def commit_error(self, member_id: str, epoch: int, *partitions: tuple[str, int],
                     transactional: bool = False) -> ErrorCode | None:
        """What the coordinator would answer: None (accepted) or the error of the whole request."""
        try:
            check = self.group.validate_offset_commit(member_id, epoch, transactional=transactional, api_version=9)
            if check is not None:
                for topic, p in partitions:
                    check(topic, self.ids.get(topic), p)
        except KafkaError as e:
            return e.code
        return None


def owned(g: Group, member_id: str) -> dict[uuid.UUID, frozenset[int]]:
    return normalize(g.group.members[member_id].assigned)


def test_new_partitions_get_the_new_epoch_kept_ones_keep_theirs() -> None:
    g = Group({"t": 2, "u": 1, "v": 1})
    a = "member-a"
    assert g.beat(a, 0, {}, ("t",)) == 1
    assert g.epochs(a) == {("t", 0): 1, ("t", 1): 1}
    # A subscription change bumps the group epoch: t stays with its epoch, u is new at epoch 2.
    assert g.beat(a, 1, owned(g, a), ("t", "u")) == 2
    assert g.epochs(a) == {("t", 0): 1, ("t", 1): 1, ("u", 0): 2}

    assert g.commit_error(a, 2, ("t", 0), ("u", 0), ("v", 0)) is None  # current epoch: no per-partition check
    assert g.commit_error(a, 1, ("t", 0), ("t", 1)) is None              # held since epoch 1
    assert g.commit_error(a, 1, ("u", 0)) == STALE                        # assigned at epoch 2
    assert g.commit_error(a, 1, ("t", 0), ("u", 0)) == STALE              # one bad partition fails all
    assert g.commit_error(a, 0, ("t", 0)) == STALE                        # older than the assignment
    assert g.commit_error(a, 1, ("v", 0)) == STALE                        # never assigned to a
    assert g.commit_error(a, 1, ("gone", 0)) == STALE                     # unknown topic (no id)
    assert g.commit_error(a, 3, ("t", 0)) == STALE                        # newer: always refused
    assert g.commit_error("ghost", 1, ("t", 0)) == ErrorCode.unknown_member_id

    fresh = g.replayed()
    assert fresh.snapshot() == g.group.snapshot()
    assert fresh.members[a].assignment_epochs == g.group.members[a].assignment_epochs


def test_revocation_keeps_epochs_until_the_partition_is_gone() -> None:
    g = Group({"t": 4})
    a, b = "member-a", "member-b"
    assert g.beat(a, 0, {}, ("t",)) == 1
    assert g.beat(b, 0, {}, ("t",)) == 2        # b waits at epoch 2: a still owns everything
    assert g.beat(a, 1, owned(g, a)) == 1       # a must revoke first and stays at epoch 1
    ma = g.group.members[a]
    assert ma.state is MemberState.UNREVOKED_PARTITIONS and ma.pending_revocation
    revoked = sorted(p for ps in ma.pending_revocation.values() for p in ps)
    kept = sorted(p for ps in ma.assigned.values() for p in ps)
    # Pending revocation keeps the epoch the partition was assigned at.
    assert g.epochs(a) == {("t", p): 1 for p in range(4)}
    # a is still at epoch 1 (its current one): every partition it holds may be committed.
    assert g.commit_error(a, 1, *[("t", p) for p in range(4)]) is None
    assert g.commit_error(b, 1, ("t", revoked[0])) == STALE   # b holds nothing yet

    # a acknowledges the revocation and moves to epoch 2 keeping its partitions' epoch 1.
    assert g.beat(a, 1, owned(g, a)) == 2
    assert g.epochs(a) == {("t", p): 1 for p in kept}
    assert g.commit_error(a, 1, *[("t", p) for p in kept]) is None
    assert g.commit_error(a, 1, ("t", revoked[0])) == STALE   # no longer a's
    # b gets the released partitions at epoch 2.
    assert g.beat(b, 2, {}) == 2
    assert g.epochs(b) == {("t", p): 2 for p in revoked}
    assert g.commit_error(b, 1, ("t", revoked[0])) == STALE   # b held nothing at epoch 1
    assert g.replayed().snapshot() == g.group.snapshot()


def test_a_partition_revoked_and_given_back_gets_the_new_epoch() -> None:
    g = Group({"t": 2})
    a, b = "member-a", "member-b"
    g.beat(a, 0, {}, ("t",))
    g.beat(b, 0, {}, ("t",))
    g.beat(a, 1, owned(g, a))                      # revoking one partition, still epoch 1
    revoking = next(iter(g.group.members[a].pending_revocation.values()))
    assert g.beat(b, 2, {}, ()) == 3               # b unsubscribes: group epoch 3, everything to a again
    # a acknowledges the revocation (drops the partition) and gets it back at the new epoch.
    assert g.beat(a, 1, owned(g, a)) == 3
    (p,) = revoking
    assert g.epochs(a)[("t", p)] == 3 and g.epochs(a)[("t", 1 - p)] == 1
    assert g.commit_error(a, 2, ("t", 1 - p)) is None
    assert g.commit_error(a, 2, ("t", p)) == STALE


def test_static_member_leaving_resets_epochs_to_zero() -> None:
    g = Group({"t": 2})
    g.beat("s1", 0, {}, ("t",), instance_id="i")
    assert g.epochs("s1") == {("t", 0): 1, ("t", 1): 1}
    g.write(g.group.leave("s1", -2, "i", g.env()).records)
    assert g.epochs("s1") == {("t", 0): 0, ("t", 1): 0}
    # The instance comes back as a new member: it takes the assignment with its zero epochs.
    assert g.beat("s2", 0, {}, ("t",), instance_id="i") == 1
    assert g.epochs("s2") == {("t", 0): 0, ("t", 1): 0}
    assert g.commit_error("s2", 0, ("t", 0)) is None
    assert g.replayed().snapshot() == g.group.snapshot()


def test_transactional_commit_without_member_is_not_checked() -> None:
    g = Group({"t": 1})
    g.beat("a", 0, {}, ("t",))
    assert g.commit_error("", -1, ("t", 0), transactional=True) is None
    assert g.commit_error("", -1, ("t", 0)) == ErrorCode.unknown_member_id
    # Below v9 a consumer-protocol member may not commit (Kafka: UNSUPPORTED_VERSION).
    with pytest.raises(KafkaError) as e:
        g.group.validate_offset_commit("a", 1, api_version=8)
    assert e.value.code == ErrorCode.unsupported_version


def test_records_without_epochs_load_with_the_member_epoch() -> None:
    """A record written before KIP-1251 (no tagged epochs) loads as Kafka loads it."""
    g = ConsumerGroup("g")
    t = uuid.uuid4()
    old = R.ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=5, previous_member_epoch=4, state=int(MemberState.UNREVOKED_PARTITIONS),
        assigned_partitions=[R.TopicPartitions(t, [0, 1])], partitions_pending_revocation=[R.TopicPartitions(t, [2])])
    key = R.ConsumerGroupCurrentMemberAssignmentKey("g", "m")
    raw_key, raw_value = R.encode_record(key, old)
    decoded = R.decode_key(raw_key)
    assert decoded is not None
    g.replay(decoded[1], R.decode_value(decoded[0], raw_value))
    assert g.members["m"].assignment_epochs == {t: {0: 5, 1: 5, 2: 5}}
    # A list of the wrong length is ignored the same way; a right one is used.
    odd = R.ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=7, previous_member_epoch=6, state=3,
        assigned_partitions=[R.TopicPartitions(t, [0, 1], [3]), R.TopicPartitions(t, [4], [2])],
        partitions_pending_revocation=[])
    g.replay(key, R.decode_value(8, R.encode_value(odd, key)))
    assert g.members["m"].assignment_epochs == {t: {0: 7, 1: 7, 4: 2}}


def test_epochs_are_written_as_kafka_writes_them() -> None:
    """Byte for byte what Kafka 4.3.1's generated serializer writes for the same value
    (ConsumerGroupCurrentMemberAssignmentValue, TopicPartitions tag 0 = AssignmentEpochs)."""
    t = uuid.UUID("0ebc661f-daee-40a8-98f4-cef80cd81cda")
    value = R.ConsumerGroupCurrentMemberAssignmentValue(3, 2, 3, [R.TopicPartitions(t, [0, 1], [1, 3])], [])
    raw = R.encode_value(value, R.ConsumerGroupCurrentMemberAssignmentKey("g", "m"))
    assert raw is not None
    assert raw.hex() == ("0000" "00000003" "00000002" "03" "02" "0ebc661fdaee40a898f4cef80cd81cda" "03"
                         "00000000" "00000001" "01" "00" "09" "03" "00000001" "00000003" "01" "00")
    assert R.decode_value(8, raw) == value
    # Without epochs (older strom and Kafka builds, target-assignment records) no tag is written.
    plain = R.ConsumerGroupCurrentMemberAssignmentValue(3, 2, 3, [R.TopicPartitions(t, [0, 1])], [])
    plain_raw = R.encode_value(plain, R.ConsumerGroupCurrentMemberAssignmentKey("g", "m"))
    assert plain_raw is not None
    assert plain_raw.hex() == ("0000" "00000003" "00000002" "03" "02" "0ebc661fdaee40a898f4cef80cd81cda" "03"
                               "00000000" "00000001" "00" "01" "00")
    assert R.decode_value(8, plain_raw) == plain
    # A truncated record is refused, not half-read.
    for cut in (1, len(raw) - 5):
        with pytest.raises(CorruptMessageError):
            R.decode_value(8, raw[:cut])


# -- a broker subprocess, over the wire ----------------------------------------------------------


def _req(api: str, version: int) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.request")


class Wire:
    """ConsumerGroupHeartbeat / OffsetCommit / TxnOffsetCommit as raw requests to one broker."""

    def __init__(self, bootstrap: str) -> None:
        self.sock = connect(bootstrap, timeout=30)

    def close(self) -> None:
        self.sock.close()

    def create_topic(self, name: str, partitions: int) -> None:
        m = _req("create_topics", 7)
        resp = roundtrip(self.sock, m.CreateTopicsRequest(topics=(m.CreatableTopic(
            name=name, num_partitions=i32(partitions), replication_factor=i16(1), assignments=(), configs=()),),
            timeout=timedelta(seconds=30), validate_only=False))
        assert resp.topics[0].error_code == ErrorCode.none, resp

    def topic_ids(self, names: list[str]) -> dict[str, uuid.UUID]:
        m = _req("metadata", 12)
        resp = roundtrip(self.sock, m.MetadataRequest(
            topics=tuple(m.MetadataRequestTopic(topic_id=None, name=n) for n in names),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        return {t.name: t.topic_id for t in resp.topics}

    def heartbeat(self, group: str, member: str, epoch: int, topics: list[str] | None,
                  owned: list[tuple[uuid.UUID, list[int]]] | None) -> tuple[int, int, dict[uuid.UUID, list[int]] | None]:
        m = _req("consumer_group_heartbeat", 1)
        resp = roundtrip(self.sock, m.ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=i32(epoch),
            rebalance_timeout=timedelta(milliseconds=30000 if epoch == 0 else -1),
            subscribed_topic_names=None if topics is None else tuple(topics), subscribed_topic_regex=None,
            server_assignor="range" if epoch == 0 else None,
            topic_partitions=None if owned is None else tuple(
                m.TopicPartitions(topic_id=t, partitions=tuple(i32(p) for p in ps)) for t, ps in owned)))
        assignment = None if resp.assignment is None else {
            tp.topic_id: sorted(int(p) for p in tp.partitions) for tp in resp.assignment.topic_partitions}
        return int(resp.error_code), int(resp.member_epoch), assignment

    def commit(self, group: str, member: str, epoch: int, parts: list[tuple[str, int]],
               version: int = 9) -> dict[tuple[str, int], int]:
        m = _req("offset_commit", version)
        topics: dict[str, list[int]] = {}
        for t, p in parts:
            topics.setdefault(t, []).append(p)
        resp = roundtrip(self.sock, m.OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=i32(epoch), member_id=member, group_instance_id=None,
            topics=tuple(m.OffsetCommitRequestTopic(name=t, partitions=tuple(m.OffsetCommitRequestPartition(
                partition_index=i32(p), committed_offset=i64(1), committed_metadata="") for p in ps))
                for t, ps in topics.items())))
        return {(t.name, int(p.partition_index)): int(p.error_code) for t in resp.topics for p in t.partitions}

    def fetch(self, group: str, parts: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        m = _req("offset_fetch", 7)
        topics: dict[str, list[int]] = {}
        for t, p in parts:
            topics.setdefault(t, []).append(p)
        resp = roundtrip(self.sock, m.OffsetFetchRequest(group_id=group, topics=tuple(
            m.OffsetFetchRequestTopic(name=t, partition_indexes=tuple(i32(p) for p in ps))
            for t, ps in topics.items()), require_stable=False))
        return {(t.name, int(p.partition_index)): int(p.committed_offset) for t in resp.topics for p in t.partitions}

    def txn_commit(self, tid: str, group: str, member: str, epoch: int, parts: list[tuple[str, int]]
                   ) -> dict[tuple[str, int], int]:
        init = _req("init_producer_id", 4)
        r = roundtrip(self.sock, init.InitProducerIdRequest(
            transactional_id=tid, transaction_timeout=timedelta(seconds=60), producer_id=i64(-1),
            producer_epoch=i16(-1)))
        assert r.error_code == ErrorCode.none, r
        add = _req("add_offsets_to_txn", 3)
        a = roundtrip(self.sock, add.AddOffsetsToTxnRequest(
            transactional_id=tid, producer_id=r.producer_id, producer_epoch=r.producer_epoch, group_id=group))
        assert a.error_code == ErrorCode.none, a
        m = _req("txn_offset_commit", 3)
        topics: dict[str, list[int]] = {}
        for t, p in parts:
            topics.setdefault(t, []).append(p)
        resp = roundtrip(self.sock, m.TxnOffsetCommitRequest(
            transactional_id=tid, group_id=group, producer_id=r.producer_id, producer_epoch=r.producer_epoch,
            generation_id=i32(epoch), member_id=member, group_instance_id=None,
            topics=tuple(m.TxnOffsetCommitRequestTopic(name=t, partitions=tuple(m.TxnOffsetCommitRequestPartition(
                partition_index=i32(p), committed_offset=i64(1), committed_leader_epoch=i32(-1),
                committed_metadata="") for p in ps)) for t, ps in topics.items())))
        end = _req("end_txn", 3)
        roundtrip(self.sock, end.EndTxnRequest(transactional_id=tid, producer_id=r.producer_id,
                                                producer_epoch=r.producer_epoch, committed=False))
        return {(t.name, int(p.partition_index)): int(p.error_code) for t in resp.topics for p in t.partitions}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path / "data", config={"offsets.topic.num.partitions": "3"}).start()
    try:
        yield proc
    finally:
        if proc.alive:
            proc.kill()


def _join_then_widen(w: Wire, group: str, member: str, t: str, u: str) -> None:
    """member joins on t (epoch 1, t-0/t-1 at epoch 1), then subscribes to u too (epoch 2, u-0 at 2)."""
    ids = w.topic_ids([t, u])
    err, epoch, got = w.heartbeat(group, member, 0, [t], [])
    assert (err, epoch, got) == (0, 1, {ids[t]: [0, 1]})
    err, epoch, got = w.heartbeat(group, member, 1, [t, u], [(ids[t], [0, 1])])
    assert (err, epoch, got) == (0, 2, {ids[t]: [0, 1], ids[u]: [0]})


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_commits_with_an_older_epoch_over_the_wire_and_across_a_restart(broker: BrokerProcess, how: str) -> None:
    t, u, group, member = "ae-t", "ae-u", "ae-group", uuid.uuid4().hex
    w = Wire(broker.bootstrap)
    try:
        w.create_topic(t, 2)
        w.create_topic(u, 1)
        _join_then_widen(w, group, member, t, u)

        def check() -> None:
            assert w.commit(group, member, 1, [(t, 0), (t, 1)]) == {(t, 0): 0, (t, 1): 0}
            assert w.commit(group, member, 1, [(t, 0), (u, 0)]) == {(t, 0): STALE, (u, 0): STALE}
            assert w.commit(group, member, 3, [(t, 0)]) == {(t, 0): STALE}
            assert w.commit(group, member, 2, [(t, 0), (u, 0)]) == {(t, 0): 0, (u, 0): 0}
            assert w.commit(group, member, 2, [(t, 0)], version=8) == {(t, 0): ErrorCode.unsupported_version}
            # TxnOffsetCommit applies the same rule, refusing with ILLEGAL_GENERATION.
            assert w.txn_commit("ae-tx", group, member, 1, [(t, 1)]) == {(t, 1): 0}
            assert w.txn_commit("ae-tx", group, member, 1, [(t, 1), (u, 0)]) == {
                (t, 1): ErrorCode.illegal_generation, (u, 0): ErrorCode.illegal_generation}

        check()
        # The refused commit wrote nothing: u-0 still has the offset of the accepted one.
        assert w.fetch(group, [(t, 0), (u, 0)]) == {(t, 0): 1, (u, 0): 1}
    finally:
        w.close()
    if how == "stop":
        broker.stop()
    else:
        broker.kill()
    broker.start()
    # The epochs came back from __consumer_offsets: the same answers after the restart.
    w = Wire(broker.bootstrap)
    try:
        for _ in range(100):  # the coordinator answers COORDINATOR_LOAD_IN_PROGRESS until loaded
            got = w.commit(group, member, 1, [(t, 0), (t, 1)])
            if got != {(t, 0): ErrorCode.coordinator_load_in_progress, (t, 1): ErrorCode.coordinator_load_in_progress}:
                break
            time.sleep(0.1)
        assert got == {(t, 0): 0, (t, 1): 0}
        check()
    finally:
        w.close()
