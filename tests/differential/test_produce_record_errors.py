# mypy: disable-error-code="arg-type,union-attr"
# (kio types fields with phantom NewTypes - i32, TopicName, i32Timedelta - and loads response
# types as unions; plain ints/strs are what they are at run time, so only the checker objects.)
"""Differential: per-record Produce errors (KIP-467) of strom against Apache Kafka 4.3.1.

The same raw Produce request goes to both brokers (diff_wire's socket client, kafka-python's
record builder): a batch of 100 records of which 10 have no key, on a compacted topic; a batch
whose records break the topic's ``message.timestamp.{before,after}.max.ms`` bounds under
CreateTime; a batch with both kinds. Kafka fails the whole batch (nothing is appended) with
INVALID_RECORD or INVALID_TIMESTAMP, lists every bad record in ``record_errors`` (batch index and
message) and sums them up in the partition's ``error_message``; the response also carries the
partition's log start offset. Each answer is compared field by field, for Produce v3 (no
record_errors yet), v8 (the first with them) and v12, plus a batch with a non-zero base offset
(INVALID_RECORD without record errors, still with the log start offset; a batch Kafka refuses before the append, without it),
and a zstd batch in Produce v3-v6 (UNSUPPORTED_COMPRESSION_TYPE).

What the client makes of it: librdkafka (confluent-kafka) fails the records named in
``record_errors`` with INVALID_RECORD and every other record of the batch with its local
``_INVALID_DIFFERENT_RECORD``; the last test checks it sees exactly that from both brokers.
"""

from __future__ import annotations

import re
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from diff_wire import WireClient, build_batch, kio_schema, seconds
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka_ref import KafkaRef
from kio.schema.create_topics.v7.request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kio.schema.errors import ErrorCode
from ref_fixtures import HasBootstrap

RUN = uuid.uuid4().hex[:8]
HOUR_MS = 3_600_000
BOUNDS = {"message.timestamp.before.max.ms": str(HOUR_MS), "message.timestamp.after.max.ms": str(HOUR_MS)}
KEYLESS = frozenset(range(3, 100, 10))  # 10 keyless records among 100
ATTRIBUTES_LOW_BYTE = 22  # of a RecordBatch v2: the compression codec is in its low 3 bits


@pytest.fixture(scope="module")
def clients(strom: HasBootstrap, kafka: KafkaRef) -> Any:
    with WireClient(strom.bootstrap) as ours, WireClient(kafka.bootstrap) as theirs:
        yield {"strom": ours, "kafka": theirs}


def create_topic(c: WireClient, name: str, configs: dict[str, str]) -> None:
    resp = c.request(CreateTopicsRequest(topics=(CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=(),
        configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in configs.items())),),
        timeout=seconds(30), validate_only=False))
    assert resp.topics[0].error_code == 0, resp
    c.wait_for_leaders(name, 1)


def produce(c: WireClient, topic: str, records: bytes, version: int) -> Any:
    """One Produce request of one batch to partition 0; the partition's response, retried while
    the leader does not know the new topic yet (Kafka learns of it from the metadata log a
    moment after Metadata shows its leader). A refused batch appends nothing, so a retry is safe."""
    m = kio_schema("produce", version)
    deadline = time.monotonic() + 20
    while True:
        resp = c.request(m.ProduceRequest(
            transactional_id=None, acks=-1, timeout=timedelta(seconds=30),
            topic_data=(m.TopicProduceData(name=topic, partition_data=(
                m.PartitionProduceData(index=0, records=records),)),)))
        p = resp.responses[0].partition_responses[0]
        transient = (ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition)
        if p.error_code not in transient or time.monotonic() > deadline:
            return p
        time.sleep(0.1)


def batch(records: list[tuple[bytes | None, int]], codec: int = 0) -> bytes:
    """A RecordBatch v2 of (key, timestamp) records; ``codec`` is the compression id. The values
    are 200 alike bytes: kafka-python's builder leaves a batch uncompressed when the codec would
    not shrink it, so the batch is checked to carry the codec asked for."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, (key, ts) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=b"v" * 200, headers=[])
    built = bytes(builder.build())
    assert built[ATTRIBUTES_LOW_BYTE] & 0x07 == codec, "the builder did not compress the batch"
    return built


_BOUNDS_TEXT = re.compile(r"The timestamp should be within \[(-?\d+), (-?\d+)\]")


def without_clock(message: str | None) -> str | None:
    """A timestamp error's message with the broker's clock taken out: the bounds it names are
    now - before.max.ms and now + after.max.ms, so they must be 2 hours apart (checked here);
    which millisecond each broker called now differs between the two."""
    if message is None:
        return None

    def bounds(m: re.Match[str]) -> str:
        lo, hi = int(m.group(1)), int(m.group(2))
        assert hi - lo == 2 * HOUR_MS, message
        return "The timestamp should be within [NOW-1h, NOW+1h]"

    return _BOUNDS_TEXT.sub(bounds, message)


def answer(p: Any) -> dict[str, Any]:
    """A partition's Produce response, field by field (fields a version lacks are left out)."""
    out: dict[str, Any] = {"error": ErrorCode(int(p.error_code)).name, "base_offset": p.base_offset,
                           "log_append_time": p.log_append_time}
    if hasattr(p, "log_start_offset"):
        out["log_start_offset"] = p.log_start_offset
    if hasattr(p, "record_errors"):
        out["record_errors"] = [(e.batch_index, without_clock(e.batch_index_error_message)) for e in p.record_errors]
        out["error_message"] = without_clock(p.error_message)
    return out


def end_offset(c: WireClient, topic: str) -> int:
    return c.list_offset(topic, 0, 0)


def both(clients: dict[str, WireClient], topic: str, configs: dict[str, str],
         make: Any, versions: tuple[int, ...] = (3, 8, 12)) -> dict[str, dict[int, dict[str, Any]]]:
    """Create ``topic`` on both brokers, send each broker the batch ``make(now_ms)`` builds with
    each Produce version; their answers and the end offset afterwards. One ``now`` for both,
    so the records (and the timestamps the messages quote) are the same bytes on both brokers:
    the test runs in seconds, well within the topics' one-hour bounds."""
    seen: dict[str, dict[int, dict[str, Any]]] = {}
    records = make(int(time.time() * 1000))
    for who, c in clients.items():
        create_topic(c, topic, configs)
        seen[who] = {v: answer(produce(c, topic, records, v)) for v in versions}
        seen[who][-1] = {"end_offset": end_offset(c, topic)}
    return seen


def test_keyless_records_on_a_compacted_topic(clients: dict[str, WireClient]) -> None:
    topic = f"rec-err-compact-{RUN}"
    seen = both(clients, topic, {"cleanup.policy": "compact"},
                lambda now: batch([(None if i in KEYLESS else b"k%d" % i, now) for i in range(100)]))
    kafka = seen["kafka"]
    # Kafka's answer, as documented by KIP-467: every keyless record named, none appended.
    assert kafka[12]["error"] == "invalid_record"
    assert [i for i, _ in kafka[12]["record_errors"]] == sorted(KEYLESS)
    assert {m for _, m in kafka[12]["record_errors"]} == {
        f"Compacted topic cannot accept message without key in topic partition {topic}-0"}
    assert kafka[12]["error_message"].startswith("One or more records have been rejected due to 10 record errors")
    assert kafka[12]["log_start_offset"] == 0 and kafka[-1]["end_offset"] == 0
    assert seen["strom"] == kafka


def test_timestamps_out_of_bounds(clients: dict[str, WireClient]) -> None:
    topic = f"rec-err-ts-{RUN}"

    def make(now: int) -> bytes:
        # Record 2 is two hours old, record 7 two hours ahead; record 5 has no timestamp (-1: never checked).
        return batch([(None, now - 2 * HOUR_MS if i == 2 else now + 2 * HOUR_MS if i == 7 else -1 if i == 5 else now)
                      for i in range(10)])

    seen = both(clients, topic, BOUNDS, make)
    kafka = seen["kafka"]
    assert kafka[12]["error"] == "invalid_timestamp"
    assert [i for i, _ in kafka[12]["record_errors"]] == [2, 7]
    assert kafka[12]["error_message"] == "One or more records have been rejected due to invalid timestamp"
    assert seen["strom"] == kafka


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_keyless_and_timestamp_errors_in_one_batch(clients: dict[str, WireClient], codec: int) -> None:
    # Kafka answers INVALID_TIMESTAMP as soon as one record error is a timestamp's, and lists them
    # all; a compressed batch (validated after decompression) the same way. Produce v3-v6 may not
    # carry zstd (Kafka: UNSUPPORTED_COMPRESSION_TYPE), so only v8 and v12 here.
    topic = f"rec-err-mixed-{codec}-{RUN}"
    seen = both(clients, topic, {"cleanup.policy": "compact", **BOUNDS},
                lambda now: batch([(None if i in (2, 4) else b"k", now - 2 * HOUR_MS if i in (1, 4) else now)
                                   for i in range(6)], codec), versions=(8, 12))
    assert [i for i, _ in seen["kafka"][12]["record_errors"]] == [1, 2, 4]
    assert seen["strom"] == seen["kafka"]


def test_zstd_needs_produce_v7(clients: dict[str, WireClient]) -> None:
    # Refused before the append (ProduceRequest.validateRecords) up to v6, appended from v7.
    topic = f"rec-err-zstd-{RUN}"
    seen = both(clients, topic, {}, lambda now: batch([(b"k", now)] * 20, codec=4), versions=(3, 6, 7))
    kafka = seen["kafka"]
    assert (kafka[3]["error"], kafka[6]["error"], kafka[6]["log_start_offset"]) == (
        "unsupported_compression_type", "unsupported_compression_type", -1)
    assert (kafka[7]["error"], kafka[7]["base_offset"], kafka[-1]["end_offset"]) == ("none", 0, 20)
    assert seen["strom"] == kafka


def base_offset_5(now: int) -> bytes:
    good = build_batch([(b"k", b"v")], timestamp_ms=now)
    return b"\x00" * 7 + b"\x05" + good[8:]  # base offset 5 (outside the CRC)


def magic_1(now: int) -> bytes:
    good = build_batch([(b"k", b"v")], timestamp_ms=now)
    return good[:16] + b"\x01" + good[17:]


def two_batches(now: int) -> bytes:
    return build_batch([(b"k", b"v")], timestamp_ms=now) * 2


@pytest.mark.parametrize(("make", "log_start"), [(base_offset_5, 0), (magic_1, -1), (two_batches, -1)],
                         ids=["base-offset", "magic-1", "two-batches"])
def test_invalid_batch_without_record_errors(clients: dict[str, WireClient], make: Any, log_start: int) -> None:
    # A batch refused as a whole: INVALID_RECORD, no record errors. A failed append reports the
    # partition's log start offset (a client's base offset must be 0); what Kafka refuses before
    # the append (ProduceRequest.validateRecords: magic 2 only, one batch per partition) does not.
    topic = f"rec-err-{make.__name__.replace('_', '-')}-{RUN}"
    seen = both(clients, topic, {}, make, versions=(8, 12))
    assert seen["kafka"][12]["error"] == "invalid_record" and seen["kafka"][12]["log_start_offset"] == log_start
    # strom names the cause where Kafka leaves error_message null: compared without it.
    for answers in seen.values():
        for a in answers.values():
            a.pop("error_message", None)
    assert seen["strom"] == seen["kafka"]


def delivery_errors(bootstrap: str, topic: str) -> dict[int, tuple[int, str]]:
    """Produce 100 records (the KEYLESS ones without a key) in one batch with confluent-kafka;
    the error code and name each delivery report gives, by record number."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2000, "batch.num.messages": 1000,
                         "enable.idempotence": False, "retries": 0, "log_level": 0})
    errors: dict[int, tuple[int, str]] = {}

    def report(i: int) -> Any:
        def on_delivery(err: KafkaError | None, _msg: Any) -> None:
            errors[i] = (err.code(), err.name()) if err is not None else (0, "NO_ERROR")
        return on_delivery

    for i in range(100):
        producer.produce(topic, value=b"%d" % i, key=None if i in KEYLESS else b"k%d" % i, partition=0,
                         on_delivery=report(i))
    assert producer.flush(30) == 0
    return errors


def test_librdkafka_sees_the_bad_records_and_the_rest(clients: dict[str, WireClient], strom: HasBootstrap,
                                                      kafka: KafkaRef) -> None:
    topic = f"rec-err-ck-{RUN}"
    seen = {}
    for who, bootstrap in (("strom", strom.bootstrap), ("kafka", kafka.bootstrap)):
        create_topic(clients[who], topic, {"cleanup.policy": "compact"})
        seen[who] = delivery_errors(bootstrap, topic)
    expected = {i: (KafkaError.INVALID_RECORD, "INVALID_RECORD") if i in KEYLESS else
                (KafkaError._INVALID_DIFFERENT_RECORD, "_INVALID_DIFFERENT_RECORD") for i in range(100)}
    assert seen["kafka"] == expected
    assert seen["strom"] == expected
