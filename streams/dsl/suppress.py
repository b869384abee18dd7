"""``KTable.suppress``: hold windowed results back until their window closes (final results).

``Suppressed.until_window_closes(BufferConfig.unbounded())`` buffers the latest value per
windowed key and emits it once stream time reaches the window's end + grace (for session
windows: end + inactivity gap + grace, as Kafka does), in window-end order. Tombstones of
sessions that were merged away are dropped rather than emitted.

strom extension: ``wall_clock=True`` also closes windows on wall-clock time when no input
arrives. Stream time is extrapolated by the wall-clock time elapsed since it last advanced
(checked by a WALL_CLOCK_TIME punctuation every ``wall_clock_interval_ms``), so a quiet topic
still gets its final results; an update that arrives afterwards for a window that was closed
this way is dropped, so a window is still emitted at most once.

The buffer is in memory: unlike Kafka it is not restored from a changelog after a restart.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any

from strom.streams.dsl.processors import Change
from strom.streams.exceptions import TopologyError
from strom.streams.processor.api import Processor, PunctuationType, Record

_NO_TIME = -(1 << 63)


class BufferConfig:
    """How much the suppression buffer may hold; only ``unbounded()`` is supported."""

    def __init__(self, max_records: int | None = None) -> None:
        self.max_records = max_records

    @classmethod
    def unbounded(cls) -> BufferConfig:
        return cls(None)


class Suppressed:
    """What to suppress (Kafka's ``Suppressed``); see the module docstring."""

    def __init__(self, buffer_config: BufferConfig, wall_clock: bool, wall_clock_interval_ms: int,
                 name: str | None = None) -> None:
        if buffer_config.max_records is not None:
            raise TopologyError("only BufferConfig.unbounded() is supported for until_window_closes")
        if wall_clock_interval_ms < 1:
            raise TopologyError(f"wall_clock_interval_ms must be >= 1, got {wall_clock_interval_ms}")
        self.buffer_config = buffer_config
        self.wall_clock = wall_clock
        self.wall_clock_interval_ms = wall_clock_interval_ms
        self.name = name

    @classmethod
    def until_window_closes(cls, buffer_config: BufferConfig, *, wall_clock: bool = False,
                            wall_clock_interval_ms: int = 1000) -> Suppressed:
        return cls(buffer_config, wall_clock, wall_clock_interval_ms)

    def with_name(self, name: str) -> Suppressed:
        return Suppressed(self.buffer_config, self.wall_clock, self.wall_clock_interval_ms, name)


class SuppressUntilWindowCloses(Processor[Any, Any]):
    """Buffers Change records keyed by ``Windowed`` keys; emits each once its window closes."""

    def __init__(self, close_delay: int, wall_clock: bool, interval: int) -> None:
        self.close_delay = close_delay  # window end + this = close time
        self.wall_clock = wall_clock
        self.interval = interval
        self.stream_time = _NO_TIME
        self.advanced_at_wall = 0
        self.closed_through = _NO_TIME  # effective time reached by wall-clock closes
        self.buffer: dict[Any, tuple[Any, int]] = {}  # windowed key -> (latest new value, timestamp)
        self.heap: list[tuple[int, int, Any]] = []  # (close time, seq, windowed key)
        self.seq = itertools.count()

    def init(self, context: Any) -> None:
        super().init(context)
        if self.wall_clock:
            self.advanced_at_wall = context.current_system_time_ms()
            context.schedule(self.interval, PunctuationType.WALL_CLOCK_TIME, self._on_wall_clock)

    def process(self, record: Record[Any, Any]) -> None:
        wkey, change = record.key, record.value
        close_at = wkey.window.end + self.close_delay
        if record.timestamp > self.stream_time:
            self.stream_time = record.timestamp
            self.advanced_at_wall = self.context.current_system_time_ms()
        if close_at <= self.closed_through:
            return  # closed on wall-clock time already: its final result was emitted
        if wkey not in self.buffer:
            heapq.heappush(self.heap, (close_at, next(self.seq), wkey))
        self.buffer[wkey] = (change.new if isinstance(change, Change) else change, record.timestamp)
        self._emit_until(self.stream_time)

    def _emit_until(self, now: int) -> None:
        heap, buffer, fwd = self.heap, self.buffer, self.context.forward
        while heap and heap[0][0] <= now:
            _, _, wkey = heapq.heappop(heap)
            value, ts = buffer.pop(wkey)
            if value is not None:  # a tombstone of a merged session: nothing was emitted for it
                fwd(Record(wkey, Change(value, None), ts))

    def _on_wall_clock(self, now: int) -> None:
        if self.stream_time == _NO_TIME:
            return
        effective = self.stream_time + max(0, now - self.advanced_at_wall)
        self.closed_through = max(self.closed_through, effective)
        self._emit_until(effective)
