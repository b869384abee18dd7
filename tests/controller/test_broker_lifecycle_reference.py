# mypy: disable-error-code="arg-type,union-attr"
"""BrokerRegistration / BrokerHeartbeat on the controller listener, strom against Apache Kafka
4.3.1: the same raw-wire "other broker" scenario runs against both controllers and every answer
(error code, caught up, fenced, should shut down) and every fenced/unfenced state seen through
DescribeCluster on the broker listener must be equal. Epochs are log offsets and differ; what
is compared is whether one was given and whether a re-registration kept it.

The scenario: registration errors (another cluster's id, an unsupported metadata.version, a
finalized feature left out, no or a reserved log directory), a heartbeat before registering;
then register, fenced until caught up, unfenced, a second incarnation refused while the session
lives, the same incarnation amended (same epoch; the amended record's offset is what "caught up"
means now), a stale epoch, want_fence, controlled shutdown of a partition leader (leaderless,
then shut down), and finally the session lapses: fenced, and a new incarnation may register.
Kafka's shared node keeps broker.session.timeout.ms at its 9 s default, so the lapse takes that
long there (strom runs with 2 s).
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from broker_lifecycle_kit import (
    RemoteBroker,
    controller_bootstrap,
    describe_cluster,
    outcome,
    registration_features,
)
from diff_wire import WireClient
from kafka_ref import KafkaRef
from kio.schema.broker_registration.v4.request import Feature
from kio.schema.create_topics.v7.request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
)
from kio.static.primitive import i16, i32
from ref_fixtures import kafka_ref, skip_without_java  # noqa: F401

from strom.core.testing import BrokerProcess

pytestmark = pytest.mark.reference


@pytest.fixture
def strom_node(tmp_path: Path) -> Iterator[BrokerProcess]:
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "broker.session.timeout.ms": "2000"}
    with BrokerProcess(tmp_path / "data", config=config) as proc:
        yield proc


def _features(features: dict[str, tuple[int, int]]) -> tuple[Feature, ...]:
    return tuple(Feature(name=n, min_supported_version=i16(lo), max_supported_version=i16(hi))
                 for n, (lo, hi) in features.items())


def _settle(bootstrap: str, broker_id: int, want: bool | None, timeout: float = 30.0) -> bool | None:
    """The broker's fenced flag in DescribeCluster (None: not listed) once it is ``want``, or
    what it is at the deadline (a broker's metadata follows its controller's by a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = describe_cluster(bootstrap)[1].get(broker_id)
        if seen is want or time.monotonic() > deadline:
            return seen
        time.sleep(0.05)


def _until(call: Any, want: tuple[Any, ...], timeout: float = 30.0) -> tuple[Any, ...]:
    """Repeat a heartbeat until it answers ``want`` (Kafka's own broker must first report the
    offset a controlled shutdown waits for), or return the last answer at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        got = outcome(call())
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def scenario(controller: str, bootstrap: str, broker_id: int, lapse_timeout: float) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    cluster_id, _ = describe_cluster(bootstrap)
    features = registration_features(bootstrap)
    b = RemoteBroker(controller, broker_id, cluster_id, features)
    out.append(("wrong cluster id", outcome(b.register(cluster_id="not-this-cluster"))))
    out.append(("metadata.version 7 only", outcome(b.register(features=_features({**features,
                                                                                  "metadata.version": (7, 7)})))))
    out.append(("group.version left out", outcome(b.register(features=_features(
        {k: v for k, v in features.items() if k != "group.version"})))))
    out.append(("no log dirs", outcome(b.register(log_dirs=()))))
    out.append(("reserved log dir", outcome(b.register(log_dirs=(uuid.UUID(int=2),)))))
    out.append(("heartbeat before registering", outcome(b.heartbeat(0, epoch=0))))
    out.append(("register", outcome(b.register())))
    out.append(("heartbeat at offset 0", outcome(b.heartbeat(0))))
    out.append(("heartbeat one short", outcome(b.heartbeat(b.epoch - 1))))
    out.append(("fenced in DescribeCluster", _settle(bootstrap, broker_id, True)))
    out.append(("heartbeat caught up", outcome(b.heartbeat(b.epoch))))
    out.append(("unfenced in DescribeCluster", _settle(bootstrap, broker_id, False)))
    out.append(("other incarnation, session alive", outcome(b.register(incarnation_id=uuid.uuid4()))))
    amended = b.register()
    out.append(("same incarnation again", (outcome(amended), int(amended.broker_epoch) == b.epoch)))
    out.append(("heartbeat at the first record's offset", outcome(b.heartbeat(b.epoch))))
    out.append(("stale epoch", outcome(b.heartbeat(b.epoch, epoch=b.epoch - 1))))
    far = 1 << 40
    out.append(("want_fence", outcome(b.heartbeat(far, want_fence=True))))
    out.append(("fenced after want_fence", _settle(bootstrap, broker_id, True)))
    out.append(("fenced, behind the amended record", outcome(b.heartbeat(b.epoch))))
    out.append(("unfenced again", outcome(b.heartbeat(far))))
    topic = f"lifecycle-{uuid.uuid4().hex[:8]}"
    with WireClient(bootstrap) as c:
        created = c.request(CreateTopicsRequest(topics=(CreatableTopic(
            name=topic, num_partitions=i32(-1), replication_factor=i16(-1), configs=(),
            assignments=(CreatableReplicaAssignment(partition_index=i32(0), broker_ids=(i32(broker_id),)),)),),
            timeout=timedelta(seconds=30), validate_only=False))
    out.append(("topic led by it", int(created.topics[0].error_code)))
    out.append(("want_shut_down while leading", outcome(b.heartbeat(far, want_shut_down=True))))
    out.append(("still unfenced in controlled shutdown", _settle(bootstrap, broker_id, False)))
    out.append(("want_shut_down, leading nothing",
                _until(lambda: b.heartbeat(far, want_shut_down=True), (0, True, True, True))))
    out.append(("fenced after shutting down", _settle(bootstrap, broker_id, True)))
    out.append(("unfenced once more", outcome(b.heartbeat(far))))
    out.append(("unfenced in DescribeCluster once more", _settle(bootstrap, broker_id, False)))
    # Heartbeats stop: the session lapses and the controller fences the broker.
    out.append(("fenced after the session lapsed", _settle(bootstrap, broker_id, True, timeout=lapse_timeout)))
    out.append(("another incarnation after the lapse", outcome(
        RemoteBroker(controller, broker_id, cluster_id, features).register())))
    return out


@pytest.fixture
def own_kafka(tmp_path: Path) -> Iterator[KafkaRef]:
    """A Kafka node of this test's own: the scenario leaves a registered (fenced) broker behind,
    which the shared node's other differential tests would see in DescribeCluster and elections."""
    skip_without_java()
    with KafkaRef(tmp_path / "kafka") as ref:
        yield ref


def test_broker_lifecycle_matches_kafka(strom_node: BrokerProcess, own_kafka: KafkaRef) -> None:
    broker_id = random.randint(100, 30000)
    kafka = scenario(f"{own_kafka.host}:{own_kafka.controller_port}", own_kafka.bootstrap, broker_id, 30.0)
    strom = scenario(controller_bootstrap(strom_node), strom_node.bootstrap, broker_id, 15.0)
    assert [step for step, _ in strom] == [step for step, _ in kafka]
    diffs = [(step, s, k) for (step, s), (_, k) in zip(strom, kafka, strict=True) if s != k]
    assert not diffs, f"strom differs from Kafka 4.3.1 (step, strom, kafka): {diffs}"
    # The scenario is not vacuous: Kafka did refuse, fence and unfence.
    answers = dict(kafka)
    assert answers["other incarnation, session alive"] == (101, False)
    assert answers["fenced after the session lapsed"] is True
    assert answers["heartbeat caught up"] == (0, True, False, False)


def test_controller_api_versions_match_kafka(strom_node: BrokerProcess, kafka_ref: KafkaRef) -> None:  # noqa: F811
    with WireClient(controller_bootstrap(strom_node)) as c:
        strom = c.api_versions()
    with WireClient(f"{kafka_ref.host}:{kafka_ref.controller_port}") as c:
        kafka = c.api_versions()
    # strom's controller listener lists only what it serves, each with Kafka's range: all of
    # Kafka's controller APIs but Fetch (its raft fetch), DescribeCluster and the ones strom has
    # no handler for (delegation tokens, raft voters, Envelope, broker-to-controller APIs...).
    assert strom == {key: kafka[key] for key in strom}
    assert {18, 19, 55, 57, 62, 63} <= set(strom)
    assert 1 not in strom and 60 not in strom
