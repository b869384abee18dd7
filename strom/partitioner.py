"""Kafka's default partitioner: murmur2 as the Java producer computes it.

Shared by every client package that must place a key where a Java client would (Connect's
internal topics, Streams' key-to-instance metadata). librdkafka's own partitioners are used
for producing; this is for computing a key's partition without producing.
"""

from __future__ import annotations


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 (seed 0x9747b28c), as a signed 32-bit int like Java's."""
    m = 0x5BD1E995
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[n4 + 2] << 16
    if rest >= 2:
        h ^= data[n4 + 1] << 8
    if rest >= 1:
        h ^= data[n4]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partition(key: bytes, partitions: int) -> int:
    """Kafka's default partition of a non-null key: ``toPositive(murmur2(key)) % partitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
