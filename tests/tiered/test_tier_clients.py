"""Clients other than librdkafka read a tiered topic from offset 0, its data only in S3 (issue 21
item 5): kafka-python, aiokafka and the official Java client compare record by record, and a
read_committed Java consumer skips an aborted transaction that straddles the remote/local
boundary (its first records in S3 only, its abort marker on local disk) and the aborted ones
wholly in S3. Real parts: strom's broker process, moto's S3 server, the clients themselves
(the Java one through ``scripts/java_client``, which marks those tests ``reference``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from java_client import ClientRun
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from ref_fixtures import java_client  # noqa: F401  (the fixture: ClientCheck.java compiled)
from tier_kit import local_down_to_active

from strom.core.testing import BrokerProcess, wait_for

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from tests.tiered.conftest import TierConfig

pytestmark = pytest.mark.broker

TOPIC = "tiered"
TXN_TOPIC = "tiered-txn"
COUNT = 3000
Record = tuple[int, str, str]  # offset, key, value


class ClientCheck(Protocol):
    """The ``java_client`` fixture (ClientCheck.java compiled; it marks a test ``reference``). Only
    the Java tests of this module need a JVM: the others stay ``broker`` tests."""

    def run(self, *args: str, props: dict[str, str] | None = None, timeout: float = 180.0) -> ClientRun: ...


def value_of(i: int) -> str:
    return f"value-{i}-" + "abcdefghij" * 10  # ASCII: the Java client reads values as strings


@dataclass(frozen=True)
class TieredData:
    broker: BrokerProcess
    sent: list[Record]  # every record of TOPIC
    committed: list[str]  # the committed values of TXN_TOPIC, in order
    txn_end: int  # TXN_TOPIC's log end offset


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory, s3: S3Client,
           tier_config: TierConfig) -> Iterator[TieredData]:
    """One broker for the module: TOPIC with COUNT plain records and TXN_TOPIC with transactions,
    both tiered down to their active segment."""
    bucket = f"strom-clients-{tmp_path_factory.mktemp('b').name[-6:].lower().replace('_', '-')}"
    s3.create_bucket(Bucket=bucket)
    with BrokerProcess(tmp_path_factory.mktemp("tier-clients"), config=tier_config(bucket)) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic_config = {"remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1"}
        for f in admin.create_topics([NewTopic(TOPIC, 1, 1, config=topic_config),
                                      NewTopic(TXN_TOPIC, 1, 1, config=topic_config)]).values():
            f.result(30)
        errors: list[object] = []
        sent: list[Record] = []
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 4000})
        for i in range(COUNT):
            producer.produce(TOPIC, value_of(i), key=f"key-{i}",
                             on_delivery=lambda e, m: errors.append(e) if e else None)
            sent.append((i, f"key-{i}", value_of(i)))
        assert producer.flush(60) == 0 and not errors, errors[:3]

        txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tier-clients",
                        "batch.size": 4000})
        txn.init_transactions(30)
        committed: list[str] = []
        last_aborted: list[int] = []

        def run_txn(n: int, records: int, abort: bool) -> None:
            offsets: list[int] = []
            txn.begin_transaction()
            values = [f"txn-{n}-{i}-" + "x" * 180 for i in range(records)]
            for v in values:
                txn.produce(TXN_TOPIC, v, on_delivery=lambda e, m: offsets.append(_offset(m)) if e is None
                            else errors.append(e))
            assert txn.flush(30) == 0  # in the log before the abort (librdkafka purges unsent ones)
            if abort:
                txn.abort_transaction(30)
                last_aborted[:] = offsets
            else:
                txn.commit_transaction(30)
                committed.extend(values)

        for n in range(24):
            run_txn(n, 40, abort=n % 3 == 2)
        # Last: an aborted transaction larger than a segment, so it starts in a segment that goes
        # to S3 while its abort marker stays in the active segment on disk.
        run_txn(24, 120, abort=True)
        assert not errors, errors[:3]
        local_start = local_down_to_active(broker, TXN_TOPIC)
        assert min(last_aborted) < local_start <= max(last_aborted) + 1, (last_aborted[:1], local_start)
        assert local_down_to_active(broker, TOPIC) > COUNT // 2  # most of TOPIC in S3 only
        yield TieredData(broker, sent, committed, max(last_aborted) + 2)  # + the abort marker


def _offset(m: Message) -> int:
    offset = m.offset()
    assert offset is not None
    return offset


def test_kafka_python_reads_from_s3(tiered: TieredData) -> None:
    consumer = KafkaConsumer(bootstrap_servers=tiered.broker.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="none", max_partition_fetch_bytes=64 * 1024)
    tp = KpTopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    got: list[Record] = []
    try:
        def more() -> bool:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend((r.offset, r.key.decode(), r.value.decode()) for r in records)
            return len(got) >= COUNT
        wait_for(more, 60, "kafka-python read every record", interval=0, detail=lambda: f"{len(got)} read")
    finally:
        consumer.close()
    assert got == tiered.sent


def test_aiokafka_reads_from_s3(tiered: TieredData) -> None:
    async def read() -> list[Record]:
        consumer = AIOKafkaConsumer(bootstrap_servers=tiered.broker.bootstrap, enable_auto_commit=False,
                                    auto_offset_reset="none", max_partition_fetch_bytes=64 * 1024)
        await consumer.start()
        tp = AioTopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        out: list[Record] = []
        try:
            deadline = asyncio.get_running_loop().time() + 60
            while len(out) < COUNT and asyncio.get_running_loop().time() < deadline:
                batch = await consumer.getmany(tp, timeout_ms=500)
                out.extend((r.offset, (r.key or b"").decode(), (r.value or b"").decode()) for r in batch.get(tp, []))
        finally:
            await consumer.stop()
        return out

    assert asyncio.run(read()) == tiered.sent


def test_java_client_reads_from_s3(tiered: TieredData, java_client: ClientCheck) -> None:  # noqa: F811
    run = java_client.run("consume", tiered.broker.bootstrap, TOPIC, str(COUNT), "--timeout-ms", "60000",
                          props={"max.partition.fetch.bytes": str(64 * 1024)})
    assert run.returncode == 0, run.describe()
    got = [(r["offset"], r["key"], r["value"]) for r in run.ops("record")]
    assert got == tiered.sent, run.describe()


def test_java_read_committed_skips_aborted_transactions_across_the_boundary(
        tiered: TieredData, java_client: ClientCheck) -> None:  # noqa: F811
    # One record more than committed: the consumer polls until its deadline, so aborted records
    # that leaked through would be read; its final position shows it passed every record.
    run = java_client.run("consume", tiered.broker.bootstrap, TXN_TOPIC, str(len(tiered.committed) + 1),
                          "--timeout-ms", "10000",
                          props={"isolation.level": "read_committed", "max.partition.fetch.bytes": "8192"})
    assert run.returncode == 0, run.describe()
    assert [r["value"] for r in run.ops("record")] == tiered.committed, run.describe()
    assert run.one("consume")["positions"] == {"0": tiered.txn_end}
