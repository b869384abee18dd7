"""Shared base of window and session stores: lifecycle, observed stream time, expiry sweep.

The observed stream time is persisted with every commit (in the backend's metadata), so a
reopened persistent store keeps expiring from where it was.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from strom.streams.exceptions import StateStoreError
from strom.streams.state import keys as K
from strom.streams.state.api import ChangelogOffsets
from strom.streams.state.backend import OrderedBytes, check_open

NO_TIME = -(1 << 63)
_NO_TIME = NO_TIME
_STREAM_TIME_META = b"observed_stream_time"


class TimedStoreBase(ABC):
    """Shared lifecycle, stream-time tracking and expiry sweep of window and session stores."""

    _stream_time: int

    def __init__(self, name: str, backend: OrderedBytes, retention_period: int) -> None:
        if retention_period < 0:
            raise StateStoreError(f"store {name!r}: retention period must be >= 0")
        self._name = name
        self._b = backend
        self._open = True
        self._retention = retention_period
        self._segment_interval = max(retention_period // 2, 60_000)
        saved = backend.meta(_STREAM_TIME_META)
        self._stream_time = K.decode_time(saved) if saved is not None else _NO_TIME
        self._swept_at = self._stream_time

    @property
    def name(self) -> str:
        return self._name

    @property
    def persistent(self) -> bool:
        return self._b.persistent

    @property
    def is_open(self) -> bool:
        return self._open

    @property
    def retention_period(self) -> int:
        return self._retention

    @property
    def observed_stream_time(self) -> int:
        return self._stream_time

    def _expiry_floor(self) -> int:
        """Smallest time that is still live (window start for windows, end for sessions)."""
        if self._stream_time == _NO_TIME:
            return _NO_TIME
        return self._stream_time - self._retention + 1

    @abstractmethod
    def _entry_time(self, composite: bytes) -> int:
        raise NotImplementedError

    def _sweep(self) -> None:
        floor = self._expiry_floor()
        expired = [k for k, _ in self._b.range(None, None, False) if self._entry_time(k) < floor]
        for k in expired:
            self._b.put(k, None)
        self._swept_at = self._stream_time

    def commit(self, changelog_offsets: ChangelogOffsets) -> None:
        check_open(self._open, self._name)
        if self._stream_time != _NO_TIME and self._stream_time - self._swept_at >= self._segment_interval:
            self._sweep()
        meta = {} if self._stream_time == _NO_TIME else {_STREAM_TIME_META: K.encode_time(self._stream_time)}
        meta.update(self._extra_meta())
        self._b.commit(changelog_offsets, meta)

    def _extra_meta(self) -> dict[bytes, bytes]:
        """More metadata a store kind commits with its data (read back by its constructor)."""
        return {}

    def committed_offsets(self) -> ChangelogOffsets:
        return self._b.committed_offsets()

    def approximate_num_entries(self) -> int:
        return self._b.count()

    def flush(self) -> None:
        check_open(self._open, self._name)
        self._b.flush()

    def close(self) -> None:
        if self._open:
            self._open = False
            self._b.close()
