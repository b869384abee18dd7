"""Read-only, typed store views: Kafka's ``ReadOnlyKeyValueStore``, ``ReadOnlyWindowStore`` and
``ReadOnlySessionStore`` in snake_case -- the one read API of both interactive queries
(``KafkaStreams.store``) and the ``TopologyTestDriver`` (``get_window_store`` /
``get_session_store``).

A view reads one store across several partitions: ``parts()`` returns ``(lock, facade)`` pairs,
one per local task holding a partition of the store (the TopologyTestDriver has one, with a
no-op lock; a running application takes its stream thread's lock so reads never see a store
mid-update). Each read collects its rows under the lock and returns an iterator over them,
ordered by serialized key, then window start (session stores: then session end), as each
partition's store is. Iterators yield :class:`KeyValue` pairs, as Kafka's do: ``(key, value)``
for key-value stores, ``(window start, value)`` for one key's windows (Kafka's
``WindowStoreIterator``), ``(Windowed, value)`` for windows and sessions of a key range.
Window values are returned without the record timestamp the store keeps alongside them;
windowed keys are :class:`~strom.streams.dsl.windows.Windowed`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

from strom.streams.dsl.windows import Window, Windowed
from strom.streams.exceptions import StreamsError
from strom.streams.processor.stores import KeyValueStoreFacade, serializer_of

Parts = Callable[[], list[tuple[AbstractContextManager[Any], KeyValueStoreFacade]]]
_MIN = -(1 << 63)
_MAX = (1 << 63) - 1


class KeyValue(NamedTuple):
    """Kafka's ``KeyValue``: one entry a read-only view yields; unpacks as ``(key, value)``."""

    key: Any
    value: Any


class _View:
    def __init__(self, name: str, parts: Parts) -> None:
        self.name = name
        self._parts = parts

    def _collect(self, read: Callable[[KeyValueStoreFacade], list[tuple[tuple[Any, ...], KeyValue]]],
                 reverse: bool) -> Iterator[KeyValue]:
        """Rows of every partition, each ``(sort key, item)``; merged in sort-key order."""
        rows: list[tuple[tuple[Any, ...], KeyValue]] = []
        for lock, facade in self._parts():
            with lock:
                rows.extend(read(facade))
        rows.sort(key=lambda r: r[0], reverse=reverse)
        return iter([item for _, item in rows])

    @staticmethod
    def _kb(facade: KeyValueStoreFacade, key: Any) -> bytes:
        kb = facade._kser(facade._topic, key)
        if kb is None:
            raise StreamsError(f"store {facade.name!r}: key must not be None")
        return kb


class ReadOnlyKeyValueStore(_View):
    """``get``, ``range`` / ``reverse_range``, ``all`` / ``reverse_all``, ``prefix_scan``,
    ``approximate_num_entries`` (Kafka's ``ReadOnlyKeyValueStore``)."""

    def get(self, key: Any) -> Any:
        """The value of ``key``, or None; a key lives in one partition, so the first hit wins."""
        if key is None:
            raise StreamsError(f"store {self.name!r}: key must not be None")
        for lock, facade in self._parts():
            with lock:
                value = facade.get(key)
            if value is not None:
                return value
        return None

    def _entries(self, fetch: Callable[[KeyValueStoreFacade], Iterator[tuple[Any, Any]]],
                 reverse: bool) -> Iterator[KeyValue]:
        def read(f: KeyValueStoreFacade) -> list[tuple[tuple[Any, ...], KeyValue]]:
            # order across partitions by serialized key, as each partition's store is ordered
            kser, topic = f._kser, f._topic
            return [((kser(topic, k) or b"",), KeyValue(k, v)) for k, v in fetch(f)]
        return self._collect(read, reverse)

    def range(self, from_key: Any, to_key: Any) -> Iterator[KeyValue]:
        """Entries with serialized keys in ``[from_key, to_key]`` (None is open), ascending."""
        return self._entries(lambda f: f.range(from_key, to_key), False)

    def reverse_range(self, from_key: Any, to_key: Any) -> Iterator[KeyValue]:
        """As :meth:`range`, descending."""
        return self._entries(lambda f: f.range(from_key, to_key), True)

    def all(self) -> Iterator[KeyValue]:
        return self._entries(lambda f: f.all(), False)

    def reverse_all(self) -> Iterator[KeyValue]:
        return self._entries(lambda f: f.all(), True)

    def prefix_scan(self, prefix: Any, prefix_key_serializer: Any = None) -> Iterator[KeyValue]:
        """Entries whose serialized key starts with ``prefix`` serialized by
        ``prefix_key_serializer`` (a serde, or a ``(topic, obj) -> bytes`` function; default:
        the store's key serde), ascending."""
        if prefix is None:
            raise StreamsError(f"store {self.name!r}: prefix must not be None")

        def fetch(f: KeyValueStoreFacade) -> Iterator[tuple[Any, Any]]:
            ser = f._kser if prefix_key_serializer is None else (
                serializer_of(prefix_key_serializer) if hasattr(prefix_key_serializer, "serialize")
                else prefix_key_serializer)
            pb = ser(f._topic, prefix) or b""
            if isinstance(f, KeyValueStoreFacade):  # the byte store seeks to the prefix
                return f._decode(f.inner.prefix_scan(pb))
            # a cached store: its dirty keys are not in the byte store yet, so scan the merge
            return ((k, v) for k, v in f.all() if (f._kser(f._topic, k) or b"").startswith(pb))
        return self._entries(fetch, False)

    def approximate_num_entries(self) -> int:
        total = 0
        for lock, facade in self._parts():
            with lock:
                total += facade.approximate_num_entries()
        return total


class ReadOnlyWindowStore(_View):
    """``fetch(key, time)`` / ``fetch(key, from, to)`` / ``fetch(key_from, key_to, from, to)``, ``all``..."""

    def fetch(self, key: Any, *times_or_range: Any) -> Any:
        """Kafka's overloads by arity:

        * ``fetch(key, window_start)``: the value of that window, or None;
        * ``fetch(key, time_from, time_to)``: ``(window start, value)`` of ``key``'s windows
          starting in ``[time_from, time_to]``, oldest first;
        * ``fetch(key_from, key_to, time_from, time_to)``: ``(Windowed, value)``, like
          :meth:`fetch_range`.
        """
        n = len(times_or_range)
        if n == 1:
            return self._fetch_one(key, times_or_range[0])
        if n == 2:
            return self._fetch_key(key, times_or_range[0], times_or_range[1], False)
        if n == 3:
            return self.fetch_range(key, *times_or_range)
        raise TypeError(f"fetch takes 2, 3 or 4 arguments, got {n + 1}")

    def _fetch_one(self, key: Any, window_start: int) -> Any:
        for lock, facade in self._parts():
            with lock:
                data = facade.inner.fetch_one(self._kb(facade, key), window_start)
                if data is not None:
                    return facade._vde(facade._topic, data[8:])
        return None

    def _fetch_key(self, key: Any, time_from: int, time_to: int, reverse: bool) -> Iterator[KeyValue]:
        def read(f: KeyValueStoreFacade) -> list[tuple[tuple[Any, ...], KeyValue]]:
            return [((start,), KeyValue(start, f._vde(f._topic, data[8:])))
                    for start, data in f.inner.fetch(self._kb(f, key), time_from, time_to)]
        return self._collect(read, reverse)

    def backward_fetch(self, key: Any, time_from: int, time_to: int) -> Iterator[KeyValue]:
        """As ``fetch(key, time_from, time_to)``, newest first."""
        return self._fetch_key(key, time_from, time_to, True)

    def _windowed(self, key_from: Any, key_to: Any, time_from: int, time_to: int,
                  reverse: bool) -> Iterator[KeyValue]:
        def read(f: KeyValueStoreFacade) -> list[tuple[tuple[Any, ...], KeyValue]]:
            lo = None if key_from is None else self._kb(f, key_from)
            hi = None if key_to is None else self._kb(f, key_to)
            return [((w.key, w.start), KeyValue(Windowed(f._kde(f._topic, w.key), Window(w.start, w.end)),
                                                f._vde(f._topic, data[8:])))
                    for w, data in f.inner.fetch_range(lo, hi, time_from, time_to)]
        return self._collect(read, reverse)

    def fetch_range(self, key_from: Any, key_to: Any, time_from: int,
                    time_to: int) -> Iterator[KeyValue]:
        """``(Windowed, value)`` of keys in ``[key_from, key_to]`` (serialized order; None is
        open) with window start in ``[time_from, time_to]``."""
        return self._windowed(key_from, key_to, time_from, time_to, False)

    def backward_fetch_range(self, key_from: Any, key_to: Any, time_from: int,
                             time_to: int) -> Iterator[KeyValue]:
        return self._windowed(key_from, key_to, time_from, time_to, True)

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[KeyValue]:
        """Every key's windows starting in ``[time_from, time_to]``."""
        return self._windowed(None, None, time_from, time_to, False)

    def backward_fetch_all(self, time_from: int, time_to: int) -> Iterator[KeyValue]:
        return self._windowed(None, None, time_from, time_to, True)

    def all(self) -> Iterator[KeyValue]:
        """Every live window of every key."""
        return self._windowed(None, None, _MIN, _MAX, False)

    def backward_all(self) -> Iterator[KeyValue]:
        return self._windowed(None, None, _MIN, _MAX, True)


class ReadOnlySessionStore(_View):
    """``fetch(key)``, ``find_sessions(key, earliest_end, latest_start)``, ``fetch_session``..."""

    def _sessions(self, key_from: Any, key_to: Any, earliest_end: int, latest_start: int,
                  reverse: bool) -> Iterator[KeyValue]:
        def read(f: KeyValueStoreFacade) -> list[tuple[tuple[Any, ...], KeyValue]]:
            lo = None if key_from is None else self._kb(f, key_from)
            hi = None if key_to is None else self._kb(f, key_to)
            return [((w.key, w.end, w.start), KeyValue(Windowed(f._kde(f._topic, w.key), Window(w.start, w.end)),
                                                        f._vde(f._topic, v)))
                    for w, v in f.inner.find_sessions_range(lo, hi, earliest_end, latest_start)]
        return self._collect(read, reverse)

    def fetch(self, key_from: Any, key_to: Any = None) -> Iterator[KeyValue]:
        """Sessions of ``key`` (one argument) or of keys in ``[key_from, key_to]`` (two)."""
        return self._sessions(key_from, key_from if key_to is None else key_to, _MIN, _MAX, False)

    def backward_fetch(self, key_from: Any, key_to: Any = None) -> Iterator[KeyValue]:
        return self._sessions(key_from, key_from if key_to is None else key_to, _MIN, _MAX, True)

    def find_sessions(self, key: Any, earliest_session_end: int,
                      latest_session_start: int) -> Iterator[KeyValue]:
        """Sessions of ``key`` with end >= ``earliest_session_end`` and start <= ``latest_session_start``."""
        return self._sessions(key, key, earliest_session_end, latest_session_start, False)

    def backward_find_sessions(self, key: Any, earliest_session_end: int,
                               latest_session_start: int) -> Iterator[KeyValue]:
        return self._sessions(key, key, earliest_session_end, latest_session_start, True)

    def find_sessions_range(self, key_from: Any, key_to: Any, earliest_session_end: int,
                            latest_session_start: int) -> Iterator[KeyValue]:
        return self._sessions(key_from, key_to, earliest_session_end, latest_session_start, False)

    def fetch_session(self, key: Any, session_start: int, session_end: int) -> Any:
        """The aggregate of exactly the session ``[session_start, session_end]``, or None."""
        for lock, facade in self._parts():
            with lock:
                data = facade.inner.fetch_session(self._kb(facade, key), session_start, session_end)
                if data is not None:
                    return facade._vde(facade._topic, data)
        return None

    def all(self) -> Iterator[KeyValue]:
        """Every live session (not in Kafka's interface; handy in tests)."""
        return self._sessions(None, None, _MIN, _MAX, False)
