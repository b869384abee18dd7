"""Conformance fixtures: an AdminClient on the session's broker.

Tests import ``kafka_wire`` and ``ck_helpers`` (tests/helpers) by plain name, through the import
path tests/conftest.py sets.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from strom.core.testing import BrokerProcess


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": broker.bootstrap})
