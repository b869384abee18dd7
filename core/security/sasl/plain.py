"""SASL/PLAIN (RFC 4616) as Kafka's ``PlainSaslServer`` with ``PlainServerCallbackHandler``.

Users come from the listener's JAAS config, as Kafka's ``PlainLoginModule`` takes them:
``org.apache.kafka.common.security.plain.PlainLoginModule required username="admin"
password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`` — each
``user_<name>="<password>"`` option is a user (``username``/``password`` are the broker's own
client credentials and are not users by themselves).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from strom.core.security.jaas import JaasEntry
from strom.core.security.sasl import SaslAuthenticationError, SaslServer

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def users_from_jaas(entry: JaasEntry) -> dict[str, str]:
    return {key[len("user_"):]: value for key, value in entry.options.items() if key.startswith("user_")}


class PlainSaslServer(SaslServer):
    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        super().__init__()
        self.users = users

    def evaluate(self, token: bytes) -> bytes | None:
        # Kafka's messages (PlainSaslServer.evaluateResponse), word for word.
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password") from None
        parts = text.split("\0")
        if len(parts) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self.users.get(username)
        # compare_digest on both paths: the time taken does not tell whether the user exists.
        ok = hmac.compare_digest((expected or "\0").encode(), password.encode()) and expected is not None
        if not ok:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""
