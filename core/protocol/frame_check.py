"""Check a request frame against its schema before kio decodes it: no length is trusted.

kio's native reader reserves room for a compact array's announced element count before it
reads one element, so a 20-byte request announcing 4 billion elements aborts the process
(SIGABRT, not an exception). It also hands ``None`` to handlers for a null in a non-nullable
array, and rejects unknown tagged fields, which Kafka skips (KIP-482). kio 0.6.5 is the latest
release and its reader is compiled, so the broker walks every frame first, along a plan built
once per (api key, version) from kio's own generated request dataclasses (the schemas kio
reads with):

- every array, string and bytes length, compact or classic, in the body, nested structs and
  tagged fields, is checked against the bytes left before anything is read past it (an array's
  count against the smallest size its elements can have, so no reservation can exceed the frame);
- null is refused where the schema does not allow it; negative lengths other than -1 (null),
  varints longer than five bytes and lengths past 2^31-1 are refused;
- strings longer than 0x7fff bytes are refused, as Kafka's generated readers do;
- a known tagged field must take exactly the size it announces (kio reads the value and ignores
  the size, so a lying size would make it read the rest of the frame differently);
- unknown tagged fields are cut out of the frame (their section's count and any enclosing tagged
  field's size are rewritten), so kio reads what Kafka would have read.

A frame that fails raises :class:`MalformedRequestError` naming the API, version, field and
what was wrong; the socket layer closes that connection, as Kafka does. Messages use the
wording of Kafka's generated readers where they have one.

The walk is on the path of every Produce and Fetch, so each plan is Python source generated
from the schema and compiled once: nested loops over arrays with the length checks inline,
consecutive fixed-size fields checked as one, no call per field.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.index import load_request_schema

# kio's own field classification, so the walk reads each field exactly as kio's reader will.
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from strom.core.protocol.exceptions import MalformedRequestError
from strom.core.protocol.varint import encode_uvarint

__all__ = ["check_request", "plan_source", "skip_tagged_fields"]

# A replacement of frame[start:end] by new bytes; edits never overlap.
Edit = tuple[int, int, bytes]
# (frame, position, end of the region being read, edits) -> position after the item.
Step = Callable[[bytes | memoryview, int, int, list[Edit]], int]

_MAX_LENGTH = 0x7FFFFFFF  # kio's and Java's bound for any length or count
_MAX_STRING = 0x7FFF  # Kafka's generated readers refuse longer strings, compact or not

_FIXED_SIZES = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4, "int64": 8, "uint64": 8, "float64": 8,
    "timedelta_i64": 8, "datetime_i64": 8, "uuid": 16,
}


class _Bad(Exception):
    """A check failed at ``path``; converted to MalformedRequestError with the API named."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(path, detail)
        self.path = path
        self.detail = detail


# -- helpers the generated code calls (the rare paths: long varints and errors) ---------------

def _uvarint(buf: bytes | memoryview, pos: int, end: int, path: str) -> tuple[int, int]:
    """An unsigned varint of at most five bytes (Kafka's ``readUnsignedVarint``)."""
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise _Bad(path, f"a varint of {path or 'the frame'} runs past the end of the frame")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise _Bad(path, "Varint is too long, the most significant bit in the 5th byte is set")


def _compact_length(buf: bytes | memoryview, pos: int, end: int, path: str) -> tuple[int, int]:
    """A compact length of more than one byte: the varint minus one (-1 is null)."""
    raw, pos = _uvarint(buf, pos, end, path)
    if raw > _MAX_LENGTH:
        raise _Bad(path, f"the length varint of {path} is {raw}, past 2^31-1")
    return raw - 1, pos


def _short(path: str, size: int, pos: int, end: int) -> _Bad:
    return _Bad(path, f"{path} needs {size} bytes, only {max(end - pos + size, 0)} left")


def _bad_string(path: str, kind: str, n: int, pos: int, end: int, limit: int) -> _Bad:
    if n == -1:
        return _Bad(path, f"non-nullable field {path} was serialized as null")
    if n < 0:
        return _Bad(path, f"{kind} field {path} had negative length {n}")
    if n > limit:
        return _Bad(path, f"{kind} field {path} had invalid length {n}")
    return _Bad(path, f"{kind} field {path} of length {n} runs past the end of the frame ({end - pos} bytes left)")


def _bad_array(path: str, n: int, pos: int, end: int) -> _Bad:
    if n == -1:
        return _Bad(path, f"non-nullable field {path} was serialized as null")
    if n < 0:
        return _Bad(path, f"array field {path} had negative length {n}")
    # Kafka's wording; strom's bound is the smallest size the elements can have.
    return _Bad(path, f"Tried to allocate a collection of size {n}, but there are only {end - pos} bytes "
                      f"remaining (array field {path}).")


def _bad_marker(path: str, marker: int) -> _Bad:
    # kio reads any marker but -1 as present, Kafka any negative one as null: refuse the others.
    return _Bad(path, f"struct field {path} has null marker {marker}, expected -1 or 1")


def _tagged_fields(known: dict[int, tuple[str, Step]], path: str) -> Step:
    """A non-empty tagged-field section: known tags are checked (and must fill their size
    exactly); unknown tags are cut out of the frame, as Kafka skips them."""
    where = f"tagged fields of {path}" if path else "tagged fields"

    def check(buf: bytes | memoryview, pos: int, end: int, edits: list[Edit]) -> int:
        count_at = pos
        count, pos = _uvarint(buf, pos, end, where)
        if count * 2 > end - pos:  # a tag and a size take a byte each at least
            raise _Bad(where, f"Tried to allocate a collection of size {count}, but there are only "
                              f"{end - pos} bytes remaining ({where}).")
        count_end = pos
        dropped = 0
        for _ in range(count):
            tag_at = pos
            tag, pos = _uvarint(buf, pos, end, where)
            size_at = pos
            size, pos = _uvarint(buf, pos, end, where)
            value_end = pos + size
            if value_end > end:
                raise _Bad(where, f"tagged field {tag} of {where} has size {size}, past the end of the "
                                  f"frame ({end - pos} bytes left)")
            field = known.get(tag)
            if field is None:
                edits.append((tag_at, value_end, b""))
                dropped += 1
            else:
                name, step = field
                first_edit = len(edits)
                if step(buf, pos, value_end, edits) != value_end:
                    raise _Bad(name, f"tagged field {name} (tag {tag}) does not fill its {size} bytes")
                if len(edits) > first_edit:  # unknown tags were cut inside it: its size shrinks
                    delta = sum(len(new) - (e - s) for s, e, new in edits[first_edit:])
                    edits.append((size_at, pos, encode_uvarint(size + delta)))
            pos = value_end
        if dropped:
            edits.append((count_at, count_end, encode_uvarint(count - dropped)))
        return pos

    return check


# -- the generator ------------------------------------------------------------------------------

class _Gen:
    """Python source for one walk; constants (paths, tag tables) go to its namespace."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.ns: dict[str, Any] = {
            "_Bad": _Bad, "_uvarint": _uvarint, "_compact_length": _compact_length, "_short": _short,
            "_bad_string": _bad_string, "_bad_array": _bad_array, "_bad_marker": _bad_marker,
            "_i16": struct.Struct(">h").unpack_from, "_i32": struct.Struct(">i").unpack_from,
        }
        self._names = 0

    def const(self, value: Any) -> str:
        self._names += 1
        name = f"_k{self._names}"
        self.ns[name] = value
        return name

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def compile(self, name: str) -> Step:
        source = "\n".join(self.lines) + "\n"
        code = compile(source, f"<frame check {name}>", "exec")
        exec(code, self.ns)
        step: Step = self.ns["check"]
        step.__doc__ = source  # plan_source() shows it
        return step


def _min_size(cls: type[Any]) -> int:
    """The fewest bytes one struct of ``cls`` can take: the bound an array's count is held to."""
    flexible = bool(cls.__flexible__)
    total = 1 if flexible else 0  # the tagged-field count
    for field in dataclasses.fields(cls):
        if get_field_tag(field) is not None:
            continue
        fc = classify_field(field)
        kafka_type = field.metadata.get("kafka_type", "")
        if isinstance(fc, PrimitiveField):
            size = _FIXED_SIZES.get(kafka_type)
            if size is not None:
                total += size
            elif flexible:
                total += 1
            else:
                total += 2 if kafka_type == "string" else 4
        elif isinstance(fc, EntityField):
            total += 1 if is_optional(field) else _min_size(fc.type_)
        else:
            total += 1 if flexible else 4
    return total


def _emit_count(g: _Gen, ind: int, flexible: bool, path: str, width: int = 4) -> None:
    """Read a length or count into ``n`` (-1 is null)."""
    p = g.const(path)
    if flexible:
        g.emit(ind, "if pos < end and (n := buf[pos]) < 0x80:")
        g.emit(ind + 1, "n -= 1")
        g.emit(ind + 1, "pos += 1")
        g.emit(ind, "else:")
        g.emit(ind + 1, f"n, pos = _compact_length(buf, pos, end, {p})")
        return
    g.emit(ind, f"if pos + {width} > end:")
    g.emit(ind + 1, f"raise _short({p}, {width}, pos + {width}, end)")
    g.emit(ind, f"n = {'_i32' if width == 4 else '_i16'}(buf, pos)[0]")
    g.emit(ind, f"pos += {width}")


def _emit_string(g: _Gen, ind: int, flexible: bool, nullable: bool, is_bytes: bool, path: str) -> None:
    kind = "bytes" if is_bytes else "string"
    limit = _MAX_LENGTH if is_bytes else _MAX_STRING
    _emit_count(g, ind, flexible, path, 4 if is_bytes else 2)
    g.emit(ind, f"if 0 <= n <= {limit} and pos + n <= end:")
    g.emit(ind + 1, "pos += n")
    g.emit(ind, "elif n != -1:" if nullable else "else:")
    g.emit(ind + 1, f"raise _bad_string({g.const(path)}, {kind!r}, n, pos, end, {limit})")


def _emit_array_head(g: _Gen, ind: int, flexible: bool, nullable: bool, element_size: int, path: str) -> int:
    """Read and check an array's count; returns the indent at which the elements are walked."""
    _emit_count(g, ind, flexible, path)
    g.emit(ind, f"if n < 0 or n * {element_size} > end - pos:")
    if nullable:
        g.emit(ind + 1, "if n != -1:")
        g.emit(ind + 2, f"raise _bad_array({g.const(path)}, n, pos, end)")
    else:
        g.emit(ind + 1, f"raise _bad_array({g.const(path)}, n, pos, end)")
    g.emit(ind, "else:")
    return ind + 1


def _emit_field(g: _Gen, ind: int, field: dataclasses.Field[Any], flexible: bool, path: str,
                tagged: bool) -> None:
    # kio reads tagged values with its non-nullable readers (null is the default, never sent).
    nullable = False if tagged else is_optional(field)
    fc = classify_field(field)
    kafka_type = field.metadata.get("kafka_type", "")
    if isinstance(fc, PrimitiveField):
        size = _FIXED_SIZES.get(kafka_type)
        if size is not None:
            g.emit(ind, f"pos += {size}")
            g.emit(ind, "if pos > end:")
            g.emit(ind + 1, f"raise _short({g.const(path)}, {size}, pos, end)")
        elif kafka_type in ("string", "bytes", "records"):
            _emit_string(g, ind, flexible, nullable, kafka_type != "string", path)
        else:
            raise TypeError(f"no frame check for {kafka_type!r} field {path}")
    elif isinstance(fc, PrimitiveTupleField):
        size = _FIXED_SIZES.get(kafka_type)
        if size is not None:
            inner = _emit_array_head(g, ind, flexible, nullable, size, path)
            g.emit(inner, f"pos += n * {size}")
        elif kafka_type == "string":
            inner = _emit_array_head(g, ind, flexible, nullable, 1 if flexible else 2, path)
            g.emit(inner, "for _ in range(n):")
            _emit_string(g, inner + 1, flexible, False, False, path + "[]")
        else:
            raise TypeError(f"no frame check for an array of {kafka_type!r} ({path})")
    elif isinstance(fc, EntityTupleField):
        inner = _emit_array_head(g, ind, flexible, nullable, _min_size(fc.type_), path)
        g.emit(inner, "for _ in range(n):")
        _emit_entity(g, inner + 1, fc.type_, path + "[]")
    elif isinstance(fc, EntityField):
        if nullable:
            p = g.const(path)
            g.emit(ind, "if pos >= end:")
            g.emit(ind + 1, f"raise _short({p}, 1, pos + 1, end)")
            g.emit(ind, "if buf[pos] == 0xFF:")
            g.emit(ind + 1, "pos += 1")
            g.emit(ind, "elif buf[pos] != 1:")
            g.emit(ind + 1, f"raise _bad_marker({p}, buf[pos])")
            g.emit(ind, "else:")
            g.emit(ind + 1, "pos += 1")
            _emit_entity(g, ind + 1, fc.type_, path)
        else:
            _emit_entity(g, ind, fc.type_, path)
    else:
        raise TypeError(f"no frame check for field {path}")


def _emit_entity(g: _Gen, ind: int, cls: type[Any], path: str) -> None:
    flexible = bool(cls.__flexible__)
    run = 0  # bytes of consecutive fixed-size fields, checked as one
    run_names: list[str] = []
    known: dict[int, tuple[str, Step]] = {}

    def flush() -> None:
        nonlocal run, run_names
        if run:
            g.emit(ind, f"pos += {run}")
            g.emit(ind, "if pos > end:")
            g.emit(ind + 1, f"raise _short({g.const(', '.join(run_names))}, {run}, pos, end)")
            run, run_names = 0, []

    for field in dataclasses.fields(cls):
        name = f"{path}.{field.name}" if path else field.name
        tag = get_field_tag(field)
        if tag is not None:
            known[int(tag)] = (name, _field_step(field, flexible, name))
            continue
        size = _FIXED_SIZES.get(field.metadata.get("kafka_type", ""))
        if size is not None and isinstance(classify_field(field), PrimitiveField):
            run += size
            run_names.append(name)
            continue
        flush()
        _emit_field(g, ind, field, flexible, name, tagged=False)
    flush()
    if flexible:
        tags = g.const(_tagged_fields(known, path))
        g.emit(ind, "if pos < end and buf[pos] == 0:")  # no tagged fields: the usual case
        g.emit(ind + 1, "pos += 1")
        g.emit(ind, "else:")
        g.emit(ind + 1, f"pos = {tags}(buf, pos, end, edits)")


def _field_step(field: dataclasses.Field[Any], flexible: bool, path: str) -> Step:
    """A tagged field's value as a step of its own."""
    g = _Gen()
    g.emit(0, "def check(buf, pos, end, edits):")
    _emit_field(g, 1, field, flexible, path, tagged=True)
    g.emit(1, "return pos")
    return g.compile(path)


@cache
def _plan(api_key: int, version: int) -> tuple[Step, bool, str]:
    """(body step, flexible, "Name vN") for one request version."""
    cls = load_request_schema(api_key, version)
    label = f"{cls.__name__.removesuffix('Request')} v{version}"
    g = _Gen()
    g.emit(0, "def check(buf, pos, end, edits):")
    _emit_entity(g, 1, cls, "")
    g.emit(1, "return pos")
    return g.compile(label), bool(cls.__flexible__), label


def plan_source(api_key: int, version: int) -> str:
    """The generated walk of one request version (for reading and debugging)."""
    return _plan(api_key, version)[0].__doc__ or ""


_HEADER_TAGS = _tagged_fields({}, "request header")


def skip_tagged_fields(frame: bytes | memoryview, pos: int, what: str) -> int:
    """Skip a tagged-field section none of whose tags strom reads (a request header's)."""
    if pos < len(frame) and frame[pos] == 0:
        return pos + 1
    try:
        return _tagged_fields({}, what)(frame, pos, len(frame), [])
    except _Bad as e:
        raise MalformedRequestError(f"{what}: {e.detail}") from None


def check_request(api_key: int, version: int, frame: bytes | memoryview,
                  body_pos: int) -> tuple[bytes | memoryview, int]:
    """Check a request frame whose header (up to the client id) ends at ``body_pos``.

    Returns the frame kio may read (the same object unless unknown tagged fields were cut out)
    and the position of the body in it (after a flexible header's tagged fields). Raises
    MalformedRequestError.
    """
    step, flexible, label = _plan(api_key, version)
    end = len(frame)
    edits: list[Edit] = []
    try:
        if flexible:
            if body_pos < end and frame[body_pos] == 0:
                body_pos += 1
            else:  # request header v2's tagged fields: strom reads none of them
                body_pos = _HEADER_TAGS(frame, body_pos, end, [])
        step(frame, body_pos, end, edits)
    except _Bad as e:
        where = "" if not e.path or e.path in e.detail else f" (field {e.path})"
        raise MalformedRequestError(f"cannot read {label} request (api key {api_key}): {e.detail}{where}") from None
    if edits:
        return _apply(frame, edits), body_pos
    return frame, body_pos


def _apply(frame: bytes | memoryview, edits: list[Edit]) -> bytes:
    out = bytearray()
    pos = 0
    for start, end, new in sorted(edits):
        out += frame[pos:start]
        out += new
        pos = end
    out += frame[pos:]
    return bytes(out)
