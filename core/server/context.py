"""Per-request context handed to handlers, the authorizer and the quota manager."""

from __future__ import annotations

from dataclasses import dataclass, field


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
