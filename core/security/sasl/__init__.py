"""SASL on the broker: the server side of each mechanism and the per-connection authenticator.

A mechanism is a :class:`SaslServer`: it takes the client's tokens one at a time
(:meth:`SaslServer.evaluate`) and answers with the server's, until it is complete; then its
``authorization_id`` names the principal (``User:<id>``). A wrong credential raises
:class:`SaslAuthenticationError`, whose message goes to the client (it never holds a password).
"""

from __future__ import annotations

from abc import ABC, abstractmethod


class SaslAuthenticationError(Exception):
    """Authentication failed; the message is what the client is told (Kafka's SaslAuthenticationException)."""


class SaslServer(ABC):
    """The server side of one SASL exchange (Kafka's ``javax.security.sasl.SaslServer``)."""

    mechanism = ""

    def __init__(self) -> None:
        self.complete = False
        self.authorization_id = ""
        # Epoch ms at which the credential stops being valid (an OAUTHBEARER token's exp), or None.
        self.credential_expiry_ms: int | None = None

    @abstractmethod
    def evaluate(self, token: bytes) -> bytes | None:
        """The response to the client's ``token`` (None: nothing to send)."""
        raise NotImplementedError


class SaslCredentialError(Exception):
    """The credentials were wrong. Unlike :class:`SaslAuthenticationError` its message is for the
    broker's log only: the client is told Kafka's generic "Authentication failed during
    authentication due to invalid credentials with SASL mechanism X" (which does not reveal
    whether the user exists)."""
