"""``--add-scram`` of ``strom storage format``: Kafka's ``ScramParser`` (kafka-storage format).

``SCRAM-SHA-256=[name=alice,password=alice-secret]``, or with ``iterations=8192``,
``salt=<base64>``, ``saltedpassword=<base64>`` (with ``salt``); values may be double-quoted. Each
becomes a ``UserScramCredentialRecord`` in the bootstrap metadata, so the first start of the
cluster knows the user. Errors carry Kafka's messages.
"""

from __future__ import annotations

import base64
import binascii
import os

from strom.core.metadata.records import UserScramCredentialRecord
from strom.core.security.sasl.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    credential_from_salted_password,
    salted_password,
)


class ScramFormatError(ValueError):
    """A bad ``--add-scram`` argument (Kafka's FormatterException message)."""


def _component(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise ScramFormatError(f"No equals sign found in SCRAM component: {text}")
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        value = value[1:-1]
    return key, value


def _b64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ScramFormatError(f"Failed to decode given {what}: {value}") from None


def parse_add_scram(argument: str) -> UserScramCredentialRecord:
    """One ``--add-scram`` argument as the record Kafka's formatter writes."""
    text = argument.strip()
    mechanism, sep, config = text.partition("=")
    if not sep:
        raise ScramFormatError(f"Failed to find equals sign in SCRAM argument '{text}'")
    if mechanism not in MECHANISMS:
        raise ScramFormatError(f"The add-scram mechanism {mechanism} is not supported.")
    if not config.startswith("["):
        raise ScramFormatError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise ScramFormatError("Expected configuration string to end with ]")
    components = dict(_component(c) for c in config[1:-1].split(","))
    name = components.pop("name", None)
    if name is None:
        raise ScramFormatError("You must supply 'name' to add-scram")
    salt_text = components.pop("salt", None)
    salt = _b64(salt_text, "salt") if salt_text is not None else None
    iterations_text = components.pop("iterations", None)
    try:
        iterations = int(iterations_text) if iterations_text is not None else MIN_ITERATIONS
    except ValueError:
        raise ScramFormatError(f"Failed to parse iterations count: {iterations_text}") from None
    password = components.pop("password", None)
    salted_text = components.pop("saltedpassword", None)
    if password is None:
        if salted_text is None:
            raise ScramFormatError("You must supply one of 'password' or 'saltedpassword' to add-scram")
        if salt is None:
            raise ScramFormatError("You must supply 'salt' with 'saltedpassword' to add-scram")
    if components:
        raise ScramFormatError("Unknown SCRAM configurations: " + ", ".join(sorted(components)))
    if iterations < MIN_ITERATIONS:
        raise ScramFormatError(f"The 'iterations' value must be >= {MIN_ITERATIONS} for add-scram using "
                               f"{mechanism.replace('-', '_')}")
    if iterations > MAX_ITERATIONS:
        raise ScramFormatError(f"The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram using "
                               f"{mechanism.replace('-', '_')}")
    if salt is None:
        salt = base64.b32encode(os.urandom(20)).lower().rstrip(b"=")  # printable, as Kafka's secureRandomBytes
    salted = (_b64(salted_text, "saltedPassword") if password is None and salted_text is not None
              else salted_password(mechanism, password or "", salt, iterations))
    credential = credential_from_salted_password(mechanism, salt, salted, iterations)
    return UserScramCredentialRecord(name=name, mechanism=MECHANISMS[mechanism][0], salt=salt,
                                     stored_key=credential.stored_key, server_key=credential.server_key,
                                     iterations=iterations)
