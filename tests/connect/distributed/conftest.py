"""A broker for distributed-worker tests: short initial rebalance delay so groups form fast."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from strom.core.testing import BrokerProcess


@pytest.fixture(scope="module")
def connect_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("connect-dist"),
                       config={"group.initial.rebalance.delay.ms": "100"}) as proc:
        yield proc
