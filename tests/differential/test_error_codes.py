# mypy: disable-error-code="arg-type,union-attr"
# (kio types fields with phantom NewTypes - i32, TopicName, i32Timedelta - and loads response
# types as unions; plain ints/strs are what they are at run time, so only the checker objects.)
"""Differential: the error codes strom and Apache Kafka answer to bad requests.

Each case is one raw request (diff_wire), so the code is the broker's own answer, not a
client library's interpretation. Kafka's code is also checked against the expected one, so a
harness mistake (a request that accidentally succeeds) cannot make the comparison vacuous.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from diff_wire import WireClient, build_batch, seconds
from kafka_ref import KafkaRef
from kio.schema.create_topics.v7.request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from ref_fixtures import HasBootstrap


@dataclass
class Outcome:
    code: int
    message: str | None


def create(c: WireClient, name: str, partitions: int = 1, rf: int = 1,
           configs: dict[str, str] | None = None, validate_only: bool = False) -> Outcome:
    topic = CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf, assignments=(),
                           configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()))
    resp = c.request(CreateTopicsRequest(topics=(topic,), timeout=seconds(30), validate_only=validate_only))
    result = resp.topics[0]
    return Outcome(int(result.error_code), result.error_message)


def delete(c: WireClient, name: str) -> Outcome:
    resp = c.request(DeleteTopicsRequest(topics=(DeleteTopicState(name=name, topic_id=None),),
                                         timeout=seconds(30)))
    r = resp.responses[0]
    return Outcome(int(r.error_code), r.error_message)


def produce(c: WireClient, name: str, partition: int, records: bytes, acks: int = -1) -> Outcome:
    req = ProduceRequest(acks=acks, timeout=seconds(30), topic_data=(
        TopicProduceData(name=name, partition_data=(PartitionProduceData(index=partition, records=records),)),))
    p = c.request(req).responses[0].partition_responses[0]
    return Outcome(int(p.error_code), p.error_message)


def fetch(c: WireClient, name: str, partition: int, offset: int) -> Outcome:
    req = FetchRequest(max_wait=seconds(0), min_bytes=0, topics=(FetchTopic(topic=name, partitions=(
        FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=())
    resp = c.request(req)
    if resp.error_code != 0:
        return Outcome(int(resp.error_code), None)
    return Outcome(int(resp.responses[0].partitions[0].error_code), None)


def list_offsets(c: WireClient, name: str, partition: int, timestamp: int = -2) -> Outcome:
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(name=name, partitions=(
        ListOffsetsPartition(partition_index=partition, timestamp=timestamp),)),))
    p = c.request(req).topics[0].partitions[0]
    return Outcome(int(p.error_code), None)


def corrupt(batch: bytes) -> bytes:
    """Flip one bit inside the records (after the 61-byte header): the CRC no longer matches."""
    data = bytearray(batch)
    data[-2] ^= 0x01
    return bytes(data)


E = ErrorCode
# case -> (expected Kafka error code, action(client, existing topic name))
CASES: dict[str, tuple[int, Callable[[WireClient, str], Outcome]]] = {
    "create_invalid_name": (E.invalid_topic_exception, lambda c, t: create(c, "bad name!")),
    "create_dot_dot": (E.invalid_topic_exception, lambda c, t: create(c, "..")),
    "create_name_too_long": (E.invalid_topic_exception, lambda c, t: create(c, "x" * 250)),
    "create_bad_config_value": (E.invalid_config, lambda c, t: create(c, t + "-x", configs={"retention.ms": "abc"})),
    "create_unknown_config": (E.invalid_config, lambda c, t: create(c, t + "-x", configs={"no.such.config": "1"})),
    "create_bad_cleanup_policy": (E.invalid_config,
                                  lambda c, t: create(c, t + "-x", configs={"cleanup.policy": "shred"})),
    "create_replication_factor_3": (E.invalid_replication_factor, lambda c, t: create(c, t + "-x", rf=3)),
    "create_negative_partitions": (E.invalid_partitions, lambda c, t: create(c, t + "-x", partitions=-5)),
    "create_zero_partitions": (E.invalid_partitions, lambda c, t: create(c, t + "-x", partitions=0)),
    "create_existing": (E.topic_already_exists, lambda c, t: create(c, t)),
    "create_validate_only": (E.none, lambda c, t: create(c, t + "-v", validate_only=True)),
    "delete_missing_topic": (E.unknown_topic_or_partition, lambda c, t: delete(c, t + "-missing")),
    "produce_ok": (E.none, lambda c, t: produce(c, t, 0, build_batch([(b"k", b"v")]))),
    "produce_missing_partition": (E.unknown_topic_or_partition,
                                  lambda c, t: produce(c, t, 7, build_batch([(b"k", b"v")]))),
    "produce_missing_topic": (E.unknown_topic_or_partition,
                              lambda c, t: produce(c, t + "-missing", 0, build_batch([(b"k", b"v")]))),
    "produce_bad_acks": (E.invalid_required_acks, lambda c, t: produce(c, t, 0, build_batch([(b"k", b"v")]), acks=2)),
    "produce_corrupt_crc": (E.corrupt_message,
                            lambda c, t: produce(c, t, 0, corrupt(build_batch([(b"k", b"value-1")])))),
    "fetch_out_of_range": (E.offset_out_of_range, lambda c, t: fetch(c, t, 0, 1000)),
    "fetch_negative_offset": (E.offset_out_of_range, lambda c, t: fetch(c, t, 0, -5)),
    "fetch_missing_partition": (E.unknown_topic_or_partition, lambda c, t: fetch(c, t, 7, 0)),
    "list_offsets_missing_partition": (E.unknown_topic_or_partition, lambda c, t: list_offsets(c, t, 7)),
}


def short(message: str | None) -> str:
    return (message or "")[:100]


def observe(bootstrap: str, topic: str) -> dict[str, Outcome]:
    with WireClient(bootstrap) as c:
        setup = create(c, topic)
        assert setup.code == 0, f"setup create_topics failed: {setup}"
        c.wait_for_leaders(topic, 1)
        return {case: action(c, topic) for case, (_, action) in CASES.items()}


def test_error_codes_match_kafka(strom: HasBootstrap, kafka: KafkaRef) -> None:
    topic = f"diff-err-{uuid.uuid4().hex[:8]}"
    theirs = observe(kafka.bootstrap, topic)
    wrong = {k: (o, CASES[k][0]) for k, o in theirs.items() if o.code != CASES[k][0]}
    assert not wrong, f"Kafka did not answer as the harness expects: {wrong}"
    ours = observe(strom.bootstrap, topic)
    lines = []
    for case in CASES:
        mark = "  " if ours[case].code == theirs[case].code else "!!"
        lines.append(f"{mark} {case}: strom {ours[case].code} ({short(ours[case].message)}) "
                     f"Kafka {theirs[case].code} ({short(theirs[case].message)})")
    print("\n".join(["error codes:", *lines]))
    assert {k: o.code for k, o in ours.items()} == {k: o.code for k, o in theirs.items()}, "\n".join(lines)
