"""PEM key and trust stores loaded into a Python ``ssl.SSLContext``: the one implementation.

Kafka's PEM stores (``ssl.keystore.type=PEM`` / ``ssl.truststore.type=PEM``) come as a file
(``ssl.keystore.location``: private key and certificate chain in one file;
``ssl.truststore.location``: CA certificates) or inline (``ssl.keystore.certificate.chain`` +
``ssl.keystore.key``; ``ssl.truststore.certificates``); ``ssl.key.password`` decrypts an
encrypted key. The broker's TLS listeners (``strom.core.security.ssl_context``) and the
runtimes' https server and TLS clients (``strom.client_security``) load them here; each caller
keeps its own key lookup (listener prefixes, defaults) and turns the errors raised here
(``ssl.SSLError``, ``OSError``) into its own error naming the key.

A top-level module importing nothing of strom, so the broker and every runtime may use it.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def pem_file(text: str) -> Iterator[str]:
    """PEM text in a private temporary file (``ssl`` loads keys from files only), removed after."""
    fd, path = tempfile.mkstemp(prefix="strom-pem-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        yield path
    finally:
        os.unlink(path)


def load_key_store(ctx: ssl.SSLContext, *, location: str | None = None, chain: str | None = None,
                   key: str | None = None, password: str | None = None) -> bool:
    """Load the key store into ``ctx``: the PEM file ``location`` (key and chain in one file), else
    the inline ``chain`` and ``key`` together (``None``: not given). False when neither is given
    (nothing loaded; a lone ``chain`` or ``key`` is the caller's error to name); a store that does
    not load raises ``ssl.SSLError`` (or ``OSError`` for an unreadable file)."""
    if location is not None:
        ctx.load_cert_chain(location, password=password)
        return True
    if chain is not None and key is not None:
        with pem_file(chain) as chain_path, pem_file(key) as key_path:
            ctx.load_cert_chain(chain_path, key_path, password=password)
        return True
    return False


def load_trust_store(ctx: ssl.SSLContext, *, location: str | None = None,
                     certificates: str | None = None) -> bool:
    """Load CA certificates into ``ctx``: the PEM file ``location``, else the inline
    ``certificates`` (``None``: not given). False when neither is given; bad ones raise
    ``ssl.SSLError`` / ``OSError``."""
    if location is not None:
        ctx.load_verify_locations(cafile=location)
        return True
    if certificates is not None:
        ctx.load_verify_locations(cadata=certificates)
        return True
    return False
