"""strom.streams: a Kafka Streams-style DSL in Python.

Public API: :class:`StreamsBuilder` (stream/table/global_table) and the KStream/KTable family,
parameter objects (Consumed, Produced, Grouped, Materialized, Named, Branched, Repartitioned,
Joined), the Processor API (Processor, Record, PunctuationType), :class:`Topology`,
:class:`Serdes`, and :class:`~strom.streams.testing.TopologyTestDriver` for broker-less tests.
"""

from strom.streams.dsl import (
    Branched,
    BranchedKStream,
    Consumed,
    GlobalKTable,
    Grouped,
    Joined,
    KGroupedStream,
    KGroupedTable,
    KStream,
    KTable,
    Materialized,
    Named,
    Produced,
    Repartitioned,
    StreamsBuilder,
)
from strom.streams.exceptions import (
    InvalidStateStoreError,
    SerializationError,
    StateStoreError,
    StreamsError,
    TopologyError,
)
from strom.streams.processor import Processor, ProcessorContext, PunctuationType, Record, RecordMetadata
from strom.streams.serdes import Serde, Serdes
from strom.streams.testing import TestInputTopic, TestOutputTopic, TopologyTestDriver
from strom.streams.topology import StoreSpec, Topology

__all__ = [
    "Branched", "BranchedKStream", "Consumed", "GlobalKTable", "Grouped", "InvalidStateStoreError", "Joined",
    "KGroupedStream", "KGroupedTable", "KStream", "KTable", "Materialized", "Named", "Processor",
    "ProcessorContext", "Produced", "PunctuationType", "Record", "RecordMetadata", "Repartitioned", "Serde",
    "Serdes", "SerializationError", "StateStoreError", "StoreSpec", "StreamsBuilder", "StreamsError",
    "TestInputTopic", "TestOutputTopic", "Topology", "TopologyError", "TopologyTestDriver",
]
