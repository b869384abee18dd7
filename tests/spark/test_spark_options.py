"""Option parsing, offset JSON and partition planning of the Spark bridge (no Spark, no broker)."""

from __future__ import annotations

import itertools

import pytest

from strom.spark_bridge.exceptions import OptionError
from strom.spark_bridge.offsets import from_json_dict, to_json_dict
from strom.spark_bridge.options import SourceOptions, parse_sink_options, parse_source_options
from strom.spark_bridge.planning import OffsetRange, plan_partitions, rate_limit

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def src(streaming: bool = False, **opts: str) -> SourceOptions:
    return parse_source_options({**BASE, **{k.lower(): v for k, v in opts.items()}}, streaming=streaming)


@pytest.mark.parametrize(("opts", "streaming", "option", "needle"), [
    ({"subscribe": "t", "bogus": "1"}, False, "bogus", "unknown option"),
    ({}, False, "subscribe/subscribePattern/assign", "got none"),
    ({"subscribe": "t", "subscribePattern": "t.*"}, False, "subscribe/subscribePattern/assign",
     "subscribe, subscribePattern"),
    ({"assign": "[1]"}, False, "assign", "expected a JSON object"),
    ({"subscribe": "t", "startingOffsets": "{bad"}, False, "startingOffsets", "malformed JSON"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"x":1}}'}, False, "startingOffsets", "not an integer"),
    ({"subscribe": "t", "startingOffsets": "latest"}, False, "startingOffsets", "can't be latest"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"0":-1}}'}, False, "startingOffsets", "can't be latest"),
    ({"subscribe": "t", "endingOffsets": "earliest"}, False, "endingOffsets", "can't be earliest"),
    ({"subscribe": "t", "endingOffsets": "latest"}, True, "endingOffsets", "not valid in streaming"),
    ({"subscribe": "t", "failOnDataLoss": "maybe"}, False, "failOnDataLoss", "true or false"),
    ({"subscribe": "t", "maxOffsetsPerTrigger": "-5"}, True, "maxOffsetsPerTrigger", "positive integer"),
    ({"subscribe": "t", "kafka.value.deserializer": "x"}, False, "kafka.value.deserializer", "not supported"),
    ({"subscribe": "t", "kafka.isolation.level": "serializable"}, False, "kafka.isolation.level", "read_committed"),
    ({"subscribePattern": "(unclosed"}, False, "subscribePattern", "invalid regular expression"),
])
def test_bad_source_options(opts: dict[str, str], streaming: bool, option: str, needle: str) -> None:
    with pytest.raises(OptionError) as info:
        src(streaming, **opts)
    assert info.value.option == option
    assert needle in str(info.value)


def test_missing_bootstrap_and_sink_checks() -> None:
    with pytest.raises(OptionError, match=r"kafka\.bootstrap\.servers"):
        parse_source_options({"subscribe": "t"}, streaming=False)
    with pytest.raises(OptionError, match="'subscribe': unknown option"):
        parse_sink_options({**BASE, "subscribe": "t"})
    assert parse_sink_options({**BASE, "topic": " out "}).topic == "out"


def test_defaults_and_precedence() -> None:
    batch = src(subscribe="a, b")
    assert batch.subscription.topics == ("a", "b")
    assert batch.starting.kind == "earliest" and batch.ending.kind == "latest"
    assert src(True, subscribe="a").starting.kind == "latest"
    # by-timestamp beats startingTimestamp beats startingOffsets, as in spark-sql-kafka
    o = src(subscribe="a", startingOffsets="earliest", startingTimestamp="5",
            startingOffsetsByTimestamp='{"a":{"0":7}}')
    assert o.starting.kind == "timestamps" and o.starting.offsets == {("a", 0): 7}
    assert src(subscribe="a", startingTimestamp="5").starting.timestamp == 5
    o = parse_source_options({**BASE, "assign": '{"a":[0,2]}', "kafka.isolation.level": "read_committed"},
                             streaming=False)
    assert o.subscription.partitions == (("a", 0), ("a", 2)) and o.read_committed


def test_offset_json_round_trip() -> None:
    offsets = {("b", 10): 3, ("a", 0): 25, ("a", 1): 0}
    data = to_json_dict(offsets)
    assert data == {"a": {"0": 25, "1": 0}, "b": {"10": 3}}
    assert from_json_dict(data) == offsets


def test_plan_partitions_min_partitions_and_cap() -> None:
    ranges = [OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 100, 200), OffsetRange("t", 2, 5, 5)]
    assert [p.value for p in plan_partitions(ranges)] == ranges[:2]
    split = [p.value for p in plan_partitions(ranges, min_partitions=10)]
    # 900 of 1000 records -> 9 pieces, 100 -> 1; contiguous, covering each range exactly
    assert len([r for r in split if r.partition == 0]) == 9
    assert [r for r in split if r.partition == 1] == [ranges[1]]
    zero = [r for r in split if r.partition == 0]
    assert zero[0].from_offset == 0 and zero[-1].until_offset == 900
    assert all(a.until_offset == b.from_offset for a, b in itertools.pairwise(zero))
    capped = [p.value for p in plan_partitions(ranges, max_records_per_partition=400)]
    assert all(r.size <= 400 for r in capped) and sum(r.size for r in capped) == 1000


def test_rate_limit_shares_by_backlog() -> None:
    start = {("t", 0): 0, ("t", 1): 0}
    latest = {("t", 0): 300, ("t", 1): 100}
    capped = rate_limit(start, latest, 100)
    assert capped == {("t", 0): 75, ("t", 1): 25}
    assert rate_limit(start, latest, 1000) == latest
    # one record allowed over two partitions: still progress
    tiny = rate_limit(start, {("t", 0): 1, ("t", 1): 1}, 1)
    assert sum(tiny.values()) == 1


def test_kafka_property_the_client_rejects_is_named() -> None:
    from strom.spark_bridge.offsets import KafkaMetadata

    opts = parse_source_options({**BASE, "subscribe": "t", "kafka.socket.timeout.ms": "x"}, streaming=False)
    with pytest.raises(OptionError) as info:
        KafkaMetadata(opts)
    assert info.value.option == "kafka.socket.timeout.ms"
    # Kafka's sasl.jaas.config is translated when the options are read: a bad one is named there
    with pytest.raises(OptionError) as info:
        parse_source_options({**BASE, "subscribe": "t", "kafka.sasl.jaas.config": "x"}, streaming=False)
    assert info.value.option == "kafka.sasl.jaas.config"
