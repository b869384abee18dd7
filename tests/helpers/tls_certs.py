"""Throwaway certificates for TLS tests, examples and benchmarks (the ``cryptography`` package).

:func:`make_pki` writes a CA, a server certificate for 127.0.0.1/localhost and client
certificates (one per subject given) as PEM files into a directory, and returns their paths.
Keys are EC P-256 (fast to make); a key may be encrypted with a password (``ssl.key.password``).
:func:`make_rest_pki` makes the key stores of a mutual-TLS Connect REST test.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_ATTRS = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "O": NameOID.ORGANIZATION_NAME,
          "L": NameOID.LOCALITY_NAME, "ST": NameOID.STATE_OR_PROVINCE_NAME, "C": NameOID.COUNTRY_NAME}


@dataclass
class Pki:
    """Paths of the PEM files :func:`make_pki` wrote."""

    directory: Path
    ca_cert: Path
    server_cert: Path          # the server certificate followed by the CA (a chain)
    server_key: Path
    server_keystore: Path      # key + chain in one file (Kafka's PEM ssl.keystore.location)
    clients: dict[str, tuple[Path, Path]] = field(default_factory=dict)  # name -> (cert, key)


def _name(subject: str) -> x509.Name:
    """``CN=alice,OU=eng,O=example`` (most specific first, as Java writes DNs) as an x509 Name."""
    parts = [p.split("=", 1) for p in subject.split(",")]
    return x509.Name([x509.NameAttribute(_ATTRS[k.strip()], v.strip()) for k, v in reversed(parts)])


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def _cert(subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
          issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool = False, server: bool = False,
          usages: list[x509.ObjectIdentifier] | None = None) -> x509.Certificate:
    """A certificate signed by ``issuer_key``: a CA, a server's (SAN 127.0.0.1 and localhost) or a
    client's; ``usages`` overrides the extended key usage (serverAuth or clientAuth)."""
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
            critical=True)
    else:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages or [usage]), critical=False)
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(directory: Path, clients: dict[str, str] | None = None, *, key_password: str | None = None) -> Pki:
    """A CA, a server certificate and ``clients`` (name -> subject DN) under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("CN=strom test CA,O=strom")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    pki = Pki(directory, directory / "ca.pem", directory / "server.pem", directory / "server.key",
              directory / "server.keystore.pem")
    pki.ca_cert.write_bytes(ca_pem)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _cert(_name("CN=localhost,O=strom"), server_key, ca_name, ca_key, server=True)
    chain = server.public_bytes(serialization.Encoding.PEM) + ca_pem
    pki.server_cert.write_bytes(chain)
    pki.server_key.write_bytes(_key_pem(server_key, key_password))
    pki.server_keystore.write_bytes(_key_pem(server_key, key_password) + chain)
    for name, subject in (clients or {}).items():
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _cert(_name(subject), key, ca_name, ca_key)
        cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(_key_pem(key, None))
        pki.clients[name] = (cert_path, key_path)
    return pki


def make_rest_pki(directory: Path) -> tuple[Path, Path, Path]:
    """(CA, worker key store, client key store) PEM files for mutual-TLS REST tests. The worker's
    certificate serves both ends (serverAuth and clientAuth), as a Connect worker's key store must
    when it forwards to a leader that asks for client certificates; SAN 127.0.0.1 and localhost."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("CN=connect test CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    worker_key, client_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    worker = _cert(_name("CN=worker"), worker_key, ca_name, ca_key, server=True,
                   usages=[ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH])
    client = _cert(_name("CN=operator"), client_key, ca_name, ca_key)
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    paths = directory / "ca.pem", directory / "worker.keystore.pem", directory / "client.keystore.pem"
    paths[0].write_bytes(ca_pem)
    paths[1].write_bytes(_key_pem(worker_key, None) + worker.public_bytes(serialization.Encoding.PEM) + ca_pem)
    paths[2].write_bytes(_key_pem(client_key, None) + client.public_bytes(serialization.Encoding.PEM))
    return paths
