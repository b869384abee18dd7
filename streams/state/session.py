"""Session stores over an ordered byte map: :class:`InMemorySessionStore`, :class:`RocksDBSessionStore`.

A session is (key, start, end) with both ends inclusive. Entries are laid out key, end, start
(as Kafka's SessionKeySchema), so the sessions of a key iterate by end time. The observed stream
time is the largest session end put; sessions with ``end <= stream_time - retention`` are
expired (puts dropped, reads filtered, swept at commit like window stores).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from strom.streams.exceptions import StateStoreError
from strom.streams.state import keys as K
from strom.streams.state.api import Windowed
from strom.streams.state.backend import MemoryBytes, OrderedBytes, RocksBytes, check_open
from strom.streams.state.timed import TimedStoreBase

_MAX_TIME = (1 << 63) - 1
_MIN_TIME = -(1 << 63)


class BytesSessionStore(TimedStoreBase):
    """A :class:`~strom.streams.state.api.SessionStore` over any :class:`OrderedBytes`."""

    _stream_time: int  # declared again: mypy sees strom.* imports as Any (editable install)

    def __init__(self, name: str, backend: OrderedBytes, retention_period: int) -> None:
        super().__init__(name, backend, retention_period)

    def _entry_time(self, composite: bytes) -> int:
        return K.decode_time(composite[-16:-8])  # the session end

    @staticmethod
    def _composite(key: bytes, start: int, end: int) -> bytes:
        return K.escape_key(key) + K.encode_time(end) + K.encode_time(start)

    @staticmethod
    def _decode(composite: bytes) -> Windowed:
        return Windowed(
            K.unescape_key(composite[:-16]), K.decode_time(composite[-8:]), K.decode_time(composite[-16:-8])
        )

    def put(self, key: bytes, start: int, end: int, value: bytes | None) -> None:
        check_open(self._open, self._name)
        self.put_session(key, start, end, value)

    def put_session(self, key: bytes, start: int, end: int, value: bytes | None) -> bool:
        """Put (or delete with ``None``); returns False when the session is already expired."""
        if start > end:
            raise StateStoreError(f"session store {self._name!r}: start {start} > end {end}")
        if end > self._stream_time:
            self._stream_time = end
        if end < self._expiry_floor():
            return False
        self._b.put(self._composite(key, start, end), value)
        return True

    def remove(self, key: bytes, start: int, end: int) -> None:
        self.put(key, start, end, None)

    def fetch_session(self, key: bytes, start: int, end: int) -> bytes | None:
        check_open(self._open, self._name)
        if end < self._expiry_floor():
            return None
        return self._b.get(self._composite(key, start, end))

    def find_sessions(
        self, key: bytes, earliest_session_end: int, latest_session_start: int
    ) -> Iterator[tuple[Windowed, bytes]]:
        """Sessions of ``key`` with ``end >= earliest_session_end`` and
        ``start <= latest_session_start`` (those that overlap or touch a new record's window)."""
        check_open(self._open, self._name)
        earliest = max(earliest_session_end, self._expiry_floor())
        ek = K.escape_key(key)
        lo = ek + K.encode_time(earliest)
        hi = ek + b"\xff" * 16
        for composite, v in self._b.range(lo, hi, False):
            start = K.decode_time(composite[-8:])
            if start <= latest_session_start:
                yield Windowed(key, start, K.decode_time(composite[-16:-8])), v

    def find_sessions_range(
        self,
        key_from: bytes | None,
        key_to: bytes | None,
        earliest_session_end: int,
        latest_session_start: int,
    ) -> Iterator[tuple[Windowed, bytes]]:
        check_open(self._open, self._name)
        if key_from is not None and key_to is not None and key_from > key_to:
            return
        earliest = max(earliest_session_end, self._expiry_floor())
        lo = None if key_from is None else K.escape_key(key_from)
        hi = None if key_to is None else K.escape_key(key_to) + b"\xff" * 16
        for composite, v in self._b.range(lo, hi, False):
            w = self._decode(composite)
            if w.end >= earliest and w.start <= latest_session_start:
                yield w, v

    def fetch(self, key: bytes) -> Iterator[tuple[Windowed, bytes]]:
        return self.find_sessions(key, _MIN_TIME, _MAX_TIME)

    def all(self) -> Iterator[tuple[Windowed, bytes]]:
        return self.find_sessions_range(None, None, _MIN_TIME, _MAX_TIME)


class InMemorySessionStore(BytesSessionStore):
    def __init__(self, name: str, retention_period: int) -> None:
        super().__init__(name, MemoryBytes(), retention_period)


class RocksDBSessionStore(BytesSessionStore):
    def __init__(self, name: str, path: Path | str, retention_period: int) -> None:
        super().__init__(name, RocksBytes(path), retention_period)
