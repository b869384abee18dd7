"""Extension point: authorizers (modelled on Kafka's ``org.apache.kafka.server.authorizer``).

The broker builds one :class:`RequestContext` per request and a list of :class:`Action` s (one
per resource the request touches), calls :meth:`Authorizer.authorize` once and maps each
``DENIED`` onto the request's error code (``TOPIC_AUTHORIZATION_FAILED``,
``GROUP_AUTHORIZATION_FAILED``, ``CLUSTER_AUTHORIZATION_FAILED``...).

Selection: every plugin may offer authorizers by name through :func:`strom_authorizers`; the
broker config key ``authorizer.class.name`` picks one (empty = the built-in ``allow-all``;
Kafka's ``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` selects the built-in
``standard``, see :data:`AUTHORIZER_ALIASES`). The object is created once at broker start-up;
the request path calls it directly.

ACLs: an authorizer that keeps Kafka's ACLs implements :class:`ClusterMetadataAuthorizer` as
well (Kafka's interface of that name). The broker then serves CreateAcls / DescribeAcls /
DeleteAcls: created and deleted ACLs become ``AccessControlEntryRecord`` /
``RemoveAccessControlEntryRecord`` records of the metadata log, and every committed change
(and the whole set at start-up, replayed from the log) reaches the authorizer through
:meth:`ClusterMetadataAuthorizer.load_snapshot` / ``add_acl`` / ``remove_acl``. Without one, the
ACL APIs answer SECURITY_DISABLED, as Kafka does without an authorizer. The data types here
(:class:`AclBinding`, :class:`AclBindingFilter` ...) are Kafka's ``org.apache.kafka.common.acl``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from strom.plugins.markers import hookspec

CONFIG_KEY = "authorizer.class.name"
DEFAULT_AUTHORIZER = "allow-all"
STANDARD_AUTHORIZER = "standard"
# Kafka's class names that select a strom plugin of the same behaviour.
AUTHORIZER_ALIASES: Mapping[str, str] = {
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer": STANDARD_AUTHORIZER,
}
SUPER_USERS_KEY = "super.users"
ALLOW_EVERYONE_KEY = "allow.everyone.if.no.acl.found"
WILDCARD_RESOURCE = "*"  # a LITERAL ACL on "*" matches every name of its resource type
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"


def plugin_name(configured: str) -> str:
    """The strom plugin name ``authorizer.class.name`` selects (Kafka's class names are aliases)."""
    return AUTHORIZER_ALIASES.get(configured.strip(), configured.strip())


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


class AclPermissionType(enum.IntEnum):
    """Kafka's ``AclPermissionType`` with its wire codes."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


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
class AccessControlEntry:
    """Who may (ALLOW) or may not (DENY) do what from where: ``principal`` is ``Type:name``
    (``User:*`` any user), ``host`` an IP address or ``*``."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern (LITERAL or PREFIXED) and an entry."""

    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Kafka's ``ResourcePatternFilter``: ``name`` None matches any name; pattern type ANY matches
    every pattern by exact name, MATCH every pattern that would apply to a resource ``name``
    (the literal name, the wildcard ``*``, any prefix of it)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    def find_indefinite_field(self) -> str | None:
        """Why this filter matches more than one pattern (None if it is one exact pattern)."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            return "Resource type is " + self.resource_type.name + "."
        if self.pattern_type in (PatternType.ANY, PatternType.MATCH, PatternType.UNKNOWN):
            return "Resource pattern type is " + self.pattern_type.name + "."
        if self.name is None:
            return "Resource name is NULL."
        return None


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Kafka's ``AccessControlEntryFilter``: None / ANY fields match everything."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type

    def find_indefinite_field(self) -> str | None:
        if self.principal is None:
            return "Principal is NULL."
        if self.host is None:
            return "Host is NULL."
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            return "Operation is " + self.operation.name + "."
        if self.permission_type in (AclPermissionType.ANY, AclPermissionType.UNKNOWN):
            return "Permission type is " + self.permission_type.name + "."
        return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's ``AclBindingFilter`` (DescribeAcls and DeleteAcls take these)."""

    pattern_filter: ResourcePatternFilter = ResourcePatternFilter()
    entry_filter: AccessControlEntryFilter = AccessControlEntryFilter()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(binding.entry)

    def find_indefinite_field(self) -> str | None:
        return self.pattern_filter.find_indefinite_field() or self.entry_filter.find_indefinite_field()


ANY_ACL = AclBindingFilter()


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


@runtime_checkable
class ClusterMetadataAuthorizer(Authorizer, Protocol):
    """An authorizer whose ACLs live in the metadata log (Kafka's ``ClusterMetadataAuthorizer``).

    The broker replays the committed ACL records into it: :meth:`load_snapshot` with every ACL
    once the log (or a snapshot) has been loaded at start-up, then :meth:`add_acl` /
    :meth:`remove_acl` for each committed change. ``acl_id`` is the record's id (a UUID in
    its string form). All calls happen on the broker's event loop.
    """

    def load_snapshot(self, acls: Mapping[str, AclBinding]) -> None:
        """Replace every ACL with ``acls`` (id -> binding)."""
        ...

    def add_acl(self, acl_id: str, binding: AclBinding) -> None: ...

    def remove_acl(self, acl_id: str) -> None: ...

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The ACLs matching ``acl_filter`` (DescribeAcls)."""
        ...


def authorize_by_resource_type(authorizer: Authorizer, ctx: RequestContext, operation: AclOperation,
                               resource_type: ResourceType) -> AuthorizationResult:
    """May the principal perform ``operation`` on at least one resource of ``resource_type``?

    Kafka's ``Authorizer.authorizeByResourceType`` default (InitProducerId asks it about WRITE
    on any topic): ALLOWED when the hard-coded name passes (super users, no ACLs with
    ``allow.everyone.if.no.acl.found``), DENIED on a wildcard DENY; otherwise ALLOWED if some
    ALLOW pattern for the principal and host is not covered by a DENY pattern. An authorizer
    without ACLs (not a :class:`ClusterMetadataAuthorizer`) is asked about the probe name only.
    """
    probe = Action(operation, ResourcePattern(resource_type, "hardcode"), 0, True, False)
    if authorizer.authorize(ctx, [probe])[0] is AuthorizationResult.ALLOWED:
        return AuthorizationResult.ALLOWED
    if not isinstance(authorizer, ClusterMetadataAuthorizer):  # no ACLs to look through: the probe decides
        return AuthorizationResult.DENIED
    host = host_of(ctx.client_address)
    deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
    allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
    for binding in authorizer.acls(AclBindingFilter(ResourcePatternFilter(resource_type, None, PatternType.ANY))):
        entry, pattern = binding.entry, binding.pattern
        if entry.host not in (host, WILDCARD_HOST) or entry.principal not in (ctx.principal, WILDCARD_PRINCIPAL):
            continue
        if entry.operation not in (operation, AclOperation.ALL):
            continue
        if entry.permission_type == AclPermissionType.DENY:
            if pattern.pattern_type == PatternType.LITERAL and pattern.name == WILDCARD_RESOURCE:
                return AuthorizationResult.DENIED
            deny.setdefault(pattern.pattern_type, set()).add(pattern.name)
        elif entry.permission_type == AclPermissionType.ALLOW:
            if pattern.pattern_type == PatternType.LITERAL and pattern.name == WILDCARD_RESOURCE:
                return AuthorizationResult.ALLOWED
            allow.setdefault(pattern.pattern_type, set()).add(pattern.name)
    for pattern_type, names in allow.items():
        for name in names:
            if pattern_type == PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                continue
            if not any(name[:i] in deny[PatternType.PREFIXED] for i in range(1, len(name) + 1)):
                return AuthorizationResult.ALLOWED
    return AuthorizationResult.DENIED


def host_of(client_address: str) -> str:
    """The IP address of a ``host:port`` client address (an address without a port as is)."""
    host, sep, port = client_address.rpartition(":")
    if sep and port.isdigit() and host:
        return host.strip("[]")
    return client_address


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
