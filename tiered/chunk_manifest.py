"""Aiven's segment manifest (``<segment>.rsm-manifest``) and chunk index.

A segment's ``.log`` is cut into chunks of ``chunk.size`` original bytes (the last may be
shorter), each transformed on its own (zstd when ``compression.enabled``) and stored back to
back. The chunk index maps an original byte range to the transformed byte range that holds it,
so a ranged fetch downloads only the chunks it needs:

* ``{"type": "fixed", ...}`` when the transform keeps sizes (no compression):
  ``originalChunkSize``, ``originalFileSize``, ``transformedChunkSize``, ``finalTransformedChunkSize``;
* ``{"type": "variable", ...}`` when it does not: ``transformedChunks`` is Aiven's
  ``ChunkSizesBinaryCodec`` of every transformed size, base64-encoded.

The manifest (``"version": "1"``) also holds where each index lies in the ``.indexes`` object
(``segmentIndexes``: ``offset``, ``timestamp``, ``producerSnapshot``, ``leaderEpoch``,
``transaction`` — ``null`` when the segment has none — each ``{"position", "size"}``),
``compression`` and, informational, the segment's ``remoteLogSegmentMetadata``.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from strom.plugins.hookspecs.storage import IndexType, RemoteLogSegmentMetadata, kafka_uuid_str

# IndexType -> the manifest's field name, in the order the indexes are stored in ``.indexes``.
INDEX_FIELDS: Mapping[IndexType, str] = {
    IndexType.OFFSET: "offset",
    IndexType.TIMESTAMP: "timestamp",
    IndexType.PRODUCER_SNAPSHOT: "producerSnapshot",
    IndexType.LEADER_EPOCH: "leaderEpoch",
    IndexType.TRANSACTION: "transaction",
}


def encode_chunk_sizes(values: Sequence[int]) -> bytes:
    """Aiven's ``ChunkSizesBinaryCodec.encode``: count, then (base, bytes per value, the values
    but the last minus base) when there are two or more, then the last value in full; big-endian."""
    if any(v < 0 for v in values):
        raise ValueError("chunk sizes cannot be negative")
    if not values:
        return struct.pack(">i", 0)
    if len(values) == 1:
        return struct.pack(">ii", 1, values[0])
    base = min(values[:-1])
    width = max(_bytes_needed(v - base) for v in values[:-1])
    body = b"".join((v - base).to_bytes(4, "big")[4 - width:] for v in values[:-1])
    return struct.pack(">iib", len(values), base, width) + body + struct.pack(">i", values[-1])


def decode_chunk_sizes(data: bytes) -> list[int]:
    """Inverse of :func:`encode_chunk_sizes`."""
    (count,) = struct.unpack_from(">i", data, 0)
    if count == 0:
        return []
    if count == 1:
        return [struct.unpack_from(">i", data, 4)[0]]
    base, width = struct.unpack_from(">ib", data, 4)
    pos = 9
    out = []
    for _ in range(count - 1):
        out.append(int.from_bytes(data[pos:pos + width], "big") + base)
        pos += width
    out.append(struct.unpack_from(">i", data, pos)[0])
    return out


def _bytes_needed(v: int) -> int:
    return 1 if v <= 0xFF else 2 if v <= 0xFFFF else 3 if v <= 0xFFFFFF else 4


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk: its number, original byte range and transformed byte range (start, size)."""

    id: int
    original_position: int
    original_size: int
    transformed_position: int
    transformed_size: int


@dataclass(frozen=True, slots=True)
class ChunkIndex:
    """Where each chunk of the original file lies in the transformed object."""

    original_chunk_size: int
    original_file_size: int
    transformed_sizes: tuple[int, ...]
    fixed: bool  # serialized as Aiven's "fixed" (sizes unchanged) rather than "variable"

    @classmethod
    def build(cls, original_chunk_size: int, original_file_size: int, transformed_sizes: Sequence[int],
              fixed: bool) -> ChunkIndex:
        expected = -(-original_file_size // original_chunk_size)
        if len(transformed_sizes) != expected:
            raise ValueError(f"{len(transformed_sizes)} chunks for {original_file_size} bytes in chunks of "
                             f"{original_chunk_size} (expected {expected})")
        return cls(original_chunk_size, original_file_size, tuple(transformed_sizes), fixed)

    def chunks(self) -> list[Chunk]:
        out = []
        transformed = 0
        for i, size in enumerate(self.transformed_sizes):
            start = i * self.original_chunk_size
            out.append(Chunk(i, start, min(self.original_chunk_size, self.original_file_size - start),
                             transformed, size))
            transformed += size
        return out

    def chunks_for_range(self, first: int, last: int) -> list[Chunk]:
        """The chunks holding original bytes ``first..last`` (inclusive, clipped to the file)."""
        last = min(last, self.original_file_size - 1)
        if first > last:
            return []
        return self.chunks()[first // self.original_chunk_size:last // self.original_chunk_size + 1]

    def to_json(self) -> dict[str, object]:
        if self.fixed:
            return {"type": "fixed", "originalChunkSize": self.original_chunk_size,
                    "originalFileSize": self.original_file_size,
                    "transformedChunkSize": self.transformed_sizes[0] if self.transformed_sizes else 0,
                    "finalTransformedChunkSize": self.transformed_sizes[-1] if self.transformed_sizes else 0}
        return {"type": "variable", "originalChunkSize": self.original_chunk_size,
                "originalFileSize": self.original_file_size,
                "transformedChunks": base64.b64encode(encode_chunk_sizes(self.transformed_sizes)).decode("ascii")}

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> ChunkIndex:
        chunk_size = _int(doc, "originalChunkSize")
        file_size = _int(doc, "originalFileSize")
        count = -(-file_size // chunk_size)
        if doc.get("type") == "fixed":
            body, final = _int(doc, "transformedChunkSize"), _int(doc, "finalTransformedChunkSize")
            sizes = [body] * (count - 1) + [final] if count else []
            return cls.build(chunk_size, file_size, sizes, True)
        if doc.get("type") == "variable":
            raw = base64.b64decode(str(doc["transformedChunks"]))
            return cls.build(chunk_size, file_size, decode_chunk_sizes(raw), False)
        raise ValueError(f"unknown chunk index type {doc.get('type')!r}")


def _int(doc: Mapping[str, object], key: str) -> int:
    value = doc[key]
    if not isinstance(value, int):
        raise ValueError(f"manifest field {key!r} is {value!r}, not an integer")
    return value


@dataclass(frozen=True, slots=True)
class SegmentIndex:
    """One index's byte range in the ``.indexes`` object."""

    position: int
    size: int


@dataclass(frozen=True, slots=True)
class SegmentManifest:
    """Aiven's ``SegmentManifestV1``."""

    chunk_index: ChunkIndex
    indexes: Mapping[IndexType, SegmentIndex | None]
    compression: bool

    def to_json_bytes(self, metadata: RemoteLogSegmentMetadata | None = None) -> bytes:
        doc: dict[str, object] = {
            "version": "1",
            "chunkIndex": self.chunk_index.to_json(),
            "segmentIndexes": {name: (None if (ix := self.indexes.get(t)) is None
                                      else {"position": ix.position, "size": ix.size})
                               for t, name in INDEX_FIELDS.items()},
            "compression": self.compression,
        }
        if metadata is not None:
            doc["remoteLogSegmentMetadata"] = metadata_json(metadata)
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_json_bytes(cls, data: bytes) -> SegmentManifest:
        doc = json.loads(data)
        if not isinstance(doc, dict) or doc.get("version") != "1":
            raise ValueError(f"not a version 1 segment manifest: {data[:80]!r}")
        if doc.get("encryption") is not None:
            raise ValueError("encrypted segments are not supported")
        raw_indexes = doc["segmentIndexes"]
        indexes: dict[IndexType, SegmentIndex | None] = {}
        for t, name in INDEX_FIELDS.items():
            ix = raw_indexes.get(name)
            indexes[t] = None if ix is None else SegmentIndex(int(ix["position"]), int(ix["size"]))
        return cls(ChunkIndex.from_json(doc["chunkIndex"]), indexes, bool(doc["compression"]))


def metadata_json(m: RemoteLogSegmentMetadata) -> dict[str, object]:
    """The segment metadata as Aiven's manifest writes it (Jackson's view of Kafka's class)."""
    tip = m.topic_id_partition
    return {
        "remoteLogSegmentId": {
            "topicIdPartition": {"topicId": kafka_uuid_str(tip.topic_id),
                                 "topicPartition": {"topic": tip.topic, "partition": tip.partition}},
            "id": kafka_uuid_str(m.segment_id.id)},
        "startOffset": m.start_offset, "endOffset": m.end_offset, "maxTimestampMs": m.max_timestamp_ms,
        "brokerId": m.broker_id, "eventTimestampMs": m.event_timestamp_ms,
        "segmentLeaderEpochs": {str(k): v for k, v in sorted(m.segment_leader_epochs.items())},
        "segmentSizeInBytes": m.segment_size_in_bytes, "state": m.state.name,
    }
