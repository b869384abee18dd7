"""Ordered byte maps the stores are built on: in memory (dict + sorted key list) and RocksDB.

Both backends expose the same small interface (:class:`OrderedBytes`), so every store kind has
one implementation and identical semantics on both. The RocksDB backend buffers writes in an
overlay dict until :meth:`commit`, which writes them in one ``WriteBatch`` together with the
changelog offsets and metadata (stored in the reserved column family ``strom.meta``): a crash
leaves either the previous commit or the new one on disk, never a mix.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from rocksdict import Options, Rdict, WriteBatch

from strom.streams.exceptions import InvalidStateStoreError, StateStoreError
from strom.streams.state.api import ChangelogOffsets

_OFFSET = struct.Struct(">q")
META_CF = "strom.meta"
_OFFSET_PREFIX = b"o\x00"  # meta keys: b"o\0" + topic + b"\0" + partition (decimal)
_USER_META_PREFIX = b"m\x00"


class OrderedBytes(Protocol):
    """A sorted map of byte keys; ranges are inclusive, ``None`` bounds are open."""

    persistent: bool

    def get(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes | None) -> None: ...

    def range(self, lo: bytes | None, hi: bytes | None, reverse: bool) -> Iterator[tuple[bytes, bytes]]: ...

    def count(self) -> int: ...

    def commit(self, offsets: ChangelogOffsets, meta: dict[bytes, bytes]) -> None: ...

    def committed_offsets(self) -> ChangelogOffsets: ...

    def meta(self, key: bytes) -> bytes | None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class MemoryBytes:
    """Dict for point access plus a sorted key list (``bisect``) for ranges."""

    persistent = False

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []
        self._offsets: ChangelogOffsets = {}
        self._meta: dict[bytes, bytes] = {}

    def get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            if self._data.pop(key, None) is not None:
                i = bisect.bisect_left(self._keys, key)
                del self._keys[i]
        else:
            if key not in self._data:
                bisect.insort(self._keys, key)
            self._data[key] = value

    def range(self, lo: bytes | None, hi: bytes | None, reverse: bool) -> Iterator[tuple[bytes, bytes]]:
        keys = self._keys
        i = 0 if lo is None else bisect.bisect_left(keys, lo)
        j = len(keys) if hi is None else bisect.bisect_right(keys, hi)
        # a copy of the key slice: the store may be written while the caller iterates
        selected = keys[i:j]
        if reverse:
            selected.reverse()
        data = self._data
        for k in selected:
            v = data.get(k)
            if v is not None:
                yield k, v

    def count(self) -> int:
        return len(self._data)

    def commit(self, offsets: ChangelogOffsets, meta: dict[bytes, bytes]) -> None:
        self._offsets.update(offsets)
        self._meta.update(meta)

    def committed_offsets(self) -> ChangelogOffsets:
        return dict(self._offsets)

    def meta(self, key: bytes) -> bytes | None:
        return self._meta.get(key)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def _offset_key(topic: str, partition: int) -> bytes:
    return _OFFSET_PREFIX + topic.encode("utf-8") + b"\x00" + str(partition).encode()


class RocksBytes:
    """RocksDB through rocksdict; uncommitted writes live in an overlay merged into reads."""

    persistent = True

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        os.makedirs(self.path, exist_ok=True)
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        opts.create_missing_column_families(True)
        try:
            self._db = Rdict(str(self.path), opts, column_families={META_CF: Options(raw_mode=True)})
        except Exception as exc:
            raise StateStoreError(f"cannot open RocksDB store at {self.path}: {exc}") from exc
        self._meta_cf = self._db.get_column_family(META_CF)
        self._meta_handle = self._db.get_column_family_handle(META_CF)
        self._pending: dict[bytes, bytes | None] = {}

    def get(self, key: bytes) -> bytes | None:
        pending = self._pending
        if key in pending:
            return pending[key]
        value: bytes | None = self._db.get(key)
        return value

    def put(self, key: bytes, value: bytes | None) -> None:
        self._pending[key] = value

    def range(self, lo: bytes | None, hi: bytes | None, reverse: bool) -> Iterator[tuple[bytes, bytes]]:
        overlay = sorted(
            (k, v)
            for k, v in self._pending.items()
            if (lo is None or k >= lo) and (hi is None or k <= hi)
        )
        if reverse:
            overlay.reverse()
        return _merge(self._db_range(lo, hi, reverse), overlay, reverse)

    def _db_range(self, lo: bytes | None, hi: bytes | None, reverse: bool) -> Iterator[tuple[bytes, bytes]]:
        it = self._db.iter()
        if reverse:
            if hi is None:
                it.seek_to_last()
            else:
                it.seek_for_prev(hi)
            while it.valid():
                k = it.key()
                if lo is not None and k < lo:
                    break
                yield k, it.value()
                it.prev()
        else:
            if lo is None:
                it.seek_to_first()
            else:
                it.seek(lo)
            while it.valid():
                k = it.key()
                if hi is not None and k > hi:
                    break
                yield k, it.value()
                it.next()

    def count(self) -> int:
        est = self._db.property_int_value("rocksdb.estimate-num-keys") or 0
        return int(est) + sum(1 for v in self._pending.values() if v is not None)

    def commit(self, offsets: ChangelogOffsets, meta: dict[bytes, bytes]) -> None:
        batch = WriteBatch(raw_mode=True)
        for k, v in self._pending.items():
            if v is None:
                batch.delete(k)
            else:
                batch.put(k, v)
        for (topic, partition), offset in offsets.items():
            batch.put(_offset_key(topic, partition), _OFFSET.pack(offset), self._meta_handle)
        for k, v in meta.items():
            batch.put(_USER_META_PREFIX + k, v, self._meta_handle)
        try:
            self._db.write(batch)  # one atomic write: data, offsets and metadata together
        except Exception as exc:
            raise StateStoreError(f"commit of RocksDB store at {self.path} failed: {exc}") from exc
        self._pending.clear()

    def committed_offsets(self) -> ChangelogOffsets:
        out: ChangelogOffsets = {}
        for raw_k, v in self._meta_cf.items(from_key=_OFFSET_PREFIX):
            k = bytes(raw_k)  # type: ignore[arg-type]  # raw_mode: always bytes
            if not k.startswith(_OFFSET_PREFIX):
                break
            topic, _, partition = k[len(_OFFSET_PREFIX):].rpartition(b"\x00")
            out[(topic.decode("utf-8"), int(partition))] = _OFFSET.unpack(v)[0]
        return out

    def meta(self, key: bytes) -> bytes | None:
        value: bytes | None = self._meta_cf.get(_USER_META_PREFIX + key)
        return value

    def flush(self) -> None:
        self._db.flush()

    def close(self) -> None:
        # uncommitted writes are dropped on purpose: they are not covered by committed offsets
        self._pending.clear()
        # the column family objects hold the DB lock until they are released
        del self._meta_cf, self._meta_handle
        self._db.close()


def _merge(
    base: Iterator[tuple[bytes, bytes]], overlay: list[tuple[bytes, bytes | None]], reverse: bool
) -> Iterator[tuple[bytes, bytes]]:
    """Merge a sorted DB iterator with the sorted overlay; the overlay wins, ``None`` hides."""
    if not overlay:
        yield from base
        return
    oi = 0
    n = len(overlay)
    for k, v in base:
        while oi < n:
            ok, ov = overlay[oi]
            if (ok > k) if reverse else (ok < k):
                oi += 1
                if ov is not None:
                    yield ok, ov
            else:
                break
        if oi < n and overlay[oi][0] == k:
            ov = overlay[oi][1]
            oi += 1
            if ov is not None:
                yield k, ov
            continue
        yield k, v
    for ok, ov in overlay[oi:]:
        if ov is not None:
            yield ok, ov


def check_open(is_open: bool, name: str) -> None:
    if not is_open:
        raise InvalidStateStoreError(f"state store {name!r} is closed")
