"""The Processor API: what a processor implements and what its context offers.

A :class:`Processor` receives :class:`Record` objects one at a time in ``process`` and passes
results downstream with :meth:`ProcessorContext.forward`. The context also gives access to the
state stores connected to the processor, to the metadata of the input record being processed
(topic, partition, offset) and schedules punctuations on stream time or wall-clock time.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Record(Generic[K, V]):
    """A key/value with its timestamp (ms) and headers; immutable by convention.

    ``with_*`` return a copy, so a processor may forward variants of one record.
    """

    __slots__ = ("headers", "key", "timestamp", "value")

    def __init__(self, key: K, value: V, timestamp: int,
                 headers: Sequence[tuple[str, bytes | None]] | None = None) -> None:
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers

    def with_key(self, key: Any) -> Record[Any, V]:
        return Record(key, self.value, self.timestamp, self.headers)

    def with_value(self, value: Any) -> Record[K, Any]:
        return Record(self.key, value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp: int) -> Record[K, V]:
        return Record(self.key, self.value, timestamp, self.headers)

    def with_headers(self, headers: Sequence[tuple[str, bytes | None]] | None) -> Record[K, V]:
        return Record(self.key, self.value, self.timestamp, headers)

    def __repr__(self) -> str:
        return f"Record(key={self.key!r}, value={self.value!r}, timestamp={self.timestamp})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Record) and self.key == other.key and self.value == other.value
                and self.timestamp == other.timestamp and list(self.headers or ()) == list(other.headers or ()))

    __hash__ = None  # type: ignore[assignment]


class RecordMetadata:
    """Where the input record being processed came from."""

    __slots__ = ("offset", "partition", "topic")

    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset

    def __repr__(self) -> str:
        return f"RecordMetadata(topic={self.topic!r}, partition={self.partition}, offset={self.offset})"


class PunctuationType(enum.Enum):
    """What drives a punctuation: the records' timestamps or the system clock."""

    STREAM_TIME = "stream_time"
    WALL_CLOCK_TIME = "wall_clock_time"


class Cancellable(Protocol):
    """Handle returned by :meth:`ProcessorContext.schedule`."""

    def cancel(self) -> None: ...


class ProcessorContext(Protocol):
    """What a processor can do besides computing: forward, stores, metadata, punctuation."""

    @property
    def application_id(self) -> str: ...

    def forward(self, record: Record[Any, Any], child_name: str | None = None) -> None:
        """Send ``record`` to every child node, or only to the child named ``child_name``."""
        ...

    def get_state_store(self, name: str) -> Any:
        """A store connected to this processor (or a global store); TopologyError otherwise."""
        ...

    def record_metadata(self) -> RecordMetadata | None:
        """Metadata of the input record being processed; None inside a wall-clock punctuation."""
        ...

    def current_stream_time_ms(self) -> int: ...

    def current_system_time_ms(self) -> int: ...

    def schedule(self, interval_ms: int, punctuation_type: PunctuationType,
                 callback: Callable[[int], None]) -> Cancellable:
        """Call ``callback(timestamp)`` every ``interval_ms`` of stream or wall-clock time."""
        ...


class Processor(ABC, Generic[K, V]):
    """A node of the topology written by the user (Kafka's ``api.Processor``).

    Optional: a processor that also defines ``process_batch(batch)`` receives the records of a
    batch (:class:`strom.streams.processor.batch.Batch`) in one call from a Kafka task and
    forwards with ``context.forward_batch``; it must give what ``process`` gives record by
    record (the DSL's stateless operators do this). Without it, ``process`` sees every record.
    """

    context: ProcessorContext

    def init(self, context: ProcessorContext) -> None:
        """Called once before the first record; keep the context to forward and get stores."""
        self.context = context

    @abstractmethod
    def process(self, record: Record[K, V]) -> None:
        """Handle one record."""

    def close(self) -> None:
        """Release resources; stores are closed by the runtime, not here."""


ProcessorSupplier = Callable[[], Processor[Any, Any]]
"""A factory of processors: each task gets its own instance (a class works as a supplier)."""
