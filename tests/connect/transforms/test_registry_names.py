"""Kafka Connect configuration names resolve to these classes through the plugin registry."""

from __future__ import annotations

import pytest

from strom.connect import converters, transforms
from strom.connect.plugins import PluginRegistry


@pytest.fixture(scope="module")
def registry() -> PluginRegistry:
    return PluginRegistry(classes=[*converters.PLUGINS, *transforms.PLUGINS])


@pytest.mark.parametrize(("name", "expected"), [
    ("org.apache.kafka.connect.transforms.InsertField$Value", transforms.InsertFieldValue),
    ("org.apache.kafka.connect.transforms.InsertField$Key", transforms.InsertFieldKey),
    ("InsertField$Value", transforms.InsertFieldValue),
    ("org.apache.kafka.connect.transforms.ReplaceField$Value", transforms.ReplaceFieldValue),
    ("org.apache.kafka.connect.transforms.Cast$Key", transforms.CastKey),
    ("org.apache.kafka.connect.transforms.TimestampConverter$Value", transforms.TimestampConverterValue),
    ("org.apache.kafka.connect.transforms.RegexRouter", transforms.RegexRouter),
    ("RegexRouter", transforms.RegexRouter),
    ("org.apache.kafka.connect.transforms.Filter", transforms.Filter),
    ("org.apache.kafka.connect.transforms.HeaderFrom$Value", transforms.HeaderFromValue),
    ("org.apache.kafka.connect.transforms.DropHeaders", transforms.DropHeaders),
    ("org.apache.kafka.connect.transforms.SetSchemaMetadata$Value", transforms.SetSchemaMetadataValue),
])
def test_transformation_names(registry: PluginRegistry, name: str, expected: type) -> None:
    assert registry.transformation_class(name) is expected


@pytest.mark.parametrize(("name", "expected"), [
    ("org.apache.kafka.connect.transforms.predicates.TopicNameMatches", transforms.TopicNameMatches),
    ("org.apache.kafka.connect.transforms.predicates.HasHeaderKey", transforms.HasHeaderKey),
    ("RecordIsTombstone", transforms.RecordIsTombstone),
])
def test_predicate_names(registry: PluginRegistry, name: str, expected: type) -> None:
    assert registry.predicate_class(name) is expected


@pytest.mark.parametrize(("name", "expected"), [
    ("org.apache.kafka.connect.json.JsonConverter", converters.JsonConverter),
    ("org.apache.kafka.connect.storage.StringConverter", converters.StringConverter),
    ("org.apache.kafka.connect.converters.ByteArrayConverter", converters.ByteArrayConverter),
    ("org.apache.kafka.connect.converters.IntegerConverter", converters.IntegerConverter),
    ("org.apache.kafka.connect.converters.DoubleConverter", converters.DoubleConverter),
    ("StringConverter", converters.StringConverter),
    ("io.confluent.connect.avro.AvroConverter", converters.AvroConverter),
])
def test_converter_names(registry: PluginRegistry, name: str, expected: type) -> None:
    assert registry.converter_class(name) is expected


def test_header_converter_names(registry: PluginRegistry) -> None:
    assert registry.header_converter_class("org.apache.kafka.connect.storage.SimpleHeaderConverter") \
        is converters.SimpleHeaderConverter
    assert registry.header_converter_class("org.apache.kafka.connect.json.JsonConverter") is converters.JsonConverter
