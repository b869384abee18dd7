"""Java's text forms of numbers, so converters write the same bytes as Kafka Connect.

Kafka Connect's JsonConverter writes doubles with ``Double.toString`` and floats with
``Float.toString`` (through Jackson); Python's ``repr`` differs (``1e+20`` against ``1.0E20``,
and float32 values print with double precision). These helpers produce Java's forms.
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal

_F32 = struct.Struct(">f")


def to_float32(x: float) -> float:
    """Round a Python float to the nearest float32 (Java's ``(float)`` cast)."""
    try:
        return float(_F32.unpack(_F32.pack(x))[0])
    except OverflowError:
        return math.copysign(math.inf, x)


def _shortest_float32(x: float) -> str:
    # The shortest decimal that reads back as the same float32: Java's Float.toString digits.
    f = to_float32(x)
    for precision in range(1, 10):
        text = f"{f:.{precision}g}"
        if to_float32(float(text)) == f:
            return text
    return repr(f)


def _java_layout(shortest: str) -> str:
    # Re-lay a shortest decimal the way Double.toString/Float.toString do: plain notation with at
    # least one fractional digit for 1e-3 <= |x| < 1e7, else d.dddE[-]n.
    sign, digits, exp = Decimal(shortest).as_tuple()
    assert isinstance(exp, int)
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    # value = 0.ds * 10**point  (point = position of the decimal point relative to ds)
    point = len(digits) + exp
    if ds == "0":
        return ("-" if sign else "") + "0.0"
    # Normalised: point relative to the stripped digits stays the same.
    sci_exp = point - 1
    prefix = "-" if sign else ""
    if -3 <= sci_exp < 7:
        if point <= 0:
            return prefix + "0." + "0" * (-point) + ds
        if point >= len(ds):
            return prefix + ds + "0" * (point - len(ds)) + ".0"
        return prefix + ds[:point] + "." + ds[point:]
    mantissa = ds[0] + "." + (ds[1:] or "0")
    return f"{prefix}{mantissa}E{sci_exp}"


def java_double_str(x: float) -> str:
    """``Double.toString(x)``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return _java_layout(repr(float(x)))


def java_float_str(x: float) -> str:
    """``Float.toString((float) x)``."""
    f = to_float32(x)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    return _java_layout(_shortest_float32(f))


def python_repr_matches_java(x: float) -> bool:
    """Whether ``repr(x)`` already equals ``Double.toString(x)`` (the common, fast case)."""
    a = abs(x)
    return (a == 0.0 or 1e-3 <= a < 1e7) and math.isfinite(x)
