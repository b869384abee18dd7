"""Kafka's ``sasl.jaas.config`` syntax (``JaasConfig``): ``<LoginModule> <flag> key=value ... ;``.

Values are bare words or double-quoted strings (``\\`` escapes the next character inside
quotes); ``//`` and ``/* */`` comments are skipped; the flag is one of ``required``,
``requisite``, ``sufficient``, ``optional``. A ``sasl.jaas.config`` value holds exactly one login
module, as Kafka requires.

The tokenizer and grammar are :mod:`strom.client_security`'s (one parser for the broker's
listeners and the runtimes' clients, which also read JAAS files); this module gives the broker
its error type and Kafka's "one module" rule.
"""

from __future__ import annotations

from strom.client_security import JAAS_FLAGS as FLAGS
from strom.client_security import JaasEntry, parse_jaas_entries

__all__ = ["FLAGS", "JaasConfigError", "JaasEntry", "parse_jaas_config", "parse_single"]


class JaasConfigError(ValueError):
    """The text is not a valid JAAS configuration (the message says where; it never quotes values)."""


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """Every login module of ``text``, in order."""
    try:
        return parse_jaas_entries(text)
    except ValueError as e:
        raise JaasConfigError(str(e)) from None


def parse_single(text: str) -> JaasEntry:
    """The one login module of a ``sasl.jaas.config`` value."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise JaasConfigError(f"JAAS config property contains {len(entries)} login modules, should be 1 module")
    return entries[0]
