"""KStream (record streams), BranchedKStream (split) and KGroupedStream (aggregations)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

from strom.streams.dsl import processors as P
from strom.streams.dsl.globalktable import GlobalKTable
from strom.streams.dsl.graph import count_one, node_name, repartition_through, store_getter, zero
from strom.streams.dsl.options import Branched, Grouped, Joined, Materialized, Named, Produced, Repartitioned
from strom.streams.dsl.stream_joins import stream_stream_join
from strom.streams.dsl.windowed import SessionWindowedKStream, SlidingWindowedKStream, TimeWindowedKStream
from strom.streams.dsl.windows import SessionWindows, SlidingWindows, TimeWindows
from strom.streams.exceptions import TopologyError
from strom.streams.processor.api import Processor
from strom.streams.serdes import Serdes

if TYPE_CHECKING:
    # annotations only: tables are made by the builder (see strom.streams.dsl.builder)
    from strom.streams.dsl.builder import StreamsBuilder
    from strom.streams.dsl.ktable import KTable

Fn = Callable[..., Any]


class KStream:
    """An unbounded stream of key/value records (Kafka's ``KStream``).

    ``key_serde``/``value_serde`` are the serdes known for the current key and value (None when
    an operation changed them); ``repartition_required`` is set by key-changing operations so that
    a later grouping or join goes through a repartition topic first.
    """

    def __init__(self, builder: StreamsBuilder, node: str, key_serde: Any, value_serde: Any,
                 source_topics: frozenset[str], repartition_required: bool) -> None:
        self.builder = builder
        self.node = node
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.source_topics = source_topics
        self.repartition_required = repartition_required

    def _add(self, prefix: str, supplier: Callable[[], Processor[Any, Any]], named: Named | str | None,
             key_serde: Any, value_serde: Any, repartition: bool) -> KStream:
        name = node_name(self.builder, named, prefix)
        self.builder.topology.add_processor(name, supplier, self.node)
        return KStream(self.builder, name, key_serde, value_serde, self.source_topics, repartition)

    # -- stateless --------------------------------------------------------------------------

    def filter(self, predicate: Fn, named: Named | str | None = None) -> KStream:
        """Keep records where ``predicate(key, value)`` is true."""
        return self._add("KSTREAM-FILTER", lambda: P.Filter(predicate, False), named, self.key_serde,
                         self.value_serde, self.repartition_required)

    def filter_not(self, predicate: Fn, named: Named | str | None = None) -> KStream:
        return self._add("KSTREAM-FILTER", lambda: P.Filter(predicate, True), named, self.key_serde,
                         self.value_serde, self.repartition_required)

    def map(self, mapper: Fn, named: Named | str | None = None) -> KStream:
        """``mapper(key, value) -> (new_key, new_value)``."""
        return self._add("KSTREAM-MAP", lambda: P.Map(mapper), named, None, None, True)

    def map_values(self, mapper: Fn, named: Named | str | None = None, *, with_key: bool = False) -> KStream:
        """``mapper(value)`` (or ``mapper(key, value)`` with ``with_key=True``); keys unchanged."""
        return self._add("KSTREAM-MAPVALUES", lambda: P.MapValues(mapper, with_key), named, self.key_serde,
                         None, self.repartition_required)

    def flat_map(self, mapper: Fn, named: Named | str | None = None) -> KStream:
        """``mapper(key, value) -> iterable of (key, value)``."""
        return self._add("KSTREAM-FLATMAP", lambda: P.FlatMap(mapper), named, None, None, True)

    def flat_map_values(self, mapper: Fn, named: Named | str | None = None, *,
                        with_key: bool = False) -> KStream:
        """``mapper(value) -> iterable of values``, each with the input key."""
        return self._add("KSTREAM-FLATMAPVALUES", lambda: P.FlatMapValues(mapper, with_key), named,
                         self.key_serde, None, self.repartition_required)

    def select_key(self, mapper: Fn, named: Named | str | None = None) -> KStream:
        """New key ``mapper(key, value)``; the value is kept."""
        return self._add("KSTREAM-KEY-SELECT", lambda: P.SelectKey(mapper), named, None, self.value_serde, True)

    def peek(self, action: Fn, named: Named | str | None = None) -> KStream:
        return self._add("KSTREAM-PEEK", lambda: P.Peek(action, True), named, self.key_serde, self.value_serde,
                         self.repartition_required)

    def foreach(self, action: Fn, named: Named | str | None = None) -> None:
        self._add("KSTREAM-FOREACH", lambda: P.Peek(action, False), named, None, None, False)

    def merge(self, other: KStream, named: Named | str | None = None) -> KStream:
        if other.builder is not self.builder:
            raise TopologyError("cannot merge streams of different StreamsBuilders")
        name = node_name(self.builder, named, "KSTREAM-MERGE")
        self.builder.topology.add_processor(name, P.PassThrough, self.node, other.node)
        same_k = self.key_serde if self.key_serde is other.key_serde else None
        same_v = self.value_serde if self.value_serde is other.value_serde else None
        return KStream(self.builder, name, same_k, same_v, self.source_topics | other.source_topics,
                       self.repartition_required or other.repartition_required)

    def split(self, named: Named | str | None = None) -> BranchedKStream:
        """Route records to branches by predicate; see :class:`BranchedKStream`."""
        return BranchedKStream(self, named)

    def process(self, supplier: Callable[[], Processor[Any, Any]], *store_names: str,
                named: Named | str | None = None) -> KStream:
        """A user :class:`Processor` with access to ``store_names``; its output is a new stream."""
        stream = self._add("KSTREAM-PROCESSOR", supplier, named, None, None, True)
        if store_names:
            self.builder.topology.connect_processor_and_state_stores(stream.node, store_names=store_names)
        return stream

    def to(self, topic: str, produced: Produced | None = None) -> None:
        produced = produced or Produced()
        name = produced.name or self.builder.new_name("KSTREAM-SINK")
        self.builder.topology.add_sink(
            name, topic, self.node,
            key_serde=produced.key_serde if produced.key_serde is not None else self.key_serde,
            value_serde=produced.value_serde if produced.value_serde is not None else self.value_serde,
            partitioner=produced.partitioner)

    def repartition(self, repartitioned: Repartitioned | None = None) -> KStream:
        r = repartitioned or Repartitioned()
        ks = r.key_serde if r.key_serde is not None else self.key_serde
        vs = r.value_serde if r.value_serde is not None else self.value_serde
        prefix = r.name or self.builder.new_name("KSTREAM-REPARTITION")
        source, topic = repartition_through(self.builder, self.node, prefix, ks, vs, r.name is not None,
                                            r.num_partitions)
        return KStream(self.builder, source, ks, vs, frozenset([topic]), False)

    # -- grouping ---------------------------------------------------------------------------

    def group_by_key(self, grouped: Grouped | None = None) -> KGroupedStream:
        g = grouped or Grouped()
        return KGroupedStream(self, g, self.repartition_required)

    def group_by(self, selector: Fn, grouped: Grouped | None = None) -> KGroupedStream:
        """Group by ``selector(key, value)``; this goes through a repartition topic."""
        g = grouped or Grouped()
        selected = self._add("KSTREAM-KEY-SELECT", lambda: P.SelectKey(selector), None, None,
                             self.value_serde, True)
        return KGroupedStream(selected, g, True)

    # -- joins ------------------------------------------------------------------------------

    def _copartitioned(self, joined: Joined | None) -> KStream:
        if not self.repartition_required:
            return self
        j = joined or Joined()
        ks = j.key_serde if j.key_serde is not None else self.key_serde
        vs = j.value_serde if j.value_serde is not None else self.value_serde
        prefix = j.name or self.builder.new_name("KSTREAM-REPARTITION")
        source, topic = repartition_through(self.builder, self.node, prefix, ks, vs, j.name is not None)
        return KStream(self.builder, source, ks, vs, frozenset([topic]), False)

    def _join_table(self, table: KTable, joiner: Fn, joined: Joined | None, left: bool) -> KStream:
        stream = self._copartitioned(joined)
        name = node_name(self.builder, joined.name if joined else None,
                     "KSTREAM-LEFTJOIN" if left else "KSTREAM-JOIN")
        getter = table.getter
        self.builder.topology.add_processor(name, lambda: P.StreamTableJoin(getter, joiner, left, None), stream.node)
        self.builder.topology.connect_processor_and_state_stores(name, store_names=table.getter_stores)
        self.builder.topology.copartition_groups.append(set(stream.source_topics | table.source_topics))
        return KStream(self.builder, name, stream.key_serde, None, stream.source_topics, False)

    def join(self, other: KTable | GlobalKTable | KStream, joiner: Fn, key_mapper: Any = None,
             joined: Any = None) -> KStream:
        """Inner join with a table (same key), a global table (``key_mapper(key, value)``) or a
        stream: ``join(other_stream, joiner, JoinWindows, StreamJoined)``."""
        if isinstance(other, KStream):
            return self._join_stream(other, joiner, key_mapper, joined, "inner")
        if isinstance(other, GlobalKTable):
            return self._join_global(other, joiner, key_mapper, False)
        return self._join_table(other, joiner, joined, False)

    def left_join(self, other: KTable | GlobalKTable | KStream, joiner: Fn, key_mapper: Any = None,
                  joined: Any = None) -> KStream:
        """Like :meth:`join`, but a record without a match joins with None (with a stream: once
        its join window has closed)."""
        if isinstance(other, KStream):
            return self._join_stream(other, joiner, key_mapper, joined, "left")
        if isinstance(other, GlobalKTable):
            return self._join_global(other, joiner, key_mapper, True)
        return self._join_table(other, joiner, joined, True)

    def outer_join(self, other: KStream, joiner: Fn, windows: Any, stream_joined: Any = None) -> KStream:
        """Windowed outer join of two streams; unmatched records of either side join with None."""
        return self._join_stream(other, joiner, windows, stream_joined, "outer")

    def _join_stream(self, other: KStream, joiner: Fn, windows: Any, stream_joined: Any, mode: str) -> KStream:
        return stream_stream_join(self, other, joiner, windows, stream_joined, mode)

    def _join_global(self, table: GlobalKTable, joiner: Fn, key_mapper: Fn | None, left: bool) -> KStream:
        if key_mapper is None:
            raise TopologyError("a join with a GlobalKTable needs key_mapper(key, value) -> table key")
        getter = store_getter(table.store_name)
        name = self.builder.new_name("KSTREAM-JOIN" if not left else "KSTREAM-LEFTJOIN")
        self.builder.topology.add_processor(name, lambda: P.StreamTableJoin(getter, joiner, left, key_mapper),
                                            self.node)
        # no repartition: every instance holds the whole global table
        return KStream(self.builder, name, self.key_serde, None, self.source_topics, self.repartition_required)


class BranchedKStream:
    """Result of ``KStream.split()``: add branches, then ``default_branch()``/``no_default_branch()``.

    Both return ``{branch name: KStream}``; names are the split's name (or generated
    ``KSTREAM-BRANCH-n-``) followed by the Branched name or the branch's 1-based index.
    """

    def __init__(self, stream: KStream, named: Named | str | None) -> None:
        self.stream = stream
        builder = stream.builder
        self.split_name = node_name(builder, named, "KSTREAM-BRANCH")
        self.prefix = self.split_name if named is not None else f"{self.split_name}-"
        self._branches: list[tuple[Fn, str, Branched]] = []
        self._done = False

    def branch(self, predicate: Fn, branched: Branched | None = None) -> BranchedKStream:
        if self._done:
            raise TopologyError("split() already ended with default_branch()/no_default_branch()")
        b = branched or Branched()
        name = self.prefix + (b.name or str(len(self._branches) + 1))
        self._branches.append((predicate, name, b))
        return self

    def _finish(self, default: Branched | None) -> dict[str, KStream]:
        if self._done:
            raise TopologyError("split() already ended")
        self._done = True
        s = self.stream
        topo = s.builder.topology
        default_name = None if default is None else self.prefix + (default.name or "0")
        preds = [(p, n) for p, n, _ in self._branches]
        topo.add_processor(self.split_name, lambda: P.Branch(preds, default_name), s.node)
        result: dict[str, KStream] = {}
        items = [(n, b) for _, n, b in self._branches]
        if default is not None and default_name is not None:
            items.append((default_name, default))
        for name, b in items:
            topo.add_processor(name, P.PassThrough, self.split_name)
            branch = KStream(s.builder, name, s.key_serde, s.value_serde, s.source_topics, s.repartition_required)
            if b.chain is None:
                result[name] = branch
            else:
                out = b.chain(branch)
                if not b.consume and out is not None:
                    result[name] = out
        return result

    def default_branch(self, branched: Branched | None = None) -> dict[str, KStream]:
        return self._finish(branched or Branched())

    def no_default_branch(self) -> dict[str, KStream]:
        return self._finish(None)


class KGroupedStream:
    """A stream grouped by key, ready for count/reduce/aggregate into a KTable."""

    def __init__(self, stream: KStream, grouped: Grouped, repartition: bool) -> None:
        self.stream = stream
        self.grouped = grouped
        self.repartition = repartition
        self.key_serde = grouped.key_serde if grouped.key_serde is not None else stream.key_serde
        self.value_serde = grouped.value_serde if grouped.value_serde is not None else stream.value_serde

    def _aggregate(self, prefix: str, m: Materialized, value_serde: Any,
                   supplier_of: Callable[[str], Callable[[], Processor[Any, Any]]]) -> KTable:
        b = self.stream.builder
        name = b.new_name(prefix)  # Kafka reserves the aggregate's name before the repartition nodes
        store = m.store_name or b.new_name(f"{prefix}-STATE-STORE")
        parent = self.stream.node
        topics = self.stream.source_topics
        if self.repartition:
            rprefix = self.grouped.name or store
            parent, topic = repartition_through(b, parent, rprefix, self.key_serde, self.value_serde,
                                                self.grouped.name is not None)
            topics = frozenset([topic])
        b.topology.add_processor(name, supplier_of(store), parent)
        spec = b.store_spec(m, store, self.key_serde, value_serde)
        b.topology.add_state_store(spec, name)
        return b.new_table(name, spec.key_serde, spec.value_serde, topics, store, store_getter(store), [store])

    @overload
    def windowed_by(self, windows: TimeWindows) -> TimeWindowedKStream: ...

    @overload
    def windowed_by(self, windows: SlidingWindows) -> SlidingWindowedKStream: ...

    @overload
    def windowed_by(self, windows: SessionWindows) -> SessionWindowedKStream: ...

    def windowed_by(self, windows: TimeWindows | SlidingWindows | SessionWindows
                    ) -> TimeWindowedKStream | SlidingWindowedKStream | SessionWindowedKStream:
        """Window the aggregation: TimeWindows/SlidingWindows -> a time-windowed stream,
        SessionWindows -> SessionWindowedKStream."""
        if isinstance(windows, TimeWindows):
            return TimeWindowedKStream(self, windows)
        if isinstance(windows, SlidingWindows):
            return SlidingWindowedKStream(self, windows)
        if isinstance(windows, SessionWindows):
            return SessionWindowedKStream(self, windows)
        raise TopologyError(f"cannot window a grouped stream by {windows!r}")

    def count(self, named: Named | str | None = None, materialized: Materialized | str | None = None) -> KTable:
        m = Materialized.of(materialized)
        return self._aggregate("KSTREAM-AGGREGATE", m, Serdes.long(),
                               lambda s: lambda: P.StreamAggregate(s, zero, count_one, None))

    def reduce(self, reducer: Fn, named: Named | str | None = None,
               materialized: Materialized | str | None = None) -> KTable:
        """``reducer(aggregate, value) -> aggregate``; the first value of a key is its aggregate."""
        return self._aggregate("KSTREAM-REDUCE", Materialized.of(materialized), self.value_serde,
                               lambda s: lambda: P.StreamAggregate(s, None, None, reducer))

    def aggregate(self, initializer: Callable[[], Any], aggregator: Fn, named: Named | str | None = None,
                  materialized: Materialized | str | None = None) -> KTable:
        """``aggregator(key, value, aggregate) -> aggregate`` starting from ``initializer()``."""
        return self._aggregate("KSTREAM-AGGREGATE", Materialized.of(materialized), None,
                               lambda s: lambda: P.StreamAggregate(s, initializer, aggregator, None))
