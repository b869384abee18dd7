"""Groups and offsets live in __consumer_offsets: a restart (clean or kill -9) rebuilds them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.testing import BrokerProcess

CONFIG = {"group.initial.rebalance.delay.ms": "0"}


def _wait(cond: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_committed_offsets_and_group_survive_restart(tmp_path: Path, how: str) -> None:
    proc = BrokerProcess(tmp_path / "data", config=CONFIG).start()
    try:
        topic, group = f"r-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        admin.create_topics([NewTopic(topic, 2)])[topic].result(30)
        p = Producer({"bootstrap.servers": proc.bootstrap})
        for i in range(20):
            p.produce(topic, value=b"v%d" % i, partition=i % 2)
        p.flush(30)
        c = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": group, "group.protocol": "classic",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 20 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                seen += 1
        assert seen == 20
        c.commit(offsets=[TopicPartition(topic, 0, 10, metadata="m0"), TopicPartition(topic, 1, 9)],
                 asynchronous=False)
        c.close()
        extra = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": group + "-simple"})
        extra.commit(offsets=[TopicPartition(topic, 1, 3)], asynchronous=False)
        extra.close()
        if how == "stop":
            proc.stop()
        else:
            proc.kill()
        proc.start()
        check = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": group})
        got = check.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=20)
        check.close()
        assert [(tp.offset, tp.metadata) for tp in got] == [(10, "m0"), (9, None)]
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        listed = {g.group_id: g.state.name for g in admin.list_consumer_groups().result(20).valid}
        assert listed.get(group) == "EMPTY" and listed.get(group + "-simple") == "EMPTY"
    finally:
        if proc.alive:
            proc.kill()


def test_stable_member_keeps_its_generation_across_restart(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path / "data", config=CONFIG).start()
    try:
        topic, group = f"r-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        admin.create_topics([NewTopic(topic, 2)])[topic].result(30)
        rebalances: list[str] = []
        c = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": group, "group.protocol": "classic",
                      "session.timeout.ms": 30000, "heartbeat.interval.ms": 500,
                      "reconnect.backoff.max.ms": 200, "auto.offset.reset": "earliest"})
        c.subscribe([topic], on_assign=lambda *_: rebalances.append("assign"),
                    on_revoke=lambda *_: rebalances.append("revoke"))
        _wait(lambda: (c.poll(0.1), rebalances == ["assign"])[1])
        before = admin.describe_consumer_groups([group])[group].result(10)
        member_id = before.members[0].member_id
        proc.stop()
        proc.start()
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        after = admin.describe_consumer_groups([group])[group].result(20)
        assert after.state.name == "STABLE" and [m.member_id for m in after.members] == [member_id]
        assert sorted(tp.partition for tp in after.members[0].assignment.topic_partitions) == [0, 1]
        # The member reconnects, keeps consuming and heartbeats in its old generation: no rebalance.
        p = Producer({"bootstrap.servers": proc.bootstrap})
        p.produce(topic, value=b"after-restart", partition=1)
        p.flush(30)
        got: list[bytes] = []
        end = time.monotonic() + 30
        while time.monotonic() < end and not got:
            m = c.poll(0.1)
            if m is not None and not m.error():
                got.append(m.value() or b"")
        end = time.monotonic() + 2
        while time.monotonic() < end:
            c.poll(0.1)
        assert got == [b"after-restart"]
        assert rebalances == ["assign"]
        c.close()
    finally:
        if proc.alive:
            proc.kill()
