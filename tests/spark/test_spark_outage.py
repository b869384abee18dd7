"""The Spark source's Kafka calls under a broker outage, with a real broker and no Spark session:
the executor-side range reader (``fetch.read_range``, what each Spark task runs) and the driver's
offset lookups (``offsets.KafkaMetadata``).

A broker killed -9 and restarted while a range is read is back-pressure: the read goes on where
it was and yields every record once. A broker that stays away exhausts the bound and fails with a
:class:`ClientTimeoutError` naming the topic-partition and the option that sets the bound
(``kafkaConsumer.pollTimeoutMs`` on executors, ``fetchOffset.numRetries`` on the driver).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest
from spark_helpers import create_topic, produce

from strom.core.testing import BrokerProcess, wait_for
from strom.spark_bridge.exceptions import ClientTimeoutError
from strom.spark_bridge.fetch import read_range
from strom.spark_bridge.offsets import KafkaMetadata
from strom.spark_bridge.options import parse_source_options
from strom.spark_bridge.planning import OffsetRange
from strom.spark_bridge.schema import arrow_schema, kafka_schema

RECORDS = 20_000
DOWN_S = 1.5  # how long the broker stays dead


@pytest.fixture
def topic_with_records(fresh_broker: BrokerProcess) -> Iterator[tuple[BrokerProcess, str]]:
    fresh_broker.start()
    topic = f"spark-outage-{uuid.uuid4().hex[:8]}"
    create_topic(fresh_broker.bootstrap, topic, 1)
    produce(fresh_broker.bootstrap, topic, [(0, None, f"v-{i:06d}".encode() + b"x" * 200) for i in range(RECORDS)])
    yield fresh_broker, topic


def _reader(broker: BrokerProcess, topic: str, poll_timeout_ms: int) -> Iterator[pa.RecordBatch]:
    # Small fetches and a small prefetch queue: the range takes many fetches, so the outage
    # falls in the middle of the read rather than after librdkafka has buffered all of it.
    kafka = {"bootstrap.servers": broker.bootstrap, "fetch.max.bytes": "16384", "message.max.bytes": "16384",
             "max.partition.fetch.bytes": "16384", "queued.max.messages.kbytes": "64",
             "reconnect.backoff.max.ms": "500"}
    return read_range(OffsetRange(topic, 0, 0, RECORDS), kafka, arrow_schema(kafka_schema()),
                      include_headers=False, fail_on_data_loss=True, poll_timeout_ms=poll_timeout_ms)


def test_range_read_survives_a_broker_kill9_and_restart(topic_with_records: tuple[BrokerProcess, str]) -> None:
    broker, topic = topic_with_records
    batches = _reader(broker, topic, poll_timeout_ms=60_000)
    first = next(batches)
    assert first.num_rows < RECORDS
    broker.kill()
    time.sleep(DOWN_S)  # the outage itself
    broker.start()
    rest = list(batches)
    offsets = [o for b in (first, *rest) for o in b.column("offset").to_pylist()]
    assert offsets == list(range(RECORDS)), "records lost or repeated across the restart"


def test_range_read_fails_naming_the_bound_when_the_broker_stays_away(
        topic_with_records: tuple[BrokerProcess, str]) -> None:
    broker, topic = topic_with_records
    batches = _reader(broker, topic, poll_timeout_ms=3000)
    next(batches)
    broker.kill()
    started = time.monotonic()
    with pytest.raises(ClientTimeoutError) as err:
        for _ in batches:
            pass
    assert f"{topic}-0" in str(err.value) and "kafkaConsumer.pollTimeoutMs" in str(err.value)
    assert time.monotonic() - started < 60, "the bound was not kept"


def test_driver_offset_lookup_retries_then_names_the_bound(topic_with_records: tuple[BrokerProcess, str]) -> None:
    broker, topic = topic_with_records
    options = parse_source_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic,
                                    "fetchOffset.numRetries": "1", "fetchOffset.retryIntervalMs": "100",
                                    "kafka.reconnect.backoff.max.ms": "500"},
                                   streaming=False)
    md = KafkaMetadata(options, timeout=3.0)
    try:
        assert md.latest([(topic, 0)]) == {(topic, 0): RECORDS}
        broker.kill()
        with pytest.raises(ClientTimeoutError) as err:
            md.latest([(topic, 0)])
        assert f"{topic}" in str(err.value) and "fetchOffset.numRetries" in str(err.value)
        broker.start()
        # The same client, once it has reconnected: the failure left it usable.
        wait_for(lambda: md.latest([(topic, 0)]) == {(topic, 0): RECORDS}, timeout=30,
                 what="the offsets after the restart", ignore=(ClientTimeoutError,))
    finally:
        md.close()
