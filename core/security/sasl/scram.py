"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802 / RFC 7677) as Kafka's ``ScramSaslServer``.

The exchange follows Kafka's ScramSaslServer and ScramMessages; the credentials are Kafka's:
one ``UserScramCredentialRecord`` per user and mechanism in the metadata log (salt, stored key,
server key, iterations), replayed into a :class:`ScramCredentialStore` the listeners read.
They get there through ``strom storage format --add-scram`` or AlterUserScramCredentials
(``kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=...]' --entity-type users``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from strom.core.metadata.publisher import ImageMapPublisher
from strom.core.metadata.records import UserScramCredentialRecord
from strom.core.security.sasl import SaslAuthenticationError, SaslCredentialError, SaslServer

if TYPE_CHECKING:
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


# Kafka's ScramMessages patterns (Java's [a&&[^b]] spelled out).
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"
_VALUE = r"[\x01-\x2B\x2D-\x7F]+"
_BASE64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
                           rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})")
_CLIENT_FINAL = re.compile(rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})")


def _username(saslname: str) -> str:
    return saslname.replace("=2C", ",").replace("=3D", "=")


class ScramSaslServer(SaslServer):
    """Kafka's ScramSaslServer: client-first, server-first, client-final, server-final.

    Written out with hashlib/hmac rather than a SCRAM library because Kafka accepts a client-final
    nonce that merely ends with the server's (librdkafka 1.x sends the client nonce twice, and
    Kafka authenticates it); a strict RFC 5802 implementation (scramp) refuses those clients.
    """

    def __init__(self, mechanism: str, store: ScramCredentialStore, *, server_nonce: str | None = None) -> None:
        """``server_nonce``: a fixed nonce (RFC test vectors); by default a random one per exchange."""
        super().__init__()
        self.mechanism = mechanism
        self._server_nonce = server_nonce
        self.hash_name = MECHANISMS[mechanism][1]
        self.store = store
        self._step = 0
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def evaluate(self, token: bytes) -> bytes | None:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslCredentialError("the SCRAM message is not UTF-8") from None
        if self._step == 0:
            return self._client_first(text)
        if self._step == 1:
            return self._client_final(text)
        raise SaslAuthenticationError(f"Unexpected challenge in Sasl server state {self._step}")

    def _client_first(self, text: str) -> bytes:
        self._step = 1
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            raise SaslCredentialError("Invalid SCRAM client first message format")
        extensions = dict(e.split("=", 1) for e in m.group("extensions").split(",") if e)
        if extensions.get("tokenauth", "").lower() == "true":
            raise SaslCredentialError("delegation token authentication is not supported")  # KIP-48: not kept
        username = _username(m.group("saslname"))
        credential = self.store.get(username, self.mechanism)
        if credential is None:
            raise SaslCredentialError("Authentication failed: Invalid user credentials")
        authzid = m.group("authzid")
        if authzid and _username(authzid) != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        if credential.iterations < MIN_ITERATIONS:
            raise SaslCredentialError(f"Iterations {credential.iterations} is less than the minimum "
                                      f"{MIN_ITERATIONS} for {self.mechanism}")
        self._credential = credential
        self.authorization_id = username
        self._client_first_bare = f"n={m.group('saslname')},r={m.group('nonce')}{m.group('extensions')}"
        # Kafka's secureRandomString: alphanumerics only.
        self._nonce = m.group("nonce") + (self._server_nonce or base64.b32encode(os.urandom(20)).decode().lower()
                                          .rstrip("="))
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        self._step = 2
        assert self._credential is not None
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None:
            raise SaslCredentialError("Invalid SCRAM client final message format")
        if not m.group("nonce").endswith(self._nonce):
            raise SaslCredentialError("Invalid client nonce in the final client message.")
        # Kafka's clientFinalMessageWithoutProof: channel binding and nonce (extensions dropped).
        without_proof = f"c={m.group('channel')},r={m.group('nonce')}"
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        proof = base64.b64decode(m.group("proof"))
        client_signature = hmac.new(self._credential.stored_key, auth_message, self.hash_name).digest()
        if len(proof) != len(client_signature):
            raise SaslCredentialError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(client_signature, proof, strict=True))
        if not hmac.compare_digest(hashlib.new(self.hash_name, client_key).digest(), self._credential.stored_key):
            raise SaslCredentialError("Invalid client credentials")
        server_signature = hmac.new(self._credential.server_key, auth_message, self.hash_name).digest()
        self.complete = True
        self._credential = None
        return f"v={base64.b64encode(server_signature).decode()}".encode()


class ScramPublisher(ImageMapPublisher[tuple[str, int], UserScramCredentialRecord]):
    """A metadata publisher that keeps a :class:`ScramCredentialStore` equal to the image's
    SCRAM credentials (Kafka's ScramPublisher feeding the CredentialProvider). The store is
    reloaded whole on every change (no per-credential updates)."""

    def __init__(self, store: ScramCredentialStore) -> None:
        super().__init__()
        self.store = store

    def image_map(self, image: MetadataImage) -> Mapping[tuple[str, int], UserScramCredentialRecord]:
        return image.scram

    def load(self, entries: Mapping[tuple[str, int], UserScramCredentialRecord]) -> None:
        self.store.load((r.name, r.mechanism, r.salt, r.stored_key, r.server_key, r.iterations)
                        for r in entries.values())
