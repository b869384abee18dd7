"""Struct: the value of a STRUCT schema (Kafka's ``Struct``), with validated ``put``/``get``."""

from __future__ import annotations

from typing import Any

from strom.connect.data.schema import Field, Schema, Type, _validate
from strom.connect.exceptions import DataException


class Struct:
    """Values of the fields of one STRUCT schema, by field position.

    ``put`` validates each value against its field's schema and returns the struct (fluent, as
    Kafka's); ``get`` returns the field's default when no value was put; ``validate`` checks
    that every required field is set.
    """

    __slots__ = ("_values", "schema")

    def __init__(self, schema: Schema) -> None:
        if schema is None or schema.type is not Type.STRUCT:
            raise DataException("Not a struct schema: " + repr(schema))
        self.schema = schema
        self._values: list[Any] = [None] * len(schema.fields or ())

    def _lookup(self, field: str | Field) -> Field:
        if isinstance(field, Field):
            known = self.schema.field(field.name)
            if known is None or known != field:
                raise DataException(f"Field {field.name!r} is not in this struct's schema")
            return known
        found = self.schema.field(field)
        if found is None:
            raise DataException(f"{field} is not a valid field name")
        return found

    def put(self, field: str | Field, value: Any) -> Struct:
        f = self._lookup(field)
        _validate(f.schema, value, f.name)
        self._values[f.index] = value
        return self

    def get(self, field: str | Field) -> Any:
        f = self._lookup(field)
        value = self._values[f.index]
        if value is None:
            return f.schema.default
        return value

    def get_without_default(self, field: str | Field) -> Any:
        return self._values[self._lookup(field).index]

    def _typed(self, field: str | Field, expected: Type) -> Any:
        f = self._lookup(field)
        if f.schema.type is not expected:
            raise DataException(f"Field '{f.name}' is not of type {expected.name}")
        return self.get(f)

    def get_int8(self, field: str | Field) -> int | None:
        return self._typed(field, Type.INT8)

    def get_int16(self, field: str | Field) -> int | None:
        return self._typed(field, Type.INT16)

    def get_int32(self, field: str | Field) -> int | None:
        return self._typed(field, Type.INT32)

    def get_int64(self, field: str | Field) -> int | None:
        return self._typed(field, Type.INT64)

    def get_float32(self, field: str | Field) -> float | None:
        return self._typed(field, Type.FLOAT32)

    def get_float64(self, field: str | Field) -> float | None:
        return self._typed(field, Type.FLOAT64)

    def get_boolean(self, field: str | Field) -> bool | None:
        return self._typed(field, Type.BOOLEAN)

    def get_string(self, field: str | Field) -> str | None:
        return self._typed(field, Type.STRING)

    def get_bytes(self, field: str | Field) -> bytes | None:
        return self._typed(field, Type.BYTES)

    def get_array(self, field: str | Field) -> list[Any] | None:
        return self._typed(field, Type.ARRAY)

    def get_map(self, field: str | Field) -> dict[Any, Any] | None:
        return self._typed(field, Type.MAP)

    def get_struct(self, field: str | Field) -> Struct | None:
        return self._typed(field, Type.STRUCT)

    def validate(self) -> None:
        """Raise :class:`DataException` if a value is missing for a required field or invalid."""
        for f in self.schema.fields or ():
            _validate(f.schema, self._values[f.index], f.name)

    def to_dict(self) -> dict[str, Any]:
        """Field name -> value (nested structs converted too); for logs and schemaless output."""
        out: dict[str, Any] = {}
        for f in self.schema.fields or ():
            v = self.get(f)
            out[f.name] = v.to_dict() if isinstance(v, Struct) else v
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Struct):
            return NotImplemented
        return self.schema == other.schema and self._values == other._values

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        inner = ",".join(f"{f.name}={self._values[f.index]!r}" for f in self.schema.fields or ())
        return "Struct{" + inner + "}"
