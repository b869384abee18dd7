"""strom.streams: a Kafka Streams-style DSL in Python.

Public API: :class:`StreamsBuilder` (stream/table/global_table) and the KStream/KTable family,
parameter objects (Consumed, Produced, Grouped, Materialized, Named, Branched, Repartitioned,
Joined), windows (TimeWindows, SlidingWindows, SessionWindows, JoinWindows, Suppressed), the
:class:`KafkaStreams` runtime, the Processor API (Processor, Record, PunctuationType), :class:`Topology`,
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
from strom.streams.dsl.stream_joins import StreamJoined
from strom.streams.dsl.suppress import BufferConfig, Suppressed
from strom.streams.dsl.windowed import SessionWindowedKStream, SlidingWindowedKStream, TimeWindowedKStream
from strom.streams.dsl.windows import (
    JoinWindows,
    SessionWindows,
    SlidingWindows,
    TimeWindows,
    Window,
    Windowed,
    WindowedSerdes,
)
from strom.streams.exceptions import (
    InvalidStateStoreError,
    SerializationError,
    StateStoreError,
    StreamsError,
    TopologyError,
)
from strom.streams.processor import Processor, ProcessorContext, PunctuationType, Record, RecordMetadata
from strom.streams.processor.readonly import KeyValue
from strom.streams.runtime import (
    ErrorContext,
    ErrorHandlerFailure,
    ErrorKind,
    HandlerResponse,
    HostInfo,
    KafkaStreams,
    KeyQueryMetadata,
    ReadOnlyKeyValueStore,
    ReadOnlySessionStore,
    ReadOnlyWindowStore,
    StreamsConfig,
    StreamsMetadata,
)
from strom.streams.serdes import Serde, Serdes
from strom.streams.testing import TestInputTopic, TestOutputTopic, TopologyTestDriver
from strom.streams.topology import StoreSpec, Topology

__all__ = [
    "Branched",
    "BranchedKStream",
    "BufferConfig",
    "Consumed",
    "ErrorContext",
    "ErrorHandlerFailure",
    "ErrorKind",
    "GlobalKTable",
    "Grouped",
    "HandlerResponse",
    "HostInfo",
    "InvalidStateStoreError",
    "JoinWindows",
    "Joined",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "KafkaStreams",
    "KeyQueryMetadata",
    "KeyValue",
    "Materialized",
    "Named",
    "Processor",
    "ProcessorContext",
    "Produced",
    "PunctuationType",
    "ReadOnlyKeyValueStore",
    "ReadOnlySessionStore",
    "ReadOnlyWindowStore",
    "Record",
    "RecordMetadata",
    "Repartitioned",
    "Serde",
    "Serdes",
    "SerializationError",
    "SessionWindowedKStream",
    "SessionWindows",
    "SlidingWindowedKStream",
    "SlidingWindows",
    "StateStoreError",
    "StoreSpec",
    "StreamJoined",
    "StreamsBuilder",
    "StreamsConfig",
    "StreamsError",
    "StreamsMetadata",
    "Suppressed",
    "TestInputTopic",
    "TestOutputTopic",
    "TimeWindowedKStream",
    "TimeWindows",
    "Topology",
    "TopologyError",
    "TopologyTestDriver",
    "Window",
    "Windowed",
    "WindowedSerdes",
]
