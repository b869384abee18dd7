"""Security of the Connect REST API: https listeners and HTTP basic authentication.

TLS follows Kafka Connect's ``RestServerConfig``: an ``https://host:port`` listener takes its
settings from ``listeners.https.ssl.*`` when any ``listeners.https.`` key is given, else from the
worker's own ``ssl.*`` (Kafka's ``valuesWithPrefixAllOrNothing``): ``ssl.keystore.location``
(``ssl.keystore.type=PEM``: key and chain in one file) or ``ssl.keystore.certificate.chain`` +
``ssl.keystore.key``, ``ssl.key.password``, ``ssl.truststore.*`` and ``ssl.client.auth``. The same
settings make the client that forwards requests to the leader (its trust store, and its key
store when the leader asks for a client certificate).

Basic authentication is Kafka Connect's ``BasicAuthSecurityRestExtension``, turned on by naming it
in ``rest.extension.classes``. The JAAS file comes from the worker key
``java.security.auth.login.config`` (or ``-Djava.security.auth.login.config=`` in
``KAFKA_OPTS``/``EXTRA_ARGS``, as a Kafka Connect start script passes it); its ``KafkaConnect``
section names ``PropertyFileLoginModule`` entries whose ``file`` holds ``user=password`` lines.
As in Kafka: a request without valid credentials is ``401`` with the body ``User cannot access
the resource.``; the internal requests between workers (``POST /connectors/<c>/tasks``,
``PUT /connectors/<c>/fence``) are exempt; an empty credentials file lets every request in; a
forwarded request carries the caller's ``Authorization`` header to the leader. Kafka sends no
``WWW-Authenticate`` header with the 401, and neither does this.

Both are off by default; the default listener stays ``http://127.0.0.1:8083`` (loopback).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import os
import re
import shlex
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strom.client_security import ClientSecurityError, client_ssl_context, parse_jaas_file, server_ssl_context
from strom.connect.exceptions import ConfigException
from strom.connect.runtime.config import advertised_scheme

__all__ = ["BasicAuthenticator", "advertised_scheme", "forwarding_context", "https_ssl_config",
           "is_internal_request", "server_context"]

log = logging.getLogger(__name__)

HTTPS_PREFIX = "listeners.https."
BASIC_AUTH_EXTENSION = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
PROPERTY_FILE_LOGIN_MODULE = "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule"
JAAS_CONFIG_KEY = "java.security.auth.login.config"
CONNECT_LOGIN_SECTION = "KafkaConnect"
UNAUTHORIZED_BODY = "User cannot access the resource."
# Kafka's JaasBasicAuthFilter.INTERNAL_REQUEST_MATCHERS (paths without the leading slash)
_INTERNAL_REQUESTS = (("POST", re.compile(r"/?connectors/([^/]+)/tasks/?")),
                      ("PUT", re.compile(r"/?connectors/[^/]+/fence/?")))


def https_ssl_config(worker: Mapping[str, Any]) -> dict[str, Any]:
    """The ``ssl.*`` settings of the https listener: ``listeners.https.*`` if any is given, else
    the worker's top-level ``ssl.*`` (all or nothing, as Kafka Connect does)."""
    prefixed = {k[len(HTTPS_PREFIX):]: v for k, v in worker.items() if k.startswith(HTTPS_PREFIX)}
    if prefixed:
        return prefixed
    return {k: v for k, v in worker.items() if k.startswith("ssl.")}


def _config_error(exc: ClientSecurityError, https_prefixed: bool) -> ConfigException:
    key = (HTTPS_PREFIX if https_prefixed else "") + exc.key
    return ConfigException(key, "[hidden]" if "password" in key else None, exc.reason)


def server_context(worker: Mapping[str, Any]) -> ssl.SSLContext:
    """The https listener's TLS context; a missing or unreadable key store names the key."""
    try:
        return server_ssl_context(https_ssl_config(worker))
    except ClientSecurityError as exc:
        raise _config_error(exc, any(k.startswith(HTTPS_PREFIX) for k in worker)) from None


def forwarding_context(worker: Mapping[str, Any]) -> ssl.SSLContext:
    """The TLS context of the client that forwards requests to the leader's https listener."""
    try:
        return client_ssl_context(https_ssl_config(worker))
    except ClientSecurityError as exc:
        raise _config_error(exc, any(k.startswith(HTTPS_PREFIX) for k in worker)) from None


# -- basic authentication -------------------------------------------------------------------


def _jaas_path(worker: Mapping[str, Any]) -> str | None:
    configured = worker.get(JAAS_CONFIG_KEY)
    if configured:
        return str(configured)
    for var in ("KAFKA_OPTS", "EXTRA_ARGS"):
        for arg in shlex.split(os.environ.get(var, "")):
            if arg.startswith(f"-D{JAAS_CONFIG_KEY}="):
                return arg.split("=", 1)[1]
    return None


def _read_properties(path: Path) -> dict[str, str]:
    from strom.core.config import parse_properties

    return {str(k): str(v) for k, v in parse_properties(path.read_text()).items()}


@dataclass(frozen=True)
class BasicAuthenticator:
    """The ``KafkaConnect`` login modules: each a credentials file (every one must accept)."""

    credential_files: tuple[dict[str, str], ...]

    @classmethod
    def from_worker(cls, worker: Mapping[str, Any]) -> BasicAuthenticator | None:
        """None unless ``rest.extension.classes`` names the basic-auth extension."""
        raw = worker.get("rest.extension.classes") or ""
        names = [n.strip() for n in (raw if isinstance(raw, (list, tuple)) else str(raw).split(",")) if n.strip()]
        unknown = [n for n in names if n not in (BASIC_AUTH_EXTENSION, BASIC_AUTH_EXTENSION.rsplit(".", 1)[-1])]
        if unknown:
            raise ConfigException("rest.extension.classes", ",".join(names),
                                  f"unknown REST extension {unknown[0]}; strom provides {BASIC_AUTH_EXTENSION}")
        if not names:
            return None
        path = _jaas_path(worker)
        if not path:
            raise ConfigException(JAAS_CONFIG_KEY, None, f"{BASIC_AUTH_EXTENSION} needs a JAAS file with a "
                                  f"{CONNECT_LOGIN_SECTION} section")
        try:
            sections = parse_jaas_file(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ConfigException(JAAS_CONFIG_KEY, path, f"cannot read the JAAS file: {exc}") from None
        entries = sections.get(CONNECT_LOGIN_SECTION)
        if not entries:
            raise ConfigException(JAAS_CONFIG_KEY, path, f"no JAAS configuration section named '{CONNECT_LOGIN_SECTION}'")
        files: list[dict[str, str]] = []
        for entry in entries:
            if entry.login_module not in (PROPERTY_FILE_LOGIN_MODULE, "PropertyFileLoginModule"):
                raise ConfigException(JAAS_CONFIG_KEY, path, f"login module {entry.login_module} is not supported; "
                                      f"use {PROPERTY_FILE_LOGIN_MODULE}")
            name = entry.options.get("file", "").strip()
            if not name:
                raise ConfigException(JAAS_CONFIG_KEY, path, "Property Credentials file must be specified")
            try:
                creds = _read_properties(Path(name))
            except OSError:
                raise ConfigException(JAAS_CONFIG_KEY, path, "Error loading Property Credentials file") from None
            if not creds:
                log.warning("Credential properties file '%s' is empty; all requests will be permitted", name)
            files.append(creds)
        return cls(tuple(files))

    def authenticate(self, authorization: str | None) -> bool:
        """Whether the ``Authorization`` header's basic credentials pass every login module."""
        username, password = _basic_credentials(authorization)
        for creds in self.credential_files:
            if not creds:
                continue  # Kafka: an empty file permits every request
            expected = creds.get(username) if username is not None else None
            if expected is None or password is None or not hmac.compare_digest(expected.encode(), password.encode()):
                return False
        return True


def _basic_credentials(header: str | None) -> tuple[str | None, str | None]:
    """(user, password) of ``Basic base64(user:password)``; (None, None) when absent or malformed."""
    if not header:
        return None, None
    method, _, encoded = header.strip().partition(" ")
    if method.lower() != "basic" or not encoded:
        return None, None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None, None
    user, sep, password = decoded.partition(":")
    if not sep or not user:
        return None, None
    return user, password


def is_internal_request(method: str, path: str) -> bool:
    """The requests workers send each other, which basic authentication lets through."""
    return any(method == m and pattern.fullmatch(path.lstrip("/")) for m, pattern in _INTERNAL_REQUESTS)
