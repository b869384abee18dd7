"""Small helpers the group API handlers share (coordinator lookup, group ACLs, client host)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.request_context import Authorizing, RequestContext, denied

if TYPE_CHECKING:
    from strom.core.coordinator.group.coordinator import GroupCoordinator

INT32_MIN = -(1 << 31)  # "authorized operations not requested"
# Kafka's AclOperation codes of the operations a GROUP resource supports (AclEntry.supportedOperations:
# the two config operations came with KIP-848's group configs); authorized_operations is their bit set.
GROUP_ACL_OPERATIONS = {"READ": 3, "DELETE": 6, "DESCRIBE": 8, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11}


def coordinator_of(broker: object) -> GroupCoordinator | None:
    return getattr(broker, "group_coordinator", None)


def denied_groups(broker: Authorizing, ctx: RequestContext, operation: str, group_ids: list[str]) -> set[str]:
    return denied(broker, ctx, operation, "GROUP", group_ids)


def group_coordinator_for(deps: Authorizing, ctx: RequestContext, operation: str,
                          group_id: str) -> tuple[GroupCoordinator | None, int]:
    """The coordinator to ask about ``group_id`` and 0, or None and the error code that answers
    instead: GROUP_AUTHORIZATION_FAILED first, then COORDINATOR_NOT_AVAILABLE (as KafkaApis checks)."""
    if denied_groups(deps, ctx, operation, [group_id]):
        return None, int(ErrorCode.group_authorization_failed)
    coordinator = coordinator_of(deps)
    if coordinator is None:
        return None, int(ErrorCode.coordinator_not_available)
    return coordinator, 0


def authorized_group_operations(broker: Authorizing, ctx: RequestContext, group_id: str) -> int:
    """Bit set of the ACL operations the caller may perform on ``group_id`` (as Kafka's
    AuthHelper.authorizedOperations: every supported operation when no ACL denies it)."""
    return sum(1 << code for op, code in GROUP_ACL_OPERATIONS.items()
               if broker.authorize(ctx, op, "GROUP", [group_id])[0])


def client_host(ctx: RequestContext) -> str:
    """Kafka's clientHost: ``/`` + the client's IP address."""
    addr: Any = ctx.client_address or ""
    host = addr.rsplit(":", 1)[0] if addr.count(":") == 1 else addr
    return host if host.startswith("/") else f"/{host}"
