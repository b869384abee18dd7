"""ShareFetch / ShareAcknowledge (KIP-932's data path) on strom's broker, over real sockets.

The requests are the ones a share consumer sends (ShareFetch v2 with the share session epoch,
acknowledgements piggybacked; ShareAcknowledge v2), driven raw so each case controls members,
epochs and acknowledge types exactly. Records are produced with confluent-kafka. What is checked
is what a client observes: acquired offsets, delivery counts, errors, and redelivery after a
lock expires, a RELEASE, a closed session and a broker restart.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from diff_wire import WireClient
from kio.schema.errors import ErrorCode
from kio.schema.initialize_share_group_state.v0 import request as init_req
from kio.schema.share_acknowledge.v1 import request as ack_v1
from kio.schema.types import GroupId
from kio.static.primitive import i8, i32, i64
from share_fetch_kit import (
    ACCEPT,
    REJECT,
    RELEASE,
    RENEW,
    Acks,
    ShareMember,
    acquired,
    fetch_until,
    join_share_group,
    leave_share_group,
    member_id,
    offsets_of,
    produce,
    set_group_configs,
    values_of,
)

from strom.core.testing import BrokerProcess


@pytest.fixture
def share_topic(broker: BrokerProcess) -> tuple[str, str, uuid.UUID]:
    """A fresh 1-partition topic and a group reading it from the earliest offset."""
    topic = f"share-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as w:
        w.create_topic(topic, 1)
        w.wait_for_leaders(topic, 1)
        topic_id = w.metadata([topic]).topics[0].topic_id
    group = f"g-{uuid.uuid4().hex[:8]}"
    set_group_configs(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    return topic, group, topic_id


def test_fetch_acquires_and_accept_finishes(broker: BrokerProcess, share_topic: tuple[str, str, uuid.UUID]) -> None:
    topic, group, topic_id = share_topic
    produce(broker.bootstrap, topic, [f"v{i}".encode() for i in range(10)])
    m = ShareMember(broker.bootstrap, group, topic_id)
    try:
        r = fetch_until(m, lambda r: len(offsets_of(r)) == 10)
        assert acquired(r)[0] == [(0, 9, 1)]
        assert values_of(r) == {i: f"v{i}".encode() for i in range(10)}
        assert r.acquisition_lock_timeout.total_seconds() == 30  # group.share.record.lock.duration.ms
        # Accept all, piggybacked on the next fetch; nothing is left to acquire.
        r = m.fetch({0: [(0, 9, ACCEPT)]}, max_wait_ms=200)
        assert r.error_code == 0
        parts = {p.partition_index: p for t in r.responses for p in t.partitions}
        assert parts[0].acknowledge_error_code == 0
        assert offsets_of(r) == []
        # Accepting again is INVALID_RECORD_STATE: the records are no longer acquired.
        r = m.acknowledge({0: [(0, 9, ACCEPT)]})
        assert r.error_code == 0
        assert r.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state
    finally:
        m.close()


def test_session_epochs(broker: BrokerProcess, share_topic: tuple[str, str, uuid.UUID]) -> None:
    _topic, group, topic_id = share_topic
    m = ShareMember(broker.bootstrap, group, topic_id)
    try:
        # No session yet: a later epoch is SHARE_SESSION_NOT_FOUND; an acknowledge cannot open one.
        assert m.fetch(epoch=1, max_wait_ms=0).error_code == ErrorCode.share_session_not_found
        assert m.acknowledge({0: [(0, 0, ACCEPT)]}, epoch=0).error_code == ErrorCode.invalid_share_session_epoch
        assert m.fetch(max_wait_ms=0).error_code == 0  # epoch 0 opens
        assert m.fetch(epoch=5, max_wait_ms=0).error_code == ErrorCode.invalid_share_session_epoch
        assert m.fetch(max_wait_ms=0).error_code == 0  # epoch 1
        assert m.acknowledge({}).error_code == 0  # epoch 2
        # Acknowledgements on an opening fetch are INVALID_REQUEST.
        r = m.fetch({0: [(0, 0, ACCEPT)]}, epoch=0, max_wait_ms=0)
        assert r.error_code == ErrorCode.invalid_request
        # Epoch -1 closes; then the session is gone.
        assert m.fetch(epoch=-1, partitions=(), max_wait_ms=0).error_code == 0
        assert m.fetch(epoch=3, max_wait_ms=0).error_code == ErrorCode.share_session_not_found
        assert m.fetch(epoch=-1, partitions=(), max_wait_ms=0).error_code == ErrorCode.share_session_not_found
        assert m.acknowledge({}, epoch=-1).error_code == ErrorCode.share_session_not_found
    finally:
        m.close()


def test_idle_fetch_waits_for_data(broker: BrokerProcess, share_topic: tuple[str, str, uuid.UUID]) -> None:
    """An idle member's fetch parks in the purgatory (max wait 60 s) and an append wakes it: it
    answers with the record long before its max wait."""
    topic, group, topic_id = share_topic
    m = ShareMember(broker.bootstrap, group, topic_id)
    try:
        assert offsets_of(m.fetch(max_wait_ms=0)) == []
        result: list[Any] = []
        waiting = threading.Thread(target=lambda: result.append(m.fetch(max_wait_ms=60_000)))
        waiting.start()
        produce(broker.bootstrap, topic, [b"late"])
        waiting.join(30)  # half the max wait: only a wake-up answers within it
        assert not waiting.is_alive(), "the parked fetch was not woken by the append"
        assert offsets_of(result[0]) == [0]
    finally:
        m.close()


def test_records_shared_between_members_exactly_once(broker: BrokerProcess,
                                                     share_topic: tuple[str, str, uuid.UUID]) -> None:
    """Three members take turns; every record is acquired by exactly one and accepted once.

    The records are one batch, so the members share it in record-limit mode (share_acquire_mode
    1); batch-optimized mode would hand the whole batch to one member, as Kafka does."""
    topic, group, topic_id = share_topic
    n = 3000
    produce(broker.bootstrap, topic, [str(i).encode() for i in range(n)])
    members = [ShareMember(broker.bootstrap, group, topic_id) for _ in range(3)]
    seen: dict[int, str] = {}
    pending: dict[str, Acks] = {m.member_id: {} for m in members}
    deadline = time.monotonic() + 60
    try:
        while len(seen) < n:
            assert time.monotonic() < deadline, f"only {len(seen)} of {n} records acquired"
            for m in members:
                r = m.fetch(pending[m.member_id], max_records=200, max_wait_ms=100, mode=1)
                assert r.error_code == 0
                for t in r.responses:
                    for p in t.partitions:
                        assert p.acknowledge_error_code == 0
                offs = offsets_of(r)
                for o in offs:
                    assert o not in seen, f"offset {o} acquired by {m.member_id} and {seen[o]}"
                    seen[o] = m.member_id
                pending[m.member_id] = {0: [(a, b, ACCEPT) for a, b, _ in acquired(r).get(0, [])]}
        for m in members:
            assert m.acknowledge(pending[m.member_id]).responses[0].partitions[0].error_code == 0
        assert sorted(seen) == list(range(n))
        assert len(set(seen.values())) == 3  # all three took part
    finally:
        for m in members:
            m.close()


def test_release_and_reject(broker: BrokerProcess, share_topic: tuple[str, str, uuid.UUID]) -> None:
    topic, group, topic_id = share_topic
    produce(broker.bootstrap, topic, [b"a", b"b", b"c"])
    m1 = ShareMember(broker.bootstrap, group, topic_id)
    m2 = ShareMember(broker.bootstrap, group, topic_id)
    try:
        fetch_until(m1, lambda r: offsets_of(r) == [0, 1, 2])
        # Release 0, reject 1, accept 2: only 0 comes back, to the other member, delivery count 2.
        r = m1.acknowledge({0: [(0, 0, RELEASE), (1, 1, REJECT), (2, 2, ACCEPT)]})
        assert r.responses[0].partitions[0].error_code == 0
        r = fetch_until(m2, lambda r: bool(offsets_of(r)))
        assert acquired(r)[0] == [(0, 0, 2)]
        assert values_of(r) == {0: b"a"}
        assert offsets_of(m1.fetch(max_wait_ms=100)) == []
    finally:
        m1.close()
        m2.close()


@pytest.fixture(scope="module")
def short_lock_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker that lets a group lock records for 1 s (Kafka's minimum group value is 15 s)."""
    with BrokerProcess(tmp_path_factory.mktemp("short-lock"),
                       config={"group.share.min.record.lock.duration.ms": "1000"}) as proc:
        yield proc


def test_lock_expiry_redelivers_and_delivery_limit_archives(short_lock_broker: BrokerProcess) -> None:
    """A member that never acknowledges loses its records when the lock expires; after
    share.delivery.count.limit deliveries the poison record is archived, the next one flows."""
    bootstrap = short_lock_broker.bootstrap
    topic, group = f"share-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with WireClient(bootstrap) as w:
        w.create_topic(topic, 1)
        w.wait_for_leaders(topic, 1)
        topic_id = w.metadata([topic]).topics[0].topic_id
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "2000",
                                         "share.delivery.count.limit": "2"})
    produce(bootstrap, topic, [b"poison"])
    m = ShareMember(bootstrap, group, topic_id)
    other = ShareMember(bootstrap, group, topic_id)
    try:
        r = fetch_until(m, lambda r: offsets_of(r) == [0])
        assert acquired(r)[0] == [(0, 0, 1)]
        assert r.acquisition_lock_timeout.total_seconds() == 2
        # Locked to m (RENEW keeps it so): the other member gets nothing now.
        assert m.acknowledge({0: [(0, 0, RENEW)]}).responses[0].partitions[0].error_code == 0
        assert offsets_of(other.fetch(max_wait_ms=0)) == []
        # The lock expires: the other member's waiting fetch is woken with it, delivery count 2.
        r = other.fetch(max_wait_ms=20_000)
        assert acquired(r)[0] == [(0, 0, 2)]
        # m's lock is gone: acknowledging it now is INVALID_RECORD_STATE.
        assert m.acknowledge({0: [(0, 0, ACCEPT)]}).responses[0].partitions[0].error_code == \
            ErrorCode.invalid_record_state
        # Released at the limit (2 deliveries): archived, never delivered again.
        assert other.acknowledge({0: [(0, 0, RELEASE)]}).responses[0].partitions[0].error_code == 0
        produce(bootstrap, topic, [b"next"])
        r = fetch_until(m, lambda r: bool(offsets_of(r)))
        assert offsets_of(r) == [1]
    finally:
        m.close()
        other.close()


def test_closing_session_releases_records(broker: BrokerProcess, share_topic: tuple[str, str, uuid.UUID]) -> None:
    topic, group, topic_id = share_topic
    produce(broker.bootstrap, topic, [b"x", b"y"])
    m1 = ShareMember(broker.bootstrap, group, topic_id)
    m2 = ShareMember(broker.bootstrap, group, topic_id)
    try:
        fetch_until(m1, lambda r: offsets_of(r) == [0, 1])
        assert m1.acknowledge({0: [(0, 0, ACCEPT)]}, epoch=-1).error_code == 0  # accept 0, close
        r = fetch_until(m2, lambda r: bool(offsets_of(r)))
        assert acquired(r)[0] == [(1, 1, 2)]
    finally:
        m1.close()
        m2.close()


def test_read_committed_skips_aborted(broker: BrokerProcess, share_topic: tuple[str, str, uuid.UUID]) -> None:
    topic, group, topic_id = share_topic
    set_group_configs(broker.bootstrap, group, {"share.isolation.level": "read_committed"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, f"aborted-{i}".encode(), partition=0)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(2):
        p.produce(topic, f"committed-{i}".encode(), partition=0)
    p.commit_transaction(30)
    m = ShareMember(broker.bootstrap, group, topic_id)
    try:
        got: dict[int, bytes | None] = {}
        acks: Acks = {}
        deadline = time.monotonic() + 30
        while len(got) < 2:
            assert time.monotonic() < deadline, got
            r = m.fetch(acks, max_wait_ms=200)
            assert r.error_code == 0
            got.update(values_of(r))
            # Control records are acquired too (a client acknowledges them as GAP); accepted here.
            acks = {0: [(a, b, ACCEPT) for a, b, _ in acquired(r).get(0, [])]}
        assert sorted(v for v in got.values() if v) == [b"committed-0", b"committed-1"]
        assert offsets_of(m.fetch(acks, max_wait_ms=100)) == []  # the aborted records never come
    finally:
        m.close()


def test_broker_restart_keeps_acknowledged_state(fresh_broker: BrokerProcess) -> None:
    fresh_broker.start()
    topic = "share-restart"
    with WireClient(fresh_broker.bootstrap) as w:
        w.create_topic(topic, 1)
        w.wait_for_leaders(topic, 1)
        topic_id = w.metadata([topic]).topics[0].topic_id
    group = "g-restart"
    set_group_configs(fresh_broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(fresh_broker.bootstrap, topic, [str(i).encode() for i in range(10)])
    m = ShareMember(fresh_broker.bootstrap, group, topic_id)
    try:
        fetch_until(m, lambda r: offsets_of(r) == list(range(10)))
        # Accept 0-3 and 6; 4, 5, 7-9 stay acquired when the broker dies.
        r = m.acknowledge({0: [(0, 3, ACCEPT), (6, 6, ACCEPT)]})
        assert r.responses[0].partitions[0].error_code == 0
    finally:
        m.close()
    fresh_broker.kill()
    fresh_broker.start()
    m = ShareMember(fresh_broker.bootstrap, group, topic_id)
    try:
        r = fetch_until(m, lambda r: bool(offsets_of(r)))
        assert offsets_of(r) == [4, 5, 7, 8, 9]
        assert values_of(r)[4] == b"4"
    finally:
        m.close()


def test_acknowledgement_validation_and_renew(broker: BrokerProcess, share_topic: tuple[str, str, uuid.UUID]) -> None:
    """KafkaApis' checks of acknowledgement batches (INVALID_REQUEST per partition, nothing
    applied) and KIP-1222's renewing ShareFetch (v2: no fetch, zero limits)."""
    topic, group, topic_id = share_topic
    produce(broker.bootstrap, topic, [b"a", b"b", b"c"])
    m = ShareMember(broker.bootstrap, group, topic_id)
    try:
        fetch_until(m, lambda r: offsets_of(r) == [0, 1, 2])
        # Batches out of order: INVALID_REQUEST, and the ACCEPT of 2 is not applied either.
        r = m.acknowledge({0: [(2, 2, ACCEPT), (0, 0, ACCEPT)]})
        assert r.responses[0].partitions[0].error_code == ErrorCode.invalid_request
        # RENEW (4) is not an acknowledge type of ShareAcknowledge v1.
        v1 = ack_v1.ShareAcknowledgeRequest(
            group_id=GroupId(group), member_id=m.member_id, share_session_epoch=i32(m.epoch),
            topics=(ack_v1.AcknowledgeTopic(topic_id=topic_id, partitions=(ack_v1.AcknowledgePartition(
                partition_index=i32(0), acknowledgement_batches=(ack_v1.AcknowledgementBatch(
                    first_offset=i64(0), last_offset=i64(0), acknowledge_types=(i8(RENEW),)),)),)),))
        r = m.wire.request(v1)
        m.epoch += 1
        assert r.error_code == 0 and r.responses[0].partitions[0].error_code == ErrorCode.invalid_request
        # A renewing fetch must zero its limits...
        r = m.fetch({0: [(0, 2, RENEW)]}, renew=True, max_wait_ms=0)
        assert r.error_code == ErrorCode.invalid_request
        # ...and then renews without fetching; 2 is still acquired, so its ACCEPT now works.
        produce(broker.bootstrap, topic, [b"d"])
        r = m.fetch({0: [(0, 2, RENEW)]}, renew=True, max_wait_ms=0, max_records=0, max_bytes=0, min_bytes=0)
        assert r.error_code == 0
        assert [p.acknowledge_error_code for t in r.responses for p in t.partitions] == [0]
        assert offsets_of(r) == []
        # RENEW only in a request that says IsRenewAck (Kafka 4.3.1: INVALID_REQUEST otherwise), and
        # only in a group that allows it (share.renew.acknowledge.enable).
        r = m.acknowledge({0: [(0, 2, RENEW)]}, renew=False)
        assert r.responses[0].partitions[0].error_code == ErrorCode.invalid_request
        set_group_configs(broker.bootstrap, group, {"share.renew.acknowledge.enable": "false"})
        r = m.acknowledge({0: [(0, 2, RENEW)]})
        assert (r.responses[0].partitions[0].error_code, r.responses[0].partitions[0].error_message) == (
            ErrorCode.invalid_record_state, "Renewing acquisition locks is not enabled for the group.")
        assert m.acknowledge({0: [(0, 2, ACCEPT)]}).responses[0].partitions[0].error_code == 0
        assert offsets_of(fetch_until(m, lambda r: bool(offsets_of(r)))) == [3]
    finally:
        m.close()


def test_auto_offset_reset_latest_and_by_duration(broker: BrokerProcess) -> None:
    """A share partition with no state starts where share.auto.offset.reset says: latest (the
    default) skips what is already there; by_duration:PT1H skips records older than an hour."""
    topic = f"share-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as w:
        w.create_topic(topic, 1)
        w.wait_for_leaders(topic, 1)
        topic_id = w.metadata([topic]).topics[0].topic_id
    now_ms = int(time.time() * 1000)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(2):
        p.produce(topic, f"old-{i}".encode(), partition=0, timestamp=now_ms - 2 * 3600_000)
    for i in range(2):
        p.produce(topic, f"new-{i}".encode(), partition=0, timestamp=now_ms)
    assert p.flush(30) == 0
    latest = ShareMember(broker.bootstrap, f"g-{uuid.uuid4().hex[:8]}", topic_id)
    by_duration_group = f"g-{uuid.uuid4().hex[:8]}"
    set_group_configs(broker.bootstrap, by_duration_group, {"share.auto.offset.reset": "by_duration:PT1H"})
    recent = ShareMember(broker.bootstrap, by_duration_group, topic_id)
    try:
        assert offsets_of(latest.fetch(max_wait_ms=200)) == []
        assert offsets_of(fetch_until(recent, lambda r: bool(offsets_of(r)))) == [2, 3]
        produce(broker.bootstrap, topic, [b"after"])
        assert offsets_of(fetch_until(latest, lambda r: bool(offsets_of(r)))) == [4]
    finally:
        latest.close()
        recent.close()


def test_connection_close_ends_session_and_releases(broker: BrokerProcess,
                                                    share_topic: tuple[str, str, uuid.UUID]) -> None:
    """A consumer whose connection drops loses its share session and its records go back at
    once, not when their locks expire (Kafka's connection-disconnect listener)."""
    topic, group, topic_id = share_topic
    produce(broker.bootstrap, topic, [b"x", b"y"])
    gone = ShareMember(broker.bootstrap, group, topic_id)
    other = ShareMember(broker.bootstrap, group, topic_id)
    try:
        fetch_until(gone, lambda r: offsets_of(r) == [0, 1])
        gone.close()
        # Well inside the 30 s record lock.
        r = fetch_until(other, lambda r: bool(offsets_of(r)), timeout=10)
        assert acquired(r)[0] == [(0, 1, 2)]
        # The member's session is gone with its connection.
        again = ShareMember(broker.bootstrap, group, topic_id, member_id=gone.member_id)
        try:
            assert again.fetch(epoch=gone.epoch, max_wait_ms=0).error_code == ErrorCode.share_session_not_found
        finally:
            again.close()
    finally:
        other.close()


def test_reinitialized_state_is_read_again(broker: BrokerProcess, share_topic: tuple[str, str, uuid.UUID]) -> None:
    """The share coordinator's state re-initialized at a new state epoch (what
    AlterShareGroupOffsets does underneath) or deleted (DeleteShareGroupOffsets) replaces the
    share partition this broker holds in memory: the next fetch starts from the stored state."""
    topic, group, topic_id = share_topic
    produce(broker.bootstrap, topic, [str(i).encode() for i in range(10)])
    m = ShareMember(broker.bootstrap, group, topic_id)
    try:
        fetch_until(m, lambda r: offsets_of(r) == list(range(10)))
        assert m.acknowledge({0: [(0, 4, ACCEPT), (5, 9, RELEASE)]}, epoch=-1).error_code == 0
    finally:
        m.close()
    p = init_req.PartitionData(partition=i32(0), state_epoch=i32(1), start_offset=i64(8))
    with WireClient(broker.bootstrap) as w:
        r = w.request(init_req.InitializeShareGroupStateRequest(
            group_id=GroupId(group), topics=(init_req.InitializeStateData(topic_id=topic_id, partitions=(p,)),)))
        assert r.results[0].partitions[0].error_code == 0
    m = ShareMember(broker.bootstrap, group, topic_id)
    try:
        r = fetch_until(m, lambda r: bool(offsets_of(r)))
        assert acquired(r)[0] == [(8, 9, 1)]
    finally:
        m.close()


def test_fetches_go_round_the_partitions(broker: BrokerProcess) -> None:
    """With max_records smaller than what each partition holds, consecutive fetches start at
    the next partition of the session, so none is starved."""
    topic = f"share-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as w:
        w.create_topic(topic, 2)
        w.wait_for_leaders(topic, 2)
        topic_id = w.metadata([topic]).topics[0].topic_id
    group = f"g-{uuid.uuid4().hex[:8]}"
    set_group_configs(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    for partition in (0, 1):
        produce(broker.bootstrap, topic, [str(i).encode() for i in range(50)], partition=partition)
    m = ShareMember(broker.bootstrap, group, topic_id, partitions=(0, 1))
    try:
        got: set[int] = set()
        for _ in range(4):
            r = m.fetch(max_records=10, mode=1, max_wait_ms=100)
            got |= {p for p, runs in acquired(r).items() if runs}
        assert got == {0, 1}
    finally:
        m.close()


def test_member_leaving_the_group_releases_its_records(broker: BrokerProcess,
                                                       share_topic: tuple[str, str, uuid.UUID]) -> None:
    """The group coordinator's share-member listener: a member that leaves the group (its
    fetch connection still open) gives its acquired records back at once."""
    topic, group, topic_id = share_topic
    produce(broker.bootstrap, topic, [b"x", b"y"])
    leaving, staying = member_id(), member_id()
    for m_id in (leaving, staying):
        join_share_group(broker.bootstrap, group, m_id, [topic])
    holder = ShareMember(broker.bootstrap, group, topic_id, member_id=leaving)
    other = ShareMember(broker.bootstrap, group, topic_id, member_id=staying)
    try:
        fetch_until(holder, lambda r: offsets_of(r) == [0, 1])
        leave_share_group(broker.bootstrap, group, leaving)
        r = fetch_until(other, lambda r: bool(offsets_of(r)), timeout=10)  # well inside the 30 s lock
        assert acquired(r)[0] == [(0, 1, 2)]
    finally:
        holder.close()
        other.close()
