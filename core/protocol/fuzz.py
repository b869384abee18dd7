"""A mutation fuzzer for Kafka request frames, shared by the CI slice and the bench script.

Seeds are valid requests of every API and version a broker advertises: a request dataclass of
kio's (the types generated from Kafka's message schemas) is filled with plausible values
(the fuzz topic, group and transactional id, a real record batch) and encoded by this module's
own writer, which also notes where every array count, string and bytes length, nullable-struct
marker and tagged-field section sits. The writer is checked against kio's on every seed, so a
seed is exactly what a client would send.

There are two seeds per version: one with an element in every array and a value in every
field, one with null in every nullable field and no elements in the other arrays. Each frame is
one seed with one mutation: bit flips, interesting bytes, truncation, inserted or deleted bytes,
extreme or negative lengths, null where the schema forbids it, over-long varints, unknown
tagged fields (valid: Kafka skips them), extreme integers (negative counts, huge timeouts),
another version's header on this body, a corrupt header, or the seed unchanged. Frame ``i`` of run ``seed`` is always the same bytes, so
a failure names the frame that reproduces it (:meth:`Mutator.frame`).

:func:`run` sends frames to a broker over many concurrent connections (one request in flight on
each, as a client's socket would), reconnecting when the broker closes one, and counts answered
frames, closed connections and frames left unanswered. :data:`KILLERS` are the 20-byte requests
of issue 20 (a first compact-array length of 0xffffffff) that aborted the broker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import io
import random
import socket
import struct
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from strom.core.protocol.varint import encode_uvarint, write_uvarint

__all__ = ["KILLERS", "FuzzStats", "Mutator", "Seed", "SeedContext", "api_versions", "build_seeds",
           "killer_frame", "request_frame", "run", "send_seeds"]

_SIZE = struct.Struct(">i")
_API_VERSIONS = 18

# -- seeds --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SeedContext:
    """The names seeds use: a topic that exists (Produce and Fetch do real work on it), a
    consumer group, a transactional id, and a record batch to produce."""

    topic: str = "fuzz"
    topic_id: uuid.UUID | None = None
    group: str = "fuzz-group"
    transactional_id: str = "fuzz-txn"
    records: bytes = b""
    node_id: int = 1


@dataclass(frozen=True)
class Mark:
    """Where a length, count, marker or tagged-field section sits in a seed's body."""

    pos: int
    kind: str  # "array", "string", "bytes", "marker", "tags" or an integer type ("int32", ...)
    flexible: bool
    nullable: bool


@dataclass(frozen=True)
class Seed:
    api_key: int
    version: int
    flexible: bool
    body: bytes
    marks: tuple[Mark, ...]
    name: str

    @property
    def label(self) -> str:
        return f"{self.name} v{self.version}"


def _consumer_subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: the bytes a classic consumer joins a group with."""
    raw = topic.encode()
    return struct.pack(">hih", 0, 1, len(raw)) + raw + struct.pack(">i", -1)


# Values by field name; a (struct, field) pair overrides the name alone.
_BY_NAME: dict[str, Callable[[SeedContext], Any]] = {
    "topic": lambda c: c.topic, "topic_name": lambda c: c.topic, "resource_name": lambda c: c.topic,
    "topic_names": lambda c: ("fuzz-absent",), "subscribed_topic_names": lambda c: (c.topic,),
    "group_id": lambda c: c.group, "groups": lambda c: (c.group,), "group_ids": lambda c: (c.group,),
    "groups_names": lambda c: ("fuzz-absent-group",), "key": lambda c: c.group,
    "coordinator_keys": lambda c: (c.group,),
    "transactional_id": lambda c: c.transactional_id, "transactional_ids": lambda c: (c.transactional_id,),
    "v3_and_below_transactional_id": lambda c: c.transactional_id,
    "topic_id": lambda c: c.topic_id, "replica_directory_id": lambda c: None,
    "member_id": lambda c: "", "group_instance_id": lambda c: None, "protocol_type": lambda c: "consumer",
    "protocol_name": lambda c: "range", "client_software_name": lambda c: "strom-fuzz",
    "client_software_version": lambda c: "1.0", "rack_id": lambda c: "", "cluster_id": lambda c: None,
    "reason": lambda c: None, "feature": lambda c: "fuzz.feature.version", "value": lambda c: "3600000",
    "committed_metadata": lambda c: "", "server_assignor": lambda c: None, "instance_id": lambda c: None,
    "subscribed_topic_regex": lambda c: None, "transactional_id_pattern": lambda c: None,
    "configuration_keys": lambda c: None, "states_filter": lambda c: (), "types_filter": lambda c: (),
    "state_filters": lambda c: (), "producer_id_filters": lambda c: (),
    "metadata": lambda c: _consumer_subscription(c.topic), "assignment": lambda c: b"",
    "records": lambda c: c.records,
    "replica_id": lambda c: -1, "producer_id": lambda c: -1, "producer_epoch": lambda c: -1,
    "v3_and_below_producer_id": lambda c: -1, "v3_and_below_producer_epoch": lambda c: -1,
    "generation_id": lambda c: -1, "generation_id_or_member_epoch": lambda c: -1, "member_epoch": lambda c: 0,
    "session_epoch": lambda c: -1, "log_start_offset": lambda c: -1, "partition_max_bytes": lambda c: 1 << 20,
    "max_bytes": lambda c: 1 << 20, "min_bytes": lambda c: 1, "acks": lambda c: 1,
    "current_leader_epoch": lambda c: -1, "leader_epoch": lambda c: -1, "last_fetched_epoch": lambda c: -1,
    "committed_leader_epoch": lambda c: -1, "timestamp": lambda c: -1, "high_watermark": lambda c: -1,
    "num_partitions": lambda c: 1, "replication_factor": lambda c: 1, "count": lambda c: 2,
    "resource_type": lambda c: 2, "response_partition_limit": lambda c: 100, "endpoint_type": lambda c: 1,
    "upgrade_type": lambda c: 1, "duration_filter": lambda c: -1, "replica_epoch": lambda c: -1,
    "broker_ids": lambda c: (c.node_id,), "replicas": lambda c: (c.node_id,),
    "partitions": lambda c: (0,), "partition_indexes": lambda c: (0,),
    # Durations: nothing waits (a fuzzed Fetch or Produce that parks the connection slows the run).
    "max_wait": lambda c: datetime.timedelta(0), "timeout": lambda c: datetime.timedelta(seconds=1),
    "session_timeout": lambda c: datetime.timedelta(seconds=10),
    "rebalance_timeout": lambda c: datetime.timedelta(seconds=10),
    "transaction_timeout": lambda c: datetime.timedelta(seconds=60),
    "retention_time": lambda c: datetime.timedelta(milliseconds=-1),
    "allow_auto_topic_creation": lambda c: False,  # a flipped name must not create a topic
    "validate_only": lambda c: True,  # nor a fuzzed CreateTopics/CreatePartitions/AlterConfigs
    "verify_only": lambda c: True,
}
_BY_STRUCT: dict[tuple[str, str], Callable[[SeedContext], Any]] = {
    ("ProduceRequest", "transactional_id"): lambda c: None,
    ("CreatableTopic", "name"): lambda c: "fuzz-created",
    ("CreatableTopic", "assignments"): lambda c: (),
    ("CreatableTopicConfig", "name"): lambda c: "retention.ms",
    ("AlterableConfig", "name"): lambda c: "retention.ms",
    ("CreatePartitionsTopic", "assignments"): lambda c: None,
    ("DeleteTopicState", "name"): lambda c: "fuzz-absent",
    ("DeleteTopicState", "topic_id"): lambda c: None,
    ("ForgottenTopic", "topic"): lambda c: c.topic,
    # Not nullable here (the cluster_id of other requests is): BrokerRegistration's.
    ("BrokerRegistrationRequest", "cluster_id"): lambda c: "fuzz-cluster",
}

# Integer fields a mutation may set to an extreme (negative counts, huge timeouts, ...).
_INT_KINDS = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "timedelta_i32": ">i"}

_FIXED_SIZES = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4, "int64": 8, "uint64": 8, "float64": 8,
    "timedelta_i64": 8, "datetime_i64": 8, "uuid": 16,
}


def _primitive_default(kafka_type: str) -> Any:
    if kafka_type == "string":
        return "fuzz"
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        return None
    if kafka_type.startswith("timedelta"):
        return datetime.timedelta(0)
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type == "datetime_i64":
        return datetime.datetime.fromtimestamp(0, datetime.UTC)
    if kafka_type == "float64":
        return 0.0  # struct's ">d" refuses an int (AlterClientQuotas' values)
    return 0


def build_entity(cls: type[Any], ctx: SeedContext, *, minimal: bool = False) -> Any:
    """An instance of a kio request (or nested) dataclass filled with plausible values.

    ``minimal``: null in every nullable string, array and struct and no elements in the other
    arrays (the other shape of a valid request).
    """
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if get_field_tag(f) is not None:
            continue  # tagged fields keep their defaults: a client omits them
        fc = classify_field(f)
        if minimal and isinstance(fc, (PrimitiveTupleField, EntityTupleField)):
            values[f.name] = None if is_optional(f) else ()
            continue
        if minimal and is_optional(f) and (isinstance(fc, EntityField)
                                           or f.metadata.get("kafka_type") in ("string", "bytes", "records")):
            values[f.name] = None
            continue
        maker = _BY_STRUCT.get((cls.__name__, f.name))
        if maker is None and isinstance(fc, (PrimitiveField, PrimitiveTupleField)) \
                and f.metadata.get("kafka_type") != "float64":  # "value" is a config string, not a quota
            maker = _BY_NAME.get(f.name)  # a name means one thing only for primitives
        if maker is not None:
            value = maker(ctx)
            if isinstance(fc, PrimitiveField) and f.metadata.get("kafka_type") == "uuid" and value is None \
                    and not is_optional(f):
                value = uuid.UUID(int=0)
            values[f.name] = value
            continue
        if isinstance(fc, EntityTupleField):
            values[f.name] = (build_entity(fc.type_, ctx, minimal=minimal),)
        elif isinstance(fc, EntityField):
            values[f.name] = build_entity(fc.type_, ctx, minimal=minimal)
        elif isinstance(fc, PrimitiveTupleField):
            values[f.name] = (_primitive_default(f.metadata["kafka_type"]),)
        else:
            values[f.name] = _primitive_default(f.metadata["kafka_type"])
    return cls(**values)


class _Writer:
    """Kafka's request encoding (what kio's writer produces), noting where lengths sit."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.marks: list[Mark] = []

    def uvarint(self, value: int) -> None:
        write_uvarint(self.out, value)

    def length(self, kind: str, n: int | None, flexible: bool, nullable: bool, width: int) -> None:
        self.marks.append(Mark(len(self.out), kind, flexible, nullable))
        if flexible:
            self.uvarint(0 if n is None else n + 1)
        else:
            self.out += struct.pack(">h" if width == 2 else ">i", -1 if n is None else n)

    def primitive(self, kafka_type: str, value: Any, flexible: bool, nullable: bool) -> None:
        if kafka_type in ("string", "bytes", "records"):
            raw = value.encode() if isinstance(value, str) else value
            kind = "string" if kafka_type == "string" else "bytes"
            self.length(kind, None if raw is None else len(raw), flexible, nullable,
                        2 if kafka_type == "string" else 4)
            if raw is not None:
                self.out += raw
            return
        if kafka_type == "uuid":
            self.out += (value or uuid.UUID(int=0)).bytes
            return
        if kafka_type.startswith("timedelta"):
            value = round(value.total_seconds() * 1000)
        elif kafka_type == "datetime_i64":
            value = -1 if value is None else round(value.timestamp() * 1000)
        elif kafka_type == "error_code":
            value = int(value.value)
        if kafka_type in _INT_KINDS:
            self.marks.append(Mark(len(self.out), kafka_type, False, False))
        fmt = {"bool": ">?", "int8": ">b", "uint8": ">B", "int16": ">h", "uint16": ">H", "error_code": ">h",
               "int32": ">i", "uint32": ">I", "timedelta_i32": ">i", "int64": ">q", "uint64": ">Q",
               "float64": ">d", "timedelta_i64": ">q", "datetime_i64": ">q"}[kafka_type]
        self.out += struct.pack(fmt, value)

    def field(self, f: dataclasses.Field[Any], value: Any, flexible: bool, tagged: bool) -> None:
        nullable = False if tagged else is_optional(f)
        fc = classify_field(f)
        kafka_type = f.metadata.get("kafka_type", "")
        if isinstance(fc, PrimitiveField):
            self.primitive(kafka_type, value, flexible, nullable)
        elif isinstance(fc, (PrimitiveTupleField, EntityTupleField)):
            self.length("array", None if value is None else len(value), flexible, nullable, 4)
            for item in value or ():
                if isinstance(fc, PrimitiveTupleField):
                    self.primitive(kafka_type, item, flexible, False)
                else:
                    self.entity(fc.type_, item)
        elif isinstance(fc, EntityField):
            if nullable:
                self.marks.append(Mark(len(self.out), "marker", flexible, True))
                self.out += b"\xff" if value is None else b"\x01"
                if value is None:
                    return
            self.entity(fc.type_, value)

    def entity(self, cls: type[Any], value: Any) -> None:
        flexible = bool(cls.__flexible__)
        tagged: list[tuple[int, dataclasses.Field[Any]]] = []
        for f in dataclasses.fields(cls):
            field_tag = get_field_tag(f)
            if field_tag is not None:
                tagged.append((int(field_tag), f))
            else:
                self.field(f, getattr(value, f.name), flexible, False)
        if flexible:
            self.marks.append(Mark(len(self.out), "tags", True, False))
            written = [(t, f) for t, f in sorted(tagged, key=lambda x: x[0])
                       if getattr(value, f.name) != f.default]
            self.uvarint(len(written))
            for tag, f in written:
                inner = _Writer()
                inner.field(f, getattr(value, f.name), flexible, True)
                self.uvarint(tag)
                self.uvarint(len(inner.out))
                self.out += inner.out


def _kio_body(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def build_seeds(versions: dict[int, tuple[int, int]], ctx: SeedContext) -> list[Seed]:
    """One valid request per advertised (api key, version)."""
    seeds: list[Seed] = []
    for api_key, (lo, hi) in sorted(versions.items()):
        for version in range(lo, hi + 1):
            try:
                cls = load_request_schema(api_key, version)
            except Exception:
                continue  # advertised but unknown to kio: nothing to build from
            for minimal in (False, True):
                entity = build_entity(cls, ctx, minimal=minimal)
                w = _Writer()
                w.entity(cls, entity)
                body = bytes(w.out)
                if body != _kio_body(entity):
                    raise AssertionError(f"fuzz writer disagrees with kio on {cls.__name__} v{version}")
                seeds.append(Seed(api_key, version, bool(cls.__flexible__), body, tuple(w.marks),
                                  cls.__name__.removesuffix("Request")))
    return seeds


def request_header(api_key: int, version: int, correlation_id: int, client_id: str | None,
                   flexible: bool) -> bytes:
    """Request header v1, or v2 (with an empty tagged-field section) when ``flexible``."""
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id.encode())) + client_id.encode()
    return struct.pack(">hhi", api_key, version, correlation_id) + cid + (b"\x00" if flexible else b"")


def request_frame(seed: Seed, correlation_id: int) -> bytes:
    """The unmutated seed as a whole frame (size prefix included)."""
    payload = request_header(seed.api_key, seed.version, correlation_id, "strom-fuzz", seed.flexible) + seed.body
    return _SIZE.pack(len(payload)) + payload


def killer_frame(api_key: int, version: int, correlation_id: int = 1) -> bytes:
    """Issue 20's 20-byte request: header v2 with a null client id, then a first compact-array
    length of 0xffffffff (a reservation of 4 billion elements in kio's reader)."""
    payload = request_header(api_key, version, correlation_id, None, True) + b"\xff\xff\xff\xff\x0f"
    return _SIZE.pack(len(payload)) + payload


KILLERS: dict[str, tuple[int, int]] = {
    "DescribeGroups v6": (15, 6), "Metadata v12": (3, 12), "CreateTopics v7": (19, 7),
    "DescribeConfigs v4": (32, 4),
}

# -- mutations ----------------------------------------------------------------------------------

_INTERESTING = (0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE)
_COMPACT_EXTREMES = (0, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 0x10000000, 0x3FFF, 0x7FFFFFFFF)
_I32_EXTREMES = (-1, -2, -(2**31), 2**31 - 1, 1 << 24, 0x7FFF + 1)
_I16_EXTREMES = (-1, -2, -(2**15), 2**15 - 1, 0x4000)



def _varint_span(body: bytes | bytearray, pos: int) -> int:
    """The length of the varint at ``pos`` (seeds are valid, so it ends)."""
    n = 1
    while pos + n - 1 < len(body) and body[pos + n - 1] & 0x80:
        n += 1
    return n


def _length_width(mark: Mark, body: bytes | bytearray) -> int:
    if mark.flexible:
        return _varint_span(body, mark.pos)
    return 2 if mark.kind == "string" else 4


class Mutator:
    """Frame ``i`` of a run: one seed, one mutation, the same bytes for the same (seed, i)."""

    KINDS: tuple[tuple[str, int], ...] = (
        ("bitflip", 20), ("bytes", 10), ("truncate", 10), ("insert", 5), ("delete", 5),
        ("length", 15), ("null", 8), ("varint", 6), ("tag", 8), ("int", 10), ("version", 6), ("header", 4),
        ("valid", 3),
    )

    def __init__(self, seeds: Sequence[Seed], seed: int, versions: dict[int, tuple[int, int]]) -> None:
        if not seeds:
            raise ValueError("no seeds to mutate")
        self.seeds = list(seeds)
        self.seed = seed
        self.versions = versions
        self._kinds = [k for k, _ in self.KINDS]
        self._weights = [w for _, w in self.KINDS]

    def frame(self, i: int) -> tuple[bytes, str]:
        """(whole frame with its size prefix, "<mutation> <API> vN") of frame ``i``."""
        rng = random.Random(self.seed * 1_000_003 + i)
        s = rng.choice(self.seeds)
        kind = rng.choices(self._kinds, self._weights)[0]
        api_key, version, flexible = s.api_key, s.version, s.flexible
        body = bytearray(s.body)
        header_tail = b""
        client_id: str | None = "strom-fuzz"
        if kind == "bitflip":
            for _ in range(rng.randint(1, 4)):
                if body:
                    body[rng.randrange(len(body))] ^= 1 << rng.randrange(8)
        elif kind == "bytes":
            for _ in range(rng.randint(1, 3)):
                if body:
                    body[rng.randrange(len(body))] = rng.choice(_INTERESTING)
        elif kind == "truncate":
            del body[rng.randrange(len(body) + 1):]
        elif kind == "insert":
            at = rng.randrange(len(body) + 1)
            body[at:at] = rng.randbytes(rng.randint(1, 8))
        elif kind == "delete" and body:
            at = rng.randrange(len(body))
            del body[at:at + rng.randint(1, 8)]
        elif kind in ("length", "null", "varint"):
            marks = [m for m in s.marks if m.kind in ("array", "string", "bytes")]
            if marks:
                body = self._length(rng, kind, rng.choice(marks), body)
        elif kind == "tag":
            marks = [m for m in s.marks if m.kind == "tags"]
            if marks:
                body = self._tag(rng, rng.choice(marks), body)
            elif s.marks or body:
                kind = "marker"
                body[rng.randrange(len(body))] = rng.choice(_INTERESTING) if body else 0
        elif kind == "int":
            marks = [m for m in s.marks if m.kind in _INT_KINDS]
            if marks:
                mark = rng.choice(marks)
                fmt = _INT_KINDS[mark.kind]
                bits = struct.calcsize(fmt) * 8
                low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
                value = rng.choice((-1, 0, low, high, rng.randrange(-1000, 1000), rng.randint(low, high)))
                struct.pack_into(fmt, body, mark.pos, min(max(value, low), high))
        elif kind == "version":
            lo, hi = self.versions.get(api_key, (0, 0))
            choice = rng.random()
            if choice < 0.6:
                version = rng.randint(lo, hi)  # a supported version's header on this body
            elif choice < 0.8:
                version = rng.choice((lo - 1, hi + 1, -1, 0x7FFF))
            else:
                api_key = rng.choice(list(self.versions))
        elif kind == "header":
            choice = rng.random()
            if choice < 0.3:
                client_id = None
            elif choice < 0.6 and flexible:
                header_tail = rng.choice((b"\x01\x05\x02ab", b"\x01\x05\xff\xff\xff\xff\x0f",
                                          b"\xff\xff\xff\xff\xff\xff", b"\x05"))
            else:
                api_key = rng.randrange(-5, 100)
        payload = request_header(api_key, version, i & 0x7FFFFFFF, client_id, flexible) + header_tail + bytes(body)
        if kind == "header" and rng.random() < 0.2:
            payload = payload[:8] + struct.pack(">h", rng.choice((-2, 0x7FFF, len(payload)))) + payload[10:]
        return _SIZE.pack(len(payload)) + payload, f"{kind} {s.label}"

    @staticmethod
    def _length(rng: random.Random, kind: str, mark: Mark, body: bytearray) -> bytearray:
        width = _length_width(mark, body)
        if kind == "null":
            new = b"\x00" if mark.flexible else (b"\xff\xff" if width == 2 else b"\xff\xff\xff\xff")
        elif kind == "varint":
            if not mark.flexible:
                new = rng.choice((b"\x80\x00", b"\xff\xff\xff"))  # a classic length cut short
            else:
                new = rng.choice((b"\xff" * 5 + b"\x01", b"\x80" * 5, b"\xff" * 10, b"\x81\x80\x80\x80\x80\x00"))
                if rng.random() < 0.3:  # a varint the frame ends in the middle of
                    return body[:mark.pos] + b"\x80\x80"
        elif mark.flexible:
            new = encode_uvarint(rng.choice(_COMPACT_EXTREMES))
        elif width == 2:
            new = struct.pack(">h", rng.choice(_I16_EXTREMES))
        else:
            new = struct.pack(">i", rng.choice(_I32_EXTREMES))
        return body[:mark.pos] + new + body[mark.pos + width:]

    @staticmethod
    def _tag(rng: random.Random, mark: Mark, body: bytearray) -> bytearray:
        width = _varint_span(body, mark.pos)
        (count,) = body[mark.pos:mark.pos + 1]
        if count != 0 or width != 1:
            return body  # seeds write no tagged fields; leave a section that has some
        choice = rng.random()
        tag = rng.choice((7, 42, 127, 128, 1000, 0x7FFFFFFF))
        if choice < 0.5:  # a valid unknown tagged field: Kafka skips it
            value = rng.randbytes(rng.randint(0, 12))
            new = b"\x01" + encode_uvarint(tag) + encode_uvarint(len(value)) + value
        elif choice < 0.7:  # two of them, the second out of order
            new = b"\x02" + encode_uvarint(tag) + b"\x01\x00" + b"\x03\x00"
        elif choice < 0.85:  # a size past the end of the frame
            new = b"\x01" + encode_uvarint(tag) + encode_uvarint(rng.choice((0xFFFFFFFF, 0x7FFFFFFF, 1 << 20)))
        else:  # a count far larger than the frame
            new = encode_uvarint(rng.choice((0xFFFFFFFF, 0x7FFFFFFF, 1 << 20)))
        return body[:mark.pos] + new + body[mark.pos + 1:]


# -- running against a broker -------------------------------------------------------------------


def api_versions(bootstrap: str, timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """The broker's advertised API versions (ApiVersions v3 over a plain socket)."""
    cls: Any = load_request_schema(_API_VERSIONS, 3)
    body = _kio_body(cls(client_software_name="strom-fuzz", client_software_version="1.0"))
    payload = request_header(_API_VERSIONS, 3, 1, "strom-fuzz", True) + body
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(_SIZE.pack(len(payload)) + payload)
        head = _recv_exact(s, 4)
        data = _recv_exact(s, _SIZE.unpack(head)[0])
    resp: Any
    resp, _ = entity_reader(load_response_schema(_API_VERSIONS, 3))(data, 4)  # response header v0
    if int(resp.error_code) != 0:
        raise RuntimeError(f"ApiVersions answered error {resp.error_code}")
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys}


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("connection closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def send_seeds(bootstrap: str, seeds: Sequence[Seed], timeout: float = 2.0) -> int:
    """Send every seed unmutated once, in order; returns how many were answered.

    A warm-up: the first request of each API and version loads its kio classes and builds its
    frame-check plan, and the first group or transaction request creates the coordinators'
    partitions; a memory figure taken after this is what the fuzzed frames add.
    """
    host, port = bootstrap.rsplit(":", 1)
    answered = 0
    sock: socket.socket | None = None
    try:
        for i, s in enumerate(seeds):
            if sock is None:
                sock = socket.create_connection((host, int(port)), timeout=timeout)
            sock.sendall(request_frame(s, i))
            try:
                head = _recv_exact(sock, 4)
                _recv_exact(sock, _SIZE.unpack(head)[0])
                answered += 1
            except (OSError, ConnectionError):  # no answer (acks=0, a parked JoinGroup) or closed
                sock.close()
                sock = None
    finally:
        if sock is not None:
            sock.close()
    return answered


@dataclass
class FuzzStats:
    """What happened to the frames of a run."""

    sent: int = 0
    answered: int = 0  # a response with the frame's correlation id
    closed: int = 0  # the broker closed the connection instead of answering
    unanswered: int = 0  # no answer within the timeout (acks=0 Produce, long polls): we hung up
    wrong_correlation: int = 0
    connect_failures: int = 0
    seconds: float = 0.0
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # mutation -> [answered, closed, unanswered]
    examples: list[str] = field(default_factory=list)  # the first wrong-correlation frames
    unanswered_apis: dict[str, int] = field(default_factory=dict)  # "Fetch v12" -> frames left unanswered

    @property
    def frames_per_second(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0

    def count(self, kind: str, outcome: int) -> None:
        self.by_kind.setdefault(kind.split(" ", 1)[0], [0, 0, 0])[outcome] += 1


async def _worker(host: str, port: int, mutator: Mutator, next_index: Callable[[], int | None],
                  stats: FuzzStats, timeout: float, source: str | None, stop: Callable[[], bool]) -> None:
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    failures = 0
    try:
        while not stop():
            if writer is None:
                try:
                    reader, writer = await asyncio.wait_for(asyncio.open_connection(
                        host, port, local_addr=(source, 0) if source else None), timeout)
                    failures = 0
                except (OSError, TimeoutError):
                    stats.connect_failures += 1
                    failures += 1
                    if failures > 50:
                        return  # the broker is gone: the caller sees it
                    await asyncio.sleep(0.01 * failures)
                    continue
            i = next_index()
            if i is None:
                return
            frame, kind = mutator.frame(i)
            stats.sent += 1
            assert reader is not None and writer is not None
            try:
                writer.write(frame)
                head = await asyncio.wait_for(reader.readexactly(4), timeout)
                (size,) = _SIZE.unpack(head)
                payload = await asyncio.wait_for(reader.readexactly(size), timeout)
            except (asyncio.IncompleteReadError, ConnectionError):
                stats.closed += 1
                stats.count(kind, 1)
                writer.close()
                writer = None
                continue
            except TimeoutError:
                stats.unanswered += 1
                stats.count(kind, 2)
                api = kind.split(" ", 1)[1]
                stats.unanswered_apis[api] = stats.unanswered_apis.get(api, 0) + 1
                writer.close()
                writer = None
                continue
            stats.answered += 1
            stats.count(kind, 0)
            if len(payload) < 4 or _SIZE.unpack_from(payload)[0] != i & 0x7FFFFFFF:
                stats.wrong_correlation += 1
                if len(stats.examples) < 10:
                    stats.examples.append(f"frame {i} ({kind}): answer with another correlation id")
                writer.close()
                writer = None
    finally:
        if writer is not None:
            writer.close()


def run(bootstrap: str, frames: int, *, seeds: Sequence[Seed], versions: dict[int, tuple[int, int]],
        seed: int = 0, concurrency: int = 16, timeout: float = 2.0, max_seconds: float | None = None,
        sources: int = 16, progress: Callable[[FuzzStats], None] | None = None,
        stop: Callable[[], bool] | None = None) -> FuzzStats:
    """Send ``frames`` mutated frames (fewer if ``max_seconds`` or ``stop()`` ends the run first).

    Connections come from ``sources`` loopback addresses (127.0.0.2, ...) when the broker is on
    127.0.0.1, so a million short connections do not run out of ephemeral ports.
    """
    host, port_s = bootstrap.rsplit(":", 1)
    mutator = Mutator(seeds, seed, versions)
    stats = FuzzStats()
    counter = iter(range(frames))
    start = time.monotonic()
    deadline = start + max_seconds if max_seconds is not None else None
    last_progress = start

    def stopped() -> bool:
        return (deadline is not None and time.monotonic() > deadline) or (stop is not None and stop())

    def next_index() -> int | None:
        nonlocal last_progress
        if progress is not None and time.monotonic() - last_progress > 5:
            last_progress = time.monotonic()
            stats.seconds = last_progress - start
            progress(stats)
        return next(counter, None)

    async def main() -> None:
        loopback = host in ("127.0.0.1", "localhost")
        workers = [_worker(host, int(port_s), mutator, next_index, stats, timeout,
                           f"127.0.0.{2 + w % sources}" if loopback and sources else None, stopped)
                   for w in range(concurrency)]
        await asyncio.gather(*workers)

    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())
    stats.seconds = time.monotonic() - start
    return stats
