"""Fixtures of the tiered-storage tests: an S3 endpoint (moto in server mode: a real HTTP server
in a thread of the test process, on a free port), the broker config of the tier on it, a broker
running with it, and segment files written by strom's broker.

``strom_segments`` and ``tier_broker`` start strom's broker (tests using them are marked
``broker`` by the module's ``pytestmark``); ``s3_endpoint`` starts no broker, only moto's HTTP
server. The helpers the broker tests share (produce, consume, ListOffsets, local segments) are in
tests/helpers/tier_kit.py.
"""

from __future__ import annotations

import itertools
import logging
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from moto.server import ThreadedMotoServer
from mypy_boto3_s3 import S3Client

from strom.core.testing import BrokerProcess
from strom.plugins.hookspecs.storage import (
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
    kafka_uuid_parse,
)

REGION = "us-east-1"
# Moto accepts any credentials; explicit ones keep boto3 from looking for the machine's.
ACCESS_KEY = "strom-test-key"
SECRET_KEY = "strom-test-secret"
MIB = 1024 * 1024
AIVEN_RSM = "io.aiven.kafka.tieredstorage.RemoteStorageManager"


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's server logs every request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3(s3_endpoint: str) -> S3Client:
    """A boto3 client of the moto endpoint, for checking what the tier wrote."""
    return boto3.client("s3", endpoint_url=s3_endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY)


@pytest.fixture
def s3_bucket(s3: S3Client) -> str:
    """A new empty bucket per test."""
    name = f"strom-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


S3Config = Callable[..., dict[str, str]]


@pytest.fixture(scope="session")
def s3_rsm_config(s3_endpoint: str) -> S3Config:
    """``(bucket, **rsm_config) -> broker config`` selecting the S3 manager by Aiven's class name with
    Aiven's keys for the moto endpoint; keyword ``a_b_c=v`` adds ``rsm.config.a.b.c=v``."""

    def config(bucket: str, endpoint: str = s3_endpoint, **extra: str) -> dict[str, str]:
        return {
            "remote.log.storage.manager.class.name": AIVEN_RSM,
            "rsm.config.storage.backend.class": "io.aiven.kafka.tieredstorage.storage.s3.S3Storage",
            "rsm.config.storage.s3.bucket.name": bucket,
            "rsm.config.storage.s3.region": REGION,
            "rsm.config.storage.s3.endpoint.url": endpoint,
            "rsm.config.storage.s3.path.style.access.enabled": "true",
            "rsm.config.storage.aws.access.key.id": ACCESS_KEY,
            "rsm.config.storage.aws.secret.access.key": SECRET_KEY,
            "rsm.config.key.prefix": "tiered/",
            "rsm.config.chunk.size": "10007",  # a prime: chunk boundaries fall mid-batch
            **{f"rsm.config.{k.replace('_', '.')}": v for k, v in extra.items()},
        }

    return config


# The tier on, with short task intervals so copies and deletions follow a test closely.
TIER_BROKER_CONFIG = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "200",
    "log.retention.check.interval.ms": "500",
    "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
    "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
}

TierConfig = Callable[..., dict[str, str]]


@pytest.fixture(scope="session")
def tier_config(s3_rsm_config: S3Config) -> TierConfig:
    """``(bucket, broker=None, **rsm_config) -> broker config``: TIER_BROKER_CONFIG with the S3
    manager on ``bucket`` of moto's endpoint (``**rsm_config`` as ``s3_rsm_config``'s, e.g.
    ``endpoint=`` a proxy's URL), then the ``broker`` keys over them."""

    def config(bucket: str, broker: Mapping[str, str] | None = None, **rsm_config: str) -> dict[str, str]:
        return {**TIER_BROKER_CONFIG, **s3_rsm_config(bucket, **rsm_config), **(broker or {})}

    return config


@pytest.fixture
def tier_broker(tmp_path: Path, s3_bucket: str, tier_config: TierConfig) -> Iterator[BrokerProcess]:
    """strom's broker with the S3 tier on a new bucket (its data in ``tmp_path / "broker"``)."""
    with BrokerProcess(tmp_path / "broker", config=tier_config(s3_bucket)) as broker:
        yield broker


@dataclass(frozen=True)
class Segment:
    """A closed segment of strom's log, with what the remote log manager would record for it."""

    partition_dir: Path
    topic_id_partition: TopicIdPartition
    base_offset: int
    next_offset: int  # the next segment's base offset

    def path(self, suffix: str, offset: int | None = None) -> Path:
        return self.partition_dir / f"{self.base_offset if offset is None else offset:020d}{suffix}"

    def data(self) -> LogSegmentData:
        txn = self.path(".txnindex")
        # Kafka hands over the producer snapshot taken at the segment's end (named by the next
        # segment's base offset); a log that wrote none at that roll has one at its own base.
        snapshot = self.path(".snapshot", self.next_offset)
        if not snapshot.exists():
            snapshot = self.path(".snapshot")
        return LogSegmentData(
            log_segment=self.path(".log"), offset_index=self.path(".index"), time_index=self.path(".timeindex"),
            transaction_index=txn if txn.exists() else None, producer_snapshot_index=snapshot,
            leader_epoch_index=(self.partition_dir / "leader-epoch-checkpoint").read_bytes()
            if (self.partition_dir / "leader-epoch-checkpoint").exists() else b"0\n0\n")

    def metadata(self, broker_id: int = 1) -> RemoteLogSegmentMetadata:
        return RemoteLogSegmentMetadata(
            RemoteLogSegmentId.generate_new(self.topic_id_partition), self.base_offset, self.next_offset - 1,
            max_timestamp_ms=0, broker_id=broker_id, event_timestamp_ms=0,
            segment_size_in_bytes=self.path(".log").stat().st_size, segment_leader_epochs={0: self.base_offset})


def closed_segments(partition_dir: Path, topic: str, partition: int) -> list[Segment]:
    """The segments of a partition but the last (whose end offset the file names do not tell)."""
    topic_id = None
    for line in (partition_dir / "partition.metadata").read_text().splitlines():
        if line.startswith("topic_id:"):
            topic_id = kafka_uuid_parse(line.split(":", 1)[1].strip())
    assert topic_id is not None
    tip = TopicIdPartition(topic_id, topic, partition)
    bases = sorted(int(p.name[:20]) for p in partition_dir.glob("*.log"))
    return [Segment(partition_dir, tip, b, n) for b, n in itertools.pairwise(bases)]


@dataclass(frozen=True)
class StromSegments:
    small: list[Segment]  # many small segments of one partition
    txn: list[Segment]  # segments holding committed and aborted transactions
    big: Segment  # one segment larger than S3's 5 MiB minimum multipart part


@pytest.fixture(scope="session")
def strom_segments(tmp_path_factory: pytest.TempPathFactory) -> StromSegments:
    """Closed segments written by strom's broker: produced with confluent-kafka, then the broker stopped."""
    data_dir = tmp_path_factory.mktemp("tiered-broker")
    with BrokerProcess(data_dir) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topics = {"small": "65536", "txn": "16384", "big": str(6 * MIB)}
        for f in admin.create_topics([NewTopic(t, 1, 1, config={"segment.bytes": s})
                                      for t, s in topics.items()]).values():
            f.result(30)
        errors: list[object] = []
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 16000})
        for i in range(3000):
            producer.produce("small", os.urandom(100), key=str(i).encode(),
                             on_delivery=lambda e, m: errors.append(e) if e else None)
        for _ in range(7 * 64):  # 7 MiB of incompressible values
            producer.produce("big", os.urandom(16 * 1024 - 100),
                             on_delivery=lambda e, m: errors.append(e) if e else None)
        assert producer.flush(60) == 0 and not errors, errors[:3]
        txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tiered-txn",
                        "batch.size": 8000})
        txn.init_transactions(30)
        for n in range(12):
            txn.begin_transaction()
            for i in range(40):
                txn.produce("txn", os.urandom(200), key=f"{n}-{i}".encode())
            if n % 3 == 2:
                assert txn.flush(30) == 0  # in the log before the abort (librdkafka purges unsent ones)
                txn.abort_transaction(30)
            else:
                txn.commit_transaction(30)
    logs = data_dir / "logs"
    big = closed_segments(logs / "big-0", "big", 0)
    assert big and big[0].path(".log").stat().st_size > 5 * MIB
    small = closed_segments(logs / "small-0", "small", 0)
    txn_segments = closed_segments(logs / "txn-0", "txn", 0)
    assert len(small) >= 3 and len(txn_segments) >= 2
    return StromSegments(small, txn_segments, big[0])
