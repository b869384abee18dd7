"""Runs topologies against a Kafka cluster: :class:`KafkaStreams`, its threads and tasks."""

from strom.streams.runtime.config import StreamsConfig, StreamsConfigError
from strom.streams.runtime.kafka_streams import KafkaStreams, ReadOnlyKeyValueStore, State

__all__ = ["KafkaStreams", "ReadOnlyKeyValueStore", "State", "StreamsConfig", "StreamsConfigError"]
