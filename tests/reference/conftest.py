"""Fixtures for tests that drive the official Java client against strom and Apache Kafka."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "kafka_ref"))

from ref_fixtures import any_broker, java_client, kafka_ref  # noqa: F401
