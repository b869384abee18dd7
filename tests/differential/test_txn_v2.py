# mypy: disable-error-code="arg-type,union-attr"
# (kio types fields with phantom NewTypes - i32, TopicName, i32Timedelta - and loads response
# types as unions; plain ints/strs are what they are at run time, so only the checker objects.)
"""Differential: KIP-890 transactions version 2 of strom against Apache Kafka 4.3.1.

Scenarios run on each broker over raw requests (diff_wire), each with its own transactional
ids, topics and groups: the TV2 happy path (Produce v12 adds partitions implicitly, EndTxn v5
bumps the epoch), EndTxn v5 retries, fences and wrong producer ids, EndTxn v5 on an id with
nothing open, Produce with a stale epoch after a TV2 commit, KIP-890 part 1 verification of
Produce v9-v11, TxnOffsetCommit v5 without AddOffsetsToTxn (and v4/v3 without it), EndTxn v4 on
a TV2 transaction (and v5 on a TV1 one), transactions timing out under TV2, InitProducerId
fencing an ongoing TV2 transaction, the next transaction racing the markers, KIP-360
re-initialisation, AddPartitionsToTxn v5 sent directly, malformed requests (empty
transactional id, unknown partitions), sequence numbers across epoch bumps; and, on dedicated
brokers SIGKILLed in between, the TV2 state reloaded from the transaction log.

Every answer is reduced to what must agree on both brokers: error names, producer ids and
epochs relative to the scenario's InitProducerId answer (producer ids differ between
clusters), transaction states, offsets, the batches in the log. Each observation is its own
test case, so a difference fails only its own case; Kafka's answers in ``KAFKA_EXPECTED`` are
also checked against KIP-890 so a harness mistake cannot make a case vacuous.
``STROM_DIFF_SUBJECT=kafka`` (see conftest) runs the whole file Kafka against Kafka.
"""

from __future__ import annotations

import os
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from diff_wire import WireClient, assert_case_matches, build_txn_batch, kio_schema, visible
from kafka_ref import KafkaRef
from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch.v9.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from ref_fixtures import SHARED_BROKER_CONFIG, HasBootstrap, skip_without_java

from strom.core.testing import BrokerProcess

RUN = uuid.uuid4().hex[:8]
TIMEOUT_TXN_MS = 1000  # scenario 8: Kafka's and strom's abort sweep runs every 10 s by default
Seen = dict[str, Any]


def name(code: int) -> str:
    return ErrorCode(code).name


class Rel:
    """Reduces producer ids and epochs to the scenario's InitProducerId answer (pid, epoch)."""

    def __init__(self, pid: int, epoch: int) -> None:
        self.pid, self.epoch = pid, epoch

    def ids(self, pid: int, epoch: int) -> tuple[str, int | str]:
        if pid == -1:
            return "-1", epoch
        return ("P" if pid == self.pid else "other"), (f"E{epoch - self.epoch:+d}" if epoch >= 0 else epoch)

    def end(self, answer: tuple[int, int, int]) -> tuple[Any, ...]:
        """An EndTxn answer: error name, producer id and epoch relative."""
        code, pid, epoch = answer
        return (name(code), *self.ids(pid, epoch))

    def describe(self, d: dict[str, Any]) -> tuple[Any, ...]:
        """A DescribeTransactions entry; the __consumer_offsets partition number depends on the
        broker's offsets.topic.num.partitions, so only its topic is kept."""
        topics = sorted((t, "*" if t == "__consumer_offsets" else ps) for t, ps in d["topics"])
        return (name(d["error_code"]), d["transaction_state"], *self.ids(d["producer_id"], d["producer_epoch"]),
                d["transaction_timeout_ms"], d["transaction_start_time_ms"] >= 0, topics)

    def log(self, fetched: dict[str, Any]) -> dict[str, Any]:
        """A fetched partition: its batches (control records as COMMIT/ABORT), the aborted
        transactions and the data a read_committed consumer would keep."""
        batches = []
        for b in fetched["batches"]:
            values: list[Any] = list(b["values"])
            if b["control"]:  # control record key: version int16, type int16 (0 abort, 1 commit)
                values = [{0: "ABORT", 1: "COMMIT"}.get(struct.unpack(">hh", bytes(k))[1], k) for k in values]
            batches.append((b["base_offset"], "control" if b["control"] else "data", b["transactional"],
                            *self.ids(b["producer_id"], b["producer_epoch"]), b["base_sequence"], values))
        return {"error": name(fetched["error_code"]), "high_watermark": fetched["high_watermark"],
                "last_stable_offset": fetched["last_stable_offset"],
                "aborted": [(self.ids(p, 0)[0], o) for p, o in fetched["aborted"]],
                "batches": batches, "visible": visible(fetched)}


def produce_once(c: WireClient, tid: str | None, batches: dict[tuple[str, int], bytes],
                 version: int = 12) -> dict[str, str]:
    """One Produce request: the error name per partition."""
    return {str(p): name(code) for (_, p), code in c.produce_batches(batches, version, tid).items()}


# Answers a client retries: a new topic's leader not yet known to the partition leader's
# transaction machinery, or the previous transaction's markers still being written.
RETRIABLE = frozenset({"not_enough_replicas", "not_leader_or_follower", "unknown_topic_or_partition",
                       "concurrent_transactions", "coordinator_load_in_progress", "coordinator_not_available",
                       "not_coordinator"})


def produce(c: WireClient, tid: str | None, batches: dict[tuple[str, int], bytes], version: int = 12,
            retry_on: frozenset[str] = RETRIABLE) -> dict[str, str]:
    """A Produce a client would retry on a retriable answer (the first one to a fresh topic);
    the answer that ended the retries (timing-dependent transients are not compared)."""
    deadline = time.monotonic() + 15
    while True:
        answer = produce_once(c, tid, batches, version)
        if not set(answer.values()) & retry_on or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def txn_batch(values: list[bytes], pid: int, epoch: int, seq: int) -> bytes:
    return build_txn_batch(values, pid, epoch, seq)


def txn_offset_commit(c: WireClient, version: int, tid: str, group: str, pid: int, epoch: int,
                      topic: str, offset: int, generation: int = -1, member: str = "") -> list[tuple[Any, ...]]:
    """TxnOffsetCommit (generation -1, no member, as a producer outside a group sends it)."""
    m = kio_schema("txn_offset_commit", version)
    extra: dict[str, Any] = {"generation_id": generation, "member_id": member, "group_instance_id": None} if version >= 3 else {}
    resp = c.request(m.TxnOffsetCommitRequest(
        transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch, **extra,
        topics=(m.TxnOffsetCommitRequestTopic(name=topic, partitions=(m.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="tv2"),)),)))
    return sorted((t.name, int(p.partition_index), name(p.error_code)) for t in resp.topics for p in t.partitions)


def offset_fetch(c: WireClient, group: str, topic: str, require_stable: bool) -> list[tuple[Any, ...]]:
    resp = c.request(OffsetFetchRequest(require_stable=require_stable, groups=(OffsetFetchRequestGroup(
        group_id=group, topics=(OffsetFetchRequestTopics(name=topic, partition_indexes=(0,)),)),)))
    return [(name(g.error_code), [(int(p.partition_index), int(p.committed_offset), p.metadata, name(p.error_code))
                                  for t in g.topics for p in t.partitions]) for g in resp.groups]


def offsets(c: WireClient, topic: str, partitions: int) -> list[tuple[int, int]]:
    """(high watermark, last stable offset) per partition."""
    return [(c.list_offset(topic, p, 0), c.list_offset(topic, p, 1)) for p in range(partitions)]


def start(c: WireClient, tid: str, timeout_ms: int = 60000) -> tuple[str, Rel]:
    c.wait_for_coordinator(tid, key_type=1)
    code, pid, epoch = c.init_producer_id(tid, timeout_ms)
    return name(code), Rel(pid, epoch)


def describe(c: WireClient, r: Rel, tid: str) -> tuple[Any, ...]:
    return r.describe(c.describe_transactions((tid,))[0])


def settled(c: WireClient, r: Rel, tid: str, *states: str) -> tuple[Any, ...]:
    return r.describe(c.wait_txn_state(tid, states))


# -- scenarios ---------------------------------------------------------------------------------

def s1_happy_path(c: WireClient, seen: Seen) -> None:
    tid = topic = f"tv2-happy-{RUN}"
    c.create_topic(topic, 2)
    seen["happy_init"], r = start(c, tid)
    pid, e = r.pid, r.epoch
    seen["happy_describe_after_init"] = describe(c, r, tid)
    seen["happy_produce_v12_txn1"] = produce(c, tid, {(topic, 0): txn_batch([b"c1", b"c2"], pid, e, 0),
                                                      (topic, 1): txn_batch([b"c3"], pid, e, 0)})
    seen["happy_produce_v12_txn1_second_batch"] = produce(c, tid, {(topic, 0): txn_batch([b"c4"], pid, e, 2)})
    seen["happy_describe_ongoing1"] = describe(c, r, tid)
    seen["happy_offsets_ongoing1"] = offsets(c, topic, 2)
    committed = c.end_txn(tid, pid, e, commit=True, retry_concurrent=True)
    seen["happy_end_txn_v5_commit"] = r.end(committed)
    seen["happy_describe_committed"] = settled(c, r, tid, "CompleteCommit")
    e1 = committed[2]
    seen["happy_produce_v12_txn2"] = produce(c, tid, {(topic, 0): txn_batch([b"a1"], pid, e1, 0)})
    seen["happy_describe_ongoing2"] = describe(c, r, tid)
    seen["happy_end_txn_v5_abort"] = r.end(c.end_txn(tid, pid, e1, commit=False, retry_concurrent=True))
    seen["happy_describe_aborted"] = settled(c, r, tid, "CompleteAbort")
    seen["happy_offsets_end"] = offsets(c, topic, 2)
    seen["happy_log_p0_read_committed"] = r.log(c.fetch_log(topic, 0, 1))
    seen["happy_log_p1_read_committed"] = r.log(c.fetch_log(topic, 1, 1))


def s2_retries_and_fences(c: WireClient, seen: Seen) -> None:
    tid = topic = f"tv2-retry-{RUN}"
    c.create_topic(topic, 1)
    _, r = start(c, tid)
    pid, e = r.pid, r.epoch
    seen["retry_produce_v12_future_epoch"] = produce(c, tid, {(topic, 0): txn_batch([b"f"], pid, e + 1, 0)})
    seen["retry_produce_v12"] = produce(c, tid, {(topic, 0): txn_batch([b"x"], pid, e, 0)})
    seen["retry_commit"] = r.end(c.end_txn(tid, pid, e, commit=True, retry_concurrent=True))
    seen["retry_describe_committed"] = settled(c, r, tid, "CompleteCommit")
    # The same EndTxn again (the client did not see the answer): the current ids, no new bump.
    seen["retry_commit_old_epoch"] = r.end(c.end_txn(tid, pid, e, commit=True))
    # The opposite decision as a retry.
    seen["retry_abort_old_epoch_after_commit"] = r.end(c.end_txn(tid, pid, e, commit=False))
    seen["retry_add_partitions_v3_old_epoch"] = {str(p): name(code) for (_, p), code in
                                                 c.add_partitions_v3(tid, pid, e, {topic: [0]}).items()}
    seen["retry_describe_after_retries"] = describe(c, r, tid)
    # A second transaction moves the epoch to E+2; E is then two behind.
    seen["retry_produce_v12_txn2"] = produce(c, tid, {(topic, 0): txn_batch([b"y"], pid, e + 1, 0)})
    seen["retry_commit_txn2"] = r.end(c.end_txn(tid, pid, e + 1, commit=True, retry_concurrent=True))
    seen["retry_describe_committed2"] = settled(c, r, tid, "CompleteCommit")
    seen["zombie_two_behind_commit"] = r.end(c.end_txn(tid, pid, e, commit=True))
    seen["zombie_two_behind_abort"] = r.end(c.end_txn(tid, pid, e, commit=False))
    seen["future_epoch_commit"] = r.end(c.end_txn(tid, pid, e + 5, commit=True))
    seen["wrong_pid_commit"] = r.end(c.end_txn(tid, pid + 1_000_003, e + 2, commit=True))
    seen["wrong_pid_abort"] = r.end(c.end_txn(tid, pid + 1_000_003, e + 2, commit=False))
    seen["wrong_pid_old_epoch_retry"] = r.end(c.end_txn(tid, pid + 1_000_003, e + 1, commit=True))
    seen["current_epoch_commit_after_commit"] = r.end(c.end_txn(tid, pid, e + 2, commit=True))
    seen["unknown_tid_end_txn_v5"] = r.end(c.end_txn(f"tv2-nobody-{RUN}", pid, e, commit=False))
    seen["retry_describe_end"] = describe(c, r, tid)
    seen["retry_log"] = r.log(c.fetch_log(topic, 0, 1))


def s3_nothing_open(c: WireClient, seen: Seen) -> None:
    tid = f"tv2-empty-{RUN}"
    _, r = start(c, tid)
    pid, e = r.pid, r.epoch
    seen["empty_commit_v5"] = r.end(c.end_txn(tid, pid, e, commit=True))
    seen["empty_describe_after_commit"] = describe(c, r, tid)
    seen["empty_abort_v5"] = r.end(c.end_txn(tid, pid, e, commit=False, retry_concurrent=True))
    seen["empty_describe_after_abort"] = settled(c, r, tid, "CompleteAbort")
    seen["empty_abort_v5_retry"] = r.end(c.end_txn(tid, pid, e, commit=False))
    seen["empty_abort_v5_again"] = r.end(c.end_txn(tid, pid, e + 1, commit=False, retry_concurrent=True))
    seen["empty_describe_after_second_abort"] = settled(c, r, tid, "CompleteAbort")
    seen["empty_commit_v5_after_abort"] = r.end(c.end_txn(tid, pid, e + 2, commit=True))
    seen["empty_abort_v4_after_abort"] = r.end(c.end_txn(tid, pid, e + 2, commit=False, version=4))
    seen["empty_commit_v4_after_abort"] = r.end(c.end_txn(tid, pid, e + 2, commit=True, version=4))
    seen["empty_describe_end"] = describe(c, r, tid)
    # TV1 EndTxn on a freshly initialised id.
    tid2 = f"tv2-empty-v4-{RUN}"
    _, r2 = start(c, tid2)
    seen["empty_abort_v4"] = r2.end(c.end_txn(tid2, r2.pid, r2.epoch, commit=False, version=4))
    seen["empty_commit_v4"] = r2.end(c.end_txn(tid2, r2.pid, r2.epoch, commit=True, version=4))
    seen["empty_v4_describe"] = describe(c, r2, tid2)


def s4_stale_epoch_produce(c: WireClient, seen: Seen) -> None:
    tid = topic = f"tv2-stale-{RUN}"
    c.create_topic(topic, 3)
    _, r = start(c, tid)
    pid, e = r.pid, r.epoch
    seen["stale_produce_v12_txn1"] = produce(c, tid, {(topic, 0): txn_batch([b"s1"], pid, e, 0)})
    seen["stale_commit"] = r.end(c.end_txn(tid, pid, e, commit=True, retry_concurrent=True))
    seen["stale_describe_committed"] = settled(c, r, tid, "CompleteCommit")
    seen["stale_produce_v12_marked_partition"] = produce(c, tid, {(topic, 0): txn_batch([b"z"], pid, e, 1)})
    seen["stale_produce_v12_new_partition"] = produce(c, tid, {(topic, 1): txn_batch([b"z"], pid, e, 0)})
    seen["stale_produce_v11_marked_partition"] = produce(c, tid, {(topic, 0): txn_batch([b"z"], pid, e, 1)}, 11)
    seen["stale_produce_v12_wrong_pid"] = produce(c, tid, {(topic, 2): txn_batch([b"z"], pid + 1_000_003, 0, 0)})
    seen["stale_produce_v12_unknown_tid"] = produce(c, f"tv2-nobody-{RUN}", {
        (topic, 2): txn_batch([b"z"], pid, e + 1, 0)})
    seen["stale_produce_v12_two_pids"] = produce(c, tid, {(topic, 2): txn_batch([b"z"], pid, e + 1, 0),
                                                          (topic, 1): txn_batch([b"z"], pid + 1_000_003, 0, 0)})
    seen["stale_describe_after"] = describe(c, r, tid)
    seen["stale_offsets_after"] = offsets(c, topic, 3)
    # At the bumped epoch: a sequence other than 0 is out of order on either kind of partition.
    seen["bumped_produce_v12_seq3_marked_partition"] = produce(
        c, tid, {(topic, 0): txn_batch([b"z"], pid, e + 1, 3)})
    seen["bumped_produce_v12_seq5_new_partition"] = produce(c, tid, {(topic, 1): txn_batch([b"z"], pid, e + 1, 5)})
    seen["bumped_produce_v12_seq0"] = produce(c, tid, {(topic, 0): txn_batch([b"s2"], pid, e + 1, 0)})
    seen["bumped_describe"] = describe(c, r, tid)
    seen["bumped_abort"] = r.end(c.end_txn(tid, pid, e + 1, commit=False, retry_concurrent=True))
    seen["bumped_describe_aborted"] = settled(c, r, tid, "CompleteAbort")
    seen["stale_offsets_end"] = offsets(c, topic, 3)
    seen["stale_log_p0"] = r.log(c.fetch_log(topic, 0, 1))
    seen["stale_log_p1"] = r.log(c.fetch_log(topic, 1, 1))
    # A transactional batch in a Produce without a transactional id (its own topic: if it were
    # appended, the partition's last stable offset would stay behind for good).
    topic2 = f"tv2-notid-{RUN}"
    c.create_topic(topic2, 1)
    seen["notid_produce_v12"] = produce(c, None, {(topic2, 0): txn_batch([b"n"], pid, e + 2, 0)})
    seen["notid_produce_v11"] = produce(c, None, {(topic2, 0): txn_batch([b"n"], pid, e + 2, 0)}, 11)
    seen["notid_offsets"] = offsets(c, topic2, 1)
    seen["notid_describe"] = describe(c, r, tid)


def s5_verification(c: WireClient, seen: Seen) -> None:
    tid = topic = f"tv2-verify-{RUN}"
    c.create_topic(topic, 2)
    _, r = start(c, tid)
    pid, e = r.pid, r.epoch
    for v in (11, 10, 9):
        seen[f"verify_produce_v{v}_without_add"] = produce(c, tid, {(topic, 0): txn_batch([b"v"], pid, e, 0)}, v)
    seen["verify_offsets_without_add"] = offsets(c, topic, 2)
    seen["verify_describe_without_add"] = describe(c, r, tid)
    seen["verify_add_partitions_v3"] = {str(p): name(code) for (_, p), code in
                                        c.add_partitions_v3(tid, pid, e, {topic: [0]}).items()}
    for seq, v in enumerate((11, 10, 9)):
        seen[f"verify_produce_v{v}_after_add"] = produce(
            c, tid, {(topic, 0): txn_batch([f"v{v}".encode()], pid, e, seq)}, v)
    for v in (11, 10):
        seen[f"verify_produce_v{v}_partition_not_added"] = produce(
            c, tid, {(topic, 1): txn_batch([b"n"], pid, e, 0)}, v)
    seen["verify_offsets_after_add"] = offsets(c, topic, 2)
    seen["verify_describe_ongoing"] = describe(c, r, tid)
    seen["verify_end_txn_v4_commit"] = r.end(c.end_txn(tid, pid, e, commit=True, version=4, retry_concurrent=True))
    seen["verify_describe_committed"] = settled(c, r, tid, "CompleteCommit")
    # After a TV1 commit the partition is no longer in a transaction: verification fails again.
    seen["verify_produce_v11_after_commit"] = produce(c, tid, {(topic, 0): txn_batch([b"w"], pid, e, 3)}, 11)
    seen["verify_offsets_end"] = offsets(c, topic, 2)
    seen["verify_log_p0"] = r.log(c.fetch_log(topic, 0, 1))


def s6_txn_offset_commit(c: WireClient, seen: Seen) -> None:
    tid = topic = group = f"tv2-toc-{RUN}"
    c.create_topic(topic, 1)
    c.wait_for_coordinator(group, key_type=0)
    _, r = start(c, tid)
    pid, e = r.pid, r.epoch
    seen["toc_v5_without_add_offsets"] = txn_offset_commit(c, 5, tid, group, pid, e, topic, 41)
    seen["toc_v5_second_in_txn"] = txn_offset_commit(c, 5, tid, group, pid, e, topic, 42)
    seen["toc_v5_describe_ongoing"] = describe(c, r, tid)
    seen["toc_v5_offset_fetch_stable_pending"] = offset_fetch(c, group, topic, True)
    seen["toc_v5_offset_fetch_pending"] = offset_fetch(c, group, topic, False)
    seen["toc_v5_commit"] = r.end(c.end_txn(tid, pid, e, commit=True, retry_concurrent=True))
    seen["toc_v5_describe_committed"] = settled(c, r, tid, "CompleteCommit")
    seen["toc_v5_offset_fetch_after_commit"] = offset_fetch(c, group, topic, True)
    seen["toc_v5_stale_epoch"] = txn_offset_commit(c, 5, tid, group, pid, e, topic, 43)
    seen["toc_v5_describe_after_stale"] = describe(c, r, tid)
    # The second transaction: offsets again, then aborted - they must not show.
    seen["toc_v5_txn2"] = txn_offset_commit(c, 5, tid, group, pid, e + 1, topic, 44)
    seen["toc_v5_abort"] = r.end(c.end_txn(tid, pid, e + 1, commit=False, retry_concurrent=True))
    seen["toc_v5_describe_aborted"] = settled(c, r, tid, "CompleteAbort")
    seen["toc_v5_offset_fetch_after_abort"] = offset_fetch(c, group, topic, True)

    seen["toc_v5_wrong_pid"] = txn_offset_commit(c, 5, tid, group, pid + 1_000_003, e + 2, topic, 45)
    seen["toc_v5_unknown_tid"] = txn_offset_commit(c, 5, f"tv2-toc-nobody-{RUN}", group, pid, e + 2, topic, 45)
    seen["toc_v5_offset_fetch_end"] = offset_fetch(c, group, topic, True)
    # A member and generation the (unknown) group does not have.
    tid3 = group3 = f"tv2-toc-member-{RUN}"
    c.wait_for_coordinator(group3, key_type=0)
    _, r3 = start(c, tid3)
    seen["toc_v5_unknown_member"] = txn_offset_commit(c, 5, tid3, group3, r3.pid, r3.epoch, topic, 9,
                                                      generation=5, member="nobody")
    seen["toc_v5_unknown_member_describe"] = describe(c, r3, tid3)
    seen["toc_v5_unknown_member_abort"] = r3.end(c.end_txn(tid3, r3.pid, r3.epoch, commit=False,
                                                           retry_concurrent=True))

    # TV1 versions without AddOffsetsToTxn: the group coordinator verifies only.
    tid2 = group2 = f"tv2-toc-v4-{RUN}"
    c.wait_for_coordinator(group2, key_type=0)
    _, r2 = start(c, tid2)
    for v in (4, 3):
        seen[f"toc_v{v}_without_add_offsets"] = txn_offset_commit(c, v, tid2, group2, r2.pid, r2.epoch, topic, 7)
    seen["toc_v4_describe"] = describe(c, r2, tid2)
    seen["toc_v4_offset_fetch"] = offset_fetch(c, group2, topic, True)
    added = c.request(AddOffsetsToTxnRequest(transactional_id=tid2, producer_id=r2.pid, producer_epoch=r2.epoch,
                                             group_id=group2))
    seen["toc_v4_add_offsets"] = name(added.error_code)
    seen["toc_v4_after_add_offsets"] = txn_offset_commit(c, 4, tid2, group2, r2.pid, r2.epoch, topic, 8)
    seen["toc_v4_commit_v4"] = r2.end(c.end_txn(tid2, r2.pid, r2.epoch, commit=True, version=4,
                                                retry_concurrent=True))
    seen["toc_v4_describe_committed"] = settled(c, r2, tid2, "CompleteCommit")
    seen["toc_v4_offset_fetch_after_commit"] = offset_fetch(c, group2, topic, True)


def s7_mixed_versions(c: WireClient, seen: Seen) -> None:
    tid = topic = f"tv2-mix-{RUN}"
    c.create_topic(topic, 1)
    _, r = start(c, tid)
    pid, e = r.pid, r.epoch
    seen["mix_produce_v12"] = produce(c, tid, {(topic, 0): txn_batch([b"m1"], pid, e, 0)})
    seen["mix_end_txn_v4_commit"] = r.end(c.end_txn(tid, pid, e, commit=True, version=4, retry_concurrent=True))
    seen["mix_describe_committed"] = settled(c, r, tid, "CompleteCommit")
    seen["mix_end_txn_v4_commit_retry"] = r.end(c.end_txn(tid, pid, e, commit=True, version=4))
    seen["mix_end_txn_v5_commit_same_epoch"] = r.end(c.end_txn(tid, pid, e, commit=True))
    # The marker kept the epoch: the next batch continues the sequence (or is refused).
    seen["mix_produce_v12_same_epoch_seq1"] = produce(c, tid, {(topic, 0): txn_batch([b"m2"], pid, e, 1)})
    seen["mix_describe_after_produce"] = describe(c, r, tid)
    seen["mix_end_txn_v5_abort"] = r.end(c.end_txn(tid, pid, e, commit=False, retry_concurrent=True))
    seen["mix_describe_aborted"] = settled(c, r, tid, "CompleteAbort")
    seen["mix_log"] = r.log(c.fetch_log(topic, 0, 1))

    # The other way round: a TV1 transaction (AddPartitionsToTxn v3, Produce v11) ended by EndTxn v5.
    tid2 = topic2 = f"tv2-mix-tv1-{RUN}"
    c.create_topic(topic2, 1)
    _, r2 = start(c, tid2)
    seen["mix_tv1_add_partitions_v3"] = {str(p): name(code) for (_, p), code in
                                         c.add_partitions_v3(tid2, r2.pid, r2.epoch, {topic2: [0]}).items()}
    seen["mix_tv1_produce_v11"] = produce(c, tid2, {(topic2, 0): txn_batch([b"t1"], r2.pid, r2.epoch, 0)}, 11)
    seen["mix_tv1_end_txn_v5_commit"] = r2.end(c.end_txn(tid2, r2.pid, r2.epoch, commit=True, retry_concurrent=True))
    seen["mix_tv1_describe_committed"] = settled(c, r2, tid2, "CompleteCommit")
    seen["mix_tv1_log"] = r2.log(c.fetch_log(topic2, 0, 1))


def s9_init_fences_ongoing(c: WireClient, seen: Seen) -> None:
    """InitProducerId for an id with a TV2 transaction in flight: the coordinator aborts it."""
    tid = topic = f"tv2-fence-{RUN}"
    c.create_topic(topic, 1)
    _, r = start(c, tid)
    pid, e = r.pid, r.epoch
    seen["fence_produce_v12"] = produce(c, tid, {(topic, 0): txn_batch([b"f1"], pid, e, 0)})
    seen["fence_init_first_answer"] = r.end(c.init_producer_id(tid, wait=0))
    seen["fence_init"] = r.end(c.init_producer_id(tid))
    seen["fence_describe"] = settled(c, r, tid, "Empty")
    seen["fence_old_produce_v12"] = produce(c, tid, {(topic, 0): txn_batch([b"f2"], pid, e, 1)})
    seen["fence_old_end_txn_v5_abort"] = r.end(c.end_txn(tid, pid, e, commit=False))
    seen["fence_old_end_txn_v5_commit"] = r.end(c.end_txn(tid, pid, e, commit=True))
    seen["fence_abort_epoch_end_txn_v5_abort"] = r.end(c.end_txn(tid, pid, e + 1, commit=False))
    seen["fence_new_produce_v12"] = produce(c, tid, {(topic, 0): txn_batch([b"f3"], pid, e + 2, 0)})
    seen["fence_new_commit"] = r.end(c.end_txn(tid, pid, e + 2, commit=True, retry_concurrent=True))
    seen["fence_describe_end"] = settled(c, r, tid, "CompleteCommit")
    seen["fence_log"] = r.log(c.fetch_log(topic, 0, 1))


def s10_next_txn_races_markers(c: WireClient, seen: Seen) -> None:
    """The next transaction's first Produce right after EndTxn v5 answers, while the markers may
    still be written: Kafka's leader retries CONCURRENT_TRANSACTIONS internally (up to 100 ms)."""
    tid = topic = f"tv2-race-{RUN}"
    c.create_topic(topic, 1)
    _, r = start(c, tid)
    pid, e = r.pid, r.epoch
    seen["race_produce_first"] = produce(c, tid, {(topic, 0): txn_batch([b"r"], pid, e, 0)})
    answers = []
    for i in range(3):  # each round commits the open transaction and at once opens the next
        ended = c.end_txn(tid, pid, e + i, commit=True, retry_concurrent=True)
        answers.append((r.end(ended), produce_once(c, tid, {(topic, 0): txn_batch([b"q"], pid, e + i + 1, 0)})))
        settled(c, r, tid, "Ongoing", "CompleteCommit")
    seen["race_produce_right_after_commit"] = answers
    seen["race_abort"] = r.end(c.end_txn(tid, pid, e + 3, commit=False, retry_concurrent=True))
    seen["race_describe_end"] = settled(c, r, tid, "CompleteAbort")


def s11_reinit_with_expected_ids(c: WireClient, seen: Seen) -> None:
    """InitProducerId carrying the ids the producer holds (KIP-360) after TV2 commits."""
    tid = topic = f"tv2-reinit-{RUN}"
    c.create_topic(topic, 1)
    _, r = start(c, tid)
    pid, e = r.pid, r.epoch
    seen["reinit_produce_v12"] = produce(c, tid, {(topic, 0): txn_batch([b"i"], pid, e, 0)})
    seen["reinit_commit"] = r.end(c.end_txn(tid, pid, e, commit=True, retry_concurrent=True))
    settled(c, r, tid, "CompleteCommit")
    for step, expected in (("pre_commit_epoch", e), ("current_epoch", e + 1), ("current_epoch_again", e + 1),
                           ("two_behind", e), ("ahead", e + 9)):
        seen[f"reinit_{step}"] = r.end(c.init_producer_id(tid, producer_id=pid, producer_epoch=expected))
    seen["reinit_wrong_pid"] = r.end(c.init_producer_id(tid, producer_id=pid + 1_000_003, producer_epoch=e + 2))
    seen["reinit_describe"] = settled(c, r, tid, "Empty", "CompleteCommit")


def s12_add_partitions_v5(c: WireClient, seen: Seen) -> None:
    """AddPartitionsToTxn v5, the batched request a partition leader sends the coordinator
    (VerifyOnly for Produce <= 11, a real add for Produce v12), sent directly."""
    tid = topic = f"tv2-apt5-{RUN}"
    c.create_topic(topic, 2)
    _, r = start(c, tid)
    pid, e = r.pid, r.epoch

    def add(*txns: tuple[str, int, int, bool, dict[str, list[int]]]) -> tuple[Any, ...]:
        top, per_txn = c.add_partitions_v5(list(txns))
        return name(top), sorted((t.replace(RUN, "RUN"), p, name(code))
                                 for t, parts in per_txn.items() for (_, p), code in parts.items())

    seen["apt5_verify_empty_txn"] = add((tid, pid, e, True, {topic: [0]}))
    seen["apt5_add"] = add((tid, pid, e, False, {topic: [0]}))
    seen["apt5_describe_ongoing"] = describe(c, r, tid)
    seen["apt5_verify_added_and_not"] = add((tid, pid, e, True, {topic: [0, 1]}))
    seen["apt5_add_stale_epoch"] = add((tid, pid, e - 1, False, {topic: [1]}))
    seen["apt5_add_wrong_pid"] = add((tid, pid + 1_000_003, e, False, {topic: [1]}))
    seen["apt5_verify_wrong_epoch"] = add((tid, pid, e + 1, True, {topic: [0]}))
    seen["apt5_two_txns"] = add((tid, pid, e, False, {topic: [1]}),
                                (f"tv2-apt5-nobody-{RUN}", pid, e, False, {topic: [0]}))
    seen["apt5_describe_after"] = describe(c, r, tid)
    seen["apt5_produce_v11_added"] = produce(c, tid, {(topic, 0): txn_batch([b"p"], pid, e, 0)}, 11)
    seen["apt5_commit_v5"] = r.end(c.end_txn(tid, pid, e, commit=True, retry_concurrent=True))
    seen["apt5_describe_committed"] = settled(c, r, tid, "CompleteCommit")
    seen["apt5_verify_after_commit"] = add((tid, pid, e + 1, True, {topic: [0]}))
    seen["apt5_log_p1"] = r.log(c.fetch_log(topic, 1, 1))


def s13_edge_requests(c: WireClient, seen: Seen) -> None:
    """Requests a coordinator must refuse before looking anything up: an empty transactional id
    (Kafka: INVALID_REQUEST on every transactional API), an unknown partition in a Produce v12
    (not added to the transaction), EndTxn v5 with producer id -1."""
    tid = topic = group = f"tv2-edge-{RUN}"
    c.create_topic(topic, 2)
    c.wait_for_coordinator(group, key_type=0)
    _, r = start(c, tid)
    pid, e = r.pid, r.epoch
    for v in (12, 11):
        seen[f"edge_empty_tid_produce_v{v}"] = produce(c, "", {(topic, 1): txn_batch([b"a"], pid, e, 0)}, v)
    for v in (5, 4):
        seen[f"edge_empty_tid_end_txn_v{v}"] = r.end(c.end_txn("", pid, e, commit=False, version=v))
        seen[f"edge_empty_tid_txn_offset_commit_v{v}"] = txn_offset_commit(c, v, "", group, pid, e, topic, 1)
    seen["edge_empty_tid_init"] = r.end(c.init_producer_id("", wait=0))
    top, per_txn = c.add_partitions_v5([("", pid, e, False, {topic: [0]})])
    seen["edge_empty_tid_add_partitions_v5"] = name(top), {t: {str(p): name(code) for (_, p), code in parts.items()}
                                                          for t, parts in per_txn.items()}
    seen["edge_empty_tid_add_partitions_v3"] = {str(p): name(code) for (_, p), code in
                                                c.add_partitions_v3("", pid, e, {topic: [0]}).items()}
    seen["edge_describe_after_empty_tid"] = describe(c, r, tid)
    seen["edge_produce_v12_unknown_partition"] = produce(
        c, tid, {(topic, 0): txn_batch([b"a"], pid, e, 0), (topic, 7): txn_batch([b"a"], pid, e, 0)},
        retry_on=RETRIABLE - {"unknown_topic_or_partition"})
    seen["edge_produce_v12_unknown_topic"] = produce_once(c, tid, {(f"{topic}-missing", 0): txn_batch(
        [b"a"], pid, e, 0)})
    seen["edge_describe_after_unknown_partition"] = describe(c, r, tid)
    seen["edge_end_txn_v5_no_pid"] = r.end(c.end_txn(tid, -1, e, commit=True))
    seen["edge_commit"] = r.end(c.end_txn(tid, pid, e, commit=True, retry_concurrent=True))
    seen["edge_describe_committed"] = settled(c, r, tid, "CompleteCommit")
    seen["edge_log_p0"] = r.log(c.fetch_log(topic, 0, 1))


def s14_sequences(c: WireClient, seen: Seen) -> None:
    """Sequence numbers in a TV2 transaction: duplicates, gaps, and the first batch after an
    EndTxn v5 abort that bumped the epoch without writing markers (nothing was open)."""
    tid = topic = f"tv2-seq-{RUN}"
    c.create_topic(topic, 2)
    _, r = start(c, tid)
    pid, e = r.pid, r.epoch
    first = txn_batch([b"a"], pid, e, 0)
    seen["seq_first"] = produce(c, tid, {(topic, 0): first})
    seen["seq_duplicate"] = produce_once(c, tid, {(topic, 0): first})
    seen["seq_gap"] = produce_once(c, tid, {(topic, 0): txn_batch([b"g"], pid, e, 5)})
    seen["seq_next"] = produce_once(c, tid, {(topic, 0): txn_batch([b"b"], pid, e, 1)})
    seen["seq_duplicate_older"] = produce_once(c, tid, {(topic, 0): first})
    seen["seq_end_txn_v4_commit"] = r.end(c.end_txn(tid, pid, e, commit=True, version=4, retry_concurrent=True))
    settled(c, r, tid, "CompleteCommit")
    seen["seq_empty_abort_v5"] = r.end(c.end_txn(tid, pid, e, commit=False, retry_concurrent=True))
    settled(c, r, tid, "CompleteAbort")
    seen["seq_bumped_epoch_seq2"] = produce_once(c, tid, {(topic, 0): txn_batch([b"x"], pid, e + 1, 2)})
    seen["seq_bumped_epoch_seq0"] = produce_once(c, tid, {(topic, 0): txn_batch([b"y"], pid, e + 1, 0)})
    seen["seq_idempotent_batch_in_txn"] = produce(c, tid, {(topic, 1): build_txn_batch(
        [b"i"], pid, e + 1, 0, transactional=False)})
    seen["seq_describe"] = describe(c, r, tid)
    seen["seq_commit"] = r.end(c.end_txn(tid, pid, e + 1, commit=True, retry_concurrent=True))
    settled(c, r, tid, "CompleteCommit")
    seen["seq_log_p0"] = r.log(c.fetch_log(topic, 0, 1))
    seen["seq_log_p1"] = r.log(c.fetch_log(topic, 1, 1))


def s8_timeout_start(c: WireClient, seen: Seen) -> tuple[str, str, Rel, Rel]:
    """Begins two transactions with a 1 s timeout, one with records and one with only offsets
    (TxnOffsetCommit v5); the coordinator's abort sweep ends them later."""
    tid = topic = f"tv2-timeout-{RUN}"
    c.create_topic(topic, 2)
    seen["timeout_init"], r = start(c, tid, TIMEOUT_TXN_MS)
    seen["timeout_produce_v12"] = produce(c, tid, {(topic, 0): txn_batch([b"t"], r.pid, r.epoch, 0)})
    tid2 = f"tv2-timeout-offsets-{RUN}"
    c.wait_for_coordinator(tid2, key_type=0)
    _, r2 = start(c, tid2, TIMEOUT_TXN_MS)
    seen["timeout_offsets_txn_offset_commit_v5"] = txn_offset_commit(c, 5, tid2, tid2, r2.pid, r2.epoch, topic, 5)
    return tid, topic, r, r2


def s8_timeout_finish(c: WireClient, seen: Seen, tid: str, topic: str, r: Rel, r2: Rel) -> None:
    tid2 = f"tv2-timeout-offsets-{RUN}"
    seen["timeout_offsets_describe_aborted"] = r2.describe(c.wait_txn_state(tid2, ("CompleteAbort",), timeout=60))
    seen["timeout_offsets_offset_fetch"] = offset_fetch(c, tid2, topic, True)
    seen["timeout_offsets_stale_txn_offset_commit_v5"] = txn_offset_commit(c, 5, tid2, tid2, r2.pid, r2.epoch,
                                                                           topic, 6)
    seen["timeout_offsets_end_txn_v5_abort_old_epoch"] = r2.end(c.end_txn(tid2, r2.pid, r2.epoch, commit=False))
    pid, e = r.pid, r.epoch
    seen["timeout_describe_aborted"] = r.describe(c.wait_txn_state(tid, ("CompleteAbort",), timeout=60))
    seen["timeout_produce_v12_stale_marked_partition"] = produce(c, tid, {(topic, 0): txn_batch([b"u"], pid, e, 1)})
    seen["timeout_produce_v12_stale_new_partition"] = produce(c, tid, {(topic, 1): txn_batch([b"u"], pid, e, 0)})
    seen["timeout_end_txn_v5_commit_old_epoch"] = r.end(c.end_txn(tid, pid, e, commit=True))
    seen["timeout_end_txn_v5_abort_old_epoch"] = r.end(c.end_txn(tid, pid, e, commit=False))
    seen["timeout_describe_after_abort"] = describe(c, r, tid)
    seen["timeout_produce_v12_new_epoch"] = produce(c, tid, {(topic, 0): txn_batch([b"t2"], pid, e + 1, 0)})
    seen["timeout_commit_new_epoch"] = r.end(c.end_txn(tid, pid, e + 1, commit=True, retry_concurrent=True))
    seen["timeout_describe_end"] = settled(c, r, tid, "CompleteCommit")
    seen["timeout_log_p0"] = r.log(c.fetch_log(topic, 0, 1))


def observe(bootstrap: str) -> Seen:
    """All scenarios on one broker. A scenario that raises (a broker that never reaches a state,
    an undecodable answer) is recorded under "crashed" and the others still run."""
    seen: Seen = {"crashed": []}

    def run(step: Any, *args: Any) -> Any:
        try:
            return step(*args)
        except Exception as exc:  # recorded, and reported by test_no_scenario_crashed
            seen["crashed"].append(f"{step.__name__}: {exc!r}")
            return None

    with WireClient(bootstrap) as c:
        # Scenario 8 starts first: its transaction times out while the others run.
        timeout_txn = run(s8_timeout_start, c, seen)
        for scenario in (s1_happy_path, s2_retries_and_fences, s3_nothing_open, s4_stale_epoch_produce,
                         s5_verification, s6_txn_offset_commit, s7_mixed_versions, s9_init_fences_ongoing,
                         s10_next_txn_races_markers, s11_reinit_with_expected_ids,
                         s12_add_partitions_v5, s13_edge_requests, s14_sequences):
            run(scenario, c, seen)
        if timeout_txn is not None:
            run(s8_timeout_finish, c, seen, *timeout_txn)
    return seen


# -- across a crash: the TV2 transaction state reloaded from the transaction log ----------------

def restart_before(c: WireClient, seen: Seen) -> dict[str, tuple[str, Rel]]:
    """Transactional ids in CompleteCommit, Ongoing, CompleteAbort (empty abort), and a
    CompleteCommit one for a KIP-360 re-initialisation, all at TV2, before the broker dies."""
    topic = f"tv2-crash-{RUN}"
    c.create_topic(topic, 2)
    ids: dict[str, tuple[str, Rel]] = {}
    for role in ("committed", "ongoing", "aborted", "reinit"):
        tid = f"tv2-crash-{role}-{RUN}"
        _, r = start(c, tid)
        ids[role] = tid, r
        if role == "aborted":
            seen[f"crash_{role}_end"] = r.end(c.end_txn(tid, r.pid, r.epoch, commit=False, retry_concurrent=True))
            settled(c, r, tid, "CompleteAbort")
            continue
        seen[f"crash_{role}_produce"] = produce(c, tid, {(topic, 0): txn_batch([role.encode()], r.pid, r.epoch, 0)})
        if role != "ongoing":
            seen[f"crash_{role}_end"] = r.end(c.end_txn(tid, r.pid, r.epoch, commit=True, retry_concurrent=True))
            settled(c, r, tid, "CompleteCommit")  # its marker before the next one's data: one log order
    seen["crash_offsets_before"] = offsets(c, topic, 1)
    return ids


def restart_after(c: WireClient, seen: Seen, ids: dict[str, tuple[str, Rel]]) -> None:
    topic = f"tv2-crash-{RUN}"
    deadline = time.monotonic() + 120
    for tid, _ in ids.values():  # the coordinator reloads its partitions after the restart
        c.wait_for_coordinator(tid, key_type=1, timeout=120)
        while c.describe_transactions((tid,))[0]["error_code"] != 0:
            assert time.monotonic() < deadline, f"{tid} not loaded"
            time.sleep(0.2)
    for role, (tid, r) in ids.items():
        seen[f"crash_{role}_describe_after"] = describe(c, r, tid)
    seen["crash_offsets_after"] = offsets(c, topic, 1)
    tid, r = ids["committed"]
    seen["crash_committed_end_v5_retry"] = r.end(c.end_txn(tid, r.pid, r.epoch, commit=True))
    seen["crash_committed_end_v5_opposite"] = r.end(c.end_txn(tid, r.pid, r.epoch, commit=False))
    tid, r = ids["aborted"]
    seen["crash_aborted_end_v5_retry"] = r.end(c.end_txn(tid, r.pid, r.epoch, commit=False))
    seen["crash_aborted_end_v5_commit"] = r.end(c.end_txn(tid, r.pid, r.epoch + 1, commit=True))
    tid, r = ids["reinit"]  # the last epoch before the bump is not in the log: is it still a retry?
    seen["crash_reinit_pre_commit_epoch"] = r.end(c.init_producer_id(tid, producer_id=r.pid, producer_epoch=r.epoch))
    tid, r = ids["ongoing"]
    seen["crash_ongoing_produce_again"] = produce(c, tid, {(topic, 0): txn_batch([b"again"], r.pid, r.epoch, 1)})
    seen["crash_ongoing_commit"] = r.end(c.end_txn(tid, r.pid, r.epoch, commit=True, retry_concurrent=True))
    seen["crash_ongoing_describe_end"] = settled(c, r, tid, "CompleteCommit")
    seen["crash_log"] = r.log(c.fetch_log(topic, 0, 1))


@pytest.fixture(scope="module")
def crash_observations(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Seen, Seen]]:
    """Dedicated brokers (the shared ones must not be killed): each is SIGKILLed between the two
    halves and started again on the same data."""
    skip_without_java()
    found: list[Seen] = []
    subject_is_kafka = os.environ.get("STROM_DIFF_SUBJECT") == "kafka"
    for kind in ("kafka", "strom"):
        seen: Seen = {"crashed": []}
        data = tmp_path_factory.mktemp(f"tv2-crash-{kind}")
        broker: Any = (KafkaRef(data, config=SHARED_BROKER_CONFIG) if kind == "kafka" or subject_is_kafka
                       else BrokerProcess(data, config=SHARED_BROKER_CONFIG))
        with broker:
            try:
                with WireClient(broker.bootstrap) as c:
                    ids = restart_before(c, seen)
                broker.kill()
                broker.start()
                with WireClient(broker.bootstrap) as c:
                    restart_after(c, seen, ids)
            except Exception as exc:  # recorded, and reported by test_crash_no_scenario_crashed
                seen["crashed"].append(repr(exc))
        found.append(seen)
    theirs, ours = found
    yield ours, theirs


CRASH_CASES = [
    "crash_committed_produce", "crash_committed_end", "crash_ongoing_produce", "crash_aborted_end",
    "crash_reinit_produce", "crash_reinit_end", "crash_offsets_before",
    "crash_committed_describe_after", "crash_ongoing_describe_after", "crash_aborted_describe_after",
    "crash_reinit_describe_after", "crash_offsets_after", "crash_committed_end_v5_retry",
    "crash_committed_end_v5_opposite", "crash_aborted_end_v5_retry", "crash_aborted_end_v5_commit",
    "crash_reinit_pre_commit_epoch", "crash_ongoing_produce_again", "crash_ongoing_commit",
    "crash_ongoing_describe_end", "crash_log",
]


# -- tests -------------------------------------------------------------------------------------

N, ITS, IPE = "none", "invalid_txn_state", "invalid_producer_epoch"

# KIP-890 (and the 4.3.1 coordinator) documents these; the reference must give them, otherwise
# the comparison with strom would prove nothing.
KAFKA_EXPECTED: dict[str, Any] = {
    "happy_produce_v12_txn1": {"0": N, "1": N},
    "happy_end_txn_v5_commit": (N, "P", "E+1"),
    "happy_produce_v12_txn2": {"0": N},
    "happy_end_txn_v5_abort": (N, "P", "E+2"),
    "retry_commit_old_epoch": (N, "P", "E+1"),
    "retry_abort_old_epoch_after_commit": (ITS, "-1", -1),
    "zombie_two_behind_commit": ("producer_fenced", "-1", -1),
    "wrong_pid_commit": ("invalid_producer_id_mapping", "-1", -1),
    "empty_commit_v5": (ITS, "-1", -1),
    "empty_abort_v5": (N, "P", "E+1"),
    "stale_produce_v12_marked_partition": {"0": IPE},
    "toc_v5_without_add_offsets": [(f"tv2-toc-{RUN}", 0, N)],
    "timeout_describe_aborted": (N, "CompleteAbort", "P", "E+1", TIMEOUT_TXN_MS, True, []),
    "timeout_end_txn_v5_commit_old_epoch": (ITS, "-1", -1),
    "timeout_end_txn_v5_abort_old_epoch": (N, "P", "E+1"),
    "timeout_produce_v12_stale_new_partition": {"1": IPE},
    # KIP-890 part 1: verify-only for Produce <= 11 (v11 may say TRANSACTION_ABORTABLE).
    "verify_produce_v11_without_add": {"0": "transaction_abortable"},
    "verify_produce_v10_without_add": {"0": ITS},
    "toc_v4_without_add_offsets": [(f"tv2-toc-{RUN}", 0, "transaction_abortable")],
    "toc_v3_without_add_offsets": [(f"tv2-toc-{RUN}", 0, ITS)],
    # InitProducerId on an Ongoing transaction: the abort bumps once, the init once more.
    "fence_init": (N, "P", "E+2"),
    # A TV2-verified first batch of a producer in a partition must start at sequence 0.
    "bumped_produce_v12_seq5_new_partition": {"1": "out_of_order_sequence_number"},
    "notid_produce_v12": {"0": "transactional_id_authorization_failed"},
    "edge_empty_tid_end_txn_v5": ("invalid_request", "-1", -1),
}


@pytest.fixture(scope="module")
def observations(strom: HasBootstrap, kafka: KafkaRef) -> Iterator[tuple[Seen, Seen]]:
    theirs = observe(kafka.bootstrap)
    ours = observe(strom.bootstrap)
    yield ours, theirs


CASES = [
    "timeout_init", "timeout_produce_v12", "timeout_offsets_txn_offset_commit_v5", "happy_init",
    "happy_describe_after_init", "happy_produce_v12_txn1", "happy_produce_v12_txn1_second_batch",
    "happy_describe_ongoing1", "happy_offsets_ongoing1", "happy_end_txn_v5_commit", "happy_describe_committed",
    "happy_produce_v12_txn2", "happy_describe_ongoing2", "happy_end_txn_v5_abort", "happy_describe_aborted",
    "happy_offsets_end", "happy_log_p0_read_committed", "happy_log_p1_read_committed",
    "retry_produce_v12_future_epoch", "retry_produce_v12", "retry_commit", "retry_describe_committed",
    "retry_commit_old_epoch", "retry_abort_old_epoch_after_commit", "retry_add_partitions_v3_old_epoch",
    "retry_describe_after_retries", "retry_produce_v12_txn2", "retry_commit_txn2", "retry_describe_committed2",
    "zombie_two_behind_commit", "zombie_two_behind_abort", "future_epoch_commit", "wrong_pid_commit",
    "wrong_pid_abort", "wrong_pid_old_epoch_retry", "current_epoch_commit_after_commit",
    "unknown_tid_end_txn_v5", "retry_describe_end", "retry_log", "empty_commit_v5",
    "empty_describe_after_commit", "empty_abort_v5", "empty_describe_after_abort", "empty_abort_v5_retry",
    "empty_abort_v5_again", "empty_describe_after_second_abort", "empty_commit_v5_after_abort",
    "empty_abort_v4_after_abort", "empty_commit_v4_after_abort", "empty_describe_end", "empty_abort_v4",
    "empty_commit_v4", "empty_v4_describe", "stale_produce_v12_txn1", "stale_commit",
    "stale_describe_committed", "stale_produce_v12_marked_partition", "stale_produce_v12_new_partition",
    "stale_produce_v11_marked_partition", "stale_produce_v12_wrong_pid", "stale_produce_v12_unknown_tid",
    "stale_produce_v12_two_pids", "stale_describe_after", "stale_offsets_after",
    "bumped_produce_v12_seq3_marked_partition", "bumped_produce_v12_seq5_new_partition",
    "bumped_produce_v12_seq0", "bumped_describe", "bumped_abort", "bumped_describe_aborted",
    "stale_offsets_end", "stale_log_p0", "stale_log_p1", "notid_produce_v12", "notid_produce_v11",
    "notid_offsets", "notid_describe", "verify_produce_v11_without_add", "verify_produce_v10_without_add",
    "verify_produce_v9_without_add", "verify_offsets_without_add", "verify_describe_without_add",
    "verify_add_partitions_v3", "verify_produce_v11_after_add", "verify_produce_v10_after_add",
    "verify_produce_v9_after_add", "verify_produce_v11_partition_not_added",
    "verify_produce_v10_partition_not_added", "verify_offsets_after_add", "verify_describe_ongoing",
    "verify_end_txn_v4_commit", "verify_describe_committed", "verify_produce_v11_after_commit",
    "verify_offsets_end", "verify_log_p0", "toc_v5_without_add_offsets", "toc_v5_second_in_txn",
    "toc_v5_describe_ongoing", "toc_v5_offset_fetch_stable_pending", "toc_v5_offset_fetch_pending",
    "toc_v5_commit", "toc_v5_describe_committed", "toc_v5_offset_fetch_after_commit", "toc_v5_stale_epoch",
    "toc_v5_describe_after_stale", "toc_v5_txn2", "toc_v5_abort", "toc_v5_describe_aborted",
    "toc_v5_offset_fetch_after_abort", "toc_v5_wrong_pid", "toc_v5_unknown_tid", "toc_v5_offset_fetch_end",
    "toc_v5_unknown_member", "toc_v5_unknown_member_describe", "toc_v5_unknown_member_abort",
    "toc_v4_without_add_offsets", "toc_v3_without_add_offsets", "toc_v4_describe", "toc_v4_offset_fetch",
    "toc_v4_add_offsets", "toc_v4_after_add_offsets", "toc_v4_commit_v4", "toc_v4_describe_committed",
    "toc_v4_offset_fetch_after_commit", "mix_produce_v12", "mix_end_txn_v4_commit", "mix_describe_committed",
    "mix_end_txn_v4_commit_retry", "mix_end_txn_v5_commit_same_epoch", "mix_produce_v12_same_epoch_seq1",
    "mix_describe_after_produce", "mix_end_txn_v5_abort", "mix_describe_aborted", "mix_log",
    "mix_tv1_add_partitions_v3", "mix_tv1_produce_v11", "mix_tv1_end_txn_v5_commit",
    "mix_tv1_describe_committed", "mix_tv1_log", "fence_produce_v12", "fence_init_first_answer", "fence_init",
    "fence_describe", "fence_old_produce_v12", "fence_old_end_txn_v5_abort", "fence_old_end_txn_v5_commit",
    "fence_abort_epoch_end_txn_v5_abort", "fence_new_produce_v12", "fence_new_commit", "fence_describe_end",
    "fence_log", "race_produce_first", "race_produce_right_after_commit", "race_abort", "race_describe_end",
    "reinit_produce_v12", "reinit_commit", "reinit_pre_commit_epoch", "reinit_current_epoch",
    "reinit_current_epoch_again", "reinit_two_behind", "reinit_ahead", "reinit_wrong_pid", "reinit_describe",
    "apt5_verify_empty_txn", "apt5_add", "apt5_describe_ongoing", "apt5_verify_added_and_not",
    "apt5_add_stale_epoch", "apt5_add_wrong_pid", "apt5_verify_wrong_epoch", "apt5_two_txns",
    "apt5_describe_after", "apt5_produce_v11_added", "apt5_commit_v5", "apt5_describe_committed",
    "apt5_verify_after_commit", "apt5_log_p1", "edge_empty_tid_produce_v12", "edge_empty_tid_produce_v11",
    "edge_empty_tid_end_txn_v5", "edge_empty_tid_txn_offset_commit_v5", "edge_empty_tid_end_txn_v4",
    "edge_empty_tid_txn_offset_commit_v4", "edge_empty_tid_init", "edge_empty_tid_add_partitions_v5",
    "edge_empty_tid_add_partitions_v3", "edge_describe_after_empty_tid", "edge_produce_v12_unknown_partition",
    "edge_produce_v12_unknown_topic", "edge_describe_after_unknown_partition", "edge_end_txn_v5_no_pid",
    "edge_commit", "edge_describe_committed", "edge_log_p0", "seq_first", "seq_duplicate", "seq_gap",
    "seq_next", "seq_duplicate_older", "seq_end_txn_v4_commit", "seq_empty_abort_v5", "seq_bumped_epoch_seq2",
    "seq_bumped_epoch_seq0", "seq_idempotent_batch_in_txn", "seq_describe", "seq_commit", "seq_log_p0",
    "seq_log_p1", "timeout_offsets_describe_aborted", "timeout_offsets_offset_fetch",
    "timeout_offsets_stale_txn_offset_commit_v5", "timeout_offsets_end_txn_v5_abort_old_epoch",
    "timeout_describe_aborted", "timeout_produce_v12_stale_marked_partition",
    "timeout_produce_v12_stale_new_partition", "timeout_end_txn_v5_commit_old_epoch",
    "timeout_end_txn_v5_abort_old_epoch", "timeout_describe_after_abort", "timeout_produce_v12_new_epoch",
    "timeout_commit_new_epoch", "timeout_describe_end", "timeout_log_p0",
]


@pytest.mark.parametrize("case", CASES)
def test_matches_kafka(case: str, observations: tuple[Seen, Seen]) -> None:
    ours, theirs = observations
    assert_case_matches(case, ours, theirs, KAFKA_EXPECTED)


@pytest.mark.parametrize("broker", ["strom", "kafka"])
def test_no_scenario_crashed(broker: str, observations: tuple[Seen, Seen]) -> None:
    ours, theirs = observations
    assert (ours if broker == "strom" else theirs)["crashed"] == []


@pytest.mark.slow  # its fixture crashes and restarts both brokers once: 31 s on the 2-CPU machine
@pytest.mark.parametrize("case", CRASH_CASES)
def test_crash_matches_kafka(case: str, crash_observations: tuple[Seen, Seen]) -> None:
    test_matches_kafka(case, crash_observations)


@pytest.mark.parametrize("broker", ["strom", "kafka"])
def test_crash_no_scenario_crashed(broker: str, crash_observations: tuple[Seen, Seen]) -> None:
    test_no_scenario_crashed(broker, crash_observations)


def test_every_crash_observation_is_a_case(crash_observations: tuple[Seen, Seen]) -> None:
    ours, theirs = crash_observations
    assert set(theirs) - {"crashed"} == set(CRASH_CASES)
    assert set(ours) - {"crashed"} <= set(CRASH_CASES)


def test_every_observation_is_a_case(observations: tuple[Seen, Seen]) -> None:
    ours, theirs = observations
    assert set(theirs) - {"crashed"} == set(CASES)
    assert set(ours) - {"crashed"} <= set(CASES)
