"""The request context every layer that serves a request sees, and the authorizer view of it.

Below the server and the coordinators (both import it), so the coordinators' request helpers
need nothing from :mod:`strom.core.server`. :class:`RequestContext` mirrors Kafka's
``AuthorizableRequestContext``; :class:`Authorizing` is the one thing a request helper asks of
the node serving it: may this principal do this operation to these resources.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(slots=True)
class RequestContext:
    """Who sent a request and how (mirrors Kafka's AuthorizableRequestContext)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    client_address: str
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    principal: str = "User:ANONYMOUS"
    # Set by a handler when a quota asks the channel to be muted after the response is sent.
    throttle_ms: int = field(default=0)
    # When the request was read (monotonic ns): its handling time is what the request quota
    # (request_percentage) charges, as Kafka's ClientRequestQuotaManager.
    received_ns: int = field(default_factory=time.monotonic_ns)


class Authorizing(Protocol):
    """Asks the configured authorizer (the broker satisfies it)."""

    def authorize(self, ctx: RequestContext, operation: str, resource_type: str,
                  names: Iterable[str], *, audit: bool = True) -> list[bool]:
        """``operation`` (Kafka's AclOperation name) on each named resource of ``resource_type``
        (Kafka's ResourceType name): allowed or not, in order. ``audit=False`` marks a probe
        (authorized operations) the authorizer's audit log leaves out, as Kafka's
        ``logIfAllowed``/``logIfDenied`` false."""
        ...


def denied(deps: Authorizing, ctx: RequestContext, operation: str, resource_type: str,
           names: Sequence[str]) -> set[str]:
    """Ask the authorizer about ``operation`` on each named resource; returns the denied names."""
    if not names:
        return set()
    allowed = deps.authorize(ctx, operation, resource_type, names)
    return {n for n, ok in zip(names, allowed, strict=True) if not ok}
