"""Errors of strom.connect, all under :class:`ConnectError` (itself a ``StromError``).

The names follow Kafka Connect (``ConnectException``, ``DataException``, ``ConfigException``,
``RetriableException``) plus the REST errors of its runtime. Each class carries the HTTP
``status_code`` the REST layer answers with (Kafka Connect's ``ConnectExceptionMapper``): 404 for
unknown connectors, 409 for conflicts and rebalances, 400 for bad requests and bad configs, 500
for everything else.

The runtime's own signals live here too: :class:`RestError` (an HTTP answer of the REST layer),
:class:`Tolerated` (a failed record that ``errors.tolerance=all`` skips),
:class:`ConnectProtocolError` (bad ``connect`` group-protocol bytes) and :class:`MembershipError`
(a group call of a distributed worker failed with a Kafka error code). They are Connect's errors,
not the broker's: a client-side group failure carries the code but is no ``strom.core`` error.
"""

from __future__ import annotations

from typing import Any, ClassVar

from kio.schema.errors import ErrorCode

from strom.exceptions import StromError

_UNSET: Any = object()


class ConnectError(StromError):
    """Base class of every Connect error."""

    status_code: ClassVar[int] = 500


class ConnectException(ConnectError):
    """Kafka Connect's ``ConnectException``: a generic failure in a connector, task or worker."""


class DataException(ConnectException):
    """Data does not match its schema, or cannot be converted (Kafka's ``DataException``)."""


class RetriableException(ConnectException):
    """A failure that may succeed if the operation is retried (Kafka's ``RetriableException``)."""


class ConfigException(ConnectException, ValueError):
    """A configuration value is missing or invalid; names the key and what is accepted.

    Call as Kafka's constructors: ``ConfigException(key, value, message)``,
    ``ConfigException(key, value)`` or ``ConfigException(message)`` (no key).
    """

    status_code: ClassVar[int] = 400

    def __init__(self, key_or_message: str, value: Any = _UNSET, message: str | None = None) -> None:
        if value is _UNSET and message is None:
            self.key: str | None = None
            self.value: Any = None
            self.message = key_or_message
            text = key_or_message
        else:
            self.key = key_or_message
            self.value = None if value is _UNSET else value
            self.message = message or ""
            text = f"Invalid value {self.value} for configuration {self.key}"
            if message:
                text += f": {message}"
        super().__init__(text)


class PluginNotFoundError(ConfigException):
    """A class name or alias matches no installed Connect plugin of the wanted kind."""


class AmbiguousPluginError(ConfigException):
    """An alias matches more than one plugin class; the message names them all."""


class NotFoundError(ConnectError):
    """An unknown connector, task or plugin (HTTP 404)."""

    status_code: ClassVar[int] = 404


class AlreadyExistsError(ConnectError):
    """A connector of that name already exists (HTTP 409)."""

    status_code: ClassVar[int] = 409


class RebalanceNeededError(ConnectError):
    """The cluster is rebalancing; retry later (HTTP 409, as Kafka Connect answers)."""

    status_code: ClassVar[int] = 409


class NotLeaderError(ConnectError):
    """A write reached a follower; it must be forwarded to ``leader_url`` (409 if it cannot)."""

    status_code: ClassVar[int] = 409

    def __init__(self, message: str, leader_url: str | None = None) -> None:
        super().__init__(message)
        self.leader_url = leader_url


class BadRequestError(ConnectError):
    """A malformed or invalid request (HTTP 400)."""

    status_code: ClassVar[int] = 400


class RestError(ConnectError):
    """An HTTP error the REST layer answers with Kafka's error JSON (``status``, ``message``)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Tolerated(ConnectError):
    """Internal: the record failed and ``errors.tolerance=all`` skips it."""


class ConnectProtocolError(ConnectError, ValueError):
    """Member metadata or an assignment that is not valid ``connect-protocol`` bytes."""


# Errors after which the member must (re)join; anything else retriable means "retry the call".
REJOIN_ERRORS = frozenset({ErrorCode.rebalance_in_progress, ErrorCode.illegal_generation,
                           ErrorCode.unknown_member_id, ErrorCode.member_id_required})
COORDINATOR_ERRORS = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                                ErrorCode.coordinator_load_in_progress})


class MembershipError(ConnectError):
    """A group call of a distributed worker failed with a Kafka error code (``error_code``) or
    the connection broke (``NETWORK_EXCEPTION``)."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        self.error_code = code
        super().__init__(message or f"{code.name} ({int(code)})")

    @property
    def errno(self) -> int:
        return int(self.error_code)

    @property
    def needs_rejoin(self) -> bool:
        return self.error_code in REJOIN_ERRORS

    @property
    def coordinator_moved(self) -> bool:
        return self.error_code in COORDINATOR_ERRORS or self.error_code == ErrorCode.network_exception


__all__ = [
    "AlreadyExistsError",
    "AmbiguousPluginError",
    "BadRequestError",
    "ConfigException",
    "ConnectError",
    "ConnectException",
    "ConnectProtocolError",
    "DataException",
    "MembershipError",
    "NotFoundError",
    "NotLeaderError",
    "PluginNotFoundError",
    "RebalanceNeededError",
    "RestError",
    "RetriableException",
    "Tolerated",
]
