"""Size-bounded caches of a remote segment's chunks (Aiven's ``fetch.chunk.cache.*``).

The chunked remote storage manager reads a segment's ``.log`` object chunk by chunk; with a cache
configured a chunk read once (or prefetched) is served again from here instead of S3. Aiven's
keys, under the broker's ``rsm.config.`` prefix:

=====================================  ==========================================================
``fetch.chunk.cache.class``            ``io.aiven.kafka.tieredstorage.fetch.cache.MemoryChunkCache``
                                       (alias ``memory``) or ``...DiskChunkCache`` (alias
                                       ``disk``); unset: no cache, no prefetch
``fetch.chunk.cache.size``             the bound in bytes of the cached chunks (required with a
                                       class; -1 unbounded)
``fetch.chunk.cache.retention.ms``     a chunk not read for this long is dropped (600000; -1 never)
``fetch.chunk.cache.path``             the disk cache's directory (required for ``disk``); emptied
                                       at start, as Aiven's plugin does: a cached chunk never
                                       outlives the process that fetched it
``fetch.chunk.cache.prefetch.max.size`` bytes past a read chunk fetched ahead (0: none)
``fetch.chunk.cache.thread.pool.size`` threads fetching chunks (default 4)
``fetch.chunk.cache.get.timeout.ms``   how long a read waits for a chunk being fetched (10000)
=====================================  ==========================================================

A disk-cached chunk is a file holding a header (magic, length, CRC-32C of the data) and the data:
a file that is short, torn or altered fails its check, is deleted and reads as a miss, so the
chunk is fetched again and never served wrong. Files are written aside and renamed into place.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import struct
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import crc32c

from strom.core.exceptions import ConfigError
from strom.tiered.config_values import ConfigReader

log = logging.getLogger(__name__)

MEMORY_CHUNK_CACHE_CLASS = "io.aiven.kafka.tieredstorage.fetch.cache.MemoryChunkCache"
DISK_CHUNK_CACHE_CLASS = "io.aiven.kafka.tieredstorage.fetch.cache.DiskChunkCache"
CACHE_CLASS_ALIASES = {"memory": MEMORY_CHUNK_CACHE_CLASS, "disk": DISK_CHUNK_CACHE_CLASS}
CACHE_KEY_PREFIX = "fetch.chunk.cache."
DEFAULT_RETENTION_MS = 600_000
DEFAULT_THREADS = 4
DEFAULT_GET_TIMEOUT_MS = 10_000

ChunkKey = tuple[str, int]  # (the .log object's key, chunk id)
# A chunk as fetched: S3 bodies are read into a bytearray of their own (never changed after).
ChunkData = bytes | bytearray

_REFCOUNTS = sys.implementation.name == "cpython"  # sys.getrefcount tells who holds a buffer
_HEADER = struct.Struct(">4sQI")  # magic, data length, CRC-32C of the data
_MAGIC = b"STCC"


class ChunkCache(ABC):
    """An LRU of chunks bounded by their total size (and by time since last read); thread-safe.

    Subclasses keep the bytes (:meth:`_load`, :meth:`_store`, :meth:`_drop`); this class keeps the
    order, sizes and bounds."""

    def __init__(self, size: int | None, retention_s: float | None) -> None:
        self.size = size  # None: unbounded
        self.retention_s = retention_s
        self._entries: OrderedDict[ChunkKey, tuple[int, float]] = OrderedDict()  # key -> (bytes, last read)
        self._used = 0
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0

    @property
    def used(self) -> int:
        """Bytes held."""
        return self._used

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def get(self, key: ChunkKey) -> ChunkData | None:
        """The chunk, or ``None`` (not cached, expired, or a disk copy failing its check)."""
        now = time.monotonic()
        with self._lock:
            self._expire(now)
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries[key] = (entry[0], now)
            self._entries.move_to_end(key)
        data = self._load(key)
        if data is None:
            with self._lock:
                self.misses += 1
                popped = self._entries.pop(key, None)
                if popped is not None:
                    self._used -= popped[0]
            self._drop(key)
            return None
        with self._lock:
            self.hits += 1
        return data

    def put(self, key: ChunkKey, data: ChunkData) -> None:
        """Cache ``data`` under ``key``, evicting the least recently read chunks past the bound. A
        chunk larger than the whole bound is not cached."""
        if self.size is not None and len(data) > self.size:
            return
        self._store(key, data)
        dropped: list[ChunkKey] = []
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._used -= old[0]
            self._entries[key] = (len(data), time.monotonic())
            self._used += len(data)
            while self.size is not None and self._used > self.size:
                evicted, (n, _) = self._entries.popitem(last=False)
                self._used -= n
                self.evictions += 1
                dropped.append(evicted)
        for k in dropped:
            self._drop(k)

    def remove_object(self, object_key: str) -> None:
        """Drop every chunk of one object (its segment was deleted from remote storage)."""
        with self._lock:
            gone = [k for k in self._entries if k[0] == object_key]
            for k in gone:
                self._used -= self._entries.pop(k)[0]
        for k in gone:
            self._drop(k)

    def _expire(self, now: float) -> None:
        # Caller holds the lock. Entries are in last-read order: the expired ones are at the front.
        if self.retention_s is None:
            return
        while self._entries:
            key, (n, last) = next(iter(self._entries.items()))
            if now - last < self.retention_s:
                break
            del self._entries[key]
            self._used -= n
            self.evictions += 1
            self._drop(key)

    def close(self) -> None:
        with self._lock:
            keys = list(self._entries)
            self._entries.clear()
            self._used = 0
        for k in keys:
            self._drop(k)

    @abstractmethod
    def _load(self, key: ChunkKey) -> ChunkData | None:
        raise NotImplementedError

    @abstractmethod
    def _store(self, key: ChunkKey, data: ChunkData) -> None:
        raise NotImplementedError

    @abstractmethod
    def _drop(self, key: ChunkKey) -> None:
        raise NotImplementedError


class MemoryChunkCache(ChunkCache):
    """Aiven's ``MemoryChunkCache``: chunks as byte strings in this process.

    ``recycle``: called with a dropped chunk's buffer when nothing else refers to it (no reader's
    view, no fetch's future): the object storage's buffer pool takes it back."""

    def __init__(self, size: int | None, retention_s: float | None = None,
                 recycle: Callable[[bytearray], None] | None = None) -> None:
        super().__init__(size, retention_s)
        self._data: dict[ChunkKey, ChunkData] = {}
        self.recycle = recycle

    def _load(self, key: ChunkKey) -> ChunkData | None:
        return self._data.get(key)

    def _store(self, key: ChunkKey, data: ChunkData) -> None:
        self._data[key] = data

    def _drop(self, key: ChunkKey) -> None:
        data = self._data.pop(key, None)
        # Two references (this name and getrefcount's argument): no reader holds a view of the
        # buffer (a memoryview refers to the bytearray it shows) and none can get one any more
        # (it left the dict under the GIL), so it may be overwritten by the next GET.
        if (self.recycle is not None and type(data) is bytearray and _REFCOUNTS
                and sys.getrefcount(data) == 2):
            self.recycle(data)


class DiskChunkCache(ChunkCache):
    """Aiven's ``DiskChunkCache``: one checked file per chunk under ``<path>/cache`` (written in
    ``<path>/temp`` and renamed). The directory is emptied when the cache is built."""

    def __init__(self, path: Path, size: int | None, retention_s: float | None = None) -> None:
        super().__init__(size, retention_s)
        self.path = path
        self.cache_dir = path / "cache"
        self.temp_dir = path / "temp"
        if not path.is_dir() or not os.access(path, os.W_OK):
            raise ConfigError(CACHE_KEY_PREFIX + "path", str(path), "an existing writable directory")
        # Nothing cached by an earlier process is trusted: its segments may be gone from S3.
        for child in path.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        self.cache_dir.mkdir()
        self.temp_dir.mkdir()

    def file_of(self, key: ChunkKey) -> Path:
        name = hashlib.sha256(f"{key[0]}\0{key[1]}".encode()).hexdigest()
        return self.cache_dir / name

    def _load(self, key: ChunkKey) -> ChunkData | None:
        path = self.file_of(key)
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        if len(raw) >= _HEADER.size:
            magic, length, crc = _HEADER.unpack_from(raw)
            data = raw[_HEADER.size:]
            if magic == _MAGIC and length == len(data) and crc32c.crc32c(data) == crc:
                return data
        log.warning("chunk cache file %s (chunk %d of %s) failed its check: fetching the chunk again",
                    path, key[1], key[0])
        return None

    def _store(self, key: ChunkKey, data: ChunkData) -> None:
        path = self.file_of(key)
        tmp = self.temp_dir / f"{path.name}.{threading.get_ident()}"
        try:
            with open(tmp, "wb") as f:
                f.write(_HEADER.pack(_MAGIC, len(data), crc32c.crc32c(data)))
                f.write(data)
            os.replace(tmp, path)
        except OSError as e:  # a full or failing disk costs a refetch, never a failed read
            log.warning("chunk cache: writing %s failed: %s", path, e)
            tmp.unlink(missing_ok=True)

    def _drop(self, key: ChunkKey) -> None:
        self.file_of(key).unlink(missing_ok=True)


def chunk_cache_from_config(reader: ConfigReader) -> ChunkCache | None:
    """The cache ``fetch.chunk.cache.class`` names (``None`` when unset)."""
    configured = reader.optional_string(CACHE_KEY_PREFIX + "class")
    if configured is None or not configured.strip():
        return None
    cls = CACHE_CLASS_ALIASES.get(configured.strip(), configured.strip())
    size = reader.integer(CACHE_KEY_PREFIX + "size", minimum=-1)
    retention = reader.integer(CACHE_KEY_PREFIX + "retention.ms", DEFAULT_RETENTION_MS, minimum=-1)
    bound = None if size == -1 else size
    retention_s = None if retention == -1 else retention / 1000
    if cls == MEMORY_CHUNK_CACHE_CLASS:
        return MemoryChunkCache(bound, retention_s)
    if cls == DISK_CHUNK_CACHE_CLASS:
        path = Path(reader.string(CACHE_KEY_PREFIX + "path"))
        if not path.is_dir() or not os.access(path, os.W_OK):
            raise ConfigError(reader.prefix + CACHE_KEY_PREFIX + "path", str(path), "an existing writable directory")
        return DiskChunkCache(path, bound, retention_s)
    raise ConfigError(reader.prefix + CACHE_KEY_PREFIX + "class", configured,
                      f"{MEMORY_CHUNK_CACHE_CLASS} (or memory) or {DISK_CHUNK_CACHE_CLASS} (or disk)")
