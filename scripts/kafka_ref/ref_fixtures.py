"""pytest fixtures for tests that run against the reference Apache Kafka broker.

A conftest imports these names (``from ref_fixtures import kafka_ref, any_broker, ...``) so
pytest registers them. The Kafka process is one per pytest session even when several test
folders import the fixtures: ``shared_kafka()`` keeps a module-level instance, started on first
use and stopped at session end by whichever fixture instance tears down first (stopping
twice is a no-op). Without a usable Java (17+) the fixtures skip with the reason.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "java_client"))

from java_client import JavaClient
from kafka_ref import KafkaRef, KafkaRefError, java_problem

# Broker settings both strom and Kafka get in tests that compare them: the cleaner looks for
# work every half second instead of every 15 s so compaction tests finish quickly. No setting
# here changes a topic-config default, so DescribeConfigs stays comparable.
SHARED_BROKER_CONFIG: dict[str, str] = {
    "log.cleaner.backoff.ms": "500",
}

_kafka: KafkaRef | None = None


class HasBootstrap(Protocol):
    bootstrap: str


def skip_without_java() -> None:
    problem = java_problem()
    if problem is not None:
        pytest.skip(f"reference Apache Kafka needs Java: {problem}")


def shared_kafka() -> KafkaRef:
    """The session's Kafka node, started on first call."""
    global _kafka
    skip_without_java()
    if _kafka is None or not _kafka.alive:
        ref = KafkaRef(config=SHARED_BROKER_CONFIG)
        try:
            ref.start()
        except KafkaRefError as exc:
            ref.close()
            raise RuntimeError(f"reference Kafka failed to start: {exc}") from exc
        _kafka = ref
    return _kafka


def stop_shared_kafka() -> None:
    global _kafka
    if _kafka is not None:
        _kafka.close()
        _kafka = None


@pytest.fixture(scope="session")
def kafka_ref() -> Iterator[KafkaRef]:
    """Apache Kafka 4.x, KRaft combined mode, one node; shared by the whole session."""
    yield shared_kafka()
    stop_shared_kafka()


@pytest.fixture(scope="session")
def java_client() -> JavaClient:
    """ClientCheck.java compiled against the reference kafka-clients jar."""
    skip_without_java()
    return JavaClient().build()


@pytest.fixture(params=["strom", "kafka"])
def any_broker(request: pytest.FixtureRequest) -> HasBootstrap:
    """The same test against strom (the ``broker`` fixture) and against Apache Kafka."""
    if request.param == "kafka":
        return shared_kafka_for(request)
    broker: HasBootstrap = request.getfixturevalue("broker")
    return broker


def shared_kafka_for(request: pytest.FixtureRequest) -> KafkaRef:
    ref: KafkaRef = request.getfixturevalue("kafka_ref")
    return ref
