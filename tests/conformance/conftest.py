"""Conformance fixtures: make this folder's helper modules importable and give tests an AdminClient.

Tests import ``kafka_wire`` and ``ck_helpers`` by plain name; pytest runs with
``--import-mode=importlib``, which does not put test folders on ``sys.path``, so we do.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from strom.core.testing import BrokerProcess

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": broker.bootstrap})
