"""Shared fixtures: a real broker subprocess (``strom dev`` on port 0)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from strom.core.testing import BrokerProcess


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by the session's tests; tests use unique topic names."""
    with BrokerProcess(tmp_path_factory.mktemp("broker")) as proc:
        yield proc


@pytest.fixture
def fresh_broker(tmp_path) -> Iterator[BrokerProcess]:  # type: ignore[no-untyped-def]
    """A broker of the test's own, for tests that restart, kill or reconfigure it."""
    proc = BrokerProcess(tmp_path / "data")
    try:
        yield proc
    finally:
        proc.kill() if proc.alive else None


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
