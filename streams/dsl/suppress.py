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

The buffer is a key-value state store (``<name>-store``, else ``KTABLE-SUPPRESS-STATE-STORE-<n>``),
change-logged like every store, as Kafka's ``InMemoryTimeOrderedKeyValueBuffer`` is: after a
crash it is restored with the suppression's stream time, and because the emission of a final
result and the removal of its entry are committed together (in one transaction under
exactly_once_v2), a final result is neither lost nor emitted twice. Entry keys are
``0x01 + close time + window key + window start + window end``, so entries sort by close time;
the processor keeps a heap of close times over them, rebuilt from the store on first use.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterator
from typing import Any

from strom.streams.dsl.processors import Change
from strom.streams.dsl.windows import Window, Windowed
from strom.streams.exceptions import SerializationError, TopologyError
from strom.streams.processor.api import Processor, PunctuationType, Record
from strom.streams.processor.stores import AUTO_SERDE, deserializer_of, serializer_of
from strom.streams.state import keys as K

_NO_TIME = -(1 << 63)
_MAX_TIME = (1 << 63) - 1
_ENTRY = b"\x01"
_META_STREAM_TIME = b"\x00stream_time"
_META_CLOSED_THROUGH = b"\x00closed_through"
_BOUNDS = struct.Struct(">qq")  # window start, end (after the key in an entry key)
_VALUE_HEAD = struct.Struct(">qQB")  # record timestamp, insertion sequence, 1 = has a value


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

    def __init__(self, store_name: str, close_delay: int, wall_clock: bool, interval: int,
                 key_serde: Any = None, value_serde: Any = None) -> None:
        self.store_name = store_name
        self.close_delay = close_delay  # window end + this = close time
        self.wall_clock = wall_clock
        self.interval = interval
        self._kser = serializer_of(key_serde if key_serde is not None else AUTO_SERDE)
        self._kde = deserializer_of(key_serde if key_serde is not None else AUTO_SERDE)
        self._vser = serializer_of(value_serde if value_serde is not None else AUTO_SERDE)
        self._vde = deserializer_of(value_serde if value_serde is not None else AUTO_SERDE)
        self.stream_time = _NO_TIME
        self.advanced_at_wall = 0
        self.closed_through = _NO_TIME  # effective time reached by wall-clock closes
        self.heap: list[tuple[int, int, bytes]] = []  # (close time, sequence, entry key)
        self.seq = 0
        self._loaded = False

    def init(self, context: Any) -> None:
        super().init(context)
        facade = context.get_state_store(self.store_name)
        self.store = facade.inner  # the byte store (change-logging in a runtime)
        self._topic = facade._topic
        self._loaded = False
        if self.wall_clock:
            self.advanced_at_wall = context.current_system_time_ms()
            context.schedule(self.interval, PunctuationType.WALL_CLOCK_TIME, self._on_wall_clock)

    def _load(self) -> None:
        """Rebuild the in-memory view from the store (done lazily: a runtime restores stores
        from their changelogs after it has initialised the processors)."""
        store = self.store
        t = store.get(_META_STREAM_TIME)
        self.stream_time = _NO_TIME if t is None else K.decode_time(t)
        c = store.get(_META_CLOSED_THROUGH)
        self.closed_through = _NO_TIME if c is None else K.decode_time(c)
        heap: list[tuple[int, int, bytes]] = []
        seq = 0
        for k, v in store.prefix_scan(_ENTRY):
            _, s, _ = _VALUE_HEAD.unpack_from(v, 0)
            heap.append((K.decode_time(k[1:9]), s, k))
            seq = max(seq, s)
        heapq.heapify(heap)
        self.heap = heap
        self.seq = seq
        self._loaded = True

    def _entry_key(self, wkey: Windowed, close_at: int) -> bytes:
        kb = self._kser(self._topic, wkey.key)
        if kb is None:
            raise SerializationError(f"suppress buffer {self.store_name!r}: window key must not be None")
        return _ENTRY + K.encode_time(close_at) + kb + _BOUNDS.pack(wkey.window.start, wkey.window.end)

    def process(self, record: Record[Any, Any]) -> None:
        if not self._loaded:
            self._load()
        wkey, change = record.key, record.value
        close_at = min(wkey.window.end + self.close_delay, _MAX_TIME)
        if close_at <= self.closed_through or close_at <= self.stream_time:
            # closed already (on wall-clock or stream time): its final result was emitted. Upstream
            # drops such records itself, unless its stream time was lost in a restart.
            return
        if record.timestamp > self.stream_time:
            self.stream_time = record.timestamp
            self.store.put(_META_STREAM_TIME, K.encode_time(self.stream_time))
            self.advanced_at_wall = self.context.current_system_time_ms()
        ek = self._entry_key(wkey, close_at)
        old = self.store.get(ek)
        if old is None:
            self.seq += 1
            seq = self.seq
            heapq.heappush(self.heap, (close_at, seq, ek))
        else:
            seq = _VALUE_HEAD.unpack_from(old, 0)[1]  # keeps its place in the emission order
        value = change.new if isinstance(change, Change) else change
        if value is None:
            self.store.put(ek, _VALUE_HEAD.pack(record.timestamp, seq, 0))
        else:
            vb = self._vser(self._topic, value) or b""
            self.store.put(ek, _VALUE_HEAD.pack(record.timestamp, seq, 1) + vb)
        self._emit_until(self.stream_time)

    def _emit_until(self, now: int) -> None:
        for wkey, value, ts in self._pop_closed(now):
            if value is not None:  # a tombstone of a merged session: nothing was emitted for it
                self.context.forward(Record(wkey, Change(value, None), ts))

    def _pop_closed(self, now: int) -> Iterator[tuple[Windowed, Any, int]]:
        heap, store = self.heap, self.store
        while heap and heap[0][0] <= now:
            _, _, ek = heapq.heappop(heap)
            data = store.get(ek)
            if data is None:
                continue
            store.delete(ek)
            ts, _, has_value = _VALUE_HEAD.unpack_from(data, 0)
            start, end = _BOUNDS.unpack_from(ek, len(ek) - 16)
            key = self._kde(self._topic, ek[9:-16])
            value = self._vde(self._topic, data[_VALUE_HEAD.size:]) if has_value else None
            yield Windowed(key, Window(start, end)), value, ts

    def _on_wall_clock(self, now: int) -> None:
        if not self._loaded:
            self._load()
        if self.stream_time == _NO_TIME:
            return
        effective = self.stream_time + max(0, now - self.advanced_at_wall)
        if effective > self.closed_through:
            self.closed_through = effective
            self.store.put(_META_CLOSED_THROUGH, K.encode_time(effective))
        self._emit_until(effective)
