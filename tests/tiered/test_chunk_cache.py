"""The chunk cache of the chunked RemoteStorageManager (Aiven's ``fetch.chunk.cache.*``) and the
remote fetch quota, without a broker: the caches' bounds and eviction, the disk cache keeping
nothing from an earlier process and never serving a damaged file, prefetch of the next chunks, and
reads through the manager on Aiven's filesystem backend (a real object store in a directory)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from strom.core.exceptions import ConfigError
from strom.core.testing import wait_for
from strom.plugins.hookspecs.storage import (
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
)
from strom.tiered.chunk_cache import DiskChunkCache, MemoryChunkCache
from strom.tiered.chunked_rsm import LOG_SUFFIX, ChunkedRemoteStorageManager
from strom.tiered.object_storage import BufferPool
from strom.tiered.rlm_quota import RLMQuotaManager

CHUNK = 1000


def test_memory_cache_evicts_the_least_recently_read_past_its_bound() -> None:
    cache = MemoryChunkCache(size=300)
    for i in range(3):
        cache.put(("seg", i), bytes([i]) * 100)
    assert cache.get(("seg", 0)) == bytes([0]) * 100  # read: now the most recent
    cache.put(("seg", 3), b"\3" * 100)
    assert ("seg", 1) not in cache  # the least recently read went
    assert [cache.get(("seg", i)) is not None for i in range(4)] == [True, False, True, True]
    assert cache.used == 300 and len(cache) == 3 and cache.evictions == 1
    cache.put(("seg", 9), b"x" * 301)  # larger than the whole bound: not cached, nothing evicted
    assert ("seg", 9) not in cache and cache.used == 300
    cache.put(("seg", 2), b"y" * 50)  # replacing an entry counts its new size
    assert cache.used == 250


def test_a_dropped_chunk_buffer_is_reused_only_when_no_reader_holds_it() -> None:
    """The memory cache gives an evicted chunk's buffer back to the S3 buffer pool (the next GET
    reads into it) only when nothing refers to it: a reader's view of an evicted chunk keeps
    showing that chunk's bytes."""
    pool = BufferPool()
    cache = MemoryChunkCache(16, recycle=pool.give)
    first = pool.take(8)
    first[:] = b"chunk-0."
    cache.put(("k", 0), first)
    del first
    held = cache.get(("k", 0))
    assert held is not None
    view = memoryview(held)[2:7]  # as a fetch holds its pieces
    del held
    cache.put(("k", 1), bytearray(b"chunk-1."))
    cache.put(("k", 2), bytearray(b"chunk-2."))  # evicts chunk 0, which the view still shows
    assert pool.take(8) is not view.obj  # not reused: a fresh buffer
    assert bytes(view) == b"unk-0"
    cache.put(("k", 3), bytearray(b"chunk-3."))  # evicts chunk 1, held by no one
    reused = pool.take(8)
    assert reused == b"chunk-1." and pool.reused == 1
    reused[:] = b"new data"  # the next GET's bytes
    assert bytes(view) == b"unk-0" and cache.get(("k", 2)) == b"chunk-2."


def test_memory_cache_drops_a_chunk_unread_for_its_retention() -> None:
    cache = MemoryChunkCache(size=None, retention_s=0.0)  # retention 0: nothing outlives its next look-up
    cache.put(("seg", 0), b"a")
    assert cache.get(("seg", 0)) is None
    assert cache.used == 0 and len(cache) == 0


def test_remove_object_drops_only_that_segments_chunks(tmp_path: Path) -> None:
    cache = DiskChunkCache(tmp_path, size=10_000)
    for key in ("a", "b"):
        for i in range(3):
            cache.put((key, i), key.encode() * 10)
    cache.remove_object("a")
    assert [k for k in (("a", 0), ("a", 1), ("b", 0), ("b", 2)) if k in cache] == [("b", 0), ("b", 2)]
    assert len(list((tmp_path / "cache").iterdir())) == 3 and cache.used == 30


def test_disk_cache_is_bounded_and_evicted_files_are_deleted(tmp_path: Path) -> None:
    cache = DiskChunkCache(tmp_path, size=2500)
    for i in range(5):
        cache.put(("seg", i), os.urandom(CHUNK))
    files = list((tmp_path / "cache").iterdir())
    assert len(files) == 2 == len(cache)
    assert cache.used == 2000 and cache.evictions == 3
    assert sorted(f.name for f in files) == sorted(cache.file_of(("seg", i)).name for i in (3, 4))
    assert not list((tmp_path / "temp").iterdir())  # written aside, renamed in


def test_disk_cache_keeps_nothing_from_an_earlier_process(tmp_path: Path) -> None:
    first = DiskChunkCache(tmp_path, size=None)
    first.put(("seg", 0), b"old")
    (tmp_path / "stray-file").write_bytes(b"?")
    second = DiskChunkCache(tmp_path, size=None)  # a restart: the directory is emptied
    assert second.get(("seg", 0)) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "temp"]
    assert not list((tmp_path / "cache").iterdir())


@pytest.mark.parametrize("damage", ["flip a byte", "truncate", "empty", "delete"])
def test_a_damaged_disk_cache_file_is_a_miss_never_served(tmp_path: Path, damage: str) -> None:
    cache = DiskChunkCache(tmp_path, size=None)
    data = os.urandom(CHUNK)
    cache.put(("seg", 0), data)
    path = cache.file_of(("seg", 0))
    raw = bytearray(path.read_bytes())
    if damage == "flip a byte":
        raw[len(raw) // 2] ^= 0x01
        path.write_bytes(bytes(raw))
    elif damage == "truncate":
        path.write_bytes(bytes(raw[:-10]))
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()
    assert cache.get(("seg", 0)) is None
    assert not path.exists() and ("seg", 0) not in cache and cache.used == 0
    cache.put(("seg", 0), data)  # fetched again
    assert cache.get(("seg", 0)) == data


def test_a_disk_cache_needs_a_writable_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"rsm\.config\.fetch\.chunk\.cache\.path"):
        ChunkedRemoteStorageManager(fs_config(tmp_path, **{
            "fetch.chunk.cache.class": "io.aiven.kafka.tieredstorage.fetch.cache.DiskChunkCache",
            "fetch.chunk.cache.size": "1000", "fetch.chunk.cache.path": str(tmp_path / "missing")}),
            config_prefix="rsm.config.")
    with pytest.raises(ConfigError, match=r"fetch\.chunk\.cache\.size"):
        ChunkedRemoteStorageManager(fs_config(tmp_path, **{"fetch.chunk.cache.class": "memory"}))
    with pytest.raises(ConfigError, match=r"fetch\.chunk\.cache\.class"):
        ChunkedRemoteStorageManager(fs_config(tmp_path, **{"fetch.chunk.cache.class": "x",
                                                           "fetch.chunk.cache.size": "1"}))


# -- through the manager, on the filesystem backend ---------------------------------------------


def fs_config(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"storage.backend.class": "filesystem", "storage.root": str(tmp_path / "store"),
            "chunk.size": str(CHUNK), **extra}


def copy_segment(rsm: ChunkedRemoteStorageManager, tmp_path: Path, data: bytes) -> RemoteLogSegmentMetadata:
    files = tmp_path / "segment"
    files.mkdir(exist_ok=True)
    for suffix in (".index", ".timeindex", ".snapshot"):
        (files / f"0{suffix}").write_bytes(b"")
    (files / "0.log").write_bytes(data)
    tip = TopicIdPartition(uuid.uuid4(), "t", 0)
    meta = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(tip), 0, 99, 0, 1, 0, len(data), {0: 0})
    rsm.copy_log_segment_data(meta, LogSegmentData(files / "0.log", files / "0.index", files / "0.timeindex", None,
                                                   files / "0.snapshot", b"0\n0\n"))
    return meta


def read_all(rsm: ChunkedRemoteStorageManager, meta: RemoteLogSegmentMetadata, first: int = 0,
             last: int | None = None) -> bytes:
    with rsm.fetch_log_segment(meta, first, last) as stream:
        return stream.read()


@pytest.mark.parametrize("compression", ["false", "true"])
def test_reads_through_a_disk_cache_match_the_segment_and_fill_the_cache(tmp_path: Path, compression: str) -> None:
    (tmp_path / "cache").mkdir()
    rsm = ChunkedRemoteStorageManager(fs_config(
        tmp_path, **{"compression.enabled": compression, "fetch.chunk.cache.class": "disk",
                     "fetch.chunk.cache.size": str(100 * CHUNK), "fetch.chunk.cache.path": str(tmp_path / "cache")}))
    try:
        data = os.urandom(CHUNK * 10 + 123)
        meta = copy_segment(rsm, tmp_path, data)
        assert read_all(rsm, meta) == data
        assert read_all(rsm, meta, 1500, 4321) == data[1500:4322]
        cache = rsm.chunk_cache
        assert cache is not None and len(cache) == 11 and cache.hits >= 4
        # Served from the cache now, whatever happens to the object store.
        for f in (tmp_path / "store").rglob("*.log"):
            f.write_bytes(b"\0" * len(data))
        assert read_all(rsm, meta, 0, 2 * CHUNK - 1) == data[:2 * CHUNK]
        rsm.delete_log_segment_data(meta)  # nothing of a deleted segment stays cached
        assert len(cache) == 0 and not list((tmp_path / "cache" / "cache").iterdir())
    finally:
        rsm.close()


def test_a_corrupted_cache_file_is_fetched_again_and_rewritten(tmp_path: Path) -> None:
    (tmp_path / "cache").mkdir()
    rsm = ChunkedRemoteStorageManager(fs_config(
        tmp_path, **{"fetch.chunk.cache.class": "disk", "fetch.chunk.cache.size": "-1",
                     "fetch.chunk.cache.path": str(tmp_path / "cache")}))
    try:
        data = os.urandom(CHUNK * 3)
        meta = copy_segment(rsm, tmp_path, data)
        assert read_all(rsm, meta) == data
        cache = rsm.chunk_cache
        assert isinstance(cache, DiskChunkCache)
        path = cache.file_of((rsm.object_key(meta, LOG_SUFFIX), 1))
        raw = bytearray(path.read_bytes())
        raw[-1] ^= 0xFF
        path.write_bytes(bytes(raw))
        misses = cache.misses
        assert read_all(rsm, meta) == data  # the damaged chunk came from the store again
        assert cache.misses == misses + 1
        assert cache.get((rsm.object_key(meta, LOG_SUFFIX), 1)) == data[CHUNK:2 * CHUNK]  # and is whole on disk
    finally:
        rsm.close()


def test_prefetch_fetches_the_next_chunks_of_a_sequential_reader(tmp_path: Path) -> None:
    rsm = ChunkedRemoteStorageManager(fs_config(
        tmp_path, **{"fetch.chunk.cache.class": "memory", "fetch.chunk.cache.size": str(100 * CHUNK),
                     "fetch.chunk.cache.prefetch.max.size": str(4 * CHUNK)}))
    try:
        data = os.urandom(CHUNK * 20)
        meta = copy_segment(rsm, tmp_path, data)
        key = rsm.object_key(meta, LOG_SUFFIX)
        cache = rsm.chunk_cache
        assert cache is not None
        assert read_all(rsm, meta, 0, CHUNK - 1) == data[:CHUNK]  # a miss: chunk 0 and the window after it
        wait_for(lambda: all((key, i) in cache for i in range(5)), 10, "chunks 1-4 prefetched")
        assert (key, 6) not in cache  # no further than prefetch.max.size
        # Reading on moves the window: once half of it is missing, its missing part is fetched.
        assert read_all(rsm, meta, CHUNK, 3 * CHUNK - 1) == data[CHUNK:3 * CHUNK]
        wait_for(lambda: all((key, i) in cache for i in range(7)), 10, "chunks 5-6 prefetched")
        hits = cache.hits
        assert read_all(rsm, meta) == data
        assert cache.hits > hits
        rsm.prefetch_log_segment(meta, 19 * CHUNK)  # a segment a reader is about to reach
        assert read_all(rsm, meta, 19 * CHUNK) == data[19 * CHUNK:]
    finally:
        rsm.close()


def test_without_a_cache_reads_go_to_the_store(tmp_path: Path) -> None:
    rsm = ChunkedRemoteStorageManager(fs_config(tmp_path))
    try:
        data = os.urandom(CHUNK * 4)
        meta = copy_segment(rsm, tmp_path, data)
        assert rsm.chunk_cache is None
        assert read_all(rsm, meta, 10) == data[10:]
        assert b"".join(rsm.fetch_log_segment_pieces(meta, 999, 2000)) == data[999:2001]
        rsm.prefetch_log_segment(meta, 0)  # nothing to do without a cache
    finally:
        rsm.close()


# -- the remote fetch quota ------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_fetch_quota_is_kafkas_rate_over_sampled_windows() -> None:
    clock = Clock()
    quota = RLMQuotaManager(1000, window_num=11, window_size_s=1.0, clock=clock)
    quota.record(9000)
    # Kafka's Rate counts at least window.num - 1 whole windows: 9000 B / 10 s is under 1000 B/s.
    assert quota.rate() == pytest.approx(900) and not quota.is_quota_exceeded()
    quota.record(2000)
    assert quota.is_quota_exceeded()
    clock.now += 12  # every window with bytes has left the 11 kept
    assert quota.rate() == 0 and not quota.is_quota_exceeded()
    unbounded = RLMQuotaManager(2**63 - 1, clock=clock)
    unbounded.record(10**12)
    assert not unbounded.is_quota_exceeded()
