# mypy: disable-error-code="arg-type,union-attr"
# (kio types fields with phantom NewTypes; plain ints/strs are what they are at run time.)
"""Differential: OffsetCommit with older member epochs in a KIP-848 group (KIP-1251, Kafka 4.3).

One member joins a consumer group over raw ConsumerGroupHeartbeat, gets topic ``t`` at epoch
e1, then subscribes to ``u`` too and reaches epoch e2 (``t`` kept, ``u`` new). It then commits
with e2, with e1 (for ``t`` only, for ``u``, for both), with an epoch newer than e2, with an
epoch older than any assignment, for a topic it was never given, with OffsetCommit v8 and with
TxnOffsetCommit. Every per-partition error code and the offsets that ended up committed are
compared between strom and Apache Kafka, and Kafka's answers must be the documented ones.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

from diff_wire import WireClient
from kafka_ref import KafkaRef
from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.consumer_group_heartbeat.v1 import request as cgh
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.offset_commit.v8 import request as oc8
from kio.schema.offset_commit.v9 import request as oc9
from kio.schema.offset_fetch.v8 import request as of8
from kio.schema.txn_offset_commit.v3 import request as toc
from ref_fixtures import HasBootstrap

NONE, STALE = int(ErrorCode.none), int(ErrorCode.stale_member_epoch)
UNSUPPORTED, ILLEGAL = int(ErrorCode.unsupported_version), int(ErrorCode.illegal_generation)
LOADING = (ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available)
Codes = dict[str, int]  # "topic-partition" -> error code


def _topic_ids(c: WireClient, names: list[str]) -> dict[str, uuid.UUID]:
    return {t.name: t.topic_id for t in c.metadata(names).topics}


def _heartbeat(c: WireClient, group: str, member: str, epoch: int, topics: list[str] | None,
               owned: dict[uuid.UUID, list[int]]) -> Any:
    resp = c.request(cgh.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch,
        rebalance_timeout=timedelta(milliseconds=30000 if epoch == 0 else -1),
        subscribed_topic_names=None if topics is None else tuple(topics), subscribed_topic_regex=None,
        server_assignor="range" if epoch == 0 else None,
        topic_partitions=tuple(cgh.TopicPartitions(topic_id=t, partitions=tuple(ps)) for t, ps in owned.items())))
    return resp


def _reconcile(c: WireClient, group: str, member: str, epoch: int, topics: list[str],
               owned: dict[uuid.UUID, list[int]], want: dict[uuid.UUID, list[int]]
               ) -> tuple[int, dict[uuid.UUID, list[int]]]:
    """Heartbeat (first with the new subscription) until the member holds ``want``; its epoch then."""
    deadline = time.monotonic() + 30
    send_topics: list[str] | None = topics
    while True:
        resp = _heartbeat(c, group, member, epoch, send_topics, owned)
        if resp.error_code in LOADING:  # the coordinator is still loading its partition
            assert time.monotonic() < deadline, resp
            time.sleep(0.2)
            continue
        assert resp.error_code == 0, resp
        send_topics = None
        epoch = int(resp.member_epoch)
        if resp.assignment is not None:
            owned = {tp.topic_id: sorted(int(p) for p in tp.partitions) for tp in resp.assignment.topic_partitions}
        if owned == want:
            return epoch, owned
        assert time.monotonic() < deadline, f"no assignment {want}: holds {owned} at epoch {epoch}"
        time.sleep(0.2)


def _commit(c: WireClient, group: str, member: str, epoch: int, parts: list[tuple[str, int]], offset: int,
            version: int = 9) -> Codes:
    m = oc9 if version == 9 else oc8
    topics: dict[str, list[int]] = {}
    for t, p in parts:
        topics.setdefault(t, []).append(p)
    resp = c.request(m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=epoch, member_id=member, group_instance_id=None,
        topics=tuple(m.OffsetCommitRequestTopic(name=t, partitions=tuple(m.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=offset, committed_metadata="") for p in ps))
            for t, ps in topics.items())))
    return {f"{t.name}-{p.partition_index}": int(p.error_code) for t in resp.topics for p in t.partitions}


def _txn_commit(c: WireClient, tid: str, group: str, member: str, epoch: int, parts: list[tuple[str, int]],
                offset: int) -> Codes:
    """A transaction holding only the offsets, aborted afterwards (the answer is what matters)."""
    c.wait_for_coordinator(tid, key_type=1)
    deadline = time.monotonic() + 60
    while True:  # retriable while the coordinator loads or the previous (aborted) transaction ends
        init = c.request(InitProducerIdRequest(transactional_id=tid, transaction_timeout=timedelta(seconds=60),
                                               producer_id=-1, producer_epoch=-1))
        if init.error_code not in (*LOADING, ErrorCode.concurrent_transactions) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert init.error_code == 0, init
    pid, pepoch = init.producer_id, init.producer_epoch
    added = c.request(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=pepoch,
                                             group_id=group))
    assert added.error_code == 0, added
    topics: dict[str, list[int]] = {}
    for t, p in parts:
        topics.setdefault(t, []).append(p)
    resp = c.request(toc.TxnOffsetCommitRequest(
        transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=pepoch, generation_id=epoch,
        member_id=member, group_instance_id=None,
        topics=tuple(toc.TxnOffsetCommitRequestTopic(name=t, partitions=tuple(toc.TxnOffsetCommitRequestPartition(
            partition_index=p, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="")
            for p in ps)) for t, ps in topics.items())))
    ended = c.request(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=pepoch, committed=False))
    assert ended.error_code == 0, ended
    return {f"{t.name}-{p.partition_index}": int(p.error_code) for t in resp.topics for p in t.partitions}


def _committed(c: WireClient, group: str, parts: list[tuple[str, int]]) -> Codes:
    topics: dict[str, list[int]] = {}
    for t, p in parts:
        topics.setdefault(t, []).append(p)
    resp = c.request(of8.OffsetFetchRequest(groups=(of8.OffsetFetchRequestGroup(group_id=group, topics=tuple(
        of8.OffsetFetchRequestTopics(name=t, partition_indexes=tuple(ps)) for t, ps in topics.items())),),
        require_stable=False))
    return {f"{t.name}-{p.partition_index}": int(p.committed_offset)
            for g in resp.groups for t in g.topics for p in t.partitions}


def observe(bootstrap: str, tag: str) -> dict[str, Any]:
    """The scenario against one broker: what every step answered."""
    t, u, v = f"ae-t-{tag}", f"ae-u-{tag}", f"ae-v-{tag}"
    group, member, tid = f"ae-g-{tag}", uuid.uuid4().hex, f"ae-tx-{tag}"
    with WireClient(bootstrap) as c:
        c.create_topic(t, 2)
        c.create_topic(u, 1)
        c.create_topic(v, 1)
        ids = _topic_ids(c, [t, u])
        c.wait_for_coordinator(group)
        e1, owned = _reconcile(c, group, member, 0, [t], {}, {ids[t]: [0, 1]})
        e2, owned = _reconcile(c, group, member, e1, [t, u], owned, {ids[t]: [0, 1], ids[u]: [0]})
        out: dict[str, Any] = {"e2 > e1": e2 > e1}
        out["current epoch"] = _commit(c, group, member, e2, [(t, 0), (t, 1), (u, 0)], 10)
        out["e1, t only"] = _commit(c, group, member, e1, [(t, 0), (t, 1)], 11)
        out["e1, u only"] = _commit(c, group, member, e1, [(u, 0)], 12)
        out["e1, t and u"] = _commit(c, group, member, e1, [(t, 1), (u, 0)], 13)
        out["newer epoch"] = _commit(c, group, member, e2 + 1, [(t, 0)], 14)
        out["epoch 0"] = _commit(c, group, member, 0, [(t, 0)], 15)
        out["e1, never assigned"] = _commit(c, group, member, e1, [(v, 0)], 16)
        out["current epoch, never assigned"] = _commit(c, group, member, e2, [(v, 0)], 17)
        out["v8"] = _commit(c, group, member, e2, [(t, 0)], 18, version=8)
        out["txn e1, t only"] = _txn_commit(c, tid, group, member, e1, [(t, 0)], 19)
        out["txn e1, t and u"] = _txn_commit(c, tid, group, member, e1, [(t, 0), (u, 0)], 20)
        out["txn newer epoch"] = _txn_commit(c, tid, group, member, e2 + 1, [(t, 0)], 21)
        out["committed"] = _committed(c, group, [(t, 0), (t, 1), (u, 0), (v, 0)])
        # A group that does not exist: a member epoch is GROUP_ID_NOT_FOUND from v9 on and
        # ILLEGAL_GENERATION before; -1 (even with a member id) makes a simple group.
        nowhere = f"ae-none-{tag}"
        c.wait_for_coordinator(nowhere)
        out["unknown group v9"] = _commit(c, nowhere, member, 3, [(t, 0)], 22)
        out["unknown group v8"] = _commit(c, nowhere, member, 3, [(t, 0)], 23, version=8)
        out["unknown group, -1 with member id"] = _commit(c, nowhere, member, -1, [(t, 0)], 24)
    # Partition names differ per broker run only by the tag: compare them without it.
    return {k: ({name.replace(f"-{tag}", ""): code for name, code in v.items()} if isinstance(v, dict) else v)
            for k, v in out.items()}


# Kafka 4.3.1's answers (checked against the jar: ConsumerGroup.validateOffsetCommit and
# OffsetMetadataManager): an older epoch is fine per partition held since then, and one refused
# partition refuses the whole request (nothing written).
EXPECTED: dict[str, Any] = {
    "e2 > e1": True,
    "current epoch": {"ae-t-0": NONE, "ae-t-1": NONE, "ae-u-0": NONE},
    "e1, t only": {"ae-t-0": NONE, "ae-t-1": NONE},
    "e1, u only": {"ae-u-0": STALE},
    "e1, t and u": {"ae-t-1": STALE, "ae-u-0": STALE},
    "newer epoch": {"ae-t-0": STALE},
    "epoch 0": {"ae-t-0": STALE},
    "e1, never assigned": {"ae-v-0": STALE},
    "current epoch, never assigned": {"ae-v-0": NONE},
    "v8": {"ae-t-0": UNSUPPORTED},
    "txn e1, t only": {"ae-t-0": NONE},
    "txn e1, t and u": {"ae-t-0": ILLEGAL, "ae-u-0": ILLEGAL},
    "txn newer epoch": {"ae-t-0": ILLEGAL},
    # t-0/t-1 from "e1, t only", u-0 from "current epoch", v-0 from the current-epoch commit;
    # the aborted transactions leave nothing.
    "committed": {"ae-t-0": 11, "ae-t-1": 11, "ae-u-0": 10, "ae-v-0": 17},
    "unknown group v9": {"ae-t-0": int(ErrorCode.group_id_not_found)},
    "unknown group v8": {"ae-t-0": ILLEGAL},
    "unknown group, -1 with member id": {"ae-t-0": NONE},
}


def test_offset_commit_epochs_match_kafka(strom: HasBootstrap, kafka: KafkaRef) -> None:
    tag = uuid.uuid4().hex[:8]
    theirs = observe(kafka.bootstrap, tag)
    assert theirs == EXPECTED, f"Kafka did not answer as the harness expects: {theirs}"
    ours = observe(strom.bootstrap, tag)
    lines = [f"{'  ' if ours.get(k) == theirs[k] else '!!'} {k}: strom {ours.get(k)} Kafka {theirs[k]}"
             for k in theirs]
    print("\n".join(["assignment epochs:", *lines]))
    assert ours == theirs, "\n".join(lines)
