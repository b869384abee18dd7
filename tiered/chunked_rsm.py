"""The chunked RemoteStorageManager: Aiven's tiered-storage plugin for Kafka, in Python.

Configured with Aiven's keys (under the broker's ``rsm.config.`` prefix, stripped here):

==============================  ===========================================================
``chunk.size``                  original bytes per chunk (required; 1 .. 1073741823)
``key.prefix``                  prefix of every object key (default empty; end it with ``/``)
``compression.enabled``         zstd-compress each chunk and index (default false)
``storage.backend.class``       the object store (:mod:`strom.tiered.object_storage`;
                                default Aiven's ``...storage.s3.S3Storage``)
``storage.*``                   that store's own keys (bucket, region, endpoint, credentials)
==============================  ===========================================================

Objects per segment, as Aiven lays them out
(``<key.prefix><topic>-<topicId>/<partition>/<20-digit start offset>-<segment uuid>.<suffix>``):
``.log`` (the chunks, back to back), ``.indexes`` (offset, time, producer-snapshot,
leader-epoch and transaction indexes, back to back) and ``.rsm-manifest`` (JSON: the chunk index
and where each index lies, :mod:`strom.tiered.chunk_manifest`). The manifest is written last, so
a segment whose manifest exists was uploaded whole.
"""

from __future__ import annotations

import io
import logging
import threading
from collections import OrderedDict
from collections.abc import Generator, Iterator, Mapping
from pathlib import Path

import zstandard

from strom.plugins.exceptions import RemoteResourceNotFoundError, RemoteStorageError
from strom.plugins.hookspecs.storage import (
    DEFAULT_RSM_CONFIG_PREFIX,
    IndexType,
    LogSegmentData,
    RemoteLogSegmentMetadata,
    kafka_uuid_str,
)
from strom.tiered.chunk_manifest import INDEX_FIELDS, ChunkIndex, SegmentIndex, SegmentManifest
from strom.tiered.config_values import ConfigReader
from strom.tiered.object_storage import ObjectStorage, object_storage_from_config

log = logging.getLogger(__name__)

LOG_SUFFIX = "log"
INDEXES_SUFFIX = "indexes"
MANIFEST_SUFFIX = "rsm-manifest"
MAX_CHUNK_SIZE = (2**31 - 1) // 2  # Aiven's bound for chunk.size
READ_PIECE_BYTES = 1024 * 1024  # a segment read takes the response body in pieces of this size
MANIFEST_CACHE_ENTRIES = 1000


def object_key_main_path(metadata: RemoteLogSegmentMetadata) -> str:
    """Aiven's ``ObjectKeyFactory.mainPath``: ``<topic>-<topicId>/<partition>/<20-digit offset>-<uuid>``."""
    tip = metadata.topic_id_partition
    return (f"{tip.topic}-{kafka_uuid_str(tip.topic_id)}/{tip.partition}/"
            f"{metadata.start_offset:020d}-{kafka_uuid_str(metadata.segment_id.id)}")


class ChunkedRemoteStorageManager:
    """Aiven's ``io.aiven.kafka.tieredstorage.RemoteStorageManager`` over an :class:`ObjectStorage`."""

    def __init__(self, configs: Mapping[str, object], *, config_prefix: str = DEFAULT_RSM_CONFIG_PREFIX) -> None:
        self._config_prefix = config_prefix  # only for naming keys in errors
        self._manifests: OrderedDict[str, SegmentManifest] = OrderedDict()
        self._lock = threading.Lock()
        self._storage: ObjectStorage | None = None
        self.configure(configs)

    def configure(self, configs: Mapping[str, object]) -> None:
        reader = ConfigReader(configs, self._config_prefix)
        chunk_size = reader.integer("chunk.size", minimum=1, maximum=MAX_CHUNK_SIZE)
        key_prefix = reader.string("key.prefix", "")
        compression = reader.flag("compression.enabled", False)
        storage = object_storage_from_config(reader)  # last: it may open connections
        if self._storage is not None:
            self._storage.close()
        self.chunk_size, self.key_prefix, self.compression, self._storage = chunk_size, key_prefix, compression, storage
        with self._lock:
            self._manifests.clear()

    @property
    def storage(self) -> ObjectStorage:
        if self._storage is None:
            raise RemoteStorageError("remote storage manager is closed")
        return self._storage

    def object_key(self, metadata: RemoteLogSegmentMetadata, suffix: str) -> str:
        return f"{self.key_prefix}{object_key_main_path(metadata)}.{suffix}"

    # -- copy -------------------------------------------------------------------------------

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> bytes | None:
        transformed_sizes: list[int] = []
        original_size = 0

        def chunks() -> Iterator[bytes]:
            nonlocal original_size
            compressor = zstandard.ZstdCompressor() if self.compression else None
            with open(data.log_segment, "rb") as f:
                while chunk := f.read(self.chunk_size):
                    original_size += len(chunk)
                    out = compressor.compress(chunk) if compressor is not None else chunk
                    transformed_sizes.append(len(out))
                    yield out

        try:
            self.storage.upload(self.object_key(metadata, LOG_SUFFIX), chunks())
            indexes, blob = self._indexes_blob(data)
        except OSError as e:
            raise RemoteStorageError(f"copying segment {metadata.segment_id}: {e}") from e
        self.storage.upload(self.object_key(metadata, INDEXES_SUFFIX), [blob])
        manifest = SegmentManifest(
            ChunkIndex.build(self.chunk_size, original_size, transformed_sizes, fixed=not self.compression),
            indexes, self.compression)
        self.storage.upload(self.object_key(metadata, MANIFEST_SUFFIX), [manifest.to_json_bytes(metadata)])
        log.debug("copied %s [%d, %d] (%d bytes in %d chunks)", metadata.segment_id, metadata.start_offset,
                  metadata.end_offset, original_size, len(transformed_sizes))
        return None  # Aiven's plugin returns no custom metadata unless asked to

    def _indexes_blob(self, data: LogSegmentData) -> tuple[dict[IndexType, SegmentIndex | None], bytes]:
        sources: dict[IndexType, Path | bytes | None] = {
            IndexType.OFFSET: data.offset_index, IndexType.TIMESTAMP: data.time_index,
            IndexType.PRODUCER_SNAPSHOT: data.producer_snapshot_index,
            IndexType.LEADER_EPOCH: data.leader_epoch_index, IndexType.TRANSACTION: data.transaction_index,
        }
        compressor = zstandard.ZstdCompressor() if self.compression else None
        out = bytearray()
        positions: dict[IndexType, SegmentIndex | None] = {}
        for index_type in INDEX_FIELDS:
            source = sources[index_type]
            if source is None:
                positions[index_type] = None
                continue
            raw = source if isinstance(source, bytes) else source.read_bytes()
            stored = compressor.compress(raw) if compressor is not None else raw
            positions[index_type] = SegmentIndex(len(out), len(stored))
            out += stored
        return positions, bytes(out)

    # -- fetch ------------------------------------------------------------------------------

    def _manifest(self, metadata: RemoteLogSegmentMetadata) -> SegmentManifest:
        key = self.object_key(metadata, MANIFEST_SUFFIX)
        with self._lock:
            cached = self._manifests.get(key)
            if cached is not None:
                self._manifests.move_to_end(key)
                return cached
        try:
            manifest = SegmentManifest.from_json_bytes(self.storage.fetch(key))
        except (ValueError, KeyError, TypeError) as e:
            raise RemoteStorageError(f"manifest {key} is unreadable: {e}") from e
        with self._lock:
            self._manifests[key] = manifest
            while len(self._manifests) > MANIFEST_CACHE_ENTRIES:
                self._manifests.popitem(last=False)
        return manifest

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> io.BufferedReader:
        if start_position < 0 or (end_position is not None and end_position < start_position):
            raise ValueError(f"bad byte range [{start_position}, {end_position}]")
        manifest = self._manifest(metadata)
        last = manifest.chunk_index.original_file_size - 1 if end_position is None else end_position
        pieces = self._range_pieces(metadata, manifest, start_position, last)
        return io.BufferedReader(_PiecesReader(pieces), buffer_size=min(self.chunk_size, 1024 * 1024))

    def _range_pieces(self, metadata: RemoteLogSegmentMetadata, manifest: SegmentManifest, first: int,
                      last: int) -> Generator[memoryview, None, None]:
        chunks = manifest.chunk_index.chunks_for_range(first, last)
        if not chunks:
            return
        key = self.object_key(metadata, LOG_SUFFIX)
        decompressor = zstandard.ZstdDecompressor() if manifest.compression else None
        # One ranged GET from the first chunk to the last, read as it arrives and cut into chunks.
        stream = self.storage.fetch_stream(
            key, chunks[0].transformed_position, chunks[-1].transformed_position + chunks[-1].transformed_size - 1,
            READ_PIECE_BYTES)
        if decompressor is None:
            # Stored bytes are the original bytes: pass the pieces through, trimmed to the range.
            position = chunks[0].original_position
            for piece in stream:
                view = memoryview(piece)
                lo, hi = max(first - position, 0), min(last - position + 1, len(view))
                position += len(view)
                if lo < hi:
                    yield view[lo:hi]
            if position < chunks[-1].original_position + chunks[-1].original_size:
                raise RemoteStorageError(f"{key} ended at byte {position}, before the end of its manifest's chunks")
            return
        pending = bytearray()
        for chunk in chunks:
            while len(pending) < chunk.transformed_size:
                more = next(stream, None)
                if more is None:
                    raise RemoteStorageError(f"{key} ended before chunk {chunk.id} of its manifest")
                pending += more
            stored = bytes(pending[:chunk.transformed_size])
            del pending[:chunk.transformed_size]
            raw = decompressor.decompress(stored, max_output_size=chunk.original_size)
            lo = max(first - chunk.original_position, 0)
            hi = min(last - chunk.original_position + 1, chunk.original_size)
            yield memoryview(raw)[lo:hi]

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> io.BytesIO:
        manifest = self._manifest(metadata)
        where = manifest.indexes.get(index_type)
        if where is None:
            raise RemoteResourceNotFoundError(f"segment {metadata.segment_id} has no {index_type.name} index")
        stored = (self.storage.fetch(self.object_key(metadata, INDEXES_SUFFIX), where.position,
                                     where.position + where.size - 1) if where.size else b"")
        if manifest.compression:
            stored = zstandard.ZstdDecompressor().decompress(stored) if stored else b""
        return io.BytesIO(stored)

    # -- delete -----------------------------------------------------------------------------

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        # The manifest goes first: a segment without one is never read, even if a later delete fails.
        keys = [self.object_key(metadata, s) for s in (MANIFEST_SUFFIX, LOG_SUFFIX, INDEXES_SUFFIX)]
        with self._lock:
            self._manifests.pop(keys[0], None)
        self.storage.delete(keys)

    def close(self) -> None:
        if self._storage is not None:
            self._storage.close()
            self._storage = None


class _PiecesReader(io.RawIOBase):
    """A raw stream over an iterator of byte strings (pulled lazily, one ranged GET at a time)."""

    def __init__(self, pieces: Generator[memoryview, None, None]) -> None:
        self._pieces = pieces
        self._current = memoryview(b"")

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        # Ends the generator, whose finally closes the HTTP response of a read stopped early.
        self._pieces.close()
        super().close()

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        while not self._current:
            piece = next(self._pieces, None)
            if piece is None:
                return 0
            self._current = piece
        n = min(len(buffer), len(self._current))
        buffer[:n] = self._current[:n]
        self._current = self._current[n:]
        return n
