"""Hints for configuration mistakes, shared by every runtime (broker, Connect, Streams, Spark).

Two kinds of mistake are common enough to deserve a precise message:

* an unknown key, usually a typo (``num.partition``, ``bootstrap.server``):
  :func:`unknown_key_hint` names the closest known key ("unknown config 'num.partition' (did
  you mean 'num.partitions'?)") and :func:`warn_unknown_keys` logs it once per process;
* a bad value: :func:`value_errors` turns a pydantic ``ValidationError`` into one line per key,
  "invalid value 'abc' for num.partitions: expected an integer", instead of pydantic's
  "Input should be a valid integer, unable to parse string as an integer".

It is a top-level module of ``strom`` and imports nothing of strom, so Streams and the Spark
bridge (which may import only top-level modules) use it as the broker and Connect do.
"""

from __future__ import annotations

import difflib
import logging
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

# Keys already warned about, per kind of configuration: a config read again (a task restarted,
# `strom dev` building its config twice) does not repeat the warning.
_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def closest_key(key: str, known: Iterable[str], prefixes: Iterable[str] = ()) -> str | None:
    """The known key (or open-ended prefix) closest to ``key``, or None when nothing is close.

    difflib's ratio with a cutoff of 0.75: a dropped or doubled letter, a swapped pair or a
    singular/plural slip is found; an unrelated key is not "corrected" into a known one.
    """
    lowered = key.lower()
    candidates = list(dict.fromkeys([*known, *(p + "*" for p in prefixes)]))
    by_lower = {c.lower(): c for c in candidates}
    if lowered in by_lower and by_lower[lowered] != key:
        return by_lower[lowered]  # only the case differs
    matches = difflib.get_close_matches(lowered, list(by_lower), n=1, cutoff=0.75)
    return by_lower[matches[0]] if matches else None


def is_known_key(key: str, known: Collection[str], prefixes: Iterable[str] = ()) -> bool:
    """``key`` is one of ``known`` or starts with one of the open-ended ``prefixes``."""
    return key in known or any(key.startswith(p) for p in prefixes)


def unknown_key_hint(key: str, known: Iterable[str], prefixes: Iterable[str] = ()) -> str:
    """"unknown config 'num.partition' (did you mean 'num.partitions'?)"."""
    suggestion = closest_key(key, known, prefixes)
    text = f"unknown config {key!r}"
    return f"{text} (did you mean {suggestion!r}?)" if suggestion else text


def suggestion_suffix(key: str, known: Iterable[str], prefixes: Iterable[str] = ()) -> str:
    """" (did you mean 'x'?)" or "", to append to a message of the caller's own wording."""
    suggestion = closest_key(key, known, prefixes)
    return f" (did you mean {suggestion!r}?)" if suggestion else ""


def warn_unknown_keys(logger: logging.Logger, keys: Iterable[str], known: Collection[str], *,
                      prefixes: Iterable[str] = (), kind: str, source: str | None = None,
                      kafka_line: bool = False) -> list[str]:
    """Log one warning per unknown key of ``keys`` (once per process and ``kind``); returns the
    unknown keys, warned now or before.

    ``kind`` names the configuration ("broker", "connect-worker"...); ``source`` where the key
    came from (a file name, ``--override``). With ``kafka_line`` the warning starts with Kafka's
    own sentence ("The configuration 'x' was supplied but isn't a known config."), so a log
    search that works on Kafka works here too.
    """
    prefixes = tuple(prefixes)
    unknown = [k for k in keys if not is_known_key(k, known, prefixes)]
    for key in unknown:
        with _warned_lock:
            if (kind, key) in _warned:
                continue
            _warned.add((kind, key))
        where = f" in {source}" if source else ""
        if kafka_line:
            logger.warning("The configuration '%s' was supplied but isn't a known config.%s%s",
                           key, suggestion_suffix(key, known, prefixes), where)
        else:
            logger.warning("%s%s", unknown_key_hint(key, known, prefixes), where)
    return unknown


def forget_warnings() -> None:
    """Warn again about keys already warned about (for a test that checks the warning itself)."""
    with _warned_lock:
        _warned.clear()


# -- bad values ---------------------------------------------------------------------------------

def _bound(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def expected_text(error_type: str, ctx: Mapping[str, Any] | None, msg: str) -> str:
    """What a value should have been, in words, for one pydantic error (its ``type``/``ctx``)."""
    ctx = ctx or {}
    simple = {
        "int_parsing": "an integer", "int_type": "an integer", "int_from_float": "an integer",
        "int_parsing_size": "an integer", "bool_parsing": "true or false", "bool_type": "true or false",
        "float_parsing": "a number", "float_type": "a number", "string_type": "a string",
        "missing": "a value (the key is required)", "dict_type": "a mapping of keys to values",
    }
    if error_type in simple:
        return simple[error_type]
    if error_type == "greater_than_equal":
        return f"a value of at least {_bound(ctx.get('ge'))}"
    if error_type == "greater_than":
        return f"a value greater than {_bound(ctx.get('gt'))}"
    if error_type == "less_than_equal":
        return f"a value of at most {_bound(ctx.get('le'))}"
    if error_type == "less_than":
        return f"a value less than {_bound(ctx.get('lt'))}"
    if error_type in ("literal_error", "enum"):
        return f"one of {ctx.get('expected', '')}".replace("'", "")
    if error_type == "string_too_short":
        return "a non-empty string" if ctx.get("min_length") == 1 else f"at least {ctx.get('min_length')} characters"
    if error_type == "string_pattern_mismatch":
        return f"a string matching {ctx.get('pattern')}"
    if error_type in ("value_error", "assertion_error"):
        # Our own validators' messages, without pydantic's "Value error, " lead-in.
        return str(ctx.get("error", msg.removeprefix("Value error, ")))
    return msg[:1].lower() + msg[1:]


def value_line(key: str, value: Any, expected: str, source: str | None = None, *, reason: bool = False) -> str:
    """"invalid value 'abc' for num.partitions: expected an integer (in server.properties)";
    with ``reason`` the text is a validator's own sentence, not what was expected."""
    where = f" (in {source})" if source else ""
    return f"invalid value {value!r} for {key}: {'' if reason else 'expected '}{expected}{where}"


def value_errors(exc: ValidationError, model: type[BaseModel],
                 source_of: Callable[[str], str | None] | None = None) -> list[tuple[str, Any, str, str]]:
    """(key, value, expected, line) for each key ``exc`` complains about, one per key, keys
    named by their alias (Kafka's property name); ``source_of(key)`` names the file or flag it
    came from (None: not said)."""
    out: list[tuple[str, Any, str, str]] = []
    seen: set[str] = set()
    for err in exc.errors():
        loc = err["loc"]
        field_name = str(loc[0]) if loc else ""
        field = model.model_fields.get(field_name)
        key = (field.alias if field is not None and field.alias else None) or ".".join(str(p) for p in loc)
        if key in seen:
            continue  # a union's every branch failing is one mistake, not several
        seen.add(key)
        expected = expected_text(err["type"], err.get("ctx"), err["msg"])
        value = err.get("input")
        line = value_line(key, value, expected, source_of(key) if source_of else None,
                          reason=err["type"] in ("value_error", "assertion_error"))
        out.append((key, value, expected, line))
    return out
