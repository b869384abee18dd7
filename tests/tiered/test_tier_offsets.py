"""ListOffsets over a tiered topic whose old data lives only in S3 (issue 21 item 6): a timestamp
that falls in a remote segment is answered from the remote time index (Kafka's
``RemoteLogManager.findOffsetByTimestamp``), -3 finds the largest timestamp when it lives
remotely, -6 (EARLIEST_PENDING_UPLOAD, KIP-1023) answers the first offset not yet copied as Kafka
4.3's ``fetchEarliestPendingUploadOffset`` (no offset on a topic without remote storage).
DescribeLogDirs reports the local size only, as Kafka, and ``strom topics describe`` shows the
local and remote log start offsets and the remote size. Real parts: strom's broker process, moto's
S3 server, confluent-kafka, raw ListOffsets v11 and DescribeLogDirs requests, the ``strom`` command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from diff_wire import WireClient
from kafka.record.memory_records import MemoryRecords
from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
from kio.schema.list_offsets.v11.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64
from ref_fixtures import HasBootstrap, any_broker, kafka_ref  # noqa: F401  (strom beside Apache Kafka)
from tier_kit import tiered_down_to_active

from strom.core.replica.remote_offsets import RemoteIndexCache, lookup_timestamp
from strom.core.testing import BrokerProcess, wait_for
from strom.plugins.manager import get_plugin_manager, load_remote_storage_manager

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from tests.tiered.conftest import StromSegments

pytestmark = pytest.mark.broker

TOPIC = "tiered"
# Recent timestamps: retention.ms (7 days) must not expire the remote segments, and Kafka 4's
# log.message.timestamp.after.max.ms (1 hour) bounds the largest one.
BASE_TS = (int(time.time()) - 600) * 1000
STEP_MS = 10
COUNT = 2000
MAX_AT = 1500  # the record with the largest timestamp: in a remote segment
MAX_TS = BASE_TS + 1_800_000


def timestamp_of(i: int) -> int:
    return MAX_TS if i == MAX_AT else BASE_TS + i * STEP_MS


def list_offsets(bootstrap: str, topic: str, timestamp: int) -> tuple[int, int, int]:
    """(error code, offset, timestamp) of ListOffsets v11 for partition 0."""
    with WireClient(bootstrap) as c:
        resp = c.request(ListOffsetsRequest(
            replica_id=BrokerId(-1), isolation_level=i8(0), timeout=i32Timedelta.parse(timedelta(seconds=30)), topics=(ListOffsetsTopic(
                name=TopicName(topic), partitions=(ListOffsetsPartition(
                    partition_index=i32(0), current_leader_epoch=i32(-1), timestamp=i64(timestamp)),)),)))
    p = resp.topics[0].partitions[0]
    return int(p.error_code), int(p.offset), int(p.timestamp)


def produce_timed(bootstrap: str, topic: str) -> None:
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4000})
    for i in range(COUNT):
        producer.produce(topic, os.urandom(100), key=str(i).encode(), timestamp=timestamp_of(i),
                         on_delivery=lambda e, m: errors.append(e) if e else None)
    assert producer.flush(60) == 0 and not errors, errors[:3]


def test_timestamps_and_max_timestamp_in_remote_segments(tier_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": tier_broker.bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1, config={
            "remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1"})]).values():
        f.result(30)
    produce_timed(tier_broker.bootstrap, TOPIC)
    local_start = tiered_down_to_active(tier_broker, TOPIC)
    assert local_start > MAX_AT, "the largest timestamp must live in S3 only"
    bootstrap = tier_broker.bootstrap

    # Timestamps of records only in S3: the first offset at or after each, from the remote indexes.
    for i in (0, 1, 333, 700, MAX_AT - 1):
        assert list_offsets(bootstrap, TOPIC, timestamp_of(i)) == (0, i, timestamp_of(i)), i
        assert list_offsets(bootstrap, TOPIC, timestamp_of(i) - 3) == (0, i, timestamp_of(i)), i
    assert list_offsets(bootstrap, TOPIC, timestamp_of(700) + 1) == (0, 701, timestamp_of(701))
    assert list_offsets(bootstrap, TOPIC, BASE_TS - 1) == (0, 0, BASE_TS)
    # Above every regular timestamp: only the remote record with the largest one reaches it.
    assert list_offsets(bootstrap, TOPIC, timestamp_of(COUNT - 1) + 1) == (0, MAX_AT, MAX_TS)
    assert list_offsets(bootstrap, TOPIC, MAX_TS + 1) == (0, -1, -1)
    # -3: the largest timestamp is in S3, above every local one.
    assert list_offsets(bootstrap, TOPIC, -3) == (0, MAX_AT, MAX_TS)
    # The same answers again (the remote indexes now come from the broker's index cache).
    assert list_offsets(bootstrap, TOPIC, timestamp_of(333)) == (0, 333, timestamp_of(333))


def test_earliest_pending_upload(tier_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": tier_broker.bootstrap})
    for f in admin.create_topics([
            NewTopic(TOPIC, 1, 1, config={"remote.storage.enable": "true", "segment.bytes": "16384",
                                          "local.retention.bytes": "1"}),
            NewTopic("fresh", 1, 1, config={"remote.storage.enable": "true"}),
            NewTopic("local-only", 1, 1, config={"segment.bytes": "16384"})]).values():
        f.result(30)
    bootstrap = tier_broker.bootstrap
    # Kafka 4.3: nothing copied yet and the local start at the log start -> the log start.
    wait_for(lambda: list_offsets(bootstrap, "fresh", -6)[:2] == (0, 0), 30, "-6 of the new tiered topic",
             detail=lambda: str(list_offsets(bootstrap, "fresh", -6)))
    produce_timed(bootstrap, "local-only")
    assert list_offsets(bootstrap, "local-only", -6)[:2] == (0, -1)  # no remote storage: no offset
    produce_timed(bootstrap, TOPIC)
    local_start = tiered_down_to_active(tier_broker, TOPIC)
    # The first offset not in remote storage: the highest tiered offset + 1.
    assert list_offsets(bootstrap, TOPIC, -6)[:2] == (0, local_start)


def test_log_dirs_report_local_size_and_topics_describe_shows_the_remote_part(
        tier_broker: BrokerProcess, s3: S3Client, s3_bucket: str) -> None:
    admin = AdminClient({"bootstrap.servers": tier_broker.bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1, config={
            "remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1"})]).values():
        f.result(30)
    produce_timed(tier_broker.bootstrap, TOPIC)
    local_start = tiered_down_to_active(tier_broker, TOPIC)
    partition_dir = tier_broker.data_dir / "logs" / f"{TOPIC}-0"
    local_size = sum(p.stat().st_size for p in partition_dir.glob("*.log"))
    remote = {o["Key"]: o["Size"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=s3_bucket)
              for o in page.get("Contents", []) if o["Key"].endswith(".log")}

    # DescribeLogDirs: the local size only, as Kafka (the remote bytes are not on this disk).
    with WireClient(tier_broker.bootstrap) as c:
        resp = c.request(DescribeLogDirsRequest(topics=None))
    sizes = [p.partition_size for r in resp.results for t in r.topics if t.name == TOPIC for p in t.partitions]
    assert sizes == [local_size]

    # strom topics describe: the log start (remote included), the local one, the remote part.
    run = subprocess.run([sys.executable, "-m", "strom.core.cli", "topics", "describe", "--topic", TOPIC,
                          "--bootstrap-server", tier_broker.bootstrap], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    line = next(line for line in run.stdout.splitlines() if "Partition: 0" in line)
    fields = dict(re.findall(r"(\w+): (\S+)", line))
    assert fields["LogStartOffset"] == "0"
    assert fields["LocalLogStartOffset"] == str(local_start)
    assert fields["RemoteLogStartOffset"] == "0"
    # The segments' sizes as the metadata records them: without rsm compression each segment's
    # object in S3 holds exactly its bytes.
    assert int(fields["RemoteSize"]) == sum(remote.values()) > 0


def test_remote_time_index_lookup_matches_the_segments_records(tmp_path: Path, strom_segments: StromSegments) -> None:
    """The remote lookup (time index -> offset index -> batches of the remote segment) against the
    records themselves, read with kafka-python's record reader: for every timestamp of a segment
    strom's broker wrote, and from several starting offsets, the first record at or after it.
    Each index is fetched from remote storage once, then served from the index cache."""
    rsm = load_remote_storage_manager(get_plugin_manager(autoload=False, env={}), {
        "remote.log.storage.manager.class.name": "io.aiven.kafka.tieredstorage.RemoteStorageManager",
        "rsm.config.storage.backend.class": "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage",
        "rsm.config.storage.root": str(tmp_path / "remote"), "rsm.config.chunk.size": "4099"})
    assert rsm is not None
    indexes = RemoteIndexCache(rsm)
    for segment in strom_segments.small[:2]:
        meta = segment.metadata()
        rsm.copy_log_segment_data(meta, segment.data())
        records = MemoryRecords(segment.path(".log").read_bytes())
        rows: list[tuple[int, int]] = []
        while (batch := records.next_batch()) is not None:
            rows += [(r.offset, r.timestamp) for r in batch]
        for start in (segment.base_offset, rows[len(rows) // 3][0], rows[-1][0]):
            for ts in sorted({t for _, t in rows} | {rows[0][1] - 1, rows[-1][1] + 1}):
                expected = next(((o, t) for o, t in rows if t >= ts and o >= start), None)
                found = lookup_timestamp(rsm, indexes, meta, ts, start)
                assert (found[:2] if found else None) == expected, (segment.base_offset, start, ts)
    assert indexes.fetches == 4  # a time index and an offset index per segment, each once


def test_earliest_pending_upload_without_remote_storage_as_kafka(any_broker: HasBootstrap) -> None:  # noqa: F811
    """Kafka 4.3.1 itself (no tier configured) and strom answer -6 the same on a plain topic."""
    admin = AdminClient({"bootstrap.servers": any_broker.bootstrap})
    topic = f"plain-{time.monotonic_ns()}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": any_broker.bootstrap})
    for i in range(10):
        producer.produce(topic, str(i).encode())
    assert producer.flush(30) == 0
    assert list_offsets(any_broker.bootstrap, topic, -6) == (0, -1, -1)
    assert list_offsets(any_broker.bootstrap, topic, -5) == (0, -1, -1)
