"""Fixtures for differential tests: one strom broker and one Apache Kafka node per session.

``kafka`` is the reference (scripts/kafka_ref); ``strom`` is strom's broker with the same
broker overrides (``SHARED_BROKER_CONFIG``). Without Java the tests skip with the reason.

``STROM_DIFF_SUBJECT=kafka`` replaces strom with a second, independent Kafka node: a
self-check of the harness (every differential test must then pass), not a test of strom.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from kafka_ref import KafkaRef
from ref_fixtures import SHARED_BROKER_CONFIG, HasBootstrap, kafka_ref, skip_without_java  # noqa: F401

from strom.core.testing import BrokerProcess


@pytest.fixture(scope="session")
def kafka(kafka_ref: KafkaRef) -> KafkaRef:  # noqa: F811 (the imported fixture)
    return kafka_ref


@pytest.fixture(scope="session")
def strom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HasBootstrap]:
    # Skip before starting anything: without the reference there is nothing to compare with.
    skip_without_java()
    if os.environ.get("STROM_DIFF_SUBJECT") == "kafka":
        with KafkaRef(tmp_path_factory.mktemp("kafka-subject"), config=SHARED_BROKER_CONFIG) as ref:
            yield ref
        return
    with BrokerProcess(tmp_path_factory.mktemp("strom-diff"), config=SHARED_BROKER_CONFIG) as proc:
        yield proc
