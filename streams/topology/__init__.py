"""Topology: the graph of source, processor and sink nodes, its sub-topologies and stores."""

from strom.streams.topology.topology import (
    GlobalStoreDef,
    ProcessorNodeDef,
    SinkNodeDef,
    SourceNodeDef,
    StoreSpec,
    SubTopology,
    Topology,
    TopologyDescription,
)

__all__ = ["GlobalStoreDef", "ProcessorNodeDef", "SinkNodeDef", "SourceNodeDef", "StoreSpec",
           "SubTopology", "Topology", "TopologyDescription"]
