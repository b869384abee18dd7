"""The TLS context of an SSL or SASL_SSL listener, from Kafka's ``ssl.*`` keys (Python's ``ssl``).

Kafka's keys, PEM stores only (``ssl.keystore.type=PEM``, ``ssl.truststore.type=PEM``):

* key store: ``ssl.keystore.location`` (a PEM file holding the private key and the certificate
  chain) or ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key`` (the PEM text itself);
  ``ssl.key.password`` decrypts an encrypted key.
* trust store: ``ssl.truststore.location`` (a PEM file of CA certificates) or
  ``ssl.truststore.certificates`` (PEM text); it checks client certificates.
* ``ssl.client.auth``: ``none`` (default), ``requested`` (a certificate is asked for and checked
  if sent), ``required``.
* ``ssl.enabled.protocols`` (default ``TLSv1.2,TLSv1.3``), ``ssl.cipher.suites`` (Kafka's IANA
  names such as ``TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384``, or OpenSSL's; empty: the defaults),
  ``ssl.endpoint.identification.algorithm`` (``https`` or empty: only for connections the broker
  opens, which strom does not yet; validated).

Every key is read with the listener's prefix first (``listener.name.<l>.ssl.*``). A missing or
bad setting fails the broker's start with a :class:`~strom.core.exceptions.ConfigError` naming
the key.
"""

from __future__ import annotations

import contextlib
import os
import ssl

from strom.core.exceptions import ConfigError
from strom.core.security.settings import ListenerSettings
from strom.pem_stores import load_key_store, load_trust_store

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
# Java (IANA) cipher suite names -> their two-byte code; OpenSSL names them differently, so the
# code finds the OpenSSL name among the ciphers this Python's OpenSSL offers.
_IANA_CODES = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": 0xC02B, "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": 0xC02C,
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": 0xC02F, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": 0xC030,
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": 0xCCA8, "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": 0xCCA9,
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": 0x009E, "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": 0x009F,
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": 0xCCAA, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": 0xC027,
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": 0xC028, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": 0xC023,
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": 0xC024, "TLS_RSA_WITH_AES_128_GCM_SHA256": 0x009C,
    "TLS_RSA_WITH_AES_256_GCM_SHA384": 0x009D,
}
# TLS 1.3 suites: Python cannot choose among them; listing any keeps TLS 1.3 on.
_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                 "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"}


def _unescape(text: str) -> str:
    """Inline PEM written on one line with ``\\n`` escapes (as a properties value may carry it)."""
    return text.replace("\\n", "\n") if "\n" not in text else text


def _check_file(settings: ListenerSettings, key: str) -> str:
    path = settings.get(key)
    assert path is not None
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise settings.fail(key, "a readable PEM file")
    return path


def build_server_context(settings: ListenerSettings) -> ssl.SSLContext:
    """The server-side TLS context of the listener, checked now (see the module docstring)."""
    for store in ("ssl.keystore.type", "ssl.truststore.type"):
        store_type = (settings.get(store, "PEM") or "PEM").upper()
        if store_type != "PEM":
            raise settings.fail(store, "PEM (strom reads PEM key and trust stores only; convert a JKS or "
                                       "PKCS12 store with keytool/openssl)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_keystore(settings, ctx)
    auth = (settings.get("ssl.client.auth", "none") or "none").strip().lower()
    if auth not in CLIENT_AUTH:
        raise settings.fail("ssl.client.auth", "one of none, requested, required")
    has_trust = _load_truststore(settings, ctx)
    if auth != "none" and not has_trust:
        raise ConfigError(settings.key_used("ssl.truststore.location"), None,
                          f"a trust store (ssl.truststore.location or ssl.truststore.certificates) to check "
                          f"client certificates with ssl.client.auth={auth}")
    ctx.verify_mode = CLIENT_AUTH[auth]
    _set_protocols(settings, ctx)
    endpoint = settings.get("ssl.endpoint.identification.algorithm", "https") or ""
    if endpoint.lower() not in ("", "https"):
        raise settings.fail("ssl.endpoint.identification.algorithm", "https or empty")
    return ctx


def _load_keystore(settings: ListenerSettings, ctx: ssl.SSLContext) -> None:
    password = settings.get("ssl.key.password")
    location = settings.get("ssl.keystore.location")
    chain, key = settings.get("ssl.keystore.certificate.chain"), settings.get("ssl.keystore.key")
    if location is None and chain is None and key is None:
        raise ConfigError(settings.key_used("ssl.keystore.location"), None,
                          f"a PEM key store for TLS listener {settings.name}: ssl.keystore.location, or "
                          "ssl.keystore.certificate.chain with ssl.keystore.key")
    try:
        if location is not None:
            load_key_store(ctx, location=_check_file(settings, "ssl.keystore.location"), password=password)
            return
        if chain is None or key is None:
            missing = "ssl.keystore.key" if chain is not None else "ssl.keystore.certificate.chain"
            raise ConfigError(settings.key_used(missing), None,
                              "set together with " + ("ssl.keystore.certificate.chain" if chain is not None
                                                      else "ssl.keystore.key"))
        load_key_store(ctx, chain=_unescape(chain), key=_unescape(key), password=password)
    except ssl.SSLError as e:
        # Wrong password, key not matching the certificate, not PEM: name what was read.
        key_name = settings.key_used("ssl.keystore.location" if location is not None else "ssl.keystore.key")
        hint = " or ssl.key.password" if password is not None or "PASSWORD" in str(e).upper() else ""
        raise ConfigError(key_name, "(hidden)" if location is None else location,
                          f"a PEM private key and certificate chain that load ({e.reason or e}); check "
                          f"the key store{hint}") from None


def _load_truststore(settings: ListenerSettings, ctx: ssl.SSLContext) -> bool:
    location = settings.get("ssl.truststore.location")
    certificates = settings.get("ssl.truststore.certificates")
    try:
        return load_trust_store(
            ctx, location=None if location is None else _check_file(settings, "ssl.truststore.location"),
            certificates=None if certificates is None else certificates.replace("\\n", "\n"))
    except ssl.SSLError as e:
        key = "ssl.truststore.location" if location is not None else "ssl.truststore.certificates"
        raise settings.fail(key, f"PEM CA certificates ({e.reason or e})") from None


def _set_protocols(settings: ListenerSettings, ctx: ssl.SSLContext) -> None:
    protocols = settings.get_list("ssl.enabled.protocols", "TLSv1.2,TLSv1.3")
    unknown = [p for p in protocols if p not in _PROTOCOLS]
    if not protocols or unknown:
        raise settings.fail("ssl.enabled.protocols", "a list of TLSv1.2, TLSv1.3 (older TLS versions are "
                                                     "not offered)")
    versions = sorted(_PROTOCOLS[p] for p in protocols)
    suites = settings.get_list("ssl.cipher.suites")
    if suites:
        tls12 = [s for s in suites if s not in _TLS13_SUITES]
        if not any(s in _TLS13_SUITES for s in suites):
            versions = [v for v in versions if v != ssl.TLSVersion.TLSv1_3]
        if not tls12:
            versions = [v for v in versions if v != ssl.TLSVersion.TLSv1_2]
        if not versions:
            raise settings.fail("ssl.cipher.suites", "suites of an enabled protocol (ssl.enabled.protocols)")
        if tls12:
            by_code = {c["id"] & 0xFFFF: c["name"] for c in _all_ciphers()}
            names = []
            for suite in tls12:
                code = _IANA_CODES.get(suite)
                names.append(by_code.get(code, suite) if code is not None else suite)
            try:
                ctx.set_ciphers(":".join(names))
            except ssl.SSLError:
                raise settings.fail("ssl.cipher.suites", "cipher suites this OpenSSL offers (IANA names as Kafka "
                                                         "takes them, e.g. TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384)") from None
    ctx.minimum_version = versions[0]
    ctx.maximum_version = versions[-1]


def _all_ciphers() -> list[ssl._Cipher]:
    """Every cipher this OpenSSL knows (not only the default list), to find names by code."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with contextlib.suppress(ssl.SSLError):
        ctx.set_ciphers("ALL:@SECLEVEL=0")
    return ctx.get_ciphers()
