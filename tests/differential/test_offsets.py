"""Differential: the offsets a client sees after DeleteRecords and after log compaction.

Produced with confluent-kafka (librdkafka), administered with its AdminClient and read back
with kafka-python's consumer (assign + seek to beginning, no group), on strom and on Apache
Kafka. The observations must be equal, and Kafka's must be the documented behaviour.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka_ref import KafkaRef
from ref_fixtures import HasBootstrap

Record = tuple[int, str | None, str | None]


def admin_for(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def create_topic(bootstrap: str, name: str, config: dict[str, str] | None = None) -> None:
    admin = admin_for(bootstrap)  # keep the handle alive until the future resolves
    admin.create_topics([NewTopic(name, 1, 1, config=config or {})])[name].result(timeout=60)


def produce(bootstrap: str, name: str, records: list[tuple[str, str | None]]) -> None:
    # acks=all without idempotence: compaction keeps the last batch of every idempotent
    # producer, which would make the surviving set depend on the producer id.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
                         "linger.ms": 5, "log_level": 3})
    errors: list[Any] = []
    for key, value in records:
        producer.produce(name, key=key.encode(), value=None if value is None else value.encode(), partition=0,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert producer.flush(60) == 0 and not errors, errors


def read_all(bootstrap: str, name: str, timeout: float = 30.0) -> list[Record]:
    """Every record from the log start to the end offset, with offsets."""
    tp = KpTopicPartition(name, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        out: list[Record] = []
        deadline = time.monotonic() + timeout
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for msg in consumer.poll(timeout_ms=500).get(tp, []):
                out.append((msg.offset, None if msg.key is None else msg.key.decode(),
                            None if msg.value is None else msg.value.decode()))
        return out
    finally:
        consumer.close()


def list_offsets(admin: AdminClient, name: str) -> tuple[int, int]:
    tp = TopicPartition(name, 0)
    earliest = admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(timeout=30).offset
    latest = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(timeout=30).offset
    return earliest, latest


def delete_records(admin: AdminClient, name: str, before: int) -> int | str:
    tp = TopicPartition(name, 0, before)
    try:
        return int(admin.delete_records([tp])[tp].result(timeout=30).low_watermark)
    except KafkaException as exc:
        return str(exc.args[0].name())


def observe_delete_records(bootstrap: str, name: str) -> dict[str, Any]:
    create_topic(bootstrap, name)
    produce(bootstrap, name, [(f"k{i}", f"v{i}") for i in range(20)])
    produce(bootstrap, name, [(f"k{i}", f"v{i}") for i in range(20, 30)])
    admin = admin_for(bootstrap)
    seen: dict[str, Any] = {"offsets_before": list_offsets(admin, name)}
    # Offset 7 lies inside the first batch: the log start moves inside a batch.
    seen["delete_to_7"] = delete_records(admin, name, 7)
    seen["offsets_after_7"] = list_offsets(admin, name)
    seen["records_after_7"] = [r[0] for r in read_all(bootstrap, name)]
    seen["delete_lower_again"] = delete_records(admin, name, 3)  # no move backwards
    seen["delete_past_end"] = delete_records(admin, name, 100)
    seen["delete_to_end"] = delete_records(admin, name, -1)  # -1 = up to the high watermark
    seen["offsets_after_end"] = list_offsets(admin, name)
    seen["records_after_end"] = read_all(bootstrap, name)
    return seen


KAFKA_DELETE_RECORDS = {
    "offsets_before": (0, 30),
    "delete_to_7": 7,
    "offsets_after_7": (7, 30),
    "records_after_7": list(range(7, 30)),
    "delete_lower_again": 7,
    "delete_past_end": "OFFSET_OUT_OF_RANGE",
    "delete_to_end": 30,
    "offsets_after_end": (30, 30),
    "records_after_end": [],
}


def test_delete_records_offsets(strom: HasBootstrap, kafka: KafkaRef) -> None:
    name = f"diff-dr-{uuid.uuid4().hex[:8]}"
    theirs = observe_delete_records(kafka.bootstrap, name)
    assert theirs == KAFKA_DELETE_RECORDS
    ours = observe_delete_records(strom.bootstrap, name)
    assert ours == theirs


COMPACT_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "100",  # every round below lands in its own segment
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
}
KEYS = [f"k{i}" for i in range(10)]
ROUNDS = 3


def compaction_input() -> list[list[tuple[str, str | None]]]:
    """ROUNDS rounds overwriting every key; k3 ends with a tombstone. Then a marker record
    whose arrival rolls the last round's segment, so every round is cleanable."""
    rounds: list[list[tuple[str, str | None]]] = []
    for r in range(ROUNDS):
        rounds.append([(k, None if (r == ROUNDS - 1 and k == "k3") else f"r{r}-{k}") for k in KEYS])
    rounds.append([("marker", "end")])
    return rounds


def expected_after_compaction() -> list[Record]:
    """What a full clean leaves: the last round (tombstones are kept for delete.retention.ms,
    a day by default) and the marker in the active segment."""
    base = (ROUNDS - 1) * len(KEYS)
    last = [(base + i, k, v) for i, (k, v) in enumerate(compaction_input()[ROUNDS - 1])]
    return [*last, (ROUNDS * len(KEYS), "marker", "end")]


def observe_compaction(bootstrap: str, name: str, timeout: float = 90.0) -> list[Record]:
    create_topic(bootstrap, name, COMPACT_CONFIG)
    for batch in compaction_input():
        produce(bootstrap, name, batch)
        time.sleep(0.3)  # > segment.ms: the next round's first append rolls the segment
    want = expected_after_compaction()
    deadline = time.monotonic() + timeout
    seen = read_all(bootstrap, name)
    while seen != want and time.monotonic() < deadline:
        time.sleep(0.5)
        seen = read_all(bootstrap, name)
    return seen


def test_compaction_survivors(strom: HasBootstrap, kafka: KafkaRef) -> None:
    name = f"diff-compact-{uuid.uuid4().hex[:8]}"
    theirs = observe_compaction(kafka.bootstrap, name)
    assert theirs == expected_after_compaction()
    ours = observe_compaction(strom.bootstrap, name)
    assert ours == theirs
