"""A follower whose config topic reader lags behind the leader when an assignment arrives.

The leader assigns from its own view of the config topic and sends its config offset with the
assignment; a connector created just before the leader assigned may not have reached a
follower yet (another worker leads, e.g. a Kafka Connect one, or the follower's reader thread
is starved). Kafka's ``DistributedHerder`` reads the config topic up to the assignment's offset
before it starts anything ("Catching up to assignment's config offset"). A worker that instead
started its work from the configs it happened to have would skip the connector, yet report it
as its own in the next rounds, so no leader would ever hand it out again: the connector stays
UNASSIGNED for good (the flake of the mixed Java/strom compat test).

Here the leader is a plain group member driven by the test (as the Java worker leads in the
compat test): it writes the connector's config after the strom worker joined and assigns the
connector to it at once, while the strom worker's config reader is held back on that record.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest
from cluster_util import Cluster, datagen, wait_for

from strom.connect.exceptions import NotFoundError
from strom.connect.runtime.distributed.assignor import (
    ExtendedAssignment,
    WorkerState,
    join_protocols,
    serialize_assignment,
)
from strom.connect.runtime.distributed.config_store import KafkaConfigBackingStore
from strom.connect.runtime.distributed.membership import GroupMembership
from strom.connect.runtime.herder import State
from strom.core.testing import BrokerProcess

LEADER_URL = "http://127.0.0.1:1/"
LATE = "late"


@pytest.fixture
def cluster(connect_broker: BrokerProcess) -> Iterator[Cluster]:
    c = Cluster(connect_broker)
    yield c
    c.stop_all()


@pytest.fixture
def leader(connect_broker: BrokerProcess, cluster: Cluster) -> Iterator[tuple[GroupMembership,
                                                                               KafkaConfigBackingStore]]:
    """A test-driven group leader with its own config store on the cluster's config topic."""
    conf = {"bootstrap.servers": connect_broker.bootstrap}
    store = KafkaConfigBackingStore(cluster.config_topic, conf, conf, conf, replication_factor=1)
    store.start()
    member = GroupMembership(connect_broker.bootstrap, cluster.group, client_id="test-leader",
                             session_timeout_ms=6000, heartbeat_interval_ms=500, rebalance_timeout_ms=20000)
    yield member, store
    member.close(leave=True)
    store.stop()


def test_assignment_ahead_of_the_followers_config_view(
        cluster: Cluster, leader: tuple[GroupMembership, KafkaConfigBackingStore], topic_name: str,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="strom.connect.distributed")
    member, store = leader
    # The test's member forms the group alone first, so it leads the next generation too.
    joined = member.join(join_protocols(WorkerState(LEADER_URL, store.refresh())))
    assert joined.is_leader
    member.sync({joined.member_id: serialize_assignment(ExtendedAssignment(
        leader=joined.member_id, leader_url=LEADER_URL, config_offset=store.snapshot().offset))},
        joined.protocol_name)
    member.start_heartbeats()

    worker = cluster.worker(18341)  # reads the (empty) config topic, then joins
    # Hold the worker's config reader on the connector's record until released: a reader that
    # has not got that far when the assignment arrives.
    release = threading.Event()
    reader = worker.config_store.log
    deliver = reader.callback

    def held_back(partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        if key == f"connector-{LATE}".encode():
            release.wait(60)
        deliver(partition, offset, key, value)

    reader.callback = held_back
    try:
        # The worker's JoinGroup started a rebalance: the test's member rejoins and leads it.
        wait_for(member.rejoin_needed.is_set, what="the worker's JoinGroup")
        joined = member.join(join_protocols(WorkerState(LEADER_URL, store.snapshot().offset)))
        assert joined.is_leader and len(joined.members) == 2
        # The connector is created after the worker joined, and assigned to it straight away.
        store.put_connector_config(LATE, {"name": LATE, **datagen(topic_name, 1)}, "STARTED")
        offset = store.refresh()
        (worker_member,) = (m for m in joined.members if m != joined.member_id)
        version = 2 if joined.protocol_name == "sessioned" else 1
        assignments = {
            joined.member_id: ExtendedAssignment(version, leader=joined.member_id, leader_url=LEADER_URL,
                                                 config_offset=offset),
            worker_member: ExtendedAssignment(version, leader=joined.member_id, leader_url=LEADER_URL,
                                              config_offset=offset, connectors=(LATE,)),
        }
        member.sync({m: serialize_assignment(a) for m, a in assignments.items()}, joined.protocol_name)
        wait_for(lambda: worker._generation == joined.generation, what="the worker's SyncGroup")
        # The worker noticed it is behind the assignment and reads on instead of starting work.
        wait_for(lambda: any("behind the assignment's" in r.getMessage() for r in caplog.records),
                 what="the worker catching up with the assignment's config offset")
        assert worker.config_store.snapshot().offset < offset  # it really lags
        assert not worker.worker.is_running(LATE)
    finally:
        release.set()
    # The test's member leaves: the worker leads alone from here on, with its own assignor.
    member.close(leave=True)
    # The reader was only just released: until it applies the connector's record the worker
    # answers 404 for it, which is "not yet" here (wait_for re-raises what it is not told to ignore).
    status = wait_for(lambda: (st := worker.connector_status(LATE)).connector.state == State.RUNNING and st,
                      timeout=30, what=f"{LATE} RUNNING on the worker", ignore=(NotFoundError,))
    assert status.connector.worker_id == worker.worker_id
    assert worker.assigned_connectors() == [LATE]
