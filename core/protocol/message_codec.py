"""Kafka's schema-driven message codec: one walker for every record family strom keeps on disk.

A message type is a dataclass with a ``SCHEMA`` tuple of :class:`F` field specs transcribed from
Kafka's JSON message definitions; :meth:`Message.encode` / :meth:`Message.decode` walk it, so
versions, nullability and tagged fields follow the JSON exactly. The same walker serves the
KRaft control records (:mod:`strom.core.raft.control_records`), the KRaft metadata records
(:mod:`strom.core.metadata.records`), the ``__consumer_offsets`` records
(:mod:`strom.core.coordinator.group.records`) and the ``__transaction_state`` records
(:mod:`strom.core.coordinator.txn.records`). It lives in the protocol layer, below all of them,
as Kafka's ``Message``/``MessageUtil`` live in ``org.apache.kafka.common.protocol``: the raft
layer encodes its control records with it and knows nothing of metadata record types.

Kafka has two encodings of a message body, chosen per version by the schema's
``flexibleVersions`` (:attr:`Message.FLEXIBLE` is the first flexible version):

* flexible: compact lengths (unsigned varint ``n + 1``, 0 = null) and a tagged-field section
  after every struct;
* non-flexible: ``int16`` string lengths, ``int32`` bytes/array lengths (``-1`` = null) and no
  tagged fields.

Types: the primitives of ``_PRIM``, ``"string"``, ``"bytes"``, ``"uuid"``, ``"[]int32"``,
``"[]uuid"``, ``"[]string"``, a nested :class:`Message` type, or an array of one
(``array=True``). A nullable nested struct carries Kafka's presence marker before its fields.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from operator import attrgetter
from typing import Any, ClassVar, NamedTuple, Self

from strom.core.errors import CorruptMessageError
from strom.core.protocol import varint

ALL = (0, 32767)
NEVER = 32767  # a version no schema reaches: "flexibleVersions": "none"

# ---------------------------------------------------------------------------------------------
# Primitive readers/writers
# ---------------------------------------------------------------------------------------------


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0:
        raise ValueError(f"unsigned varint cannot be negative: {value}")
    varint.write_uvarint(out, value)


class Reader:
    """Cursor over a bytes-like object; every read checks bounds (corrupt input is an error)."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.buf = bytes(buf) if isinstance(buf, memoryview) else buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise CorruptMessageError(f"record truncated: need {n} bytes at {self.pos}")
        data = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return data

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            if self.pos >= self.end:
                raise CorruptMessageError("record truncated inside a varint")
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise CorruptMessageError("unsigned varint is longer than 5 bytes")

    def unpack(self, st: struct.Struct) -> Any:
        return st.unpack(self.take(st.size))[0]

    @property
    def remaining(self) -> int:
        return self.end - self.pos


_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")
_PRIM: dict[str, struct.Struct] = {
    "int8": struct.Struct(">b"), "int16": _I16, "int32": _I32,
    "int64": struct.Struct(">q"), "uint16": struct.Struct(">H"), "bool": struct.Struct(">?"),
    "float64": struct.Struct(">d"),  # Kafka's float64: IEEE 754 double, big-endian (ClientQuotaRecord)
}

# ---------------------------------------------------------------------------------------------
# Schemas
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class F:
    """One field of a message schema, as in Kafka's JSON (versions are inclusive ranges)."""

    attr: str                      # Python attribute name
    type: str | type[Message]      # primitive name, "string", "bytes", "uuid", "[]int32", ... or a struct
    versions: tuple[int, int] = ALL
    nullable: tuple[int, int] | None = None
    tag: int | None = None         # tagged field (taggedVersions == versions here)
    array: bool = False            # array of ``type`` (for struct arrays)

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def is_nullable(self, version: int) -> bool:
        return self.nullable is not None and self.nullable[0] <= version <= self.nullable[1]


class Message:
    """Base of schema-described messages: dataclass subclasses set ``SCHEMA`` and ``VERSIONS``.

    ``FLEXIBLE`` is the schema's first flexible version: 0 (every version flexible, as all KRaft
    metadata records are) unless the subclass says otherwise, ``NEVER`` for none.
    """

    SCHEMA: ClassVar[tuple[F, ...]] = ()
    VERSIONS: ClassVar[tuple[int, int]] = (0, 0)
    FLEXIBLE: ClassVar[int] = 0
    API_KEY: ClassVar[int] = -1

    def encode(self, version: int | None = None) -> bytes:
        """The message body (no frame) at ``version`` (default: the highest)."""
        v = self.VERSIONS[1] if version is None else version
        if not self.VERSIONS[0] <= v <= self.VERSIONS[1]:
            raise ValueError(f"{type(self).__name__} has no version {v}")
        out = bytearray()
        write_struct(out, self, v, v >= self.FLEXIBLE)
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, version: int) -> Self:
        """The whole of ``data`` as a ``version`` message; ``CorruptMessageError`` otherwise."""
        if not cls.VERSIONS[0] <= version <= cls.VERSIONS[1]:
            raise CorruptMessageError(f"{cls.__name__} version {version} is not supported")
        r = Reader(data)
        msg = read_struct(r, cls, version, version >= cls.FLEXIBLE)
        if r.remaining:
            raise CorruptMessageError(f"{r.remaining} byte(s) of garbage after {cls.__name__}")
        return msg


_DEFAULTS: dict[type, dict[str, Any]] = {}


def _defaults(cls: type[Message]) -> dict[str, Any]:
    """Declared default of every dataclass field of ``cls`` (tagged fields compare against it)."""
    out = _DEFAULTS.get(cls)
    if out is None:
        out = {}
        for f in fields(cls):  # type: ignore[arg-type]
            out[f.name] = f.default_factory() if f.default_factory is not MISSING else f.default
        _DEFAULTS[cls] = out
    return out


# ---------------------------------------------------------------------------------------------
# The walker
# ---------------------------------------------------------------------------------------------


def _write_len(out: bytearray, n: int | None, flexible: bool, wide: bool) -> None:
    """Length prefix: compact uvarint (n+1, 0 = null) or int16 / int32 if ``wide`` (-1 = null)."""
    if flexible:
        write_uvarint(out, 0 if n is None else n + 1)
    else:
        out += (_I32 if wide else _I16).pack(-1 if n is None else n)


def _read_len(r: Reader, flexible: bool, wide: bool) -> int:
    """A length written by :func:`_write_len`; negative means null."""
    if flexible:
        return r.uvarint() - 1
    return int(r.unpack(_I32 if wide else _I16))


def _decode_utf8(data: bytes, f: F) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise CorruptMessageError(f"field {f.attr} is not valid UTF-8") from None


def _write_value(out: bytearray, f: F, value: Any, version: int, flexible: bool) -> None:
    t = f.type
    is_array = f.array or (isinstance(t, str) and t.startswith("[]"))
    if value is None:
        if not f.is_nullable(version):
            raise ValueError(f"field {f.attr} is not nullable in version {version}")
        if is_array or t == "string" or t == "bytes":
            _write_len(out, None, flexible, wide=t != "string")
        else:  # a null struct: its presence marker alone (uvarint 0 when tagged, int8 -1 otherwise)
            out.append(0 if f.tag is not None else 0xFF)
        return
    if is_array:
        if flexible:  # the common case, inlined: this runs per field of every record
            write_uvarint(out, len(value) + 1)
        else:
            _write_len(out, len(value), False, wide=True)
        if f.array:
            for item in value:
                write_struct(out, item, version, flexible)
        elif t == "[]int32":
            out += struct.pack(f">{len(value)}i", *value)
        elif t == "[]uuid":
            for u in value:
                out += u.bytes
        elif t == "[]string":
            for s in value:
                data = s.encode()
                _write_len(out, len(data), flexible, wide=False)
                out += data
        else:
            raise TypeError(t)
    elif t == "string":
        data = value.encode()
        if flexible:
            write_uvarint(out, len(data) + 1)
        else:
            _write_len(out, len(data), False, wide=False)
        out += data
    elif t == "bytes":
        _write_len(out, len(value), flexible, wide=True)
        out += value
    elif t == "uuid":
        out += value.bytes
    elif isinstance(t, str):
        out += _PRIM[t].pack(value)
    else:
        if f.is_nullable(version):
            out.append(1)  # presence marker of a nullable struct (int8, or uvarint when tagged)
        write_struct(out, value, version, flexible)


def _read_value(r: Reader, f: F, version: int, flexible: bool) -> Any:
    t = f.type
    if f.array or (isinstance(t, str) and t.startswith("[]")):
        n = r.uvarint() - 1 if flexible else _read_len(r, False, wide=True)
        if n < 0:
            if not f.is_nullable(version):
                raise CorruptMessageError(f"non-nullable field {f.attr} is null")
            return None
        if n > r.remaining:  # every element takes at least a byte: refuse huge bogus counts early
            raise CorruptMessageError(f"array {f.attr} claims {n} elements, more than the bytes left")
        if f.array:
            assert not isinstance(t, str)
            return [read_struct(r, t, version, flexible) for _ in range(n)]
        if t == "[]int32":
            return list(struct.unpack(f">{n}i", r.take(4 * n)))
        if t == "[]uuid":
            return [uuid.UUID(bytes=r.take(16)) for _ in range(n)]
        out = []
        for _ in range(n):
            size = _read_len(r, flexible, wide=False)
            if size < 0:
                raise CorruptMessageError(f"null element in {f.attr}")
            out.append(_decode_utf8(r.take(size), f))
        return out
    if t == "string" or t == "bytes":
        n = r.uvarint() - 1 if flexible else _read_len(r, False, wide=t == "bytes")
        if n < 0:
            if not f.is_nullable(version):
                raise CorruptMessageError(f"non-nullable field {f.attr} is null")
            return None
        data = r.take(n)
        return data if t == "bytes" else _decode_utf8(data, f)
    if t == "uuid":
        return uuid.UUID(bytes=r.take(16))
    if isinstance(t, str):
        return r.unpack(_PRIM[t])
    if f.is_nullable(version):
        # Kafka's generated readers: a tagged struct is null if its uvarint marker is 0, an
        # untagged one if its int8 marker is negative.
        present = r.uvarint() > 0 if f.tag is not None else r.unpack(_PRIM["int8"]) >= 0
        if not present:
            return None
    return read_struct(r, t, version, flexible)


class _WritePlan(NamedTuple):
    """How to write one message type at one version: ``steps`` in order, then the tagged fields.

    A step is ``(struct, getter, None)`` for a run of consecutive non-nullable primitive fields,
    packed with one call, or ``(None, None, field)`` for any other field.
    """

    steps: tuple[tuple[struct.Struct | None, Callable[[Any], Any] | None, F | None], ...]
    tagged: tuple[tuple[int, F, Any], ...]  # (tag, field, default), in tag order


_PLANS: dict[tuple[type, int, bool], _WritePlan] = {}


def _write_plan(cls: type[Message], version: int, flexible: bool) -> _WritePlan:
    key = (cls, version, flexible)
    plan = _PLANS.get(key)
    if plan is not None:
        return plan
    steps: list[tuple[struct.Struct | None, Callable[[Any], Any] | None, F | None]] = []
    run: list[F] = []

    def close_run() -> None:
        if run:
            names = [f.attr for f in run]
            get = attrgetter(*names) if len(names) > 1 else (lambda m, n=names[0]: (getattr(m, n),))
            fmt = ">" + "".join(_PRIM[str(f.type)].format.lstrip(">") for f in run)
            steps.append((struct.Struct(fmt), get, None))
            run.clear()

    tagged: list[tuple[int, F, Any]] = []
    for f in cls.SCHEMA:
        if not f.present(version):
            continue
        if f.tag is not None:
            if flexible:
                tagged.append((f.tag, f, _defaults(cls)[f.attr]))
            continue
        if isinstance(f.type, str) and f.type in _PRIM and not f.array and not f.is_nullable(version):
            run.append(f)
            continue
        close_run()
        steps.append((None, None, f))
    close_run()
    tagged.sort(key=lambda t: t[0])
    plan = _PLANS[key] = _WritePlan(tuple(steps), tuple(tagged))
    return plan


def write_struct(out: bytearray, msg: Message, version: int, flexible: bool) -> None:
    """Append ``msg``'s fields at ``version``; tagged fields exist only in flexible versions."""
    plan = _write_plan(type(msg), version, flexible)
    for packer, get, f in plan.steps:
        if packer is not None and get is not None:
            out += packer.pack(*get(msg))
        elif f is not None:
            _write_value(out, f, getattr(msg, f.attr), version, flexible)
    if not flexible:
        return
    tagged: list[tuple[int, bytes]] = []
    for tag, f, default in plan.tagged:
        value = getattr(msg, f.attr)
        # Kafka writes a tagged field only when it differs from its default.
        if value != default:
            buf = bytearray()
            _write_value(buf, f, value, version, flexible)
            tagged.append((tag, bytes(buf)))
    write_uvarint(out, len(tagged))
    for tag, data in tagged:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data


def read_struct(r: Reader, cls: type[Message], version: int, flexible: bool) -> Any:
    """Read one ``cls`` at ``version`` from ``r`` (the inverse of :func:`write_struct`)."""
    values: dict[str, Any] = {}
    by_tag: dict[int, F] = {}
    for f in cls.SCHEMA:
        if not f.present(version):
            continue
        if f.tag is not None:
            by_tag[f.tag] = f
            continue
        values[f.attr] = _read_value(r, f, version, flexible)
    if flexible:
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            if r.pos + size > r.end:
                raise CorruptMessageError(f"tagged field {tag} overruns the record")
            f_tagged = by_tag.get(tag)
            if f_tagged is not None:  # unknown tagged fields are skipped, as Kafka does
                values[f_tagged.attr] = _read_value(Reader(r.buf, r.pos, r.pos + size), f_tagged, version, flexible)
            r.pos += size
    return cls(**values)
