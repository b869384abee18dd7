"""The server side of a SASL connection: Kafka's ``SaslServerAuthenticator`` state machine.

A connection of a SASL_PLAINTEXT or SASL_SSL listener starts unauthenticated. It may send
ApiVersions (answered as usual), then must send SaslHandshake naming an enabled mechanism;
anything else is ``IllegalSaslState`` and closes the connection, as in Kafka.

* SaslHandshake v1 (every current client): the mechanism's tokens then come inside
  SaslAuthenticate requests (v0-v2) and go back inside SaslAuthenticate responses; v1+ responses
  carry ``session_lifetime_ms`` (KIP-368).
* SaslHandshake v0 (old clients): the tokens then come as bare size-prefixed frames with no
  Kafka header, and the server's tokens go back the same way.

A mechanism the listener does not enable is answered UNSUPPORTED_SASL_MECHANISM (with the
enabled list) and the connection closed; wrong credentials are answered
SASL_AUTHENTICATION_FAILED with Kafka's message and the connection closed.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0 (or an OAUTHBEARER token
that expires) a session has an end; a client re-authenticates by sending SaslHandshake again on
the authenticated connection, with the same mechanism and the same principal. A request that
arrives after the session ended closes the connection (:meth:`session_expired`).
"""

from __future__ import annotations

import enum
import logging
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from strom.core.protocol import codec
from strom.core.protocol.exceptions import MalformedRequestError
from strom.core.protocol.messages import response_messages
from strom.core.security.sasl import SaslAuthenticationError, SaslCredentialError, SaslServer

log = logging.getLogger(__name__)

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
SASL_AUTHENTICATE_VERSIONS = (0, 2)
SASL_HANDSHAKE_VERSIONS = (0, 1)
_SIZE = struct.Struct(">i")
# Kafka's MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS: at most one re-authentication a second.
MIN_REAUTH_INTERVAL_S = 1.0


class State(enum.Enum):
    HANDSHAKE_OR_VERSIONS_REQUEST = "HANDSHAKE_OR_VERSIONS_REQUEST"
    HANDSHAKE_REQUEST = "HANDSHAKE_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    REAUTH_PROCESS_HANDSHAKE = "REAUTH_PROCESS_HANDSHAKE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


class AuthenticationFailed(Exception):
    """The connection must close once ``response`` (if any) is sent.

    ``log_reason`` is for the broker's log (never a password); ``mechanism`` is the one tried.
    """

    def __init__(self, log_reason: str, response: bytes | None, mechanism: str | None) -> None:
        super().__init__(log_reason)
        self.response = response
        self.mechanism = mechanism


@dataclass(frozen=True, slots=True)
class SaslMechanismConfig:
    """What a listener's authenticator needs for one mechanism."""

    factory: Callable[[], SaslServer]
    max_reauth_ms: int  # connections.max.reauth.ms for this mechanism (0: no re-authentication)


ApiVersionsAnswer = Callable[[codec.RequestHeader, bytes, int], Awaitable[bytes]]


class SaslServerAuthenticator:
    """One connection's SASL state (see the module docstring)."""

    def __init__(self, mechanisms: dict[str, SaslMechanismConfig], api_versions: ApiVersionsAnswer) -> None:
        self.mechanisms = mechanisms
        self.enabled = tuple(mechanisms)
        self.api_versions = api_versions
        self.state = State.HANDSHAKE_OR_VERSIONS_REQUEST
        self.kafka_headers = True  # False after a v0 SaslHandshake: bare tokens
        self.server: SaslServer | None = None
        self.mechanism: str | None = None
        self.principal = ""
        self.session_expiry: float | None = None  # monotonic seconds; None: no session end
        self.session_lifetime_ms = 0
        self._previous_principal: str | None = None
        self._last_reauth_start = 0.0
        self.reauthentications = 0

    @property
    def complete(self) -> bool:
        return self.state is State.COMPLETE

    @property
    def reauthenticating(self) -> bool:
        return self._previous_principal is not None

    def _what(self) -> str:
        return "re-authentication" if self.reauthenticating else "authentication"

    # -- on an authenticated connection --------------------------------------------------------

    def session_expired(self, now: float | None = None) -> bool:
        return self.session_expiry is not None and (time.monotonic() if now is None else now) > self.session_expiry

    def maybe_begin_reauthentication(self) -> bool:
        """A SaslHandshake arrived on the authenticated connection: begin re-authentication if
        the session has an end and the last one began over a second ago (Kafka's
        ``maybeBeginServerReauthentication``); False: the handshake is an ordinary request."""
        if self.session_expiry is None or self.state is not State.COMPLETE:
            return False
        now = time.monotonic()
        if self._last_reauth_start and now - self._last_reauth_start < MIN_REAUTH_INTERVAL_S:
            return False
        self._last_reauth_start = now
        self._previous_principal = self.principal
        self.state = State.REAUTH_PROCESS_HANDSHAKE
        return True

    # -- frames --------------------------------------------------------------------------------

    async def receive(self, frame: bytes) -> bytes | None:
        """Handle one frame of the exchange; the frame to send back (with its size), if any.
        Raises :class:`AuthenticationFailed` when the connection must close."""
        try:
            if self.state is State.AUTHENTICATE:
                return self._token(frame)
            return await self._kafka_request(frame)
        except AuthenticationFailed:
            self.state = State.FAILED
            raise

    async def _kafka_request(self, frame: bytes) -> bytes | None:
        try:
            header, body_pos = codec.parse_header(frame)
        except MalformedRequestError:
            # Kafka would take a non-Kafka first packet for a GSSAPI token; strom has no GSSAPI.
            raise AuthenticationFailed("the first packet is not a Kafka request (a GSSAPI token?); GSSAPI is not "
                                       "supported", None, None) from None
        if header.api_key not in (API_VERSIONS, SASL_HANDSHAKE) or (
                header.api_key == API_VERSIONS and self.state is not State.HANDSHAKE_OR_VERSIONS_REQUEST):
            raise AuthenticationFailed(f"Unexpected Kafka request of type {_api_name(header.api_key)} during SASL "
                                       f"{'handshake' if header.api_key != API_VERSIONS else self._what()}.",
                                       None, None)
        if header.api_key == API_VERSIONS:
            response = await self.api_versions(header, frame, body_pos)
            self.state = State.HANDSHAKE_REQUEST
            return response
        lo, hi = SASL_HANDSHAKE_VERSIONS
        if not lo <= header.api_version <= hi:
            raise AuthenticationFailed(f"SaslHandshake version {header.api_version} is not supported", None, None)
        request = codec.decode_request(header, frame, body_pos)
        mechanism = str(request.mechanism)
        self.kafka_headers = header.api_version >= 1
        m = response_messages(SASL_HANDSHAKE, header.api_version)
        if mechanism not in self.mechanisms:
            response = m.make("SaslHandshakeResponse", error_code=ErrorCode.unsupported_sasl_mechanism,
                              mechanisms=self.enabled)
            raise AuthenticationFailed(f"Unsupported SASL mechanism {mechanism}",
                                       codec.encode_response(SASL_HANDSHAKE, header.api_version, header.correlation_id,
                                                             response), mechanism)
        response = m.make("SaslHandshakeResponse", error_code=ErrorCode.none, mechanisms=self.enabled)
        encoded = codec.encode_response(SASL_HANDSHAKE, header.api_version, header.correlation_id, response)
        if self.reauthenticating and mechanism != self.mechanism:
            # Kafka answers the handshake, then fails the next token (REAUTH_BAD_MECHANISM).
            raise AuthenticationFailed(
                f"SASL mechanism '{mechanism}' requested by client is not supported for re-authentication of "
                f"mechanism '{self.mechanism}'", encoded, mechanism)
        self.mechanism = mechanism
        self.server = self.mechanisms[mechanism].factory()
        self.state = State.AUTHENTICATE
        return encoded

    def _token(self, frame: bytes) -> bytes | None:
        assert self.server is not None and self.mechanism is not None
        if not self.kafka_headers:
            try:
                token = self.server.evaluate(bytes(frame))
            except (SaslAuthenticationError, SaslCredentialError) as e:
                raise AuthenticationFailed(str(e), None, self.mechanism) from None
            if self.server.complete:
                self._completed()
            return None if token is None else codec.frame(token)
        try:
            header, body_pos = codec.parse_header(frame)
        except MalformedRequestError as e:
            raise AuthenticationFailed(f"malformed request during SASL {self._what()}: {e}", None,
                                       self.mechanism) from None
        if header.api_key != SASL_AUTHENTICATE:
            raise AuthenticationFailed(f"Unexpected Kafka request of type {_api_name(header.api_key)} during SASL "
                                       f"{self._what()}.", None, self.mechanism)
        version = header.api_version
        if not SASL_AUTHENTICATE_VERSIONS[0] <= version <= SASL_AUTHENTICATE_VERSIONS[1]:
            raise AuthenticationFailed(f"Version {version} is not supported for apiKey SASL_AUTHENTICATE", None,
                                       self.mechanism)
        request = codec.decode_request(header, frame, body_pos)
        m = response_messages(SASL_AUTHENTICATE, version)

        def failed(message: str, log_reason: str) -> AuthenticationFailed:
            response = m.make("SaslAuthenticateResponse", error_code=ErrorCode.sasl_authentication_failed,
                              error_message=message, auth_bytes=b"", session_lifetime=0)
            return AuthenticationFailed(log_reason, codec.encode_response(
                SASL_AUTHENTICATE, version, header.correlation_id, response), self.mechanism)

        try:
            token = self.server.evaluate(bytes(request.auth_bytes))
            if self.server.complete and self.reauthenticating:
                principal = "User:" + self.server.authorization_id
                if principal != self._previous_principal:
                    raise SaslAuthenticationError(
                        f"Cannot change principals during re-authentication from {self._previous_principal}: "
                        f"{principal}")
        except SaslAuthenticationError as e:
            raise failed(str(e), str(e)) from None
        except SaslCredentialError as e:
            message = (f"Authentication failed during {self._what()} due to invalid credentials with SASL mechanism "
                       f"{self.mechanism}")
            raise failed(message, f"{message} ({e})") from None
        lifetime = 0
        if self.server.complete:
            lifetime = self._completed()
        response = m.make("SaslAuthenticateResponse", error_code=ErrorCode.none, error_message=None,
                          auth_bytes=token or b"", session_lifetime=lifetime)
        return codec.encode_response(SASL_AUTHENTICATE, version, header.correlation_id, response)

    def _completed(self) -> int:
        """Authentication is complete: the principal and the session's end (Kafka's
        calcCompletionTimesAndReturnSessionLifetimeMs); returns the session lifetime in ms."""
        assert self.server is not None and self.mechanism is not None
        self.principal = "User:" + self.server.authorization_id
        if self.reauthenticating:
            self.reauthentications += 1
        self._previous_principal = None
        now_ms = int(time.time() * 1000)
        max_reauth = self.mechanisms[self.mechanism].max_reauth_ms
        expiry = self.server.credential_expiry_ms
        lifetime = 0
        if expiry is not None or max_reauth > 0:
            if expiry is None:
                lifetime = max(0, max_reauth)
            elif max_reauth <= 0:
                lifetime = max(0, expiry - now_ms)
            else:
                lifetime = max(0, min(expiry - now_ms, max_reauth))
            self.session_expiry = time.monotonic() + lifetime / 1000
        else:
            self.session_expiry = None
        self.session_lifetime_ms = lifetime
        self.state = State.COMPLETE
        return lifetime


def _api_name(api_key: int) -> str:
    from kio.schema.index import api_key_map

    name = api_key_map.get(api_key)
    return str(api_key) if name is None else name.upper()
