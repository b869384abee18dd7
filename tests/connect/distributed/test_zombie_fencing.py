"""KIP-618 zombie fencing on the bundled broker: the ``tasks-fencing-<n>`` record and the
pending-fencing rules of the config store, and a real zombie producer of an old task generation
fenced out when an exactly-once source connector shrinks from 3 to 2 tasks."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_util import Cluster, wait_for
from cluster_util import datagen as cluster_datagen
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from strom.connect.runtime.distributed.config_store import TASK_COUNT_UPDATED, KafkaConfigBackingStore
from strom.connect.runtime.distributed.fencing import transactional_ids
from strom.connect.runtime.herder import ConnectorTaskId, State
from strom.core.testing import BrokerProcess


def config_store(broker: BrokerProcess, topic: str, events: list[tuple[str, str]] | None = None
                 ) -> KafkaConfigBackingStore:
    base = {"bootstrap.servers": broker.bootstrap}
    store = KafkaConfigBackingStore(topic, dict(base), dict(base), dict(base), replication_factor=1,
                                    listener=(lambda k, n: events.append((k, n))) if events is not None else None)
    store.start()
    return store


def test_transactional_ids_are_kafkas() -> None:
    # Worker.taskTransactionalId: "%s-%s-%d" % (group.id, connector, task)
    assert transactional_ids("connect-cluster", "my-src", 3) == [
        "connect-cluster-my-src-0", "connect-cluster-my-src-1", "connect-cluster-my-src-2"]
    assert transactional_ids("g", "c", 0) == []


def test_task_count_record_round_trip_and_pending_rules(connect_broker: BrokerProcess, read_all: Any) -> None:
    topic = f"cfg-fence-{uuid.uuid4().hex[:8]}"
    events: list[tuple[str, str]] = []
    a = config_store(connect_broker, topic, events)
    try:
        a.put_connector_config("src", {"connector.class": "DatagenConnector", "tasks.max": "3"}, "STARTED")
        a.refresh()
        s = a.snapshot()
        assert not s.is_pending_fencing("src") and s.task_count_record("src") is None
        # New task configs: pending until a task-count record comes after them.
        a.put_task_configs("src", [{"t": "0"}, {"t": "1"}, {"t": "2"}])
        a.refresh()
        s = a.snapshot()
        assert s.is_pending_fencing("src") and s.task_count_record("src") is None
        a.put_task_count_record("src", 3)
        s = a.snapshot()  # put_task_count_record reads its record back
        assert not s.is_pending_fencing("src") and s.task_count_record("src") == 3
        assert (TASK_COUNT_UPDATED, "src") in events
        # Shrink: pending again, and the record still says how many ids the next round fences.
        a.put_task_configs("src", [{"t": "0"}, {"t": "1"}])
        a.refresh()
        s = a.snapshot()
        assert s.is_pending_fencing("src") and s.task_count_record("src") == 3 and len(s.tasks("src")) == 2
        # Task configs of a connector with no config (Kafka ignores them): not pending.
        a.put_task_configs("ghost", [{"t": "0"}])
        a.refresh()
        assert not a.snapshot().is_pending_fencing("ghost")

        # Kafka's format, byte for byte: key tasks-fencing-<n>, value {"task-count": N}.
        raw = [(k, v) for _, k, v in read_all(connect_broker, topic) if k.startswith(b"tasks-fencing-")]
        assert raw == [(b"tasks-fencing-src", b'{"task-count":3}')]

        # Records as a Java worker writes them (JsonConverter spacing), and corrupt ones, which
        # are ignored and change nothing.
        p = Producer({"bootstrap.servers": connect_broker.bootstrap})
        p.produce(topic, key=b"tasks-fencing-src", value=b"not json")
        p.produce(topic, key=b"tasks-fencing-src", value=b'{"task-count": "two"}')
        p.produce(topic, key=b"tasks-fencing-src", value=None)
        p.flush(10)
        a.refresh()
        s = a.snapshot()
        assert s.is_pending_fencing("src") and s.task_count_record("src") == 3
        p.produce(topic, key=b"tasks-fencing-src", value=b'{"task-count": 2}')
        p.flush(10)
        a.refresh()
        s = a.snapshot()
        assert not s.is_pending_fencing("src") and s.task_count_record("src") == 2

        # A tombstone of the connector keeps the fencing state (zombies of a deleted connector may
        # still run), as Kafka's processConnectorRemoval does.
        a.put_task_configs("src", [{"t": "0"}])
        a.remove_connector_config("src")
        a.refresh()
        s = a.snapshot()
        assert s.connectors() == [] and s.is_pending_fencing("src") and s.task_count_record("src") == 2

        # A second worker replaying the topic from the start reaches the same state.
        b = config_store(connect_broker, topic)
        try:
            s2 = b.snapshot()
            assert s2.pending_fencing == s.pending_fencing and s2.task_count_records == s.task_count_records
        finally:
            b.stop()
    finally:
        a.stop()


@pytest.fixture
def cluster(connect_broker: BrokerProcess) -> Iterator[Cluster]:
    c = Cluster(connect_broker, {"exactly.once.source.support": "enabled"}, group_prefix="eos-cluster")
    yield c
    c.stop_all()


def datagen(topic: str, tasks: int) -> dict[str, str]:
    return cluster_datagen(topic, tasks, **{"random.seed": "7"})


def _count(broker: BrokerProcess, topic: str, isolation: str) -> int:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "enable.partition.eof": True, "auto.offset.reset": "earliest", "isolation.level": isolation})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        n = 0
        while True:
            m = c.poll(10)
            assert m is not None, "no EOF from the broker"
            error = m.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                return n
            n += 1
    finally:
        c.close()


def test_zombie_of_old_generation_is_fenced(cluster: Cluster, connect_broker: BrokerProcess,
                                            topic_name: str, read_all: Any) -> None:
    a, b = cluster.worker(18321), cluster.worker(18322)
    assert a.wait_for_assignment(30) and b.wait_for_assignment(30)
    leader = wait_for(lambda: next((h for h in (a, b) if h.leader_url() is None and not h._rebalancing
                                    and h._leader_id), None), what="a leader")
    leader.put_connector_config("eos", datagen(topic_name, 3), allow_replace=False)

    def running(n: int) -> bool:
        st = leader.connector_status("eos")
        return len(st.tasks) == n and all(t.state == State.RUNNING for t in st.tasks)
    wait_for(lambda: running(3), what="3 tasks RUNNING")
    # First generation: no record before it, so nothing fenced, but its size is recorded.
    snap = leader.config_store.snapshot()
    assert snap.task_count_record("eos") == 3 and not snap.is_pending_fencing("eos")

    # The zombie: a producer with old task 2's transactional id, mid-transaction.
    zombie_topic = f"zombie-{uuid.uuid4().hex[:8]}"
    zombie = Producer({"bootstrap.servers": connect_broker.bootstrap,
                       "transactional.id": f"{cluster.group}-eos-2"})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for i in range(5):
        zombie.produce(zombie_topic, key=str(i).encode(), value=b"zombie")
    assert zombie.flush(30) == 0
    assert _count(connect_broker, zombie_topic, "read_uncommitted") == 5  # really in the log

    # Reconfigure 3 -> 2 tasks; the new generation starts only after the fencing round.
    leader.put_connector_config("eos", datagen(topic_name, 2), allow_replace=True)
    wait_for(lambda: leader.config_store.snapshot().task_count_record("eos") == 2, what="task count record 2")
    # The status topic can still show the old generation's tasks 0 and 1 RUNNING for a moment,
    # so the new generation counts as started once no worker is waiting for the fencing round.
    wait_for(lambda: running(2) and all(leader.task_configs("eos")[i].config.get("tasks.max") == "2"
                                        for i in range(2))
             and a.awaiting_fencing() == [] and b.awaiting_fencing() == [], what="2 new tasks RUNNING")
    assert sorted(a.assigned_tasks() + b.assigned_tasks()) == [ConnectorTaskId("eos", 0), ConnectorTaskId("eos", 1)]

    try:
        with pytest.raises(KafkaException) as err:
            zombie.commit_transaction(30)
    finally:
        with contextlib.suppress(KafkaException):  # a fenced producer's close reports the fencing again
            zombie.close()
    code = err.value.args[0].code()  # KafkaException carries the KafkaError
    assert code in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH), err.value
    assert _count(connect_broker, zombie_topic, "read_committed") == 0

    # In the config topic: the commit of the 2-task generation, then its task-count record.
    keys = [(k, v) for _, k, v in read_all(connect_broker, cluster.config_topic)
            if k in (b"commit-eos", b"tasks-fencing-eos")]
    assert [(k, json.loads(v or b"null")) for k, v in keys] == [
        (b"commit-eos", {"tasks": 3}), (b"tasks-fencing-eos", {"task-count": 3}),
        (b"commit-eos", {"tasks": 2}), (b"tasks-fencing-eos", {"task-count": 2})]
