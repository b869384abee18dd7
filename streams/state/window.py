"""Window stores over an ordered byte map: :class:`InMemoryWindowStore`, :class:`RocksDBWindowStore`.

Semantics follow Kafka's segmented window store, simplified to one key space: entries are
(key, window start[, seqnum]) -> value; the observed stream time is the largest window start
put; windows with ``start <= stream_time - retention`` are expired: puts of them are dropped and
reads never return them; a sweep at commit deletes them once stream time has moved on by a
segment interval (``max(retention / 2, 60 s)`` as in Kafka). Results are ordered by key, then
window start (Kafka orders by segment first; within one key both orders agree).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from strom.streams.exceptions import StateStoreError
from strom.streams.state import keys as K
from strom.streams.state.api import Windowed
from strom.streams.state.backend import MemoryBytes, OrderedBytes, RocksBytes, check_open
from strom.streams.state.timed import NO_TIME as _NO_TIME
from strom.streams.state.timed import TimedStoreBase

_SEQ_META = b"duplicate_seq"


class BytesWindowStore(TimedStoreBase):
    """A :class:`~strom.streams.state.api.WindowStore` over any :class:`OrderedBytes`."""

    _stream_time: int  # declared again: mypy sees strom.* imports as Any (editable install)

    def __init__(
        self,
        name: str,
        backend: OrderedBytes,
        retention_period: int,
        window_size: int,
        retain_duplicates: bool = False,
    ) -> None:
        if window_size <= 0 or window_size > retention_period:
            raise StateStoreError(
                f"window store {name!r}: window size {window_size} must be > 0 and "
                f"<= retention period {retention_period}"
            )
        super().__init__(name, backend, retention_period)
        self._window_size = window_size
        self.retain_duplicates = retain_duplicates
        self._suffix = 12 if retain_duplicates else 8
        saved = backend.meta(_SEQ_META) if retain_duplicates else None
        # a reopened store continues the sequence of the duplicates it holds
        self._seq = 0 if saved is None else int.from_bytes(saved, "big")
        #: sequence number of the last put (0 unless duplicates are retained); the
        #: change-logging wrapper puts it into the changelog key as Kafka does
        self.last_seq = 0

    @property
    def window_size(self) -> int:
        return self._window_size

    def _extra_meta(self) -> dict[bytes, bytes]:
        return {_SEQ_META: self._seq.to_bytes(4, "big")} if self.retain_duplicates else {}

    def _entry_time(self, composite: bytes) -> int:
        s = self._suffix
        return K.decode_time(composite[-s : len(composite) - s + 8])

    def _decode(self, composite: bytes) -> tuple[bytes, int]:
        s = self._suffix
        return K.unescape_key(composite[:-s]), K.decode_time(composite[-s : len(composite) - s + 8])

    def put(self, key: bytes, value: bytes | None, window_start: int) -> None:
        check_open(self._open, self._name)
        self.put_with_seq(key, value, window_start, None)

    def put_with_seq(self, key: bytes, value: bytes | None, window_start: int, seq: int | None) -> bool:
        """Put with an explicit sequence number (restore); returns False if expired/ignored."""
        if window_start > self._stream_time:
            self._stream_time = window_start
        if window_start < self._expiry_floor():
            return False  # expired: Kafka skips the write (and logs nothing)
        composite = K.escape_key(key) + K.encode_time(window_start)
        if self.retain_duplicates:
            if value is None:
                return False  # Kafka: deletes are ignored when duplicates are retained
            if seq is None:
                self._seq = (self._seq + 1) & 0x7FFFFFFF
                seq = self._seq
            elif seq > self._seq:
                # restored entries: new puts must not reuse their numbers (same key and time
                # would overwrite a retained duplicate)
                self._seq = seq
            composite += seq.to_bytes(4, "big")
            self.last_seq = seq
        else:
            self.last_seq = 0
        self._b.put(composite, value)
        return True

    def fetch_one(self, key: bytes, window_start: int) -> bytes | None:
        check_open(self._open, self._name)
        if window_start < self._expiry_floor():
            return None
        composite = K.escape_key(key) + K.encode_time(window_start)
        if self.retain_duplicates:
            for _, v in self._b.range(composite, composite + b"\xff" * 4, False):
                return v
            return None
        return self._b.get(composite)

    def fetch(
        self, key: bytes, time_from: int, time_to: int, reverse: bool = False
    ) -> Iterator[tuple[int, bytes]]:
        check_open(self._open, self._name)
        time_from = max(time_from, self._expiry_floor())
        if time_from > time_to:
            return
        ek = K.escape_key(key)
        lo = ek + K.encode_time(time_from)
        hi = ek + K.encode_time(time_to) + b"\xff" * (self._suffix - 8)
        s = self._suffix
        for composite, v in self._b.range(lo, hi, reverse):
            yield K.decode_time(composite[-s : len(composite) - s + 8]), v

    def fetch_range(
        self,
        key_from: bytes | None,
        key_to: bytes | None,
        time_from: int,
        time_to: int,
        reverse: bool = False,
    ) -> Iterator[tuple[Windowed, bytes]]:
        check_open(self._open, self._name)
        if key_from is not None and key_to is not None and key_from > key_to:
            return
        time_from = max(time_from, self._expiry_floor())
        if time_from > time_to:
            return
        lo = None if key_from is None else K.escape_key(key_from)
        hi = None if key_to is None else K.escape_key(key_to) + b"\xff" * self._suffix
        size = self._window_size
        for composite, v in self._b.range(lo, hi, reverse):
            key, start = self._decode(composite)
            if time_from <= start <= time_to:
                yield Windowed(key, start, start + size), v

    def fetch_all(
        self, time_from: int, time_to: int, reverse: bool = False
    ) -> Iterator[tuple[Windowed, bytes]]:
        return self.fetch_range(None, None, time_from, time_to, reverse)

    def all(self, reverse: bool = False) -> Iterator[tuple[Windowed, bytes]]:
        return self.fetch_range(None, None, _NO_TIME, (1 << 63) - 1, reverse)


class InMemoryWindowStore(BytesWindowStore):
    def __init__(
        self, name: str, retention_period: int, window_size: int, retain_duplicates: bool = False
    ) -> None:
        super().__init__(name, MemoryBytes(), retention_period, window_size, retain_duplicates)


class RocksDBWindowStore(BytesWindowStore):
    def __init__(
        self,
        name: str,
        path: Path | str,
        retention_period: int,
        window_size: int,
        retain_duplicates: bool = False,
    ) -> None:
        super().__init__(name, RocksBytes(path), retention_period, window_size, retain_duplicates)
