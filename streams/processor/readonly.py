"""Read-only, typed views of window and session stores (Kafka's ``ReadOnlyWindowStore`` and
``ReadOnlySessionStore`` in snake_case), for tests and interactive queries.

A view reads one store across several partitions: ``parts()`` returns ``(lock, facade)`` pairs,
one per local task holding a partition of the store (the TopologyTestDriver has one, with a
no-op lock; a running application takes its stream thread's lock so reads never see a store
mid-update). Each read collects its rows under the lock and returns an iterator over them,
ordered by serialized key, then window start (session stores: then session end), as each
partition's store is. Window values are returned without the record timestamp the store keeps
alongside them; windowed keys are :class:`~strom.streams.dsl.windows.Windowed`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from strom.streams.dsl.windows import Window, Windowed
from strom.streams.exceptions import StreamsError
from strom.streams.processor.stores import KeyValueStoreFacade

Parts = Callable[[], list[tuple[AbstractContextManager[Any], KeyValueStoreFacade]]]
_MIN = -(1 << 63)
_MAX = (1 << 63) - 1


class _View:
    def __init__(self, name: str, parts: Parts) -> None:
        self.name = name
        self._parts = parts

    def _collect(self, read: Callable[[KeyValueStoreFacade], list[tuple[tuple[Any, ...], Any]]],
                 reverse: bool) -> Iterator[Any]:
        """Rows of every partition, each ``(sort key, item)``; merged in sort-key order."""
        rows: list[tuple[tuple[Any, ...], Any]] = []
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

    def _fetch_key(self, key: Any, time_from: int, time_to: int, reverse: bool) -> Iterator[tuple[int, Any]]:
        def read(f: KeyValueStoreFacade) -> list[tuple[tuple[Any, ...], Any]]:
            return [((start,), (start, f._vde(f._topic, data[8:])))
                    for start, data in f.inner.fetch(self._kb(f, key), time_from, time_to)]
        return self._collect(read, reverse)

    def backward_fetch(self, key: Any, time_from: int, time_to: int) -> Iterator[tuple[int, Any]]:
        """As ``fetch(key, time_from, time_to)``, newest first."""
        return self._fetch_key(key, time_from, time_to, True)

    def _windowed(self, key_from: Any, key_to: Any, time_from: int, time_to: int,
                  reverse: bool) -> Iterator[tuple[Windowed, Any]]:
        def read(f: KeyValueStoreFacade) -> list[tuple[tuple[Any, ...], Any]]:
            lo = None if key_from is None else self._kb(f, key_from)
            hi = None if key_to is None else self._kb(f, key_to)
            return [((w.key, w.start), (Windowed(f._kde(f._topic, w.key), Window(w.start, w.end)),
                                        f._vde(f._topic, data[8:])))
                    for w, data in f.inner.fetch_range(lo, hi, time_from, time_to)]
        return self._collect(read, reverse)

    def fetch_range(self, key_from: Any, key_to: Any, time_from: int,
                    time_to: int) -> Iterator[tuple[Windowed, Any]]:
        """``(Windowed, value)`` of keys in ``[key_from, key_to]`` (serialized order; None is
        open) with window start in ``[time_from, time_to]``."""
        return self._windowed(key_from, key_to, time_from, time_to, False)

    def backward_fetch_range(self, key_from: Any, key_to: Any, time_from: int,
                             time_to: int) -> Iterator[tuple[Windowed, Any]]:
        return self._windowed(key_from, key_to, time_from, time_to, True)

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[Windowed, Any]]:
        """Every key's windows starting in ``[time_from, time_to]``."""
        return self._windowed(None, None, time_from, time_to, False)

    def backward_fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[Windowed, Any]]:
        return self._windowed(None, None, time_from, time_to, True)

    def all(self) -> Iterator[tuple[Windowed, Any]]:
        """Every live window of every key."""
        return self._windowed(None, None, _MIN, _MAX, False)

    def backward_all(self) -> Iterator[tuple[Windowed, Any]]:
        return self._windowed(None, None, _MIN, _MAX, True)


class ReadOnlySessionStore(_View):
    """``fetch(key)``, ``find_sessions(key, earliest_end, latest_start)``, ``fetch_session``..."""

    def _sessions(self, key_from: Any, key_to: Any, earliest_end: int, latest_start: int,
                  reverse: bool) -> Iterator[tuple[Windowed, Any]]:
        def read(f: KeyValueStoreFacade) -> list[tuple[tuple[Any, ...], Any]]:
            lo = None if key_from is None else self._kb(f, key_from)
            hi = None if key_to is None else self._kb(f, key_to)
            return [((w.key, w.end, w.start), (Windowed(f._kde(f._topic, w.key), Window(w.start, w.end)),
                                                f._vde(f._topic, v)))
                    for w, v in f.inner.find_sessions_range(lo, hi, earliest_end, latest_start)]
        return self._collect(read, reverse)

    def fetch(self, key_from: Any, key_to: Any = None) -> Iterator[tuple[Windowed, Any]]:
        """Sessions of ``key`` (one argument) or of keys in ``[key_from, key_to]`` (two)."""
        return self._sessions(key_from, key_from if key_to is None else key_to, _MIN, _MAX, False)

    def backward_fetch(self, key_from: Any, key_to: Any = None) -> Iterator[tuple[Windowed, Any]]:
        return self._sessions(key_from, key_from if key_to is None else key_to, _MIN, _MAX, True)

    def find_sessions(self, key: Any, earliest_session_end: int,
                      latest_session_start: int) -> Iterator[tuple[Windowed, Any]]:
        """Sessions of ``key`` with end >= ``earliest_session_end`` and start <= ``latest_session_start``."""
        return self._sessions(key, key, earliest_session_end, latest_session_start, False)

    def backward_find_sessions(self, key: Any, earliest_session_end: int,
                               latest_session_start: int) -> Iterator[tuple[Windowed, Any]]:
        return self._sessions(key, key, earliest_session_end, latest_session_start, True)

    def find_sessions_range(self, key_from: Any, key_to: Any, earliest_session_end: int,
                            latest_session_start: int) -> Iterator[tuple[Windowed, Any]]:
        return self._sessions(key_from, key_to, earliest_session_end, latest_session_start, False)

    def fetch_session(self, key: Any, session_start: int, session_end: int) -> Any:
        """The aggregate of exactly the session ``[session_start, session_end]``, or None."""
        for lock, facade in self._parts():
            with lock:
                data = facade.inner.fetch_session(self._kb(facade, key), session_start, session_end)
                if data is not None:
                    return facade._vde(facade._topic, data)
        return None

    def all(self) -> Iterator[tuple[Windowed, Any]]:
        """Every live session (not in Kafka's interface; handy in tests)."""
        return self._sessions(None, None, _MIN, _MAX, False)
