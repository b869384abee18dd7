"""Fixtures of the ``strom`` command tests: run the command as a real subprocess.

``any_broker`` (from the reference fixtures) runs an end-to-end test against strom's broker
and against Apache Kafka, so the console tools are checked against the real thing too.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from ref_fixtures import any_broker, kafka_ref  # noqa: F401

Run = Callable[..., subprocess.CompletedProcess[str]]


def run_strom(*args: str, input: str | None = None, timeout: float = 120.0,
              cwd: str | Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m strom.core.cli ARGS`` with text stdin/stdout/stderr captured."""
    return subprocess.run([sys.executable, "-m", "strom.core.cli", *args], input=input, capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, check=False)


@pytest.fixture
def strom() -> Run:
    return run_strom
