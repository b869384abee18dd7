"""Principals from TLS client certificates: Kafka's ``SslPrincipalMapper`` and the DN string.

Kafka's ``DefaultKafkaPrincipalBuilder`` names an SSL client ``User:<name>`` where ``<name>`` is
the certificate's subject as ``X500Principal.getName()`` writes it (RFC 2253: the most specific
RDN first, ``CN=alice,OU=eng,O=example``) mapped by ``ssl.principal.mapping.rules``: a comma-
separated list of ``RULE:pattern/replacement/[LU]`` and ``DEFAULT``, tried in order; the first
rule whose pattern matches the whole DN gives the name (``L``/``U``: lower/upper case), ``DEFAULT``
keeps the DN. No matching rule fails the connection, as in Kafka. A client without a
certificate is ``User:ANONYMOUS``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from strom.core.exceptions import ConfigError

ANONYMOUS = "User:ANONYMOUS"
DEFAULT_RULES = "DEFAULT"
# Kafka's patterns (SslPrincipalMapper.RULE_PATTERN / RULE_SPLITTER), in Python's syntax.
_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(Exception):
    """No ``ssl.principal.mapping.rules`` rule applies to a DN (Kafka closes the connection)."""


@dataclass(frozen=True, slots=True)
class _Rule:
    default: bool
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    lower: bool = False
    upper: bool = False

    def apply(self, dn: str) -> str | None:
        if self.default:
            return dn
        assert self.pattern is not None
        if self.pattern.fullmatch(dn) is None:
            return None
        # Java's String.replaceAll: every match of the pattern in the DN is replaced.
        result = self.pattern.sub(lambda m: _expand(self.replacement, m), dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result


def _expand(replacement: str, match: re.Match[str]) -> str:
    """Java's Matcher replacement: ``$n`` is group n (digits taken while such a group exists, as
    Kafka's escapeLiteralBackReferences arranges), ``\\x`` is a literal x."""
    out: list[str] = []
    i = 0
    groups = match.re.groups
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            j = i + 1
            number = int(replacement[j])
            if number > groups:  # Kafka treats a reference to a missing group as literal text
                out.append("$")
                i += 1
                continue
            j += 1
            while j < len(replacement) and replacement[j].isdigit() and number * 10 + int(replacement[j]) <= groups:
                number = number * 10 + int(replacement[j])
                j += 1
            out.append(match.group(number) or "")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


class SslPrincipalMapper:
    """Kafka's ``SslPrincipalMapper`` over ``ssl.principal.mapping.rules``."""

    def __init__(self, rules: str | None = None, *, key: str = "ssl.principal.mapping.rules") -> None:
        text = DEFAULT_RULES if rules is None else rules
        parsed = [self._parse(r, text, key) for r in self._split(text)]
        self.rules: list[_Rule] = [r for r in parsed if r is not None]

    @staticmethod
    def _split(text: str) -> list[str]:
        return [m.group(1) for m in _RULE_SPLITTER.finditer(text.strip()) if m.group(0)]

    @staticmethod
    def _parse(rule: str, text: str, key: str) -> _Rule | None:
        m = _RULE_PARSER.match(rule)
        if m is None or m.end() != len(rule):
            rest = rule if m is None else rule[m.end():]
            raise ConfigError(key, text, f"Kafka's rules RULE:pattern/replacement/[LU] or DEFAULT, comma-separated "
                                         f"(invalid rule {rule!r}, unmatched {rest!r})")
        if m.group(1) is not None:
            return _Rule(default=True)
        if m.group(2) is not None:
            try:
                pattern = re.compile(m.group(2))
            except re.error as e:
                raise ConfigError(key, text, f"rules whose patterns are regular expressions ({e})") from None
            return _Rule(default=False, pattern=pattern, replacement=m.group(4), lower=m.group(6) == "L",
                         upper=m.group(6) == "U")
        if m.group(7):
            raise ConfigError(key, text, f"Kafka's rules RULE:pattern/replacement/[LU] or DEFAULT (invalid rule "
                                         f"{rule!r})")
        return None  # empty rules are ignored, as Kafka does

    def name(self, dn: str) -> str:
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRule(f"No rules apply to {dn}")


# Attribute keywords Java's X500Principal writes in RFC 2253 form; others as dotted OIDs.
_RFC2253_KEYWORDS = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID",
}
_OIDS = {"emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5", "title": "2.5.4.12",
         "surname": "2.5.4.4", "givenName": "2.5.4.42", "initials": "2.5.4.43", "pseudonym": "2.5.4.65",
         "generationQualifier": "2.5.4.44", "dnQualifier": "2.5.4.46", "postalCode": "2.5.4.17"}
_IA5_ATTRIBUTES = {"emailAddress"}


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _der_string(attribute: str, value: str) -> str:
    """``#`` + hex of the DER string, as Java writes attributes without an RFC 2253 keyword."""
    data = value.encode()
    tag = 0x16 if attribute in _IA5_ATTRIBUTES else (0x13 if attribute in ("serialNumber", "dnQualifier") else 0x0C)
    length = bytes([len(data)]) if len(data) < 128 else bytes([0x81, len(data)]) if len(data) < 256 else \
        bytes([0x82, len(data) >> 8, len(data) & 0xFF])
    return "#" + (bytes([tag]) + length + data).hex()


def dn_from_peercert(cert: Mapping[str, object]) -> str:
    """The subject of a certificate from ``SSLObject.getpeercert()`` as Java's RFC 2253 string."""
    subject = cert.get("subject") or ()
    rdns: list[str] = []
    for rdn in subject:  # type: ignore[attr-defined]
        parts = []
        for attribute, value in rdn:
            keyword = _RFC2253_KEYWORDS.get(attribute)
            if keyword is not None:
                parts.append(f"{keyword}={_escape(value)}")
            else:
                oid = _OIDS.get(attribute, attribute)
                parts.append(f"{oid}={_der_string(attribute, value)}")
        rdns.append("+".join(parts))
    return ",".join(reversed(rdns))
