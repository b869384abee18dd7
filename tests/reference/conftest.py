"""Fixtures for tests that drive the official Java client against strom and Apache Kafka."""

from __future__ import annotations

from ref_fixtures import any_broker, java_client, kafka_ref  # noqa: F401
