"""The S3 tier (KIP-405): old data moves to S3, the disk keeps the hot tail, consumers read it all.

    python examples/tiered.py [--records 20000]

1. **S3**: moto's S3 server on a free port (``pip install 'strom[test]'`` brings moto), and a bucket.
2. **A broker with tiered storage**: ``remote.log.storage.system.enable=true``, the S3 remote
   storage manager selected by Aiven's class name with Aiven's ``rsm.config.`` keys, the
   topic-based metadata manager (``__remote_log_metadata``, one replica here).
3. **A tiered topic** ``events``: ``remote.storage.enable=true``, small segments and
   ``local.retention.bytes=1``, so every closed segment leaves the disk once it is in S3.
4. **Produce**, wait until the partition's directory holds only the active segment, list the
   objects in the bucket, then **consume from offset 0** with confluent-kafka: the old records
   come from S3 through the broker, the new ones from disk. The script checks every record and
   exits non-zero if one differs.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

import boto3
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from moto.server import ThreadedMotoServer

from strom.core.testing import BrokerProcess, wait_for

log = logging.getLogger("tiered-example")
TOPIC, BUCKET, REGION = "events", "strom-tiered-example", "us-east-1"
# moto accepts any credentials; explicit ones keep boto3 from looking for the machine's
ACCESS_KEY, SECRET_KEY = "example-key", "example-secret"


def broker_config(endpoint: str) -> dict[str, str]:
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": "500",
        "log.retention.check.interval.ms": "1000",
        "remote.log.storage.manager.class.name": "io.aiven.kafka.tieredstorage.RemoteStorageManager",
        "rsm.config.storage.backend.class": "io.aiven.kafka.tieredstorage.storage.s3.S3Storage",
        "rsm.config.storage.s3.bucket.name": BUCKET,
        "rsm.config.storage.s3.region": REGION,
        "rsm.config.storage.s3.endpoint.url": endpoint,
        "rsm.config.storage.s3.path.style.access.enabled": "true",
        "rsm.config.storage.aws.access.key.id": ACCESS_KEY,
        "rsm.config.storage.aws.secret.access.key": SECRET_KEY,
        "rsm.config.key.prefix": "tiered/",
        "rsm.config.chunk.size": str(64 * 1024),
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
    }


def produce(bootstrap: str, n: int) -> list[bytes]:
    values = [f"event-{i:08d}".encode() * 8 for i in range(n)]
    errors: list[object] = []
    # A batch must fit in a segment (else RECORD_LIST_TOO_LARGE): batches well below segment.bytes.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 64 * 1024})
    for value in values:
        while True:
            try:
                producer.produce(TOPIC, value, on_delivery=lambda e, m: errors.append(e) if e else None)
                break
            except BufferError:  # queue full: let deliveries drain, then retry
                producer.poll(0.1)
    if producer.flush(60) or errors:
        raise RuntimeError(f"records not delivered: {errors[:3]}")
    return values


def consume_from_start(bootstrap: str, n: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tiered-example",
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []

    def more() -> bool:
        for m in consumer.consume(1000, 1.0):
            if m.error() is not None:
                raise RuntimeError(f"consumer error: {m.error()}")
            got.append(m.value() or b"")
        return len(got) >= n

    try:
        wait_for(more, 120, f"{n} records", interval=0, detail=lambda: f"{len(got)} read")
    finally:
        consumer.close()
    return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20_000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's server logs every request

    s3_server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    s3_server.start()
    host, port = s3_server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                      aws_secret_access_key=SECRET_KEY)
    s3.create_bucket(Bucket=BUCKET)
    log.info("S3 (moto) at %s, bucket %s", endpoint, BUCKET)
    try:
        with tempfile.TemporaryDirectory(prefix="strom-tiered-") as tmp, \
                BrokerProcess(Path(tmp), config=broker_config(endpoint)) as broker:
            log.info("broker at %s with tiered storage on", broker.bootstrap)
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic(TOPIC, 1, 1, config={
                "remote.storage.enable": "true", "segment.bytes": str(256 * 1024),
                "local.retention.bytes": "1"})])[TOPIC].result(30)
            del admin  # closed now: it would log its reconnects to the broker stopped at the end
            values = produce(broker.bootstrap, args.records)
            partition_dir = Path(tmp) / "logs" / f"{TOPIC}-0"

            def local_segments() -> list[Path]:
                return sorted(partition_dir.glob("*.log"))

            wait_for(lambda: len(local_segments()) == 1, 120, "closed segments copied to S3 and deleted locally")
            local_start = int(local_segments()[0].name[:20])
            keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
                    for o in page.get("Contents", [])]
            log.info("produced %d records; on disk from offset %d on, %d segments in S3 (%d objects)",
                     len(values), local_start, sum(k.endswith(".log") for k in keys), len(keys))
            got = consume_from_start(broker.bootstrap, len(values))
            if got[:len(values)] != values:
                log.error("records read back differ from those produced")
                return 1
            log.info("read all %d records back from offset 0 (offsets 0-%d from S3), every one as produced",
                     len(values), local_start - 1)
    finally:
        s3_server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
