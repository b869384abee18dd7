"""Typed facades over byte-level state stores, and the serde adapters used by the runtime.

State stores (strom.streams.state) keep bytes; processors see keys and values. A facade
serializes on the way in and deserializes on the way out with the store's serdes, so the
byte store stays the single source of truth (and what a changelog would carry).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator
from typing import Any

from strom.streams.exceptions import SerializationError, StreamsError
from strom.streams.state import keys as K
from strom.streams.state.api import Windowed as BytesWindowed

_DOUBLE = struct.Struct(">d")
_TS = struct.Struct(">q")

Serializer = Callable[[str, Any], bytes | None]
Deserializer = Callable[[str, bytes | None], Any]


def _identity_ser(topic: str, obj: Any) -> bytes | None:
    if obj is None or isinstance(obj, bytes):
        return obj
    if isinstance(obj, bytearray | memoryview):
        return bytes(obj)
    raise SerializationError(f"no serde for topic {topic!r}: cannot write a {type(obj).__name__} as bytes")


def _identity_de(topic: str, data: bytes | None) -> Any:
    return data


def serializer_of(serde: Any) -> Serializer:
    """The ``(topic, obj) -> bytes`` function of a serde; None means bytes pass through."""
    if serde is None:
        return _identity_ser
    fn = getattr(serde, "serialize", None)
    if fn is None:
        raise SerializationError(f"{serde!r} is not a serde (no serialize method)")
    return fn


def deserializer_of(serde: Any) -> Deserializer:
    """The ``(topic, bytes) -> obj`` function of a serde; None means bytes pass through."""
    if serde is None:
        return _identity_de
    fn = getattr(serde, "deserialize", None)
    if fn is None:
        raise SerializationError(f"{serde!r} is not a serde (no deserialize method)")
    return fn


BatchSerializer = Callable[[str, list[Any]], list[bytes | None]]
BatchDeserializer = Callable[[str, list[bytes | None]], list[Any]]


def _identity_de_batch(topic: str, data: list[bytes | None]) -> list[Any]:
    return data


def batch_serializer_of(serde: Any) -> BatchSerializer:
    """``(topic, [obj]) -> [bytes]``: the serde's ``serialize_batch`` (the built-in serdes' fast
    path), else its ``serialize`` per element. Raises on the first value that does not serialize;
    the caller goes record by record then, so the per-record serializer names it."""
    fast = getattr(serde, "serialize_batch", None)
    if callable(fast):
        return fast
    ser = serializer_of(serde)
    return lambda topic, objs: [ser(topic, o) for o in objs]


def batch_deserializer_of(serde: Any) -> BatchDeserializer:
    """``(topic, [bytes]) -> [obj]``, as :func:`batch_serializer_of` the other way."""
    if serde is None:
        return _identity_de_batch
    fast = getattr(serde, "deserialize_batch", None)
    if callable(fast):
        return fast
    de = deserializer_of(serde)
    return lambda topic, data: [de(topic, d) for d in data]


class KeyValueStoreFacade:
    """Typed key-value access to a byte store (Kafka's MeteredKeyValueStore, minus metrics)."""

    __slots__ = ("_kde", "_kser", "_topic", "_vde", "_vser", "inner", "name")

    def __init__(self, name: str, inner: Any, key_serde: Any, value_serde: Any,
                 topic: str | None = None) -> None:
        self.name = name
        self.inner = inner
        # serdes get a topic name; Kafka passes the changelog topic for store serdes
        self._topic = topic or f"{name}-changelog"
        self._kser = serializer_of(key_serde)
        self._kde = deserializer_of(key_serde)
        self._vser = serializer_of(value_serde)
        self._vde = deserializer_of(value_serde)

    def get(self, key: Any) -> Any:
        data = self.inner.get(self._kser(self._topic, key))
        return None if data is None else self._vde(self._topic, data)

    def put(self, key: Any, value: Any) -> None:
        kb = self._kser(self._topic, key)
        if kb is None:
            raise SerializationError(f"store {self.name!r}: key must not be None")
        if value is None:
            self.inner.delete(kb)
        else:
            self.inner.put(kb, self._vser(self._topic, value))

    def put_if_absent(self, key: Any, value: Any) -> Any:
        old = self.get(key)
        if old is None:
            self.put(key, value)
        return old

    def delete(self, key: Any) -> Any:
        old = self.get(key)
        self.inner.delete(self._kser(self._topic, key))
        return old

    def _decode(self, it: Any) -> Iterator[tuple[Any, Any]]:
        kde, vde, topic = self._kde, self._vde, self._topic
        for kb, vb in it:
            yield kde(topic, kb), vde(topic, vb)

    def all(self) -> Iterator[tuple[Any, Any]]:
        """Every entry in key-byte order."""
        return self._decode(self.inner.all())

    def range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        """Entries with serialized keys in [from, to], in key-byte order."""
        return self._decode(self.inner.range(self._kser(self._topic, from_key), self._kser(self._topic, to_key)))

    def approximate_num_entries(self) -> int:
        return int(self.inner.approximate_num_entries())


class CachedKeyValueStoreFacade:
    """Kafka Streams' record cache in front of an aggregation's key-value store.

    An aggregation updates a key many times between two commits; with the cache, the store
    write, its changelog record and the downstream update happen once per key per commit
    (``flush``) instead of once per input record, as Kafka's ``CachingKeyValueStore`` does
    under ``statestore.cache.max.bytes``. Reads (the aggregation itself, joins on the table,
    interactive queries) see the cached value. When more than ``max_entries`` keys are dirty the
    whole cache is flushed early. Not thread-safe: the owning stream thread's lock covers it.
    """

    __slots__ = ("_dirty", "_kser", "_listener", "_topic", "inner", "max_entries", "name")

    def __new__(cls, inner: Any, max_entries: int, listener: Callable[[Any, Any, Any, int, Any], None]
                ) -> CachedKeyValueStoreFacade:
        # the runtime builds every record cache with this class (TopologyRuntime.caching_store);
        # a facade over a byte window store gets the window cache (a subclass) instead
        if cls is CachedKeyValueStoreFacade and is_window_bytes(getattr(inner, "inner", None)):
            cls = CachedWindowStoreFacade
        return object.__new__(cls)

    def __init__(self, inner: KeyValueStoreFacade | CachedKeyValueStoreFacade, max_entries: int,
                 listener: Callable[[Any, Any, Any, int, Any], None]) -> None:
        self.inner = inner
        self.name: str = inner.name
        # readers that order several stores by key bytes use these
        self._kser: Serializer = inner._kser
        self._topic: str = inner._topic
        self.max_entries = max_entries
        #: key -> [new value, value at the last flush, timestamp, headers]
        self._dirty: dict[Any, list[Any]] = {}
        self._listener = listener

    def get(self, key: Any) -> Any:
        entry = self._dirty.get(key)
        return self.inner.get(key) if entry is None else entry[0]

    def put_cached(self, key: Any, new: Any, old: Any, timestamp: int, headers: Any) -> None:
        """Record an update; ``old`` is the value ``get`` returned before it."""
        entry = self._dirty.get(key)
        if entry is None:
            self._dirty[key] = [new, old, timestamp, headers]
            if len(self._dirty) > self.max_entries:
                self.flush()
        else:
            entry[0] = new
            entry[2] = timestamp
            entry[3] = headers

    def flush(self) -> None:
        """Write every dirty key to the store and hand ``(key, new, old, ts, headers)`` on."""
        dirty, self._dirty = self._dirty, {}
        put, listener = self.inner.put, self._listener
        for key, (new, old, ts, headers) in dirty.items():
            put(key, new)
            listener(key, new, old, ts, headers)

    def _flush_key(self, key: Any) -> None:
        entry = self._dirty.pop(key, None)
        if entry is not None:
            self.inner.put(key, entry[0])
            self._listener(key, entry[0], entry[1], entry[2], entry[3])

    def put(self, key: Any, value: Any) -> None:
        self._flush_key(key)
        self.inner.put(key, value)

    def put_if_absent(self, key: Any, value: Any) -> Any:
        old = self.get(key)
        if old is None:
            self.put(key, value)
        return old

    def delete(self, key: Any) -> Any:
        self._flush_key(key)
        return self.inner.delete(key)

    def _merged(self, items: Iterator[tuple[Any, Any]], lo: bytes | None, hi: bytes | None
                ) -> Iterator[tuple[Any, Any]]:
        # reads are rare next to updates: merge in memory, in the store's key-byte order
        ser, topic = self._kser, self._topic
        merged: dict[bytes, tuple[Any, Any]] = {ser(topic, k) or b"": (k, v) for k, v in items}
        for k, entry in self._dirty.items():
            kb = ser(topic, k) or b""
            if (lo is None or kb >= lo) and (hi is None or kb <= hi):
                merged[kb] = (k, entry[0])
        for kb in sorted(merged):
            yield merged[kb]

    def all(self) -> Iterator[tuple[Any, Any]]:
        return self._merged(self.inner.all(), None, None)

    def range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        ser, topic = self._kser, self._topic
        return self._merged(self.inner.range(from_key, to_key), ser(topic, from_key), ser(topic, to_key))

    def approximate_num_entries(self) -> int:
        return self.inner.approximate_num_entries() + len(self._dirty)


def is_window_bytes(store: Any) -> bool:
    """Whether ``store`` is a byte window store (plain or change-logged; not a session store)."""
    return store is not None and callable(getattr(store, "fetch_one", None)) and hasattr(store, "window_size")


class CachedWindowStoreFacade(CachedKeyValueStoreFacade):
    """Kafka Streams' ``CachingWindowStore`` in front of a time-windowed aggregation's store.

    Entries are keyed by ``(key, window start)`` and hold the aggregate as an object with its
    timestamp: an aggregation reads and updates them with no serde call; the store write (and
    its changelog record) and the downstream update happen once per key-window per commit, at
    :meth:`flush`, which hands ``((key, start), new, old, timestamp, headers)`` to the listener.
    ``old`` is the store's value before the first update since the last flush (Kafka fetches it
    from the store at flush time; nothing else writes the store between). As the key-value
    cache, more than ``max_entries`` dirty entries flush the whole cache early.

    Readers that work on bytes (the read-only views of interactive queries and the
    TopologyTestDriver, a ``WindowStoreFacade`` built over this store) get :attr:`inner`, a byte
    window store that merges the dirty entries into the store's results, as Kafka's caching
    store merges its cache and the underlying store.
    """

    __slots__ = ("_kde", "_vde", "_vser", "store")

    def __init__(self, inner: KeyValueStoreFacade | CachedKeyValueStoreFacade, max_entries: int,
                 listener: Callable[[Any, Any, Any, int, Any], None]) -> None:
        # not the key-value cache's __init__: this one writes the byte window store itself
        self.name = inner.name
        self._topic = inner._topic
        self._kser = inner._kser
        assert isinstance(inner, KeyValueStoreFacade)
        self._kde, self._vser, self._vde = inner._kde, inner._vser, inner._vde
        #: the byte window store (change-logged when logging is on) the flush writes to
        self.store: Any = inner.inner
        self.inner = _CachedWindowBytes(self)  # type: ignore[assignment]
        self.max_entries = max_entries
        #: (key, window start) -> [new aggregate, aggregate at the last flush, timestamp, headers]
        self._dirty: dict[Any, list[Any]] = {}
        self._listener = listener

    def fetch_cached(self, key: Any, window_start: int) -> tuple[Any, int] | None:
        """(aggregate, timestamp) of the window: the cache's, else the store's, else None."""
        entry = self._dirty.get((key, window_start))
        if entry is not None:
            return entry[0], entry[2]
        return self.fetch_stored(key, window_start)

    def fetch_stored(self, key: Any, window_start: int) -> tuple[Any, int] | None:
        """(aggregate, timestamp) of the window in the store (not the cache), or None."""
        kb = self._kser(self._topic, key)
        if kb is None:
            raise SerializationError(f"store {self.name!r}: key must not be None")
        data = self.store.fetch_one(kb, window_start)
        if data is None:
            return None
        return self._vde(self._topic, data[8:]), _TS.unpack_from(data, 0)[0]

    def put_window(self, key: Any, window_start: int, new: Any, old: Any, timestamp: int, headers: Any) -> None:
        """Record an update of a window; ``old`` is the store's value (see the class docstring)."""
        self.put_cached((key, window_start), new, old, timestamp, headers)

    def _write(self, kw: tuple[Any, int], value: Any, timestamp: int) -> None:
        kb = self._kser(self._topic, kw[0])
        if kb is None:
            raise SerializationError(f"store {self.name!r}: key must not be None")
        if value is None:
            self.store.put(kb, None, kw[1])
        else:
            self.store.put(kb, _TS.pack(timestamp) + (self._vser(self._topic, value) or b""), kw[1])

    def flush(self) -> None:
        """Write every dirty window to the store, then hand its net update on (as Kafka: store first)."""
        dirty, self._dirty = self._dirty, {}
        write, listener = self._write, self._listener
        for kw, (new, old, ts, headers) in dirty.items():
            write(kw, new, ts)
            listener(kw, new, old, ts, headers)

    def _flush_key(self, key: Any) -> None:
        entry = self._dirty.pop(key, None)
        if entry is not None:
            self._write(key, entry[0], entry[2])
            self._listener(key, entry[0], entry[1], entry[2], entry[3])

    # the key-value cache's interface does not apply to windows
    def _unsupported(self) -> StreamsError:
        return StreamsError(f"store {self.name!r} is a window store: read it with a window store view "
                            f"(get_window_store / KafkaStreams.store)")

    def get(self, key: Any) -> Any:
        raise self._unsupported()

    def put(self, key: Any, value: Any) -> None:
        raise self._unsupported()

    def put_if_absent(self, key: Any, value: Any) -> Any:
        raise self._unsupported()

    def delete(self, key: Any) -> Any:
        raise self._unsupported()

    def range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        raise self._unsupported()

    def all(self) -> Iterator[tuple[Any, Any]]:
        raise self._unsupported()

    def approximate_num_entries(self) -> int:
        return int(self.store.approximate_num_entries()) + len(self._dirty)


class _CachedWindowBytes:
    """The byte window store behind a :class:`CachedWindowStoreFacade`, its dirty entries merged.

    Reads are rare next to updates: each serializes the dirty entries it may return. Anything
    else (stream time, retention, commit) is the store's.
    """

    __slots__ = ("_cache",)

    def __init__(self, cache: CachedWindowStoreFacade) -> None:
        self._cache = cache

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cache.store, name)

    def _floor(self) -> int:
        store = self._cache.store
        st = store.observed_stream_time
        return st if st == -(1 << 63) else st - store.retention_period + 1

    def _dirty_bytes(self) -> dict[tuple[bytes, int], bytes | None]:
        """(key bytes, window start) -> stored form (8-byte timestamp + value) of each dirty entry."""
        c = self._cache
        kser, vser, topic, floor = c._kser, c._vser, c._topic, self._floor()
        out: dict[tuple[bytes, int], bytes | None] = {}
        for (key, start), (new, _, ts, _) in c._dirty.items():
            if start >= floor:
                out[(kser(topic, key) or b"", start)] = (None if new is None
                                                         else _TS.pack(ts) + (vser(topic, new) or b""))
        return out

    def put(self, key: bytes, value: bytes | None, window_start: int) -> None:
        # a write past the cache: the cached update of that window goes out first
        c = self._cache
        kw = (c._kde(c._topic, key), window_start)
        if kw in c._dirty:
            c._flush_key(kw)
        c.store.put(key, value, window_start)

    def fetch_one(self, key: bytes, window_start: int) -> bytes | None:
        c = self._cache
        entry = c._dirty.get((c._kde(c._topic, key), window_start))
        if entry is None or window_start < self._floor():
            return c.store.fetch_one(key, window_start)
        new, _, ts, _ = entry
        return None if new is None else _TS.pack(ts) + (c._vser(c._topic, new) or b"")

    def fetch(self, key: bytes, time_from: int, time_to: int, reverse: bool = False
              ) -> Iterator[tuple[int, bytes]]:
        rows: dict[int, bytes | None] = dict(self._cache.store.fetch(key, time_from, time_to))
        for (kb, start), data in self._dirty_bytes().items():
            if kb == key and time_from <= start <= time_to:
                rows[start] = data
        return iter([(s, rows[s]) for s in sorted(rows, reverse=reverse) if rows[s] is not None])  # type: ignore[misc]

    def fetch_range(self, key_from: bytes | None, key_to: bytes | None, time_from: int, time_to: int,
                    reverse: bool = False) -> Iterator[tuple[BytesWindowed, bytes]]:
        rows: dict[tuple[bytes, int], bytes | None] = {
            (w.key, w.start): data for w, data in self._cache.store.fetch_range(key_from, key_to, time_from, time_to)}
        # the store compares escaped keys
        lo = None if key_from is None else K.escape_key(key_from)
        hi = None if key_to is None else K.escape_key(key_to)
        for (kb, start), data in self._dirty_bytes().items():
            ek = K.escape_key(kb)
            if (lo is None or ek >= lo) and (hi is None or ek <= hi) and time_from <= start <= time_to:
                rows[(kb, start)] = data
        size = self._cache.store.window_size
        # the store's order: escaped key, then window start
        order = sorted(rows, key=lambda r: (K.escape_key(r[0]), r[1]), reverse=reverse)
        return iter([(BytesWindowed(kb, s, s + size), rows[(kb, s)]) for kb, s in order  # type: ignore[misc]
                     if rows[(kb, s)] is not None])

    def fetch_all(self, time_from: int, time_to: int, reverse: bool = False
                  ) -> Iterator[tuple[BytesWindowed, bytes]]:
        return self.fetch_range(None, None, time_from, time_to, reverse)

    def all(self, reverse: bool = False) -> Iterator[tuple[BytesWindowed, bytes]]:
        return self.fetch_range(None, None, -(1 << 63), (1 << 63) - 1, reverse)

    def approximate_num_entries(self) -> int:
        return self._cache.approximate_num_entries()


class AutoSerde:
    """The serde of internal topics and stores when neither the topology nor the config names one.

    Kafka would fail for want of ``default.key.serde``; a Python DSL often cannot know the type
    after ``map``/``flat_map_values``, so internal data (never read by other applications) is
    written with a one-byte type tag: bytes, str, int (order-preserving: sign bit flipped), float,
    else JSON.
    """

    name = "auto"

    def serialize(self, topic: str, value: Any, headers: Any = None) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, str):
            return b"\x01" + value.encode("utf-8")
        if isinstance(value, bool):
            return b"\x04" + (b"true" if value else b"false")
        if isinstance(value, int) and -(1 << 63) <= value < (1 << 63):
            return b"\x02" + ((value + (1 << 63)).to_bytes(8, "big"))
        if isinstance(value, float):
            return b"\x03" + _DOUBLE.pack(value)
        if isinstance(value, bytes | bytearray | memoryview):
            return b"\x00" + bytes(value)
        try:
            return b"\x04" + json.dumps(value, separators=(",", ":")).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise SerializationError(
                f"no serde configured for internal topic/store {topic!r} and a "
                f"{type(value).__name__} is not JSON-serializable; set a serde (Grouped/Materialized) "
                f"or default.key.serde/default.value.serde") from exc

    def serialize_batch(self, topic: str, values: list[Any]) -> list[bytes | None]:
        """``serialize`` of each value; str (the common internal type) without a call."""
        ser = self.serialize
        # ("\x01" + v).encode(): one allocation less than b"\x01" + v.encode(), the same bytes
        return [("\x01" + v).encode() if v.__class__ is str else ser(topic, v) for v in values]

    def deserialize_batch(self, topic: str, data: list[bytes | None]) -> list[Any]:
        """``deserialize`` of each element; a str (tag 1) without a call."""
        de = self.deserialize
        # .decode() is UTF-8 (strict), as deserialize's; a bytes subclass or a memoryview goes
        # the per-value way
        return [d[1:].decode() if d.__class__ is bytes and d[:1] == b"\x01" else de(topic, d) for d in data]

    def deserialize(self, topic: str, data: bytes | None, headers: Any = None) -> Any:
        if data is None:
            return None
        if not data:
            raise SerializationError(f"auto serde: empty data from {topic!r}")
        tag = data[0]
        body = data[1:]
        if tag == 1:
            return bytes(body).decode("utf-8")
        if tag == 2:
            return int.from_bytes(body, "big") - (1 << 63)
        if tag == 3:
            return _DOUBLE.unpack(body)[0]
        if tag == 0:
            return bytes(body)
        if tag == 4:
            return json.loads(bytes(body))
        raise SerializationError(f"auto serde: unknown type tag {tag} in data from {topic!r}")


AUTO_SERDE = AutoSerde()



class WindowStoreFacade:
    """Typed access to a byte window store whose values carry their record timestamp.

    Values are stored as 8-byte timestamp + serialized value (Kafka's timestamped window store
    format). Built over the key-value facade the runtime hands out, reusing its serdes.
    """

    __slots__ = ("_kde", "_kser", "_topic", "_vde", "_vser", "inner", "name")

    def __init__(self, facade: KeyValueStoreFacade) -> None:
        self.name = facade.name
        self.inner = facade.inner
        self._topic = facade._topic
        self._kser, self._kde = facade._kser, facade._kde
        self._vser, self._vde = facade._vser, facade._vde

    def key_bytes(self, key: Any) -> bytes:
        kb = self._kser(self._topic, key)
        if kb is None:
            raise SerializationError(f"store {self.name!r}: key must not be None")
        return kb

    def _value(self, data: bytes) -> tuple[Any, int]:
        return self._vde(self._topic, data[8:]), _TS.unpack_from(data, 0)[0]

    def put(self, key: Any, value: Any, timestamp: int, window_start: int) -> None:
        kb = self.key_bytes(key)
        if value is None:
            self.inner.put(kb, None, window_start)
        else:
            self.inner.put(kb, _TS.pack(timestamp) + (self._vser(self._topic, value) or b""), window_start)

    def fetch_one(self, key: Any, window_start: int) -> tuple[Any, int] | None:
        data = self.inner.fetch_one(self.key_bytes(key), window_start)
        return None if data is None else self._value(data)

    def fetch(self, key: Any, time_from: int, time_to: int) -> Iterator[tuple[int, Any, int]]:
        """(window start, value, timestamp) of ``key`` with start in [from, to], oldest first."""
        for start, data in self.inner.fetch(self.key_bytes(key), time_from, time_to):
            value, ts = self._value(data)
            yield start, value, ts

    def all(self) -> Iterator[tuple[Any, int, int, Any]]:
        """(key, window start, window end, value) of every live window."""
        for w, data in self.inner.all():
            yield self._kde(self._topic, w.key), w.start, w.end, self._value(data)[0]


class SessionStoreFacade:
    """Typed access to a byte session store (values serialized with the store's value serde)."""

    __slots__ = ("_kde", "_kser", "_topic", "_vde", "_vser", "inner", "name")

    def __init__(self, facade: KeyValueStoreFacade) -> None:
        self.name = facade.name
        self.inner = facade.inner
        self._topic = facade._topic
        self._kser, self._kde = facade._kser, facade._kde
        self._vser, self._vde = facade._vser, facade._vde

    def key_bytes(self, key: Any) -> bytes:
        kb = self._kser(self._topic, key)
        if kb is None:
            raise SerializationError(f"store {self.name!r}: key must not be None")
        return kb

    def find_sessions(self, key: Any, earliest_end: int, latest_start: int) -> list[tuple[int, int, Any]]:
        """(start, end, aggregate) of sessions of ``key`` with end >= earliest and start <= latest."""
        return [(w.start, w.end, self._vde(self._topic, v))
                for w, v in self.inner.find_sessions(self.key_bytes(key), earliest_end, latest_start)]

    def put(self, key: Any, start: int, end: int, value: Any) -> None:
        self.inner.put(self.key_bytes(key), start, end, None if value is None else self._vser(self._topic, value))

    def remove(self, key: Any, start: int, end: int) -> None:
        self.inner.remove(self.key_bytes(key), start, end)

    def all(self) -> Iterator[tuple[Any, int, int, Any]]:
        """(key, start, end, aggregate) of every live session."""
        for w, v in self.inner.all():
            yield self._kde(self._topic, w.key), w.start, w.end, self._vde(self._topic, v)
