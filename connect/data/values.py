"""Kafka's ``Values``: parse strings into typed values, convert between types, infer schemas.

:func:`parse_string` infers the type of a string as Kafka's ``Values.parseString`` does (header
values and ``InsertField``/``Cast`` inputs): ``null``, booleans, numbers (the smallest integer
type holding the exact value, else FLOAT32/FLOAT64, else a Decimal), ISO-8601 dates/times/timestamps (Kafka's patterns ``yyyy-MM-dd``,
``HH:mm:ss.SSS'Z'`` and ``yyyy-MM-dd'T'HH:mm:ss.SSS'Z'``), ``[..]`` arrays and ``{k:v}`` maps;
anything else stays a string. Container elements get a common schema with numbers widened as in
Kafka; when there is none (mixed or empty containers) the schema is ``None`` (schemaless),
where Kafka would use an array/map schema with null element schemas. The ``convert_to_*`` functions follow Kafka's rules: numbers are
narrowed like Java casts (wrapping), strings are parsed, booleans count as 1/0.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal as _decimal
import math
import re
from collections.abc import Mapping
from dataclasses import replace as dc_replace
from typing import Any

from strom.connect.data.logical import EPOCH, Date, Decimal, Time, Timestamp
from strom.connect.data.schema import INT_RANGES, Schema, SchemaAndValue, SchemaBuilder, Type
from strom.connect.data.struct import Struct
from strom.connect.exceptions import DataException

# A number as Java's BigDecimal reads one, starting with a digit or a sign (as Kafka requires).
_NUMBER_RE = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")
_FLOAT32_MAX = 3.4028234663852886e38
_DATE_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\Z")
_TIME_RE = re.compile(r"(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z\Z")
_TIMESTAMP_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z\Z")

_INT_ORDER = (Type.INT8, Type.INT16, Type.INT32, Type.INT64)
_INT_SCHEMAS = {Type.INT8: Schema.INT8_SCHEMA, Type.INT16: Schema.INT16_SCHEMA,
                Type.INT32: Schema.INT32_SCHEMA, Type.INT64: Schema.INT64_SCHEMA}


# ---------------------------------------------------------------------------------------------
# parse_string
# ---------------------------------------------------------------------------------------------

def parse_string(value: str | None) -> SchemaAndValue:
    """The typed value a string denotes, with its inferred schema (see the module doc)."""
    if value is None:
        return SchemaAndValue.NULL
    if value == "":
        return SchemaAndValue(Schema.STRING_SCHEMA, value)
    parsed = _parse_token(value.strip(), top=True)
    if parsed is None:
        return SchemaAndValue(Schema.STRING_SCHEMA, value)
    return parsed


def _parse_token(text: str, top: bool) -> SchemaAndValue | None:
    """Parse one token; ``None`` when it is not a typed literal (then it is a plain string)."""
    if text == "null":
        return SchemaAndValue.NULL
    low = text.lower()
    if low in ("true", "false"):
        return SchemaAndValue(Schema.BOOLEAN_SCHEMA, low == "true")
    number = _parse_number(text)
    if number is not None:
        return number
    m = _TIMESTAMP_RE.match(text)
    if m:
        y, mo, d, h, mi, s, ms = (int(g) for g in m.groups())
        try:
            ts = _dt.datetime(y, mo, d, h, mi, s, ms * 1000, tzinfo=_dt.UTC)
        except ValueError:
            return None
        return SchemaAndValue(Timestamp.SCHEMA, ts)
    m = _DATE_RE.match(text)
    if m:
        try:
            return SchemaAndValue(Date.SCHEMA, _dt.date(*(int(g) for g in m.groups())))
        except ValueError:
            return None
    m = _TIME_RE.match(text)
    if m:
        h, mi, s, ms = (int(g) for g in m.groups())
        try:
            return SchemaAndValue(Time.SCHEMA, _dt.time(h, mi, s, ms * 1000))
        except ValueError:
            return None
    if text.startswith("[") and text.endswith("]"):
        return _parse_array(text[1:-1])
    if text.startswith("{") and text.endswith("}"):
        return _parse_map(text[1:-1])
    if not top and len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        return SchemaAndValue(Schema.STRING_SCHEMA, _unquote(text))
    return None


def _parse_number(text: str) -> SchemaAndValue | None:
    """Kafka's number rule: the smallest integer type holding the exact value (so ``1.0`` and
    ``1e2`` are integers), else FLOAT32 when the value has a fraction and fits a float, else
    FLOAT64, else a Decimal."""
    if not text or not (text[0].isdigit() or text[0] in "+-") or not _NUMBER_RE.match(text):
        return None
    d = _decimal.Decimal(text)
    if d.adjusted() < 20 and d == d.to_integral_value():  # adjusted(): no huge ints built
        n = int(d)
        for t in _INT_ORDER:
            lo, hi = INT_RANGES[t]
            if lo <= n <= hi:
                return SchemaAndValue(_INT_SCHEMAS[t], n)
    exponent = d.as_tuple().exponent
    scale = -exponent if isinstance(exponent, int) else 0
    f = float(d)
    if scale != 0 and math.isfinite(f):
        # A Python float keeps the literal's double value under either schema; only the schema
        # says FLOAT32 (Kafka's value would be a Java float).
        return SchemaAndValue(Schema.FLOAT32_SCHEMA if abs(f) <= _FLOAT32_MAX else Schema.FLOAT64_SCHEMA, f)
    return SchemaAndValue(Decimal.schema(scale), d)


def _unquote(text: str) -> str:
    out: list[str] = []
    i = 1
    while i < len(text) - 1:
        c = text[i]
        if c == "\\" and i + 1 < len(text) - 1:
            i += 1
            c = text[i]
        out.append(c)
        i += 1
    return "".join(out)


def _split_top(body: str, sep: str) -> list[str] | None:
    """Split at ``sep`` outside quotes and brackets; ``None`` if brackets/quotes are unbalanced."""
    parts: list[str] = []
    depth = 0
    in_quote = False
    start = 0
    i = 0
    while i < len(body):
        c = body[i]
        if in_quote:
            if c == "\\":
                i += 1
            elif c == '"':
                in_quote = False
        elif c == '"':
            in_quote = True
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth < 0:
                return None
        elif c == sep and depth == 0:
            parts.append(body[start:i])
            start = i + 1
        i += 1
    if depth or in_quote:
        return None
    parts.append(body[start:])
    return parts


def _element(text: str) -> SchemaAndValue | None:
    text = text.strip()
    if not text:
        return None
    parsed = _parse_token(text, top=False)
    if parsed is None:
        # Unquoted words inside containers are strings (Kafka's parser reads them so too),
        # but not text with structural characters.
        if any(c in text for c in '[]{}":,'):
            return None
        return SchemaAndValue(Schema.STRING_SCHEMA, text)
    return parsed


_NUMERIC_ORDER = (Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.FLOAT32, Type.FLOAT64)


def _common_schema(schemas: list[Schema | None]) -> Schema | None:
    """The schema shared by all non-null elements, widening numbers as Kafka does (INT8 and
    INT32 -> INT32, ints and floats -> the float type); made optional if a null occurs; ``None``
    when the elements have no common schema."""
    non_null = [s for s in schemas if s is not None]
    if not non_null:
        return None
    common = non_null[0]
    for s in non_null[1:]:
        if s == common:
            continue
        if (common.type in _NUMERIC_ORDER and s.type in _NUMERIC_ORDER and common.name is None
                and s.name is None):
            if _NUMERIC_ORDER.index(s.type) > _NUMERIC_ORDER.index(common.type):
                common = s
            continue
        return None
    if len(non_null) != len(schemas) and not common.optional:
        return dc_replace(common, optional=True)
    return common


def _align(schema: Schema | None, values: list[Any]) -> list[Any]:
    """Values converted to a widened element type (ints in a float array become floats)."""
    if schema is None or schema.type not in (Type.FLOAT32, Type.FLOAT64):
        return values
    return [None if v is None else float(v) for v in values]


def _parse_array(body: str) -> SchemaAndValue | None:
    if not body.strip():
        return SchemaAndValue(SchemaBuilder.array(Schema.OPTIONAL_STRING_SCHEMA).build(), [])
    parts = _split_top(body, ",")
    if parts is None:
        return None
    items: list[SchemaAndValue] = []
    for p in parts:
        e = _element(p)
        if e is None:
            return None
        items.append(e)
    element_schema = _common_schema([i.schema for i in items])
    schema = SchemaBuilder.array(element_schema).build() if element_schema is not None else None
    return SchemaAndValue(schema, _align(element_schema, [i.value for i in items]))


def _parse_map(body: str) -> SchemaAndValue | None:
    if not body.strip():
        return SchemaAndValue(SchemaBuilder.map(Schema.OPTIONAL_STRING_SCHEMA,
                                                Schema.OPTIONAL_STRING_SCHEMA).build(), {})
    parts = _split_top(body, ",")
    if parts is None:
        return None
    keys: list[SchemaAndValue] = []
    vals: list[SchemaAndValue] = []
    for p in parts:
        kv = _split_top(p, ":")
        if kv is None or len(kv) != 2:
            return None
        k, v = _element(kv[0]), _element(kv[1])
        if k is None or v is None or k.value is None:
            return None
        keys.append(k)
        vals.append(v)
    ks = _common_schema([k.schema for k in keys])
    vs = _common_schema([v.schema for v in vals])
    schema = SchemaBuilder.map(ks, vs).build() if ks is not None and vs is not None else None
    try:
        return SchemaAndValue(schema, dict(zip(_align(ks, [k.value for k in keys]),
                                               _align(vs, [v.value for v in vals]), strict=True)))
    except TypeError:  # an unhashable key (a list or map): not a map literal
        return None


# ---------------------------------------------------------------------------------------------
# infer_schema / to string
# ---------------------------------------------------------------------------------------------

def infer_schema(value: Any) -> Schema | None:
    """The schema of a Python value (``None`` when it cannot be inferred, e.g. mixed lists)."""
    if isinstance(value, bool):
        return Schema.BOOLEAN_SCHEMA
    if isinstance(value, int):
        return Schema.INT64_SCHEMA
    if isinstance(value, float):
        return Schema.FLOAT64_SCHEMA
    if isinstance(value, str):
        return Schema.STRING_SCHEMA
    if isinstance(value, bytes | bytearray | memoryview):
        return Schema.BYTES_SCHEMA
    if isinstance(value, Struct):
        return value.schema
    if isinstance(value, _decimal.Decimal):
        exp = value.as_tuple().exponent
        return Decimal.schema(-exp if isinstance(exp, int) and exp < 0 else 0)
    if isinstance(value, _dt.datetime):
        return Timestamp.SCHEMA
    if isinstance(value, _dt.date):
        return Date.SCHEMA
    if isinstance(value, _dt.time):
        return Time.SCHEMA
    if isinstance(value, list | tuple):
        if not value:
            return None
        es = _common_schema([infer_schema(v) for v in value])
        return SchemaBuilder.array(es).build() if es is not None else None
    if isinstance(value, Mapping):
        if not value:
            return None
        ks = _common_schema([infer_schema(k) for k in value])
        vs = _common_schema([infer_schema(v) for v in value.values()])
        return SchemaBuilder.map(ks, vs).build() if ks is not None and vs is not None else None
    return None


def _fmt_time(t: _dt.time) -> str:
    return f"{t.hour:02d}:{t.minute:02d}:{t.second:02d}.{t.microsecond // 1000:03d}Z"


def _fmt_timestamp(ts: _dt.datetime) -> str:
    if ts.tzinfo is not None:
        ts = ts.astimezone(_dt.UTC)
    return f"{ts.date().isoformat()}T{_fmt_time(ts.time())}"


def _to_str(value: Any, embedded: bool) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        if embedded:
            return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, _dt.datetime):
        return _fmt_timestamp(value)
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, _dt.time):
        return _fmt_time(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(_to_str(v, True) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{_to_str(k, True)}:{_to_str(v, True)}" for k, v in value.items()) + "}"
    if isinstance(value, Struct):
        return "Struct{" + ",".join(f"{f.name}={_to_str(value.get(f), True)}"
                                    for f in value.schema.fields or ()) + "}"
    return str(value)


# ---------------------------------------------------------------------------------------------
# convert_to_*
# ---------------------------------------------------------------------------------------------

def _wrap(n: int, t: Type) -> int:
    """Narrow like a Java cast: keep the low bits, two's complement."""
    lo, hi = INT_RANGES[t]
    span = hi - lo + 1
    return (n - lo) % span + lo


def _as_number(schema: Schema | None, value: Any, target: str) -> int | float | _decimal.Decimal:
    if isinstance(value, bool):
        return 1 if value else 0
    if isinstance(value, int | float | _decimal.Decimal):
        return value
    if isinstance(value, str):
        parsed = parse_string(value)
        if isinstance(parsed.value, int | float | _decimal.Decimal) and not isinstance(parsed.value, bool):
            return parsed.value
        raise DataException(f"Unable to convert {value!r} to {target}")
    if isinstance(value, _dt.datetime):
        return _ms_since_epoch(value)
    if isinstance(value, _dt.date):
        return (value - _dt.date(1970, 1, 1)).days
    if isinstance(value, _dt.time):
        return Time.from_logical(Time.SCHEMA, value)
    raise DataException(f"Unable to convert {value!r} ({type(value).__name__}) to {target}")


def _ms_since_epoch(ts: _dt.datetime) -> int:
    return Timestamp.from_logical(Timestamp.SCHEMA, ts)


def _to_int(schema: Schema | None, value: Any, t: Type) -> int | None:
    if value is None:
        return None
    n = _as_number(schema, value, t.name)
    return _wrap(int(n), t)


def convert_to_boolean(schema: Schema | None, value: Any) -> bool | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        parsed = parse_string(value)
        if isinstance(parsed.value, bool):
            return parsed.value
        raise DataException(f"Unable to convert {value!r} to BOOLEAN")
    if isinstance(value, int | float):
        return value != 0
    raise DataException(f"Unable to convert {value!r} ({type(value).__name__}) to BOOLEAN")


def convert_to_byte(schema: Schema | None, value: Any) -> int | None:
    return _to_int(schema, value, Type.INT8)


def convert_to_short(schema: Schema | None, value: Any) -> int | None:
    return _to_int(schema, value, Type.INT16)


def convert_to_integer(schema: Schema | None, value: Any) -> int | None:
    return _to_int(schema, value, Type.INT32)


def convert_to_long(schema: Schema | None, value: Any) -> int | None:
    return _to_int(schema, value, Type.INT64)


def convert_to_float(schema: Schema | None, value: Any) -> float | None:
    if value is None:
        return None
    return float(_as_number(schema, value, "FLOAT32"))


def convert_to_double(schema: Schema | None, value: Any) -> float | None:
    if value is None:
        return None
    return float(_as_number(schema, value, "FLOAT64"))


def convert_to_string(schema: Schema | None, value: Any) -> str | None:
    """Kafka's string form: strings inside containers quoted, bytes base64, ISO-8601 times."""
    if value is None:
        return None
    return _to_str(value, False)


def convert_to_decimal(schema: Schema | None, value: Any, scale: int) -> _decimal.Decimal | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray) and schema is not None and schema.name == Decimal.LOGICAL_NAME:
        value = Decimal.to_logical(schema, bytes(value))
    n = _as_number(schema, value, "Decimal")
    d = n if isinstance(n, _decimal.Decimal) else _decimal.Decimal(repr(n) if isinstance(n, float) else n)
    with _decimal.localcontext() as ctx:
        ctx.prec = max(28, len(d.as_tuple().digits) + scale + 1)
        return d.quantize(_decimal.Decimal(1).scaleb(-scale), rounding=_decimal.ROUND_HALF_UP)


def convert_to_list(schema: Schema | None, value: Any) -> list[Any] | None:
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, str):
        parsed = parse_string(value)
        if isinstance(parsed.value, list):
            return parsed.value
    raise DataException(f"Unable to convert {value!r} to ARRAY")


def convert_to_map(schema: Schema | None, value: Any) -> dict[Any, Any] | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        parsed = parse_string(value)
        if isinstance(parsed.value, dict):
            return parsed.value
    raise DataException(f"Unable to convert {value!r} to MAP")


def convert_to_struct(schema: Schema | None, value: Any) -> Struct | None:
    if value is None:
        return None
    if isinstance(value, Struct):
        return value
    raise DataException(f"Unable to convert {value!r} to STRUCT")


def convert_to_date(schema: Schema | None, value: Any) -> _dt.date | None:
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        return value.astimezone(_dt.UTC).date() if value.tzinfo else value.date()
    if isinstance(value, _dt.date):
        return value
    if isinstance(value, str):
        parsed = parse_string(value)
        if isinstance(parsed.value, _dt.date | _dt.datetime):
            return convert_to_date(parsed.schema, parsed.value)
        raise DataException(f"Unable to convert {value!r} to Date")
    if isinstance(value, int) and not isinstance(value, bool):
        # An INT32 with the Date schema is days; any other number is epoch milliseconds.
        if schema is not None and schema.name == Date.LOGICAL_NAME:
            return Date.to_logical(schema, value)
        return (EPOCH + _dt.timedelta(milliseconds=value)).date()
    raise DataException(f"Unable to convert {value!r} to Date")


def convert_to_time(schema: Schema | None, value: Any) -> _dt.time | None:
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        t = value.astimezone(_dt.UTC) if value.tzinfo else value
        return t.time().replace(tzinfo=None)
    if isinstance(value, _dt.time):
        return value
    if isinstance(value, str):
        parsed = parse_string(value)
        if isinstance(parsed.value, _dt.time | _dt.datetime):
            return convert_to_time(parsed.schema, parsed.value)
        raise DataException(f"Unable to convert {value!r} to Time")
    if isinstance(value, int) and not isinstance(value, bool):
        return Time.to_logical(Time.SCHEMA, value % 86_400_000)
    raise DataException(f"Unable to convert {value!r} to Time")


def convert_to_timestamp(schema: Schema | None, value: Any) -> _dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=_dt.UTC)
    if isinstance(value, _dt.date):
        return _dt.datetime(value.year, value.month, value.day, tzinfo=_dt.UTC)
    if isinstance(value, str):
        parsed = parse_string(value)
        if isinstance(parsed.value, _dt.date):
            return convert_to_timestamp(parsed.schema, parsed.value)
        raise DataException(f"Unable to convert {value!r} to Timestamp")
    if isinstance(value, int) and not isinstance(value, bool):
        if schema is not None and schema.name == Date.LOGICAL_NAME:
            return convert_to_timestamp(None, Date.to_logical(schema, value))
        return Timestamp.to_logical(Timestamp.SCHEMA, value)
    raise DataException(f"Unable to convert {value!r} to Timestamp")


def convert_to(schema: Schema, value: Any) -> Any:
    """``value`` converted to the type of ``schema`` (logical types by name)."""
    if value is None:
        return None
    name = schema.name
    if name == Decimal.LOGICAL_NAME:
        return convert_to_decimal(None, value, Decimal.scale(schema))
    if name == Date.LOGICAL_NAME:
        return convert_to_date(None, value)
    if name == Time.LOGICAL_NAME:
        return convert_to_time(None, value)
    if name == Timestamp.LOGICAL_NAME:
        return convert_to_timestamp(None, value)
    t = schema.type
    if t in INT_RANGES:
        return _to_int(None, value, t)
    if t in (Type.FLOAT32, Type.FLOAT64):
        return convert_to_double(None, value)
    if t is Type.BOOLEAN:
        return convert_to_boolean(None, value)
    if t is Type.STRING:
        return convert_to_string(None, value)
    if t is Type.BYTES:
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        if isinstance(value, str):
            return value.encode("utf-8")
        raise DataException(f"Unable to convert {value!r} to BYTES")
    if t is Type.ARRAY:
        return convert_to_list(None, value)
    if t is Type.MAP:
        return convert_to_map(None, value)
    return convert_to_struct(None, value)


__all__ = [
    "convert_to", "convert_to_boolean", "convert_to_byte", "convert_to_date", "convert_to_decimal",
    "convert_to_double", "convert_to_float", "convert_to_integer", "convert_to_list", "convert_to_long",
    "convert_to_map", "convert_to_short", "convert_to_string", "convert_to_struct", "convert_to_time",
    "convert_to_timestamp", "infer_schema", "parse_string",
]
