"""Runs topologies against a Kafka cluster: :class:`KafkaStreams`, its threads and tasks,
global stores, standby replicas, interactive queries and exception handlers."""

from strom.streams.runtime.config import StreamsConfig, StreamsConfigError
from strom.streams.runtime.kafka_streams import KafkaStreams, State, StreamThreadExceptionResponse
from strom.streams.runtime.queries import (
    HostInfo,
    KeyQueryMetadata,
    ReadOnlyKeyValueStore,
    ReadOnlySessionStore,
    ReadOnlyWindowStore,
    StreamsMetadata,
)
from strom.streams.topology.errors import ErrorContext, ErrorHandlerFailure, ErrorKind, HandlerResponse

__all__ = ["ErrorContext", "ErrorHandlerFailure", "ErrorKind", "HandlerResponse", "HostInfo", "KafkaStreams",
           "KeyQueryMetadata", "ReadOnlyKeyValueStore", "ReadOnlySessionStore", "ReadOnlyWindowStore", "State",
           "StreamThreadExceptionResponse", "StreamsConfig", "StreamsConfigError", "StreamsMetadata"]
