"""SaslAuthenticate (key 36, v0-2) outside the SASL exchange.

Tokens of an exchange in progress are read by the connection's authenticator
(:mod:`strom.core.security.sasl.authenticator`), which answers them with the mechanism's
challenge and, from v1, ``session_lifetime_ms``. One that reaches this handler came after
authentication completed or on a listener without SASL: ILLEGAL_SASL_STATE, as Kafka's
KafkaApis answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import RequestDeps
    from strom.core.server.handlers._kio_types import SaslAuthenticateRequest, SaslAuthenticateResponse

API_KEY = 36
VERSIONS = (0, 2)


async def handle(deps: RequestDeps, ctx: RequestContext,
                 request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    m = response_messages(API_KEY, ctx.api_version)
    return m.make("SaslAuthenticateResponse", error_code=ErrorCode.illegal_sasl_state,
                  error_message="SaslAuthenticate request received after successful authentication",
                  auth_bytes=b"", session_lifetime=0)
