"""Records keep their subclass through new_record; Headers behave like Kafka's."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from strom.connect.api.records import ConnectRecord, Header, Headers, SinkRecord, SourceRecord, TopicPartition
from strom.connect.data import Schema, SchemaAndValue


def test_source_record_new_record_keeps_source_fields_and_duplicates_headers() -> None:
    r = SourceRecord({"file": "/in"}, {"position": 7}, "t", 0, Schema.STRING_SCHEMA, "k",
                     Schema.INT32_SCHEMA, 5, 1000, Headers().add_string("h", "v"))
    r2 = r.new_record("t2", 1, None, None, Schema.STRING_SCHEMA, "x", 2000)
    assert type(r2) is SourceRecord
    assert (r2.source_partition, r2.source_offset) == ({"file": "/in"}, {"position": 7})
    assert (r2.topic, r2.kafka_partition, r2.value, r2.timestamp) == ("t2", 1, "x", 2000)
    assert r2.headers == r.headers and r2.headers is not r.headers  # duplicated
    r2.headers.add_string("other", "y")
    assert len(r.headers) == 1
    r3 = r.new_record("t", 0, None, None, None, None, None, headers=[Header("a", None, 1)])
    assert [h.key for h in r3.headers] == ["a"]


def test_sink_record_new_record_keeps_offsets_and_original_coordinates() -> None:
    r = SinkRecord("in", 3, None, b"k", None, b"v", 42, 123, "CreateTime")
    assert (r.original_topic, r.original_kafka_partition, r.original_kafka_offset) == ("in", 3, 42)
    r2 = r.new_record("routed", 0, None, "k", None, "v", 456)
    assert type(r2) is SinkRecord
    assert (r2.kafka_offset, r2.timestamp_type) == (42, "CreateTime")
    assert (r2.topic, r2.kafka_partition) == ("routed", 0)
    assert (r2.original_topic, r2.original_kafka_partition, r2.original_kafka_offset) == ("in", 3, 42)


def test_user_subclass_fields_survive_new_record() -> None:
    @dataclasses.dataclass(frozen=True, slots=True, init=False)
    class Traced(SourceRecord):
        trace_id: str = ""

        def __init__(self, *args: Any, trace_id: str = "", **kw: Any) -> None:
            SourceRecord.__init__(self, *args, **kw)
            object.__setattr__(self, "trace_id", trace_id)

    r = Traced({}, {}, "t", trace_id="abc")
    r2 = r.new_record("u", None, None, None, None, "v", None)
    assert type(r2) is Traced and r2.trace_id == "abc" and r2.topic == "u"


def test_records_are_frozen() -> None:
    r = ConnectRecord("t", 0, None, None, None, "v", None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.topic = "x"  # type: ignore[misc]  # the point: a frozen record refuses it


def test_headers_operations() -> None:
    h = Headers()
    h.add_string("a", "1").add("b", 2).add("a", SchemaAndValue(Schema.INT8_SCHEMA, 3))
    h.add(Header("c", None, None))
    assert [x.key for x in h] == ["a", "b", "a", "c"]
    last = h.last_with_name("a")
    assert last == Header("a", Schema.INT8_SCHEMA, 3)
    assert [x.value for x in h.all_with_name("a")] == ["1", 3]
    b = h.last_with_name("b")
    assert b is not None and b.schema == Schema.INT64_SCHEMA  # inferred
    assert h.last_with_name("zz") is None
    dup = h.duplicate()
    h.remove("a")
    assert [x.key for x in h] == ["b", "c"] and len(dup) == 4
    dup.retain_latest("a")
    assert [(x.key, x.value) for x in dup] == [("b", 2), ("a", 3), ("c", None)]
    dup.clear()
    assert dup.is_empty() and not dup


def test_topic_partition_is_hashable_tuple() -> None:
    tp = TopicPartition("t", 1)
    assert {tp: 5}[TopicPartition("t", 1)] == 5 and tp.topic == "t" and tp.partition == 1
