"""The processors behind DSL operations.

Each is a small :class:`Processor` whose ``process`` does the operation and forwards through
its node context. KTable processors forward :class:`Change` values (new and old value of the
key), which aggregations of tables need to subtract the old contribution. Records with a None
key are dropped where Kafka drops them (aggregations, table sources, joins).

The stateless stream operators and the cached stream aggregation also take a whole
:class:`~strom.streams.processor.batch.Batch` (``process_batch``, issue 26): the user's function
is called per record in one ``map`` over the batch, with no Record, no context call and no
forward chain per record. A call that raises is handed to the processing exception handler
with its own source record (``context.batch_failed``); on CONTINUE that element is left out
and the rest go on, as record-at-a-time processing would have it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from strom.streams.exceptions import SerializationError
from strom.streams.processor.api import Processor, ProcessorContext, Record
from strom.streams.processor.batch import Batch
from strom.streams.processor.stores import CachedKeyValueStoreFacade, deserializer_of, serializer_of

Fn = Callable[..., Any]
#: ``(key, new, old, timestamp, headers)`` of one key's net update when a record cache flushes
FlushListener = Callable[[Any, Any, Any, int, Any], None]


@runtime_checkable
class CachingContext(Protocol):
    """A processor context that can put the record cache in front of a store (a task's, the
    test driver's: both are :class:`~strom.streams.topology.runtime.NodeContext`)."""

    def get_caching_store(self, name: str, listener: FlushListener) -> Any: ...


class Change:
    """New and old value of one key of a KTable (None = absent)."""

    __slots__ = ("new", "old")

    def __init__(self, new: Any, old: Any) -> None:
        self.new = new
        self.old = old

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Change) and self.new == other.new and self.old == other.old

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Change(new={self.new!r}, old={self.old!r})"


_LEN = struct.Struct(">i")


class ChangeSerde:
    """Serializes a Change for a table repartition topic: len(new) (-1 = None), new, old."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def serialize(self, topic: str, change: Any, headers: Any = None) -> bytes | None:
        if change is None:
            return None
        ser = serializer_of(self.inner)
        new = ser(topic, change.new)
        old = ser(topic, change.old)
        parts = [_LEN.pack(-1 if new is None else len(new))]
        if new is not None:
            parts.append(new)
        parts.append(b"\x00" if old is None else b"\x01" + old)
        return b"".join(parts)

    def deserialize(self, topic: str, data: bytes | None, headers: Any = None) -> Change | None:
        if data is None:
            return None
        try:
            (n,) = _LEN.unpack_from(data, 0)
            pos = 4
            de = deserializer_of(self.inner)
            new = None
            if n >= 0:
                new = de(topic, data[pos:pos + n])
                pos += n
            old = de(topic, data[pos + 1:]) if data[pos] == 1 else None
        except (struct.error, IndexError) as exc:
            raise SerializationError(f"corrupt table change record from topic {topic!r}: {exc}") from exc
        return Change(new, old)


# -- batches ------------------------------------------------------------------------------

class BatchContext(ProcessorContext, Protocol):
    """What a processor's ``process_batch`` needs of its context (the runtime's NodeContext)."""

    def forward_batch(self, batch: Batch) -> None: ...

    def batch_failed(self, batch: Batch, i: int, exc: Exception) -> None: ...

    def set_current(self, batch: Batch, i: int) -> None: ...

    def end_current(self, batch: Batch) -> None: ...

    def process_each(self, batch: Batch, process: Callable[[Record[Any, Any]], None]) -> None: ...


Finish = Callable[[Batch, list[Any]], None]


def _stage(context: BatchContext, batch: Batch, fn: Fn, cols: tuple[list[Any], ...], finish: Finish) -> None:
    """``finish(batch, [fn(*args) for args in zip(*cols)])``: one ``map`` over the batch.

    An element whose call raises splits the batch as record-at-a-time processing would order
    things: the elements before it are finished (sent downstream) first, then the failure goes to
    ``context.batch_failed`` (which raises unless the handler answers CONTINUE), then the rest
    go on without it."""
    out: list[Any] = []
    try:
        out.extend(map(fn, *cols))  # extend keeps what was mapped before a failure
    except Exception as exc:
        failed, err = len(out), exc
    else:
        finish(batch, out)
        return
    n, start = len(batch), 0
    while True:
        if failed > start:
            finish(batch.slice(start, failed), out)
        context.batch_failed(batch, failed, err)
        start = failed + 1
        if start >= n:
            return
        out = []
        try:
            out.extend(map(fn, *(c[start:] for c in cols)))
        except Exception as exc:
            failed, err = start + len(out), exc
            continue
        finish(batch.slice(start, n), out)
        return


def _pair(kv: Any) -> tuple[Any, Any]:
    k, v = kv
    return k, v


def _pairs(kvs: Any) -> list[tuple[Any, Any]]:
    return [(k, v) for k, v in kvs]


def _as_list(values: Any) -> list[Any]:
    return values if values.__class__ is list else list(values)


def _flat(context: BatchContext, batch: Batch, lists: list[Any], keep_key: bool) -> None:
    """Forward the elements of the iterables ``lists`` (one per element of ``batch``), each
    with its element's key (``keep_key``) or as (key, value) pairs (flat_map)."""
    try:
        lists = [x if x.__class__ is list else list(x) for x in lists]
    except Exception:  # an iterable that raises: find whose, in order
        _stage(context, batch, _as_list, (lists,), lambda b, ls: _flat(context, b, ls, keep_key))
        return
    if keep_key:
        values = [v for vs in lists for v in vs]
        keys = [k for k, vs in zip(batch.keys, lists, strict=True) for _ in vs]
    else:
        try:
            keys = [k for kvs in lists for k, _ in kvs]
            values = [v for kvs in lists for _, v in kvs]
        except Exception:  # a mapper returned something else than (key, value) pairs
            _stage(context, batch, _pairs, (lists,), lambda b, ls: _flat(context, b, ls, keep_key))
            return
    if not keys:
        return
    src = batch.src
    if src is None:
        new_src = [i for i, vs in enumerate(lists) for _ in vs]
    else:
        new_src = [s for s, vs in zip(src, lists, strict=True) for _ in vs]
    context.forward_batch(Batch(keys, values, new_src, batch.origin))


# -- stateless KStream --------------------------------------------------------------------

class Filter(Processor[Any, Any]):
    context: BatchContext

    def __init__(self, predicate: Fn, negate: bool) -> None:
        self.predicate = predicate
        self.negate = negate

    def process(self, record: Record[Any, Any]) -> None:
        if bool(self.predicate(record.key, record.value)) != self.negate:
            self.context.forward(record)

    def process_batch(self, batch: Batch) -> None:
        _stage(self.context, batch, self.predicate, (batch.keys, batch.values), self._chosen)

    def _chosen(self, batch: Batch, flags: list[Any]) -> None:
        negate = self.negate
        try:
            chosen = [i for i, f in enumerate(flags) if bool(f) != negate]
        except Exception:  # a result without a truth value: find whose, in order
            _stage(self.context, batch, bool, (flags,), self._chosen)
            return
        if len(chosen) < len(flags):
            batch = batch.select(chosen)
        if len(batch):
            self.context.forward_batch(batch)


class Map(Processor[Any, Any]):
    context: BatchContext

    def __init__(self, mapper: Fn) -> None:
        self.mapper = mapper

    def process(self, record: Record[Any, Any]) -> None:
        k, v = self.mapper(record.key, record.value)
        self.context.forward(Record(k, v, record.timestamp, record.headers))

    def process_batch(self, batch: Batch) -> None:
        _stage(self.context, batch, self.mapper, (batch.keys, batch.values), self._mapped)

    def _mapped(self, batch: Batch, pairs: list[Any]) -> None:
        try:
            keys = [k for k, _ in pairs]
            values = [v for _, v in pairs]
        except Exception:  # a mapper returned something else than a (key, value) pair
            _stage(self.context, batch, _pair, (pairs,), self._mapped)
            return
        self.context.forward_batch(Batch(keys, values, batch.src, batch.origin))


class MapValues(Processor[Any, Any]):
    context: BatchContext

    def __init__(self, mapper: Fn, with_key: bool) -> None:
        self.mapper = mapper
        self.with_key = with_key

    def process(self, record: Record[Any, Any]) -> None:
        v = self.mapper(record.key, record.value) if self.with_key else self.mapper(record.value)
        self.context.forward(Record(record.key, v, record.timestamp, record.headers))

    def process_batch(self, batch: Batch) -> None:
        cols = (batch.keys, batch.values) if self.with_key else (batch.values,)
        _stage(self.context, batch, self.mapper, cols, self._mapped)

    def _mapped(self, batch: Batch, values: list[Any]) -> None:
        self.context.forward_batch(Batch(batch.keys, values, batch.src, batch.origin))


class FlatMap(Processor[Any, Any]):
    context: BatchContext

    def __init__(self, mapper: Fn) -> None:
        self.mapper = mapper

    def process(self, record: Record[Any, Any]) -> None:
        ts, h, fwd = record.timestamp, record.headers, self.context.forward
        for k, v in self.mapper(record.key, record.value):
            fwd(Record(k, v, ts, h))

    def process_batch(self, batch: Batch) -> None:
        context = self.context
        _stage(context, batch, self.mapper, (batch.keys, batch.values),
               lambda b, lists: _flat(context, b, lists, False))


class FlatMapValues(Processor[Any, Any]):
    context: BatchContext

    def __init__(self, mapper: Fn, with_key: bool) -> None:
        self.mapper = mapper
        self.with_key = with_key

    def process(self, record: Record[Any, Any]) -> None:
        key, ts, h, fwd = record.key, record.timestamp, record.headers, self.context.forward
        values: Iterable[Any] = (self.mapper(key, record.value) if self.with_key
                                 else self.mapper(record.value))
        for v in values:
            fwd(Record(key, v, ts, h))

    def process_batch(self, batch: Batch) -> None:
        context = self.context
        cols = (batch.keys, batch.values) if self.with_key else (batch.values,)
        _stage(context, batch, self.mapper, cols, lambda b, lists: _flat(context, b, lists, True))


class SelectKey(Processor[Any, Any]):
    context: BatchContext

    def __init__(self, mapper: Fn) -> None:
        self.mapper = mapper

    def process(self, record: Record[Any, Any]) -> None:
        self.context.forward(Record(self.mapper(record.key, record.value), record.value, record.timestamp,
                                    record.headers))

    def process_batch(self, batch: Batch) -> None:
        _stage(self.context, batch, self.mapper, (batch.keys, batch.values), self._keyed)

    def _keyed(self, batch: Batch, keys: list[Any]) -> None:
        self.context.forward_batch(Batch(keys, batch.values, batch.src, batch.origin))


class Peek(Processor[Any, Any]):
    context: BatchContext

    def __init__(self, action: Fn, forward: bool) -> None:
        self.action = action
        self.fwd = forward

    def process(self, record: Record[Any, Any]) -> None:
        self.action(record.key, record.value)
        if self.fwd:
            self.context.forward(record)

    def process_batch(self, batch: Batch) -> None:
        _stage(self.context, batch, self.action, (batch.keys, batch.values), self._acted)

    def _acted(self, batch: Batch, _: list[Any]) -> None:
        if self.fwd:
            self.context.forward_batch(batch)


class PassThrough(Processor[Any, Any]):
    context: BatchContext

    def process(self, record: Record[Any, Any]) -> None:
        self.context.forward(record)

    def process_batch(self, batch: Batch) -> None:
        self.context.forward_batch(batch)


class Branch(Processor[Any, Any]):
    """Sends each record to the first branch whose predicate holds, else the default branch."""

    def __init__(self, predicates: list[tuple[Fn, str]], default: str | None) -> None:
        self.predicates = predicates
        self.default = default

    def process(self, record: Record[Any, Any]) -> None:
        k, v = record.key, record.value
        for pred, child in self.predicates:
            if pred(k, v):
                self.context.forward(record, child)
                return
        if self.default is not None:
            self.context.forward(record, self.default)


class DropNullKey(Processor[Any, Any]):
    """Before a repartition topic: a None key has no partition, so Kafka drops the record."""

    context: BatchContext

    def process(self, record: Record[Any, Any]) -> None:
        if record.key is not None:
            self.context.forward(record)

    def process_batch(self, batch: Batch) -> None:
        keys = batch.keys
        if None in keys:
            batch = batch.select([i for i, k in enumerate(keys) if k is not None])
            if not len(batch):
                return
        self.context.forward_batch(batch)


# -- aggregations -------------------------------------------------------------------------

def zero() -> int:
    """count's initializer."""
    return 0


def count_one(key: Any, value: Any, agg: int) -> int:
    """count's aggregator (a cached count's batch adds 1 without calling it)."""
    return agg + 1


class StreamAggregate(Processor[Any, Any]):
    """count/reduce/aggregate of a grouped stream: store the new aggregate, forward the Change.

    ``reducer`` given: reduce (first value is the aggregate); else ``initializer``/``aggregator``.
    """

    context: BatchContext

    def __init__(self, store_name: str, initializer: Fn | None, aggregator: Fn | None,
                 reducer: Fn | None) -> None:
        self.store_name = store_name
        self.initializer = initializer
        self.aggregator = aggregator
        self.reducer = reducer

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = (context.get_caching_store(self.store_name, self._flushed)
                      if isinstance(context, CachingContext) else context.get_state_store(self.store_name))
        # caching off (statestore.cache.max.bytes = 0) gives the plain store
        self._cache = self.store if isinstance(self.store, CachedKeyValueStoreFacade) else None

    def _flushed(self, key: Any, new: Any, old: Any, timestamp: int, headers: Any) -> None:
        self.context.forward(Record(key, Change(new, old), timestamp, headers))

    def process(self, record: Record[Any, Any]) -> None:
        key, value = record.key, record.value
        if key is None or value is None:  # Kafka skips both
            return
        store = self.store
        old = store.get(key)
        if self.reducer is not None:
            new = value if old is None else self.reducer(old, value)
        else:
            assert self.initializer is not None and self.aggregator is not None
            new = self.aggregator(key, value, self.initializer() if old is None else old)
        if self._cache is not None:  # written and forwarded when the cache flushes
            self._cache.put_cached(key, new, old, record.timestamp, record.headers)
            return
        store.put(key, new)
        self.context.forward(Record(key, Change(new, old), record.timestamp, record.headers))

    def process_batch(self, batch: Batch) -> None:
        cache = self._cache
        if cache is None:  # every update written and forwarded at once: record by record
            self.context.process_each(batch, self.process)
            return
        keys, values = batch.keys, batch.values
        timestamps, headers = batch.timestamps(), batch.headers()
        read = cache.inner.get
        reducer, initializer, aggregator = self.reducer, self.initializer, self.aggregator
        counting = reducer is None and aggregator is count_one and initializer is zero
        limit = cache.max_entries
        dirty = cache._dirty
        moved = False  # set_current moved the stream time to a record's
        n = len(keys)
        start = i = 0
        while start < n:
            try:
                for i in range(start, n):
                    key = keys[i]
                    value = values[i]
                    if key is None or value is None:  # Kafka skips both
                        continue
                    entry = dirty.get(key)
                    old = read(key) if entry is None else entry[0]
                    if counting:
                        new = 1 if old is None else old + 1
                    elif reducer is not None:
                        new = value if old is None else reducer(old, value)
                    else:
                        assert initializer is not None and aggregator is not None
                        new = aggregator(key, value, initializer() if old is None else old)
                    if entry is not None:
                        entry[0] = new
                        entry[2] = timestamps[i]
                        entry[3] = headers[i]
                        continue
                    if len(dirty) >= limit:
                        # this update flushes the cache: what it forwards belongs to this record
                        self.context.set_current(batch, i)
                        moved = True
                    cache.put_cached(key, new, old, timestamps[i], headers[i])
                    dirty = cache._dirty  # a flush started a new one
                break
            except Exception as exc:
                self.context.batch_failed(batch, i, exc)
                dirty = cache._dirty
                start = i + 1
        if moved:
            self.context.end_current(batch)


class TableAggregate(Processor[Any, Any]):
    """Aggregation of a grouped table: subtract the old value, add the new one."""

    def __init__(self, store_name: str, initializer: Fn | None, adder: Fn, subtractor: Fn,
                 reduce: bool) -> None:
        self.store_name = store_name
        self.initializer = initializer
        self.adder = adder
        self.subtractor = subtractor
        self.reduce = reduce

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)

    def process(self, record: Record[Any, Any]) -> None:
        key, change = record.key, record.value
        if key is None or change is None:
            return
        old_agg = self.store.get(key)
        agg = old_agg
        if change.old is not None and agg is not None:
            agg = (self.subtractor(agg, change.old) if self.reduce
                   else self.subtractor(key, change.old, agg))
        if change.new is not None:
            if self.reduce:
                agg = change.new if agg is None else self.adder(agg, change.new)
            else:
                assert self.initializer is not None
                agg = self.adder(key, change.new, self.initializer() if agg is None else agg)
        self.store.put(key, agg)
        self.context.forward(Record(key, Change(agg, old_agg), record.timestamp, record.headers))


# -- KTable -------------------------------------------------------------------------------

class TableSource(Processor[Any, Any]):
    """Upserts a topic into the table's store and forwards Change(new, old)."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)

    def process(self, record: Record[Any, Any]) -> None:
        key = record.key
        if key is None:
            return
        old = self.store.get(key)
        self.store.put(key, record.value)
        self.context.forward(Record(key, Change(record.value, old), record.timestamp, record.headers))


class GlobalTableUpdate(Processor[Any, Any]):
    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)

    def process(self, record: Record[Any, Any]) -> None:
        if record.key is not None:
            self.store.put(record.key, record.value)


class TableMapValues(Processor[Any, Any]):
    def __init__(self, mapper: Fn, with_key: bool, store_name: str | None) -> None:
        self.mapper = mapper
        self.with_key = with_key
        self.store_name = store_name

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name) if self.store_name else None

    def _map(self, key: Any, value: Any) -> Any:
        if value is None:
            return None
        return self.mapper(key, value) if self.with_key else self.mapper(value)

    def process(self, record: Record[Any, Any]) -> None:
        key, change = record.key, record.value
        new = self._map(key, change.new)
        if self.store is not None:
            old = self.store.get(key)
            self.store.put(key, new)
        else:
            old = self._map(key, change.old)
        self.context.forward(Record(key, Change(new, old), record.timestamp, record.headers))


class TableFilter(Processor[Any, Any]):
    def __init__(self, predicate: Fn, negate: bool, store_name: str | None) -> None:
        self.predicate = predicate
        self.negate = negate
        self.store_name = store_name

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name) if self.store_name else None

    def _keep(self, key: Any, value: Any) -> Any:
        if value is None or bool(self.predicate(key, value)) == self.negate:
            return None
        return value

    def process(self, record: Record[Any, Any]) -> None:
        key, change = record.key, record.value
        new = self._keep(key, change.new)
        if self.store is not None:
            old = self.store.get(key)
            self.store.put(key, new)
        else:
            old = self._keep(key, change.old)
        if new is None and old is None:  # not in the filtered table before or after
            return
        self.context.forward(Record(key, Change(new, old), record.timestamp, record.headers))


class TableToStream(Processor[Any, Any]):
    def __init__(self, mapper: Fn | None) -> None:
        self.mapper = mapper

    def process(self, record: Record[Any, Any]) -> None:
        new = record.value.new
        if self.mapper is not None:
            self.context.forward(Record(self.mapper(record.key, new), new, record.timestamp, record.headers))
        else:
            self.context.forward(Record(record.key, new, record.timestamp, record.headers))


class TableRepartitionMap(Processor[Any, Any]):
    """KTable.group_by: the old value leaves its group, then the new value joins its group."""

    def __init__(self, selector: Fn) -> None:
        self.selector = selector

    def process(self, record: Record[Any, Any]) -> None:
        key, change = record.key, record.value
        ts, h, fwd = record.timestamp, record.headers, self.context.forward
        if change.old is not None:
            ok, ov = self.selector(key, change.old)
            fwd(Record(ok, Change(None, ov), ts, h))
        if change.new is not None:
            nk, nv = self.selector(key, change.new)
            fwd(Record(nk, Change(nv, None), ts, h))


# -- joins --------------------------------------------------------------------------------

class StreamTableJoin(Processor[Any, Any]):
    """Looks the stream record's key up in the table (or a key mapped for a global table)."""

    def __init__(self, getter_factory: Callable[[Any], Callable[[Any], Any]], joiner: Fn, left: bool,
                 key_mapper: Fn | None) -> None:
        self.getter_factory = getter_factory
        self.joiner = joiner
        self.left = left
        self.key_mapper = key_mapper

    def init(self, context: Any) -> None:
        super().init(context)
        self.getter = self.getter_factory(context)

    def process(self, record: Record[Any, Any]) -> None:
        key, value = record.key, record.value
        lookup = self.key_mapper(key, value) if self.key_mapper is not None else key
        if lookup is None or value is None:  # Kafka drops: nothing to join on
            return
        other = self.getter(lookup)
        if other is None and not self.left:
            return
        self.context.forward(Record(key, self.joiner(value, other), record.timestamp, record.headers))


class TableTableJoin(Processor[Any, Any]):
    """One side of a table-table join: on a change here, look the key up on the other side.

    ``this_is_left`` orders the joiner's arguments; ``mode`` is inner, left or outer. The result
    store (when materialized) keeps the joined value so that Change.old is exact.
    """

    def __init__(self, this_getter: Callable[[Any], Callable[[Any], Any]],
                 other_getter: Callable[[Any], Callable[[Any], Any]], joiner: Fn, this_is_left: bool,
                 mode: str, store_name: str | None) -> None:
        self.this_getter_factory = this_getter
        self.other_getter_factory = other_getter
        self.joiner = joiner
        self.this_is_left = this_is_left
        self.mode = mode
        self.store_name = store_name

    def init(self, context: Any) -> None:
        super().init(context)
        self.other = self.other_getter_factory(context)
        self.store = context.get_state_store(self.store_name) if self.store_name else None

    def _join(self, this: Any, other: Any) -> Any:
        left, right = (this, other) if self.this_is_left else (other, this)
        if left is None and right is None:
            return None
        if self.mode == "inner" and (left is None or right is None):
            return None
        if self.mode == "left" and left is None:
            return None
        return self.joiner(left, right)

    def process(self, record: Record[Any, Any]) -> None:
        key, change = record.key, record.value
        if key is None:
            return
        other = self.other(key)
        new = self._join(change.new, other)
        if self.store is not None:
            old = self.store.get(key)
            self.store.put(key, new)
        else:
            old = self._join(change.old, other)
        if new is None and old is None:
            return
        self.context.forward(Record(key, Change(new, old), record.timestamp, record.headers))
