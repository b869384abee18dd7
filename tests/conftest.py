"""Shared fixtures (a real broker subprocess, ``strom dev`` on port 0) and the suite's tiers.

Every test gets exactly the tier markers that describe what it starts, assigned at collection:

- ``broker``: starts strom's broker process (or another broker/worker process: Tansu, the
  null broker, a strom.connect worker). A test that requests a broker fixture (directly or
  through another fixture) or whose module constructs a supervised process gets it.
- ``reference``: needs Apache Kafka's jars and a JVM (the reference broker, Kafka Connect, the
  Java client); tests/reference, tests/differential and tests/connect/compat, plus any test
  using the reference fixtures or, for ``any_broker``, its ``kafka`` parameter.
- ``unit``: neither of the above; no broker process. ``scripts/test.sh --quick`` runs
  ``-m "unit and not slow"``.
- ``slow``: longer than ~20 s on the 2-CPU CI machine, marked by hand where measured.

A unit test that starts a supervised process anyway fails at once (``STROM_TEST_TIER=unit``
makes ``strom.core.testing.ManagedProcess.start`` refuse), so the unit tier stays honest.

The suite's import path is set here and only here: pytest's importlib mode puts no test folder
on ``sys.path``, so the folders whose modules tests import by plain name are added once, the
same folders pyproject's ``[tool.mypy] mypy_path`` names: tests/helpers (shared test helpers:
``kafka_wire``, ``ck_helpers``, ``diff_wire``, ``group_harness``, ``compat_workers``), bench/
(the benchmark scripts whose harness tests/bench checks), scripts/kafka_ref (``kafka_ref``,
``ref_fixtures``), scripts/kconnect_ref and scripts/java_client.
"""

from __future__ import annotations

import os
import re
import sys
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from strom.core.testing import TIER_ENV, BrokerProcess

TIERS: dict[str, str] = {
    "unit": "no broker process (the default for a test with no other tier marker)",
    "broker": "starts strom's broker process (or another broker or worker process)",
    "reference": "needs Apache Kafka's jars and a JVM (reference broker, Kafka Connect, Java client)",
    "slow": "longer than ~20 s on the 2-CPU CI machine",
}

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
IMPORT_PATH = (TESTS / "helpers", REPO / "bench", REPO / "scripts" / "kafka_ref", REPO / "scripts" / "kconnect_ref",
               REPO / "scripts" / "java_client")
for _folder in reversed(IMPORT_PATH):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

# Fixtures that start a broker process, wherever they are defined (item.fixturenames is the
# transitive closure, so a fixture built on one of these counts too).
BROKER_FIXTURES = frozenset({"broker", "fresh_broker", "group_broker", "connect_broker", "tansu", "null"})
REFERENCE_FIXTURES = frozenset({"kafka_ref", "kafka", "java_client", "kconnect_jars"})
# Folders whose every test runs against the reference (and, for differential, strom beside it).
REFERENCE_DIRS = (TESTS / "reference", TESTS / "differential", TESTS / "connect" / "compat")
BROKER_DIRS = (TESTS / "differential", TESTS / "connect" / "compat")
# A module that names one of these starts the process itself (not through a shared fixture).
_STARTS_BROKER = re.compile(r"\b(BrokerProcess|StromBroker|TansuBroker|NullBroker|make_broker|"
                            r"StromConnectProcess|KafkaBroker)\b")
_STARTS_REFERENCE = re.compile(r"\b(KafkaRef|KConnectRef|KafkaBroker|JavaClient)\b")

_module_text: dict[Path, str] = {}


def pytest_configure(config: pytest.Config) -> None:
    for name, doc in TIERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")


def _source(path: Path) -> str:
    if path not in _module_text:
        try:
            _module_text[path] = path.read_text()
        except OSError:
            _module_text[path] = ""
    return _module_text[path]


def _tiers(item: pytest.Item) -> set[str]:
    path = Path(str(item.path)).resolve()
    names = set(getattr(item, "fixturenames", ()))
    text = _source(path)
    tiers: set[str] = set()
    if names & BROKER_FIXTURES or _STARTS_BROKER.search(text) or any(path.is_relative_to(d) for d in BROKER_DIRS):
        tiers.add("broker")
    if names & REFERENCE_FIXTURES or _STARTS_REFERENCE.search(text) or \
            any(path.is_relative_to(d) for d in REFERENCE_DIRS):
        tiers.add("reference")
    callspec = getattr(item, "callspec", None)
    if "any_broker" in names and callspec is not None:
        tiers.add("reference" if callspec.params.get("any_broker") == "kafka" else "broker")
    return tiers


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        marked = {m.name for m in item.iter_markers() if m.name in TIERS}
        for tier in _tiers(item) - marked:
            item.add_marker(tier)
        if not {"broker", "reference"} & {m.name for m in item.iter_markers()}:
            item.add_marker("unit")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """Under a unit test, from the setup of its first fixture (module- and session-scoped ones
    included) to its teardown, a supervised process refuses to start, in this process and in
    the subprocesses it runs: the test needs its tier marker."""
    saved = os.environ.get(TIER_ENV)
    if item.get_closest_marker("unit") is not None:
        os.environ[TIER_ENV] = "unit"
    else:
        os.environ.pop(TIER_ENV, None)
    try:
        return (yield)
    finally:
        if saved is None:
            os.environ.pop(TIER_ENV, None)
        else:
            os.environ[TIER_ENV] = saved


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by the session's tests; tests use unique topic names."""
    with BrokerProcess(tmp_path_factory.mktemp("broker")) as proc:
        yield proc


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of the test's own, for tests that restart, kill or reconfigure it."""
    proc = BrokerProcess(tmp_path / "data")
    try:
        yield proc
    finally:
        if proc.alive:
            proc.kill()


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
