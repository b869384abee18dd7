"""Hand-written FetchResponse encoder (v4-v18): the fetch hot path.

kio's pure-Python writer copies every partition's records into one buffer and then into a
bytes object. This encoder builds only the small framing pieces and returns a list of buffers
in which each partition's records appear as the very object the log returned, so the transport
can send them with ``writelines`` (writev under uvloop) without copying them first. The output
is byte-for-byte what kio writes for the same response (a property test checks every version);
tagged fields are never set by strom's fetch handler, so flexible versions carry empty tag
sections. v18 changed only the request (a tagged ``high_watermark``): its response is v17's.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from strom.core.protocol.varint import encode_uvarint
from strom.core.records.pieces import RecordPieces

FETCH_KEY = 1
FIRST_FLEXIBLE = 12
FIRST_TOPIC_ID = 13

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PART_HEAD = struct.Struct(">ihq")  # partition_index, error_code, high_watermark
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")


class PartitionRow(NamedTuple):
    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: Sequence[tuple[int, int]] | None  # (producer id, first offset); None = null
    records: bytes | memoryview | RecordPieces | None


class TopicRows(NamedTuple):
    name: str
    topic_id: uuid.UUID
    partitions: Sequence[PartitionRow]


def encode_fetch_response(version: int, correlation_id: int, throttle_ms: int, error_code: int,
                          session_id: int, topics: Sequence[TopicRows]) -> list[bytes | memoryview]:
    """The whole response frame (size prefix, header, body) as a list of buffers."""
    flexible = version >= FIRST_FLEXIBLE
    head = bytearray()
    head += _I32.pack(correlation_id)
    if flexible:
        head += b"\x00"  # response header v1: no tagged fields
    head += _I32.pack(throttle_ms)
    if version >= 7:
        head += _I16.pack(error_code)
        head += _I32.pack(session_id)
    head += encode_uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    parts: list[bytes | memoryview] = []
    cur = head
    for topic in topics:
        if version >= FIRST_TOPIC_ID:
            cur += topic.topic_id.bytes
        else:
            name = topic.name.encode()
            cur += (encode_uvarint(len(name) + 1) if flexible else _I16.pack(len(name))) + name
        cur += encode_uvarint(len(topic.partitions) + 1) if flexible else _I32.pack(len(topic.partitions))
        for p in topic.partitions:
            cur += _PART_HEAD.pack(p.partition, p.error_code, p.high_watermark)
            cur += _I64.pack(p.last_stable_offset)
            if version >= 5:
                cur += _I64.pack(p.log_start_offset)
            if p.aborted is None:
                cur += b"\x00" if flexible else _I32.pack(-1)
            else:
                cur += encode_uvarint(len(p.aborted) + 1) if flexible else _I32.pack(len(p.aborted))
                for producer_id, first_offset in p.aborted:
                    cur += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        cur += b"\x00"
            if version >= 11:
                cur += _I32.pack(-1)  # preferred_read_replica
            records = p.records
            if records is None:
                cur += b"\x00" if flexible else _I32.pack(-1)
            else:
                cur += encode_uvarint(len(records) + 1) if flexible else _I32.pack(len(records))
                if len(records):
                    parts.append(bytes(cur))
                    if isinstance(records, RecordPieces):
                        parts.extend(records.pieces)  # a remote read's chunk views, not joined
                    else:
                        parts.append(records)
                    cur = bytearray()
            if flexible:
                cur += b"\x00"  # partition tagged fields
        if flexible:
            cur += b"\x00"  # topic tagged fields
    if flexible:
        cur += b"\x00"  # response tagged fields
    parts.append(bytes(cur))
    size = sum(len(b) for b in parts)
    parts.insert(0, _I32.pack(size))
    return parts
