"""Errors of strom.spark_bridge.

Every error the Spark bridge raises derives from :class:`SparkBridgeError` (a
:class:`strom.exceptions.StromError`). Spark wraps errors raised in Python workers into its own
exceptions; their message keeps ours, so each message names the option or partition at fault.
"""

from __future__ import annotations

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
