"""Raw ShareFetch / ShareAcknowledge requests for share-group tests: a share-session member on
one connection (:class:`ShareMember`), what a response acquired, producing records and setting
group configs. Used by tests/coordinator/share/test_share_fetch_*.py against strom's broker and
Apache Kafka 4.3.1 alike.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from confluent_kafka import Producer
from diff_wire import WireClient, incremental_alter_configs
from kio.schema.share_acknowledge.v2 import request as ack_req
from kio.schema.share_fetch.v2 import request as fetch_req
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from strom.core.records.builder import decode_records

ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4
GROUP_RESOURCE = 32
Acks = dict[int, list[tuple[int, int, int]]]  # partition -> [(first, last, type)]


def produce(bootstrap: str, topic: str, values: Iterable[bytes], partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for v in values:
        p.produce(topic, v, partition=partition)
    assert p.flush(30) == 0


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    code, message = incremental_alter_configs(bootstrap, GROUP_RESOURCE, group,
                                              [(k, 0, v) for k, v in configs.items()])
    assert code == 0, message


class ShareMember:
    """One share-group member's share session on one connection."""

    def __init__(self, bootstrap: str, group: str, topic_id: uuid.UUID, partitions: Iterable[int] = (0,),
                 member_id: str | None = None) -> None:
        self.wire = WireClient(bootstrap)
        self.group = group
        self.topic_id = topic_id
        self.partitions = list(partitions)
        self.member_id = member_id or uuid.uuid4().hex[:22]
        self.epoch = 0

    def close(self) -> None:
        self.wire.close()

    def fetch(self, acks: Acks | None = None, *, max_wait_ms: int = 500, max_records: int = 500,
              epoch: int | None = None, partitions: Iterable[int] | None = None, mode: int = 0,
              renew: bool = False, max_bytes: int = 1 << 20, min_bytes: int = 1) -> Any:
        """A ShareFetch; the epoch advances when the broker accepted the session."""
        acks = acks or {}
        use_epoch = self.epoch if epoch is None else epoch
        wanted = set(self.partitions if use_epoch == 0 else ()) | set(acks) | set(partitions or ())
        parts = tuple(fetch_req.FetchPartition(
            partition_index=i32(p), acknowledgement_batches=tuple(
                fetch_req.AcknowledgementBatch(first_offset=i64(a), last_offset=i64(b), acknowledge_types=(i8(t),))
                for a, b, t in acks.get(p, []))) for p in sorted(wanted))
        r = self.wire.request(fetch_req.ShareFetchRequest(
            group_id=GroupId(self.group), member_id=self.member_id, share_session_epoch=i32(use_epoch),
            max_wait=i32Timedelta.parse(timedelta(milliseconds=max_wait_ms)), min_bytes=i32(min_bytes),
            max_bytes=i32(max_bytes), max_records=i32(max_records), batch_size=i32(max_records),
            share_acquire_mode=i8(mode), is_renew_ack=renew,
            topics=(fetch_req.FetchTopic(topic_id=self.topic_id, partitions=parts),) if parts else (),
            forgotten_topics_data=()))
        if r.error_code == 0 and epoch is None:
            self.epoch = self.epoch + 1 if self.epoch >= 0 else self.epoch
        return r

    def acknowledge(self, acks: Acks, *, epoch: int | None = None, renew: bool | None = None) -> Any:
        """A ShareAcknowledge; IsRenewAck is set when a batch is RENEW (unless ``renew`` says)."""
        use_epoch = self.epoch if epoch is None else epoch
        if renew is None:
            renew = any(t == RENEW for batches in acks.values() for _, _, t in batches)
        r = self.wire.request(ack_req.ShareAcknowledgeRequest(
            group_id=GroupId(self.group), member_id=self.member_id, share_session_epoch=i32(use_epoch),
            is_renew_ack=renew,
            topics=(ack_req.AcknowledgeTopic(topic_id=self.topic_id, partitions=tuple(
                ack_req.AcknowledgePartition(partition_index=i32(p), acknowledgement_batches=tuple(
                    ack_req.AcknowledgementBatch(first_offset=i64(a), last_offset=i64(b), acknowledge_types=(i8(t),))
                    for a, b, t in batches)) for p, batches in acks.items())),)))
        if r.error_code == 0 and epoch is None:
            self.epoch += 1
        return r


def acquired(response: Any) -> dict[int, list[tuple[int, int, int]]]:
    """partition -> [(first, last, delivery count)] of a ShareFetch response."""
    out: dict[int, list[tuple[int, int, int]]] = {}
    for t in response.responses:
        for p in t.partitions:
            assert p.error_code == 0, (p.error_code, p.error_message)
            out.setdefault(p.partition_index, []).extend(
                (a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records)
    return out


def offsets_of(response: Any, partition: int = 0) -> list[int]:
    return [o for a, b, _ in acquired(response).get(partition, []) for o in range(a, b + 1)]


def values_of(response: Any, partition: int = 0) -> dict[int, bytes | None]:
    """offset -> value of the acquired data records a response carries (control records left out)."""
    wanted = set(offsets_of(response, partition))
    out: dict[int, bytes | None] = {}
    for t in response.responses:
        for p in t.partitions:
            if p.partition_index == partition and p.records:
                for rec in decode_records(bytes(p.records)):
                    if rec.offset in wanted and not rec.header.is_control:
                        out[rec.offset] = rec.value
    return out


def fetch_until(member: ShareMember, condition: Callable[[Any], bool], timeout: float = 30.0,
                acks: Acks | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        r = member.fetch(acks)
        acks = None
        assert r.error_code == 0, (r.error_code, r.error_message)
        if condition(r):
            return r
        assert time.monotonic() < deadline, "condition not met before the deadline"


def member_id() -> str:
    """A member id as Kafka's clients make them: a Uuid's url-safe base64 form."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def join_share_group(bootstrap: str, group: str, member: str, topics: Iterable[str], timeout: float = 60.0) -> int:
    """ShareGroupHeartbeat as ``member`` until it is assigned partitions; returns its member epoch."""
    with WireClient(bootstrap) as w:
        w.wait_for_coordinator(group)
        epoch = 0
        deadline = time.monotonic() + timeout
        while True:
            r = w.request(ShareGroupHeartbeatRequest(
                group_id=GroupId(group), member_id=member, member_epoch=i32(epoch), rack_id=None,
                subscribed_topic_names=tuple(TopicName(t) for t in topics) if epoch == 0 else None))
            assert r.error_code == 0, r
            epoch = int(r.member_epoch)
            if r.assignment is not None and r.assignment.topic_partitions:
                return epoch
            assert time.monotonic() < deadline, f"{member} not assigned within {timeout} s"
            time.sleep(0.2)


def leave_share_group(bootstrap: str, group: str, member: str) -> None:
    """ShareGroupHeartbeat with member epoch -1: the member leaves the group."""
    with WireClient(bootstrap) as w:
        r = w.request(ShareGroupHeartbeatRequest(group_id=GroupId(group), member_id=member, member_epoch=i32(-1),
                                                 rack_id=None, subscribed_topic_names=None))
        assert r.error_code == 0, r
