"""Source offsets: the backing-store protocol, the file store of standalone mode, reader and writer.

Kafka Connect keys a source offset by ``["<connector>", {source partition}]`` and stores the
offset map as its value, both serialized as schemaless JSON (``JsonConverter`` with
``schemas.enable=false``). Keys here are written canonically (sorted map keys, no spaces) so a
lookup by bytes finds a key no matter which map order wrote it; stores that read keys written by
another process (Kafka Connect's offsets topic) normalise them with :func:`canonical_key`.

:class:`OffsetBackingStore` is what the worker needs from a store; it is pluggable through the
``offset_store_factory`` of :class:`~strom.connect.runtime.worker.Worker`:

* ``FileOffsetBackingStore`` — standalone's ``offset.storage.file.filename``: the whole map is
  rewritten atomically (temp file, fsync, rename) on every ``set``, so a kill -9 leaves either the
  old or the new file, never a torn one.
* ``MemoryOffsetBackingStore`` — the same without a file.
* The distributed herder's Kafka-backed store (offsets topic) implements the same protocol and
  additionally ``produce_in_transaction``, so exactly-once source tasks write offsets in the
  same producer transaction as their records.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from strom.connect.api.task import OffsetStorageReader
from strom.connect.exceptions import ConnectException, DataException

OffsetMap = dict[str, Any]
PartitionMap = dict[str, Any]


# -- key / value format ------------------------------------------------------------------------

def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def serialize_key(namespace: str, partition: Mapping[str, Any]) -> bytes:
    """Kafka Connect's offset key: ``["<connector>",{partition}]`` as compact JSON."""
    return _dumps([namespace, dict(partition)])


def parse_key(key: bytes) -> tuple[str, PartitionMap]:
    """The (connector, partition) of an offset key; DataException if it is not Kafka's shape."""
    try:
        data = json.loads(key)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataException(f"offset key is not JSON: {key[:100]!r}") from exc
    if not (isinstance(data, list) and len(data) == 2 and isinstance(data[0], str)
            and isinstance(data[1], dict)):
        raise DataException(f'offset key is not ["<connector>", {{partition}}]: {key[:100]!r}')
    return data[0], data[1]


def canonical_key(key: bytes) -> bytes:
    """``key`` re-serialized canonically (a key Kafka Connect wrote may order its map differently)."""
    namespace, partition = parse_key(key)
    return serialize_key(namespace, partition)


def serialize_offset(offset: Mapping[str, Any] | None) -> bytes | None:
    return None if offset is None else _dumps(dict(offset))


def parse_offset(value: bytes | None) -> OffsetMap | None:
    if value is None:
        return None
    try:
        data = json.loads(value)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataException(f"offset value is not JSON: {value[:100]!r}") from exc
    if data is not None and not isinstance(data, dict):
        raise DataException(f"offset value is not a JSON object: {value[:100]!r}")
    return data


# -- stores ------------------------------------------------------------------------------------

@runtime_checkable
class OffsetBackingStore(Protocol):
    """Key/value store of serialized source offsets, shared by the tasks of one worker.

    ``set`` returns only once the values are durable; a ``None`` value deletes the key.
    Optional: ``produce_in_transaction(producer, values) -> bool`` — write ``values`` through an
    open transactional confluent-kafka producer (exactly-once source); returning False (or not
    having the method) makes the worker call ``set`` after the transaction commits.
    """

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def get(self, keys: Iterable[bytes]) -> dict[bytes, bytes | None]: ...

    def set(self, values: Mapping[bytes, bytes | None]) -> None: ...

    def snapshot(self) -> dict[bytes, bytes]: ...


class MemoryOffsetBackingStore:
    """An in-memory store; the base of the file store."""

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def get(self, keys: Iterable[bytes]) -> dict[bytes, bytes | None]:
        with self._lock:
            return {k: self._data.get(k) for k in keys}

    def set(self, values: Mapping[bytes, bytes | None]) -> None:
        with self._lock:
            self._apply(values)
            self._save()

    def snapshot(self) -> dict[bytes, bytes]:
        with self._lock:
            return dict(self._data)

    def _apply(self, values: Mapping[bytes, bytes | None]) -> None:
        for k, v in values.items():
            if v is None:
                self._data.pop(k, None)
            else:
                self._data[k] = v

    def _save(self) -> None:
        pass


class FileOffsetBackingStore(MemoryOffsetBackingStore):
    """``offset.storage.file.filename``: a JSON file of ``[[key, value], ...]`` (both JSON text).

    Kafka's own file is a Java-serialized HashMap, which nothing outside the JVM reads; the keys
    and values inside are the same JSON as here.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self.path = Path(path)

    def start(self) -> None:
        with self._lock:
            self._data = self._load()

    def _load(self) -> dict[bytes, bytes]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ConnectException(f"cannot read offsets file {self.path}: {exc}") from exc
        try:
            rows = json.loads(text)
            if not isinstance(rows, list):
                raise ValueError("not a JSON array")
            data: dict[bytes, bytes] = {}
            for row in rows:
                key, value = row
                data[canonical_key(key.encode())] = value.encode()
            return data
        except (ValueError, TypeError, AttributeError, DataException) as exc:
            raise ConnectException(
                f"offsets file {self.path} is corrupt ({exc}); move it away to start without offsets"
            ) from exc

    def _save(self) -> None:
        rows = [[k.decode(), v.decode()] for k, v in sorted(self._data.items())]
        tmp = self.path.with_name(self.path.name + ".tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump(rows, f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)  # atomic: a crash leaves the old or the new file
        try:
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


# -- reader / writer ---------------------------------------------------------------------------

class OffsetStorageReaderImpl(OffsetStorageReader):
    """``SourceTaskContext.offset_storage_reader``: the committed offsets of one connector."""

    def __init__(self, store: OffsetBackingStore, namespace: str) -> None:
        self._store = store
        self._namespace = namespace

    def offset(self, partition: Mapping[str, Any]) -> OffsetMap | None:
        key = serialize_key(self._namespace, partition)
        return parse_offset(self._store.get([key]).get(key))

    def offsets(self, partitions: Iterable[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], OffsetMap | None]]:
        parts = list(partitions)
        keys = [serialize_key(self._namespace, p) for p in parts]
        values = self._store.get(keys)
        return [(p, parse_offset(values.get(k))) for p, k in zip(parts, keys, strict=True)]


class OffsetStorageWriter:
    """Stages offsets of one connector and flushes them to the store in snapshots.

    ``offset`` stages; ``begin_flush`` moves the staged set aside (returns False if empty);
    ``do_flush`` writes it; ``cancel_flush`` puts it back in front of newer staged offsets.
    """

    def __init__(self, store: OffsetBackingStore, namespace: str) -> None:
        self._store = store
        self._namespace = namespace
        self._lock = threading.Lock()
        self._data: dict[bytes, bytes | None] = {}
        self._to_flush: dict[bytes, bytes | None] | None = None

    def offset(self, partition: Mapping[str, Any], offset: Mapping[str, Any] | None) -> None:
        with self._lock:
            self._data[serialize_key(self._namespace, partition)] = serialize_offset(offset)

    def begin_flush(self) -> bool:
        with self._lock:
            if self._to_flush is not None:
                raise ConnectException("a flush of offsets is already in progress")
            if not self._data:
                return False
            self._to_flush, self._data = self._data, {}
            return True

    def flushing(self) -> dict[bytes, bytes | None]:
        return dict(self._to_flush or {})

    def do_flush(self) -> None:
        values = self._to_flush or {}
        try:
            self._store.set(values)
        except BaseException:
            self.cancel_flush()
            raise
        with self._lock:
            self._to_flush = None

    def cancel_flush(self) -> None:
        with self._lock:
            if self._to_flush is not None:
                self._to_flush.update(self._data)  # newer staged offsets win
                self._data, self._to_flush = self._to_flush, None

    def complete_flush(self) -> None:
        """The flushing snapshot was written some other way (inside a producer transaction)."""
        with self._lock:
            self._to_flush = None


def connector_offsets(store: OffsetBackingStore, namespace: str) -> list[tuple[PartitionMap, OffsetMap]]:
    """Every (partition, offset) the store holds for one connector (REST GET /offsets)."""
    out = []
    for key, value in store.snapshot().items():
        try:
            ns, partition = parse_key(key)
        except DataException:
            continue  # a foreign key in a shared store is not ours to interpret
        if ns == namespace:
            offset = parse_offset(value)
            if offset is not None:
                out.append((partition, offset))
    return out
