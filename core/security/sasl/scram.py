"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802 / RFC 7677) as Kafka's ``ScramSaslServer``.

The exchange is scramp's (a maintained SCRAM implementation); the credentials are Kafka's:
one ``UserScramCredentialRecord`` per user and mechanism in the metadata log (salt, stored key,
server key, iterations), replayed into a :class:`ScramCredentialStore` the listeners read.
They get there through ``strom storage format --add-scram`` or AlterUserScramCredentials
(``kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=...]' --entity-type users``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import scramp

from strom.core.security.sasl import SaslAuthenticationError, SaslCredentialError, SaslServer

if TYPE_CHECKING:
    from strom.core.metadata.delta import MetadataDelta
    from strom.core.metadata.image import MetadataImage

# Kafka's ScramMechanism: name -> (type id in records and the admin API, hash, min iterations).
MECHANISMS: dict[str, tuple[int, str]] = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
MECHANISM_NAMES = {type_id: name for name, (type_id, _) in MECHANISMS.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384  # Kafka's ScramMechanism.maxIterations


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def credential_from_salted_password(mechanism: str, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    """Kafka's ScramFormatter: ClientKey = HMAC(salted, "Client Key"), StoredKey = H(ClientKey),
    ServerKey = HMAC(salted, "Server Key")."""
    hash_name = MECHANISMS[mechanism][1]
    client_key = hmac.new(salted_password, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = hmac.new(salted_password, b"Server Key", hash_name).digest()
    return ScramCredential(salt, stored_key, server_key, iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism][1], password.encode(), salt, iterations)


def credential_from_password(mechanism: str, password: str, *, salt: bytes | None = None,
                             iterations: int = MIN_ITERATIONS) -> ScramCredential:
    salt = os.urandom(32) if salt is None else salt
    return credential_from_salted_password(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                           iterations)


class ScramCredentialStore:
    """(user, mechanism name) -> credential, as the metadata image holds them (replaced whole
    on every change, from the event loop; readers see one consistent mapping)."""

    def __init__(self) -> None:
        self._credentials: Mapping[tuple[str, str], ScramCredential] = {}

    def load(self, records: Iterable[tuple[str, int, bytes, bytes, bytes, int]]) -> None:
        """From (name, mechanism type, salt, stored key, server key, iterations) of every
        UserScramCredentialRecord in the image."""
        out: dict[tuple[str, str], ScramCredential] = {}
        for name, mech_type, salt, stored_key, server_key, iterations in records:
            mech = MECHANISM_NAMES.get(mech_type)
            if mech is not None:
                out[(name, mech)] = ScramCredential(bytes(salt), bytes(stored_key), bytes(server_key), iterations)
        self._credentials = out

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._credentials.get((user, mechanism))

    def __len__(self) -> int:
        return len(self._credentials)


class ScramSaslServer(SaslServer):
    """Kafka's ScramSaslServer: client-first, server-first, client-final, server-final."""

    def __init__(self, mechanism: str, store: ScramCredentialStore) -> None:
        super().__init__()
        self.mechanism = mechanism
        self.store = store
        self._username = ""
        self._server = scramp.ScramMechanism(mechanism).make_server(self._lookup)
        self._step = 0

    def _lookup(self, username: str) -> tuple[bytes, bytes, bytes, int] | None:
        credential = self.store.get(username, self.mechanism)
        if credential is None:
            return None
        self._username = username
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def evaluate(self, token: bytes) -> bytes | None:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslCredentialError("the SCRAM message is not UTF-8") from None
        if self._step == 0:
            self._step = 1
            bare = text.split(",", 2)[-1] if text.count(",") >= 2 else ""
            if any(part == "tokenauth=true" for part in bare.split(",")):
                # Delegation tokens (KIP-48) are not kept by strom.
                raise SaslCredentialError("delegation token authentication is not supported")
            authzid = text.split(",", 2)[1] if text.count(",") >= 2 else ""
            try:
                self._server.set_client_first(text)
            except scramp.ScramException as e:
                raise SaslCredentialError(f"client-first message refused: {e}") from None
            if authzid.startswith("a=") and authzid[2:].replace("=2C", ",").replace("=3D", "=") != self._username:
                raise SaslAuthenticationError(
                    "Authentication failed: Client requested an authorization id that is different from username")
            return str(self._server.get_server_first()).encode()
        if self._step == 1:
            self._step = 2
            try:
                self._server.set_client_final(text)
            except scramp.ScramException as e:
                raise SaslCredentialError(f"client-final message refused: {e}") from None
            self.authorization_id = self._username
            self.complete = True
            return str(self._server.get_server_final()).encode()
        raise SaslAuthenticationError("Unexpected SCRAM message after the exchange completed")


class ScramPublisher:
    """A metadata publisher that keeps a :class:`ScramCredentialStore` equal to the image's
    SCRAM credentials (Kafka's ScramPublisher feeding the CredentialProvider)."""

    def __init__(self, store: ScramCredentialStore) -> None:
        self.store = store
        self._loaded = False

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        if self._loaded and not delta.changed_scram:
            return
        self._loaded = True
        self.store.load((r.name, r.mechanism, r.salt, r.stored_key, r.server_key, r.iterations)
                        for r in image.scram.values())
