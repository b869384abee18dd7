"""Built-in authorizer ``standard``: Kafka's StandardAuthorizer, ACLs from the metadata log.

Selected by ``authorizer.class.name=standard`` or Kafka's own
``org.apache.kafka.metadata.authorizer.StandardAuthorizer``. The rules are those of Kafka's
``StandardAuthorizerData``:

* a principal listed in ``super.users`` (``User:alice;User:bob``) may do everything;
* otherwise the ACLs that apply to the resource are those of its type whose pattern is the
  LITERAL name, the LITERAL wildcard ``*``, or a PREFIXED prefix of the name; of these, the ones
  for the principal (or ``User:*``) and the client's host (or ``*``) decide: a matching DENY
  wins over any ALLOW; an ALLOW for the operation (or ALL) allows; an ALLOW of READ, WRITE,
  DELETE or ALTER also allows DESCRIBE, and ALTER_CONFIGS allows DESCRIBE_CONFIGS (a DENY
  implies nothing);
* no ACL decides: DENIED if the resource has ACLs at all (for anyone), else the
  ``allow.everyone.if.no.acl.found`` default (false: DENIED).

The ACLs arrive through :class:`~strom.plugins.hookspecs.authorizers.ClusterMetadataAuthorizer`:
the broker replays the committed ``AccessControlEntryRecord`` s into it. Lookups are dict hits:
one for the literal name, one for the wildcard and one per prefix length of the name.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from strom.plugins.hookspecs.authorizers import (
    ALLOW_EVERYONE_KEY,
    STANDARD_AUTHORIZER,
    SUPER_USERS_KEY,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    AuthorizerFactory,
    PatternType,
    RequestContext,
    ResourceType,
    host_of,
)
from strom.plugins.markers import hookimpl

log = logging.getLogger(__name__)
# Kafka's audit logger name, so log configs written for Kafka find the same lines.
audit_log = logging.getLogger("kafka.authorizer.logger")

IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                              AclOperation.DELETE, AclOperation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


def parse_super_users(value: object) -> frozenset[str]:
    """``super.users`` as Kafka reads it: principals separated by semicolons."""
    if value is None:
        return frozenset()
    items = value if isinstance(value, (list, tuple, set, frozenset)) else str(value).split(";")
    return frozenset(str(p).strip() for p in items if str(p).strip())


def parse_bool(value: object) -> bool:
    return value is True or str(value).strip().lower() == "true"


def entry_result(operation: AclOperation, principals: tuple[str, str], host: str,
                 binding: AclBinding) -> AuthorizationResult | None:
    """What one ACL says about ``operation`` for the principal and host (Kafka's ``findResult``):
    None when it does not apply to them."""
    entry = binding.entry
    if entry.principal not in principals:
        return None
    if entry.host != WILDCARD_HOST and entry.host != host:
        return None
    if entry.operation != AclOperation.ALL:
        if entry.permission_type == AclPermissionType.ALLOW:
            if operation == AclOperation.DESCRIBE:
                if entry.operation not in IMPLIES_DESCRIBE:
                    return None
            elif operation == AclOperation.DESCRIBE_CONFIGS:
                if entry.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation != entry.operation:
                return None
        elif operation != entry.operation:
            return None
    return AuthorizationResult.ALLOWED if entry.permission_type == AclPermissionType.ALLOW else AuthorizationResult.DENIED


@dataclass(slots=True)
class _Section:
    """The ACLs of one resource type, by pattern: literal name -> ids, prefix -> ids."""

    literal: dict[str, set[str]] = field(default_factory=dict)
    prefixed: dict[str, set[str]] = field(default_factory=dict)

    def index(self, pattern_type: PatternType) -> dict[str, set[str]]:
        return self.literal if pattern_type == PatternType.LITERAL else self.prefixed


class StandardAuthorizer:
    """Kafka's StandardAuthorizer (see the module docstring for the rules).

    Not thread-safe, and needs no lock in the broker: the ACL indexes change (``load_snapshot``,
    ``add_acl``, ``remove_acl``, called by the AclPublisher) and are read (``authorize``,
    ``acls``) on the broker's event loop only. A caller on another thread must serialize with it
    (Kafka swaps an immutable ``StandardAuthorizerData`` instead)."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        props = dict(config or {})
        self.super_users = parse_super_users(props.get(SUPER_USERS_KEY))
        self.allow_everyone_if_no_acl_found = parse_bool(props.get(ALLOW_EVERYONE_KEY, False))
        self.default_result = (AuthorizationResult.ALLOWED if self.allow_everyone_if_no_acl_found
                               else AuthorizationResult.DENIED)
        self._acls: dict[str, AclBinding] = {}
        self._sections: dict[ResourceType, _Section] = {}

    # -- ClusterMetadataAuthorizer --------------------------------------------------------------

    def load_snapshot(self, acls: Mapping[str, AclBinding]) -> None:
        self._acls = {}
        self._sections = {}
        for acl_id, binding in acls.items():
            self.add_acl(acl_id, binding)
        log.info("StandardAuthorizer initialized with %d acl(s).", len(self._acls))

    def add_acl(self, acl_id: str, binding: AclBinding) -> None:
        if acl_id in self._acls:
            self.remove_acl(acl_id)
        self._acls[acl_id] = binding
        section = self._sections.setdefault(binding.pattern.resource_type, _Section())
        section.index(binding.pattern.pattern_type).setdefault(binding.pattern.name, set()).add(acl_id)

    def remove_acl(self, acl_id: str) -> None:
        binding = self._acls.pop(acl_id, None)
        if binding is None:
            log.warning("StandardAuthorizer: no ACL with id %s to remove", acl_id)
            return
        section = self._sections[binding.pattern.resource_type]
        index = section.index(binding.pattern.pattern_type)
        ids = index[binding.pattern.name]
        ids.discard(acl_id)
        if not ids:
            del index[binding.pattern.name]

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self._acls.values() if acl_filter.matches(b)]

    def acl_count(self) -> int:
        return len(self._acls)

    # -- Authorizer -----------------------------------------------------------------------------

    def authorize(self, ctx: RequestContext, actions: Sequence[Action]) -> list[AuthorizationResult]:
        if ctx.principal in self.super_users:
            return [self._audit(ctx, a, AuthorizationResult.ALLOWED, "SuperUser") for a in actions]
        host = host_of(ctx.client_address)
        principals = (ctx.principal, WILDCARD_PRINCIPAL)
        return [self._authorize_one(ctx, principals, host, a) for a in actions]

    def _applicable(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every ACL whose pattern applies to resource ``name`` of ``resource_type``."""
        section = self._sections.get(resource_type)
        if section is None:
            return []
        ids: list[str] = []
        ids += section.literal.get(name, ())
        if name != WILDCARD_RESOURCE:
            ids += section.literal.get(WILDCARD_RESOURCE, ())
        if section.prefixed:
            for end in range(1, len(name) + 1):
                ids += section.prefixed.get(name[:end], ())
        return [self._acls[i] for i in ids]

    def _authorize_one(self, ctx: RequestContext, principals: tuple[str, str], host: str,
                       action: Action) -> AuthorizationResult:
        applicable = self._applicable(action.resource.resource_type, action.resource.name)
        allow: AclBinding | None = None
        for binding in applicable:
            result = entry_result(action.operation, principals, host, binding)
            if result is AuthorizationResult.DENIED:
                return self._audit(ctx, action, result, f"MatchingAcl(acl={binding})")
            if result is AuthorizationResult.ALLOWED:
                allow = binding
        if allow is not None:
            return self._audit(ctx, action, AuthorizationResult.ALLOWED, f"MatchingAcl(acl={allow})")
        if applicable:  # the resource has ACLs, none for this principal and operation
            return self._audit(ctx, action, AuthorizationResult.DENIED, "DefaultDeny")
        rule = "DefaultAllow" if self.default_result is AuthorizationResult.ALLOWED else "DefaultDeny"
        return self._audit(ctx, action, self.default_result, rule)

    def _audit(self, ctx: RequestContext, action: Action, result: AuthorizationResult,
               rule: str) -> AuthorizationResult:
        # Kafka's levels: a denied access that was asked for at INFO, an allowed one at DEBUG,
        # the rest (authorized-operations probes, filtering) at TRACE (here: DEBUG only when set).
        if result is AuthorizationResult.DENIED and action.log_if_denied:
            level = logging.INFO
        elif result is AuthorizationResult.ALLOWED and action.log_if_allowed:
            level = logging.DEBUG
        else:
            return result
        if audit_log.isEnabledFor(level):
            r = action.resource
            audit_log.log(level, "Principal = %s is %s operation = %s from host = %s on resource = %s:%s:%s "
                          "for request = %s with resourceRefCount = %d based on rule %s",
                          ctx.principal, "Allowed" if result is AuthorizationResult.ALLOWED else "Denied",
                          action.operation.name, host_of(ctx.client_address), r.resource_type.name.title()
                          .replace("_", ""), r.pattern_type.name, r.name, _api_name(ctx.api_key),
                          action.resource_reference_count, rule)
        return result


def _api_name(api_key: int) -> str:
    """Kafka's ApiKeys name of a request (PRODUCE, CREATE_ACLS ...), for the audit line."""
    from kio.index import api_key_map  # only when an audit line is written

    name = api_key_map.get(api_key)
    return name.upper() if name else str(api_key)


@hookimpl
def strom_authorizers() -> Mapping[str, AuthorizerFactory]:
    return {STANDARD_AUTHORIZER: StandardAuthorizer}
