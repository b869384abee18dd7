"""StreamsBuilder: the entry point of the DSL; it grows a :class:`Topology` as methods are called."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from strom.streams.dsl import processors as P
from strom.streams.dsl.options import Consumed, Materialized
from strom.streams.topology.topology import StoreSpec, Topology

if TYPE_CHECKING:
    from strom.streams.dsl.kstream import KStream
    from strom.streams.dsl.ktable import GlobalKTable, KTable


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
        return StoreSpec(name, m.store_supplier, m.key_serde if m.key_serde is not None else key_serde,
                         m.value_serde if m.value_serde is not None else value_serde,
                         store_type=m.store_type, logging_enabled=m.logging_enabled)

    def stream(self, topics: str | list[str], consumed: Consumed | None = None) -> KStream:
        from strom.streams.dsl.kstream import KStream

        consumed = consumed or Consumed()
        names = [topics] if isinstance(topics, str) else list(topics)
        name = consumed.name or self.new_name("KSTREAM-SOURCE")
        self.topology.add_source(name, *names, key_serde=consumed.key_serde, value_serde=consumed.value_serde)
        return KStream(self, name, consumed.key_serde, consumed.value_serde, frozenset(names), False)

    def table(self, topic: str, consumed: Consumed | None = None,
              materialized: Materialized | str | None = None) -> KTable:
        from strom.streams.dsl.ktable import KTable

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
                      _store_getter(store), [store])

    def global_table(self, topic: str, consumed: Consumed | None = None,
                     materialized: Materialized | str | None = None) -> GlobalKTable:
        from strom.streams.dsl.ktable import GlobalKTable

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


def _store_getter(store: str) -> Any:
    def factory(ctx: Any) -> Any:
        return ctx.get_state_store(store).get
    return factory
