"""KTable (changelog streams) and KGroupedTable (re-keyed tables, aggregated).

A KTable node forwards :class:`~strom.streams.dsl.processors.Change` values. Its ``getter`` is a
factory that, given a processor context, returns ``key -> current value``: a store lookup when
the table is materialized, else the parent's getter with this node's function applied (Kafka's
value getters); joins use it, and ``getter_stores`` lists the stores it reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from strom.streams.dsl import processors as P
from strom.streams.dsl.graph import (
    GetterFactory,
    WindowedTableInfo,
    count_one,
    node_name,
    repartition_through,
    store_getter,
    uncount_one,
    zero,
)
from strom.streams.dsl.options import Grouped, Materialized, Named
from strom.streams.dsl.suppress import Suppressed, SuppressUntilWindowCloses
from strom.streams.exceptions import TopologyError
from strom.streams.processor.api import Processor, ProcessorContext
from strom.streams.processor.stores import AUTO_SERDE
from strom.streams.serdes import Serdes
from strom.streams.topology.topology import StoreSpec

if TYPE_CHECKING:
    # annotations only: streams are made by the builder (see strom.streams.dsl.builder)
    from strom.streams.dsl.builder import StreamsBuilder
    from strom.streams.dsl.kstream import KStream

Fn = Callable[..., Any]


class KTable:
    """The latest value per key of a changelog stream (Kafka's ``KTable``)."""

    def __init__(self, builder: StreamsBuilder, node: str, key_serde: Any, value_serde: Any,
                 source_topics: frozenset[str], store_name: str | None, getter: GetterFactory,
                 getter_stores: list[str], windowed: WindowedTableInfo | None = None) -> None:
        self.builder = builder
        self.node = node
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.source_topics = source_topics
        self.store_name = store_name
        self.getter = getter
        self.getter_stores = getter_stores
        #: set on the table of a windowed aggregation: what ``suppress`` needs to know of it
        self.windowed = windowed

    @property
    def queryable_store_name(self) -> str | None:
        return self.store_name

    def _derive(self, prefix: str, named: Named | str | None, materialized: Materialized | str | None,
                value_serde: Any, make: Callable[[str | None], Processor[Any, Any]],
                compute: Callable[[Any, Any], Any]) -> KTable:
        b = self.builder
        name = node_name(b, named, prefix)
        store: str | None = None
        spec = None
        if materialized is not None:
            m = Materialized.of(materialized)
            store = m.store_name or b.new_name(f"{prefix}-STATE-STORE")
            spec = b.store_spec(m, store, self.key_serde, value_serde)
        b.topology.add_processor(name, lambda: make(store), self.node)
        if spec is not None and store is not None:
            b.topology.add_state_store(spec, name)
            return KTable(b, name, spec.key_serde, spec.value_serde, self.source_topics, store,
                          store_getter(store), [store])
        parent = self.getter

        def getter(ctx: ProcessorContext) -> Callable[[Any], Any]:
            get = parent(ctx)
            return lambda key: compute(key, get(key))
        return KTable(b, name, self.key_serde, value_serde, self.source_topics, None, getter,
                      list(self.getter_stores))

    def filter(self, predicate: Fn, named: Named | str | None = None,
               materialized: Materialized | str | None = None) -> KTable:
        def keep(key: Any, v: Any) -> Any:
            return v if v is not None and predicate(key, v) else None
        return self._derive("KTABLE-FILTER", named, materialized, self.value_serde,
                            lambda s: P.TableFilter(predicate, False, s), keep)

    def filter_not(self, predicate: Fn, named: Named | str | None = None,
                   materialized: Materialized | str | None = None) -> KTable:
        def keep(key: Any, v: Any) -> Any:
            return v if v is not None and not predicate(key, v) else None
        return self._derive("KTABLE-FILTER", named, materialized, self.value_serde,
                            lambda s: P.TableFilter(predicate, True, s), keep)

    def map_values(self, mapper: Fn, named: Named | str | None = None,
                   materialized: Materialized | str | None = None, *, with_key: bool = False) -> KTable:
        def compute(key: Any, v: Any) -> Any:
            if v is None:
                return None
            return mapper(key, v) if with_key else mapper(v)
        return self._derive("KTABLE-MAPVALUES", named, materialized, None,
                            lambda s: P.TableMapValues(mapper, with_key, s), compute)

    def to_stream(self, mapper: Fn | None = None, named: Named | str | None = None) -> KStream:
        """The table's updates as a stream (a deletion is a record with value None)."""
        name = node_name(self.builder, named, "KTABLE-TOSTREAM")
        self.builder.topology.add_processor(name, lambda: P.TableToStream(mapper), self.node)
        return self.builder.new_stream(name, None if mapper else self.key_serde, self.value_serde,
                                       self.source_topics, mapper is not None)

    def suppress(self, suppressed: Suppressed) -> KTable:
        """Emit only final results of a windowed table (see :mod:`strom.streams.dsl.suppress`)."""
        windowed = self.windowed
        if windowed is None:
            raise TopologyError("suppress(until_window_closes) needs a windowed KTable "
                                "(the result of a windowed_by(...) aggregation)")
        b = self.builder
        name = node_name(b, suppressed.name, "KTABLE-SUPPRESS")
        # the buffer is a change-logged store, so final results survive a crash (Kafka's naming)
        store = f"{suppressed.name}-store" if suppressed.name else b.new_name("KTABLE-SUPPRESS-STATE-STORE")
        wall, interval = suppressed.wall_clock, suppressed.wall_clock_interval_ms
        delay, kser, vser = windowed.close_delay, windowed.inner_key_serde, windowed.value_serde
        b.topology.add_processor(name, lambda: SuppressUntilWindowCloses(store, delay, wall, interval, kser, vser),
                                 self.node)
        b.topology.add_state_store(StoreSpec(store, None, Serdes.bytes(), Serdes.bytes()), name)
        return KTable(self.builder, name, self.key_serde, self.value_serde, self.source_topics, None,
                      self.getter, list(self.getter_stores))

    def group_by(self, selector: Fn, grouped: Grouped | None = None) -> KGroupedTable:
        """``selector(key, value) -> (new_key, new_value)``; re-aggregate with adder/subtractor."""
        name = node_name(self.builder, None, "KTABLE-SELECT")
        self.builder.topology.add_processor(name, lambda: P.TableRepartitionMap(selector), self.node)
        return KGroupedTable(self, name, grouped or Grouped())

    # -- joins ------------------------------------------------------------------------------

    def _join(self, other: KTable, joiner: Fn, mode: str, named: Named | str | None,
              materialized: Materialized | str | None) -> KTable:
        if other.builder is not self.builder:
            raise TopologyError("cannot join tables of different StreamsBuilders")
        b = self.builder
        prefix = {"inner": "KTABLE-JOIN", "left": "KTABLE-LEFTJOIN", "outer": "KTABLE-OUTERJOIN"}[mode]
        this_name = b.new_name(f"{prefix}THIS")
        other_name = b.new_name(f"{prefix}OTHER")
        merge = node_name(b, named, "KTABLE-MERGE")
        store: str | None = None
        spec = None
        if materialized is not None:
            m = Materialized.of(materialized)
            store = m.store_name or b.new_name(f"{prefix}-STATE-STORE")
            spec = b.store_spec(m, store, self.key_serde, None)
        left_get, right_get = self.getter, other.getter
        topo = b.topology
        # Each side's processor owns no store; the shared result store sits on the merge node's
        # side, so both join processors update it (they run in one task).
        topo.add_processor(this_name, lambda: P.TableTableJoin(left_get, right_get, joiner, True, mode, store),
                           self.node)
        topo.add_processor(other_name, lambda: P.TableTableJoin(right_get, left_get, joiner, False, mode, store),
                           other.node)
        topo.connect_processor_and_state_stores(this_name, store_names=other.getter_stores)
        topo.connect_processor_and_state_stores(other_name, store_names=self.getter_stores)
        topo.add_processor(merge, P.PassThrough, this_name, other_name)
        if spec is not None and store is not None:
            topo.add_state_store(spec, this_name, other_name)
        topics = self.source_topics | other.source_topics
        topo.copartition_groups.append(set(topics))
        if store is not None:
            return KTable(b, merge, self.key_serde, spec.value_serde if spec else None, topics, store,
                          store_getter(store), [store])

        def joiner_of(lv: Any, rv: Any) -> Any:
            if lv is None and rv is None:
                return None
            if mode == "inner" and (lv is None or rv is None):
                return None
            if mode == "left" and lv is None:
                return None
            return joiner(lv, rv)

        def getter(ctx: ProcessorContext) -> Callable[[Any], Any]:
            lg, rg = left_get(ctx), right_get(ctx)
            return lambda key: joiner_of(lg(key), rg(key))
        return KTable(b, merge, self.key_serde, None, topics, None, getter,
                      list(dict.fromkeys(self.getter_stores + other.getter_stores)))

    def join(self, other: KTable, joiner: Fn, named: Named | str | None = None,
             materialized: Materialized | str | None = None) -> KTable:
        """Inner table-table join on the key: ``joiner(left_value, right_value)``."""
        return self._join(other, joiner, "inner", named, materialized)

    def left_join(self, other: KTable, joiner: Fn, named: Named | str | None = None,
                  materialized: Materialized | str | None = None) -> KTable:
        return self._join(other, joiner, "left", named, materialized)

    def outer_join(self, other: KTable, joiner: Fn, named: Named | str | None = None,
                   materialized: Materialized | str | None = None) -> KTable:
        return self._join(other, joiner, "outer", named, materialized)


class KGroupedTable:
    """A re-keyed table, aggregated with an adder and a subtractor."""

    def __init__(self, table: KTable, node: str, grouped: Grouped) -> None:
        self.table = table
        self.node = node
        self.grouped = grouped

    def _aggregate(self, prefix: str, m: Materialized, value_serde: Any,
                   supplier_of: Callable[[str], Callable[[], Processor[Any, Any]]]) -> KTable:
        b = self.table.builder
        g = self.grouped
        name = b.new_name(prefix)
        store = m.store_name or b.new_name(f"{prefix}-STATE-STORE")
        source, topic = repartition_through(b, self.node, g.name or store, g.key_serde,
                                            P.ChangeSerde(g.value_serde if g.value_serde is not None else AUTO_SERDE),
                                            g.name is not None)
        b.topology.add_processor(name, supplier_of(store), source)
        spec = b.store_spec(m, store, g.key_serde, value_serde)
        b.topology.add_state_store(spec, name)
        return KTable(b, name, spec.key_serde, spec.value_serde, frozenset([topic]), store,
                      store_getter(store), [store])

    def count(self, named: Named | str | None = None, materialized: Materialized | str | None = None) -> KTable:
        return self._aggregate("KTABLE-AGGREGATE", Materialized.of(materialized), Serdes.long(),
                               lambda s: lambda: P.TableAggregate(s, zero, count_one, uncount_one, False))

    def reduce(self, adder: Fn, subtractor: Fn, named: Named | str | None = None,
               materialized: Materialized | str | None = None) -> KTable:
        """``adder(agg, value)`` and ``subtractor(agg, value)``."""
        return self._aggregate("KTABLE-REDUCE", Materialized.of(materialized), self.grouped.value_serde,
                               lambda s: lambda: P.TableAggregate(s, None, adder, subtractor, True))

    def aggregate(self, initializer: Callable[[], Any], adder: Fn, subtractor: Fn,
                  named: Named | str | None = None, materialized: Materialized | str | None = None) -> KTable:
        """``adder(key, value, agg)`` and ``subtractor(key, value, agg)`` from ``initializer()``."""
        return self._aggregate("KTABLE-AGGREGATE", Materialized.of(materialized), None,
                               lambda s: lambda: P.TableAggregate(s, initializer, adder, subtractor, False))
