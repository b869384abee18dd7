"""Small helpers the group API handlers share (coordinator lookup, group ACLs, client host)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from strom.core.server.context import RequestContext

if TYPE_CHECKING:
    from strom.core.coordinator.group.coordinator import GroupCoordinator
    from strom.core.server.broker import Broker

INT32_MIN = -(1 << 31)  # "authorized operations not requested"
# Kafka AclOperation codes of the operations a group supports (for authorized_operations).
GROUP_OPERATIONS = {"READ": 3, "DELETE": 6, "DESCRIBE": 8}


def coordinator_of(broker: Broker) -> GroupCoordinator | None:
    return getattr(broker, "group_coordinator", None)


def denied_groups(broker: Broker, ctx: RequestContext, operation: str, group_ids: list[str]) -> set[str]:
    if not group_ids:
        return set()
    allowed = broker.authorize(ctx, operation, "GROUP", group_ids)
    return {g for g, ok in zip(group_ids, allowed, strict=True) if not ok}


def group_operations(broker: Broker, ctx: RequestContext, group_id: str) -> int:
    """Bit set of the ACL operations the caller may perform on a group."""
    bits = 0
    for name, code in GROUP_OPERATIONS.items():
        if broker.authorize(ctx, name, "GROUP", [group_id])[0]:
            bits |= 1 << code
    return bits


def client_host(ctx: RequestContext) -> str:
    """Kafka's clientHost: ``/`` + the client's IP address."""
    addr: Any = ctx.client_address or ""
    host = addr.rsplit(":", 1)[0] if addr.count(":") == 1 else addr
    return host if host.startswith("/") else f"/{host}"
