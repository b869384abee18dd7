"""Confluent's kafka-connect-datagen class name resolves to strom's datagen connector (unit)."""

from __future__ import annotations

import pytest

from strom.connect.connectors.datagen import DatagenConnector
from strom.connect.plugins import PluginRegistry


@pytest.mark.parametrize("name", ["io.confluent.kafka.connect.datagen.DatagenConnector", "DatagenConnector",
                                  "Datagen", "strom.connect.connectors.datagen.DatagenConnector"])
def test_datagen_names(name: str) -> None:
    assert PluginRegistry().connector_class(name) is DatagenConnector
