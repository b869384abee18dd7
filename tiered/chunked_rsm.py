"""The chunked RemoteStorageManager: Aiven's tiered-storage plugin for Kafka, in Python.

Configured with Aiven's keys (under the broker's ``rsm.config.`` prefix, stripped here):

==============================  ===========================================================
``chunk.size``                  original bytes per chunk (required; 1 .. 1073741823)
``key.prefix``                  prefix of every object key (default empty; end it with ``/``)
``compression.enabled``         zstd-compress each chunk and index (default false)
``storage.backend.class``       the object store (:mod:`strom.tiered.object_storage`;
                                default Aiven's ``...storage.s3.S3Storage``)
``storage.*``                   that store's own keys (bucket, region, endpoint, credentials)
``fetch.chunk.cache.*``         a chunk cache and prefetch (:mod:`strom.tiered.chunk_cache`)
``fetch.indexes.cache.size``    bytes of segment indexes kept in memory (default 10 MiB;
                                ``fetch.indexes.cache.retention.ms``, default 600000)
==============================  ===========================================================

Objects per segment, as Aiven lays them out
(``<key.prefix><topic>-<topicId>/<partition>/<20-digit start offset>-<segment uuid>.<suffix>``):
``.log`` (the chunks, back to back), ``.indexes`` (offset, time, producer-snapshot,
leader-epoch and transaction indexes, back to back) and ``.rsm-manifest`` (JSON: the chunk index
and where each index lies, :mod:`strom.tiered.chunk_manifest`). The manifest is written last, so
a segment whose manifest exists was uploaded whole.

Reads: without a chunk cache a read is one ranged GET of the chunks it covers, streamed. With one,
a chunk is taken from the cache, or from the GET already bringing it, or fetched by a new GET that
also brings the chunks of the prefetch window after it (one request for the run of missing chunks,
cut into chunks as it arrives: each waiting read goes on as soon as its own chunk is in). Each chunk
read moves the window: once half of it is missing, one GET fetches that half, so a sequential
reader finds its next chunks fetched, at few requests per segment. A segment's manifest and its
indexes are fetched once (one thread fetches, others asking meanwhile wait for it) and cached;
all the indexes come in one GET of the ``.indexes`` object: a sequential reader makes three GETs
per segment (manifest, indexes, the ``.log`` object whole).
"""

from __future__ import annotations

import functools
import io
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import TypeVar, cast

import zstandard

from strom.plugins.exceptions import RemoteResourceNotFoundError, RemoteStorageError
from strom.plugins.hookspecs.storage import (
    DEFAULT_RSM_CONFIG_PREFIX,
    IndexType,
    LogSegmentData,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
    kafka_uuid_str,
)
from strom.tiered.chunk_cache import (
    CACHE_KEY_PREFIX,
    DEFAULT_GET_TIMEOUT_MS,
    DEFAULT_THREADS,
    ChunkCache,
    ChunkData,
    ChunkKey,
    MemoryChunkCache,
    chunk_cache_from_config,
)
from strom.tiered.chunk_manifest import INDEX_FIELDS, Chunk, ChunkIndex, SegmentIndex, SegmentManifest
from strom.tiered.config_values import ConfigReader
from strom.tiered.object_storage import ObjectStorage, S3Storage, object_storage_from_config

log = logging.getLogger(__name__)

LOG_SUFFIX = "log"
INDEXES_SUFFIX = "indexes"
MANIFEST_SUFFIX = "rsm-manifest"
MAX_CHUNK_SIZE = (2**31 - 1) // 2  # Aiven's bound for chunk.size
READ_PIECE_BYTES = 1024 * 1024  # a segment read takes the response body in pieces of this size
MANIFEST_CACHE_ENTRIES = 1000
DEFAULT_INDEXES_CACHE_BYTES = 10 * 1024 * 1024  # Aiven's fetch.indexes.cache.size default
DEFAULT_INDEXES_CACHE_RETENTION_MS = 600_000
_INDEX_NUMBER = {t: n for n, t in enumerate(IndexType)}  # an index's slot in the indexes cache
# A segment's indexes up to this size come in one GET (all of them); a larger .indexes object
# (huge time or transaction indexes) is fetched index by index.
WHOLE_INDEXES_MAX_BYTES = 8 * 1024 * 1024
_T = TypeVar("_T")


class NotCached(Exception):
    """A ``cached_only`` read needed something not in this process's memory (never a storage
    error: the caller reads again off its event loop)."""


def object_key_main_path(metadata: RemoteLogSegmentMetadata) -> str:
    """Aiven's ``ObjectKeyFactory.mainPath``: ``<topic>-<topicId>/<partition>/<20-digit offset>-<uuid>``."""
    return _main_path(metadata.topic_id_partition, metadata.start_offset, metadata.segment_id.id)


@functools.lru_cache(maxsize=4096)
def _main_path(tip: TopicIdPartition, start_offset: int, segment_uuid: uuid.UUID) -> str:
    # Remembered: every remote read names its chunks by it (two base64 encodings each time:
    # ~4% of the broker's GIL time in bench/tiered_fetch.py (a)).
    return f"{tip.topic}-{kafka_uuid_str(tip.topic_id)}/{tip.partition}/{start_offset:020d}-{kafka_uuid_str(segment_uuid)}"


class ChunkedRemoteStorageManager:
    """Aiven's ``io.aiven.kafka.tieredstorage.RemoteStorageManager`` over an :class:`ObjectStorage`."""

    def __init__(self, configs: Mapping[str, object], *, config_prefix: str = DEFAULT_RSM_CONFIG_PREFIX) -> None:
        self._config_prefix = config_prefix  # only for naming keys in errors
        # A manifest with its chunk list (built once: a read walks it chunk by chunk).
        self._manifests: OrderedDict[str, tuple[SegmentManifest, list[Chunk]]] = OrderedDict()
        self._lock = threading.Lock()
        self._storage: ObjectStorage | None = None
        self.chunk_cache: ChunkCache | None = None
        self._indexes_cache = MemoryChunkCache(DEFAULT_INDEXES_CACHE_BYTES)
        self._inflight: dict[ChunkKey, Future[ChunkData]] = {}  # chunks a GET is bringing
        self._loading: dict[str, Future[object]] = {}  # manifests and indexes a GET is bringing
        self._fetchers: ThreadPoolExecutor | None = None
        self.configure(configs)

    def configure(self, configs: Mapping[str, object]) -> None:
        reader = ConfigReader(configs, self._config_prefix)
        chunk_size = reader.integer("chunk.size", minimum=1, maximum=MAX_CHUNK_SIZE)
        key_prefix = reader.string("key.prefix", "")
        compression = reader.flag("compression.enabled", False)
        prefetch = reader.integer(CACHE_KEY_PREFIX + "prefetch.max.size", 0, minimum=0, maximum=2**31 - 1)
        threads = reader.integer(CACHE_KEY_PREFIX + "thread.pool.size", DEFAULT_THREADS, minimum=1)
        get_timeout_ms = reader.integer(CACHE_KEY_PREFIX + "get.timeout.ms", DEFAULT_GET_TIMEOUT_MS, minimum=1)
        indexes_size = reader.integer("fetch.indexes.cache.size", DEFAULT_INDEXES_CACHE_BYTES, minimum=-1)
        indexes_retention = reader.integer("fetch.indexes.cache.retention.ms", DEFAULT_INDEXES_CACHE_RETENTION_MS,
                                           minimum=-1)
        cache = chunk_cache_from_config(reader)
        storage = object_storage_from_config(reader)  # last: it may open connections
        self._close_fetch_side()
        if self._storage is not None:
            self._storage.close()
        self.chunk_size, self.key_prefix, self.compression, self._storage = chunk_size, key_prefix, compression, storage
        self.chunk_cache, self.prefetch_max_size, self.get_timeout_s = cache, prefetch, get_timeout_ms / 1000
        if isinstance(cache, MemoryChunkCache) and isinstance(storage, S3Storage):
            cache.recycle = storage.buffers.give  # evicted chunks' buffers take the next GETs
        self._indexes_cache = MemoryChunkCache(None if indexes_size == -1 else indexes_size,
                                               None if indexes_retention == -1 else indexes_retention / 1000)
        self._fetchers = (ThreadPoolExecutor(threads, thread_name_prefix="remote-chunk-fetch")
                          if cache is not None else None)
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
                if compressor is None:
                    # Stored bytes are the original bytes: read in the store's upload parts (each
                    # piece is then sent as it was read, never joined from chunks) and derive the
                    # chunk sizes from the file's.
                    piece = max(getattr(self.storage, "part_size", 0), self.chunk_size)
                    while block := f.read(piece):
                        original_size += len(block)
                        yield block
                    full, rest = divmod(original_size, self.chunk_size)
                    transformed_sizes.extend([self.chunk_size] * full + ([rest] if rest else []))
                    return
                while chunk := f.read(self.chunk_size):
                    original_size += len(chunk)
                    out = compressor.compress(chunk)
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
        return self._manifest_and_chunks(metadata)[0]

    def _manifest_and_chunks(self, metadata: RemoteLogSegmentMetadata,
                             cached_only: bool = False) -> tuple[SegmentManifest, list[Chunk]]:
        key = self.object_key(metadata, MANIFEST_SUFFIX)
        with self._lock:
            cached = self._manifests.get(key)
            if cached is not None:
                self._manifests.move_to_end(key)
                return cached
        if cached_only:
            raise NotCached(key)
        return self._single_flight(key, lambda: self._load_manifest(key))

    def _load_manifest(self, key: str) -> tuple[SegmentManifest, list[Chunk]]:
        try:
            manifest = SegmentManifest.from_json_bytes(self.storage.fetch(key))
        except (ValueError, KeyError, TypeError) as e:
            raise RemoteStorageError(f"manifest {key} is unreadable: {e}") from e
        entry = (manifest, manifest.chunk_index.chunks())
        with self._lock:
            self._manifests[key] = entry
            while len(self._manifests) > MANIFEST_CACHE_ENTRIES:
                self._manifests.popitem(last=False)
        return entry

    def _single_flight(self, key: str, load: Callable[[], _T]) -> _T:
        """``load()``, run by one thread at a time per ``key``: a thread asking while another loads
        waits for that result (a reader and the prefetch of the same segment made two GETs of
        each small object). ``load`` caches what it fetched before it returns."""
        mine: Future[object] = Future()
        with self._lock:
            running = self._loading.setdefault(key, mine)
        if running is not mine:
            try:
                return cast("_T", running.result(self.get_timeout_s))
            except FutureTimeout:
                raise RemoteStorageError(f"{key} not fetched within {CACHE_KEY_PREFIX}get.timeout.ms") from None
        try:
            result = load()
        except BaseException as e:
            mine.set_exception(e)
            raise
        else:
            mine.set_result(result)
            return result
        finally:
            with self._lock:
                self._loading.pop(key, None)

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> io.BufferedReader:
        pieces = self.fetch_log_segment_pieces(metadata, start_position, end_position)
        return io.BufferedReader(_PiecesReader(pieces), buffer_size=min(self.chunk_size, 1024 * 1024))

    def fetch_log_segment_pieces(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                                 end_position: int | None = None, *,
                                 cached_only: bool = False) -> Generator[memoryview, None, None]:
        """Original bytes ``start_position..end_position`` (inclusive; to the segment's end when
        ``None``) as views of the chunks, pulled lazily: the copy-free form of
        :meth:`fetch_log_segment` (each view is valid for as long as the caller keeps it).

        ``cached_only``: from this process's memory alone (a memory chunk cache), never waiting
        on S3 or a disk: the manifest or a chunk not in memory raises :class:`NotCached` (from the
        call, or while iterating), so a caller on an event loop can take the read to a thread."""
        if start_position < 0 or (end_position is not None and end_position < start_position):
            raise ValueError(f"bad byte range [{start_position}, {end_position}]")
        if cached_only and not isinstance(self.chunk_cache, MemoryChunkCache):
            raise NotCached("no memory chunk cache")
        manifest, chunks = self._manifest_and_chunks(metadata, cached_only)
        last = manifest.chunk_index.original_file_size - 1 if end_position is None else end_position
        if self.chunk_cache is None:
            return self._range_pieces(metadata, manifest, start_position, last)
        return self._cached_pieces(metadata, manifest, chunks, start_position, last, cached_only)

    def cached_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes | None:
        """The index from the segment indexes cache, or ``None`` (never fetched here)."""
        with self._lock:
            entry = self._manifests.get(self.object_key(metadata, MANIFEST_SUFFIX))
        if entry is None or index_type not in entry[0].indexes:
            return None
        cached = self._indexes_cache.get((self.object_key(metadata, INDEXES_SUFFIX), _INDEX_NUMBER[index_type]))
        return None if cached is None else bytes(cached)

    def prefetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int) -> None:
        """Start fetching the chunks from ``start_position`` (and the prefetch window after it)
        into the chunk cache, without waiting for them: a reader about to reach this segment
        (the next one of a sequential consumer) finds them there. Nothing without a cache."""
        if self.chunk_cache is None or self.prefetch_max_size <= 0:
            return
        manifest, chunks = self._manifest_and_chunks(metadata)
        if 0 <= start_position < manifest.chunk_index.original_file_size:
            cid = start_position // manifest.chunk_index.original_chunk_size
            self._start_run(self.object_key(metadata, LOG_SUFFIX), manifest, chunks, cid,
                            self._window_last(manifest, chunks, cid), first_required=False)

    # -- the chunk cache's side -------------------------------------------------------------

    def _cached_pieces(self, metadata: RemoteLogSegmentMetadata, manifest: SegmentManifest, chunks: list[Chunk],
                       first: int, last: int, cached_only: bool = False) -> Generator[memoryview, None, None]:
        key = self.object_key(metadata, LOG_SUFFIX)
        size = manifest.chunk_index.original_chunk_size
        last = min(last, manifest.chunk_index.original_file_size - 1)
        for cid in range(first // size, last // size + 1):
            chunk = chunks[cid]
            data = self._chunk(key, manifest, chunks, cid, cached_only)
            lo = max(first - chunk.original_position, 0)
            hi = min(last - chunk.original_position + 1, chunk.original_size)
            yield memoryview(data)[lo:hi]

    def _window_last(self, manifest: SegmentManifest, chunks: list[Chunk], cid: int) -> int:
        """The last chunk of the prefetch window that starts after chunk ``cid``."""
        if self.prefetch_max_size <= 0:
            return cid
        end = chunks[cid].original_position + chunks[cid].original_size + self.prefetch_max_size - 1
        return min(end // manifest.chunk_index.original_chunk_size, len(chunks) - 1)

    def _chunk(self, key: str, manifest: SegmentManifest, chunks: list[Chunk], cid: int,
               cached_only: bool = False) -> ChunkData:
        cache = self.chunk_cache
        assert cache is not None
        data = cache.get((key, cid))
        if data is None and cached_only:
            raise NotCached(f"chunk {cid} of {key}")
        if data is None:
            future = self._start_run(key, manifest, chunks, cid, self._window_last(manifest, chunks, cid),
                                     first_required=True)
            assert future is not None
            try:
                data = future.result(self.get_timeout_s)
            except FutureTimeout:
                raise RemoteStorageError(f"chunk {cid} of {key} not fetched within "
                                         f"{CACHE_KEY_PREFIX}get.timeout.ms") from None
        elif self.prefetch_max_size > 0 and cid + 1 < len(chunks):
            # A hit moves the window: fetch its missing part once it is half the window (or all
            # that is left of the segment), in one GET.
            window_last = self._window_last(manifest, chunks, cid)
            missing = cid + 1
            while missing <= window_last and self._present(key, missing):
                missing += 1
            if missing <= window_last and ((window_last - missing + 1) * 2 >= window_last - cid
                                           or window_last == len(chunks) - 1):
                self._start_run(key, manifest, chunks, missing, window_last, first_required=False)
        return data

    def _present(self, key: str, cid: int) -> bool:
        with self._lock:
            if (key, cid) in self._inflight:
                return True
        cache = self.chunk_cache
        return cache is not None and (key, cid) in cache

    def _start_run(self, key: str, manifest: SegmentManifest, chunks: list[Chunk], first: int, last: int, *,
                   first_required: bool) -> Future[ChunkData] | None:
        """Claim chunks ``first..last`` up to the first one cached or being fetched, and fetch
        them with one GET on a fetcher thread. With ``first_required`` chunk ``first`` is
        claimed even if cached (its reader just missed it) and its future is returned."""
        cache, fetchers = self.chunk_cache, self._fetchers
        if cache is None or fetchers is None:
            raise RemoteStorageError("remote storage manager is closed")
        run: list[Chunk] = []
        futures: list[Future[ChunkData]] = []
        with self._lock:
            existing = self._inflight.get((key, first))
            if existing is not None:
                return existing
            for cid in range(first, last + 1):
                ck = (key, cid)
                if ck in self._inflight or ((cid > first or not first_required) and ck in cache):
                    break
                future: Future[ChunkData] = Future()
                self._inflight[ck] = future
                run.append(chunks[cid])
                futures.append(future)
        if not run:
            return None
        log.debug("fetching chunks %d-%d of %s", run[0].id, run[-1].id, key)
        try:
            fetchers.submit(self._fetch_run, key, manifest, chunks, run, futures)
        except RuntimeError as e:  # shut down meanwhile
            self._fail_run(key, run, futures, RemoteStorageError(f"remote storage manager is closed: {e}"))
        return futures[0]

    def _fetch_run(self, key: str, manifest: SegmentManifest, manifest_chunks: list[Chunk], run: list[Chunk],
                   futures: list[Future[ChunkData]]) -> None:
        cache = self.chunk_cache
        decompressor = zstandard.ZstdDecompressor() if manifest.compression else None
        parts = self.storage.fetch_sized(key, run[0].transformed_position, [c.transformed_size for c in run],
                                         whole_object=run[0].id == 0 and run[-1].id == len(manifest_chunks) - 1)
        try:
            for chunk, future in zip(run, futures, strict=True):
                stored = next(parts, None)
                if stored is None:
                    raise RemoteStorageError(f"{key} ended before chunk {chunk.id} of its manifest")
                data = (decompressor.decompress(stored, max_output_size=chunk.original_size)
                        if decompressor is not None else stored)
                if len(data) != chunk.original_size:
                    raise RemoteStorageError(f"chunk {chunk.id} of {key} has {len(data)} bytes, "
                                             f"its manifest says {chunk.original_size}")
                if cache is not None:
                    cache.put((key, chunk.id), data)
                with self._lock:  # cached first: a reader sees the chunk in one place or the other
                    self._inflight.pop((key, chunk.id), None)
                future.set_result(data)
        except BaseException as e:
            error = e if isinstance(e, RemoteStorageError) else RemoteStorageError(f"fetching {key}: {e}")
            self._fail_run(key, run, futures, error)
            if not isinstance(e, Exception):
                raise
        finally:
            parts.close()

    def _fail_run(self, key: str, run: list[Chunk], futures: list[Future[ChunkData]], error: Exception) -> None:
        with self._lock:
            for chunk, future in zip(run, futures, strict=True):
                if not future.done():
                    self._inflight.pop((key, chunk.id), None)
                    future.set_exception(error)

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
        if manifest.indexes.get(index_type) is None:
            raise RemoteResourceNotFoundError(f"segment {metadata.segment_id} has no {index_type.name} index")
        key = self.object_key(metadata, INDEXES_SUFFIX)
        # Aiven's segment indexes cache: a consumer's every fetch looks up the offset index.
        cached = self._indexes_cache.get((key, _INDEX_NUMBER[index_type]))
        if cached is None:
            self._single_flight(key, lambda: self._load_indexes(key, manifest, index_type))
            # The GET this thread waited for may have brought another index alone (a large
            # .indexes object), or the cache dropped this one since: then fetch it here.
            cached = self._indexes_cache.get((key, _INDEX_NUMBER[index_type]))
            if cached is None:
                cached = self._load_indexes(key, manifest, index_type)
        return io.BytesIO(cached)

    def _load_indexes(self, key: str, manifest: SegmentManifest, wanted: IndexType) -> bytes:
        """Index ``wanted`` of a segment, fetched with the others in one GET of the ``.indexes``
        object when it is small (a reader needs the offset index, a read_committed one the
        transaction index, ListOffsets the time index: one request for all), cached."""
        cached = self._indexes_cache.get((key, _INDEX_NUMBER[wanted]))
        if cached is not None:  # loaded by the thread this one waited for
            return bytes(cached)
        present = {t: ix for t, ix in manifest.indexes.items() if ix is not None}
        first = min(ix.position for ix in present.values())
        end = max(ix.position + ix.size for ix in present.values())
        if end - first > WHOLE_INDEXES_MAX_BYTES:
            present = {wanted: present[wanted]}
            first, end = present[wanted].position, present[wanted].position + present[wanted].size
        blob = self.storage.fetch(key, first, end - 1) if end > first else b""
        decompressor = zstandard.ZstdDecompressor() if manifest.compression else None
        out = b""
        for index_type, ix in present.items():
            stored = blob[ix.position - first:ix.position - first + ix.size]
            data = decompressor.decompress(stored) if decompressor is not None and stored else stored
            self._indexes_cache.put((key, _INDEX_NUMBER[index_type]), data)
            if index_type == wanted:
                out = data
        return out

    # -- delete -----------------------------------------------------------------------------

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        # The manifest goes first: a segment without one is never read, even if a later delete fails.
        keys = [self.object_key(metadata, s) for s in (MANIFEST_SUFFIX, LOG_SUFFIX, INDEXES_SUFFIX)]
        with self._lock:
            self._manifests.pop(keys[0], None)
        # Nothing of a deleted segment stays cached (a new copy of it has a new segment id).
        if self.chunk_cache is not None:
            self.chunk_cache.remove_object(keys[1])
        self._indexes_cache.remove_object(keys[2])
        self.storage.delete(keys)

    def _close_fetch_side(self) -> None:
        if self._fetchers is not None:
            self._fetchers.shutdown(wait=True, cancel_futures=True)
            self._fetchers = None
        with self._lock:
            inflight, self._inflight = self._inflight, {}
        for future in inflight.values():  # runs cancelled before they started
            if not future.done():
                future.set_exception(RemoteStorageError("remote storage manager is closed"))
        if self.chunk_cache is not None:
            self.chunk_cache.close()
            self.chunk_cache = None

    def close(self) -> None:
        self._close_fetch_side()
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
