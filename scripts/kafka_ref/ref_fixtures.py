"""pytest fixtures for tests that run against the reference Apache Kafka broker.

A conftest imports these names (``from ref_fixtures import kafka_ref, any_broker, ...``) so
pytest registers them; tests/conftest.py puts this folder and scripts/java_client on the
import path. The Kafka process is one per pytest session even when several test
folders import the fixtures: ``shared_kafka()`` keeps a module-level instance, started on first
use and stopped at session end by whichever fixture instance tears down first (stopping
twice is a no-op). Without a usable Java (17+) the fixtures skip with the reason.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest
from java_client import JavaClient
from kafka_ref import KafkaRef, KafkaRefError, classpath, ensure_jars, java_problem

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


def kafka_tool(main_class: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """One run of a Kafka command-line tool (``kafka.admin.ConfigCommand``...) from the reference
    jars, output captured; skips the test without Java."""
    skip_without_java()
    cmd = ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath(ensure_jars()), main_class, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def kafka_tool_output(main_class: str, *args: str, timeout: float = 180) -> str:
    """:func:`kafka_tool`'s standard output; the tool must exit 0."""
    proc = kafka_tool(main_class, *args, timeout=timeout)
    assert proc.returncode == 0, f"{main_class} {args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return proc.stdout


def tools_jar() -> Path | None:
    """The kafka-tools jar (the classes behind bin/kafka-*.sh: TransactionsCommand, TopicCommand,
    MetadataQuorumCommand, ...) of the reference's Kafka version: ``STROM_KAFKA_TOOLS_JAR``, else
    the reference's jar set (scripts/kafka_ref/pom.xml lists it), else the local Maven repository."""
    if os.environ.get("STROM_KAFKA_TOOLS_JAR"):
        return Path(os.environ["STROM_KAFKA_TOOLS_JAR"])
    lib = ensure_jars()
    clients = sorted(lib.glob("kafka-clients-*.jar"))
    if not clients:
        return None
    version = clients[-1].name.removeprefix("kafka-clients-").removesuffix(".jar")
    if (lib / f"kafka-tools-{version}.jar").is_file():
        return lib / f"kafka-tools-{version}.jar"
    jar = Path.home() / ".m2" / "repository" / "org" / "apache" / "kafka" / "kafka-tools" / version / \
        f"kafka-tools-{version}.jar"
    return jar if jar.is_file() else None


def needs_tools() -> Path:
    """The kafka-tools jar, or skip the test (no Java, or no jar) saying how to get it."""
    skip_without_java()
    jar = tools_jar()
    if jar is None:
        pytest.skip("kafka-tools jar neither in the reference's jars nor in ~/.m2: "
                    "re-run scripts/kafka_ref/fetch.sh or set STROM_KAFKA_TOOLS_JAR")
    return jar


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
