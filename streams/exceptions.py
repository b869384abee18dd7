"""Errors of strom.streams.

Every error the streams package raises derives from :class:`StreamsError`, itself a
:class:`strom.exceptions.StromError`, so callers can catch the whole package at once.
"""

from __future__ import annotations

from strom.exceptions import StromError


class StreamsError(StromError):
    """Base class of strom.streams errors."""


class SerializationError(StreamsError):
    """A serde could not serialize or deserialize a value; the message names topic and type."""


class TopologyError(StreamsError):
    """A topology is invalid (unknown store, duplicate name, co-partitioning violation...)."""


class StateStoreError(StreamsError):
    """A state store operation failed (I/O, corrupt data, bad argument)."""


class InvalidStateStoreError(StateStoreError):
    """A store is used while it is closed or not yet initialised (Kafka's InvalidStateStoreException)."""


class CheckpointError(StateStoreError):
    """A task's ``.checkpoint`` file is corrupt or of an unknown version."""


class TaskMigratedError(StreamsError):
    """Kafka's TaskMigratedException: the thread's tasks may be owned elsewhere now (the group
    moved on without it, or its transactional producer was fenced). The thread closes them without
    committing and rejoins; it never reaches the uncaught-exception handler."""


class TaskCorruptedError(StreamsError):
    """Kafka's TaskCorruptedException: what the tasks did since their last commit cannot be
    committed (a retriable condition outlived ``task.timeout.ms``, a transaction must be aborted,
    a record was not delivered for a retriable reason). The thread closes them without
    committing and re-creates them from the committed offsets and changelogs."""
