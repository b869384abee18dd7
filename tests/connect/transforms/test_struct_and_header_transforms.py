"""Flatten, SetSchemaMetadata, Filter, HeaderFrom, InsertHeader, DropHeaders and the predicates."""

from __future__ import annotations

import pytest

from strom.connect.api.records import Header, Headers
from strom.connect.data import Schema, SchemaBuilder, Struct
from strom.connect.exceptions import ConfigException, DataException
from strom.connect.transforms import (
    PLUGINS,
    DropHeaders,
    Filter,
    FlattenKey,
    FlattenValue,
    HasHeaderKey,
    HeaderFromKey,
    HeaderFromValue,
    InsertHeader,
    RecordIsTombstone,
    SetSchemaMetadataKey,
    SetSchemaMetadataValue,
    TopicNameMatches,
)
from tests.connect.transforms.conftest import make, sink


def test_every_plugin_has_a_unique_kafka_name_and_config() -> None:
    names = [getattr(c, "KAFKA_CLASS_NAME", None) for c in PLUGINS]
    assert len(names) == len(set(names)) == 29
    assert all(n is not None and n.startswith("org.apache.kafka.connect.transforms.") for n in names)
    assert "org.apache.kafka.connect.transforms.predicates.TopicNameMatches" in names
    for cls in PLUGINS:
        assert cls().config() is not None


# -- Flatten ---------------------------------------------------------------------------------

def test_flatten_schemaless() -> None:
    value = {"a": {"b": {"c": 1}, "d": [1, 2]}, "e": None, "f": "x"}
    assert make(FlattenValue).apply(sink(value=value)).value == {"a.b.c": 1, "a.d": [1, 2], "e": None, "f": "x"}
    assert make(FlattenKey, delimiter="_").apply(sink(value=1, key={"a": {"b": 2}})).key == {"a_b": 2}


def test_flatten_struct_optional_and_defaults() -> None:
    inner = (SchemaBuilder.struct().optional()
             .field("x", Schema.INT32_SCHEMA)
             .field("y", SchemaBuilder.string().optional().default_value("dflt").build()).build())
    outer = (SchemaBuilder.struct().name("outer").field("id", Schema.INT64_SCHEMA).field("in", inner)
             .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).build()).build())
    value = Struct(outer).put("id", 1).put("in", Struct(inner).put("x", 5).put("y", "v")).put("tags", ["t"])
    rec = make(FlattenValue).apply(sink(outer, value))
    s = rec.value_schema
    assert s.name == "outer"
    assert [f.name for f in s.fields] == ["id", "in.x", "in.y", "tags"]
    assert s.field("in.x").schema.optional  # optional because its parent is
    assert s.field("in.y").schema.default == "dflt"
    assert not s.field("id").schema.optional
    assert (rec.value.get("id"), rec.value.get("in.x"), rec.value.get("in.y"), rec.value.get("tags")) == (1, 5, "v", ["t"])
    # A null nested struct leaves its flattened fields empty.
    rec2 = make(FlattenValue).apply(sink(outer, Struct(outer).put("id", 2).put("tags", [])))
    assert rec2.value.get("in.x") is None


def test_flatten_tombstone_and_bad_value() -> None:
    rec = sink(None, None)
    assert make(FlattenValue).apply(rec) is rec
    with pytest.raises(DataException, match="Only Map objects supported"):
        make(FlattenValue).apply(sink(value=[1, 2]))


# -- SetSchemaMetadata -----------------------------------------------------------------------

def test_set_schema_metadata() -> None:
    schema = SchemaBuilder.struct().name("old").version(1).field("a", Schema.INT32_SCHEMA).build()
    rec = make(SetSchemaMetadataValue, **{"schema.name": "new", "schema.version": "7"}).apply(
        sink(schema, Struct(schema).put("a", 1)))
    assert rec.value_schema.name == "new" and rec.value_schema.version == 7
    assert rec.value.schema is rec.value_schema and rec.value.get("a") == 1
    key = make(SetSchemaMetadataKey, **{"schema.version": "2"}).apply(sink(value=1, key_schema=Schema.STRING_SCHEMA, key="k"))
    assert key.key_schema.version == 2 and key.key_schema.type.name == "STRING" and key.key == "k"


def test_set_schema_metadata_errors() -> None:
    with pytest.raises(ConfigException, match="Neither schema name nor version configured"):
        make(SetSchemaMetadataValue)
    with pytest.raises(ConfigException, match=r"schema\.version"):
        make(SetSchemaMetadataValue, **{"schema.version": "x"})
    with pytest.raises(DataException, match="Schema required for \\[updating schema metadata\\]"):
        make(SetSchemaMetadataValue, **{"schema.name": "n"}).apply(sink(value={"a": 1}))


# -- Filter and predicates -------------------------------------------------------------------

def test_filter_drops() -> None:
    assert make(Filter).apply(sink(value=1)) is None
    assert Filter.KAFKA_CLASS_NAME == "org.apache.kafka.connect.transforms.Filter"


def test_predicates() -> None:
    p = make(TopicNameMatches, pattern="ord.*")
    assert p.test(sink(value=1)) and not p.test(sink(value=1, topic="xorders"))
    with pytest.raises(ConfigException, match="pattern"):
        make(TopicNameMatches, pattern="[")
    with pytest.raises(ConfigException, match="pattern"):
        make(TopicNameMatches)
    h = make(HasHeaderKey, name="trace")
    assert h.test(sink(value=1, headers=Headers().add_string("trace", "x")))
    assert not h.test(sink(value=1, headers=Headers().add_string("other", "x")))
    with pytest.raises(ConfigException, match="name"):
        make(HasHeaderKey, name="")
    t = make(RecordIsTombstone)
    assert t.test(sink(value=None)) and not t.test(sink(value=0))


# -- headers ---------------------------------------------------------------------------------

SCHEMA = SchemaBuilder.struct().field("id", Schema.INT32_SCHEMA).field("trace", Schema.STRING_SCHEMA).build()


def test_header_from_copy_and_move_struct() -> None:
    value = Struct(SCHEMA).put("id", 1).put("trace", "abc")
    base = sink(SCHEMA, value, headers=Headers().add_string("keep", "k"))
    copy = make(HeaderFromValue, fields="trace", headers="h_trace", operation="copy").apply(base)
    assert copy.value == value and copy.value_schema == SCHEMA
    assert copy.headers.last_with_name("h_trace") == Header("h_trace", Schema.STRING_SCHEMA, "abc")
    assert copy.headers.last_with_name("keep") is not None
    assert base.headers.last_with_name("h_trace") is None  # the input record is not mutated
    move = make(HeaderFromValue, fields="trace,id", headers="t,i", operation="move").apply(base)
    assert list(move.value_schema.fields) == []
    assert [h.key for h in move.headers] == ["keep", "t", "i"]
    assert move.headers.last_with_name("i").value == 1


def test_header_from_schemaless_key() -> None:
    rec = make(HeaderFromKey, fields="a", headers="ha", operation="move").apply(sink(value=1, key={"a": 5, "b": 6}))
    assert rec.key == {"b": 6} and rec.headers.last_with_name("ha").value == 5


def test_header_from_config_errors() -> None:
    with pytest.raises(ConfigException, match="same number of elements"):
        make(HeaderFromValue, fields="a,b", headers="x", operation="copy")
    with pytest.raises(ConfigException, match="operation"):
        make(HeaderFromValue, fields="a", headers="x", operation="steal")
    with pytest.raises(DataException, match="nope"):
        make(HeaderFromValue, fields="nope", headers="x", operation="copy").apply(
            sink(SCHEMA, Struct(SCHEMA).put("id", 1).put("trace", "t")))


def test_insert_header_parses_literal() -> None:
    rec = make(InsertHeader, header="n", value__literal="42").apply(sink(value=1))
    h = rec.headers.last_with_name("n")
    assert h.value == 42 and h.schema is not None and h.schema.type.name.startswith("INT")
    s = make(InsertHeader, header="s", value__literal="hello").apply(sink(value=1)).headers.last_with_name("s")
    assert s.value == "hello" and s.schema == Schema.STRING_SCHEMA
    with pytest.raises(ConfigException, match="header"):
        make(InsertHeader, value__literal="x")


def test_drop_headers() -> None:
    headers = Headers().add_string("a", "1").add_string("b", "2").add_string("a", "3")
    rec = make(DropHeaders, headers="a,c").apply(sink(value=1, headers=headers))
    assert [h.key for h in rec.headers] == ["b"]
    assert len(headers) == 3
    with pytest.raises(ConfigException, match="headers"):
        make(DropHeaders, headers="")
