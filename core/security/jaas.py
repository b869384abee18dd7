"""Kafka's ``sasl.jaas.config`` syntax (``JaasConfig``): ``<LoginModule> <flag> key=value ... ;``.

Values are bare words or double-quoted strings (``\\`` escapes the next character inside
quotes); ``//`` and ``/* */`` comments are skipped; the flag is one of ``required``,
``requisite``, ``sufficient``, ``optional``. A ``sasl.jaas.config`` value holds exactly one login
module, as Kafka requires.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasConfigError(ValueError):
    """The text is not a valid JAAS configuration (the message says where; it never quotes values)."""


@dataclass(frozen=True, slots=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) tokens: ``word``, ``quoted``, ``=`` and ``;``."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise JaasConfigError("unterminated /* comment")
            i = end + 2
        elif c in "=;":
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
                raise JaasConfigError("unterminated quoted value")
            i += 1
            out.append(("quoted", "".join(value)))
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in '=;"':
                i += 1
            out.append(("word", text[start:i]))
    return out


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """Every login module of ``text``, in order."""
    tokens = _tokens(text)
    entries: list[JaasEntry] = []
    pos = 0
    while pos < len(tokens):
        kind, module = tokens[pos]
        if kind != "word":
            raise JaasConfigError(f"expected a login module class name at token {pos + 1}")
        if pos + 1 >= len(tokens) or tokens[pos + 1][0] != "word" or tokens[pos + 1][1].lower() not in FLAGS:
            raise JaasConfigError(f"login module {module}: expected a control flag ({', '.join(FLAGS)})")
        flag = tokens[pos + 1][1].lower()
        pos += 2
        options: dict[str, str] = {}
        while True:
            if pos >= len(tokens):
                raise JaasConfigError(f"login module {module}: expected ';' at the end")
            kind, value = tokens[pos]
            if kind == ";":
                pos += 1
                break
            if kind != "word" or pos + 2 >= len(tokens) or tokens[pos + 1][0] != "=" \
                    or tokens[pos + 2][0] not in ("word", "quoted"):
                raise JaasConfigError(f"login module {module}: expected key=value options before ';'")
            options[value] = tokens[pos + 2][1]
            pos += 3
        entries.append(JaasEntry(module, flag, options))
    return entries


def parse_single(text: str) -> JaasEntry:
    """The one login module of a ``sasl.jaas.config`` value."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise JaasConfigError(f"JAAS config property contains {len(entries)} login modules, should be 1 module")
    return entries[0]
