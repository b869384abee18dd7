"""Window definitions (Kafka's TimeWindows, SessionWindows, JoinWindows), the typed ``Windowed``
key of windowed results and the windowed serdes with Kafka's wire format.

Times are epoch milliseconds. Time windows are ``[start, end)``; session windows are
``[start, end]`` (both inclusive, as in Kafka). A window closes when stream time reaches
``end + grace``; records for closed windows are dropped.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from strom.streams.exceptions import SerializationError, TopologyError
from strom.streams.processor.stores import deserializer_of, serializer_of

_LONG = struct.Struct(">q")
_MAX = (1 << 63) - 1
DEFAULT_RETENTION_MS = 24 * 3600 * 1000  # Kafka's default window store retention (1 day)


class Window(NamedTuple):
    """A window's bounds in ms (``end`` exclusive for time windows, inclusive for sessions)."""

    start: int
    end: int


class Windowed(NamedTuple):
    """A key with its window (Kafka's ``Windowed<K>``)."""

    key: Any
    window: Window

    @property
    def start(self) -> int:
        return self.window.start

    @property
    def end(self) -> int:
        return self.window.end


def _check_ms(name: str, ms: int) -> int:
    if not isinstance(ms, int) or ms < 0:
        raise TopologyError(f"{name} must be a non-negative int of milliseconds, got {ms!r}")
    return ms


class TimeWindows:
    """Fixed-size windows: tumbling (advance == size) or hopping (``advance_by(hop)``)."""

    def __init__(self, size: int, grace: int, advance: int) -> None:
        if _check_ms("window size", size) == 0:
            raise TopologyError("window size must be > 0")
        if not 0 < advance <= size:
            raise TopologyError(f"advance must be in (0, size={size}], got {advance}")
        self.size = size
        self.grace = _check_ms("grace", grace)
        self.advance = advance

    @classmethod
    def of_size_with_no_grace(cls, size: int) -> TimeWindows:
        return cls(size, 0, size)

    @classmethod
    def of_size_and_grace(cls, size: int, grace: int) -> TimeWindows:
        return cls(size, grace, size)

    def advance_by(self, advance: int) -> TimeWindows:
        return TimeWindows(self.size, self.grace, advance)

    def windows_for(self, timestamp: int) -> list[Window]:
        """Every window containing ``timestamp`` (starts aligned to the epoch, none before 0)."""
        start = (max(0, timestamp - self.size + self.advance) // self.advance) * self.advance
        out = []
        while start <= timestamp:
            out.append(Window(start, min(start + self.size, _MAX)))
            start += self.advance
        return out

    def __repr__(self) -> str:
        return f"TimeWindows(size={self.size}, advance={self.advance}, grace={self.grace})"


class SlidingWindows:
    """Windows of a fixed ``time_difference`` that slide with the records (Kafka's ``SlidingWindows``).

    A window ``[start, start + time_difference]`` (both ends inclusive) exists for each record
    at ``t`` ending at ``t`` (starting at ``max(0, t - difference)``) and, when later records
    fall within the difference, one starting at ``t + 1``; so every distinct set of records
    within the difference of each other gets exactly one window.
    """

    def __init__(self, time_difference: int, grace: int) -> None:
        if _check_ms("time difference", time_difference) == 0:
            raise TopologyError("time difference must be > 0")
        self.time_difference = time_difference
        self.grace = _check_ms("grace", grace)

    @classmethod
    def of_time_difference_and_grace(cls, time_difference: int, grace: int) -> SlidingWindows:
        return cls(time_difference, grace)

    @classmethod
    def of_time_difference_with_no_grace(cls, time_difference: int) -> SlidingWindows:
        return cls(time_difference, 0)


class SessionWindows:
    """Activity sessions per key, split by gaps of inactivity longer than ``gap``."""

    def __init__(self, gap: int, grace: int) -> None:
        if _check_ms("inactivity gap", gap) == 0:
            raise TopologyError("inactivity gap must be > 0")
        self.gap = gap
        self.grace = _check_ms("grace", grace)

    @classmethod
    def of_inactivity_gap_with_no_grace(cls, gap: int) -> SessionWindows:
        return cls(gap, 0)

    @classmethod
    def of_inactivity_gap_and_grace(cls, gap: int, grace: int) -> SessionWindows:
        return cls(gap, grace)


class JoinWindows:
    """How far apart in time two records of a stream-stream join may be.

    A left record at ``t`` joins right records in ``[t - before, t + after]``.
    """

    def __init__(self, before: int, after: int, grace: int) -> None:
        self.before = _check_ms("before", before)
        self.after = _check_ms("after", after)
        self.grace = _check_ms("grace", grace)

    @classmethod
    def of_time_difference_with_no_grace(cls, difference: int) -> JoinWindows:
        return cls(difference, difference, 0)

    @classmethod
    def of_time_difference_and_grace(cls, difference: int, grace: int) -> JoinWindows:
        return cls(difference, difference, grace)

    def before_(self, ms: int) -> JoinWindows:
        return JoinWindows(ms, self.after, self.grace)

    def after_(self, ms: int) -> JoinWindows:
        return JoinWindows(self.before, ms, self.grace)


class TimeWindowedSerde:
    """``Windowed`` keys of time windows: inner key bytes + 8-byte big-endian start (Kafka's
    TimeWindowedSerializer); the end is start + ``window_size``, which the bytes do not carry."""

    def __init__(self, inner: Any, window_size: int) -> None:
        self.inner = inner
        self.window_size = window_size
        self._ser = serializer_of(inner)
        self._de = deserializer_of(inner)

    def serialize(self, topic: str, value: Windowed | None, headers: Any = None) -> bytes | None:
        if value is None:
            return None
        kb = self._ser(topic, value.key) or b""
        return kb + _LONG.pack(value.window.start)

    def deserialize(self, topic: str, data: bytes | None, headers: Any = None) -> Windowed | None:
        if data is None:
            return None
        if len(data) < 8:
            raise SerializationError(f"time-windowed key from {topic!r} is {len(data)} bytes, needs >= 8")
        (start,) = _LONG.unpack_from(data, len(data) - 8)
        end = start + self.window_size
        return Windowed(self._de(topic, data[:-8]), Window(start, _MAX if end < start else end))


class SessionWindowedSerde:
    """``Windowed`` keys of sessions: inner key bytes + 8-byte end + 8-byte start (Kafka's
    SessionKeySchema puts the end first)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._ser = serializer_of(inner)
        self._de = deserializer_of(inner)

    def serialize(self, topic: str, value: Windowed | None, headers: Any = None) -> bytes | None:
        if value is None:
            return None
        kb = self._ser(topic, value.key) or b""
        return kb + _LONG.pack(value.window.end) + _LONG.pack(value.window.start)

    def deserialize(self, topic: str, data: bytes | None, headers: Any = None) -> Windowed | None:
        if data is None:
            return None
        if len(data) < 16:
            raise SerializationError(f"session-windowed key from {topic!r} is {len(data)} bytes, needs >= 16")
        n = len(data)
        (end,) = _LONG.unpack_from(data, n - 16)
        (start,) = _LONG.unpack_from(data, n - 8)
        return Windowed(self._de(topic, data[:-16]), Window(start, end))


class WindowedSerdes:
    """Factories of windowed key serdes (Kafka's ``WindowedSerdes``)."""

    @staticmethod
    def time_windowed(inner: Any, window_size: int) -> TimeWindowedSerde:
        return TimeWindowedSerde(inner, window_size)

    @staticmethod
    def session_windowed(inner: Any) -> SessionWindowedSerde:
        return SessionWindowedSerde(inner)
