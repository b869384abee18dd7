"""A producer and a consumer held to their byte-rate quota (issue 23: within ±20 % of the rate).

The issue's one allowed rate assertion. confluent-kafka clients run flat out against a
``producer_byte_rate`` / ``consumer_byte_rate`` quota of their client id; once the windowed rate
has settled (the first seconds may burst: Kafka's rate assumes ``quota.window.num - 1`` full
windows of history, so a fresh client gets that allowance up front) the bytes delivered over a
measured window of >= 5 s must be within 20 % of the quota, and the broker must have reported
throttle times (throttle_cb). ``STROM_QUOTA_MEASURE_S`` lengthens the measured window.

Kafka's windowed rate holds the average over the quota window (``quota.window.num`` x
``quota.window.size.seconds``) at the quota; within that window a greedy client is bursty
(a sample leaving the window frees a second's worth at once), so the broker here runs a 2 s
window and the clients send small requests (a few KB), which keeps any 5 s stretch near the
quota.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_wire import connect, decode_response, encode_request, read_frame
from kio.schema.alter_client_quotas.v1 import request as alter_req
from kio.static.primitive import f64

from strom.core.testing import BrokerProcess, wait_for

pytestmark = [pytest.mark.broker, pytest.mark.slow]
log = logging.getLogger(__name__)

RATE = 200_000  # bytes a second
VALUE = 4_000  # bytes a record: the framing overhead stays a few percent
MEASURE_S = float(os.environ.get("STROM_QUOTA_MEASURE_S", "6"))
# A short window history keeps the initial burst (and so the settling time) small.
BROKER_CONFIG = {"quota.window.num": "2", "quota.window.size.seconds": "1"}


def set_quota(bootstrap: str, client_id: str, key: str, value: float) -> None:
    req = alter_req.AlterClientQuotasRequest(entries=(alter_req.EntryData(
        entity=(alter_req.EntityData(entity_type="client-id", entity_name=client_id),),
        ops=(alter_req.OpData(key=key, value=f64(float(value)), remove=False),)),), validate_only=False)
    with connect(bootstrap) as sock:
        sock.sendall(encode_request(req, 1))
        payload = read_frame(sock)
    assert payload is not None
    _, body = decode_response(49, 1, payload)
    assert [e.error_code for e in body.entries] == [0]


@pytest.fixture(scope="module")
def rate_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("quota-rate"), config=BROKER_CONFIG) as proc:
        yield proc


def measured_rate(stamps: list[tuple[float, int]], start: float, end: float) -> float:
    return sum(n for t, n in stamps if start <= t < end) / (end - start)


def test_producer_is_held_to_producer_byte_rate(rate_broker: BrokerProcess) -> None:
    bs, client = rate_broker.bootstrap, f"capped-producer-{uuid.uuid4().hex[:6]}"
    set_quota(bs, client, "producer_byte_rate", RATE)
    topic = f"rate-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    delivered: list[tuple[float, int]] = []
    throttles: list[float] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is None:  # the queue left at the end is purged
            delivered.append((time.monotonic(), VALUE))

    # One record a request, and a bounded queue: the client is held back, not its memory grown.
    producer = Producer({"bootstrap.servers": bs, "client.id": client, "linger.ms": 1, "batch.size": VALUE + 200,
                         "queue.buffering.max.kbytes": 256, "acks": 1,
                         "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    settle_s = 4.0
    began = time.monotonic()
    end = began + settle_s + MEASURE_S
    while time.monotonic() < end:
        try:
            producer.produce(topic, b"p" * VALUE, on_delivery=on_delivery)
        except BufferError:  # the client's queue is full: it is being held back
            producer.poll(0.05)
        producer.poll(0)
    producer.purge(in_queue=True, in_flight=False)
    producer.flush(30)
    rate = measured_rate(delivered, began + settle_s, end)
    log.info("producer: %.0f B/s over %.1f s against %d B/s; %d throttle reports, max %.0f ms", rate, MEASURE_S,
             RATE, len(throttles), max(throttles, default=0) * 1000)
    assert throttles, "the broker reported no throttle time"
    assert 0.8 * RATE <= rate <= 1.2 * RATE, f"{rate:.0f} B/s against a quota of {RATE} B/s"


def test_consumer_is_held_to_consumer_byte_rate(rate_broker: BrokerProcess) -> None:
    bs, client = rate_broker.bootstrap, f"capped-consumer-{uuid.uuid4().hex[:6]}"
    topic = f"rate-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    # Fill the topic (no quota on this client) with more than the consumer may read in the test.
    total = int(RATE * (MEASURE_S + 8) * 1.5)
    # One record a batch: a fetch returns whole batches, so small batches make small fetches.
    filler = Producer({"bootstrap.servers": bs, "linger.ms": 1, "batch.size": VALUE + 200})
    for _ in range(total // VALUE):
        while True:
            try:
                filler.produce(topic, b"c" * VALUE)
                break
            except BufferError:
                filler.poll(0.1)
    assert filler.flush(60) == 0
    set_quota(bs, client, "consumer_byte_rate", RATE)
    throttles: list[float] = []
    consumer = Consumer({"bootstrap.servers": bs, "client.id": client, "group.id": client,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         # Small fetches keep each throttle short, so the measured window is smooth.
                         "fetch.max.bytes": 2 * VALUE, "max.partition.fetch.bytes": 2 * VALUE,
                         "message.max.bytes": 2 * VALUE,
                         "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    consumer.subscribe([topic])
    received: list[tuple[float, int]] = []
    try:
        first = wait_for(lambda: consumer.poll(0.5), timeout=30, what="the first record")
        began = time.monotonic()
        received.append((began, len(first.value() or b"")))
        settle_s = 4.0
        end = began + settle_s + MEASURE_S
        while time.monotonic() < end:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                received.append((time.monotonic(), len(msg.value() or b"")))
    finally:
        consumer.close()
    rate = measured_rate(received, began + settle_s, end)
    log.info("consumer: %.0f B/s over %.1f s against %d B/s; %d throttle reports, max %.0f ms", rate, MEASURE_S,
             RATE, len(throttles), max(throttles, default=0) * 1000)
    assert sum(n for _, n in received) < total, "the consumer ran out of records: the test measured nothing"
    assert throttles, "the broker reported no throttle time"
    assert 0.8 * RATE <= rate <= 1.2 * RATE, f"{rate:.0f} B/s against a quota of {RATE} B/s"
