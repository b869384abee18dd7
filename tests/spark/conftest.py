"""Fixtures of the Spark bridge tests: a local[2] SparkSession per module.

Spark start-up takes ~15 s on this machine, so each test module shares one session; the broker
is the session-wide bundled broker of tests/conftest.py (tests use unique topic names). Helpers
live in ``spark_helpers`` (this folder goes on sys.path: pytest's importlib mode does not).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark")

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from pyspark.sql import SparkSession  # noqa: E402
from spark_helpers import spark_builder  # noqa: E402

import strom.spark_bridge  # noqa: E402


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = spark_builder().getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    strom.spark_bridge.register(session)
    try:
        yield session
    finally:
        session.stop()
