"""A broker for group tests: short initial rebalance delay so joins settle quickly."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from strom.core.testing import BrokerProcess

# The raw-wire helpers of tests/conformance (``--import-mode=importlib`` needs the path).
_WIRE = str(Path(__file__).resolve().parents[2] / "conformance")
if _WIRE not in sys.path:
    sys.path.append(_WIRE)

GROUP_BROKER_CONFIG = {"group.initial.rebalance.delay.ms": "200"}


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("groups"), config=GROUP_BROKER_CONFIG) as proc:
        yield proc
