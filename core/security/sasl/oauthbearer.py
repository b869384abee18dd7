"""SASL/OAUTHBEARER (RFC 7628) with Kafka's unsecured JWT validator, for development.

Kafka's ``OAuthBearerSaslServer`` with ``OAuthBearerUnsecuredValidatorCallbackHandler``: the
client's initial response carries ``auth=Bearer <JWS>``; the JWS must be unsigned (header
``"alg":"none"``, empty signature), its principal claim (``unsecuredValidatorPrincipalClaimName``,
default ``sub``) a non-empty string, ``exp`` present and not past (give or take
``unsecuredValidatorAllowableClockSkewMs``), ``iat`` not in the future, and every scope of
``unsecuredValidatorRequiredScope`` in the scope claim (``unsecuredValidatorScopeClaimName``,
default ``scope``). Those options come from the listener's OAUTHBEARER JAAS config. A token that
fails gets Kafka's error challenge ``{"status":"invalid_token"}``; the client acknowledges it
with ``%x01`` and is then refused. The token's ``exp`` bounds the session (KIP-368).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from strom.core.security.sasl import SaslAuthenticationError, SaslServer

log = logging.getLogger(__name__)

OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
UNSECURED_VALIDATOR = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                       "OAuthBearerUnsecuredValidatorCallbackHandler")
_CONTROL_A = "\x01"


class _InvalidToken(Exception):
    pass


def _b64url_json(part: str, what: str) -> dict[str, Any]:
    try:
        data = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(data)
    except (binascii.Error, ValueError) as e:
        raise _InvalidToken(f"the JWS {what} is not base64url-encoded JSON ({e})") from None
    if not isinstance(value, dict):
        raise _InvalidToken(f"the JWS {what} is not a JSON object")
    return value


def validate_unsecured_jws(token: str, options: Mapping[str, str], now_ms: int) -> tuple[str, int]:
    """(principal name, expiry epoch ms) of a valid unsecured token; raises _InvalidToken."""
    parts = token.split(".")
    if len(parts) != 3:
        raise _InvalidToken("an unsecured JWS has three dot-separated parts")
    header, claims = _b64url_json(parts[0], "header"), _b64url_json(parts[1], "payload")
    if parts[2]:
        raise _InvalidToken("an unsecured JWS must have an empty signature")
    if header.get("alg") != "none":
        raise _InvalidToken('the JWS header must say "alg":"none"')
    claim_name = options.get("unsecuredValidatorPrincipalClaimName", "sub") or "sub"
    principal = claims.get(claim_name)
    if not isinstance(principal, str) or not principal.strip():
        raise _InvalidToken(f"the principal claim {claim_name!r} is missing or not a non-empty string")
    skew = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0") or 0)
    exp = claims.get("exp")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        raise _InvalidToken("the token has no numeric 'exp' claim")
    expiry_ms = int(exp * 1000)
    if now_ms > expiry_ms + skew:
        raise _InvalidToken("The indicated time is after the expiration time")
    iat = claims.get("iat")
    if isinstance(iat, int | float) and not isinstance(iat, bool) and int(iat * 1000) > now_ms + skew:
        raise _InvalidToken("The indicated time is before the issued-at time")
    required = [s.strip() for s in options.get("unsecuredValidatorRequiredScope", "").split(",") if s.strip()]
    if required:
        scope_claim = claims.get(options.get("unsecuredValidatorScopeClaimName", "scope") or "scope")
        scopes = scope_claim.split() if isinstance(scope_claim, str) else scope_claim if isinstance(
            scope_claim, list) else []
        missing = [s for s in required if s not in scopes]
        if missing:
            raise _InvalidToken(f"the token lacks the required scope {missing}")
    return principal, expiry_ms


class OAuthBearerSaslServer(SaslServer):
    mechanism = "OAUTHBEARER"

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__()
        self.options = options
        self._error: str | None = None

    def evaluate(self, token: bytes) -> bytes | None:
        if token == b"\x01" and self._error is not None:
            raise SaslAuthenticationError(self._error)
        self._error = None
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid OAUTHBEARER client first message: not UTF-8") from None
        gs2, sep, rest = text.partition(_CONTROL_A)
        if not sep or not gs2.startswith(("n,", "y,")) or not rest.endswith(_CONTROL_A * 2):
            raise SaslAuthenticationError("Invalid OAUTHBEARER client first message")
        authzid = ""
        gs2_fields = gs2.split(",")
        if len(gs2_fields) >= 2 and gs2_fields[1].startswith("a="):
            authzid = gs2_fields[1][2:]
        values = dict(kv.partition("=")[::2] for kv in rest.rstrip(_CONTROL_A).split(_CONTROL_A) if kv)
        auth = values.get("auth", "")
        scheme, _, bearer = auth.partition(" ")
        if scheme.lower() != "bearer" or not bearer.strip():
            raise SaslAuthenticationError("Invalid OAUTHBEARER client first message: no auth=Bearer token")
        try:
            principal, expiry_ms = validate_unsecured_jws(bearer.strip(), self.options, int(time.time() * 1000))
        except _InvalidToken as e:
            log.debug("OAUTHBEARER token refused: %s", e)
            # Kafka's jsonErrorResponse; the client answers with %x01 and is refused then.
            self._error = json.dumps({"status": "invalid_token"}, separators=(",", ":"))
            return self._error.encode()
        if authzid and authzid != principal:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is different from "
                f"the token's principal name ({principal})")
        self.authorization_id = principal
        self.credential_expiry_ms = expiry_ms
        self.complete = True
        return b""
