# mypy: disable-error-code="arg-type,union-attr"
"""The controller listener (KIP-631): a raw-wire "broker 2" registers with strom's controller,
heartbeats, is unfenced once it has caught up with its registration, and is fenced (out of every
ISR and leadership) when its heartbeats lapse for broker.session.timeout.ms; Kafka's error codes
for a stale epoch, a broker that never registered, a second incarnation of a live broker, another
cluster's id, an unsupported feature level and missing log directories; want_shut_down goes
through controlled shutdown. The answers were probed against Apache Kafka 4.3.1 (the same
scenario runs against it in test_broker_lifecycle_reference.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from broker_lifecycle_kit import (
    Heartbeater,
    RemoteBroker,
    controller_bootstrap,
    describe_cluster,
    outcome,
    registration_features,
)
from diff_wire import WireClient
from kio.schema.create_topics.v7.request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
)
from kio.schema.describe_quorum.v2.request import DescribeQuorumRequest, PartitionData, TopicData
from kio.static.primitive import i16, i32

from strom.core.testing import BrokerProcess, wait_for

SESSION_TIMEOUT_MS = 2000
OK, STALE_BROKER_EPOCH, UNSUPPORTED_VERSION = 0, 77, 35
DUPLICATE_BROKER_REGISTRATION, INCONSISTENT_CLUSTER_ID, INVALID_REGISTRATION = 101, 104, 119


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
              "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)}
    with BrokerProcess(Path(tmp_path_factory.mktemp("ctrl")), config=config) as proc:
        yield proc


def _remote(node: BrokerProcess, broker_id: int) -> RemoteBroker:
    cluster_id, _ = describe_cluster(node.bootstrap)
    return RemoteBroker(controller_bootstrap(node), broker_id, cluster_id, registration_features(node.bootstrap))


def _partitions(bootstrap: str, topic: str) -> list[tuple[int, int, tuple[int, ...]]]:
    with WireClient(bootstrap) as c:
        meta = c.metadata([topic])
    return sorted((int(p.partition_index), int(p.leader_id), tuple(int(i) for i in p.isr_nodes))
                  for p in meta.topics[0].partitions)


def _metadata_brokers(bootstrap: str) -> dict[int, int]:
    with WireClient(bootstrap) as c:
        return {int(b.node_id): int(b.port) for b in c.metadata([]).brokers}


def test_controller_listener_serves_only_the_controller_apis(node: BrokerProcess) -> None:
    with WireClient(controller_bootstrap(node)) as c:
        controller_apis = c.api_versions()
    # ApiVersions, BrokerRegistration, BrokerHeartbeat and the admin APIs Kafka's controller
    # serves too (not Metadata, Produce, Fetch, DescribeCluster, group APIs...).
    assert set(controller_apis) == {17, 18, 19, 20, 29, 30, 31, 32, 33, 36, 37, 43, 44, 45, 46, 49, 50, 51, 55,
                                    57, 62, 63}
    assert (controller_apis[62], controller_apis[63]) == ((0, 4), (0, 2))
    with WireClient(controller_bootstrap(node)) as c, pytest.raises(ConnectionError):
        c.metadata(None)  # Kafka's controller closes the connection on an API it does not serve
    with WireClient(node.bootstrap) as c:
        broker_apis = c.api_versions()
    assert 62 not in broker_apis and 63 not in broker_apis and 3 in broker_apis
    assert all(broker_apis[k] == controller_apis[k] for k in controller_apis if k not in (62, 63))
    # The garbage-free close above did not hurt the node.
    assert describe_cluster(node.bootstrap)[1] == {1: False}


def test_register_heartbeat_unfence_and_fence_on_session_timeout(node: BrokerProcess) -> None:
    b = _remote(node, 2)
    assert outcome(b.register()) == (OK, True)
    # Fenced until its metadata offset reaches its registration record.
    assert outcome(b.heartbeat(0)) == (OK, False, True, False)
    assert describe_cluster(node.bootstrap)[1] == {1: False, 2: True}
    assert 2 not in describe_cluster(node.bootstrap, include_fenced=False)[1]
    assert outcome(b.heartbeat(b.epoch)) == (OK, True, False, False)
    topic = f"t-{uuid.uuid4().hex[:8]}"
    with Heartbeater(b, b.epoch) as beats:
        assert describe_cluster(node.bootstrap, include_fenced=False)[1] == {1: False, 2: False}
        assert _metadata_brokers(node.bootstrap) == {1: node.port, 2: b.port}
        with WireClient(node.bootstrap) as c:
            created = c.request(CreateTopicsRequest(topics=(CreatableTopic(
                name=topic, num_partitions=i32(4), replication_factor=i16(2), assignments=(), configs=()),),
                timeout=timedelta(seconds=30), validate_only=False))
        assert created.topics[0].error_code == 0, created
        before = _partitions(node.bootstrap, topic)
        assert all(set(isr) == {1, 2} for _, _, isr in before)
        assert {leader for _, leader, _ in before} == {1, 2}
        # A second incarnation of a broker whose session is alive is refused.
        assert outcome(b.register(incarnation_id=uuid.uuid4())) == (DUPLICATE_BROKER_REGISTRATION, False)
        # The same incarnation amends its registration: same epoch, still unfenced.
        assert outcome(b.register()) == (OK, True)
        assert b.register().broker_epoch == b.epoch
    assert beats.errors == []
    stopped = time.monotonic()
    wait_for(lambda: describe_cluster(node.bootstrap)[1].get(2) is True, timeout=SESSION_TIMEOUT_MS / 1000 + 10,
             what="broker 2 fenced after its session timed out", interval=0.05)
    assert time.monotonic() - stopped >= SESSION_TIMEOUT_MS / 1000 * 0.8  # not before its session lapsed
    # Out of every ISR and leadership; this node (no wire heartbeats) is never fenced by the timer.
    assert _partitions(node.bootstrap, topic) == [(p, 1, (1,)) for p in range(4)]
    assert describe_cluster(node.bootstrap, include_fenced=False)[1] == {1: False}
    assert _metadata_brokers(node.bootstrap) == {1: node.port}
    # With its session gone, another incarnation may register (a new epoch).
    again = RemoteBroker(b.controller, 2, b.cluster_id, b.features)
    assert outcome(again.register()) == (OK, True)
    assert again.epoch > b.epoch
    assert outcome(b.heartbeat(b.epoch)) == (STALE_BROKER_EPOCH, False, True, False)


def test_registration_and_heartbeat_errors(node: BrokerProcess) -> None:
    b = _remote(node, 3)
    assert outcome(b.register(cluster_id="another-cluster")) == (INCONSISTENT_CLUSTER_ID, False)
    too_old = {**b.features, "metadata.version": (7, 7)}
    assert outcome(b.register(features=_features(too_old))) == (UNSUPPORTED_VERSION, False)
    without_group = {k: v for k, v in b.features.items() if k != "group.version"}
    assert outcome(b.register(features=_features(without_group))) == (UNSUPPORTED_VERSION, False)
    assert outcome(b.register(log_dirs=())) == (INVALID_REGISTRATION, False)
    assert outcome(b.register(log_dirs=(uuid.UUID(int=1),))) == (INVALID_REGISTRATION, False)
    # This node's own id: its in-process session is always alive.
    assert outcome(_remote(node, 1).register()) == (DUPLICATE_BROKER_REGISTRATION, False)
    # Kafka answers a heartbeat of a broker that never registered with STALE_BROKER_EPOCH.
    assert outcome(b.heartbeat(0, epoch=5)) == (STALE_BROKER_EPOCH, False, True, False)
    assert outcome(b.register()) == (OK, True)
    assert outcome(b.heartbeat(b.epoch, epoch=b.epoch + 1)) == (STALE_BROKER_EPOCH, False, True, False)
    # A fenced broker with no session: another incarnation may take the id.
    assert outcome(RemoteBroker(b.controller, 3, b.cluster_id, b.features).register()) == (OK, True)


def test_want_fence_and_controlled_shutdown(node: BrokerProcess) -> None:
    b = _remote(node, 4)
    b.register()
    assert outcome(b.heartbeat(b.epoch)) == (OK, True, False, False)
    assert outcome(b.heartbeat(b.epoch, want_fence=True)) == (OK, True, True, False)
    assert describe_cluster(node.bootstrap)[1][4] is True
    assert outcome(b.heartbeat(b.epoch)) == (OK, True, False, False)
    topic = f"t-{uuid.uuid4().hex[:8]}"
    with WireClient(node.bootstrap) as c:
        created = c.request(CreateTopicsRequest(topics=(CreatableTopic(
            name=topic, num_partitions=i32(-1), replication_factor=i16(-1), configs=(),
            assignments=(CreatableReplicaAssignment(partition_index=i32(0), broker_ids=(i32(4),)),)),),
            timeout=timedelta(seconds=30), validate_only=False))
    assert created.topics[0].error_code == 0, created
    assert _partitions(node.bootstrap, topic) == [(0, 4, (4,))]
    # It leads a partition: controlled shutdown first (still unfenced, not yet to shut down),
    # which takes its leadership; then, leading nothing, it may shut down now.
    assert outcome(b.heartbeat(b.epoch, want_shut_down=True)) == (OK, True, False, False)
    assert _partitions(node.bootstrap, topic)[0][1] == -1
    assert describe_cluster(node.bootstrap)[1][4] is False
    assert outcome(b.heartbeat(b.epoch, want_shut_down=True)) == (OK, True, True, True)
    assert describe_cluster(node.bootstrap)[1][4] is True


def _features(features: dict[str, tuple[int, int]]) -> tuple[object, ...]:
    from kio.schema.broker_registration.v4.request import Feature

    return tuple(Feature(name=n, min_supported_version=i16(lo), max_supported_version=i16(hi))
                 for n, (lo, hi) in features.items())


def test_admin_apis_on_the_controller_listener(node: BrokerProcess) -> None:
    """KIP-919's --bootstrap-controller: DescribeQuorum answers there, and the voter's endpoint
    it names is that listener; a topic created through it is served by the broker listener."""
    controller = controller_bootstrap(node)
    with WireClient(controller) as c:
        quorum = c.request(DescribeQuorumRequest(topics=(TopicData(
            topic_name="__cluster_metadata", partitions=(PartitionData(partition_index=i32(0)),)),)))
    assert quorum.error_code == 0 and quorum.topics[0].partitions[0].leader_id == 1
    assert [(int(n.node_id), [(lst.name, f"{lst.host}:{lst.port}") for lst in n.listeners]) for n in quorum.nodes] == \
        [(1, [("CONTROLLER", controller)])]
    topic = f"t-{uuid.uuid4().hex[:8]}"
    with WireClient(controller) as c:
        created = c.request(CreateTopicsRequest(topics=(CreatableTopic(
            name=topic, num_partitions=i32(2), replication_factor=i16(1), assignments=(), configs=()),),
            timeout=timedelta(seconds=30), validate_only=False))
    assert created.topics[0].error_code == 0, created
    with WireClient(node.bootstrap) as c:
        c.wait_for_leaders(topic, 2)
