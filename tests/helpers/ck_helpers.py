"""confluent-kafka helpers shared by conformance and fault tests.

Producers run with idempotence off and consumers use ``assign()`` with explicit offsets and no
commits, because the broker does not implement InitProducerId or group coordination yet. The
Python wrapper insists on a ``group.id``; with explicit offsets and auto-commit off librdkafka
never needs the coordinator to fetch.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic


class Rec(NamedTuple):
    """What a client observes of one record."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def create_topic(admin: AdminClient, name: str, partitions: int = 1, config: dict[str, str] | None = None,
                 timeout: float = 30.0) -> None:
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                            config=dict(config or {}))], operation_timeout=timeout)
    futures[name].result(timeout)


def wait_for_topic(admin: AdminClient, name: str, partitions: int, timeout: float = 20.0) -> None:
    """Until metadata shows ``partitions`` partitions of ``name``, each with a leader."""
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(name, timeout=10)
        t = md.topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
                p.leader >= 0 for p in t.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"topic {name} not ready: {t and t.error} {t and t.partitions}")
        time.sleep(0.1)


def make_producer(bootstrap: str, **conf: Any) -> Producer:
    base: dict[str, Any] = {"bootstrap.servers": bootstrap, "enable.idempotence": False, "linger.ms": 5,
                            "message.timeout.ms": 30000}
    base.update({k.replace("_", "."): v for k, v in conf.items()})
    return Producer(base)


def make_consumer(bootstrap: str, **conf: Any) -> Consumer:
    base: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": f"unused-{uuid.uuid4().hex[:8]}",
                            "enable.auto.commit": False, "enable.auto.offset.store": False,
                            "auto.offset.reset": "error", "enable.partition.eof": False,
                            "fetch.wait.max.ms": 100}
    base.update({k.replace("_", "."): v for k, v in conf.items()})
    return Consumer(base)


def produce_all(producer: Producer, topic: str, messages: Iterable[dict[str, Any]],
                timeout: float = 30.0) -> list[Rec]:
    """Produce each message (kwargs of ``Producer.produce``), flush, return the delivered records.

    Raises if any delivery failed; the result is in production order.
    """
    results: list[Rec | None] = []
    errors: list[KafkaError] = []

    def on_delivery(index: int, sent: dict[str, Any]) -> Any:
        def cb(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(err)
                return
            # acks=0: the broker answers nothing, so the client knows no offset (None -> -1).
            offset = msg.offset()
            results[index] = Rec(_num(msg.partition()), -1 if offset is None else offset, sent.get("key"), sent.get("value"),
                                 tuple(sent.get("headers") or ()), msg.timestamp()[1])
        return cb

    for i, m in enumerate(messages):
        results.append(None)
        producer.produce(topic, on_delivery=on_delivery(i, m), **m)
        producer.poll(0)
    left = producer.flush(timeout)
    if errors:
        raise KafkaException(errors[0])
    assert left == 0, f"{left} messages still in flight after {timeout}s"
    assert all(r is not None for r in results)
    return [r for r in results if r is not None]


def _num(value: int | None) -> int:
    assert value is not None
    return value


def to_rec(msg: Message) -> Rec:
    headers = msg.headers() or []
    assert isinstance(headers, list), "confluent-kafka returns consumed headers as a list of tuples"
    key, value = msg.key(), msg.value()
    assert not isinstance(key, str) and not isinstance(value, str)
    return Rec(_num(msg.partition()), _num(msg.offset()), key, value,
               tuple((k, v.encode() if isinstance(v, str) else v) for k, v in headers), msg.timestamp()[1])


def consume_n(consumer: Consumer, n: int, timeout: float = 30.0) -> list[Message]:
    """Exactly ``n`` messages (fails on timeout or on a consumer error)."""
    out: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"got {len(out)} of {n} messages within {timeout}s")
        msgs = consumer.consume(num_messages=n - len(out), timeout=min(remaining, 1.0))
        for m in msgs:
            if m.error() is not None:
                raise KafkaException(m.error())
            out.append(m)
    return out


def read_partition(bootstrap: str, topic: str, partition: int, n: int, start: int = OFFSET_BEGINNING,
                   timeout: float = 30.0, conf: dict[str, Any] | None = None) -> list[Message]:
    """The first ``n`` messages of one partition from ``start``, through a fresh assign()ed consumer."""
    consumer = make_consumer(bootstrap, **(conf or {}))
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        return consume_n(consumer, n, timeout)
    finally:
        consumer.close()


def values(msgs: Sequence[Message]) -> list[bytes | None]:
    return [m.value() for m in msgs]
