"""Fixtures for the Kafka Connect compatibility tests: the reference worker's jars.

Without Java 17+ the tests skip; the jars are resolved from Maven Central on first use
(``scripts/kconnect_ref/fetch.sh``). ``compat_workers`` (tests/helpers) and ``kconnect_ref``
are importable by plain name through the import path tests/conftest.py sets.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from compat_workers import KConnectRefError, ensure_jars, java_problem


@pytest.fixture(scope="session")
def kconnect_jars() -> Path:
    problem = java_problem()
    if problem is not None:
        pytest.skip(f"the reference Kafka Connect worker needs Java: {problem}")
    try:
        return ensure_jars()
    except KConnectRefError as exc:
        pytest.skip(f"Kafka Connect jars unavailable: {exc}")
