"""Kafka's client security settings for confluent-kafka (librdkafka) and for Python's ``ssl``.

Every runtime (Connect, MirrorMaker, Streams, the Spark source) takes Kafka's client keys and
hands them to confluent-kafka, whose librdkafka has other names for some of them and none for
Java-only ones. :func:`to_librdkafka` is the one translation they all use:

* ``security.protocol``, ``sasl.mechanism``, ``ssl.key.password`` and ``ssl.endpoint.
  identification.algorithm`` keep their names (an empty algorithm, Kafka's "no hostname
  check", is librdkafka's ``none``);
* ``sasl.jaas.config``: PlainLoginModule and ScramLoginModule give ``sasl.username`` /
  ``sasl.password``; OAuthBearerLoginModule with ``unsecuredLoginStringClaim_sub`` gives
  librdkafka's unsecured JWT (``enable.sasl.oauthbearer.unsecure.jwt``), with ``clientId`` /
  ``clientSecret`` its OIDC client; Krb5LoginModule gives ``sasl.kerberos.keytab/principal``;
* ``ssl.truststore.location`` (PEM) -> ``ssl.ca.location``, ``ssl.truststore.certificates`` ->
  ``ssl.ca.pem``; ``ssl.keystore.location`` (PEM: key and chain in one file) ->
  ``ssl.certificate.location`` + ``ssl.key.location``, (PKCS12) -> librdkafka's own
  ``ssl.keystore.location/password``; ``ssl.keystore.certificate.chain`` / ``ssl.keystore.key``
  -> ``ssl.certificate.pem`` / ``ssl.key.pem``;
* Java-only keys librdkafka has no use for (``ssl.protocol``, ``ssl.enabled.protocols``,
  ``ssl.*manager.algorithm``, ``sasl.login.*``, store types...) are dropped (logged at debug);
* a JKS store is refused naming the key: librdkafka cannot read one.

Keys librdkafka already knows (``ssl.ca.location``, ``sasl.username``...) pass unchanged and win
over translated ones. :func:`server_ssl_context` / :func:`client_ssl_context` build Python
``SSLContext``s from the same Kafka keys (the Connect REST server and its forwarding client);
:func:`open_socket` opens a TLS/SASL (PLAIN, SCRAM) connection for a raw Kafka protocol client
(Connect's group membership) from librdkafka-named settings.
:func:`parse_jaas_file` reads a JAAS login configuration file (``Name { Module flag k=v; };``).

This module lives in the package root so that every client runtime may use it (the layering
lets streams and spark_bridge import only ``strom``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import socket
import ssl
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from strom.exceptions import StromError
from strom.pem_stores import load_key_store, load_trust_store

log = logging.getLogger(__name__)

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
JAAS_FLAGS = ("required", "requisite", "sufficient", "optional")

# librdkafka's own names in the ssl./sasl. namespaces: passed through untouched.
_LIBRDKAFKA_KEYS = frozenset({
    "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
    "sasl.kerberos.service.name", "sasl.kerberos.principal", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.keytab", "sasl.kerberos.min.time.before.relogin",
    "sasl.oauthbearer.config", "sasl.oauthbearer.method", "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret", "sasl.oauthbearer.scope", "sasl.oauthbearer.extensions",
    "sasl.oauthbearer.token.endpoint.url",
    "ssl.key.location", "ssl.key.password", "ssl.key.pem", "ssl.certificate.location",
    "ssl.certificate.pem", "ssl.ca.location", "ssl.ca.pem", "ssl.ca.certificate.stores",
    "ssl.crl.location", "ssl.keystore.location", "ssl.keystore.password", "ssl.cipher.suites",
    "ssl.curves.list", "ssl.sigalgs.list", "ssl.engine.location", "ssl.engine.id", "ssl.providers",
    "ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification",
})
_PASSED = _LIBRDKAFKA_KEYS | {"security.protocol", "enable.sasl.oauthbearer.unsecure.jwt"}
# Kafka keys translated below (consumed, never passed on as such).
_TRANSLATED = frozenset({
    "sasl.jaas.config", "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
    "ssl.truststore.certificates", "ssl.keystore.type", "ssl.keystore.certificate.chain", "ssl.keystore.key",
})


class ClientSecurityError(StromError, ValueError):
    """A Kafka client security setting that cannot be honoured; the message names the key."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.reason = message
        super().__init__(f"{key}: {message}")


def is_security_key(key: str) -> bool:
    """A key of Kafka's client security settings (``security.protocol``, ``ssl.*``, ``sasl.*``)."""
    return key in ("security.protocol", "enable.sasl.oauthbearer.unsecure.jwt") or key.startswith(("ssl.", "sasl."))


# -- JAAS -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JaasEntry:
    """One login module of a JAAS configuration."""

    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def simple_name(self) -> str:
        return self.login_module.rsplit(".", 1)[-1]


def _jaas_tokens(text: str, *, hash_comments: bool = False) -> list[tuple[str, str]]:
    """(kind, text) tokens: ``word``, ``quoted`` and the punctuation ``= ; { }``. ``#`` starts a
    comment only with ``hash_comments`` (JAAS files, and the runtimes' parse of ``sasl.jaas.config``
    as it always was); the broker's parse, like Kafka's JaasConfig, takes none."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i) or (hash_comments and c == "#"):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ValueError("unterminated /* comment")
            i = end + 2
        elif c in "=;{}":
            out.append((c, c))
            i += 1
        elif c == '"':
            i += 1
            value: list[str] = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                value.append(text[i])
                i += 1
            if i >= n:
                raise ValueError("unterminated quoted value")
            i += 1
            out.append(("quoted", "".join(value)))
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in '=;{}"':
                i += 1
            out.append(("word", text[start:i]))
    return out


def _entries(tokens: list[tuple[str, str]], pos: int, stop: str | None) -> tuple[list[JaasEntry], int]:
    """Login modules from ``pos`` up to the token ``stop`` (None: the end)."""
    entries: list[JaasEntry] = []
    while pos < len(tokens) and tokens[pos][0] != stop:
        kind, module = tokens[pos]
        if kind != "word":
            raise ValueError(f"expected a login module class name at token {pos + 1}")
        if pos + 1 >= len(tokens) or tokens[pos + 1][0] != "word" or tokens[pos + 1][1].lower() not in JAAS_FLAGS:
            raise ValueError(f"login module {module}: expected a control flag ({', '.join(JAAS_FLAGS)})")
        flag = tokens[pos + 1][1].lower()
        pos += 2
        options: dict[str, str] = {}
        while pos < len(tokens) and tokens[pos][0] != ";":
            if (pos + 2 >= len(tokens) or tokens[pos][0] != "word" or tokens[pos + 1][0] != "="
                    or tokens[pos + 2][0] not in ("word", "quoted")):
                raise ValueError(f"expected key=value options after {module}")
            options[tokens[pos][1]] = tokens[pos + 2][1]
            pos += 3
        if pos >= len(tokens):
            raise ValueError(f"login module {module} is not terminated by ';'")
        pos += 1
        entries.append(JaasEntry(module, flag, options))
    return entries, pos


def parse_jaas_entries(text: str, *, hash_comments: bool = False) -> list[JaasEntry]:
    """Every login module of ``text`` (``<LoginModule> <flag> key=value ... ;`` repeated), in order;
    ValueError says where the text is wrong and never quotes a value. The broker's
    :mod:`strom.core.security.jaas` parses ``sasl.jaas.config`` with this too."""
    return _entries(_jaas_tokens(text, hash_comments=hash_comments), 0, None)[0]


def parse_jaas_config(text: str, key: str = "sasl.jaas.config") -> JaasEntry:
    """Kafka's ``sasl.jaas.config`` value: exactly one login module."""
    try:
        entries = parse_jaas_entries(text, hash_comments=True)  # as this parser always took them
    except ValueError as exc:
        raise ClientSecurityError(key, f"invalid JAAS configuration: {exc}") from None
    if len(entries) != 1:
        raise ClientSecurityError(key, f"must contain exactly one login module, found {len(entries)}")
    return entries[0]


def parse_jaas_file(text: str) -> dict[str, list[JaasEntry]]:
    """A JAAS login configuration file: section name -> its login modules."""
    tokens = _jaas_tokens(text, hash_comments=True)
    sections: dict[str, list[JaasEntry]] = {}
    pos = 0
    while pos < len(tokens):
        if tokens[pos][0] != "word" or pos + 1 >= len(tokens) or tokens[pos + 1][0] != "{":
            raise ValueError("expected '<Name> {' at the start of a JAAS section")
        name = tokens[pos][1]
        entries, pos = _entries(tokens, pos + 2, "}")
        if pos >= len(tokens):
            raise ValueError(f"JAAS section {name} is not closed by '}}'")
        pos += 1
        if pos < len(tokens) and tokens[pos][0] == ";":
            pos += 1
        sections[name] = entries
    return sections


# -- librdkafka -------------------------------------------------------------------------------


def _looks_pem(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return b"-----BEGIN" in f.read(4096)
    except OSError:
        return False


def _store_type(conf: Mapping[str, Any], which: str) -> str:
    """``PEM``, ``PKCS12`` or ``JKS`` for the key or trust store: Kafka's type, or (unset) PEM when
    the file is PEM text (Kafka's default JKS would be unreadable here anyway)."""
    declared = conf.get(f"ssl.{which}.type")
    if declared:
        return str(declared).strip().upper()
    location = conf.get(f"ssl.{which}.location")
    if location and _looks_pem(str(location)):
        return "PEM"
    return "JKS" if location else "PEM"


def _jaas_to_librdkafka(value: str) -> dict[str, Any]:
    entry = parse_jaas_config(value)
    opts, name = entry.options, entry.simple_name
    if name in ("PlainLoginModule", "ScramLoginModule"):
        out: dict[str, Any] = {}
        if "username" in opts:
            out["sasl.username"] = opts["username"]
        if "password" in opts:
            out["sasl.password"] = opts["password"]
        return out
    if name == "OAuthBearerLoginModule":
        if "unsecuredLoginStringClaim_sub" in opts:
            parts = [f"principal={opts['unsecuredLoginStringClaim_sub']}"]
            if "unsecuredLoginLifetimeSeconds" in opts:
                parts.append(f"lifeSeconds={opts['unsecuredLoginLifetimeSeconds']}")
            if "unsecuredLoginListClaim_scope" in opts:
                parts.append(f"scope={opts['unsecuredLoginListClaim_scope']}")
            return {"enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": " ".join(parts)}
        out = {"sasl.oauthbearer.method": "oidc"}
        for src, dst in (("clientId", "sasl.oauthbearer.client.id"), ("clientSecret", "sasl.oauthbearer.client.secret"),
                         ("scope", "sasl.oauthbearer.scope")):
            if src in opts:
                out[dst] = opts[src]
        return out
    if name == "Krb5LoginModule":
        out = {}
        if "keyTab" in opts:
            out["sasl.kerberos.keytab"] = opts["keyTab"]
        if "principal" in opts:
            out["sasl.kerberos.principal"] = opts["principal"]
        return out
    raise ClientSecurityError("sasl.jaas.config", f"login module {entry.login_module} has no librdkafka equivalent")


def to_librdkafka(conf: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` with Kafka's client security keys in librdkafka's names (see the module doc).

    Keys outside security pass unchanged; an explicit librdkafka key wins over a translated one.
    """
    out: dict[str, Any] = {}
    derived: dict[str, Any] = {}
    for key, value in conf.items():
        if not is_security_key(key) or key in _PASSED:
            out[key] = value
        elif key not in _TRANSLATED:
            log.debug("dropping Kafka client setting %s: librdkafka has no equivalent", key)
    if "security.protocol" in out:
        protocol = str(out["security.protocol"]).strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ClientSecurityError("security.protocol", f"{protocol!r} is not one of {', '.join(SECURITY_PROTOCOLS)}")
        out["security.protocol"] = protocol
    if conf.get("sasl.jaas.config"):
        derived.update(_jaas_to_librdkafka(str(conf["sasl.jaas.config"])))
    # trust store
    if conf.get("ssl.truststore.location"):
        kind = _store_type(conf, "truststore")
        if kind != "PEM":
            raise ClientSecurityError("ssl.truststore.location", f"a {kind} trust store cannot be read by librdkafka: "
                                      "use a PEM file (ssl.truststore.type=PEM)")
        derived["ssl.ca.location"] = conf["ssl.truststore.location"]
    if conf.get("ssl.truststore.certificates"):
        derived["ssl.ca.pem"] = conf["ssl.truststore.certificates"]
    # key store
    if conf.get("ssl.keystore.location"):
        kind = _store_type(conf, "keystore")
        if kind == "PEM":
            derived["ssl.certificate.location"] = conf["ssl.keystore.location"]
            derived["ssl.key.location"] = conf["ssl.keystore.location"]
            out.pop("ssl.keystore.location", None)
            out.pop("ssl.keystore.password", None)  # a PEM key's password is ssl.key.password
        elif kind == "PKCS12":
            out["ssl.keystore.location"] = conf["ssl.keystore.location"]
        else:
            raise ClientSecurityError("ssl.keystore.location", f"a {kind} key store cannot be read by librdkafka: "
                                      "use PEM (ssl.keystore.type=PEM) or PKCS12")
    if conf.get("ssl.keystore.certificate.chain"):
        derived["ssl.certificate.pem"] = conf["ssl.keystore.certificate.chain"]
    if conf.get("ssl.keystore.key"):
        derived["ssl.key.pem"] = conf["ssl.keystore.key"]
    if "ssl.endpoint.identification.algorithm" in out:
        algorithm = str(out["ssl.endpoint.identification.algorithm"] or "").strip().lower()
        out["ssl.endpoint.identification.algorithm"] = algorithm or "none"
    for key, value in derived.items():
        out.setdefault(key, value)
    return out


def security_settings(conf: Mapping[str, Any]) -> dict[str, Any]:
    """Only the security keys of ``conf``."""
    return {k: v for k, v in conf.items() if is_security_key(k)}


# -- Python ssl -------------------------------------------------------------------------------


def _load_key_store(ctx: ssl.SSLContext, conf: Mapping[str, Any], required: bool) -> None:
    password = conf.get("ssl.key.password") or None
    location = conf.get("ssl.keystore.location")
    if location:
        kind = _store_type(conf, "keystore")
        if kind != "PEM":
            raise ClientSecurityError("ssl.keystore.type", f"{kind} key stores are not supported: use PEM")
        try:
            load_key_store(ctx, location=str(location), password=password)
        except (OSError, ssl.SSLError) as exc:
            raise ClientSecurityError("ssl.keystore.location", f"cannot load the key store: {exc}") from None
        return
    chain, key = conf.get("ssl.keystore.certificate.chain"), conf.get("ssl.keystore.key")
    if chain and key:
        try:
            load_key_store(ctx, chain=str(chain), key=str(key), password=password)
        except ssl.SSLError as exc:
            raise ClientSecurityError("ssl.keystore.key", f"cannot load the key: {exc}") from None
        return
    if required:
        raise ClientSecurityError("ssl.keystore.location", "an https listener needs a key store")


def _load_trust_store(ctx: ssl.SSLContext, conf: Mapping[str, Any]) -> bool:
    location = conf.get("ssl.truststore.location")
    if location:
        kind = _store_type(conf, "truststore")
        if kind != "PEM":
            raise ClientSecurityError("ssl.truststore.type", f"{kind} trust stores are not supported: use PEM")
        try:
            return load_trust_store(ctx, location=str(location))
        except (OSError, ssl.SSLError) as exc:
            raise ClientSecurityError("ssl.truststore.location", f"cannot load the trust store: {exc}") from None
    certificates = conf.get("ssl.truststore.certificates")
    return load_trust_store(ctx, certificates=str(certificates) if certificates else None)


def _min_version(ctx: ssl.SSLContext, conf: Mapping[str, Any]) -> None:
    enabled = str(conf.get("ssl.enabled.protocols") or "").replace(" ", "").split(",")
    if "TLSv1.2" not in enabled and "TLSv1.3" in enabled:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    else:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2


def server_ssl_context(conf: Mapping[str, Any]) -> ssl.SSLContext:
    """An https server's context from Kafka's ``ssl.*`` keys (PEM key store; ``ssl.client.auth``)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _min_version(ctx, conf)
    _load_key_store(ctx, conf, required=True)
    has_trust = _load_trust_store(ctx, conf)
    client_auth = str(conf.get("ssl.client.auth") or "none").strip().lower()
    if client_auth not in ("none", "requested", "required"):
        raise ClientSecurityError("ssl.client.auth", f"{client_auth!r} is not one of none, requested, required")
    if client_auth != "none":
        if not has_trust:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        ctx.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    return ctx


def client_ssl_context(conf: Mapping[str, Any]) -> ssl.SSLContext:
    """A TLS client's context from Kafka's ``ssl.*`` keys: trust store (else the system's CAs),
    the key store when there is one (mutual TLS), hostname check unless
    ``ssl.endpoint.identification.algorithm`` is empty."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _min_version(ctx, conf)
    if not _load_trust_store(ctx, conf):
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    _load_key_store(ctx, conf, required=False)
    algorithm = conf.get("ssl.endpoint.identification.algorithm", "https")
    ctx.check_hostname = bool(str(algorithm or "").strip())
    return ctx


# -- raw Kafka protocol clients ---------------------------------------------------------------
# Connect's group membership speaks the Kafka protocol over its own socket (librdkafka cannot
# join a "connect" group); it authenticates here with the same librdkafka-named settings the
# runtime's other clients get from to_librdkafka.

_SASL_HANDSHAKE, _SASL_AUTHENTICATE = 17, 36
_SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class SaslClientError(StromError, OSError):
    """The broker refused the SASL handshake or the credentials (its message is kept)."""


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def _read_exact(sock: socket.socket, n: int) -> bytes:
    chunks: list[bytes] = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise SaslClientError("connection closed by the broker during SASL authentication")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _roundtrip(sock: socket.socket, api_key: int, version: int, correlation: int, client_id: str, body: bytes) -> bytes:
    """One non-flexible request (header v1) and its response body (after the correlation id)."""
    payload = struct.pack(">hhi", api_key, version, correlation) + _string(client_id) + body
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    (size,) = struct.unpack(">i", _read_exact(sock, 4))
    frame = _read_exact(sock, size)
    (got,) = struct.unpack_from(">i", frame, 0)
    if got != correlation:
        raise SaslClientError(f"correlation id {got}, expected {correlation}")
    return frame[4:]


def _read_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    return buf[pos:pos + n].decode(), pos + n


def _authenticate(sock: socket.socket, client_id: str, token: bytes, correlation: int) -> bytes:
    """SaslAuthenticate v1: the server's bytes, or SaslClientError with the broker's message."""
    body = _roundtrip(sock, _SASL_AUTHENTICATE, 1, correlation, client_id, struct.pack(">i", len(token)) + token)
    (code,) = struct.unpack_from(">h", body, 0)
    message, pos = _read_string(body, 2)
    (n,) = struct.unpack_from(">i", body, pos)
    data = body[pos + 4:pos + 4 + max(n, 0)]
    if code != 0:
        raise SaslClientError(f"SASL authentication failed (error {code}): {message or ''}")
    return data


def _scram_escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _scram(sock: socket.socket, client_id: str, mechanism: str, user: str, password: str) -> None:
    """RFC 5802's client side, as Kafka's ScramSaslClient (no channel binding)."""
    digest = _SCRAM_HASHES[mechanism]
    nonce = base64.b64encode(secrets.token_bytes(24)).decode()
    bare = f"n={_scram_escape(user)},r={nonce}"
    server_first = _authenticate(sock, client_id, f"n,,{bare}".encode(), 2).decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    if not fields.get("r", "").startswith(nonce):
        raise SaslClientError("SCRAM server nonce does not extend the client's")
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored = hashlib.new(digest, client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored, auth_message, digest).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = _authenticate(sock, client_id, f"{without_proof},p={base64.b64encode(proof).decode()}".encode(), 3)
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    expected = base64.b64encode(hmac.new(server_key, auth_message, digest).digest()).decode()
    if dict(part.split("=", 1) for part in final.decode().split(",")).get("v") != expected:
        raise SaslClientError("SCRAM server signature does not match: not the broker holding the credentials")


def open_socket(host: str, port: int, conf: Mapping[str, Any], timeout: float,
                client_id: str = "strom") -> socket.socket:
    """A connected socket to a broker, TLS-wrapped and SASL-authenticated (PLAIN, SCRAM-SHA-256/512)
    as ``conf`` (librdkafka names: ``security.protocol``, ``sasl.*``, ``ssl.ca.location``...) asks."""
    protocol = str(conf.get("security.protocol") or "PLAINTEXT").upper()
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        if protocol in ("SSL", "SASL_SSL"):
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ca_location, ca_pem = conf.get("ssl.ca.location"), conf.get("ssl.ca.pem")
            if not load_trust_store(ctx, location=str(ca_location) if ca_location else None,
                                    certificates=str(ca_pem) if ca_pem else None):
                ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
            if conf.get("ssl.certificate.location"):
                ctx.load_cert_chain(str(conf["ssl.certificate.location"]),
                                    str(conf.get("ssl.key.location") or conf["ssl.certificate.location"]),
                                    password=conf.get("ssl.key.password") or None)
            ctx.check_hostname = str(conf.get("ssl.endpoint.identification.algorithm", "https")).lower() == "https"
            if str(conf.get("enable.ssl.certificate.verification", "true")).lower() == "false":
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            sock = ctx.wrap_socket(sock, server_hostname=host)
        if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            mechanism = str(conf.get("sasl.mechanism") or conf.get("sasl.mechanisms") or "GSSAPI").upper()
            user, password = str(conf.get("sasl.username") or ""), str(conf.get("sasl.password") or "")
            if mechanism not in ("PLAIN", *_SCRAM_HASHES):
                raise SaslClientError(f"SASL mechanism {mechanism} is not supported by this client (PLAIN, SCRAM)")
            body = _roundtrip(sock, _SASL_HANDSHAKE, 1, 1, client_id, _string(mechanism))
            (code,) = struct.unpack_from(">h", body, 0)
            if code != 0:
                raise SaslClientError(f"the broker does not accept SASL mechanism {mechanism} (error {code})")
            if mechanism == "PLAIN":
                _authenticate(sock, client_id, f"\0{user}\0{password}".encode(), 2)
            else:
                _scram(sock, client_id, mechanism, user, password)
        return sock
    except BaseException:
        sock.close()
        raise
