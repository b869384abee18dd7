"""ShareFetch / ShareAcknowledge: strom against Apache Kafka 4.3.1, the same raw requests on both.

A member joins through ShareGroupHeartbeat (Kafka serves share fetches only for partitions its
group coordinator initialized), then one scenario of share-session and acknowledgement requests
runs on each broker; every answer is compared: session errors (no session, epoch 0 on
ShareAcknowledge, a wrong epoch, acknowledgements on an opening fetch), the first acquisition
and its lock timeout, acknowledgement errors (offsets past the acquired records, batches out of
order, an unknown type), a re-opened session, closing fetches with and without a session.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable
from typing import Any

from diff_wire import WireClient
from kafka_ref import KafkaRef
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32
from ref_fixtures import kafka_ref  # noqa: F401 (the fixture)
from share_fetch_kit import ShareMember, acquired, fetch_until, offsets_of, produce, set_group_configs

from strom.core.testing import BrokerProcess

GROUP = "diff-share-fetch"
TOPIC = "diff-share-fetch-t"
ACCEPT = 1


def member_id() -> str:
    # A Kafka Uuid's string form: 16 bytes, url-safe base64 without padding.
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def join(bootstrap: str, member: str) -> None:
    """ShareGroupHeartbeat until the member is assigned the topic's partition."""
    with WireClient(bootstrap) as w:
        w.wait_for_coordinator(GROUP)
        epoch = 0
        deadline = time.monotonic() + 60
        while True:
            r = w.request(ShareGroupHeartbeatRequest(
                group_id=GroupId(GROUP), member_id=member, member_epoch=i32(epoch), rack_id=None,
                subscribed_topic_names=(TopicName(TOPIC),) if epoch == 0 else None))
            assert r.error_code == 0, r
            epoch = r.member_epoch
            if r.assignment is not None and r.assignment.topic_partitions:
                return
            assert time.monotonic() < deadline, "not assigned"
            time.sleep(0.2)


def scenario(bootstrap: str) -> list[tuple[object, ...]]:
    with WireClient(bootstrap) as w:
        w.create_topic(TOPIC, 1)
        w.wait_for_leaders(TOPIC, 1)
        topic_id = w.metadata([TOPIC]).topics[0].topic_id
    set_group_configs(bootstrap, GROUP, {"share.auto.offset.reset": "earliest"})
    produce(bootstrap, TOPIC, [b"a", b"b", b"c"])
    member = member_id()
    join(bootstrap, member)
    m = ShareMember(bootstrap, GROUP, topic_id, member_id=member)

    def code(r: Any) -> int:
        return int(r.error_code)

    def parts(r: Any) -> list[tuple[int, int, int]]:
        return [(int(p.partition_index), int(p.error_code), int(getattr(p, "acknowledge_error_code", 0)))
                for t in r.responses for p in t.partitions]

    steps: list[tuple[str, Callable[[], object]]] = [
        ("fetch at epoch 1 without a session", lambda: code(m.fetch(epoch=1, max_wait_ms=0))),
        ("acknowledge at epoch 0", lambda: code(m.acknowledge({0: [(0, 0, ACCEPT)]}, epoch=0))),
        ("acknowledge at epoch -1 without a session", lambda: code(m.acknowledge({}, epoch=-1))),
        ("first acquisition", lambda: acquired(fetch_until(m, lambda r: bool(offsets_of(r))))),
        ("acknowledge past the acquired records", lambda: (lambda r: (code(r), parts(r)))(
            m.acknowledge({0: [(5, 5, ACCEPT)]}))),
        ("batches out of order", lambda: (lambda r: (code(r), parts(r)))(
            m.acknowledge({0: [(2, 2, ACCEPT), (0, 0, ACCEPT)]}))),
        ("unknown acknowledge type", lambda: (lambda r: (code(r), parts(r)))(m.acknowledge({0: [(0, 0, 9)]}))),
        ("wrong epoch", lambda: code(m.fetch(epoch=99, max_wait_ms=0))),
        ("acknowledgements on an opening fetch", lambda: code(m.fetch({0: [(0, 0, ACCEPT)]}, epoch=0, max_wait_ms=0))),
    ]
    out: list[tuple[object, ...]] = [(name, step()) for name, step in steps]
    m.epoch = 0
    r = m.fetch(max_wait_ms=0)
    # What is acquired, not which empty partitions are listed: Kafka lists an empty partition in
    # some opening responses and not in others (a partition whose log is empty is left out);
    # strom lists only partitions with records, an error or an acknowledgement result.
    out.append(("re-opened session", code(r), {p: runs for p, runs in acquired(r).items() if runs}))
    r = m.acknowledge({0: [(0, 2, ACCEPT)]})
    out.append(("the old session's records acknowledged", code(r), parts(r)))
    out.append(("closing fetch naming a partition", code(m.fetch(epoch=-1, partitions=(0,), max_wait_ms=0))))
    r = m.fetch({0: [(0, 0, ACCEPT)]}, epoch=-1, max_wait_ms=0)
    out.append(("closing fetch after the close", code(r), parts(r)))
    m.close()
    return out


def test_share_fetch_answers_as_kafka(kafka_ref: KafkaRef, tmp_path: Any) -> None:  # noqa: F811
    expected = scenario(kafka_ref.bootstrap)
    with BrokerProcess(tmp_path / "strom") as strom:
        got = scenario(strom.bootstrap)
    assert got == expected
    # The scenario is not vacuous: the first fetch acquired the three records, with a lock.
    assert ("first acquisition", {0: [(0, 2, 1)]}) in got
