"""A secure listener with missing or bad TLS/SASL settings stops ``strom dev`` at start with one
line naming the listener and the key (and never a secret's value); nothing is created."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from secure_broker import jaas_plain
from tls_certs import make_pki

CLI = [sys.executable, "-m", "strom.core.cli"]


def _start(tmp_path: Path, config: dict[str, str]) -> str:
    data = tmp_path / "data"
    args = [*CLI, "dev", "--data-dir", str(data), "--port", "0"]
    for key, value in config.items():
        args += ["--override", f"{key}={value}"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert not data.exists(), "the data dir was created for a broker that refused to start"
    return lines[0]


@pytest.mark.parametrize(("extra", "key"), [
    ({}, "listener.name.ssl.ssl.keystore.location"),
    ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "{keystore}"}, "ssl.keystore.type"),
    ({"ssl.keystore.location": "/nonexistent/ks.pem"}, "ssl.keystore.location"),
    ({"ssl.keystore.location": "{encrypted}", "ssl.key.password": "wrong-password"}, "ssl.keystore.location"),
    ({"ssl.keystore.certificate.chain": "{chain}"}, "listener.name.ssl.ssl.keystore.key"),
    ({"ssl.keystore.location": "{keystore}", "listener.name.ssl.ssl.client.auth": "maybe"},
     "listener.name.ssl.ssl.client.auth"),
    ({"ssl.keystore.location": "{keystore}", "ssl.client.auth": "required"}, "ssl.truststore.location"),
    ({"ssl.keystore.location": "{keystore}", "ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols"),
    ({"ssl.keystore.location": "{keystore}", "ssl.cipher.suites": "TLS_NOT_A_SUITE"}, "ssl.cipher.suites"),
    ({"ssl.keystore.location": "{keystore}", "ssl.principal.mapping.rules": "RULE:broken"},
     "ssl.principal.mapping.rules"),
], ids=["no-keystore", "jks", "missing-file", "wrong-key-password", "chain-without-key", "client-auth",
        "required-without-truststore", "tls1.1", "cipher", "mapping-rule"])
def test_bad_tls_settings_fail_the_start_naming_the_key(tmp_path: Path, extra: dict[str, str], key: str) -> None:
    pki = make_pki(tmp_path / "pki")
    encrypted = make_pki(tmp_path / "pki-enc", key_password="right-password")
    values = {"keystore": str(pki.server_keystore), "encrypted": str(encrypted.server_keystore),
              "chain": pki.server_cert.read_text()}
    config = {"listeners": "SSL://127.0.0.1:0", **{k: v.format(**values) for k, v in extra.items()}}
    line = _start(tmp_path, config)
    assert line.startswith("error: listener SSL://127.0.0.1:0 (SSL): "), line
    assert f"'{key}'" in line or key in line, line
    assert "wrong-password" not in line and "BEGIN" not in line


@pytest.mark.parametrize(("extra", "key"), [
    ({}, "listener.name.sasl_plaintext.sasl.enabled.mechanisms"),
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms"),
    ({"sasl.enabled.mechanisms": "PLAIN"}, "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": "nonsense"},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config":
      jaas_plain({"alice": "alice-secret"}), "connections.max.reauth.ms": "soon"}, "connections.max.reauth.ms"),
    ({"sasl.enabled.mechanisms": "OAUTHBEARER", "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback"
      ".handler.class": "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"},
     "sasl.server.callback.handler.class"),
], ids=["no-mechanisms", "gssapi", "plain-without-jaas", "bad-jaas", "reauth-ms", "secured-oauth"])
def test_bad_sasl_settings_fail_the_start_naming_the_key(tmp_path: Path, extra: dict[str, str], key: str) -> None:
    line = _start(tmp_path, {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", **extra})
    assert line.startswith("error: listener SASL_PLAINTEXT://127.0.0.1:0 (SASL_PLAINTEXT): "), line
    assert key in line, line
    assert "alice-secret" not in line


@pytest.mark.parametrize(("extra", "needle"), [
    ({"inter.broker.listener.name": "INTERNAL"}, "inter.broker.listener.name must be a listener name"),
    ({"advertised.listeners": "OTHER://example.com:9092"}, "advertised.listeners: OTHER is not a listener"),
    ({"advertised.listeners": "PLAINTEXT://example.com"}, "is not NAME://host:port"),
])
def test_listener_names_are_checked(tmp_path: Path, extra: dict[str, str], needle: str) -> None:
    line = _start(tmp_path, {"listeners": "PLAINTEXT://127.0.0.1:0", **extra})
    assert needle in line, line
