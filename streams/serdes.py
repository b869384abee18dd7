"""Serdes: pairs of serializer and deserializer, with Kafka Streams' built-in wire formats.

A :class:`Serde` turns values into record bytes and back. ``None`` always maps to ``None``
both ways, so tombstones pass through every serde untouched. The numeric serdes produce the
exact bytes of Kafka's ``IntegerSerializer``/``LongSerializer``/``DoubleSerializer`` (big-endian
two's complement, IEEE 754), so data written by Java applications reads back unchanged.
Every failure raises :class:`SerializationError` naming the topic and the Python type.
"""

from __future__ import annotations

import builtins
import importlib
import io
import json as _json
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from strom.streams.exceptions import SerializationError

T = TypeVar("T")

Headers = Any  # record headers are opaque to the built-in serdes; user serdes may read them

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_DOUBLE = struct.Struct(">d")

# orjson is several times faster than json; it is optional. Imported by name so that the type
# checker reads this the same way whether or not orjson is installed.
_orjson: Any
try:
    _orjson = importlib.import_module("orjson")
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None


class Serde(ABC, Generic[T]):
    """A serializer and a deserializer for one value type.

    Subclasses override :meth:`_serialize` / :meth:`_deserialize`; the public methods add the
    ``None`` pass-through and turn any failure into a :class:`SerializationError`.
    """

    name: str = "serde"

    def serialize(self, topic: str, value: T | None, headers: Headers = None) -> bytes | None:
        if value is None:
            return None
        try:
            return self._serialize(topic, value, headers)
        except SerializationError:
            raise
        except Exception as exc:
            raise SerializationError(
                f"{self.name} serde cannot serialize a value of type "
                f"{type(value).__name__} for topic {topic!r}: {exc}"
            ) from exc

    def deserialize(self, topic: str, data: bytes | None, headers: Headers = None) -> T | None:
        if data is None:
            return None
        try:
            return self._deserialize(topic, data, headers)
        except SerializationError:
            raise
        except Exception as exc:
            raise SerializationError(
                f"{self.name} serde cannot deserialize {len(data)} bytes "
                f"(type {type(data).__name__}) from topic {topic!r}: {exc}"
            ) from exc

    def serialize_batch(self, topic: str, values: list[T | None]) -> list[bytes | None]:
        """``serialize`` of each value (no headers); the built-in serdes override it with one
        comprehension. May raise on the first bad value without naming it as ``serialize``
        would: callers redo a failed batch value by value."""
        ser = self.serialize
        return [ser(topic, v) for v in values]

    def deserialize_batch(self, topic: str, data: list[bytes | None]) -> list[T | None]:
        """``deserialize`` of each element, as :meth:`serialize_batch` the other way."""
        de = self.deserialize
        return [de(topic, d) for d in data]

    @abstractmethod
    def _serialize(self, topic: str, value: T, headers: Headers) -> bytes:
        raise NotImplementedError

    @abstractmethod
    def _deserialize(self, topic: str, data: bytes, headers: Headers) -> T:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"Serdes.{self.name}()"


def _require(value: object, types: type | tuple[type, ...], serde: str, topic: str) -> None:
    # explicit check: struct.pack would accept e.g. bool for int, and bytes() accepts ints
    if not isinstance(value, types) or (isinstance(value, bool) and types is int):
        raise SerializationError(
            f"{serde} serde cannot serialize a value of type {type(value).__name__} "
            f"for topic {topic!r}"
        )


class _BytesSerde(Serde[bytes]):
    name = "bytes"

    def _serialize(self, topic: str, value: bytes, headers: Headers) -> bytes:
        _require(value, (bytes, bytearray, memoryview), self.name, topic)
        return bytes(value)

    def _deserialize(self, topic: str, data: bytes, headers: Headers) -> bytes:
        return bytes(data)

    def serialize_batch(self, topic: str, values: list[bytes | None]) -> list[bytes | None]:
        ser = self.serialize
        return [v if v.__class__ is bytes else ser(topic, v) for v in values]

    def deserialize_batch(self, topic: str, data: list[bytes | None]) -> list[bytes | None]:
        de = self.deserialize
        return [d if d.__class__ is bytes else de(topic, d) for d in data]


class _StringSerde(Serde[str]):
    name = "string"

    def _serialize(self, topic: str, value: str, headers: Headers) -> bytes:
        _require(value, str, self.name, topic)
        return value.encode("utf-8")

    def _deserialize(self, topic: str, data: bytes, headers: Headers) -> str:
        return bytes(data).decode("utf-8")

    def serialize_batch(self, topic: str, values: list[str | None]) -> list[bytes | None]:
        ser = self.serialize
        return [v.encode() if v.__class__ is str else ser(topic, v) for v in values]  # UTF-8

    def deserialize_batch(self, topic: str, data: list[bytes | None]) -> list[str | None]:
        de = self.deserialize
        return [d.decode() if d.__class__ is bytes else de(topic, d) for d in data]  # UTF-8, strict


class _FixedSerde(Serde[Any]):
    """int32 / int64 / float64 in big-endian, the size checked on read as Kafka does."""

    def __init__(self, name: str, codec: struct.Struct, types: type | tuple[type, ...]) -> None:
        self.name = name
        self._codec = codec
        self._types = types

    def _serialize(self, topic: str, value: Any, headers: Headers) -> bytes:
        _require(value, self._types, self.name, topic)
        return self._codec.pack(value)

    def _deserialize(self, topic: str, data: bytes, headers: Headers) -> Any:
        if len(data) != self._codec.size:
            raise SerializationError(
                f"{self.name} serde: size of data from topic {topic!r} is {len(data)} "
                f"bytes, expected {self._codec.size}"
            )
        return self._codec.unpack(data)[0]

    def serialize_batch(self, topic: str, values: list[Any]) -> list[bytes | None]:
        # int32/int64: exactly int (bool is refused by serialize); struct.error out of range
        ser, pack = self.serialize, self._codec.pack
        return [pack(v) if v.__class__ is int else ser(topic, v) for v in values]

    def deserialize_batch(self, topic: str, data: list[bytes | None]) -> list[Any]:
        # unpack refuses any other size (struct.error), as _deserialize does
        de, unpack = self.deserialize, self._codec.unpack
        return [unpack(d)[0] if d.__class__ is bytes else de(topic, d) for d in data]


class _DoubleSerde(_FixedSerde):
    def _serialize(self, topic: str, value: Any, headers: Headers) -> bytes:
        _require(value, (float, int), self.name, topic)
        return self._codec.pack(float(value))

    def serialize_batch(self, topic: str, values: list[Any]) -> list[bytes | None]:
        ser, pack = self.serialize, self._codec.pack
        return [pack(v) if v.__class__ is float else ser(topic, v) for v in values]


class _JsonSerde(Serde[Any]):
    name = "json"

    def _serialize(self, topic: str, value: Any, headers: Headers) -> bytes:
        if _orjson is not None:
            return bytes(_orjson.dumps(value))
        return _json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def _deserialize(self, topic: str, data: bytes, headers: Headers) -> Any:
        if _orjson is not None:
            return _orjson.loads(data)
        return _json.loads(bytes(data).decode("utf-8"))


class _AvroSerde(Serde[Any]):
    """Schemaless Avro (no container header, no schema registry framing)."""

    name = "avro"

    def __init__(self, schema: Mapping[str, Any] | str | list[Any]) -> None:
        import fastavro  # imported lazily: most applications never use Avro

        raw: Any = _json.loads(schema) if isinstance(schema, str) else schema
        self._fastavro = fastavro
        self.schema = fastavro.parse_schema(raw)

    def _serialize(self, topic: str, value: Any, headers: Headers) -> bytes:
        buf = io.BytesIO()
        self._fastavro.schemaless_writer(buf, self.schema, value)
        return buf.getvalue()

    def _deserialize(self, topic: str, data: bytes, headers: Headers) -> Any:
        buf = io.BytesIO(data)
        value = self._fastavro.schemaless_reader(buf, self.schema, None)
        if buf.tell() != len(data):  # trailing garbage means the schema does not match
            raise SerializationError(
                f"avro serde: {len(data) - buf.tell()} trailing bytes in data from topic {topic!r}"
            )
        return value


class _VoidSerde(Serde[None]):
    """Kafka's VoidSerde: only ``None`` is accepted; any bytes on read are an error."""

    name = "void"

    def _serialize(self, topic: str, value: None, headers: Headers) -> bytes:
        raise SerializationError(
            f"void serde cannot serialize a value of type {type(value).__name__} "
            f"for topic {topic!r}: only None is allowed"
        )

    def _deserialize(self, topic: str, data: bytes, headers: Headers) -> None:
        raise SerializationError(
            f"void serde: data from topic {topic!r} must be null, got {len(data)} bytes"
        )


class _FunctionSerde(Serde[T]):
    def __init__(
        self,
        serialize_fn: Callable[[T], bytes],
        deserialize_fn: Callable[[bytes], T],
        name: str,
    ) -> None:
        self._ser = serialize_fn
        self._de = deserialize_fn
        self.name = name

    def _serialize(self, topic: str, value: T, headers: Headers) -> bytes:
        out = self._ser(value)
        if not isinstance(out, (bytes, bytearray)):
            raise SerializationError(
                f"{self.name} serde: serializer returned {type(out).__name__}, not bytes, "
                f"for a value of type {type(value).__name__} for topic {topic!r}"
            )
        return bytes(out)

    def _deserialize(self, topic: str, data: bytes, headers: Headers) -> T:
        return self._de(data)


_BYTES = _BytesSerde()
_STRING = _StringSerde()
_INTEGER = _FixedSerde("integer", _INT, int)
_LONG_SERDE = _FixedSerde("long", _LONG, int)
_DOUBLE_SERDE = _DoubleSerde("double", _DOUBLE, float)
_JSON = _JsonSerde()
_VOID = _VoidSerde()


class Serdes:
    """Factories of the built-in serdes (Kafka Streams' ``Serdes`` in snake_case)."""

    @staticmethod
    def bytes() -> Serde[builtins.bytes]:
        return _BYTES

    @staticmethod
    def string() -> Serde[str]:
        return _STRING

    @staticmethod
    def integer() -> Serde[int]:
        return _INTEGER

    @staticmethod
    def long() -> Serde[int]:
        return _LONG_SERDE

    @staticmethod
    def double() -> Serde[float]:
        return _DOUBLE_SERDE

    @staticmethod
    def json() -> Serde[Any]:
        return _JSON

    @staticmethod
    def avro(schema: Mapping[str, Any] | str | list[Any]) -> Serde[Any]:
        return _AvroSerde(schema)

    @staticmethod
    def void() -> Serde[None]:
        return _VOID

    @staticmethod
    def from_functions(
        serialize_fn: Callable[[Any], builtins.bytes],
        deserialize_fn: Callable[[builtins.bytes], Any],
        name: str = "custom",
    ) -> Serde[Any]:
        return _FunctionSerde(serialize_fn, deserialize_fn, name)
