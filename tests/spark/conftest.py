"""Fixtures of the Spark bridge tests: a local[2] SparkSession per module.

Spark start-up takes ~15 s on this machine, so each test module shares one session; the broker
is the session-wide bundled broker of tests/conftest.py (tests use unique topic names). Helpers
live in ``spark_helpers`` (tests/helpers, on sys.path through tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession
from spark_helpers import spark_builder

import strom.spark_bridge


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = spark_builder().getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    strom.spark_bridge.register(session)
    try:
        yield session
    finally:
        session.stop()
