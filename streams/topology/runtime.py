"""Runs a :class:`Topology` in-process: instantiates processors and stores, drives records.

:class:`TopologyRuntime` is the task-level engine: ``process_input`` deserializes one input
record at its source node and pushes it depth-first through the node chain by direct method
calls (a node's context holds its children's bound ``process`` methods, so ``forward`` costs a
loop over a list, nothing more). Sinks serialize and hand bytes to the ``emit`` callback given
by the owner (the TopologyTestDriver, later the Kafka task). Punctuations on stream time fire
after each input record; wall-clock punctuations fire from ``punctuate_wall_clock``.

``process_batch`` (the stream thread's entry, issue 26) takes the records of one poll for one
source partition, in batches of at most ``MAX_BATCH_RECORDS``: the source deserializes them in
one call per serde and a
:class:`~strom.streams.processor.batch.Batch` moves through the linear part of the sub-topology
(operators with ``process_batch``: the stateless DSL operators, cached aggregations, sinks,
which produce through ``emit_batch``). Where the chain fans out or reaches a processor without
``process_batch`` the batch is unrolled and each record goes on as ``process_input`` would send
it, with its metadata and stream time. A batch is cut where a stream-time punctuation falls due,
so punctuations fire between the same records as before; a batch whose source cannot be
deserialized whole goes record by record (the deserialization handler's way).
"""

from __future__ import annotations

import heapq
import itertools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from strom.streams.exceptions import StreamsError, TopologyError
from strom.streams.processor.api import Processor, PunctuationType, Record, RecordMetadata
from strom.streams.processor.batch import Batch, SourceRecords
from strom.streams.processor.stores import (
    AUTO_SERDE,
    CachedKeyValueStoreFacade,
    KeyValueStoreFacade,
    batch_deserializer_of,
    batch_serializer_of,
    deserializer_of,
    serializer_of,
)
from strom.streams.state.keyvalue import InMemoryKeyValueStore, RocksDBKeyValueStore
from strom.streams.topology.errors import (
    ErrorContext,
    ErrorHandling,
    ErrorKind,
    is_record_error,
)
from strom.streams.topology.topology import ProcessorNodeDef, SinkNodeDef, SourceNodeDef, StoreSpec, Topology

Headers = Sequence[tuple[str, bytes | None]] | None
Emit = Callable[[str, bytes | None, bytes | None, int, Headers], None]
#: ``emit_batch(topic, keys, values, timestamps, headers)``: produce a batch in order; a failure
#: at element i is raised as :class:`EmitBatchError` (index i, the failure as ``__cause__``)
EmitBatch = Callable[[str, list[bytes | None], list[bytes | None], list[int], list[Headers]], None]
BatchProcess = Callable[[Batch], None]

#: source records per batch at most. A batch runs stage by stage, so a user function's side
#: effect on record i (a peek that blocks, say) happens before the output of records < i in
#: the same batch is produced; small batches keep that window small (and the working set)
#: while the per-batch cost stays a few percent of the per-record work.
MAX_BATCH_RECORDS = 32


class EmitBatchError(Exception):
    """``emit_batch`` failed at element ``index``; the elements before it were produced."""

    def __init__(self, index: int) -> None:
        super().__init__(f"producing element {index} of a batch failed")
        self.index = index


def emit_batch_of(emit: Emit) -> EmitBatch:
    """An ``emit_batch`` calling ``emit`` per element, for owners that give only ``emit``."""

    def emit_batch(topic: str, keys: list[bytes | None], values: list[bytes | None], timestamps: list[int],
                   headers: list[Headers]) -> None:
        i = 0
        try:
            for i in range(len(keys)):
                emit(topic, keys[i], values[i], timestamps[i], headers[i])
        except Exception as exc:
            raise EmitBatchError(i) from exc

    return emit_batch


class _Schedule:
    """One scheduled punctuation; ordered by next due time in a heap."""

    __slots__ = ("callback", "cancelled", "interval", "next_time", "node_ctx")

    def __init__(self, next_time: int, interval: int, callback: Callable[[int], None],
                 node_ctx: NodeContext) -> None:
        self.next_time = next_time
        self.interval = interval
        self.callback = callback
        self.node_ctx = node_ctx
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: _Schedule) -> bool:
        return self.next_time < other.next_time


class NodeContext:
    """The ProcessorContext of one node: forwards to that node's children only."""

    __slots__ = ("_batch_child", "_children", "_named", "_stores", "node_name", "runtime")

    def __init__(self, runtime: TopologyRuntime, node_name: str, store_names: Sequence[str]) -> None:
        self.runtime = runtime
        self.node_name = node_name
        self._children: list[Callable[[Record[Any, Any]], None]] = []
        self._named: dict[str, Callable[[Record[Any, Any]], None]] = {}
        self._stores = frozenset(store_names)
        # where forward_batch sends a batch: the one child's batch entry, or (no child, several
        # children: their per-record order must not change) the unrolling to forward()
        self._batch_child: BatchProcess | None = None

    @property
    def application_id(self) -> str:
        return self.runtime.application_id

    @property
    def task_id(self) -> str:
        return self.runtime.task_id

    def forward(self, record: Record[Any, Any], child_name: str | None = None) -> None:
        if child_name is None:
            for child in self._children:
                child(record)
        else:
            target = self._named.get(child_name)
            if target is None:
                raise StreamsError(f"node {self.node_name!r} has no child named {child_name!r}")
            target(record)

    def forward_batch(self, batch: Batch) -> None:
        """Send every record of ``batch`` on, in order (as a batch where the child takes one)."""
        child = self._batch_child
        if child is not None:
            child(batch)
        elif self._children:
            self.runtime.process_each(batch, self.forward)

    def batch_failed(self, batch: Batch, i: int, exc: Exception) -> None:
        """Element ``i`` of ``batch`` raised ``exc`` in this node: the processing handler decides
        (raises unless it answers CONTINUE; then the caller drops the element and goes on)."""
        self.runtime.batch_failed(batch, i, exc)

    def set_current(self, batch: Batch, i: int) -> None:
        """Make element ``i`` of ``batch`` the record being processed (metadata, stream time)."""
        self.runtime.set_current(batch, i)

    def end_current(self, batch: Batch) -> None:
        """Back to the stream time after the whole batch."""
        self.runtime.end_current(batch)

    def process_each(self, batch: Batch, process: Callable[[Record[Any, Any]], None]) -> None:
        """Hand the elements of ``batch`` to a per-record ``process`` (see the runtime's)."""
        self.runtime.process_each(batch, process)

    def get_state_store(self, name: str) -> Any:
        if name in self._stores:
            local = self.runtime.stores.get(name)
            if local is not None:
                return local
        glob = self.runtime.global_stores.get(name)
        if glob is not None:
            return glob
        raise TopologyError(f"processor {self.node_name!r} has no access to state store {name!r}; "
                            f"connect it when adding the processor")

    def get_caching_store(self, name: str, listener: Callable[[Any, Any, Any, int, Any], None]) -> Any:
        """The store ``name`` behind the runtime's record cache, if caching is on (else the store).

        ``listener(key, new, old, timestamp, headers)`` receives each key's net update when the
        cache flushes (at every commit); the caller forwards it downstream then.
        """
        if name not in self._stores or name not in self.runtime.stores:
            return self.get_state_store(name)
        return self.runtime.caching_store(name, listener)

    def record_metadata(self) -> RecordMetadata | None:
        return self.runtime.metadata

    def current_stream_time_ms(self) -> int:
        return self.runtime.stream_time

    def current_system_time_ms(self) -> int:
        return self.runtime.wall_clock_ms

    def schedule(self, interval_ms: int, punctuation_type: PunctuationType,
                 callback: Callable[[int], None]) -> _Schedule:
        if interval_ms < 1:
            raise StreamsError(f"punctuation interval must be >= 1 ms, got {interval_ms}")
        return self.runtime.schedule(self, interval_ms, punctuation_type, callback)


class _SourceProcessor(Processor[Any, Any]):
    context: NodeContext

    def process(self, record: Record[Any, Any]) -> None:
        self.context.forward(record)

    def process_batch(self, batch: Batch) -> None:
        self.context.forward_batch(batch)


class _SinkProcessor(Processor[Any, Any]):
    __slots__ = ("emit", "emit_batch", "kser", "kser_batch", "runtime", "topic", "vser", "vser_batch")

    def __init__(self, topic: str, key_serde: Any, value_serde: Any, emit: Emit, emit_batch: EmitBatch,
                 runtime: TopologyRuntime) -> None:
        self.topic = topic
        self.kser = serializer_of(key_serde)
        self.vser = serializer_of(value_serde)
        self.kser_batch = batch_serializer_of(key_serde)
        self.vser_batch = batch_serializer_of(value_serde)
        self.emit = emit
        self.emit_batch = emit_batch
        self.runtime = runtime

    def process_batch(self, batch: Batch) -> None:
        topic = self.topic
        try:
            keys = self.kser_batch(topic, batch.keys)
            values = self.vser_batch(topic, batch.values)
        except Exception:
            # some record cannot be serialized: record by record, so the handler sees that one
            self.runtime.process_each(batch, self.process)
            return
        timestamps, headers = batch.timestamps(), batch.headers()
        start, n = 0, len(keys)
        while start < n:
            try:
                if start == 0:
                    self.emit_batch(topic, keys, values, timestamps, headers)
                else:
                    self.emit_batch(topic, keys[start:], values[start:], timestamps[start:], headers[start:])
                return
            except EmitBatchError as err:
                i = start + err.index
                exc = err.__cause__
                assert isinstance(exc, Exception)
                if self.runtime.errors is None or not is_record_error(exc):
                    raise exc from exc.__cause__  # as it was raised, its own cause kept
                self.runtime.set_current(batch, i)
                try:
                    self.runtime.handle_error(ErrorKind.PRODUCTION, exc, sink_topic=topic)
                finally:
                    self.runtime.end_current(batch)
                start = i + 1

    def process(self, record: Record[Any, Any]) -> None:
        topic = self.topic
        try:
            self.emit(topic, self.kser(topic, record.key), self.vser(topic, record.value), record.timestamp,
                      record.headers)
        except Exception as exc:
            # only the record's own failures are the handler's to judge: back-pressure, a failed
            # producer and the thread's task-level errors are the stream thread's (issue 28)
            if self.runtime.errors is None or not is_record_error(exc):
                raise
            self.runtime.handle_error(ErrorKind.PRODUCTION, exc, sink_topic=topic)


class TopologyRuntime:
    """Processor instances, stores and clocks of one task over a whole topology."""

    def __init__(self, topology: Topology, application_id: str, emit: Emit, *,
                 task_id: str = "0_0", default_key_serde: Any = None, default_value_serde: Any = None,
                 wall_clock_ms: int | None = None,
                 store_factory: Callable[[StoreSpec], Any] | None = None,
                 state_dir: str | None = None, errors: ErrorHandling | None = None,
                 global_stores: Mapping[str, KeyValueStoreFacade] | None = None,
                 cache_max_entries: int = 0, emit_batch: EmitBatch | None = None) -> None:
        """``errors``: exception handlers (None: every error propagates, as in the test driver).
        ``cache_max_entries``: size of the record cache of aggregations (0: every update is
        written and forwarded at once, as Kafka's test driver shows it).
        ``global_stores``: facades of global stores owned elsewhere (the KafkaStreams global
        thread); given, this runtime neither creates nor updates nor closes global stores."""
        topology.validate()
        self.errors = errors
        self._emit = emit
        self._emit_batch = emit_batch or emit_batch_of(emit)
        # raw bytes of the input record being processed: what a dead-letter record carries
        self._raw: tuple[bytes | None, bytes | None, int, Headers] = (None, None, -1, None)
        self._dk = default_key_serde
        self._dv = default_value_serde
        self.topology = topology
        self.cache_max_entries = cache_max_entries
        self.caches: list[CachedKeyValueStoreFacade] = []
        self.application_id = application_id
        self.task_id = task_id
        self.stream_time = -1
        self.wall_clock_ms = int(time.time() * 1000) if wall_clock_ms is None else wall_clock_ms
        self.metadata: RecordMetadata | None = None
        self._stream_heap: list[tuple[int, int, _Schedule]] = []
        self._wall_heap: list[tuple[int, int, _Schedule]] = []
        self._seq = itertools.count()
        make = store_factory or self._default_store
        self.state_dir = state_dir
        self.raw_stores: dict[str, Any] = {}
        self.stores: dict[str, KeyValueStoreFacade] = {}
        for spec in topology.stores.values():
            raw = make(spec)
            self.raw_stores[spec.name] = raw
            self.stores[spec.name] = KeyValueStoreFacade(spec.name, raw, self._pick(spec.key_serde, self._dk, True),
                                                         self._pick(spec.value_serde, self._dv, True),
                                                         self.resolve_topic(f"{spec.name}-changelog"))
        self.global_stores: dict[str, KeyValueStoreFacade] = dict(global_stores or {})
        self._owns_globals = global_stores is None
        for g in topology.global_stores.values() if self._owns_globals else ():
            raw = make(g.store)
            self.raw_stores[g.store.name] = raw
            self.global_stores[g.store.name] = KeyValueStoreFacade(
                g.store.name, raw, self._pick(g.store.key_serde, self._dk, True),
                self._pick(g.store.value_serde, self._dv, True), g.topic)
        # resolved topic -> (key deserializer, value deserializer, process method of the source)
        self.sources: dict[str, tuple[Any, Any, Callable[[Record[Any, Any]], None]]] = {}
        # resolved topic -> (batch key deserializer, batch value deserializer, source node name)
        self.batch_sources: dict[str, tuple[Any, Any, str]] = {}
        self.processors: dict[str, Processor[Any, Any]] = {}
        contexts: dict[str, NodeContext] = {}
        for node in topology.nodes.values():
            proc: Processor[Any, Any]
            if isinstance(node, SourceNodeDef):
                proc = _SourceProcessor()
                ctx = NodeContext(self, node.name, ())
                kserde = self._pick(node.key_serde, self._dk, node.internal)
                vserde = self._pick(node.value_serde, self._dv, node.internal)
                kd, vd = deserializer_of(kserde), deserializer_of(vserde)
                kdb, vdb = batch_deserializer_of(kserde), batch_deserializer_of(vserde)
                for t in node.topics:
                    real = self.resolve_topic(t) if node.internal else t
                    self.sources[real] = (kd, vd, proc.process)
                    self.batch_sources[real] = (kdb, vdb, node.name)
            elif isinstance(node, ProcessorNodeDef):
                proc = node.supplier()
                if not isinstance(proc, Processor) and not hasattr(proc, "process"):
                    raise TopologyError(f"supplier of {node.name!r} returned {proc!r}, not a Processor")
                ctx = NodeContext(self, node.name, node.stores)
            else:
                assert isinstance(node, SinkNodeDef)
                topic = self.resolve_topic(node.topic) if node.internal else node.topic
                proc = _SinkProcessor(topic, self._pick(node.key_serde, self._dk, node.internal),
                                      self._pick(node.value_serde, self._dv, node.internal),
                                      emit, self._emit_batch, self)
                ctx = NodeContext(self, node.name, ())
            self.processors[node.name] = proc
            contexts[node.name] = ctx
        for node in topology.nodes.values():
            if isinstance(node, SinkNodeDef):
                continue
            ctx = contexts[node.name]
            for child in node.children:
                method = self.processors[child].process
                ctx._children.append(method)
                ctx._named[child] = method
        for g in topology.global_stores.values() if self._owns_globals else ():
            gproc = g.supplier()
            gctx = NodeContext(self, g.processor_name, (g.store.name,))
            self.processors[g.processor_name] = gproc
            contexts[g.processor_name] = gctx
            self.sources[g.topic] = (deserializer_of(self._pick(g.key_serde, self._dk, False)),
                                     deserializer_of(self._pick(g.value_serde, self._dv, False)),
                                     gproc.process)
        self._contexts = contexts
        # Kafka initialises processors after all stores exist, in topological order
        for name, proc in self.processors.items():
            proc.init(contexts[name])
        # batch entry of each node: its process_batch, else its records one by one
        self._batch_entry: dict[str, BatchProcess] = {}
        for name, proc in self.processors.items():
            batch_method = getattr(proc, "process_batch", None)
            self._batch_entry[name] = (batch_method if callable(batch_method)
                                       else self._unrolled(proc.process))
        for node in topology.nodes.values():
            if not isinstance(node, SinkNodeDef) and len(node.children) == 1:
                contexts[node.name]._batch_child = self._batch_entry[node.children[0]]

    def caching_store(self, name: str, listener: Callable[[Any, Any, Any, int, Any], None]) -> Any:
        """Put the record cache in front of store ``name`` (see :meth:`NodeContext.get_caching_store`)."""
        store = self.stores[name]
        spec = self.topology.stores.get(name)
        # Materialized.with_caching_disabled() turns the cache off for this store alone
        if (self.cache_max_entries <= 0 or isinstance(store, CachedKeyValueStoreFacade)
                or (spec is not None and not spec.caching_enabled)):
            return store
        cached = CachedKeyValueStoreFacade(store, self.cache_max_entries, listener)
        # every later reader (joins, queries) reads through the cache; the cache offers the
        # facade's interface without subclassing it (processor/stores.py)
        self.stores[name] = cached  # type: ignore[assignment]
        self.caches.append(cached)
        return cached

    def flush_caches(self) -> None:
        """Write and forward what the record caches hold; the owner calls it before committing."""
        for cache in self.caches:
            cache.flush()

    @staticmethod
    def _pick(serde: Any, default: Any, internal: bool) -> Any:
        """Node serde, else the configured default, else AUTO for internal data, else bytes."""
        if serde is not None:
            return serde
        if default is not None:
            return default
        return AUTO_SERDE if internal else None

    def _default_store(self, spec: StoreSpec) -> Any:
        """The byte store of a spec: its own supplier, else RocksDB under state_dir, else memory."""
        if spec.supplier is not None:
            return spec.supplier()
        if spec.store_type == "rocksdb" and self.state_dir is not None:
            path = os.path.join(self.state_dir, self.application_id, self.task_id, "rocksdb", spec.name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            return RocksDBKeyValueStore(spec.name, path)
        return InMemoryKeyValueStore(spec.name)

    def resolve_topic(self, name: str) -> str:
        """The real name of a topic of the topology (internal ones get the application.id prefix)."""
        if name in self.topology.internal_topics or name.endswith("-changelog"):
            return f"{self.application_id}-{name}"
        return name

    # -- records ----------------------------------------------------------------------------

    def process_input(self, topic: str, partition: int, offset: int, key: bytes | None,
                      value: bytes | None, timestamp: int, headers: Headers = None) -> None:
        """One input record from ``topic`` (a real, resolved name) through its sub-topology."""
        src = self.sources.get(topic)
        if src is None:
            raise TopologyError(f"topic {topic!r} is not a source topic of this topology")
        kd, vd, process = src
        self.metadata = RecordMetadata(topic, partition, offset)
        if self.errors is None:
            record = Record(kd(topic, key), vd(topic, value), timestamp, headers)
            if timestamp > self.stream_time:
                self.stream_time = timestamp
            process(record)
        else:
            self._raw = (key, value, timestamp, headers)
            try:
                record = Record(kd(topic, key), vd(topic, value), timestamp, headers)
            except Exception as exc:
                self.handle_error(ErrorKind.DESERIALIZATION, exc)
                self.metadata = None
                return
            if timestamp > self.stream_time:
                self.stream_time = timestamp
            try:
                process(record)
            except Exception as exc:
                if not is_record_error(exc):
                    raise  # a handler's FAIL, back-pressure outlasting task.timeout.ms, a failed producer
                # Kafka applies KIP-1033 per processor node; here the whole record's path is
                # one unit: output already forwarded before the failure stays sent
                self.handle_error(ErrorKind.PROCESSING, exc)
        self.metadata = None
        if self._stream_heap and self._stream_heap[0][0] <= self.stream_time:
            self._punctuate(self._stream_heap, self.stream_time)

    def process_batch(self, topic: str, partition: int, offsets: list[int], keys: list[bytes | None],
                      values: list[bytes | None], timestamps: list[int], headers: list[Headers]) -> None:
        """The records of one poll from ``topic``-``partition``, in offset order, through the
        sub-topology; the same outcome as ``process_input`` for each in turn (module doc)."""
        n = len(offsets)
        start = 0
        while start < n:
            end = min(n, start + MAX_BATCH_RECORDS)
            heap = self._stream_heap
            if heap:
                # cut where a stream-time punctuation falls due: it fires after the same record
                due = heap[0][0]
                st = self.stream_time
                for j in range(start, end):
                    ts = timestamps[j]
                    if ts > st:
                        st = ts
                    if st >= due:
                        end = j + 1
                        break
            if start == 0 and end == n:
                self._process_run(topic, partition, offsets, keys, values, timestamps, headers)
            else:
                self._process_run(topic, partition, offsets[start:end], keys[start:end], values[start:end],
                                  timestamps[start:end], headers[start:end])
            start = end

    def _process_run(self, topic: str, partition: int, offsets: list[int], keys: list[bytes | None],
                     values: list[bytes | None], timestamps: list[int], headers: list[Headers]) -> None:
        """Records of ``process_batch`` with no stream-time punctuation due before the last."""
        src = self.batch_sources.get(topic)
        if src is None:
            raise TopologyError(f"topic {topic!r} is not a source topic of this topology")
        kdb, vdb, node = src
        try:
            dkeys = kdb(topic, keys)
            dvalues = vdb(topic, values)
        except Exception:
            # a record does not deserialize: record by record, the handler judges that one
            for i in range(len(offsets)):
                self.process_input(topic, partition, offsets[i], keys[i], values[i], timestamps[i], headers[i])
            return
        origin = SourceRecords(topic, partition, offsets, keys, values, timestamps, headers, self.stream_time)
        st = max(timestamps, default=-1)
        if st > self.stream_time:
            self.stream_time = st
        try:
            self._batch_entry[node](Batch(dkeys, dvalues, None, origin))
        finally:
            self.metadata = None
        heap = self._stream_heap
        if heap and heap[0][0] <= self.stream_time:
            self._punctuate(heap, self.stream_time)

    def set_current(self, batch: Batch, i: int) -> None:
        """Element ``i`` of ``batch`` is the record being processed: its source record's
        metadata, raw bytes (for error handlers) and the stream time it was processed at."""
        origin = batch.origin
        j = i if batch.src is None else batch.src[i]
        self.metadata = RecordMetadata(origin.topic, origin.partition, origin.offsets[j])
        self._raw = (origin.raw_keys[j], origin.raw_values[j], origin.timestamps[j], origin.headers[j])
        self.stream_time = origin.stream_time_at(j)

    def end_current(self, batch: Batch) -> None:
        """Back to the stream time after the whole batch (set_current moved it to a record's)."""
        origin = batch.origin
        self.stream_time = max(origin.stream_time_before, max(origin.timestamps, default=-1))
        self.metadata = None

    def batch_failed(self, batch: Batch, i: int, exc: Exception) -> None:
        """A processor raised ``exc`` on element ``i``: as ``process_input`` would, propagate it
        (no handlers, or not the record's fault) or ask the processing handler about its record."""
        if self.errors is None or not is_record_error(exc):
            raise exc
        self.set_current(batch, i)
        try:
            self.handle_error(ErrorKind.PROCESSING, exc)
        finally:
            self.end_current(batch)

    def process_each(self, batch: Batch, process: Callable[[Record[Any, Any]], None]) -> None:
        """Hand the elements of ``batch`` to a per-record ``process``, each as its own record
        with the metadata and stream time it had before batches existed."""
        origin = batch.origin
        ts, hs = origin.timestamps, origin.headers
        keys, values, src = batch.keys, batch.values, batch.src
        errors = self.errors
        try:
            for i in range(len(keys)):
                j = i if src is None else src[i]
                self.set_current(batch, i)
                record = Record(keys[i], values[i], ts[j], hs[j])
                if errors is None:
                    process(record)
                    continue
                try:
                    process(record)
                except Exception as exc:
                    if not is_record_error(exc):
                        raise
                    self.handle_error(ErrorKind.PROCESSING, exc)
        finally:
            self.end_current(batch)

    def _unrolled(self, process: Callable[[Record[Any, Any]], None]) -> BatchProcess:
        def run(batch: Batch) -> None:
            self.process_each(batch, process)
        return run

    def handle_error(self, kind: ErrorKind, exc: BaseException, sink_topic: str | None = None) -> None:
        """Asks the handler of ``kind`` about the current record; raises if it answers FAIL."""
        assert self.errors is not None
        md = self.metadata
        # outside process_input (a punctuation) there is no source record to point at
        key, value, ts, headers = self._raw if md is not None else (None, None, -1, None)
        ctx = ErrorContext(kind, exc, self.task_id, md.topic if md else None, md.partition if md else -1,
                           md.offset if md else -1, key, value, ts, headers, sink_topic)
        self.errors.handle(ctx, self._emit)

    # -- punctuation ------------------------------------------------------------------------

    def schedule(self, ctx: NodeContext, interval: int, kind: PunctuationType,
                 callback: Callable[[int], None]) -> _Schedule:
        if kind is PunctuationType.STREAM_TIME:
            # Kafka starts stream-time schedules at 0: the first record punctuates
            sched = _Schedule(0, interval, callback, ctx)
            heapq.heappush(self._stream_heap, (0, next(self._seq), sched))
        else:
            sched = _Schedule(self.wall_clock_ms + interval, interval, callback, ctx)
            heapq.heappush(self._wall_heap, (sched.next_time, next(self._seq), sched))
        return sched

    def _punctuate(self, heap: list[tuple[int, int, _Schedule]], now: int) -> None:
        while heap and heap[0][0] <= now:
            _, _, sched = heapq.heappop(heap)
            if sched.cancelled:
                continue
            sched.callback(now)
            nxt = sched.next_time + sched.interval
            if now >= nxt:  # missed punctuations are not replayed one by one (as Kafka)
                nxt = sched.next_time + ((now - sched.next_time) // sched.interval + 1) * sched.interval
            sched.next_time = nxt
            if not sched.cancelled:
                heapq.heappush(heap, (nxt, next(self._seq), sched))

    def punctuate_wall_clock(self, now_ms: int) -> None:
        self.wall_clock_ms = now_ms
        self._punctuate(self._wall_heap, now_ms)

    def close(self) -> None:
        for proc in self.processors.values():
            proc.close()
        for name, raw in self.raw_stores.items():
            if name in self.global_stores and not self._owns_globals:
                continue
            close = getattr(raw, "close", None)
            if close is not None:
                close()
