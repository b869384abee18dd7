"""A broker for group tests: short initial rebalance delay so joins settle quickly."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from strom.core.testing import BrokerProcess

GROUP_BROKER_CONFIG = {"group.initial.rebalance.delay.ms": "200"}


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("groups"), config=GROUP_BROKER_CONFIG) as proc:
        yield proc
