"""Errors of the broker.

:class:`KafkaError` subclasses map one-to-one onto Kafka's protocol error codes (kio's
``ErrorCode``): each has ``errno`` (the code) and ``retriable``, and :func:`for_code` finds the
class of a code. Raising one inside a request handler makes the handler answer with that code.
:class:`ConfigError` is a bad configuration value; it names the key and what is accepted.
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
    """An error that is answered to the client as a Kafka error code."""

    code: ClassVar[ErrorCode] = ErrorCode.unknown_server_error

    @property
    def errno(self) -> int:
        return int(self.code)

    @property
    def retriable(self) -> bool:
        return bool(self.code.retriable)

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.code.name)
        self.message = message


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_")) + "Error"


_BY_CODE: dict[int, type[KafkaError]] = {int(ErrorCode.unknown_server_error): KafkaError}


def _define(code: ErrorCode) -> type[KafkaError]:
    cls = type(_camel(code.name), (KafkaError,), {"code": code, "__module__": __name__,
                                                  "__doc__": f"Kafka error {int(code)} ({code.name})."})
    _BY_CODE[int(code)] = cls
    return cls


for _code in ErrorCode:
    if _code not in (ErrorCode.none, ErrorCode.unknown_server_error):
        globals()[_camel(_code.name)] = _define(_code)


def for_code(code: int) -> type[KafkaError]:
    """The exception class of a Kafka error code."""
    return _BY_CODE.get(int(code), KafkaError)


# Names used across the broker, bound explicitly so that type checkers see them.
CorruptMessageError: type[KafkaError] = for_code(ErrorCode.corrupt_message)
InvalidRecordError: type[KafkaError] = for_code(ErrorCode.invalid_record)
MessageTooLargeError: type[KafkaError] = for_code(ErrorCode.message_too_large)
RecordListTooLargeError: type[KafkaError] = for_code(ErrorCode.record_list_too_large)
InvalidTimestampError: type[KafkaError] = for_code(ErrorCode.invalid_timestamp)
UnsupportedCompressionTypeError: type[KafkaError] = for_code(ErrorCode.unsupported_compression_type)
UnsupportedForMessageFormatError: type[KafkaError] = for_code(ErrorCode.unsupported_for_message_format)
OffsetOutOfRangeError: type[KafkaError] = for_code(ErrorCode.offset_out_of_range)
UnknownTopicOrPartitionError: type[KafkaError] = for_code(ErrorCode.unknown_topic_or_partition)
UnknownTopicIdError: type[KafkaError] = for_code(ErrorCode.unknown_topic_id)
TopicAlreadyExistsError: type[KafkaError] = for_code(ErrorCode.topic_already_exists)
InvalidTopicError: type[KafkaError] = for_code(ErrorCode.invalid_topic_exception)
InvalidPartitionsError: type[KafkaError] = for_code(ErrorCode.invalid_partitions)
InvalidReplicationFactorError: type[KafkaError] = for_code(ErrorCode.invalid_replication_factor)
InvalidConfigError: type[KafkaError] = for_code(ErrorCode.invalid_config)
InvalidRequestError: type[KafkaError] = for_code(ErrorCode.invalid_request)
NotLeaderOrFollowerError: type[KafkaError] = for_code(ErrorCode.not_leader_or_follower)
FencedLeaderEpochError: type[KafkaError] = for_code(ErrorCode.fenced_leader_epoch)
UnknownLeaderEpochError: type[KafkaError] = for_code(ErrorCode.unknown_leader_epoch)
NotEnoughReplicasError: type[KafkaError] = for_code(ErrorCode.not_enough_replicas)
PolicyViolationError: type[KafkaError] = for_code(ErrorCode.policy_violation)
TopicAuthorizationFailedError: type[KafkaError] = for_code(ErrorCode.topic_authorization_failed)
ClusterAuthorizationFailedError: type[KafkaError] = for_code(ErrorCode.cluster_authorization_failed)
KafkaStorageError: type[KafkaError] = for_code(ErrorCode.kafka_storage_error)
