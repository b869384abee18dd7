"""Errors of the broker: the roots every broker error derives from.

:class:`KafkaError` is the base of the exceptions that map one-to-one onto Kafka's protocol error
codes (kio's ``ErrorCode``); the class of each code (``errno``, ``retriable``, and
:func:`~strom.core.errors.for_code` to find it) is generated into :mod:`strom.core.errors`,
which imports this base. Import those classes from there: this module imports nothing of it,
so the dependency points one way. Raising one inside a request handler makes the handler answer
with that code. :class:`ConfigError` is a bad configuration value; it names the key and what is
accepted.
"""

from __future__ import annotations

from typing import Any, ClassVar

from kio.schema.errors import ErrorCode

from strom.exceptions import StromError


class BrokerError(StromError):
    """Base class of broker errors."""


class ConfigError(BrokerError, ValueError):
    """A configuration value is missing, unknown or out of range."""

    def __init__(self, key: str, value: Any, accepted: str, *, unknown: bool = False) -> None:
        self.key = key
        self.value = value
        self.accepted = accepted
        self.unknown = unknown
        if unknown:
            msg = f"unknown config key {key!r}"
        else:
            msg = f"invalid value {value!r} for config {key!r}: expected {accepted}"
        super().__init__(msg)


class CorruptStateError(BrokerError):
    """A file of the node's storage (a state file, the metadata log) is unreadable. The message
    names the file, what is wrong and the way out; the command line prints it as one line."""


class LogDirLockedError(ConfigError):
    """Another process (or another LogManager of this one) holds a log dir's ``.lock``.

    A ConfigError because the way out is a configuration one (another ``log.dirs`` /
    ``metadata.log.dir``, or stop the holder), and so the command line prints it as one line.
    """

    def __init__(self, directory: Any, holder_pid: int | None, *, same_process: bool = False) -> None:
        self.key = "log.dirs"
        self.value = str(directory)
        self.accepted = "a directory no other broker uses"
        self.unknown = False
        self.directory = directory
        self.holder_pid = holder_pid
        if same_process:
            holder = f"this process ({holder_pid}) already holds it"
        elif holder_pid is not None:
            holder = f"held by process {holder_pid}"
        else:
            holder = "held by another process"
        # Kafka's message, then who holds the lock and the way out.
        BrokerError.__init__(
            self, f"Failed to acquire lock on file .lock in {directory}. A Kafka instance in another process "
                  f"or thread is using this directory ({holder}); stop that broker or give this one other "
                  "log.dirs / metadata.log.dir.")


class KafkaError(BrokerError):
    """An error that is answered to the client as a Kafka error code.

    The classes of the codes are generated in :mod:`strom.core.errors` (one per code of kio's
    ``ErrorCode``, Kafka's class names); this base stands for UNKNOWN_SERVER_ERROR. ``message`` is
    the text given when raised ("" if none): handlers send ``exc.message or None`` beside the code;
    ``description`` is Kafka's default text of the code (``Errors.X.message()``).
    """

    code: ClassVar[ErrorCode] = ErrorCode.unknown_server_error
    errno: ClassVar[int] = int(ErrorCode.unknown_server_error)
    retriable: ClassVar[bool] = False
    description: ClassVar[str] = "The server experienced an unexpected error when processing the request."

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.code.name)
        self.message = message


class CorruptSnapshotError(BrokerError):
    """A producer-state snapshot file fails its length or CRC check (Kafka's
    CorruptSnapshotException); the log rebuilds the producer state from the segments instead."""
