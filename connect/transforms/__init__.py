"""Kafka Connect's built-in single message transformations and predicates.

``PLUGINS`` lists every concrete class the plugin registry offers, each with its Kafka class
name in ``KAFKA_CLASS_NAME`` (``org.apache.kafka.connect.transforms.InsertField$Value``,
``org.apache.kafka.connect.transforms.predicates.TopicNameMatches``...). Transformations with
a key and a value form are two classes (``InsertFieldKey``/``InsertFieldValue``, also reachable
as ``InsertField.Key``/``InsertField.Value``).
"""

from __future__ import annotations

from strom.connect.transforms.cast import Cast, CastKey, CastValue
from strom.connect.transforms.extract_field import ExtractField, ExtractFieldKey, ExtractFieldValue
from strom.connect.transforms.filter import Filter
from strom.connect.transforms.flatten import Flatten, FlattenKey, FlattenValue
from strom.connect.transforms.headers import (
    DropHeaders,
    HeaderFrom,
    HeaderFromKey,
    HeaderFromValue,
    InsertHeader,
)
from strom.connect.transforms.hoist_field import HoistField, HoistFieldKey, HoistFieldValue
from strom.connect.transforms.insert_field import InsertField, InsertFieldKey, InsertFieldValue
from strom.connect.transforms.mask_field import MaskField, MaskFieldKey, MaskFieldValue
from strom.connect.transforms.predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from strom.connect.transforms.regex_router import RegexRouter
from strom.connect.transforms.replace_field import ReplaceField, ReplaceFieldKey, ReplaceFieldValue
from strom.connect.transforms.set_schema_metadata import (
    SetSchemaMetadata,
    SetSchemaMetadataKey,
    SetSchemaMetadataValue,
)
from strom.connect.transforms.timestamp_converter import (
    TimestampConverter,
    TimestampConverterKey,
    TimestampConverterValue,
)
from strom.connect.transforms.timestamp_router import TimestampRouter
from strom.connect.transforms.value_to_key import ValueToKey

PLUGINS: list[type] = [
    InsertFieldKey, InsertFieldValue,
    ReplaceFieldKey, ReplaceFieldValue,
    MaskFieldKey, MaskFieldValue,
    ValueToKey,
    ExtractFieldKey, ExtractFieldValue,
    CastKey, CastValue,
    TimestampConverterKey, TimestampConverterValue,
    RegexRouter,
    TimestampRouter,
    Filter,
    FlattenKey, FlattenValue,
    HoistFieldKey, HoistFieldValue,
    HeaderFromKey, HeaderFromValue,
    InsertHeader,
    DropHeaders,
    SetSchemaMetadataKey, SetSchemaMetadataValue,
    TopicNameMatches,
    HasHeaderKey,
    RecordIsTombstone,
]

__all__ = [
    "PLUGINS",
    "Cast", "CastKey", "CastValue",
    "DropHeaders",
    "ExtractField", "ExtractFieldKey", "ExtractFieldValue",
    "Filter",
    "Flatten", "FlattenKey", "FlattenValue",
    "HasHeaderKey",
    "HeaderFrom", "HeaderFromKey", "HeaderFromValue",
    "HoistField", "HoistFieldKey", "HoistFieldValue",
    "InsertField", "InsertFieldKey", "InsertFieldValue",
    "InsertHeader",
    "MaskField", "MaskFieldKey", "MaskFieldValue",
    "RecordIsTombstone",
    "RegexRouter",
    "ReplaceField", "ReplaceFieldKey", "ReplaceFieldValue",
    "SetSchemaMetadata", "SetSchemaMetadataKey", "SetSchemaMetadataValue",
    "TimestampConverter", "TimestampConverterKey", "TimestampConverterValue",
    "TimestampRouter",
    "TopicNameMatches",
    "ValueToKey",
]
