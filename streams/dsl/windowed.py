"""Windowed aggregations: ``KGroupedStream.windowed_by(...)`` and their processors.

A :class:`TimeWindowedKStream` aggregates each record into every time window containing it; a
:class:`SessionWindowedKStream` merges a record with the sessions of its key that lie within
the inactivity gap. Results form a ``KTable[Windowed[K], V]`` backed by a window or session
store. Stream time is the largest timestamp the aggregation has seen (per task); a record whose
windows all closed (``end + grace <= stream time``; for sessions ``end < stream time - grace``)
is dropped, as Kafka does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from strom.streams.dsl.graph import WindowedTableInfo, count_one, repartition_through, sum_counts, zero
from strom.streams.dsl.options import Materialized, Named
from strom.streams.dsl.processors import BatchContext, CachingContext, Change
from strom.streams.dsl.windows import (
    SessionWindows,
    SlidingWindows,
    TimeWindows,
    Window,
    Windowed,
    WindowedSerdes,
)
from strom.streams.exceptions import TopologyError
from strom.streams.processor.api import Processor, ProcessorContext, Record
from strom.streams.processor.batch import Batch
from strom.streams.processor.stores import CachedWindowStoreFacade, SessionStoreFacade, WindowStoreFacade
from strom.streams.serdes import Serdes
from strom.streams.state.factory import DslStoreSupplier
from strom.streams.topology.topology import StoreSpec

if TYPE_CHECKING:
    # annotations only: the windowed streams are made by KGroupedStream.windowed_by, and their
    # tables by the builder (see strom.streams.dsl.builder)
    from strom.streams.dsl.kstream import KGroupedStream
    from strom.streams.dsl.ktable import KTable

Fn = Callable[..., Any]
_NO_TIME = -(1 << 63)
_MAX_TIME = (1 << 63) - 1
log = logging.getLogger(__name__)


def _log_expired(context: ProcessorContext, timestamp: int, start: int, end: int, expiration: int,
                 stream_time: int) -> None:
    """Kafka's warning for a record dropped because its window has closed."""
    md = context.record_metadata()
    log.warning("Skipping record for expired window. topic=[%s] partition=[%s] offset=[%s] timestamp=[%s] "
                "window=[%s,%s] expiration=[%s] streamTime=[%s]", md.topic if md else None,
                md.partition if md else None, md.offset if md else None, timestamp, start, end, expiration,
                stream_time)


def _no_getter(ctx: Any) -> Callable[[Any], Any]:
    raise TopologyError("a windowed KTable cannot be used in a table join or lookup; "
                        "join its to_stream() result or aggregate without windows")


class TimeWindowAggregate(Processor[Any, Any]):
    """count/reduce/aggregate into time windows; forwards ``Change`` per updated window.

    With the record cache on (``statestore.cache.max.bytes`` > 0, Kafka's default), updates go
    to a :class:`CachedWindowStoreFacade` (Kafka's ``CachingWindowStore``): the store write and
    the ``Change`` downstream happen once per key-window when the cache flushes (every commit,
    and when it is full), with the newest aggregate and the one stored before. Without it,
    every update is written and forwarded at once. ``process_batch`` takes a whole batch in one
    loop over the records (no Record, no serde call, one dict lookup per record).
    """

    context: BatchContext

    def __init__(self, store_name: str, windows: TimeWindows, initializer: Fn | None, aggregator: Fn | None,
                 reducer: Fn | None) -> None:
        self.store_name = store_name
        self.windows = windows
        self.initializer = initializer
        self.aggregator = aggregator
        self.reducer = reducer
        self.observed = _NO_TIME

    def init(self, context: Any) -> None:
        super().init(context)
        store = (context.get_caching_store(self.store_name, self._flushed)
                 if isinstance(context, CachingContext) else context.get_state_store(self.store_name))
        # caching off (statestore.cache.max.bytes = 0) gives the plain store
        self._cache = store if isinstance(store, CachedWindowStoreFacade) else None
        self.store = WindowStoreFacade(store)

    def _flushed(self, kw: tuple[Any, int], new: Any, old: Any, timestamp: int, headers: Any) -> None:
        start = kw[1]
        self.context.forward(Record(Windowed(kw[0], Window(start, min(start + self.windows.size, _MAX_TIME))),
                                    Change(new, old), timestamp, headers))

    def _add(self, key: Any, value: Any, agg: Any) -> Any:
        if self.reducer is not None:
            return value if agg is None else self.reducer(agg, value)
        assert self.initializer is not None and self.aggregator is not None
        return self.aggregator(key, value, self.initializer() if agg is None else agg)

    def process(self, record: Record[Any, Any]) -> None:
        key, value, ts = record.key, record.value, record.timestamp
        if key is None or value is None:
            return
        if self.observed == _NO_TIME:
            # after a restart: the restored store's latest window start is a lower bound
            self.observed = self.store.inner.observed_stream_time
        if ts > self.observed:
            self.observed = ts
        close = self.observed - self.windows.grace
        cache = self._cache
        for w in self.windows.windows_for(ts):
            if w.end <= close:  # window closed: the record is late for it
                _log_expired(self.context, ts, w.start, w.end, close, self.observed)
                continue
            if cache is not None:
                entry = cache._dirty.get((key, w.start))
                old = cache.fetch_stored(key, w.start) if entry is None else (entry[0], entry[2])
            else:
                old = self.store.fetch_one(key, w.start)
            old_agg, new_ts = (None, ts) if old is None else (old[0], max(ts, old[1]))
            new = self._add(key, value, old_agg)
            if cache is not None:  # written and forwarded when the cache flushes
                if entry is None:
                    cache.put_window(key, w.start, new, old_agg, new_ts, record.headers)
                else:
                    entry[0], entry[2], entry[3] = new, new_ts, record.headers
                continue
            self.store.put(key, new, new_ts, w.start)
            self.context.forward(Record(Windowed(key, w), Change(new, old_agg), new_ts, record.headers))

    def process_batch(self, batch: Batch) -> None:
        cache = self._cache
        if cache is None:  # every update written and forwarded at once: record by record
            self.context.process_each(batch, self.process)
            return
        keys, values = batch.keys, batch.values
        timestamps, headers = batch.timestamps(), batch.headers()
        windows = self.windows
        size, advance, grace = windows.size, windows.advance, windows.grace
        tumbling = size == advance
        reducer, initializer, aggregator = self.reducer, self.initializer, self.aggregator
        counting = reducer is None and aggregator is count_one and initializer is zero
        limit = cache.max_entries
        dirty = cache._dirty
        stored = cache.fetch_stored
        if self.observed == _NO_TIME:
            self.observed = self.store.inner.observed_stream_time
        observed = self.observed
        moved = False  # set_current moved the stream time to a record's
        n = len(keys)
        begin = i = 0
        while begin < n:
            try:
                for i in range(begin, n):
                    key = keys[i]
                    value = values[i]
                    if key is None or value is None:  # Kafka skips both
                        continue
                    ts = timestamps[i]
                    if ts > observed:
                        observed = ts
                    close = observed - grace
                    if tumbling:
                        if ts < 0:
                            continue  # no window holds a negative time (windows start at 0)
                        starts: Any = (ts - ts % size,)
                    else:
                        starts = [w.start for w in windows.windows_for(ts)]
                    for start in starts:
                        if start + size <= close:  # window closed: the record is late for it
                            self.observed = observed
                            self.context.set_current(batch, i)
                            moved = True
                            _log_expired(self.context, ts, start, start + size, close, observed)
                            continue
                        kw = (key, start)
                        entry = dirty.get(kw)
                        if entry is not None:
                            old_agg = entry[0]
                            if counting:
                                entry[0] = old_agg + 1
                            elif reducer is not None:
                                entry[0] = reducer(old_agg, value)
                            else:
                                assert aggregator is not None
                                entry[0] = aggregator(key, value, old_agg)
                            if ts > entry[2]:
                                entry[2] = ts
                            entry[3] = headers[i]
                            continue
                        old = stored(key, start)
                        old_agg, new_ts = (None, ts) if old is None else (old[0], max(ts, old[1]))
                        if counting:
                            new = 1 if old_agg is None else old_agg + 1
                        else:
                            new = self._add(key, value, old_agg)
                        if len(dirty) >= limit:
                            # this update flushes the cache: what it forwards belongs to this record
                            self.observed = observed
                            self.context.set_current(batch, i)
                            moved = True
                        cache.put_window(key, start, new, old_agg, new_ts, headers[i])
                        dirty = cache._dirty  # a flush started a new one
                break
            except Exception as exc:
                self.observed = observed
                self.context.batch_failed(batch, i, exc)
                dirty = cache._dirty
                begin = i + 1
        self.observed = observed
        if moved:
            self.context.end_current(batch)


class SlidingWindowAggregate(Processor[Any, Any]):
    """count/reduce/aggregate into sliding windows.

    Windows that contain the new record are updated incrementally (the record is aggregated
    into the stored result, as Kafka does); windows the record brings into existence (its left
    window, the right window of the previous record, its own right window) are folded from the
    key's records, kept in a second window store ``<store>-records``, in timestamp order with
    the new record last. A window ``[s, s + d]`` is closed once ``s + d < stream time - grace``;
    a record is dropped when even its right window would be closed.
    """

    def __init__(self, store_name: str, windows: SlidingWindows, initializer: Fn | None, aggregator: Fn | None,
                 reducer: Fn | None) -> None:
        self.store_name = store_name
        self.windows = windows
        self.initializer = initializer
        self.aggregator = aggregator
        self.reducer = reducer
        self.observed = _NO_TIME

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = WindowStoreFacade(context.get_state_store(self.store_name))
        self.records = WindowStoreFacade(context.get_state_store(f"{self.store_name}-records"))

    def _add(self, key: Any, value: Any, agg: Any) -> Any:
        if self.reducer is not None:
            return value if agg is None else self.reducer(agg, value)
        assert self.initializer is not None and self.aggregator is not None
        return self.aggregator(key, value, self.initializer() if agg is None else agg)

    def _fold(self, key: Any, start: int, end: int) -> tuple[Any, int, bool]:
        agg: Any = None
        max_ts, found = _NO_TIME, False
        for t, v, _ in self.records.fetch(key, start, end):
            agg = self._add(key, v, agg)
            max_ts, found = t, True
        return agg, max_ts, found

    def process(self, record: Record[Any, Any]) -> None:
        key, value, ts = record.key, record.value, record.timestamp
        if key is None or value is None:
            return
        if self.observed == _NO_TIME:
            # after a restart: the restored record store knows the latest record time
            self.observed = self.records.inner.observed_stream_time
        if ts > self.observed:
            self.observed = ts
        diff = self.windows.time_difference
        close = self.observed - self.windows.grace
        if ts + 1 + diff < close:  # even the record's right window is closed: late
            _log_expired(self.context, ts, ts + 1, ts + 1 + diff, close, self.observed)
            return
        left_start = max(0, ts - diff)
        existing = {s: (a, t) for s, a, t in self.store.fetch(key, left_start, ts + 1)}
        updates: dict[int, tuple[Any, Any, int]] = {}  # start -> (new, old, timestamp)
        for s, (agg, t) in existing.items():
            if s <= ts:  # contains the record
                updates[s] = (self._add(key, value, agg), agg, max(t, ts))
        created = [left_start]
        prev = None
        for t, _, _ in self.records.fetch(key, ts - diff - 1, ts - 1):
            prev = t  # the latest earlier record whose right window reaches this one
        if prev is not None:
            created.append(prev + 1)
        for s in created:
            if s not in existing and s not in updates:
                agg, t, _ = self._fold(key, s, s + diff)
                updates[s] = (self._add(key, value, agg), None, max(t, ts))
        if ts + 1 not in existing:
            agg, t, found = self._fold(key, ts + 1, ts + 1 + diff)
            if found:  # records after this one within the difference: its right window exists
                updates[ts + 1] = (agg, None, t)
        self.records.put(key, value, ts, ts)
        fwd = self.context.forward
        for s in sorted(updates):
            if s + diff < close:
                continue  # closed window (its end is inclusive): not updated
            new, old, t = updates[s]
            self.store.put(key, new, t, s)
            fwd(Record(Windowed(key, Window(s, s + diff)), Change(new, old), t, record.headers))


class SessionWindowAggregate(Processor[Any, Any]):
    """Session aggregation: merge overlapping sessions, forward tombstones for merged-away ones."""

    def __init__(self, store_name: str, windows: SessionWindows, initializer: Fn | None, aggregator: Fn | None,
                 merger: Fn | None, reducer: Fn | None) -> None:
        self.store_name = store_name
        self.windows = windows
        self.initializer = initializer
        self.aggregator = aggregator
        self.merger = merger
        self.reducer = reducer
        self.observed = _NO_TIME

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = SessionStoreFacade(context.get_state_store(self.store_name))

    def process(self, record: Record[Any, Any]) -> None:
        key, value, ts = record.key, record.value, record.timestamp
        if key is None or value is None:
            return
        if self.observed == _NO_TIME:
            # after a restart: the restored store's latest session end is the latest record time
            self.observed = self.store.inner.observed_stream_time
        if ts > self.observed:
            self.observed = ts
        close = self.observed - self.windows.grace
        gap = self.windows.gap
        merged = self.store.find_sessions(key, ts - gap, ts + gap)
        start, end = ts, ts
        agg: Any = None
        for s, e, _ in merged:
            start, end = min(start, s), max(end, e)
        if end < close:  # the merged session is already closed: late record
            _log_expired(self.context, ts, start, end, close, self.observed)
            return
        fwd = self.context.forward
        for s, e, a in merged:
            if self.reducer is not None:
                agg = a if agg is None else self.reducer(agg, a)
            else:
                assert self.merger is not None
                agg = self.merger(key, self.initializer() if agg is None else agg, a)  # type: ignore[misc]
            self.store.remove(key, s, e)
            fwd(Record(Windowed(key, Window(s, e)), Change(None, a), e, record.headers))
        if self.reducer is not None:
            agg = value if agg is None else self.reducer(agg, value)
        else:
            assert self.initializer is not None and self.aggregator is not None
            agg = self.aggregator(key, value, self.initializer() if agg is None else agg)
        self.store.put(key, start, end, agg)
        fwd(Record(Windowed(key, Window(start, end)), Change(agg, None), end, record.headers))


class _WindowedBase:
    def __init__(self, grouped: KGroupedStream) -> None:
        self.grouped = grouped

    def _build(self, prefix: str, m: Materialized, value_serde: Any, kind: str, retention: int,
               window_size: int | None, processor: Callable[[str], Processor[Any, Any]],
               key_serde: Any, close_delay: int) -> KTable:
        g = self.grouped
        b = g.stream.builder
        name = b.new_name(prefix)
        store = m.store_name or b.new_name(f"{prefix}-STATE-STORE")
        if m.retention_ms is not None:
            if m.retention_ms < retention:
                raise TopologyError(f"the retention period of window store {store!r} ({m.retention_ms} ms) "
                                    f"must be no smaller than its window size plus the grace period "
                                    f"({retention} ms)")
            retention = m.retention_ms
        parent = g.stream.node
        topics = g.stream.source_topics
        if g.repartition:
            parent, topic = repartition_through(b, parent, g.grouped.name or store, g.key_serde, g.value_serde,
                                                g.grouped.name is not None)
            topics = frozenset([topic])
        b.topology.add_processor(name, lambda: processor(store), parent)
        supplier = m.store_supplier
        if supplier is None:
            # in memory when called with no argument; persistent when the runtime gives it a
            # directory (strom.streams.state.factory.build_store)
            supplier = DslStoreSupplier(store, kind, retention, window_size)
        spec = StoreSpec(store, supplier, m.key_serde if m.key_serde is not None else g.key_serde,
                         m.value_serde if m.value_serde is not None else value_serde, kind=kind,
                         store_type=m.store_type, logging_enabled=m.logging_enabled, retention_ms=retention,
                         window_size=window_size, caching_enabled=m.caching_enabled)
        b.topology.add_state_store(spec, name)
        return b.new_table(name, key_serde, spec.value_serde, topics, store, _no_getter, [store],
                           WindowedTableInfo(close_delay, spec.key_serde, spec.value_serde))


class TimeWindowedKStream(_WindowedBase):
    """A grouped stream windowed by :class:`TimeWindows` (Kafka's ``TimeWindowedKStream``)."""

    def __init__(self, grouped: KGroupedStream, windows: TimeWindows) -> None:
        super().__init__(grouped)
        self.windows = windows

    def _agg(self, m: Materialized, value_serde: Any, init: Fn | None, agg: Fn | None, red: Fn | None) -> KTable:
        w = self.windows
        inner = m.key_serde if m.key_serde is not None else self.grouped.key_serde
        return self._build("KSTREAM-AGGREGATE" if red is None else "KSTREAM-REDUCE", m, value_serde, "window",
                           w.size + w.grace, w.size,
                           lambda s: TimeWindowAggregate(s, w, init, agg, red),
                           WindowedSerdes.time_windowed(inner, w.size) if inner is not None else None,
                           w.grace)

    def count(self, named: Named | str | None = None, materialized: Materialized | str | None = None) -> KTable:
        return self._agg(Materialized.of(materialized), Serdes.long(), zero, count_one, None)

    def reduce(self, reducer: Fn, named: Named | str | None = None,
               materialized: Materialized | str | None = None) -> KTable:
        """``reducer(aggregate, value)``; the first value of a window is its aggregate."""
        return self._agg(Materialized.of(materialized), self.grouped.value_serde, None, None, reducer)

    def aggregate(self, initializer: Callable[[], Any], aggregator: Fn, named: Named | str | None = None,
                  materialized: Materialized | str | None = None) -> KTable:
        """``aggregator(key, value, aggregate)`` from ``initializer()`` per window."""
        return self._agg(Materialized.of(materialized), None, initializer, aggregator, None)


class SlidingWindowedKStream(_WindowedBase):
    """A grouped stream windowed by :class:`SlidingWindows` (Kafka's sliding ``TimeWindowedKStream``)."""

    def __init__(self, grouped: KGroupedStream, windows: SlidingWindows) -> None:
        super().__init__(grouped)
        self.windows = windows

    def _agg(self, m: Materialized, value_serde: Any, init: Fn | None, agg: Fn | None, red: Fn | None) -> KTable:
        w = self.windows
        d = w.time_difference
        retention = 2 * d + w.grace + 2  # left windows of late records reach back d before them
        inner = m.key_serde if m.key_serde is not None else self.grouped.key_serde
        table = self._build("KSTREAM-AGGREGATE" if red is None else "KSTREAM-REDUCE", m, value_serde, "window",
                            retention, d, lambda s: SlidingWindowAggregate(s, w, init, agg, red),
                            WindowedSerdes.time_windowed(inner, d) if inner is not None else None,
                            w.grace + 1)  # inclusive end: closed once stream time passes end + grace
        store = table.store_name
        assert store is not None
        records = f"{store}-records"
        gvs = self.grouped.value_serde

        make = DslStoreSupplier(records, "window", retention, d, retain_duplicates=True)
        self.grouped.stream.builder.topology.add_state_store(
            StoreSpec(records, make, self.grouped.key_serde, gvs, kind="window", retention_ms=retention,
                      window_size=d, retain_duplicates=True, store_type=m.store_type,
                      logging_enabled=m.logging_enabled), table.node)
        return table

    def count(self, named: Named | str | None = None, materialized: Materialized | str | None = None) -> KTable:
        return self._agg(Materialized.of(materialized), Serdes.long(), zero, count_one, None)

    def reduce(self, reducer: Fn, named: Named | str | None = None,
               materialized: Materialized | str | None = None) -> KTable:
        return self._agg(Materialized.of(materialized), self.grouped.value_serde, None, None, reducer)

    def aggregate(self, initializer: Callable[[], Any], aggregator: Fn, named: Named | str | None = None,
                  materialized: Materialized | str | None = None) -> KTable:
        return self._agg(Materialized.of(materialized), None, initializer, aggregator, None)


class SessionWindowedKStream(_WindowedBase):
    """A grouped stream windowed by :class:`SessionWindows` (Kafka's ``SessionWindowedKStream``)."""

    def __init__(self, grouped: KGroupedStream, windows: SessionWindows) -> None:
        super().__init__(grouped)
        self.windows = windows

    def _agg(self, m: Materialized, value_serde: Any, init: Fn | None, agg: Fn | None, merger: Fn | None,
             red: Fn | None) -> KTable:
        w = self.windows
        inner = m.key_serde if m.key_serde is not None else self.grouped.key_serde
        return self._build("KSTREAM-AGGREGATE" if red is None else "KSTREAM-REDUCE", m, value_serde, "session",
                           w.gap + w.grace, None,
                           lambda s: SessionWindowAggregate(s, w, init, agg, merger, red),
                           WindowedSerdes.session_windowed(inner) if inner is not None else None,
                           w.gap + w.grace)

    def count(self, named: Named | str | None = None, materialized: Materialized | str | None = None) -> KTable:
        return self._agg(Materialized.of(materialized), Serdes.long(), zero, count_one, sum_counts, None)

    def reduce(self, reducer: Fn, named: Named | str | None = None,
               materialized: Materialized | str | None = None) -> KTable:
        return self._agg(Materialized.of(materialized), self.grouped.value_serde, None, None, None, reducer)

    def aggregate(self, initializer: Callable[[], Any], aggregator: Fn, merger: Fn,
                  named: Named | str | None = None, materialized: Materialized | str | None = None) -> KTable:
        """``aggregator(key, value, agg)``; ``merger(key, agg1, agg2)`` combines merged sessions."""
        return self._agg(Materialized.of(materialized), None, initializer, aggregator, merger, None)
