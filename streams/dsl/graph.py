"""Node-building shared by the DSL classes (the part of Kafka's ``InternalStreamsBuilder`` they use).

KStream, KTable, the grouped and windowed streams and the stream-stream join all add nodes to
one :class:`~strom.streams.topology.Topology` through the same few steps: a generated or given
node name, a repartition hop, a store spec, a value getter over a store. They live here, below
every DSL class, so that no DSL module needs another one at import time to build its nodes:
the only module that constructs streams and tables for the others is
:mod:`strom.streams.dsl.builder` (``StreamsBuilder.new_stream`` / ``new_table``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from strom.streams.dsl import processors as P
from strom.streams.dsl.options import Materialized, Named
from strom.streams.processor.api import ProcessorContext
from strom.streams.topology.topology import StoreSpec, Topology

Fn = Callable[..., Any]
#: key -> current value of a table, as seen from one processor's context
Getter = Callable[[Any], Any]
#: Kafka's value getter supplier: given a processor context, the table's ``Getter``
GetterFactory = Callable[[ProcessorContext], Getter]


class GraphBuilder(Protocol):
    """What node-building needs of the builder: its topology and its name counter."""

    @property
    def topology(self) -> Topology: ...

    def new_name(self, prefix: str) -> str: ...


@dataclass(frozen=True)
class WindowedTableInfo:
    """What ``KTable.suppress`` needs of a windowed aggregation's table.

    ``close_delay``: a window closes at its end + this (grace; for sessions gap + grace);
    ``inner_key_serde``/``value_serde``: the suppression buffer serializes the window's key and
    the aggregate with them.
    """

    close_delay: int
    inner_key_serde: Any
    value_serde: Any


def node_name(builder: GraphBuilder, named: Named | str | None, prefix: str) -> str:
    """The name the user gave (a ``Named`` or a string), else Kafka's generated ``PREFIX-n``."""
    if isinstance(named, str):
        return named
    if named is not None and named.name:
        return named.name
    return builder.new_name(prefix)


def store_spec(m: Materialized, name: str, key_serde: Any, value_serde: Any) -> StoreSpec:
    """The key-value store spec of ``m``; its serdes win over the operation's."""
    return StoreSpec(name, m.store_supplier, m.key_serde if m.key_serde is not None else key_serde,
                     m.value_serde if m.value_serde is not None else value_serde,
                     store_type=m.store_type, logging_enabled=m.logging_enabled,
                     caching_enabled=m.caching_enabled)


def store_getter(store: str) -> GetterFactory:
    """The value getter of a materialized table: a lookup in its store."""
    def factory(ctx: ProcessorContext) -> Getter:
        get: Getter = ctx.get_state_store(store).get
        return get
    return factory


def repartition_through(builder: GraphBuilder, parent: str, prefix: str, key_serde: Any, value_serde: Any,
                        named: bool, num_partitions: int | None = None) -> tuple[str, str]:
    """Adds filter -> sink -> (topic ``<prefix>-repartition``) -> source; returns (source, topic)."""
    topo = builder.topology
    topic = f"{prefix}-repartition"
    if named:
        sink, filt, source = f"{prefix}-repartition-sink", f"{prefix}-repartition-filter", f"{prefix}-repartition-source"
    else:
        sink = builder.new_name("KSTREAM-SINK")
        filt = builder.new_name("KSTREAM-FILTER")
        source = builder.new_name("KSTREAM-SOURCE")
    topo.add_processor(filt, P.DropNullKey, parent)
    topo.add_sink(sink, topic, filt, key_serde=key_serde, value_serde=value_serde, internal=True)
    topo.add_source(source, topic, key_serde=key_serde, value_serde=value_serde, internal=True)
    topo.repartition_partitions[topic] = num_partitions
    return source, topic


# -- the aggregators of count() ------------------------------------------------------------

# count's initializer and aggregator live with the aggregation processor, which recognises them
zero = P.zero
count_one = P.count_one


def uncount_one(key: Any, value: Any, agg: int) -> int:
    return agg - 1


def sum_counts(key: Any, a: int, b: int) -> int:
    """Merger of two session counts."""
    return a + b
