"""StreamsBuilder: the entry point of the DSL; it grows a :class:`Topology` as methods are called.

It is also the one module that constructs streams and tables for the others
(:meth:`StreamsBuilder.new_stream`, :meth:`StreamsBuilder.new_table`): KStream turns into
KTable (aggregations) and KTable into KStream (``to_stream``), so if each constructed the other
directly the two modules would import each other. They call their builder instead and name
each other's class only in annotations.
"""

from __future__ import annotations

from typing import Any

from strom.streams.dsl import processors as P
from strom.streams.dsl.globalktable import GlobalKTable
from strom.streams.dsl.graph import GetterFactory, WindowedTableInfo, store_getter
from strom.streams.dsl.graph import store_spec as _store_spec
from strom.streams.dsl.kstream import KStream
from strom.streams.dsl.ktable import KTable
from strom.streams.dsl.options import Consumed, Materialized
from strom.streams.topology.topology import StoreSpec, Topology


class StreamsBuilder:
    """Builds a topology with Kafka Streams' DSL (``stream``, ``table``, ``global_table``)."""

    def __init__(self) -> None:
        self.topology = Topology()
        self._index = 0

    def new_name(self, prefix: str) -> str:
        """Kafka's generated names: ``PREFIX-0000000007``, one counter for the whole builder."""
        name = f"{prefix}-{self._index:010d}"
        self._index += 1
        return name

    def store_spec(self, m: Materialized, name: str, key_serde: Any, value_serde: Any) -> StoreSpec:
        return _store_spec(m, name, key_serde, value_serde)

    # -- construction of streams and tables (for the DSL classes; see the module docstring) -

    def new_stream(self, node: str, key_serde: Any, value_serde: Any, source_topics: frozenset[str],
                   repartition_required: bool) -> KStream:
        """The KStream whose records leave node ``node``."""
        return KStream(self, node, key_serde, value_serde, source_topics, repartition_required)

    def new_table(self, node: str, key_serde: Any, value_serde: Any, source_topics: frozenset[str],
                  store_name: str | None, getter: GetterFactory, getter_stores: list[str],
                  windowed: WindowedTableInfo | None = None) -> KTable:
        """The KTable whose changes leave node ``node`` (``windowed``: a windowed aggregation's)."""
        return KTable(self, node, key_serde, value_serde, source_topics, store_name, getter, getter_stores,
                      windowed)

    # -- the DSL's entry points -------------------------------------------------------------

    def stream(self, topics: str | list[str], consumed: Consumed | None = None) -> KStream:
        consumed = consumed or Consumed()
        names = [topics] if isinstance(topics, str) else list(topics)
        name = consumed.name or self.new_name("KSTREAM-SOURCE")
        self.topology.add_source(name, *names, key_serde=consumed.key_serde, value_serde=consumed.value_serde)
        return KStream(self, name, consumed.key_serde, consumed.value_serde, frozenset(names), False)

    def table(self, topic: str, consumed: Consumed | None = None,
              materialized: Materialized | str | None = None) -> KTable:
        consumed = consumed or Consumed()
        m = Materialized.of(materialized)
        source = consumed.name or self.new_name("KSTREAM-SOURCE")
        node = self.new_name("KTABLE-SOURCE")
        store = m.store_name or self.new_name(f"{topic}-STATE-STORE")
        self.topology.add_source(source, topic, key_serde=consumed.key_serde, value_serde=consumed.value_serde)
        self.topology.add_processor(node, lambda: P.TableSource(store), source)
        spec = self.store_spec(m, store, consumed.key_serde, consumed.value_serde)
        self.topology.add_state_store(spec, node)
        return KTable(self, node, spec.key_serde, spec.value_serde, frozenset([topic]), store,
                      store_getter(store), [store])

    def global_table(self, topic: str, consumed: Consumed | None = None,
                     materialized: Materialized | str | None = None) -> GlobalKTable:
        consumed = consumed or Consumed()
        m = Materialized.of(materialized)
        source = consumed.name or self.new_name("KSTREAM-SOURCE")
        node = self.new_name("KTABLE-SOURCE")
        store = m.store_name or self.new_name(f"{topic}-STATE-STORE")
        spec = self.store_spec(m, store, consumed.key_serde, consumed.value_serde)
        self.topology.add_global_store(spec, source, topic, node, lambda: P.GlobalTableUpdate(store),
                                       key_serde=consumed.key_serde, value_serde=consumed.value_serde)
        return GlobalKTable(store)

    def build(self) -> Topology:
        self.topology.validate()
        return self.topology
