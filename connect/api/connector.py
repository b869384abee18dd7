"""Connectors (Kafka's ``Connector``, ``SourceConnector``, ``SinkConnector``) and the context
the runtime gives them.

A connector is instantiated with no arguments, ``initialize``\\ d with a
:class:`ConnectorContext`, ``start``\\ ed with its string properties, asked for
``task_configs(max_tasks)`` and later ``stop``\\ ped. ``config()`` describes its keys; the
default ``validate`` checks the properties against it.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from strom.connect.api.config import Config, ConfigDef

if TYPE_CHECKING:
    from strom.connect.api.records import TopicPartition
    from strom.connect.api.task import OffsetStorageReader, Task


def _version() -> str:
    from strom import __version__

    return __version__


class ConnectorContext(ABC):
    """What the runtime offers a connector."""

    @abstractmethod
    def request_task_reconfiguration(self) -> None:
        """Ask the runtime to call ``task_configs`` again (the input changed)."""

    @abstractmethod
    def raise_error(self, exc: BaseException) -> None:
        """Fail the connector from a background thread of its own."""


class SourceConnectorContext(ConnectorContext, ABC):
    """Context of a source connector: also the offsets of its source partitions."""

    @property
    @abstractmethod
    def offset_storage_reader(self) -> OffsetStorageReader:
        """The committed offsets of this connector's source partitions (the reader is callable
        too, so Kafka-style ``offset_storage_reader()`` works)."""


class SinkConnectorContext(ConnectorContext, ABC):
    """Context of a sink connector."""


class ExactlyOnceSupport(enum.Enum):
    """Kafka's ``ExactlyOnceSupport``: can the connector deliver exactly once given its config."""

    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class ConnectorTransactionBoundaries(enum.Enum):
    """Kafka's ``ConnectorTransactionBoundaries``: may its tasks define transaction boundaries."""

    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class Connector(ABC):
    """Base of every connector. ``KAFKA_CLASS_NAME`` may name the Kafka class it stands for."""

    context: ConnectorContext | None = None

    def version(self) -> str:
        """The connector's version (shown by ``GET /connector-plugins``)."""
        return _version()

    def initialize(self, ctx: ConnectorContext, task_configs: Sequence[Mapping[str, str]] | None = None) -> None:
        self.context = ctx

    @abstractmethod
    def start(self, props: dict[str, str]) -> None:
        """Start with the connector's (string) configuration."""

    def reconfigure(self, props: dict[str, str]) -> None:
        self.stop()
        self.start(props)

    @abstractmethod
    def task_class(self) -> type[Task]:
        """The task class the runtime instantiates for this connector."""

    @abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """The configurations of at most ``max_tasks`` tasks."""

    @abstractmethod
    def stop(self) -> None:
        """Stop; release what ``start`` acquired."""

    def config(self) -> ConfigDef:
        """The definition of the connector's own keys."""
        return ConfigDef()

    def validate(self, props: Mapping[str, str]) -> Config:
        """Validate ``props`` against :meth:`config` (override to add cross-key checks)."""
        return Config(self.config().validate(props))


class SourceConnector(Connector):
    """A connector that imports data into Kafka."""

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """Whether the connector can run exactly once with ``props``; ``None`` if unknown."""
        return None

    def can_define_transaction_boundaries(self, props: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.UNSUPPORTED

    def alter_offsets(self, props: Mapping[str, str],
                      offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> bool:
        """Accept (True) or refuse (raise) an offsets change by ``PATCH/DELETE /offsets``.

        ``offsets`` are (source partition, source offset or None to reset) pairs — pairs, not a
        dict, because partitions are dicts. The default, as in Kafka, is False: "no opinion",
        which lets the runtime go ahead.
        """
        return False


class SinkConnector(Connector):
    """A connector that exports data from Kafka. ``TOPICS_CONFIG`` etc. name the standard keys."""

    TOPICS_CONFIG = "topics"
    TOPICS_REGEX_CONFIG = "topics.regex"

    def alter_offsets(self, props: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]) -> bool:
        """Accept (True) or refuse (raise) new consumer offsets; ``None`` resets a partition."""
        return False


__all__ = [
    "Connector",
    "ConnectorContext",
    "ConnectorTransactionBoundaries",
    "ExactlyOnceSupport",
    "SinkConnector",
    "SinkConnectorContext",
    "SourceConnector",
    "SourceConnectorContext",
]
