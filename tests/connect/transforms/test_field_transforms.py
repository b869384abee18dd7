"""InsertField, ReplaceField, MaskField, ValueToKey, ExtractField, HoistField: schemaless and Struct."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from strom.connect.data import Date, Decimal, Schema, SchemaBuilder, Struct, Timestamp
from strom.connect.exceptions import ConfigException, DataException
from strom.connect.transforms import (
    ExtractField,
    ExtractFieldKey,
    ExtractFieldValue,
    HoistFieldKey,
    HoistFieldValue,
    InsertField,
    InsertFieldKey,
    InsertFieldValue,
    MaskFieldValue,
    ReplaceFieldKey,
    ReplaceFieldValue,
    ValueToKey,
)
from tests.connect.transforms.conftest import make, sink, source

UTC = dt.UTC


PERSON = (SchemaBuilder.struct().name("person").version(3)
          .field("name", Schema.STRING_SCHEMA).field("age", Schema.OPTIONAL_INT32_SCHEMA)
          .field("email", Schema.OPTIONAL_STRING_SCHEMA).build())


def person(name: str = "ada", age: int | None = 36, email: str | None = "a@x") -> Struct:
    return Struct(PERSON).put("name", name).put("age", age).put("email", email)


# -- InsertField -----------------------------------------------------------------------------

def test_insert_field_kafka_names() -> None:
    assert InsertFieldValue.KAFKA_CLASS_NAME == "org.apache.kafka.connect.transforms.InsertField$Value"
    assert InsertFieldKey.KAFKA_CLASS_NAME == "org.apache.kafka.connect.transforms.InsertField$Key"
    assert InsertField.Value is InsertFieldValue


def test_insert_field_schemaless() -> None:
    t = make(InsertFieldValue, **{"topic.field": "t", "partition.field": "p", "offset.field": "o!",
                                  "timestamp.field": "ts", "static.field": "s", "static.value": "v"})
    rec = t.apply(sink(value={"a": 1}))
    assert rec.value == {"a": 1, "t": "orders", "p": 3, "o": 42, "ts": 1_600_000_000_123, "s": "v"}
    assert rec.value_schema is None
    assert rec.kafka_offset == 42  # a SinkRecord stays a SinkRecord


def test_insert_field_struct_schema_and_values() -> None:
    t = make(InsertFieldValue, **{"topic.field": "topic!", "partition.field": "part",
                                  "timestamp.field": "ts", "static.field": "instance", "static.value": "i-1"})
    rec = t.apply(sink(PERSON, person()))
    s = rec.value_schema
    assert s.name == "person" and s.version == 3
    assert [f.name for f in s.fields] == ["name", "age", "email", "topic", "part", "ts", "instance"]
    assert s.field("topic").schema == Schema.STRING_SCHEMA
    assert s.field("part").schema == Schema.OPTIONAL_INT32_SCHEMA
    assert s.field("ts").schema.name == Timestamp.LOGICAL_NAME and s.field("ts").schema.optional
    v = rec.value
    assert v.get("name") == "ada" and v.get("topic") == "orders" and v.get("part") == 3
    assert v.get("ts") == dt.datetime.fromtimestamp(1_600_000_000.123, UTC)
    assert v.get("instance") == "i-1"
    # Same input schema -> same (cached) output schema object.
    assert t.apply(sink(PERSON, person("bob"))).value_schema is s


def test_insert_field_key_side() -> None:
    t = make(InsertFieldKey, **{"topic.field": "t"})
    rec = t.apply(sink(value="v", key={"id": 1}))
    assert rec.key == {"id": 1, "t": "orders"} and rec.value == "v"


def test_insert_field_tombstone_passes() -> None:
    t = make(InsertFieldValue, **{"topic.field": "t"})
    rec = sink(PERSON, None)
    assert t.apply(rec) is rec


def test_insert_field_offset_needs_sink_record() -> None:
    t = make(InsertFieldValue, **{"offset.field": "o"})
    with pytest.raises(DataException, match="Only SinkRecord supported for \\[field insertion\\]"):
        t.apply(source(value={"a": 1}))


def test_insert_field_rejects_non_map_schemaless() -> None:
    t = make(InsertFieldValue, **{"topic.field": "t"})
    with pytest.raises(DataException, match="Only Map objects supported in absence of schema for \\[field insertion\\], found: str"):
        t.apply(sink(value="text"))


def test_insert_field_config_errors() -> None:
    with pytest.raises(ConfigException, match="No field insertion configured"):
        make(InsertFieldValue)
    with pytest.raises(ConfigException, match=r"static\.value"):
        make(InsertFieldValue, **{"static.field": "s"})


# -- ReplaceField ----------------------------------------------------------------------------

def test_replace_field_schemaless() -> None:
    t = make(ReplaceFieldValue, exclude="dont", renames="abc:xyz,foo:bar")
    rec = t.apply(sink(value={"dont": 1, "abc": 2, "foo": 3, "etc": 4}))
    assert rec.value == {"xyz": 2, "bar": 3, "etc": 4}


def test_replace_field_include_struct() -> None:
    t = make(ReplaceFieldValue, include="name,email", renames="email:mail")
    rec = t.apply(sink(PERSON, person()))
    assert [f.name for f in rec.value_schema.fields] == ["name", "mail"]
    assert rec.value_schema.name == "person"
    assert rec.value.get("mail") == "a@x" and rec.value.get("name") == "ada"


def test_replace_field_deprecated_aliases_and_key() -> None:
    t = make(ReplaceFieldKey, blacklist="secret")
    rec = t.apply(sink(value=1, key={"id": 1, "secret": "s"}))
    assert rec.key == {"id": 1}
    t2 = make(ReplaceFieldValue, whitelist="a")
    assert t2.apply(sink(value={"a": 1, "b": 2})).value == {"a": 1}


def test_replace_field_bad_rename() -> None:
    with pytest.raises(ConfigException, match="renames"):
        make(ReplaceFieldValue, renames="nocolon")


# -- MaskField -------------------------------------------------------------------------------

MASKED = (SchemaBuilder.struct().field("i", Schema.INT32_SCHEMA).field("f", Schema.FLOAT64_SCHEMA)
          .field("b", Schema.BOOLEAN_SCHEMA).field("s", Schema.STRING_SCHEMA)
          .field("arr", SchemaBuilder.array(Schema.INT32_SCHEMA).build())
          .field("dec", Decimal.schema(2)).field("day", Date.SCHEMA)
          .field("keep", Schema.STRING_SCHEMA).build())


def masked_value() -> Struct:
    return (Struct(MASKED).put("i", 7).put("f", 1.5).put("b", True).put("s", "secret").put("arr", [1])
            .put("dec", decimal.Decimal("9.99")).put("day", dt.date(2020, 5, 5)).put("keep", "k"))


def test_mask_field_struct_empty_values() -> None:
    t = make(MaskFieldValue, fields="i,f,b,s,arr,dec,day")
    v = t.apply(sink(MASKED, masked_value())).value
    assert (v.get("i"), v.get("f"), v.get("b"), v.get("s"), v.get("arr")) == (0, 0.0, False, "", [])
    assert v.get("dec") == decimal.Decimal(0) and v.get("day") == dt.date(1970, 1, 1)
    assert v.get("keep") == "k"


def test_mask_field_schemaless_and_replacement() -> None:
    t = make(MaskFieldValue, fields="n,s,x", replacement="123")
    v = t.apply(sink(value={"n": 5, "s": "secret", "other": 1})).value
    assert v == {"n": 123, "s": "123", "other": 1}
    empty = make(MaskFieldValue, fields="n,s,m").apply(sink(value={"n": 5, "s": "x", "m": {"a": 1}})).value
    assert empty == {"n": 0, "s": "", "m": {}}


def test_mask_field_replacement_errors() -> None:
    with pytest.raises(DataException, match="Unable to convert"):
        make(MaskFieldValue, fields="i", replacement="abc").apply(sink(MASKED, masked_value()))
    with pytest.raises(DataException, match="with custom replacement"):
        make(MaskFieldValue, fields="b", replacement="x").apply(sink(MASKED, masked_value()))
    with pytest.raises(ConfigException, match="fields"):
        make(MaskFieldValue, fields="")


# -- ValueToKey ------------------------------------------------------------------------------

def test_value_to_key_schemaless() -> None:
    rec = make(ValueToKey, fields="a,b").apply(sink(value={"a": 1, "b": 2, "c": 3}))
    assert rec.key == {"a": 1, "b": 2} and rec.key_schema is None
    assert rec.value == {"a": 1, "b": 2, "c": 3}


def test_value_to_key_struct() -> None:
    rec = make(ValueToKey, fields="name,age").apply(sink(PERSON, person()))
    assert [f.name for f in rec.key_schema.fields] == ["name", "age"]
    assert rec.key.get("name") == "ada" and rec.key.get("age") == 36
    assert rec.value == person()


def test_value_to_key_missing_field() -> None:
    with pytest.raises(DataException, match="Field does not exist: nope"):
        make(ValueToKey, fields="nope").apply(sink(PERSON, person()))
    with pytest.raises(ConfigException):
        make(ValueToKey, fields="")


# -- ExtractField ----------------------------------------------------------------------------

def test_extract_field_schemaless_and_struct() -> None:
    assert ExtractField.Key is ExtractFieldKey
    t = make(ExtractFieldKey, field="id")
    assert t.apply(sink(value=1, key={"id": 9, "x": 1})).key == 9
    assert t.apply(sink(value=1, key={"x": 1})).key is None
    rec = make(ExtractFieldValue, field="age").apply(sink(PERSON, person()))
    assert rec.value == 36 and rec.value_schema == Schema.OPTIONAL_INT32_SCHEMA


def test_extract_field_nested_v2() -> None:
    inner = SchemaBuilder.struct().field("zip", Schema.STRING_SCHEMA).build()
    outer = SchemaBuilder.struct().field("addr", inner).build()
    value = Struct(outer).put("addr", Struct(inner).put("zip", "10115"))
    t = make(ExtractFieldValue, field="addr.zip", **{"field.syntax.version": "V2"})
    rec = t.apply(sink(outer, value))
    assert rec.value == "10115" and rec.value_schema == Schema.STRING_SCHEMA
    assert t.apply(sink(value={"addr": {"zip": "x"}})).value == "x"


def test_extract_field_unknown_and_null() -> None:
    with pytest.raises(DataException, match="Unknown field: nope"):
        make(ExtractFieldValue, field="nope").apply(sink(PERSON, person()))
    rec = make(ExtractFieldValue, field="age").apply(sink(PERSON, None))
    assert rec.value is None and rec.value_schema == Schema.OPTIONAL_INT32_SCHEMA
    with pytest.raises(ConfigException, match="field"):
        make(ExtractFieldValue)


# -- HoistField ------------------------------------------------------------------------------

def test_hoist_field() -> None:
    assert make(HoistFieldKey, field="k").apply(sink(value=1, key=5)).key == {"k": 5}
    rec = make(HoistFieldValue, field="wrapped").apply(sink(Schema.INT32_SCHEMA, 7))
    assert rec.value_schema.field("wrapped").schema == Schema.INT32_SCHEMA
    assert rec.value.get("wrapped") == 7
