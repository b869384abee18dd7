"""Errors of strom.spark_bridge.

Every error the Spark bridge raises derives from :class:`SparkBridgeError` (a
:class:`strom.exceptions.StromError`). Spark wraps errors raised in Python workers into its own
exceptions; their message keeps ours, so each message names the option or partition at fault.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from strom.exceptions import StromError


class SparkBridgeError(StromError):
    """Base class of strom.spark_bridge errors."""


class OptionError(SparkBridgeError, ValueError):
    """A data source option is unknown, missing, conflicting or malformed; the message names it."""

    def __init__(self, option: str, message: str) -> None:
        self.option = option
        super().__init__(f"option {option!r}: {message}")


class SinkSchemaError(SparkBridgeError, ValueError):
    """The DataFrame written to Kafka lacks a required column or has one of the wrong type."""


class DataLossError(SparkBridgeError):
    """Requested offsets are no longer in the log (retention or DeleteRecords) and failOnDataLoss is true."""


class KafkaClientError(SparkBridgeError):
    """The Kafka client reported an error while reading or writing."""


class ClientTimeoutError(KafkaClientError):
    """A retriable condition (broker away, request timed out, full producer queue) outlasted its
    bound; the message names the topic/partition and the option that sets the bound."""


# Transient client conditions: retried within a bound, never a failure by themselves.
TRANSIENT_CODES = frozenset({
    KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT,
    KafkaError._WAIT_COORD, KafkaError._RESOLVE, KafkaError._QUEUE_FULL, KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NETWORK_EXCEPTION,
    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._NOENT,  # "No leaders found": the metadata of a broker that is away
    # Kafka's InvalidMetadataException family (retriable there; librdkafka's error object does not
    # say so): a leader epoch moved on, as after a broker's unclean restart (KIP-966 elects again).
    KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.KAFKA_STORAGE_ERROR,
})


def is_transient(err: object) -> bool:
    """True for a ``KafkaError`` (or a ``KafkaException`` carrying one) that is worth retrying."""
    if isinstance(err, KafkaException) and err.args:
        err = err.args[0]
    return isinstance(err, KafkaError) and (bool(err.retriable()) or err.code() in TRANSIENT_CODES)
