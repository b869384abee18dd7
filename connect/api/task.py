"""Tasks (Kafka's ``Task``, ``SourceTask``, ``SinkTask``) and their runtime contexts.

A source task's ``poll`` returns records (or ``None`` when it has none yet); the worker
converts, transforms and produces them and later calls ``commit_record``/``commit``. A sink
task gets batches through ``put``; the worker commits consumer offsets only after ``flush``
(through ``pre_commit``) succeeded.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from strom.connect.api.records import RecordMetadata, SinkRecord, SourceRecord, TopicPartition

if TYPE_CHECKING:
    from strom.connect.api.batches import SourceRecordBatch


def _version() -> str:
    from strom import __version__

    return __version__


class Task(ABC):
    """Base of source and sink tasks. Tasks are instantiated with no arguments."""

    def version(self) -> str:
        return _version()

    @abstractmethod
    def start(self, props: dict[str, str]) -> None:
        """Start with the task's configuration (one of the connector's ``task_configs``)."""

    @abstractmethod
    def stop(self) -> None:
        """Stop. For source tasks this may be called from another thread while ``poll`` runs."""


# ---------------------------------------------------------------------------------------------
# Source side
# ---------------------------------------------------------------------------------------------

class OffsetStorageReader(ABC):
    """Reads committed source offsets (Kafka's ``OffsetStorageReader``).

    Calling the reader returns itself, so both ``ctx.offset_storage_reader.offset(p)`` and the
    Kafka-like ``ctx.offset_storage_reader().offset(p)`` work.
    """

    @abstractmethod
    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        """The last committed offset of one source partition (``None`` if none)."""

    def offsets(self, partitions: Iterable[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], dict[str, Any] | None]]:
        """(partition, offset or None) for each partition, in the order given."""
        return [(p, self.offset(p)) for p in partitions]

    def __call__(self) -> OffsetStorageReader:
        return self


class TransactionContext(ABC):
    """Lets a task define transaction boundaries (``transaction.boundary=connector``)."""

    @abstractmethod
    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        """Commit after the current batch, or after ``record`` when given."""

    @abstractmethod
    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        """Abort after the current batch, or after ``record`` when given."""


class SourceTaskContext(ABC):
    """What the runtime offers a source task."""

    @abstractmethod
    def configs(self) -> dict[str, str]:
        """The task's configuration."""

    @property
    @abstractmethod
    def offset_storage_reader(self) -> OffsetStorageReader:
        """The committed offsets of this connector's source partitions (also callable)."""

    def transaction_context(self) -> TransactionContext | None:
        """The transaction context under connector-defined boundaries, else ``None``."""
        return None


class TransactionBoundary(enum.Enum):
    """Kafka's ``SourceTask.TransactionBoundary`` (config ``transaction.boundary``)."""

    POLL = "poll"
    INTERVAL = "interval"
    CONNECTOR = "connector"


class SourceTask(Task):
    """A task that reads from a source system and returns :class:`SourceRecord`\\ s."""

    TRANSACTION_BOUNDARY_CONFIG = "transaction.boundary"
    context: SourceTaskContext | None = None

    def initialize(self, ctx: SourceTaskContext) -> None:
        self.context = ctx

    @abstractmethod
    def poll(self) -> Sequence[SourceRecord] | None:
        """New records, or ``None``/``[]`` when there are none now (may block briefly).

        A list of SourceRecords, or a :class:`~strom.connect.api.batches.SourceRecordBatch`
        (records of one source partition to one topic as columns) that the worker can produce
        without building a record object per record."""

    def commit(self) -> None:
        """Offsets up to what was polled have been committed (a hint; optional)."""

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        """``record`` was acknowledged by Kafka (``metadata=None`` when a transform dropped it)."""

    def commit_record_batch(self, batch: SourceRecordBatch, offsets: Sequence[int]) -> None:
        """Every record of ``batch`` was acknowledged by Kafka: ``offsets[i]`` is where record ``i``
        was written (topic ``batch.topic``). A strom extension (Kafka has only ``commit_record``):
        one call per batch instead of one per record. A task overriding it gets its
        :class:`~strom.connect.api.batches.SourceRecordBatch` es produced from the columns; when
        the worker builds the records anyway (transformations, exactly-once) it calls
        ``commit_record`` per record instead, so a task that needs acknowledgements implements
        both. Not called for a batch of which a record could not be written."""


# ---------------------------------------------------------------------------------------------
# Sink side
# ---------------------------------------------------------------------------------------------

class ErrantRecordReporter(ABC):
    """Reports records the task could not process (to the DLQ / error log per ``errors.*``)."""

    @abstractmethod
    def report(self, record: SinkRecord, error: BaseException) -> Future[None]:
        """Report one bad record; the future completes once it is handled."""


class SinkTaskContext(ABC):
    """What the runtime offers a sink task."""

    @abstractmethod
    def configs(self) -> dict[str, str]:
        """The task's configuration."""

    @abstractmethod
    def offset(self, tp_or_map: TopicPartition | Mapping[TopicPartition, int], offset: int | None = None) -> None:
        """Rewind/advance consumption: ``offset(tp, n)`` or ``offset({tp: n, ...})``."""

    @abstractmethod
    def timeout(self, ms: int) -> None:
        """Retry the last ``put`` after ``ms`` (after a RetriableException)."""

    @abstractmethod
    def assignment(self) -> set[TopicPartition]:
        """The partitions currently assigned to the task."""

    @abstractmethod
    def pause(self, *tps: TopicPartition) -> None:
        """Stop fetching these partitions."""

    @abstractmethod
    def resume(self, *tps: TopicPartition) -> None:
        """Resume fetching these partitions."""

    @abstractmethod
    def request_commit(self) -> None:
        """Ask for an offset commit soon (``flush`` will be called)."""

    def errant_record_reporter(self) -> ErrantRecordReporter | None:
        """The reporter of bad records, or ``None`` when error reporting is not configured."""
        return None


class SinkTask(Task):
    """A task that writes records from Kafka to a destination system."""

    TOPICS_CONFIG = "topics"
    TOPICS_REGEX_CONFIG = "topics.regex"
    context: SinkTaskContext | None = None

    def initialize(self, ctx: SinkTaskContext) -> None:
        self.context = ctx

    @abstractmethod
    def put(self, records: Sequence[SinkRecord]) -> None:
        """Write (or buffer) records; raise RetriableException to have them retried.

        ``records`` is a list or, on the worker's fast path, a
        :class:`~strom.connect.api.batches.SinkRecordBatch` whose columns (``values``,
        ``keys``, ...) can be read without building the records."""

    def flush(self, offsets: dict[TopicPartition, int]) -> None:
        """Make everything ``put`` up to ``offsets`` durable."""

    def pre_commit(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Flush and return the offsets that are safe to commit (the next offset to read)."""
        self.flush(offsets)
        return offsets

    def open(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions were assigned to the task (after a rebalance)."""

    def close(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions are being taken away; release their writers."""


__all__ = [
    "ErrantRecordReporter",
    "OffsetStorageReader",
    "SinkTask",
    "SinkTaskContext",
    "SourceTask",
    "SourceTaskContext",
    "Task",
    "TransactionBoundary",
    "TransactionContext",
]
