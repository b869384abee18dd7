"""Connect records and headers: :class:`ConnectRecord`, :class:`SourceRecord`,
:class:`SinkRecord`, :class:`Header`, :class:`Headers` and :class:`TopicPartition`.

Records are frozen dataclasses; transformations derive new ones with
:meth:`ConnectRecord.new_record`, which keeps the subclass and its own fields (source partition
and offset, Kafka offset, original topic...). Headers stay mutable, as in Kafka.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Self, cast

from strom.connect.data.schema import Schema, SchemaAndValue
from strom.connect.data.values import infer_schema


class TopicPartition(NamedTuple):
    """A topic partition (hashable; a dict key in offset maps)."""

    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """Where the producer wrote a source record (given to ``SourceTask.commit_record``)."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class Header:
    """One header: key, schema (``None`` when unknown) and the Connect value."""

    key: str
    schema: Schema | None
    value: Any

    def rename(self, key: str) -> Header:
        return Header(key, self.schema, self.value)

    def with_(self, schema: Schema | None, value: Any) -> Header:
        return Header(self.key, schema, value)


class Headers:
    """An ordered, mutable list of headers; several may share a key (Kafka's ``Headers``)."""

    __slots__ = ("_items",)

    def __init__(self, headers: Iterable[Header] = ()) -> None:
        self._items: list[Header] = list(headers)

    def add(self, key: str | Header, value: Any = None, schema: Schema | None = None) -> Headers:
        """Append ``Header`` objects, ``add(key, SchemaAndValue)`` or ``add(key, value, schema)``.

        With no schema one is inferred from the value where possible.
        """
        if isinstance(key, Header):
            self._items.append(key)
            return self
        if isinstance(value, SchemaAndValue):
            schema, value = value.schema, value.value
        elif schema is None and value is not None:
            schema = infer_schema(value)
        self._items.append(Header(key, schema, value))
        return self

    def add_string(self, key: str, value: str | None) -> Headers:
        return self.add(key, value, Schema.OPTIONAL_STRING_SCHEMA)

    def add_boolean(self, key: str, value: bool | None) -> Headers:
        return self.add(key, value, Schema.OPTIONAL_BOOLEAN_SCHEMA)

    def add_int(self, key: str, value: int | None) -> Headers:
        return self.add(key, value, Schema.OPTIONAL_INT32_SCHEMA)

    def add_long(self, key: str, value: int | None) -> Headers:
        return self.add(key, value, Schema.OPTIONAL_INT64_SCHEMA)

    def add_double(self, key: str, value: float | None) -> Headers:
        return self.add(key, value, Schema.OPTIONAL_FLOAT64_SCHEMA)

    def add_bytes(self, key: str, value: bytes | None) -> Headers:
        return self.add(key, value, Schema.OPTIONAL_BYTES_SCHEMA)

    def add_all(self, headers: Iterable[Header]) -> Headers:
        self._items.extend(headers)
        return self

    def last_with_name(self, key: str) -> Header | None:
        for h in reversed(self._items):
            if h.key == key:
                return h
        return None

    def all_with_name(self, key: str) -> list[Header]:
        return [h for h in self._items if h.key == key]

    def remove(self, key: str) -> Headers:
        self._items = [h for h in self._items if h.key != key]
        return self

    def retain_latest(self, key: str | None = None) -> Headers:
        """Keep only the last header of ``key`` (of every key when ``None``)."""
        seen: set[str] = set()
        kept: list[Header] = []
        for h in reversed(self._items):
            if (key is None or h.key == key) and h.key in seen:
                continue
            seen.add(h.key)
            kept.append(h)
        kept.reverse()
        self._items = kept
        return self

    def clear(self) -> Headers:
        self._items.clear()
        return self

    def duplicate(self) -> Headers:
        return Headers(self._items)

    def __iter__(self) -> Iterator[Header]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def is_empty(self) -> bool:
        return not self._items

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Headers):
            return NotImplemented
        return self._items == other._items

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


def _headers(headers: Headers | Iterable[Header] | None) -> Headers | None:
    # ``None`` stays ``None``: the ``headers`` property creates the Headers on first access, so
    # records that never carry headers (most of them) never allocate one.
    if headers is None or isinstance(headers, Headers):
        return headers
    return Headers(headers)


@dataclass(frozen=True, slots=True, init=False)
class ConnectRecord:
    """A record in Connect form: topic, partition, key/value with schemas, timestamp, headers."""

    topic: str
    kafka_partition: int | None
    key_schema: Schema | None
    key: Any
    value_schema: Schema | None
    value: Any
    timestamp: int | None
    headers: Headers

    def __init__(self, topic: str, kafka_partition: int | None = None, key_schema: Schema | None = None,
                 key: Any = None, value_schema: Schema | None = None, value: Any = None,
                 timestamp: int | None = None, headers: Headers | Iterable[Header] | None = None) -> None:
        _init_base(self, topic, kafka_partition, key_schema, key, value_schema, value, timestamp,
                   _headers(headers))

    def new_record(self, topic: str, kafka_partition: int | None, key_schema: Schema | None, key: Any,
                   value_schema: Schema | None, value: Any, timestamp: int | None,
                   headers: Headers | Iterable[Header] | None = None) -> Self:
        """A copy of this record (same class, same subclass fields) with these base fields.

        Without ``headers`` the copy gets a duplicate of this record's headers.
        """
        if headers is None:
            own = _HEADERS_SLOT.__get__(self)
            hdrs = None if own is None else own.duplicate()  # still lazy when never touched
        else:
            hdrs = _headers(headers)
        cls = type(self)
        extra = _EXTRA_SLOTS.get(cls)
        if extra is None:
            extra = _extra_slots(cls)
        if extra is _SLOW:
            # A subclass that is not a plain slotted dataclass: go through its __init__.
            return dataclasses.replace(
                self, topic=topic, kafka_partition=kafka_partition, key_schema=key_schema, key=key,
                value_schema=value_schema, value=value, timestamp=timestamp,
                headers=cast(Headers, hdrs))  # None is accepted: the headers stay lazy
        new = object.__new__(cls)
        _init_base(new, topic, kafka_partition, key_schema, key, value_schema, value, timestamp, hdrs)
        for slot in extra:
            slot.__set__(new, slot.__get__(self))
        return new


# Records are built for every record that flows, so construction avoids object.__setattr__ (a
# frozen dataclass's way, ~3x slower) and sets the slots through their member descriptors.
_SET_TOPIC = ConnectRecord.__dict__["topic"].__set__
_SET_PARTITION = ConnectRecord.__dict__["kafka_partition"].__set__
_SET_KEY_SCHEMA = ConnectRecord.__dict__["key_schema"].__set__
_SET_KEY = ConnectRecord.__dict__["key"].__set__
_SET_VALUE_SCHEMA = ConnectRecord.__dict__["value_schema"].__set__
_SET_VALUE = ConnectRecord.__dict__["value"].__set__
_SET_TIMESTAMP = ConnectRecord.__dict__["timestamp"].__set__
_HEADERS_SLOT = ConnectRecord.__dict__["headers"]
_SET_HEADERS = _HEADERS_SLOT.__set__
_GET_HEADERS = _HEADERS_SLOT.__get__


def _lazy_headers(rec: ConnectRecord) -> Headers:
    headers = _GET_HEADERS(rec)
    if headers is None:
        headers = Headers()
        _SET_HEADERS(rec, headers)
    return headers


def _assign_headers(rec: ConnectRecord, headers: Headers | Iterable[Header] | None) -> None:
    # Only for the dataclass' own machinery (``__setstate__`` of copy/pickle): records stay frozen.
    _SET_HEADERS(rec, _headers(headers))


# ``headers`` is a property over the slot: the slot holds ``None`` until the headers are first
# read (Headers are mutable, so an empty one must exist once anybody looks). The dataclass keeps
# ``headers`` as a field; equality, repr and ``dataclasses.replace`` read it through the property.
setattr(ConnectRecord, "headers", property(_lazy_headers, _assign_headers,  # noqa: B010 - past mypy's slot check
                                           doc="The record's headers (created empty on first access)."))


def peek_headers(record: ConnectRecord) -> Headers | None:
    """The record's headers, or ``None`` when none were ever given or read (no allocation).

    For the runtime's per-record paths: ``record.headers`` would create an empty Headers.
    """
    return _GET_HEADERS(record)

_BASE_FIELDS = frozenset(("topic", "kafka_partition", "key_schema", "key", "value_schema", "value",
                          "timestamp", "headers"))
_SLOW: tuple[Any, ...] = ()
_EXTRA_SLOTS: dict[type, tuple[Any, ...]] = {}


def _init_base(rec: ConnectRecord, topic: str, kafka_partition: int | None, key_schema: Schema | None,
               key: Any, value_schema: Schema | None, value: Any, timestamp: int | None,
               headers: Headers | None) -> None:
    _SET_TOPIC(rec, topic)
    _SET_PARTITION(rec, kafka_partition)
    _SET_KEY_SCHEMA(rec, key_schema)
    _SET_KEY(rec, key)
    _SET_VALUE_SCHEMA(rec, value_schema)
    _SET_VALUE(rec, value)
    _SET_TIMESTAMP(rec, timestamp)
    _SET_HEADERS(rec, headers)


def _extra_slots(cls: type) -> tuple[Any, ...]:
    """Member descriptors of a record class's own (non-base) fields, or ``_SLOW`` when the class
    keeps state outside dataclass slots (then ``new_record`` calls its ``__init__``)."""
    slots: list[Any] = []
    # Instances without a __dict__ (__dictoffset__ 0) keep all their state in slots.
    ok = dataclasses.is_dataclass(cls) and cls.__dictoffset__ == 0
    if ok:
        for f in dataclasses.fields(cls):
            if f.name in _BASE_FIELDS:
                continue
            descriptor = inspect.getattr_static(cls, f.name, None)
            if not hasattr(descriptor, "__set__") or not hasattr(descriptor, "__get__"):
                ok = False
                break
            slots.append(descriptor)
    result = tuple(slots) if ok else _SLOW
    _EXTRA_SLOTS[cls] = result
    return result


@dataclass(frozen=True, slots=True, init=False)
class SourceRecord(ConnectRecord):
    """A record produced by a source task, with the source partition and offset it came from.

    Argument order is Kafka's: ``SourceRecord(source_partition, source_offset, topic,
    kafka_partition, key_schema, key, value_schema, value, timestamp, headers)``.
    """

    source_partition: Mapping[str, Any] | None
    source_offset: Mapping[str, Any] | None

    def __init__(self, source_partition: Mapping[str, Any] | None, source_offset: Mapping[str, Any] | None,
                 topic: str, kafka_partition: int | None = None, key_schema: Schema | None = None,
                 key: Any = None, value_schema: Schema | None = None, value: Any = None,
                 timestamp: int | None = None, headers: Headers | Iterable[Header] | None = None) -> None:
        # Built once per record that flows: the slot setters are called inline (no helper calls).
        if headers is not None and not isinstance(headers, Headers):
            headers = Headers(headers)
        _SET_TOPIC(self, topic)
        _SET_PARTITION(self, kafka_partition)
        _SET_KEY_SCHEMA(self, key_schema)
        _SET_KEY(self, key)
        _SET_VALUE_SCHEMA(self, value_schema)
        _SET_VALUE(self, value)
        _SET_TIMESTAMP(self, timestamp)
        _SET_HEADERS(self, headers)
        _SET_SOURCE_PARTITION(self, source_partition)
        _SET_SOURCE_OFFSET(self, source_offset)


_SET_SOURCE_PARTITION = SourceRecord.__dict__["source_partition"].__set__
_SET_SOURCE_OFFSET = SourceRecord.__dict__["source_offset"].__set__


@dataclass(frozen=True, slots=True, init=False)
class SinkRecord(ConnectRecord):
    """A record consumed for a sink task, with its Kafka offset and timestamp type.

    ``original_topic``/``original_kafka_partition``/``original_kafka_offset`` keep where the
    record was consumed from even after transformations change topic or partition (KIP-793).
    Argument order is Kafka's: ``SinkRecord(topic, partition, key_schema, key, value_schema,
    value, kafka_offset, timestamp, timestamp_type, headers, original_topic, ...)``.
    """

    kafka_offset: int
    timestamp_type: str
    original_topic: str
    original_kafka_partition: int | None
    original_kafka_offset: int

    def __init__(self, topic: str, kafka_partition: int | None = None, key_schema: Schema | None = None,
                 key: Any = None, value_schema: Schema | None = None, value: Any = None,
                 kafka_offset: int = -1, timestamp: int | None = None,
                 timestamp_type: str = "NoTimestampType",
                 headers: Headers | Iterable[Header] | None = None, original_topic: str | None = None,
                 original_kafka_partition: int | None = None,
                 original_kafka_offset: int | None = None) -> None:
        # Built once per record that flows: the slot setters are called inline (no helper calls).
        if headers is not None and not isinstance(headers, Headers):
            headers = Headers(headers)
        _SET_TOPIC(self, topic)
        _SET_PARTITION(self, kafka_partition)
        _SET_KEY_SCHEMA(self, key_schema)
        _SET_KEY(self, key)
        _SET_VALUE_SCHEMA(self, value_schema)
        _SET_VALUE(self, value)
        _SET_TIMESTAMP(self, timestamp)
        _SET_HEADERS(self, headers)
        _SET_KAFKA_OFFSET(self, kafka_offset)
        _SET_TIMESTAMP_TYPE(self, timestamp_type)
        _SET_ORIGINAL_TOPIC(self, topic if original_topic is None else original_topic)
        _SET_ORIGINAL_PARTITION(self, kafka_partition if original_kafka_partition is None
                                else original_kafka_partition)
        _SET_ORIGINAL_OFFSET(self, kafka_offset if original_kafka_offset is None else original_kafka_offset)


_SET_KAFKA_OFFSET = SinkRecord.__dict__["kafka_offset"].__set__
_SET_TIMESTAMP_TYPE = SinkRecord.__dict__["timestamp_type"].__set__
_SET_ORIGINAL_TOPIC = SinkRecord.__dict__["original_topic"].__set__
_SET_ORIGINAL_PARTITION = SinkRecord.__dict__["original_kafka_partition"].__set__
_SET_ORIGINAL_OFFSET = SinkRecord.__dict__["original_kafka_offset"].__set__


# Timestamp types as Kafka's TimestampType names them.
NO_TIMESTAMP_TYPE = "NoTimestampType"
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"

__all__ = [
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "NO_TIMESTAMP_TYPE",
    "ConnectRecord",
    "Header",
    "Headers",
    "RecordMetadata",
    "SinkRecord",
    "SourceRecord",
    "TopicPartition",
    "peek_headers",
]
