"""aiokafka (asyncio client) against the broker: produce per codec, assign+seek reads."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from strom.core.testing import BrokerProcess

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


async def _produce(bootstrap: str, topic: str, codec: str | None, n: int, ts0: int) -> list[Any]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, enable_idempotence=False,
                                linger_ms=10)
    await producer.start()
    try:
        futures = [await producer.send(topic, value=f"a-{i}".encode() * (i % 4 + 1), key=f"k{i}".encode(),
                                       headers=[("i", str(i).encode())], partition=0, timestamp_ms=ts0 + i)
                   for i in range(n)]
        return list(await asyncio.gather(*futures))
    finally:
        await producer.stop()


async def _read(bootstrap: str, topic: str, start: int, n: int, timeout: float = 30.0) -> list[Any]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, start)
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            batch = await consumer.getmany(tp, timeout_ms=500, max_records=n - len(out))
            out.extend(batch.get(tp, []))
        assert len(out) == n, f"read {len(out)} of {n} records"
        return out
    finally:
        await consumer.stop()


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_per_codec(codec: str | None, broker: BrokerProcess, topic_name: str) -> None:
    ts0 = int(time.time() * 1000) - 5_000
    # The topic is auto-created by the first Metadata request.
    metas = asyncio.run(_produce(broker.bootstrap, topic_name, codec, 40, ts0))
    assert [m.offset for m in metas] == list(range(40))
    got = asyncio.run(_read(broker.bootstrap, topic_name, 0, 40))
    for i, rec in enumerate(got):
        assert rec.offset == i
        assert rec.key == f"k{i}".encode()
        assert rec.value == f"a-{i}".encode() * (i % 4 + 1)
        assert list(rec.headers) == [("i", str(i).encode())]
        assert rec.timestamp == ts0 + i
    mid = asyncio.run(_read(broker.bootstrap, topic_name, 23, 3))
    assert [(r.offset, r.key) for r in mid] == [(23, b"k23"), (24, b"k24"), (25, b"k25")]
