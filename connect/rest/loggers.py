"""The /admin/loggers resource over Python's ``logging``, with Kafka Connect's level names.

Kafka Connect (log4j) speaks of OFF FATAL ERROR WARN INFO DEBUG TRACE; Python has no TRACE and
calls WARN "WARNING" and FATAL "CRITICAL". Levels are translated both ways so tools written for
Kafka Connect read and set levels unchanged. Setting a level on a logger also sets it on every
existing descendant, as Kafka Connect does (KIP-495), and remembers when it was set
(``last_modified``, KIP-976).
"""

from __future__ import annotations

import logging
import threading
import time

# Python has no TRACE; one step below DEBUG keeps ordering without clashing with NOTSET (0).
TRACE = 5
OFF = logging.CRITICAL + 10

KAFKA_TO_PY: dict[str, int] = {
    "OFF": OFF, "FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING,
    "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": TRACE,
}
# Python names accepted too, for people who think in Python terms.
_ALIASES = {"WARNING": "WARN", "CRITICAL": "FATAL"}

ROOT = "root"


def kafka_level_name(level: int) -> str:
    """Kafka's name of a Python level (nearest named level at or below it)."""
    best = "TRACE"
    for name, value in sorted(KAFKA_TO_PY.items(), key=lambda kv: kv[1]):
        if level >= value:
            best = name
    return best


def parse_level(text: str) -> int | None:
    """The Python level of a Kafka (or Python) level name; None when it is not a level."""
    name = text.strip().upper()
    name = _ALIASES.get(name, name)
    return KAFKA_TO_PY.get(name)


class LoggerLevels:
    """Reads and sets logger levels; thread-safe (REST handlers and workers share logging)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_modified: dict[str, int] = {}

    @staticmethod
    def _logger(name: str) -> logging.Logger:
        return logging.getLogger() if name == ROOT else logging.getLogger(name)

    @staticmethod
    def _known(name: str) -> bool:
        return name == ROOT or name in logging.root.manager.loggerDict

    def _entry(self, name: str) -> dict[str, object]:
        lg = self._logger(name)
        return {"level": kafka_level_name(lg.getEffectiveLevel()),
                "last_modified": self._last_modified.get(name)}

    def all_levels(self) -> dict[str, dict[str, object]]:
        """Root plus every logger with an explicit level, like log4j's current loggers."""
        out: dict[str, dict[str, object]] = {ROOT: self._entry(ROOT)}
        for name, obj in sorted(logging.root.manager.loggerDict.items()):
            if isinstance(obj, logging.Logger) and obj.level != logging.NOTSET:
                out[name] = self._entry(name)
        return out

    def level(self, name: str) -> dict[str, object] | None:
        """The logger's effective level, or None if no such logger exists."""
        if not self._known(name):
            return None
        return self._entry(name)

    def set_level(self, name: str, level: int) -> list[str]:
        """Set ``name`` and its existing descendants; return the affected names, sorted."""
        now = int(time.time() * 1000)
        with self._lock:
            affected = [name]
            if name == ROOT:
                affected += [n for n, o in logging.root.manager.loggerDict.items()
                             if isinstance(o, logging.Logger) and o.level != logging.NOTSET]
            else:
                prefix = name + "."
                affected += [n for n, o in logging.root.manager.loggerDict.items()
                             if isinstance(o, logging.Logger) and n.startswith(prefix)]
            for n in affected:
                self._logger(n).setLevel(level)
                self._last_modified[n] = now
        return sorted(set(affected))
