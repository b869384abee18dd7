"""The logical topology: nodes, edges, stores, internal topics and their description.

A :class:`Topology` is built either by hand (``add_source``/``add_processor``/``add_sink``/
``add_state_store``, as in Kafka's Processor API) or by :class:`~strom.streams.dsl.StreamsBuilder`.
It holds no runtime state: tasks instantiate processors and stores from it. Sub-topologies are
the connected components of the graph, where a state store shared by two processors connects
them too; a sink to a topic read by another source does not (that is what splits the graph at a
repartition topic). Internal topics (repartition) are stored without the ``application.id``
prefix, which the runtime adds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from strom.streams.exceptions import TopologyError
from strom.streams.processor.api import Processor


@dataclass(eq=False)
class StoreSpec:
    """How to make one state store: its name, a factory of the byte-level store and its serdes."""

    name: str
    supplier: Callable[[], Any] | None = None  # a custom byte store; else made from store_type
    key_serde: Any = None
    value_serde: Any = None
    kind: str = "key_value"
    store_type: str = "rocksdb"  # "rocksdb" (Kafka's default) or "in_memory"
    logging_enabled: bool = True
    # Materialized.with_caching_disabled(): no record cache in front of the store
    caching_enabled: bool = True
    # window/session stores (kind "window" / "session"): retention, and window size and whether
    # duplicates are kept (stream-stream joins) for window stores; None for key-value stores
    retention_ms: int | None = None
    window_size: int | None = None
    retain_duplicates: bool = False


@dataclass(eq=False)
class SourceNodeDef:
    name: str
    topics: list[str]
    key_serde: Any
    value_serde: Any
    internal: bool = False
    children: list[str] = field(default_factory=list)


@dataclass(eq=False)
class ProcessorNodeDef:
    name: str
    supplier: Callable[[], Processor[Any, Any]]
    parents: list[str]
    stores: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)


@dataclass(eq=False)
class SinkNodeDef:
    name: str
    topic: str
    key_serde: Any
    value_serde: Any
    parents: list[str]
    internal: bool = False
    partitioner: Callable[[str, Any, Any, int], int | None] | None = None


@dataclass(eq=False)
class GlobalStoreDef:
    """A store filled from a whole topic on every instance (GlobalKTable, add_global_store)."""

    store: StoreSpec
    source_name: str
    topic: str
    key_serde: Any
    value_serde: Any
    processor_name: str
    supplier: Callable[[], Processor[Any, Any]]


@dataclass(eq=False)
class SubTopology:
    id: int
    nodes: list[str]
    source_topics: list[str]
    sink_topics: list[str]
    stores: list[str]


NodeDef = SourceNodeDef | ProcessorNodeDef | SinkNodeDef


class Topology:
    """A graph of processing nodes (Kafka's ``Topology``)."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeDef] = {}
        self.stores: dict[str, StoreSpec] = {}
        self.global_stores: dict[str, GlobalStoreDef] = {}
        self.internal_topics: set[str] = set()
        # topic -> source node name; one topic feeds exactly one source node, as in Kafka
        self.topic_to_source: dict[str, str] = {}
        # groups of source topics that must be co-partitioned (joins), checked at build and run
        self.copartition_groups: list[set[str]] = []
        self.repartition_partitions: dict[str, int | None] = {}

    # -- building ---------------------------------------------------------------------------

    def _check_new(self, name: str) -> None:
        if not name:
            raise TopologyError("node name must not be empty")
        if name in self.nodes:
            raise TopologyError(f"processor name {name!r} is already added")

    def _parent(self, name: str, parent: str) -> NodeDef:
        node = self.nodes.get(parent)
        if node is None:
            raise TopologyError(f"parent node {parent!r} of {name!r} is not added yet")
        if isinstance(node, SinkNodeDef):
            raise TopologyError(f"sink node {parent!r} cannot be a parent of {name!r}")
        return node

    def add_source(self, name: str, *topics: str, key_serde: Any = None, value_serde: Any = None,
                   internal: bool = False) -> Topology:
        self._check_new(name)
        if not topics:
            raise TopologyError(f"source {name!r} needs at least one topic")
        for topic in topics:
            if topic in self.topic_to_source or any(g.topic == topic for g in self.global_stores.values()):
                raise TopologyError(f"topic {topic!r} is already read by another source node")
        for topic in topics:
            self.topic_to_source[topic] = name
            if internal:
                self.internal_topics.add(topic)
        self.nodes[name] = SourceNodeDef(name, list(topics), key_serde, value_serde, internal)
        return self

    def add_processor(self, name: str, supplier: Callable[[], Processor[Any, Any]],
                      *parent_names: str) -> Topology:
        self._check_new(name)
        if not parent_names:
            raise TopologyError(f"processor {name!r} needs at least one parent")
        parents = [self._parent(name, p) for p in parent_names]
        self.nodes[name] = ProcessorNodeDef(name, supplier, list(parent_names))
        for parent in parents:
            parent.children.append(name)  # type: ignore[union-attr]
        return self

    def add_sink(self, name: str, topic: str, *parent_names: str, key_serde: Any = None,
                 value_serde: Any = None, internal: bool = False,
                 partitioner: Callable[[str, Any, Any, int], int | None] | None = None) -> Topology:
        self._check_new(name)
        if not parent_names:
            raise TopologyError(f"sink {name!r} needs at least one parent")
        parents = [self._parent(name, p) for p in parent_names]
        self.nodes[name] = SinkNodeDef(name, topic, key_serde, value_serde, list(parent_names), internal,
                                       partitioner)
        if internal:
            self.internal_topics.add(topic)
        for parent in parents:
            parent.children.append(name)  # type: ignore[union-attr]
        return self

    def add_state_store(self, store: StoreSpec, *processor_names: str) -> Topology:
        if store.name in self.stores or store.name in self.global_stores:
            raise TopologyError(f"state store {store.name!r} is already added")
        self.stores[store.name] = store
        self.connect_processor_and_state_stores(*processor_names, store_names=(store.name,))
        return self

    def connect_processor_and_state_stores(self, *processor_names: str,
                                           store_names: Iterable[str] = ()) -> Topology:
        for store_name in store_names:
            if store_name not in self.stores:
                raise TopologyError(f"state store {store_name!r} is not added yet")
            for pname in processor_names:
                node = self.nodes.get(pname)
                if not isinstance(node, ProcessorNodeDef):
                    raise TopologyError(f"{pname!r} is not a processor node; cannot connect store {store_name!r}")
                if store_name not in node.stores:
                    node.stores.append(store_name)
        return self

    def add_global_store(self, store: StoreSpec, source_name: str, topic: str, processor_name: str,
                         supplier: Callable[[], Processor[Any, Any]], *, key_serde: Any = None,
                         value_serde: Any = None) -> Topology:
        """A store updated by ``supplier``'s processors from every partition of ``topic``."""
        self._check_new(source_name)
        self._check_new(processor_name)
        if store.name in self.stores or store.name in self.global_stores:
            raise TopologyError(f"state store {store.name!r} is already added")
        if topic in self.topic_to_source or any(g.topic == topic for g in self.global_stores.values()):
            raise TopologyError(f"topic {topic!r} is already read by another source node")
        self.global_stores[store.name] = GlobalStoreDef(store, source_name, topic, key_serde, value_serde,
                                                        processor_name, supplier)
        return self

    # -- analysis ---------------------------------------------------------------------------

    def validate(self) -> None:
        """Every store used exists; no processor is unreachable from a source."""
        for node in self.nodes.values():
            if isinstance(node, ProcessorNodeDef):
                for s in node.stores:
                    if s not in self.stores:
                        raise TopologyError(f"processor {node.name!r} uses unknown store {s!r}")

    def subtopologies(self) -> list[SubTopology]:
        """Connected components in node-creation order (Kafka numbers them the same way)."""
        parent: dict[str, str] = {n: n for n in self.nodes}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        def union(a: str, b: str) -> None:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[rb] = ra

        store_users: dict[str, str] = {}
        for node in self.nodes.values():
            if isinstance(node, ProcessorNodeDef | SinkNodeDef):
                for p in node.parents:
                    union(p, node.name)
            if isinstance(node, ProcessorNodeDef):
                for s in node.stores:
                    if s in store_users:
                        union(store_users[s], node.name)
                    else:
                        store_users[s] = node.name
        groups: dict[str, list[str]] = {}
        for name in self.nodes:  # dict order = creation order
            groups.setdefault(find(name), []).append(name)
        result = []
        for i, names in enumerate(groups.values()):
            sources: list[str] = []
            sinks: list[str] = []
            stores: list[str] = []
            for n in names:
                node = self.nodes[n]
                if isinstance(node, SourceNodeDef):
                    sources.extend(node.topics)
                elif isinstance(node, SinkNodeDef):
                    sinks.append(node.topic)
                else:
                    stores.extend(s for s in node.stores if s not in stores)
            result.append(SubTopology(i, names, sources, sinks, stores))
        return result

    def describe(self) -> TopologyDescription:
        return TopologyDescription(self)

    def __str__(self) -> str:
        return str(self.describe())


class TopologyDescription:
    """Text description in the format of Kafka's ``TopologyDescription.toString()``."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.subtopologies = topology.subtopologies()

    def __str__(self) -> str:
        topo = self.topology
        out = ["Topologies:"]

        def arrows(names: list[str], arrow: str) -> str:
            return f"      {arrow} {', '.join(names) if names else 'none'}"

        # Kafka lists a sub-topology's nodes sources first, then in creation order.
        for sub in self.subtopologies:
            out.append(f"   Sub-topology: {sub.id}")
            ordered = ([n for n in sub.nodes if isinstance(topo.nodes[n], SourceNodeDef)]
                       + [n for n in sub.nodes if not isinstance(topo.nodes[n], SourceNodeDef)])
            for name in ordered:
                node = topo.nodes[name]
                if isinstance(node, SourceNodeDef):
                    out.append(f"    Source: {name} (topics: [{', '.join(node.topics)}])")
                    out.append(arrows(node.children, "-->"))
                elif isinstance(node, ProcessorNodeDef):
                    out.append(f"    Processor: {name} (stores: [{', '.join(node.stores)}])")
                    out.append(arrows(node.children, "-->"))
                    out.append(arrows(node.parents, "<--"))
                else:
                    out.append(f"    Sink: {name} (topic: {node.topic})")
                    out.append(arrows(node.parents, "<--"))
            out.append("")
        n = len(self.subtopologies)
        for i, g in enumerate(topo.global_stores.values()):
            out.append(f"  Sub-topology: {n + i} for global store (will not generate tasks)")
            out.append(f"    Source: {g.source_name} (topics: [{g.topic}])")
            out.append(f"      --> {g.processor_name}")
            out.append(f"    Processor: {g.processor_name} (stores: [{g.store.name}])")
            out.append("      --> none")
            out.append(f"      <-- {g.source_name}")
            out.append("")
        return "\n".join(out)
