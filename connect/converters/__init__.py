"""Kafka Connect's built-in converters and header converter.

``PLUGINS`` lists the classes the plugin registry offers: ``ByteArrayConverter``,
``StringConverter``, ``JsonConverter``, the number converters, ``SimpleHeaderConverter`` and
Confluent's ``AvroConverter`` (Schema Registry wire format), each with its Kafka class name in
``KAFKA_CLASS_NAME``.
"""

from __future__ import annotations

from strom.connect.converters.avro import AvroConverter
from strom.connect.converters.header import SimpleHeaderConverter
from strom.connect.converters.json_converter import JsonConverter
from strom.connect.converters.simple import (
    ByteArrayConverter,
    DoubleConverter,
    FloatConverter,
    IntegerConverter,
    LongConverter,
    ShortConverter,
    StringConverter,
)

PLUGINS: list[type] = [
    ByteArrayConverter,
    StringConverter,
    JsonConverter,
    ShortConverter,
    IntegerConverter,
    LongConverter,
    FloatConverter,
    DoubleConverter,
    SimpleHeaderConverter,
    AvroConverter,
]

__all__ = [
    "PLUGINS",
    "AvroConverter",
    "ByteArrayConverter",
    "DoubleConverter",
    "FloatConverter",
    "IntegerConverter",
    "JsonConverter",
    "LongConverter",
    "ShortConverter",
    "SimpleHeaderConverter",
    "StringConverter",
]
