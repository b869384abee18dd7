"""Hostile input to the share-group APIs (KIP-932: keys 76-79, 83-87, 90-92) on a real broker process.

Two parts. A bounded slice of the protocol fuzzer restricted to the share APIs' seeds
(bench/fuzz_protocol.py --apis 76,77,78,79,83,84,85,86,87,90,91,92 runs the full length). Then
hand-written requests with valid framing and hostile content: huge and negative max_records,
acknowledgement batches with first > last, overlapping, far beyond the log, a million
acknowledge types, unknown topic ids, duplicate partitions, 10 KiB member ids, share session
epochs at the int32 limits, a heartbeat subscribing to 10,000 topics, state writes with
100,000 state batches and absurd delivery counts. Each must be answered (a decodable response,
errors as Kafka error codes), the broker must stay up, log no ERROR or traceback, and its RSS
must come back near where it started.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from diff_wire import WireClient
from kio.schema.alter_share_group_offsets.v0 import request as alter_req
from kio.schema.delete_share_group_offsets.v0 import request as del_off_req
from kio.schema.delete_share_group_state.v0 import request as del_state_req
from kio.schema.describe_share_group_offsets.v1 import request as desc_off_req
from kio.schema.initialize_share_group_state.v0 import request as init_req
from kio.schema.read_share_group_state.v0 import request as read_req
from kio.schema.read_share_group_state_summary.v1 import request as summary_req
from kio.schema.share_acknowledge.v2 import request as ack_req
from kio.schema.share_fetch.v2 import request as fetch_req
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.types import GroupId, TopicName
from kio.schema.write_share_group_state.v0 import request as write_req
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64
from share_fetch_kit import ShareMember, fetch_until, offsets_of, produce, set_group_configs

from strom.core.protocol import fuzz, fuzz_harness
from strom.core.protocol.fuzz_harness import LogTap
from strom.core.testing import BrokerProcess

log = logging.getLogger(__name__)

SHARE_APIS = {76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92}
FRAMES = 15_000
MAX_SECONDS = 25.0
RUN_SEED = 25
INT32_MAX, INT32_MIN = 2**31 - 1, -(2**31)
INT64_MAX = 2**63 - 1


@pytest.fixture
def share_fuzz_broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, LogTap]]:
    with fuzz_harness.fuzz_broker(tmp_path / "data") as started:
        yield started


def _fetch(group: str, member: str, epoch: int, topics: tuple[fetch_req.FetchTopic, ...], *,
           max_records: int = 500, max_wait_ms: int = 0, renew: bool = False,
           forgotten: tuple[fetch_req.ForgottenTopic, ...] = ()) -> fetch_req.ShareFetchRequest:
    return fetch_req.ShareFetchRequest(
        group_id=GroupId(group), member_id=member, share_session_epoch=i32(epoch),
        max_wait=i32Timedelta.parse(timedelta(milliseconds=max_wait_ms)), min_bytes=i32(1),
        max_bytes=i32(1 << 20), max_records=i32(max_records), batch_size=i32(max(0, min(max_records, 500))),
        share_acquire_mode=i8(0), is_renew_ack=renew, topics=topics, forgotten_topics_data=forgotten)


def _fparts(topic_id: uuid.UUID, parts: list[tuple[int, list[tuple[int, int, tuple[int, ...]]]]]
            ) -> tuple[fetch_req.FetchTopic, ...]:
    return (fetch_req.FetchTopic(topic_id=topic_id, partitions=tuple(
        fetch_req.FetchPartition(partition_index=i32(p), acknowledgement_batches=tuple(
            fetch_req.AcknowledgementBatch(first_offset=i64(a), last_offset=i64(b),
                                           acknowledge_types=tuple(i8(t) for t in types))
            for a, b, types in batches)) for p, batches in parts)),)


def _ack(group: str, member: str, epoch: int, topic_id: uuid.UUID,
         parts: list[tuple[int, list[tuple[int, int, tuple[int, ...]]]]]) -> ack_req.ShareAcknowledgeRequest:
    return ack_req.ShareAcknowledgeRequest(
        group_id=GroupId(group), member_id=member, share_session_epoch=i32(epoch), is_renew_ack=False,
        topics=(ack_req.AcknowledgeTopic(topic_id=topic_id, partitions=tuple(
            ack_req.AcknowledgePartition(partition_index=i32(p), acknowledgement_batches=tuple(
                ack_req.AcknowledgementBatch(first_offset=i64(a), last_offset=i64(b),
                                             acknowledge_types=tuple(i8(t) for t in types))
                for a, b, types in batches)) for p, batches in parts)),))


def _write(group: str, topic_id: uuid.UUID, batches: int, *, delivery_count: int, state: int,
           partition: int = 0, start: int = 0, state_epoch: int = 0) -> write_req.WriteShareGroupStateRequest:
    return write_req.WriteShareGroupStateRequest(group_id=group, topics=(write_req.WriteStateData(
        topic_id=topic_id, partitions=(write_req.PartitionData(
            partition=i32(partition), state_epoch=i32(state_epoch), leader_epoch=i32(0), start_offset=i64(start),
            state_batches=tuple(write_req.StateBatch(first_offset=i64(start + 2 * i), last_offset=i64(start + 2 * i + 1),
                                                     delivery_state=i8(state), delivery_count=i16(delivery_count))
                                for i in range(batches))),)),))


def _error_codes(value: object, out: list[int]) -> list[int]:
    """Every ``error_code`` field anywhere in a decoded response."""
    if isinstance(value, tuple):
        for v in value:
            _error_codes(v, out)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            v = getattr(value, name)
            if name.endswith("error_code"):
                out.append(int(v))
            else:
                _error_codes(v, out)
    return out


def test_share_api_fuzz_slice(share_fuzz_broker: tuple[BrokerProcess, LogTap]) -> None:
    """The fuzzer's share seeds only, mutated: alive, no ERROR, RSS back within 20%."""
    broker, tap = share_fuzz_broker
    with WireClient(broker.bootstrap) as w:
        w.create_topic("fuzz", 1)
        w.wait_for_leaders("fuzz", 1)
    versions, seeds = fuzz_harness.seeds_for(broker.bootstrap, "fuzz", b"fuzz-value")
    assert set(versions) >= SHARE_APIS, f"not advertised: {sorted(SHARE_APIS - set(versions))}"
    fuzz.send_seeds(broker.bootstrap, seeds)
    seeds = [s for s in seeds if s.api_key in SHARE_APIS]
    assert {s.api_key for s in seeds} == SHARE_APIS
    assert broker.proc is not None
    rss_before = fuzz_harness.rss_kib(broker.proc.pid)
    stats = fuzz.run(broker.bootstrap, FRAMES, seeds=seeds, versions=versions, seed=RUN_SEED,
                     max_seconds=MAX_SECONDS, stop=lambda: not broker.alive)
    summary = f"{stats.sent} frames: {stats.answered} answered, {stats.closed} closed; {stats.by_kind}"
    assert not (harm := fuzz_harness.harm(broker, tap, stats, summary)), "\n".join(harm)
    assert stats.sent >= 3000 and stats.answered > 500 and stats.closed > 500, summary
    rss_after = fuzz_harness.rss_kib(broker.proc.pid)
    assert rss_after < rss_before * 1.2 + 10 * 1024, (rss_before, rss_after)


def test_hostile_share_requests_are_answered_with_error_codes(
        share_fuzz_broker: tuple[BrokerProcess, LogTap]) -> None:
    broker, tap = share_fuzz_broker
    topic, group = "hostile", "g-hostile"
    with WireClient(broker.bootstrap) as w:
        w.create_topic(topic, 2)
        w.wait_for_leaders(topic, 2)
        topic_id = w.metadata([topic]).topics[0].topic_id
        w.wait_for_coordinator(group)
    set_group_configs(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(broker.bootstrap, topic, [f"v{i}".encode() for i in range(20)])
    # A live share session with records 0-19 of partition 0 acquired, for the acknowledgement cases.
    m = ShareMember(broker.bootstrap, group, topic_id, partitions=(0, 1))
    fetch_until(m, lambda r: len(offsets_of(r)) == 20)
    assert broker.proc is not None
    rss_before = fuzz_harness.rss_kib(broker.proc.pid)
    mid, unknown = m.member_id, uuid.uuid4()
    big_member = "m" * 10 * 1024

    def sess() -> int:
        return m.epoch

    cases: list[tuple[str, Callable[[], Any]]] = [
        ("max_records=INT32_MAX", lambda: _fetch(group, mid, sess(), (), max_records=INT32_MAX)),
        ("max_records negative", lambda: _fetch(group, mid, sess(), (), max_records=-5)),
        ("ack first > last", lambda: _ack(group, mid, sess(), topic_id, [(0, [(9, 3, (1,))])])),
        ("ack overlapping", lambda: _ack(group, mid, sess(), topic_id, [(0, [(0, 5, (1,)), (3, 8, (1,))])])),
        ("ack far beyond the log", lambda: _ack(group, mid, sess(), topic_id,
                                                [(0, [(10**12, INT64_MAX, (1,))])])),
        ("ack negative offsets", lambda: _ack(group, mid, sess(), topic_id, [(0, [(-10, -1, (1,))])])),
        ("ack 0..INT64_MAX, one type", lambda: _ack(group, mid, sess(), topic_id, [(0, [(0, INT64_MAX, (1,))])])),
        ("ack 10^6 types", lambda: _ack(group, mid, sess(), topic_id, [(0, [(0, 999_999, (1,) * 1_000_000)])])),
        ("ack unknown type", lambda: _ack(group, mid, sess(), topic_id, [(0, [(0, 0, (99,))])])),
        ("ack no types", lambda: _ack(group, mid, sess(), topic_id, [(0, [(0, 0, ())])])),
        ("ack unknown topic id", lambda: _ack(group, mid, sess(), unknown, [(0, [(0, 0, (1,))])])),
        ("ack duplicate partitions", lambda: _ack(group, mid, sess(), topic_id,
                                                  [(0, [(0, 0, (1,))]), (0, [(0, 0, (1,))])])),
        ("ack partition INT32_MAX", lambda: _ack(group, mid, sess(), topic_id, [(INT32_MAX, [(0, 0, (1,))])])),
        ("fetch ack duplicate partitions", lambda: _fetch(group, mid, sess(), _fparts(
            topic_id, [(0, [(1, 1, (1,))]), (0, [(1, 1, (2,))])]))),
        ("fetch ack 10^6 types", lambda: _fetch(group, mid, sess(), _fparts(
            topic_id, [(0, [(0, 999_999, (2,) * 1_000_000)])]))),
        ("fetch unknown topic id", lambda: _fetch(group, mid, sess(), _fparts(unknown, [(0, [])]))),
        ("fetch 10 KiB member id", lambda: _fetch(group, big_member, 0, _fparts(topic_id, [(0, [])]))),
        ("ack 10 KiB member id", lambda: _ack(group, big_member, 1, topic_id, [(0, [(0, 0, (1,))])])),
        ("fetch epoch INT32_MAX", lambda: _fetch(group, mid, INT32_MAX, _fparts(topic_id, [(0, [])]))),
        ("fetch epoch INT32_MIN", lambda: _fetch(group, mid, INT32_MIN, _fparts(topic_id, [(0, [])]))),
        ("ack epoch INT32_MAX", lambda: _ack(group, mid, INT32_MAX, topic_id, [(0, [(0, 0, (1,))])])),
        ("ack epoch INT32_MIN", lambda: _ack(group, mid, INT32_MIN, topic_id, [(0, [(0, 0, (1,))])])),
        ("ack epoch 0", lambda: _ack(group, mid, 0, topic_id, [(0, [(0, 0, (1,))])])),
        ("fetch 10,000 partitions", lambda: _fetch("g-other", uuid.uuid4().hex, 0, _fparts(
            topic_id, [(p, []) for p in range(10_000)]))),
        ("heartbeat 10,000 topics", lambda: ShareGroupHeartbeatRequest(
            group_id=GroupId("g-hb"), member_id=uuid.uuid4().hex, member_epoch=i32(0), rack_id=None,
            subscribed_topic_names=tuple(TopicName(f"t{i:05d}-" + "x" * 200) for i in range(10_000)))),
        ("heartbeat 10 KiB member id", lambda: ShareGroupHeartbeatRequest(
            group_id=GroupId("g-hb2"), member_id=big_member, member_epoch=i32(0), rack_id=None,
            subscribed_topic_names=(TopicName(topic),))),
        ("heartbeat epoch INT32_MAX", lambda: ShareGroupHeartbeatRequest(
            group_id=GroupId("g-hb3"), member_id=uuid.uuid4().hex, member_epoch=i32(INT32_MAX), rack_id=None,
            subscribed_topic_names=(TopicName(topic),))),
        ("heartbeat epoch INT32_MIN", lambda: ShareGroupHeartbeatRequest(
            group_id=GroupId("g-hb3"), member_id=uuid.uuid4().hex, member_epoch=i32(INT32_MIN), rack_id=None,
            subscribed_topic_names=None)),
        ("heartbeat empty group id", lambda: ShareGroupHeartbeatRequest(
            group_id=GroupId(""), member_id=uuid.uuid4().hex, member_epoch=i32(0), rack_id=None,
            subscribed_topic_names=(TopicName(topic),))),
        ("describe 10,000 groups", lambda: ShareGroupDescribeRequest(
            group_ids=tuple(GroupId(f"g{i}") for i in range(10_000)), include_authorized_operations=True)),
        ("initialize state", lambda: init_req.InitializeShareGroupStateRequest(
            group_id="g-state", topics=(init_req.InitializeStateData(topic_id=topic_id, partitions=(
                init_req.PartitionData(partition=i32(0), state_epoch=i32(0), start_offset=i64(0)),)),))),
        ("write 100,000 state batches", lambda: _write("g-state", topic_id, 100_000, delivery_count=1, state=2)),
        ("write delivery count -1", lambda: _write("g-state", topic_id, 10, delivery_count=-1, state=0)),
        ("write delivery count 32767", lambda: _write("g-state", topic_id, 10, delivery_count=32767, state=0)),
        ("write state 127", lambda: _write("g-state", topic_id, 10, delivery_count=1, state=127)),
        ("write start offset -7", lambda: _write("g-state", topic_id, 3, delivery_count=1, state=0, start=-7)),
        ("write start INT64 near max", lambda: _write("g-state", topic_id, 1, delivery_count=1, state=0,
                                                      start=INT64_MAX - 1)),
        ("write state epoch INT32_MIN", lambda: _write("g-state", topic_id, 1, delivery_count=1, state=0,
                                                       state_epoch=INT32_MIN)),
        ("write unknown topic, partition -1", lambda: _write("g-state", unknown, 1, delivery_count=1, state=0,
                                                             partition=-1)),
        ("initialize INT64_MAX start", lambda: init_req.InitializeShareGroupStateRequest(
            group_id="g-state", topics=(init_req.InitializeStateData(topic_id=topic_id, partitions=(
                init_req.PartitionData(partition=i32(1), state_epoch=i32(INT32_MAX),
                                       start_offset=i64(INT64_MAX)),)),))),
        ("read 10,000 partitions", lambda: read_req.ReadShareGroupStateRequest(
            group_id="g-state", topics=(read_req.ReadStateData(topic_id=topic_id, partitions=tuple(
                read_req.PartitionData(partition=i32(p), leader_epoch=i32(INT32_MIN)) for p in range(10_000))),))),
        ("summary negative partition", lambda: summary_req.ReadShareGroupStateSummaryRequest(
            group_id="g-state", topics=(summary_req.ReadStateSummaryData(topic_id=topic_id, partitions=(
                summary_req.PartitionData(partition=i32(-1), leader_epoch=i32(-1)),)),))),
        ("delete state duplicate partitions", lambda: del_state_req.DeleteShareGroupStateRequest(
            group_id="g-state", topics=(del_state_req.DeleteStateData(topic_id=topic_id, partitions=(
                del_state_req.PartitionData(partition=i32(0)), del_state_req.PartitionData(partition=i32(0)))),))),
        ("describe offsets 10,000 partitions", lambda: desc_off_req.DescribeShareGroupOffsetsRequest(groups=(
            desc_off_req.DescribeShareGroupOffsetsRequestGroup(group_id=GroupId(group), topics=(
                desc_off_req.DescribeShareGroupOffsetsRequestTopic(topic_name=TopicName(topic),
                                                                   partitions=tuple(i32(p) for p in range(10_000))),
            )),))),
        ("alter offsets INT64_MAX, dup partitions", lambda: alter_req.AlterShareGroupOffsetsRequest(
            group_id=GroupId("g-alter"), topics=(alter_req.AlterShareGroupOffsetsRequestTopic(
                topic_name=TopicName(topic), partitions=(
                    alter_req.AlterShareGroupOffsetsRequestPartition(partition_index=i32(0),
                                                                     start_offset=i64(INT64_MAX)),
                    alter_req.AlterShareGroupOffsetsRequestPartition(partition_index=i32(0),
                                                                     start_offset=i64(-(2**63))),
                    alter_req.AlterShareGroupOffsetsRequestPartition(partition_index=i32(INT32_MAX),
                                                                     start_offset=i64(0)))),))),
        ("alter offsets of a live group", lambda: alter_req.AlterShareGroupOffsetsRequest(
            group_id=GroupId(group), topics=(alter_req.AlterShareGroupOffsetsRequestTopic(
                topic_name=TopicName(topic), partitions=(alter_req.AlterShareGroupOffsetsRequestPartition(
                    partition_index=i32(0), start_offset=i64(-1)),)),))),
        ("delete offsets 10,000 unknown topics", lambda: del_off_req.DeleteShareGroupOffsetsRequest(
            group_id=GroupId("g-alter"), topics=tuple(
                del_off_req.DeleteShareGroupOffsetsRequestTopic(topic_name=TopicName(f"nope-{i}"))
                for i in range(10_000)))),
    ]
    failures: list[str] = []
    for name, build in cases:
        request = build()
        try:
            response = m.wire.request(request)
        except (ConnectionError, OSError) as e:
            # A broker that stopped answering here answers nothing after: fail now, not 30 s per case.
            failures.append(f"{name}: no answer ({e})")
            break
        codes = _error_codes(response, [])
        # The live session's epoch advances with each request of it the broker accepted, so the
        # next case reaches the acknowledgement checks instead of INVALID_SHARE_SESSION_EPOCH.
        if (isinstance(request, fetch_req.ShareFetchRequest | ack_req.ShareAcknowledgeRequest)
                and request.member_id == mid and request.share_session_epoch == m.epoch
                and response.error_code == 0):
            m.epoch += 1
        log.info("%s: error codes %s", name, sorted(set(codes)))
        # UNKNOWN_SERVER_ERROR (-1) is what a handler's unexpected exception turns into.
        if -1 in codes:
            failures.append(f"{name}: UNKNOWN_SERVER_ERROR in {codes[:20]}")
        assert broker.alive, f"{name} killed the broker:\n{broker.log_text()[-5000:]}"
    assert not failures, "\n".join(failures)
    assert not tap.bad, "the broker logged errors or tracebacks:\n" + "\n".join(tap.bad[:30])

    # A fresh session is served as before: records produced now are acquired and accepted.
    m.close()
    produce(broker.bootstrap, topic, [b"after-%d" % i for i in range(5)])
    m2 = ShareMember(broker.bootstrap, group, topic_id, partitions=(0,))
    try:
        deadline = time.monotonic() + 60
        got: set[int] = set()
        while not set(range(20, 25)) <= got:
            assert time.monotonic() < deadline, f"acquired only {sorted(got)}"
            got.update(offsets_of(m2.fetch(max_wait_ms=500)))
    finally:
        m2.close()
    assert broker.alive
    assert fuzz_harness.rss_kib(broker.proc.pid) < rss_before * 1.5 + 64 * 1024
