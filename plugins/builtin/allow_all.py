"""Built-in authorizer ``allow-all``: every action is allowed (Kafka without an authorizer)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from strom.plugins.hookspecs.authorizers import (
    DEFAULT_AUTHORIZER,
    Action,
    AuthorizationResult,
    AuthorizerFactory,
    RequestContext,
)
from strom.plugins.markers import hookimpl


class AllowAllAuthorizer:
    """Allows everything; what a broker without ``authorizer.class.name`` uses."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        pass

    def authorize(self, ctx: RequestContext, actions: Sequence[Action]) -> list[AuthorizationResult]:
        return [AuthorizationResult.ALLOWED] * len(actions)


@hookimpl
def strom_authorizers() -> Mapping[str, AuthorizerFactory]:
    return {DEFAULT_AUTHORIZER: AllowAllAuthorizer}
