"""Kafka Connect runtime (later issue)."""
