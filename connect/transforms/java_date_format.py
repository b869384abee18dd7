"""Java ``SimpleDateFormat`` patterns, in UTC, for ``TimestampConverter`` and ``TimestampRouter``.

Kafka's configs take Java patterns (``yyyy-MM-dd'T'HH:mm:ss.SSSZ``, ``yyyyMMdd``), so the same
configuration files work here. Supported letters: ``G y Y M L d D E u a H k K h m s S z Z X``
and quoted text (``'T'``, ``''``). Formatting is exact; parsing is strict about the pattern's
literals, takes exactly ``n`` digits for a numeric field that abuts another numeric field
(as Java does for ``yyyyMMdd``) and one or more digits otherwise.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass

from strom.connect.exceptions import ConfigException

_LETTERS = set("GyYMLdDEuaHkKhmsSzZX")
_NUMERIC = set("yYMLdDuHkKhmsS")
_MONTHS = [calendar.month_name[i] for i in range(1, 13)]
_DAYS = [calendar.day_name[i] for i in range(7)]  # Monday first, as datetime.weekday()
UTC = dt.UTC


@dataclass(frozen=True)
class _Tok:
    letter: str  # "" for literal text
    count: int
    text: str = ""

    @property
    def numeric(self) -> bool:
        # MMM and longer are month names; yy..y counts are all numeric.
        return self.letter in _NUMERIC and not (self.letter in "ML" and self.count >= 3)


def _tokenize(pattern: str, key: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            if i + 1 < n and pattern[i + 1] == "'":
                toks.append(_Tok("", 0, "'"))
                i += 2
                continue
            end = i + 1
            buf = []
            while True:
                if end >= n:
                    raise ConfigException(key, pattern, "Unterminated quote in date format pattern")
                if pattern[end] == "'":
                    if end + 1 < n and pattern[end + 1] == "'":
                        buf.append("'")
                        end += 2
                        continue
                    break
                buf.append(pattern[end])
                end += 1
            toks.append(_Tok("", 0, "".join(buf)))
            i = end + 1
        elif c.isascii() and c.isalpha():
            if c not in _LETTERS:
                raise ConfigException(key, pattern, f"Illegal pattern character '{c}'")
            j = i
            while j < n and pattern[j] == c:
                j += 1
            toks.append(_Tok(c, j - i))
            i = j
        else:
            toks.append(_Tok("", 0, c))
            i += 1
    return toks


def _pad(n: int, width: int) -> str:
    return f"-{abs(n):0{width}d}" if n < 0 else f"{n:0{width}d}"


class JavaDateFormat:
    """One compiled pattern; ``format`` and ``parse`` work in UTC."""

    def __init__(self, pattern: str, key: str = "format") -> None:
        self.pattern = pattern
        self._toks = _tokenize(pattern, key)
        self._regex, self._groups = self._compile()

    # -- formatting ----------------------------------------------------------------------
    def format(self, when: dt.datetime) -> str:
        when = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
        out: list[str] = []
        for t in self._toks:
            out.append(t.text if not t.letter else self._field(t, when))
        return "".join(out)

    def format_millis(self, millis: int) -> str:
        return self.format(dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=millis))

    @staticmethod
    def _field(t: _Tok, w: dt.datetime) -> str:
        c, k = t.letter, t.count
        if c == "G":
            return "AD"
        if c in "yY":
            return _pad(w.year % 100, 2) if k == 2 else _pad(w.year, k)
        if c in "ML":
            if k >= 4:
                return _MONTHS[w.month - 1]
            if k == 3:
                return _MONTHS[w.month - 1][:3]
            return _pad(w.month, k)
        if c == "d":
            return _pad(w.day, k)
        if c == "D":
            return _pad(w.timetuple().tm_yday, k)
        if c == "E":
            name = _DAYS[w.weekday()]
            return name if k >= 4 else name[:3]
        if c == "u":
            return _pad(w.isoweekday(), k)
        if c == "a":
            return "AM" if w.hour < 12 else "PM"
        if c == "H":
            return _pad(w.hour, k)
        if c == "k":
            return _pad(w.hour or 24, k)
        if c == "K":
            return _pad(w.hour % 12, k)
        if c == "h":
            return _pad(w.hour % 12 or 12, k)
        if c == "m":
            return _pad(w.minute, k)
        if c == "s":
            return _pad(w.second, k)
        if c == "S":
            return _pad(w.microsecond // 1000, k)
        if c == "z":
            return "UTC" if k < 4 else "Coordinated Universal Time"
        if c == "Z":
            return "+0000"
        if c == "X":
            return "Z"
        raise AssertionError(c)

    # -- parsing -------------------------------------------------------------------------
    def _compile(self) -> tuple[re.Pattern[str], list[_Tok]]:
        parts: list[str] = []
        groups: list[_Tok] = []
        for i, t in enumerate(self._toks):
            if not t.letter:
                parts.append(re.escape(t.text))
                continue
            groups.append(t)
            nxt = self._toks[i + 1] if i + 1 < len(self._toks) else None
            if t.numeric:
                abutting = nxt is not None and nxt.letter and nxt.numeric
                parts.append(f"([+-]?\\d{{{t.count}}})" if abutting else "([+-]?\\d+)")
            elif t.letter in "ML":
                parts.append("(" + "|".join(m if t.count >= 4 else m[:3] for m in _MONTHS) + ")")
            elif t.letter == "E":
                parts.append("(" + "|".join(sorted({d for d in _DAYS} | {d[:3] for d in _DAYS}, key=len,
                                                   reverse=True)) + ")")
            elif t.letter == "a":
                parts.append("(AM|PM|am|pm)")
            elif t.letter == "G":
                parts.append("(AD|BC)")
            elif t.letter == "z":
                parts.append(r"(UTC|GMT|Z|Coordinated Universal Time|[+-]\d{2}:?\d{2})")
            else:  # Z, X
                parts.append(r"(Z|[+-]\d{2}(?::?\d{2})?)")
        return re.compile("".join(parts), re.IGNORECASE), groups

    def parse(self, text: str) -> dt.datetime:
        """The UTC instant ``text`` denotes; ``ValueError`` when it does not match the pattern."""
        m = self._regex.match(text)
        if m is None:
            raise ValueError(f"Unparseable date: \"{text}\"")
        year, month, day, hour, minute, second, milli = 1970, 1, 1, 0, 0, 0, 0
        pm: bool | None = None
        twelve = False
        offset = dt.timedelta(0)
        yday: int | None = None
        for t, raw in zip(self._groups, m.groups(), strict=True):
            c = t.letter
            if c in "yY":
                year = int(raw)
                if t.count <= 2 and len(raw) <= 2:
                    # Java's two-digit year window: within 80 years before and 20 after now.
                    now = dt.datetime.now(UTC).year
                    year += (now - 80) // 100 * 100
                    if year < now - 80:
                        year += 100
            elif c in "ML":
                if t.count >= 3:
                    month = [x[: len(raw)].lower() for x in _MONTHS].index(raw.lower()) + 1
                else:
                    month = int(raw)
            elif c == "d":
                day = int(raw)
            elif c == "D":
                yday = int(raw)
            elif c in "Hk":
                hour = int(raw) % 24
            elif c in "Kh":
                hour = int(raw) % 12
                twelve = True
            elif c == "a":
                pm = raw.upper() == "PM"
            elif c == "m":
                minute = int(raw)
            elif c == "s":
                second = int(raw)
            elif c == "S":
                milli = int(raw)
            elif c in "zZX":
                offset = _offset(raw)
        if twelve and pm:  # the AM/PM marker only counts with a 12-hour field, as in Java
            hour += 12
        try:
            base = dt.datetime(year, 1, 1, tzinfo=UTC) + dt.timedelta(days=yday - 1) if yday else \
                dt.datetime(year, month, day, tzinfo=UTC)
        except ValueError as e:
            raise ValueError(f"Unparseable date: \"{text}\": {e}") from None
        return base + dt.timedelta(hours=hour, minutes=minute, seconds=second, milliseconds=milli) - offset


def _offset(raw: str) -> dt.timedelta:
    if raw.upper() in ("Z", "UTC", "GMT", "COORDINATED UNIVERSAL TIME"):
        return dt.timedelta(0)
    sign = -1 if raw[0] == "-" else 1
    digits = raw[1:].replace(":", "")
    hours = int(digits[:2])
    minutes = int(digits[2:4] or 0)
    return sign * dt.timedelta(hours=hours, minutes=minutes)
