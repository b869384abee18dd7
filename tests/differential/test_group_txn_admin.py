# mypy: disable-error-code="arg-type,union-attr"
# (kio types fields with phantom NewTypes - i32, TopicName, i32Timedelta - and loads response
# types as unions; plain ints/strs are what they are at run time, so only the checker objects.)
"""Differential: the group and transaction admin APIs of strom against Apache Kafka.

One scenario runs on each broker over raw requests (diff_wire): a topic, an empty classic group
that only has committed offsets, a Stable classic group with one consumer-protocol member, a
KIP-848 consumer group with one member, an Empty, an Ongoing and a CompleteCommit transactional
id. Then FindCoordinator, ListGroups, DescribeGroups, ConsumerGroupDescribe, OffsetFetch,
OffsetDelete, DeleteGroups, DescribeTransactions and ListTransactions are asked about them and
the answers are reduced to what must be equal on both brokers (error codes, states, offsets,
member counts - no generated ids, ports or timestamps). Each observation is its own test case,
so one difference fails only its own case; Kafka's answers in ``KAFKA_EXPECTED`` are also
checked against the documented behaviour so a harness mistake cannot make a case vacuous.
"""

from __future__ import annotations

import base64
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from diff_wire import WireClient, assert_case_matches, seconds
from kafka_ref import KafkaRef
from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest as DescribeGroupsV5
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest as FindCoordinatorV3
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest as FindCoordinatorV6
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.list_groups.v3.request import ListGroupsRequest as ListGroupsV3
from kio.schema.list_groups.v4.request import ListGroupsRequest as ListGroupsV4
from kio.schema.list_groups.v5.request import ListGroupsRequest as ListGroupsV5
from kio.schema.list_transactions.v0.request import ListTransactionsRequest as ListTransactionsV0
from kio.schema.list_transactions.v1.request import ListTransactionsRequest as ListTransactionsV1
from kio.schema.list_transactions.v2.request import ListTransactionsRequest as ListTransactionsV2
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_delete.v0.request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kio.schema.offset_fetch.v1.request import OffsetFetchRequest as OffsetFetchV1
from kio.schema.offset_fetch.v1.request import OffsetFetchRequestTopic as OffsetFetchTopicV1
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest as OffsetFetchV7
from kio.schema.offset_fetch.v7.request import OffsetFetchRequestTopic as OffsetFetchTopicV7
from kio.schema.offset_fetch.v9.request import OffsetFetchRequest as OffsetFetchV9
from kio.schema.offset_fetch.v9.request import OffsetFetchRequestGroup, OffsetFetchRequestTopics
from kio.schema.sync_group.v3.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.schema.txn_offset_commit.v3.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from ref_fixtures import HasBootstrap

E = ErrorCode
RUN = uuid.uuid4().hex[:8]
TOPIC = f"diff-gta-{RUN}"
OTHER_TOPIC = f"diff-gta-other-{RUN}"
MISSING_TOPIC = f"diff-gta-missing-{RUN}"
G_EMPTY = f"gta-empty-{RUN}"            # classic, Empty: only committed offsets (admin commit)
G_EMPTY2 = f"gta-empty2-{RUN}"          # the same, deleted by DeleteGroups
G_CLASSIC = f"gta-classic-{RUN}"        # classic, Stable, protocol type "consumer"
G_OTHER = f"gta-other-{RUN}"            # classic, Stable, protocol type "connect"-like, not "consumer"
G_CONSUMER = f"gta-consumer-{RUN}"      # KIP-848 consumer group, one member
G_UNKNOWN = f"gta-unknown-{RUN}"
G_PENDING = f"gta-pending-{RUN}"        # only a transactional offset commit, not yet committed
G_LEFT = f"gta-left-{RUN}"              # KIP-848 group whose only member left: Empty
TX_EMPTY = f"gta-tx-empty-{RUN}"        # InitProducerId only
TX_ONGOING = f"gta-tx-ongoing-{RUN}"    # partitions added, not ended
TX_DONE = f"gta-tx-done-{RUN}"          # committed
TX_ABORTED = f"gta-tx-aborted-{RUN}"    # aborted
TX_UNKNOWN = f"gta-tx-unknown-{RUN}"
# G_PENDING (only transactional offsets) is left out of the group listings and looked at on its own.
OURS = (G_EMPTY, G_EMPTY2, G_CLASSIC, G_OTHER, G_CONSUMER, G_UNKNOWN, G_LEFT)
OUR_TXNS = (TX_EMPTY, TX_ONGOING, TX_DONE, TX_ABORTED)
CLIENT_ID = "strom-diff"  # diff_wire's client id
MEMBER_IDS: set[str] = set()  # the KIP-848 member ids this module generated


# -- consumer protocol payloads (ConsumerProtocolSubscription / Assignment v0) -------------------

def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def subscription(topics: list[str]) -> bytes:
    return struct.pack(">hi", 0, len(topics)) + b"".join(_str(t) for t in topics) + struct.pack(">i", -1)


def assignment(parts: dict[str, list[int]]) -> bytes:
    out = struct.pack(">hi", 0, len(parts))
    for topic, ps in parts.items():
        out += _str(topic) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", -1)


# -- scenario set-up ---------------------------------------------------------------------------

def admin_commit(c: WireClient, group: str, offsets: dict[tuple[str, int], tuple[int, str | None]]) -> None:
    """OffsetCommit with generation -1 and no member: creates an Empty classic group."""
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), (offset, metadata) in offsets.items():
        by_topic.setdefault(topic, []).append(OffsetCommitRequestPartition(
            partition_index=p, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=metadata))
    resp = c.request(OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                         group_instance_id=None, topics=tuple(
                                             OffsetCommitRequestTopic(name=t, partitions=tuple(ps))
                                             for t, ps in by_topic.items())))
    codes = {p.error_code for t in resp.topics for p in t.partitions}
    assert codes == {0}, resp


def join_classic(c: WireClient, group: str, protocol_type: str) -> None:
    """One member joins (v5: the first join returns MEMBER_ID_REQUIRED) and syncs: Stable."""
    protocols = (JoinGroupRequestProtocol(name="range", metadata=subscription([TOPIC])),)

    def join(member_id: str) -> Any:
        return c.request(JoinGroupRequest(group_id=group, session_timeout=seconds(120),
                                          rebalance_timeout=seconds(30), member_id=member_id,
                                          group_instance_id=None, protocol_type=protocol_type,
                                          protocols=protocols))
    first = join("")
    assert first.error_code == E.member_id_required, first
    joined = join(first.member_id)
    assert joined.error_code == 0, joined
    synced = c.request(SyncGroupRequest(group_id=group, generation_id=joined.generation_id,
                                        member_id=joined.member_id, group_instance_id=None,
                                        assignments=(SyncGroupRequestAssignment(
                                            member_id=joined.member_id,
                                            assignment=assignment({TOPIC: [0, 1]})),)))
    assert synced.error_code == 0, synced


def base64_uuid() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def join_consumer_group(c: WireClient, group: str) -> tuple[str, int]:
    """A KIP-848 member subscribed to TOPIC; heartbeats until it owns its assignment."""
    member_id = base64_uuid()
    MEMBER_IDS.add(member_id)
    epoch = 0
    deadline = time.monotonic() + 30
    while True:
        resp = c.request(ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member_id, member_epoch=epoch, rebalance_timeout=seconds(30),
            subscribed_topic_names=(TOPIC,) if epoch == 0 else None, topic_partitions=() if epoch == 0 else None,
            server_assignor=None))
        assert resp.error_code == 0, resp
        epoch = resp.member_epoch
        if resp.assignment is not None:
            owned = tuple(type(tp)(topic_id=tp.topic_id, partitions=tp.partitions)
                          for tp in resp.assignment.topic_partitions)
            # Acknowledge the assignment: the next heartbeat reports it as owned.
            ack = c.request(ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=member_id, member_epoch=epoch, rebalance_timeout=seconds(30),
                subscribed_topic_names=None, topic_partitions=owned, server_assignor=None))
            assert ack.error_code == 0, ack
            return member_id, ack.member_epoch
        assert time.monotonic() < deadline, "no assignment"
        time.sleep(0.2)


def leave_consumer_group(c: WireClient, group: str, member_id: str, epoch: int) -> None:
    resp = c.request(ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=-1, rebalance_timeout=seconds(30),
        subscribed_topic_names=None, topic_partitions=None, server_assignor=None))
    assert resp.error_code == 0 and resp.member_epoch == -1, resp


def init_pid(c: WireClient, tid: str) -> tuple[int, int]:
    deadline = time.monotonic() + 60
    while True:
        resp = c.request(InitProducerIdRequest(transactional_id=tid, transaction_timeout=seconds(60),
                                               producer_id=-1, producer_epoch=-1))
        if resp.error_code == 0:
            return int(resp.producer_id), int(resp.producer_epoch)
        # The first lookup of a fresh cluster may still be loading the transaction log.
        assert resp.error_code in (E.coordinator_load_in_progress, E.coordinator_not_available,
                                   E.not_coordinator, E.concurrent_transactions), resp
        assert time.monotonic() < deadline, resp
        time.sleep(0.3)


def add_partitions(c: WireClient, tid: str, pid: int, epoch: int, parts: dict[str, list[int]]) -> None:
    resp = c.request(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=tuple(AddPartitionsToTxnTopic(name=t, partitions=tuple(ps)) for t, ps in parts.items())))
    codes = {p.partition_error_code for r in resp.results_by_topic_v3_and_below for p in r.results_by_partition}
    assert codes == {0}, resp


def txn_offset_commit(c: WireClient, tid: str, pid: int, epoch: int, group: str,
                      offsets: dict[tuple[str, int], int]) -> None:
    """AddOffsetsToTxn + TxnOffsetCommit: offsets pending until the transaction ends."""
    added = c.request(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                             group_id=group))
    assert added.error_code == 0, added
    resp = c.request(TxnOffsetCommitRequest(
        transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch, group_instance_id=None,
        topics=tuple(TxnOffsetCommitRequestTopic(name=t, partitions=(TxnOffsetCommitRequestPartition(
            partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata="txn"),))
            for (t, p), o in offsets.items())))
    assert {p.error_code for t in resp.topics for p in t.partitions} == {0}, resp


def end_txn(c: WireClient, tid: str, pid: int, epoch: int, commit: bool) -> None:
    deadline = time.monotonic() + 30
    while True:
        resp = c.request(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                       committed=commit))
        if resp.error_code == 0:
            return
        assert resp.error_code == E.concurrent_transactions and time.monotonic() < deadline, resp
        time.sleep(0.2)


# -- reductions: what must be equal ------------------------------------------------------------

def coordinators(resp: Any, bootstrap: str) -> list[tuple[Any, ...]]:
    """(key, error, answered with this broker's endpoint) per key."""
    port = int(bootstrap.rsplit(":", 1)[1])
    return sorted((co.key, int(co.error_code), _message(co.error_code, co.error_message),
                   co.node_id >= 0 and co.port == port) for co in resp.coordinators)


def _message(code: int, message: str | None) -> str | bool | None:
    """A success's message exactly; an error's only as 'has one' (Kafka's default texts)."""
    return message if code == 0 else bool(message)


def listed(resp: Any, groups: tuple[str, ...] = OURS) -> tuple[int, list[tuple[Any, ...]]]:
    rows = [tuple(getattr(g, f) for f in ("group_id", "protocol_type", "group_state", "group_type")
                  if hasattr(g, f)) for g in resp.groups if g.group_id in groups]
    return int(resp.error_code), sorted(rows)


def described_groups(resp: Any) -> list[tuple[Any, ...]]:
    return sorted((g.group_id, int(g.error_code), getattr(g, "error_message", None), g.group_state, g.protocol_type, g.protocol_data, len(g.members),
             [len(m.member_metadata) > 0 for m in g.members], int(g.authorized_operations))
            for g in resp.groups)


def group_members(resp: Any) -> list[tuple[Any, ...]]:
    """Member fields of DescribeGroups that must agree: the member id only as '<client id>-...'."""
    return sorted((g.group_id, m.member_id.startswith(f"{CLIENT_ID}-"), m.group_instance_id, m.client_id,
                   m.client_host, m.member_metadata, m.member_assignment) for g in resp.groups for m in g.members)


def cg_members(resp: Any) -> list[tuple[Any, ...]]:
    """Member fields of ConsumerGroupDescribe that must agree (the id is the client's own)."""
    return sorted((g.group_id, m.member_id in MEMBER_IDS, m.instance_id, m.rack_id, m.client_id, m.client_host)
                  for g in resp.groups for m in g.members)


def offset_rows(topics: Any) -> list[tuple[Any, ...]]:
    return sorted((t.name, p.partition_index, int(p.committed_offset), int(getattr(p, "committed_leader_epoch", -1)), p.metadata,
                   int(p.error_code)) for t in topics for p in t.partitions)


def offset_fetch_groups(resp: Any) -> list[tuple[Any, ...]]:
    return [(g.group_id, int(g.error_code), offset_rows(g.topics)) for g in resp.groups]


def offset_delete(resp: Any) -> tuple[int, list[tuple[str, int, int]]]:
    return int(resp.error_code), sorted((t.name, p.partition_index, int(p.error_code))
                                        for t in resp.topics for p in t.partitions)


def cg_described(resp: Any) -> list[tuple[Any, ...]]:
    """Epochs of a described group only as 'member, group and assignment epoch agree' (how
    many bumps a join takes depends on when the coordinator sees the new topic)."""
    out = []
    for g in resp.groups:
        members = [(m.member_epoch == g.group_epoch, tuple(m.subscribed_topic_names), m.subscribed_topic_regex,
                    sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions),
                    sorted(p for tp in m.target_assignment.topic_partitions for p in tp.partitions),
                    [tp.topic_name for tp in m.assignment.topic_partitions], int(m.member_type))
                   for m in g.members]
        epochs = ("agree", g.group_epoch > 0 and g.group_epoch == g.assignment_epoch) if g.error_code == 0 \
            else (g.group_epoch, g.assignment_epoch)
        out.append((g.group_id, int(g.error_code), g.error_message, g.group_state, epochs, g.assignor_name,
                    members, int(g.authorized_operations)))
    return sorted(out)


def txn_states(states: list[dict[str, Any]], started_after_ms: int) -> list[tuple[Any, ...]]:
    """State, timeout, epoch, topics; the start time only as 'unset (-1)', 'during this run'
    or the value itself, since clocks differ."""
    out = []
    for s in states:
        start = s["transaction_start_time_ms"]
        when = "unset" if start == -1 else ("now" if start >= started_after_ms else str(start))
        out.append((s["transactional_id"], s["error_code"], s["transaction_state"], s["transaction_timeout_ms"],
                    when, s["producer_epoch"], s["producer_id"] >= 0 if s["error_code"] == 0 else s["producer_id"],
                    # Which __consumer_offsets partitions depends on offsets.topic.num.partitions,
                    # which the reference harness sets lower than the default.
                    sorted((t, "some" if t == "__consumer_offsets" else ps) for t, ps in s["topics"])))
    return out


def txn_list(resp: Any) -> tuple[int, list[str], list[tuple[str, str]]]:
    return (int(resp.error_code), sorted(resp.unknown_state_filters),
            sorted((s.transactional_id, s.transaction_state) for s in resp.transaction_states
                   if s.transactional_id in OUR_TXNS))


# -- the scenario ------------------------------------------------------------------------------

def observe(bootstrap: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    started = int(time.time() * 1000) - 1000
    with WireClient(bootstrap) as c:
        c.wait_for_coordinator(G_EMPTY, 0)
        c.wait_for_coordinator(TX_EMPTY, 1)
        c.create_topic(TOPIC, 2)
        c.create_topic(OTHER_TOPIC, 1)
        admin_commit(c, G_EMPTY, {(TOPIC, 0): (5, "m0"), (TOPIC, 1): (7, None), (OTHER_TOPIC, 0): (3, "")})
        admin_commit(c, G_EMPTY2, {(TOPIC, 0): (1, None)})
        join_classic(c, G_CLASSIC, "consumer")
        join_classic(c, G_OTHER, "other")
        cg_member, cg_epoch = join_consumer_group(c, G_CONSUMER)
        leave_consumer_group(c, G_LEFT, *join_consumer_group(c, G_LEFT))

        # FindCoordinator -----------------------------------------------------------------
        seen["find_coordinator_v6_group_keys"] = coordinators(
            c.request(FindCoordinatorV6(key_type=0, coordinator_keys=(G_EMPTY, G_UNKNOWN, ""))), bootstrap)
        seen["find_coordinator_v6_txn_keys"] = coordinators(
            c.request(FindCoordinatorV6(key_type=1, coordinator_keys=(TX_EMPTY, ""))), bootstrap)
        seen["find_coordinator_v6_invalid_key_type"] = coordinators(
            c.request(FindCoordinatorV6(key_type=7, coordinator_keys=(G_EMPTY, "x"))), bootstrap)
        seen["find_coordinator_v6_no_keys"] = coordinators(
            c.request(FindCoordinatorV6(key_type=0, coordinator_keys=())), bootstrap)
        v3 = c.request(FindCoordinatorV3(key="", key_type=0))
        seen["find_coordinator_v3_empty_group"] = (int(v3.error_code), _message(v3.error_code, v3.error_message),
                                                   v3.node_id >= 0)
        v3 = c.request(FindCoordinatorV3(key=G_EMPTY, key_type=7))
        seen["find_coordinator_v3_invalid_key_type"] = (int(v3.error_code),
                                                        _message(v3.error_code, v3.error_message), v3.node_id >= 0)

        # Transactions ----------------------------------------------------------------------
        init_pid(c, TX_EMPTY)
        pid, epoch = init_pid(c, TX_ONGOING)
        add_partitions(c, TX_ONGOING, pid, epoch, {TOPIC: [1, 0], OTHER_TOPIC: [0]})
        # Pending transactional offsets: one over a committed offset, one on a fresh group.
        txn_offset_commit(c, TX_ONGOING, pid, epoch, G_EMPTY, {(TOPIC, 0): 50})
        txn_offset_commit(c, TX_ONGOING, pid, epoch, G_PENDING, {(TOPIC, 1): 60})
        done_pid, done_epoch = init_pid(c, TX_DONE)
        add_partitions(c, TX_DONE, done_pid, done_epoch, {TOPIC: [0]})
        end_txn(c, TX_DONE, done_pid, done_epoch, commit=True)
        c.wait_txn_state(TX_DONE, ("CompleteCommit",))
        aborted_pid, aborted_epoch = init_pid(c, TX_ABORTED)
        add_partitions(c, TX_ABORTED, aborted_pid, aborted_epoch, {OTHER_TOPIC: [0]})
        end_txn(c, TX_ABORTED, aborted_pid, aborted_epoch, commit=False)
        c.wait_txn_state(TX_ABORTED, ("CompleteAbort",))
        seen["describe_txns"] = txn_states(
            c.describe_transactions((TX_EMPTY, TX_ONGOING, TX_DONE, TX_ABORTED, TX_UNKNOWN, "")), started)
        seen["list_txns_v0_all"] = txn_list(c.request(ListTransactionsV0(state_filters=(), producer_id_filters=())))
        for name, states in {"ongoing": ("Ongoing",), "complete_commit": ("CompleteCommit",),
                             "complete_abort": ("CompleteAbort",),
                             "empty": ("Empty",), "two": ("Ongoing", "Empty"),
                             "with_unknown": ("Ongoing", "Bogus"), "only_unknown": ("Bogus", "ongoing")}.items():
            seen[f"list_txns_v0_state_{name}"] = txn_list(c.request(ListTransactionsV0(
                state_filters=states, producer_id_filters=())))
        seen["list_txns_v0_pid_filter"] = txn_list(c.request(ListTransactionsV0(
            state_filters=(), producer_id_filters=(pid,))))
        seen["list_txns_v0_pid_and_state"] = txn_list(c.request(ListTransactionsV0(
            state_filters=("Empty",), producer_id_filters=(pid,))))
        time.sleep(0.1)  # every transaction above started at least this long ago
        seen["list_txns_v1_duration_0"] = txn_list(c.request(ListTransactionsV1(
            state_filters=(), producer_id_filters=(), duration_filter=0)))
        seen["list_txns_v1_duration_hour"] = txn_list(c.request(ListTransactionsV1(
            state_filters=(), producer_id_filters=(), duration_filter=3_600_000)))
        seen["list_txns_v1_duration_none"] = txn_list(c.request(ListTransactionsV1(
            state_filters=(), producer_id_filters=(), duration_filter=-1)))

        for name, pattern in {"match": f"gta-tx-(empty|done)-{RUN}", "partial": "gta-tx", "invalid": "gta-tx-(",
                              "empty": ""}.items():
            seen[f"list_txns_v2_pattern_{name}"] = txn_list(c.request(ListTransactionsV2(
                state_filters=(), producer_id_filters=(), duration_filter=-1, transactional_id_pattern=pattern)))

        # ListGroups --------------------------------------------------------------------------
        seen["list_groups_v3"] = listed(c.request(ListGroupsV3()))
        seen["list_groups_v4_all"] = listed(c.request(ListGroupsV4(states_filter=())))
        for name, states in {"empty": ("Empty",), "stable_lower": ("stable",), "stable_empty": ("Stable", "Empty"),
                             "preparing": ("PreparingRebalance",), "bogus": ("Bogus",),
                             "upper": ("EMPTY",), "padded": (" Empty ",), "dead": ("Dead",)}.items():
            seen[f"list_groups_v4_state_{name}"] = listed(c.request(ListGroupsV4(states_filter=states)))
        for name, types in {"classic": ("classic",), "consumer": ("consumer",), "upper": ("Consumer",),
                            "both": ("classic", "consumer"), "bogus": ("bogus",),
                            "padded": (" consumer",), "share": ("share",)}.items():
            seen[f"list_groups_v5_type_{name}"] = listed(c.request(ListGroupsV5(states_filter=(), types_filter=types)))
        seen["list_groups_v5_state_and_type"] = listed(c.request(ListGroupsV5(
            states_filter=("Empty",), types_filter=("classic",))))

        # A group that only has a pending transactional offset commit.
        seen["list_groups_txn_offsets_only"] = listed(c.request(ListGroupsV5(states_filter=(), types_filter=())),
                                                      (G_PENDING,))
        seen["describe_groups_txn_offsets_only"] = described_groups(c.request(DescribeGroupsV5(
            groups=(G_PENDING,), include_authorized_operations=False)))

        # DescribeGroups ------------------------------------------------------------------------
        groups = (G_EMPTY, G_CLASSIC, G_OTHER, G_CONSUMER, G_LEFT, G_UNKNOWN, "")
        seen["describe_groups_v5"] = described_groups(c.request(DescribeGroupsV5(
            groups=groups, include_authorized_operations=False)))
        seen["describe_groups_v5_authorized_ops"] = described_groups(c.request(DescribeGroupsV5(
            groups=groups, include_authorized_operations=True)))
        seen["describe_groups_members"] = group_members(c.request(DescribeGroupsV5(
            groups=(G_CLASSIC, G_OTHER), include_authorized_operations=False)))
        seen["consumer_group_describe_members"] = cg_members(c.request(ConsumerGroupDescribeRequest(
            group_ids=(G_CONSUMER,), include_authorized_operations=False)))
        seen["describe_groups_v6"] = _describe_groups_v6(bootstrap, groups)

        # ConsumerGroupDescribe --------------------------------------------------------------------
        cg_groups = (G_CONSUMER, G_LEFT, G_EMPTY, G_CLASSIC, G_UNKNOWN, "")
        seen["consumer_group_describe"] = cg_described(c.request(ConsumerGroupDescribeRequest(
            group_ids=cg_groups, include_authorized_operations=False)))
        seen["consumer_group_describe_authorized_ops"] = cg_described(c.request(ConsumerGroupDescribeRequest(
            group_ids=(G_CONSUMER, G_UNKNOWN), include_authorized_operations=True)))

        # OffsetFetch ---------------------------------------------------------------------------------
        some = (OffsetFetchRequestTopics(name=TOPIC, partition_indexes=(0, 1, 2)),
                OffsetFetchRequestTopics(name=MISSING_TOPIC, partition_indexes=(0,)))
        batched = (OffsetFetchRequestGroup(group_id=G_EMPTY, topics=some),
                   OffsetFetchRequestGroup(group_id=G_EMPTY, topics=None),
                   OffsetFetchRequestGroup(group_id=G_UNKNOWN, topics=some),
                   OffsetFetchRequestGroup(group_id=G_UNKNOWN, topics=None),
                   OffsetFetchRequestGroup(group_id=G_CLASSIC, topics=None),
                   OffsetFetchRequestGroup(group_id=G_PENDING, topics=some),
                   OffsetFetchRequestGroup(group_id=G_PENDING, topics=None))
        seen["offset_fetch_v9_batched"] = offset_fetch_groups(c.request(OffsetFetchV9(groups=batched)))
        seen["offset_fetch_v9_require_stable"] = offset_fetch_groups(c.request(OffsetFetchV9(
            groups=batched, require_stable=True)))
        seen["offset_fetch_v9_empty_group_id"] = offset_fetch_groups(c.request(OffsetFetchV9(groups=(
            OffsetFetchRequestGroup(group_id="", topics=some),))))
        seen["offset_fetch_v9_unknown_member"] = offset_fetch_groups(c.request(OffsetFetchV9(groups=(
            OffsetFetchRequestGroup(group_id=G_CONSUMER, member_id="nobody", member_epoch=cg_epoch, topics=some),))))
        seen["offset_fetch_v9_stale_epoch"] = offset_fetch_groups(c.request(OffsetFetchV9(groups=(
            OffsetFetchRequestGroup(group_id=G_CONSUMER, member_id=cg_member, member_epoch=cg_epoch + 5,
                                    topics=some),))))
        for name, (member, gen) in {"unknown_member": ("nobody", 1), "no_member_epoch": ("nobody", -1),
                                    "empty_member_generation": ("", 1)}.items():
            seen[f"offset_fetch_v9_classic_{name}"] = offset_fetch_groups(c.request(OffsetFetchV9(groups=(
                OffsetFetchRequestGroup(group_id=G_CLASSIC, member_id=member, member_epoch=gen, topics=some),))))
        seen["offset_fetch_v9_member_on_empty_classic"] = offset_fetch_groups(c.request(OffsetFetchV9(groups=(
            OffsetFetchRequestGroup(group_id=G_EMPTY, member_id="nobody", member_epoch=3, topics=some),))))
        seen["offset_fetch_v9_member_on_unknown_group"] = offset_fetch_groups(c.request(OffsetFetchV9(groups=(
            OffsetFetchRequestGroup(group_id=G_UNKNOWN, member_id="nobody", member_epoch=3, topics=some),))))
        seen["offset_fetch_v9_member"] = offset_fetch_groups(c.request(OffsetFetchV9(groups=(
            OffsetFetchRequestGroup(group_id=G_CONSUMER, member_id=cg_member, member_epoch=cg_epoch,
                                    topics=some),))))
        v7 = c.request(OffsetFetchV7(group_id=G_EMPTY, topics=(
            OffsetFetchTopicV7(name=TOPIC, partition_indexes=(0, 1)),
            OffsetFetchTopicV7(name=MISSING_TOPIC, partition_indexes=(3,))), require_stable=True))
        seen["offset_fetch_v7"] = (int(v7.error_code), offset_rows(v7.topics))
        v7 = c.request(OffsetFetchV7(group_id="", topics=(
            OffsetFetchTopicV7(name=TOPIC, partition_indexes=(0,)),), require_stable=False))
        seen["offset_fetch_v7_empty_group_id"] = (int(v7.error_code), offset_rows(v7.topics))
        v1 = c.request(OffsetFetchV1(group_id=G_UNKNOWN, topics=(
            OffsetFetchTopicV1(name=TOPIC, partition_indexes=(0,)),)))
        seen["offset_fetch_v1_unknown_group"] = offset_rows(v1.topics)

        # OffsetDelete --------------------------------------------------------------------------------
        def od(group: str, parts: dict[str, list[int]]) -> Any:
            return offset_delete(c.request(OffsetDeleteRequest(group_id=group, topics=tuple(
                OffsetDeleteRequestTopic(name=t, partitions=tuple(
                    OffsetDeleteRequestPartition(partition_index=p) for p in ps))
                for t, ps in parts.items()))))

        seen["offset_delete_unknown_group"] = od(G_UNKNOWN, {TOPIC: [0]})
        seen["offset_delete_empty_group_id"] = od("", {TOPIC: [0]})
        seen["offset_delete_consumer_group"] = od(G_CONSUMER, {TOPIC: [0], OTHER_TOPIC: [0]})
        seen["offset_delete_classic_consumer_protocol"] = od(G_CLASSIC, {TOPIC: [0], OTHER_TOPIC: [0]})
        seen["offset_delete_classic_other_protocol"] = od(G_OTHER, {TOPIC: [0]})
        seen["offset_delete_empty_consumer_group"] = od(G_LEFT, {TOPIC: [0]})
        seen["offset_delete_empty_group"] = od(G_EMPTY, {TOPIC: [1, 9], OTHER_TOPIC: [0], MISSING_TOPIC: [0]})
        seen["offset_fetch_after_offset_delete"] = offset_fetch_groups(c.request(OffsetFetchV9(groups=(
            OffsetFetchRequestGroup(group_id=G_EMPTY, topics=None),))))
        seen["offset_delete_again"] = od(G_EMPTY, {TOPIC: [1]})

        # DeleteGroups --------------------------------------------------------------------------------
        resp = c.request(DeleteGroupsRequest(groups_names=(G_UNKNOWN, G_CLASSIC, G_CONSUMER, G_EMPTY2, G_LEFT, "")))
        seen["delete_groups"] = sorted((r.group_id, int(r.error_code)) for r in resp.results)
        resp = c.request(DeleteGroupsRequest(groups_names=(G_UNKNOWN, G_UNKNOWN, G_CLASSIC)))
        seen["delete_groups_duplicates"] = sorted((r.group_id, int(r.error_code)) for r in resp.results)
        seen["describe_after_delete"] = described_groups(c.request(DescribeGroupsV5(
            groups=(G_EMPTY2, G_LEFT), include_authorized_operations=False)))
        seen["consumer_group_describe_after_delete"] = cg_described(c.request(ConsumerGroupDescribeRequest(
            group_ids=(G_LEFT,), include_authorized_operations=False)))
        seen["offset_fetch_after_delete"] = offset_fetch_groups(c.request(OffsetFetchV9(groups=(
            OffsetFetchRequestGroup(group_id=G_EMPTY2, topics=None),))))
        seen["list_groups_after_delete"] = listed(c.request(ListGroupsV5(states_filter=(), types_filter=())))
    return seen


def _describe_groups_v6(bootstrap: str, groups: tuple[str, ...]) -> Any:
    """On its own connection: a broker that lacks v6 closes the connection."""
    from kio.schema.describe_groups.v6.request import DescribeGroupsRequest as DescribeGroupsV6
    with WireClient(bootstrap) as c:
        try:
            return described_groups(c.request(DescribeGroupsV6(groups=groups, include_authorized_operations=False)))
        except ConnectionError as exc:
            return f"no answer: {exc}"


# -- tests -------------------------------------------------------------------------------------

# Kafka's answers as documented (KIP-848, KIP-1043, KIP-994 and the 4.x coordinators); the
# reference must give these, otherwise the comparison with strom would prove nothing.
KAFKA_EXPECTED: dict[str, Any] = {
    # An empty group id is just an unknown group to DeleteGroups.
    "delete_groups": sorted([(G_UNKNOWN, E.group_id_not_found), (G_CLASSIC, E.non_empty_group),
                             (G_CONSUMER, E.non_empty_group), (G_EMPTY2, 0), (G_LEFT, 0),
                             ("", E.group_id_not_found)]),
    "offset_delete_unknown_group": (E.group_id_not_found, []),
    # Subscribed topic refused; an unsubscribed one without offsets is still answered NONE.
    "offset_delete_consumer_group": (0, [(TOPIC, 0, E.group_subscribed_to_topic), (OTHER_TOPIC, 0, 0)]),
    "offset_delete_empty_group": (0, [(TOPIC, 1, 0), (TOPIC, 9, E.unknown_topic_or_partition),
                                      (MISSING_TOPIC, 0, E.unknown_topic_or_partition), (OTHER_TOPIC, 0, 0)]),
    "offset_fetch_v9_stale_epoch": [(G_CONSUMER, E.stale_member_epoch, [])],
    "list_txns_v0_state_with_unknown": (0, ["Bogus"], [(TX_ONGOING, "Ongoing")]),
    "list_txns_v1_duration_hour": (0, [], [(TX_EMPTY, "Empty")]),  # no start time: always "long-running"
    "find_coordinator_v6_invalid_key_type": [(G_EMPTY, E.invalid_request, True, False),
                                             ("x", E.invalid_request, True, False)],
}


@pytest.fixture(scope="module")
def observations(strom: HasBootstrap, kafka: KafkaRef) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    theirs = observe(kafka.bootstrap)
    ours = observe(strom.bootstrap)
    yield ours, theirs


CASES = [
    "find_coordinator_v6_group_keys", "find_coordinator_v6_txn_keys", "find_coordinator_v6_invalid_key_type",
    "find_coordinator_v6_no_keys", "find_coordinator_v3_empty_group", "find_coordinator_v3_invalid_key_type",
    "describe_txns", "list_txns_v0_all", "list_txns_v0_state_ongoing", "list_txns_v0_state_complete_commit",
    "list_txns_v0_state_complete_abort",
    "list_txns_v0_state_empty", "list_txns_v0_state_two", "list_txns_v0_state_with_unknown",
    "list_txns_v0_state_only_unknown", "list_txns_v0_pid_filter", "list_txns_v0_pid_and_state",
    "list_txns_v1_duration_0", "list_txns_v1_duration_hour", "list_txns_v1_duration_none",
    "list_txns_v2_pattern_match", "list_txns_v2_pattern_partial", "list_txns_v2_pattern_invalid",
    "list_txns_v2_pattern_empty",
    "list_groups_v3", "list_groups_v4_all", "list_groups_v4_state_empty", "list_groups_v4_state_stable_lower",
    "list_groups_v4_state_stable_empty", "list_groups_v4_state_preparing", "list_groups_v4_state_bogus",
    "list_groups_v4_state_upper", "list_groups_v4_state_padded", "list_groups_v4_state_dead",
    "list_groups_v5_type_classic", "list_groups_v5_type_consumer", "list_groups_v5_type_upper",
    "list_groups_v5_type_both", "list_groups_v5_type_bogus", "list_groups_v5_type_padded",
    "list_groups_v5_type_share", "list_groups_v5_state_and_type",
    "list_groups_txn_offsets_only", "describe_groups_txn_offsets_only",
    "describe_groups_v5", "describe_groups_v5_authorized_ops", "describe_groups_v6",
    "describe_groups_members", "consumer_group_describe_members",
    "consumer_group_describe", "consumer_group_describe_authorized_ops",
    "offset_fetch_v9_batched", "offset_fetch_v9_require_stable", "offset_fetch_v9_empty_group_id",
    "offset_fetch_v9_unknown_member", "offset_fetch_v9_stale_epoch", "offset_fetch_v9_member",
    "offset_fetch_v9_classic_unknown_member", "offset_fetch_v9_classic_no_member_epoch",
    "offset_fetch_v9_classic_empty_member_generation", "offset_fetch_v9_member_on_empty_classic",
    "offset_fetch_v9_member_on_unknown_group",
    "offset_fetch_v7", "offset_fetch_v7_empty_group_id", "offset_fetch_v1_unknown_group",
    "offset_delete_unknown_group", "offset_delete_empty_group_id", "offset_delete_consumer_group",
    "offset_delete_classic_consumer_protocol", "offset_delete_classic_other_protocol",
    "offset_delete_empty_consumer_group", "offset_delete_empty_group", "offset_fetch_after_offset_delete",
    "offset_delete_again",
    "delete_groups", "delete_groups_duplicates", "describe_after_delete", "consumer_group_describe_after_delete", "offset_fetch_after_delete", "list_groups_after_delete",
]


@pytest.mark.parametrize("case", CASES)
def test_matches_kafka(case: str, observations: tuple[dict[str, Any], dict[str, Any]]) -> None:
    ours, theirs = observations
    assert_case_matches(case, ours, theirs, KAFKA_EXPECTED)


def test_every_observation_is_a_case(observations: tuple[dict[str, Any], dict[str, Any]]) -> None:
    ours, theirs = observations
    assert set(ours) == set(theirs) == set(CASES)
