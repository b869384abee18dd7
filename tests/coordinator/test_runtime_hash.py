"""Coordinator partitioning must match Kafka's ``Utils.abs(key.hashCode()) % n`` exactly,
or clients asking FindCoordinator would be sent to a partition Kafka would not use."""

from __future__ import annotations

import pytest

from strom.core.coordinator.runtime import java_hash_partition, java_string_hashcode


@pytest.mark.parametrize(("text", "expected"), [
    ("", 0), ("a", 97), ("hello", 99162322), ("group-1", 293427299),
    ("polygenelubricants", -(2**31)),  # hashes to Integer.MIN_VALUE: Utils.abs maps it to 0
    ("héllo", 103094734), ("😀", 1772899),  # values printed by Java 17; non-ASCII hashes UTF-16 code units
])
def test_java_string_hashcode(text: str, expected: int) -> None:
    assert java_string_hashcode(text) == expected


def test_partition_of_min_value_hash_is_zero() -> None:
    assert java_hash_partition("polygenelubricants", 50) == 0


def test_partition_in_range() -> None:
    assert all(0 <= java_hash_partition(f"g{i}", 50) < 50 for i in range(1000))
