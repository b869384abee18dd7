"""Consuming data that lives only in S3 through strom's broker with the chunk cache and prefetch on
(Aiven's ``fetch.chunk.cache.*`` under ``rsm.config.``), and the remote fetch quota
(``remote.log.manager.fetch.max.bytes.per.second``). Real parts: the broker process, moto's S3
server, confluent-kafka, and Fetch requests on a socket."""

from __future__ import annotations

import functools
import os
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from diff_wire import WireClient, kio_schema
from kio.schema.errors import ErrorCode

from strom.core.testing import BrokerProcess, wait_for

if TYPE_CHECKING:
    from tests.tiered.conftest import TierConfig

pytestmark = pytest.mark.broker

TOPIC = "tiered"


def tiered_topic(bootstrap: str, count: int, value_size: int = 100) -> list[tuple[bytes, bytes]]:
    """A remote.storage.enable topic of ``count`` keyed records in 16 KiB segments, produced and
    then left on the broker's disk only in its active segment; returns (key, value) in order."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1, config={
            "remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1"})]).values():
        f.result(30)
    errors: list[object] = []
    sent = [(str(i).encode(), os.urandom(value_size)) for i in range(count)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4000})
    for key, value in sent:
        producer.produce(TOPIC, value, key=key, on_delivery=lambda e, m: errors.append(e) if e else None)
    assert producer.flush(60) == 0 and not errors, errors[:3]
    return sent


def local_start(data_dir: Path) -> int:
    partition_dir = data_dir / "logs" / f"{TOPIC}-0"
    bases = wait_for(lambda: (b := sorted(int(p.name[:20]) for p in partition_dir.glob("*.log")))
                     and len(b) == 1 and b, 60, "local segments deleted down to the active one")
    return int(bases[0])


def consume_all(bootstrap: str, count: int, **config: str | int) -> list[tuple[int, bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cache-reader", "enable.auto.commit": False,
                         "auto.offset.reset": "error", **config})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[tuple[int, bytes, bytes]] = []
    try:
        def more() -> bool:
            for m in consumer.consume(500, 0.2):
                assert m.error() is None, m.error()
                got.append((m.offset() or 0, m.key() or b"", m.value() or b""))
            return len(got) >= count
        wait_for(more, 60, f"{count} records", interval=0, detail=lambda: f"{len(got)} read")
    finally:
        consumer.close()
    return got


def test_a_sequential_consumer_reads_every_record_once_through_the_disk_cache(
        tmp_path: Path, s3_bucket: str, tier_config: TierConfig) -> None:
    cache_dir = tmp_path / "chunk-cache"
    cache_dir.mkdir()
    (cache_dir / "left-by-an-earlier-broker").write_bytes(b"stale")
    config = tier_config(s3_bucket, **{
        "fetch_chunk_cache_class": "io.aiven.kafka.tieredstorage.fetch.cache.DiskChunkCache",
        "fetch_chunk_cache_path": str(cache_dir), "fetch_chunk_cache_size": str(4 * 1024 * 1024),
        "fetch_chunk_cache_prefetch_max_size": "40000"})
    with BrokerProcess(tmp_path / "broker", config=config) as broker:
        assert not (cache_dir / "left-by-an-earlier-broker").exists()  # emptied at start
        sent = tiered_topic(broker.bootstrap, 3000)
        start = local_start(broker.data_dir)
        assert start > 2000  # most of the data is in S3 only
        for fetch_bytes in (1_000_000, 5000):  # large fetches, then small ones batch by batch
            got = consume_all(broker.bootstrap, len(sent), **{
                "max.partition.fetch.bytes": fetch_bytes, "fetch.max.bytes": fetch_bytes,
                "message.max.bytes": min(fetch_bytes, 1_000_000)})
            assert [o for o, _, _ in got] == list(range(len(sent)))  # each offset once, in order
            assert [(k, v) for _, k, v in got] == sent
        cached = list((cache_dir / "cache").iterdir())
        assert cached  # the chunks were read through the cache
        assert sum(f.stat().st_size for f in cached) <= 4 * 1024 * 1024 + len(cached) * 16


def test_reads_found_in_the_memory_cache_are_served_from_memory_and_return_every_record(
        tmp_path: Path, s3_bucket: str, tier_config: TierConfig) -> None:
    # A read whose chunks, offset index and metadata are all in memory is served on the event loop
    # (no reader-thread hops); the records must be the same as through the reader threads, for
    # read_committed (the transaction indexes from memory too) and read_uncommitted.
    config = tier_config(s3_bucket, **{
        "fetch_chunk_cache_class": "memory", "fetch_chunk_cache_size": str(4 * 1024 * 1024),
        "fetch_chunk_cache_prefetch_max_size": "40000"})
    with BrokerProcess(tmp_path / "broker", config=config) as broker:
        sent = tiered_topic(broker.bootstrap, 3000)
        assert local_start(broker.data_dir) > 2000
        for isolation in ("read_committed", "read_uncommitted", "read_committed"):
            got = consume_all(broker.bootstrap, len(sent), **{"isolation.level": isolation,
                                                              "max.partition.fetch.bytes": 50_000})
            assert [o for o, _, _ in got] == list(range(len(sent)))
            assert [(k, v) for _, k, v in got] == sent
    # The broker says at close how its remote reads went: the second and third passes find
    # everything cached, so most reads were served from memory.
    line = next(ln for ln in broker.log_text().splitlines() if "remote reads: " in ln)
    from_memory = int(line.split("remote reads: ")[1].split()[0])
    assert from_memory > 0, line


def fetch_v12(client: WireClient, partitions: list[tuple[str, int]]) -> dict[str, tuple[int, int]]:
    """One Fetch v12 from offset 0 of each (topic, partition): topic -> (error code, record bytes)."""
    m = kio_schema("fetch", 12)
    resp: Any = client.request(m.FetchRequest(
        max_wait=timedelta(milliseconds=0), min_bytes=0, isolation_level=0,
        topics=tuple(m.FetchTopic(topic=t, partitions=(m.FetchPartition(
            partition=p, fetch_offset=0, partition_max_bytes=1 << 20),)) for t, p in partitions),
        forgotten_topics_data=()))
    return {t.topic: (int(t.partitions[0].error_code), len(t.partitions[0].records or b""))
            for t in resp.responses}


def test_over_the_remote_fetch_quota_a_fetch_skips_its_remote_reads_and_serves_the_rest(
        tmp_path: Path, s3_bucket: str, tier_config: TierConfig) -> None:
    config = tier_config(s3_bucket, broker={"remote.log.manager.fetch.max.bytes.per.second": "100"})
    with BrokerProcess(tmp_path / "broker", config=config) as broker:
        tiered_topic(broker.bootstrap, 1000)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("plain", b"local")
        assert producer.flush(30) == 0
        assert local_start(broker.data_dir) > 0
        with WireClient(broker.bootstrap) as client:
            # Under the quota (nothing read yet): the remote read is done.
            first = wait_for(lambda: (r := fetch_v12(client, [(TOPIC, 0), ("plain", 0)]))[TOPIC][1] > 0 and r, 30,
                             "a first remote read")
            assert first[TOPIC][0] == 0 and first["plain"][1] > 0
            # Its bytes put the broker over 100 B/s (Kafka's rate: at least 10 s of windows): the
            # next Fetch reads nothing remote, without an error, and still serves the local partition.
            second = fetch_v12(client, [(TOPIC, 0), ("plain", 0)])
            assert second[TOPIC] == (0, 0)
            assert second["plain"] == first["plain"]


def _first_record(consumer: Consumer) -> Message | None:
    return next(iter(consumer.consume(1, 0.2)), None)


def _s3_gets(broker: BrokerProcess, suffix: str) -> int:
    """GETs of ``suffix`` objects the broker made in the run that ended (its close log line)."""
    line = next(ln for ln in reversed(broker.log_text().splitlines()) if "S3 requests: " in ln)
    counts = dict(part.rsplit(" ", 1) for part in line.split("S3 requests: ")[1].split(";")[0].split(", "))
    return int(counts.get(f"GET {suffix}", 0))


def test_a_sequential_consumer_needs_no_offset_index_and_a_seek_still_finds_its_offset(
        tmp_path: Path, s3_bucket: str, tier_config: TierConfig) -> None:
    # A read at a segment's start offset starts at byte 0; one at the offset where an earlier
    # read stopped starts where that read stopped: a consumer reading on needs no offset index
    # (no GET of any .indexes object). A consumer starting in the middle of a segment does (after
    # a restart, nothing remembered): its records must be the same.
    config = tier_config(s3_bucket, **{
        "fetch_chunk_cache_class": "memory", "fetch_chunk_cache_size": str(4 * 1024 * 1024),
        "fetch_chunk_cache_prefetch_max_size": "40000"})
    broker = BrokerProcess(tmp_path / "broker", config=config)
    with broker:
        sent = tiered_topic(broker.bootstrap, 3000)
        assert local_start(broker.data_dir) > 2000
        for fetch_bytes in (5000, 1_000_000):  # batch by batch (many reads per segment), then large
            got = consume_all(broker.bootstrap, len(sent), **{
                "max.partition.fetch.bytes": fetch_bytes, "fetch.max.bytes": fetch_bytes,
                "message.max.bytes": min(fetch_bytes, 1_000_000)})
            assert [o for o, _, _ in got] == list(range(len(sent)))
            assert [(k, v) for _, k, v in got] == sent
    assert _s3_gets(broker, "log") > 0
    assert _s3_gets(broker, "indexes") == 0
    with broker:
        for start in (1, 777, 1501):  # inside remote segments (16 KiB of ~120-byte records each)
            consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "seeker",
                                 "enable.auto.commit": False, "auto.offset.reset": "error"})
            consumer.assign([TopicPartition(TOPIC, 0, start)])
            try:
                m = wait_for(functools.partial(_first_record, consumer), 60, f"the record at {start}")
                assert m.error() is None, m.error()
                assert (m.offset(), m.key(), m.value()) == (start, *sent[start])
            finally:
                consumer.close()
    assert _s3_gets(broker, "indexes") > 0


def test_right_after_a_restart_a_remote_offset_is_never_out_of_range(
        tmp_path: Path, s3_bucket: str, tier_config: TierConfig) -> None:
    # The tier starts once the listeners serve, and then reads the partition's remote log
    # metadata. A Fetch below the local log start meanwhile must get a retriable error, not
    # OFFSET_OUT_OF_RANGE (a consumer would reset its position past data that exists).
    broker = BrokerProcess(tmp_path / "broker", config=tier_config(s3_bucket))
    with broker:
        tiered_topic(broker.bootstrap, 1500)
        assert local_start(broker.data_dir) > 500
    with broker, WireClient(broker.bootstrap) as client:
        codes: list[int] = []

        def records_read() -> bool:
            code, size = fetch_v12(client, [(TOPIC, 0)])[TOPIC]
            codes.append(code)
            return code == 0 and size > 0

        wait_for(records_read, 60, "records from offset 0", interval=0.01, detail=lambda: f"answers {codes[-5:]}")
    assert set(codes) <= {0, int(ErrorCode.kafka_storage_error)}, codes
