"""Share groups (KIP-932) end to end: real share consumers (confluent-kafka's ``ShareConsumer``,
Java's ``KafkaShareConsumer``) against strom's broker and against Apache Kafka 4.3.1.

``share_broker`` is one broker per session of each kind, parametrized ``strom`` (marked
``broker``) and ``kafka`` (marked ``reference``), both started with ``SHARE_BROKER_CONFIG`` so
a group may use short record locks. ``fresh_share_broker`` is a broker of the test's own, for
tests that kill -9 and restart it. The helpers are in tests/helpers/share_kit.py.

A strom broker that does not advertise the share-consumer APIs fails the test at once (naming
the missing APIs) instead of letting the client wait for a group it can never join.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_ref import KafkaRef
from ref_fixtures import skip_without_java
from share_kit import SHARE_BROKER_CONFIG, missing_share_apis

from strom.core.testing import BrokerProcess, ManagedProcess

KINDS = [pytest.param("strom", marks=pytest.mark.broker), pytest.param("kafka", marks=pytest.mark.reference)]

_session: dict[str, ManagedProcess] = {}


def _require_share_apis(bootstrap: str, kind: str) -> None:
    missing = missing_share_apis(bootstrap)
    if missing:
        pytest.fail(f"{kind} at {bootstrap} does not advertise {', '.join(missing)} (ApiVersions)")


def _start(kind: str, data_dir: Path) -> BrokerProcess | KafkaRef:
    if kind == "kafka":
        skip_without_java()
        return KafkaRef(data_dir, config=SHARE_BROKER_CONFIG).start()
    return BrokerProcess(data_dir, config=SHARE_BROKER_CONFIG).start()


@pytest.fixture(scope="session")
def _share_brokers() -> Iterator[dict[str, ManagedProcess]]:
    yield _session
    for proc in _session.values():
        proc.close()
    _session.clear()


@pytest.fixture(params=KINDS)
def share_broker(request: pytest.FixtureRequest, _share_brokers: dict[str, ManagedProcess],
                 tmp_path_factory: pytest.TempPathFactory) -> BrokerProcess | KafkaRef:
    """The session's broker of the parameter's kind, started on first use."""
    kind: str = request.param
    proc = _share_brokers.get(kind)
    if proc is None or not proc.alive:
        proc = _start(kind, tmp_path_factory.mktemp(f"share-{kind}"))
        _share_brokers[kind] = proc
    assert isinstance(proc, BrokerProcess | KafkaRef)
    _require_share_apis(proc.bootstrap, kind)
    return proc


@pytest.fixture(params=KINDS)
def fresh_share_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerProcess | KafkaRef]:
    """A broker of the test's own (it may be killed and restarted), closed at the end."""
    proc = _start(request.param, tmp_path / "broker")
    try:
        _require_share_apis(proc.bootstrap, request.param)
        yield proc
    finally:
        proc.close()

