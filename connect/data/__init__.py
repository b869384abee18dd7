"""Connect's data model: schemas, structs, logical types and value helpers.

Everything is importable from here: ``from strom.connect.data import Schema, SchemaBuilder,
Struct, Field, Type, Decimal, Date, Time, Timestamp, SchemaAndValue, Values``. ``Values`` is
the :mod:`strom.connect.data.values` module, so ``Values.parse_string(s)`` reads like Kafka's
``Values.parseString(s)``.
"""

from __future__ import annotations

from strom.connect.data import values as Values
from strom.connect.data.logical import Date, Decimal, Time, Timestamp
from strom.connect.data.schema import (
    ConnectSchema,
    Field,
    Schema,
    SchemaAndValue,
    SchemaBuilder,
    SchemaBuilderException,
    Type,
    validate_value,
)
from strom.connect.data.struct import Struct

__all__ = [
    "ConnectSchema",
    "Date",
    "Decimal",
    "Field",
    "Schema",
    "SchemaAndValue",
    "SchemaBuilder",
    "SchemaBuilderException",
    "Struct",
    "Time",
    "Timestamp",
    "Type",
    "Values",
    "validate_value",
]
