"""What a listener needs to secure its connections, built and checked at broker start.

For each listener, from its security protocol (``listener.security.protocol.map``) and its keys
(``listener.name.<l>.`` prefix first, see :mod:`strom.core.security.settings`):

* SSL and SASL_SSL: the TLS context (:mod:`strom.core.security.ssl_context`); for SSL also the
  ``ssl.principal.mapping.rules`` that name a client by its certificate.
* SASL_PLAINTEXT and SASL_SSL: ``sasl.enabled.mechanisms`` (Kafka's default GSSAPI is not
  offered by strom, so it must be set), each mechanism's server and ``connections.max.reauth.ms``
  (``listener.name.<l>.<mechanism>.connections.max.reauth.ms`` first). PLAIN's users come from
  ``listener.name.<l>.plain.sasl.jaas.config`` (PlainLoginModule ``user_<name>="<password>"``
  options); SCRAM's from the metadata log; OAUTHBEARER's validator options from its JAAS config.

A missing or bad key raises :class:`~strom.core.exceptions.ConfigError` naming it.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from strom.core.exceptions import ConfigError
from strom.core.security.jaas import JaasConfigError, JaasEntry, parse_single
from strom.core.security.principal import SslPrincipalMapper
from strom.core.security.sasl import SaslServer
from strom.core.security.sasl.authenticator import SaslMechanismConfig
from strom.core.security.sasl.oauthbearer import (
    OAUTHBEARER_LOGIN_MODULE,
    UNSECURED_VALIDATOR,
    OAuthBearerSaslServer,
)
from strom.core.security.sasl.plain import PLAIN_LOGIN_MODULE, PlainSaslServer, users_from_jaas
from strom.core.security.sasl.scram import MECHANISMS as SCRAM_MECHANISMS
from strom.core.security.sasl.scram import ScramCredentialStore, ScramSaslServer
from strom.core.security.settings import ListenerSettings
from strom.core.security.ssl_context import build_server_context

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
# Kafka's sasl.server.max.receive.size: the largest frame read before authentication completes.
DEFAULT_SASL_MAX_RECEIVE = 524288


@dataclass(slots=True)
class ListenerSecurity:
    """TLS and SASL of one listener (both None for PLAINTEXT)."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: SslPrincipalMapper | None = None
    sasl_mechanisms: dict[str, SaslMechanismConfig] = field(default_factory=dict)
    sasl_max_receive_size: int = DEFAULT_SASL_MAX_RECEIVE
    # Kafka's connection.failed.authentication.delay.ms: how long a failed connection stays open
    # after its error response (so the client reads it before the close).
    failed_authentication_delay_ms: int = 100
    # The broker's SCRAM credentials (shared by its listeners, fed from the metadata log).
    scram_store: ScramCredentialStore = field(default_factory=ScramCredentialStore)

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


def _jaas(settings: ListenerSettings, mechanism: str, module: str, *, required: bool) -> JaasEntry | None:
    text = settings.get("sasl.jaas.config", mechanism=mechanism)
    key = settings.key_used("sasl.jaas.config", mechanism)
    if text is None:
        if required:
            raise ConfigError(key, None, f"a JAAS config for SASL mechanism {mechanism} on listener {settings.name} "
                                         f"({module} required ...;)")
        return None
    try:
        entry = parse_single(text)
    except JaasConfigError as e:
        raise ConfigError(key, "(hidden)", f"a JAAS login module entry ({e})") from None
    if entry.login_module != module:
        raise ConfigError(key, "(hidden)", f"the login module {module} for {mechanism} (found {entry.login_module})")
    return entry


def build_listener_security(name: str, protocol: str, config: Any,
                            scram_store: ScramCredentialStore) -> ListenerSecurity:
    """The security of listener ``name`` (see the module docstring); checked now."""
    settings = ListenerSettings.from_config(name, config)
    security = ListenerSecurity(protocol=protocol)
    if protocol in ("SSL", "SASL_SSL"):
        security.ssl_context = build_server_context(settings)
    if protocol == "SSL":
        security.principal_mapper = SslPrincipalMapper(settings.get("ssl.principal.mapping.rules"),
                                                       key=settings.key_used("ssl.principal.mapping.rules"))
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanisms = settings.get_list("sasl.enabled.mechanisms", "GSSAPI")
        unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
        if not mechanisms or unsupported:
            raise ConfigError(settings.key_used("sasl.enabled.mechanisms"), ",".join(mechanisms),
                              f"a list of {', '.join(SUPPORTED_MECHANISMS)} (strom has no "
                              f"{', '.join(unsupported) or 'empty list'}; Kafka's default is GSSAPI, so a SASL "
                              f"listener must set it)")
        default_reauth = settings.get_int("connections.max.reauth.ms", 0, minimum=0)
        for mechanism in mechanisms:
            reauth = settings.get_int("connections.max.reauth.ms", default_reauth, mechanism=mechanism, minimum=0)
            security.sasl_mechanisms[mechanism] = SaslMechanismConfig(
                _mechanism_factory(settings, mechanism, scram_store), reauth)
        security.sasl_max_receive_size = settings.get_int("sasl.server.max.receive.size", DEFAULT_SASL_MAX_RECEIVE,
                                                          minimum=1)
        security.failed_authentication_delay_ms = settings.get_int("connection.failed.authentication.delay.ms", 100,
                                                                   minimum=0)
    return security


def _mechanism_factory(settings: ListenerSettings, mechanism: str,
                       scram_store: ScramCredentialStore) -> Callable[[], SaslServer]:
    if mechanism == "PLAIN":
        entry = _jaas(settings, mechanism, PLAIN_LOGIN_MODULE, required=True)
        assert entry is not None
        users = users_from_jaas(entry)
        if not users:
            raise ConfigError(settings.key_used("sasl.jaas.config", mechanism), "(hidden)",
                              'PlainLoginModule options that define users: user_<name>="<password>"')
        return lambda: PlainSaslServer(users)
    if mechanism in SCRAM_MECHANISMS:
        _jaas(settings, mechanism, SCRAM_LOGIN_MODULE, required=False)
        return lambda: ScramSaslServer(mechanism, scram_store)
    # OAUTHBEARER: only the unsecured validator (Kafka's default without a callback handler class).
    handler = settings.get("sasl.server.callback.handler.class", mechanism=mechanism)
    if handler not in (None, UNSECURED_VALIDATOR):
        raise ConfigError(settings.key_used("sasl.server.callback.handler.class", mechanism), handler,
                          f"{UNSECURED_VALIDATOR} or unset (strom validates unsecured JWTs only)")
    entry = _jaas(settings, mechanism, OAUTHBEARER_LOGIN_MODULE, required=False)
    options = dict(entry.options) if entry is not None else {}
    try:
        int(options.get("unsecuredValidatorAllowableClockSkewMs", "0") or 0)
    except ValueError:
        raise ConfigError(settings.key_used("sasl.jaas.config", mechanism), "(hidden)",
                          "unsecuredValidatorAllowableClockSkewMs as a number of ms") from None
    return lambda: OAuthBearerSaslServer(options)
