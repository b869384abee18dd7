"""Kafka Connect's logical types: Decimal, Date, Time and Timestamp.

Each has Kafka's schema name (``org.apache.kafka.connect.data.*``), a ``builder()``/``schema()``
and ``from_logical(schema, value)`` / ``to_logical(schema, encoded)`` converting between the
Python value and the encoded one:

- ``Decimal``: BYTES, the unscaled value as big-endian two's complement (Java's
  ``BigInteger.toByteArray``), parameter ``scale``; Python ``decimal.Decimal``.
- ``Date``: INT32 days since the Unix epoch; Python ``datetime.date``.
- ``Time``: INT32 milliseconds since midnight; Python ``datetime.time``.
- ``Timestamp``: INT64 milliseconds since the Unix epoch; Python ``datetime.datetime`` (UTC;
  a naive datetime is taken as UTC).
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
from typing import ClassVar, Generic, TypeVar

from strom.connect.data.schema import (
    DATE_LOGICAL_NAME,
    DECIMAL_LOGICAL_NAME,
    TIME_LOGICAL_NAME,
    TIMESTAMP_LOGICAL_NAME,
    Schema,
    SchemaBuilder,
    Type,
)
from strom.connect.exceptions import DataException

EPOCH_DATE = _dt.date(1970, 1, 1)
EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
MILLIS_PER_DAY = 86_400_000

_L = TypeVar("_L")  # a temporal type's Python value: date, time or datetime


def _check(schema: Schema, name: str, what: str) -> None:
    if schema is None or schema.name != name:
        raise DataException(f"Requested conversion of {what} object but the schema does not match.")


def _ms(value: _dt.datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.UTC)
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


class Decimal:
    """Arbitrary-precision decimal with a fixed ``scale`` (schema parameter ``scale``)."""

    LOGICAL_NAME = DECIMAL_LOGICAL_NAME
    SCALE_FIELD = "scale"

    @staticmethod
    def builder(scale: int) -> SchemaBuilder:
        return SchemaBuilder.bytes_().name(DECIMAL_LOGICAL_NAME).parameter("scale", str(scale)).version(1)

    @staticmethod
    def schema(scale: int) -> Schema:
        return Decimal.builder(scale).build()

    @staticmethod
    def scale(schema: Schema) -> int:
        raw = (schema.parameters or {}).get("scale")
        if raw is None:
            raise DataException("Invalid Decimal schema: scale parameter not found.")
        try:
            return int(raw)
        except ValueError as e:
            raise DataException(f"Invalid scale parameter found in Decimal schema: {raw}") from e

    @staticmethod
    def from_logical(schema: Schema, value: _decimal.Decimal) -> bytes:
        _check(schema, DECIMAL_LOGICAL_NAME, "Decimal")
        scale = Decimal.scale(schema)
        sign, digits, exponent = value.as_tuple()
        if not isinstance(exponent, int):
            raise DataException(f"Cannot encode a non-finite decimal: {value}")
        unscaled = int("".join(map(str, digits)) or "0")
        shift = exponent + scale  # digits * 10**exponent == unscaled' * 10**-scale
        if shift >= 0:
            unscaled *= 10 ** shift
        else:
            unscaled, rest = divmod(unscaled, 10 ** -shift)
            if rest:
                raise DataException(f"Decimal value {value} has more digits than scale {scale}")
        if sign:
            unscaled = -unscaled
        length = (unscaled + (unscaled < 0)).bit_length() // 8 + 1  # as BigInteger.toByteArray
        return unscaled.to_bytes(length, "big", signed=True)

    @staticmethod
    def to_logical(schema: Schema, value: bytes) -> _decimal.Decimal:
        _check(schema, DECIMAL_LOGICAL_NAME, "Decimal")
        unscaled = int.from_bytes(value, "big", signed=True)
        scale = Decimal.scale(schema)
        digits = tuple(int(c) for c in str(abs(unscaled)))
        return _decimal.Decimal((1 if unscaled < 0 else 0, digits, -scale))


class _Temporal(Generic[_L]):
    """Date, Time and Timestamp: a version-1 schema of one integer type under Kafka's logical name,
    and conversions that first check the schema given is that one, as Kafka's do."""

    LOGICAL_NAME: ClassVar[str]
    ENCODED_TYPE: ClassVar[Type]
    SCHEMA: ClassVar[Schema]

    @classmethod
    def builder(cls) -> SchemaBuilder:
        return SchemaBuilder(cls.ENCODED_TYPE).name(cls.LOGICAL_NAME).version(1)

    @classmethod
    def from_logical(cls, schema: Schema, value: _L) -> int:
        _check(schema, cls.LOGICAL_NAME, cls.__name__)
        return cls._encode(value)

    @classmethod
    def to_logical(cls, schema: Schema, value: int) -> _L:
        _check(schema, cls.LOGICAL_NAME, cls.__name__)
        return cls._decode(value)

    @classmethod
    def _encode(cls, value: _L) -> int:
        raise NotImplementedError

    @classmethod
    def _decode(cls, value: int) -> _L:
        raise NotImplementedError


class Date(_Temporal[_dt.date]):
    """A calendar date, days since the epoch in an INT32."""

    LOGICAL_NAME = DATE_LOGICAL_NAME
    ENCODED_TYPE = Type.INT32

    @classmethod
    def _encode(cls, value: _dt.date) -> int:
        if isinstance(value, _dt.datetime):
            if (value.hour, value.minute, value.second, value.microsecond) != (0, 0, 0, 0):
                raise DataException("Kafka Connect Date type should not have any time fields set to non-zero values.")
            value = value.date()
        return (value - EPOCH_DATE).days

    @classmethod
    def _decode(cls, value: int) -> _dt.date:
        return EPOCH_DATE + _dt.timedelta(days=value)


class Time(_Temporal[_dt.time]):
    """A time of day, milliseconds since midnight in an INT32."""

    LOGICAL_NAME = TIME_LOGICAL_NAME
    ENCODED_TYPE = Type.INT32

    @classmethod
    def _encode(cls, value: _dt.time) -> int:
        if isinstance(value, _dt.datetime):
            if value.date() != EPOCH_DATE:
                raise DataException("Kafka Connect Time type should not have any date fields set to non-zero values.")
            value = value.time()
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000

    @classmethod
    def _decode(cls, value: int) -> _dt.time:
        if not 0 <= value < MILLIS_PER_DAY:
            raise DataException("Time values must use number of milliseconds greater than 0 and less than 86400000")
        seconds, ms = divmod(value, 1000)
        return _dt.time(seconds // 3600, seconds // 60 % 60, seconds % 60, ms * 1000)


class Timestamp(_Temporal[_dt.datetime]):
    """An instant, milliseconds since the epoch in an INT64."""

    LOGICAL_NAME = TIMESTAMP_LOGICAL_NAME
    ENCODED_TYPE = Type.INT64

    @classmethod
    def _encode(cls, value: _dt.datetime) -> int:
        return _ms(value)

    @classmethod
    def _decode(cls, value: int) -> _dt.datetime:
        return EPOCH + _dt.timedelta(milliseconds=value)


Date.SCHEMA = Date.builder().build()
Time.SCHEMA = Time.builder().build()
Timestamp.SCHEMA = Timestamp.builder().build()

LOGICAL_TYPES: dict[str, type[Decimal] | type[Date] | type[Time] | type[Timestamp]] = {
    DECIMAL_LOGICAL_NAME: Decimal, DATE_LOGICAL_NAME: Date, TIME_LOGICAL_NAME: Time,
    TIMESTAMP_LOGICAL_NAME: Timestamp,
}

__all__ = ["EPOCH", "LOGICAL_TYPES", "Date", "Decimal", "Time", "Timestamp", "Type"]
