"""Extension point: authorizers (modelled on Kafka's ``org.apache.kafka.server.authorizer``).

The broker builds one :class:`RequestContext` per request and a list of :class:`Action` s (one
per resource the request touches), calls :meth:`Authorizer.authorize` once and maps each
``DENIED`` onto the request's error code (``TOPIC_AUTHORIZATION_FAILED``,
``GROUP_AUTHORIZATION_FAILED``, ``CLUSTER_AUTHORIZATION_FAILED``...).

Selection: every plugin may offer authorizers by name through :func:`strom_authorizers`; the
broker config key ``authorizer.class.name`` picks one (empty = the built-in ``allow-all``).
The object is created once at broker start-up; the request path calls it directly.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from strom.plugins.markers import hookspec

CONFIG_KEY = "authorizer.class.name"
DEFAULT_AUTHORIZER = "allow-all"


class AclOperation(enum.IntEnum):
    """Kafka's ``AclOperation`` with its wire codes."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class ResourceType(enum.IntEnum):
    """Kafka's ``ResourceType`` with its wire codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    """Kafka's ``PatternType`` with its wire codes (actions always use ``LITERAL``)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AuthorizationResult(enum.Enum):
    """The answer for one action."""

    ALLOWED = "ALLOWED"
    DENIED = "DENIED"


CLUSTER_RESOURCE_NAME = "kafka-cluster"  # Kafka's name of the single CLUSTER resource


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """A resource an action applies to; for actions the pattern type is ``LITERAL``."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True, slots=True)
class Action:
    """One operation on one resource (Kafka's ``org.apache.kafka.server.authorizer.Action``).

    ``resource_reference_count`` is how often the request names the resource (an authorizer
    that counts may use it); ``log_if_allowed`` / ``log_if_denied`` say whether the outcome is
    worth an audit log line (Kafka sets ``log_if_denied=False`` for filtering actions such as
    Metadata listing all topics).
    """

    operation: AclOperation
    resource: ResourcePattern
    resource_reference_count: int = 1
    log_if_allowed: bool = True
    log_if_denied: bool = True


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who asks, from where, with which request (Kafka's ``AuthorizableRequestContext``)."""

    principal: str = "User:ANONYMOUS"
    client_id: str = ""
    client_address: str = ""
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    api_key: int = -1
    api_version: int = -1
    correlation_id: int = -1


@runtime_checkable
class Authorizer(Protocol):
    """What an authorizer implements."""

    def authorize(self, ctx: RequestContext, actions: Sequence[Action]) -> list[AuthorizationResult]:
        """One result per action, in the order of ``actions``.

        Called on the broker's event loop for every authorized request: it must be fast and must
        not block (no I/O; load ACLs at construction or from metadata updates).
        """
        ...


AuthorizerFactory = Callable[[Mapping[str, Any]], Authorizer]
"""Builds an authorizer from the broker's properties (Kafka property names -> values)."""


@hookspec
def strom_authorizers() -> Mapping[str, AuthorizerFactory]:  # type: ignore[empty-body]
    """Offer authorizers by name.

    Return a mapping of names to factories; each factory receives the broker's configuration
    (a mapping of Kafka property names to values) and returns an :class:`Authorizer`. Names
    should be qualified by the plugin (``"my_plugin.RbacAuthorizer"``); the name in
    ``authorizer.class.name`` selects one. Two plugins offering the same name is an error.
    """
