"""The share-member listener: when a member leaves (heartbeat epoch -1) or its session expires,
the group coordinator tells the share-partition leaders, which release the records it holds
at once - another member acquires them long before their locks (60 s here) would run out.

Raw ShareFetch / ShareGroupHeartbeat requests, each member's fetch session on a connection of its
own that stays open: a closed connection would release the records too (the share session ends),
so only the group coordinator's notice can have released them here.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

from diff_wire import WireClient
from kio.schema.share_fetch.v2.request import FetchPartition, FetchTopic, ShareFetchRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta
from share_kit import SHARE_BROKER_CONFIG, produce, set_group_config

from strom.core.testing import BrokerProcess

GROUP, TOPIC = "listener", "lt"


class Member:
    """One share-group member: heartbeats and fetches on its own connection."""

    def __init__(self, bootstrap: str, topic_id: uuid.UUID) -> None:
        self.wire = WireClient(bootstrap)
        self.member_id = str(uuid.uuid4())
        self.topic_id = topic_id
        self.epoch = 0
        self.session_epoch = 0

    def heartbeat(self, leave: bool = False) -> Any:
        r = self.wire.request(ShareGroupHeartbeatRequest(
            group_id=GroupId(GROUP), member_id=self.member_id, member_epoch=i32(-1 if leave else self.epoch),
            rack_id=None, subscribed_topic_names=(TopicName(TOPIC),) if self.epoch == 0 else None))
        assert r.error_code == 0, r
        self.epoch = r.member_epoch
        return r

    def fetch(self) -> list[tuple[int, int, int]]:
        """(first offset, last offset, delivery count) of the records this fetch acquired."""
        r = self.wire.request(ShareFetchRequest(
            group_id=GroupId(GROUP), member_id=self.member_id, share_session_epoch=i32(self.session_epoch),
            max_wait=i32Timedelta.parse(timedelta(milliseconds=500)), min_bytes=i32(1),
            max_bytes=i32(1 << 20), max_records=i32(100), batch_size=i32(100), share_acquire_mode=i8(0),
            is_renew_ack=False,
            topics=(FetchTopic(topic_id=self.topic_id, partitions=(FetchPartition(partition_index=i32(0),
                                                                                  acknowledgement_batches=()),)),),
            forgotten_topics_data=()))
        assert r.error_code == 0, r
        self.session_epoch += 1
        return [(a.first_offset, a.last_offset, a.delivery_count)
                for t in r.responses for p in t.partitions for a in p.acquired_records]

    def close(self) -> None:
        self.wire.close()


def acquire(member: Member, others: list[Member], timeout: float, what: str) -> list[tuple[int, int, int]]:
    """Fetch until ``member`` acquires something; ``others`` keep heartbeating meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        member.heartbeat()
        for other in others:
            other.heartbeat()
        got = member.fetch()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"


def test_leaving_and_expired_members_release_their_records(fresh_broker: BrokerProcess) -> None:
    fresh_broker.config.update(SHARE_BROKER_CONFIG)
    with fresh_broker, WireClient(fresh_broker.bootstrap) as admin_wire:
        admin_wire.create_topic(TOPIC, 1)
        topic_id = admin_wire.metadata([TOPIC]).topics[0].topic_id
        admin_wire.wait_for_coordinator(GROUP)
        set_group_config(fresh_broker.bootstrap, GROUP, {
            "share.record.lock.duration.ms": "60000", "share.session.timeout.ms": "6000",
            "share.heartbeat.interval.ms": "1000", "share.auto.offset.reset": "earliest"})
        produce(fresh_broker.bootstrap, TOPIC, 5, 1)
        a, b, c = (Member(fresh_broker.bootstrap, topic_id) for _ in range(3))
        try:
            got = acquire(a, [], 30, "a to acquire the records")
            assert got == [(0, 4, 1)], got
            b.heartbeat()
            assert b.fetch() == []  # a holds them all
            a.heartbeat(leave=True)  # a's connection stays open: only the coordinator can release
            assert acquire(b, [], 20, "a's records to be released when it left") == [(0, 4, 2)]

            # b goes silent (its connection open); c keeps heartbeating and gets b's records
            # once b's session (6 s) has expired.
            c.heartbeat()
            assert c.fetch() == []
            assert acquire(c, [], 30, "b's records to be released when its session expired") == [(0, 4, 3)]
        finally:
            for m in (a, b, c):
                m.close()
