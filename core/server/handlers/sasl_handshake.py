"""SaslHandshake (key 17, v0-1) outside the SASL exchange.

On a SASL listener the exchange itself (handshake, tokens, re-authentication) is handled by
the connection's authenticator (:mod:`strom.core.security.sasl.authenticator`) before requests
reach dispatch. A SaslHandshake that does reach this handler came on a listener without SASL,
or on an authenticated connection that cannot re-authenticate now; Kafka's KafkaApis answers
it ILLEGAL_SASL_STATE, and so does strom.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import RequestDeps
    from strom.core.server.handlers._kio_types import SaslHandshakeRequest, SaslHandshakeResponse

API_KEY = 17
VERSIONS = (0, 1)


async def handle(deps: RequestDeps, ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    m = response_messages(API_KEY, ctx.api_version)
    return m.make("SaslHandshakeResponse", error_code=ErrorCode.illegal_sasl_state, mechanisms=())
