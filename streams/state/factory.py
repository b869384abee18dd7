"""Building the byte store of a :class:`StoreSpec`: key-value, window or session; RocksDB or memory.

A runtime calls :func:`build_store` with the task's ``rocksdb`` directory: a spec with
``store_type="rocksdb"`` gets a RocksDB store at ``<dir>/<store name>``, one with
``"in_memory"`` (``Materialized.with_store_type("in_memory")``) an in-memory store; a user's own
supplier (``Materialized.as_(supplier)``) is called as is. :func:`changelog_topic_config` gives
the changelog topic's configuration per kind, as Kafka Streams creates it.

The DSL gives window and session specs a :class:`DslStoreSupplier`: called with no argument it
makes an in-memory store of the right kind, so a runtime that only knows ``spec.supplier()``
still runs them (change-logged and restored, but not persistent); :func:`build_store`
recognises it and builds the persistent store instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, TypeAlias

from strom.streams.exceptions import StateStoreError
from strom.streams.state.keyvalue import BytesKeyValueStore, InMemoryKeyValueStore, RocksDBKeyValueStore
from strom.streams.state.session import BytesSessionStore, InMemorySessionStore, RocksDBSessionStore
from strom.streams.state.window import BytesWindowStore, InMemoryWindowStore, RocksDBWindowStore

ByteStore: TypeAlias = "BytesKeyValueStore | BytesWindowStore | BytesSessionStore"

#: Kafka's ``windowstore.changelog.additional.retention.ms`` default (1 day): a window
#: changelog keeps records this long beyond the store's retention
WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS = 24 * 3600 * 1000


class StoreSpecLike(Protocol):
    """The fields of ``strom.streams.topology.topology.StoreSpec`` this module reads."""

    name: str
    supplier: Any
    kind: str
    store_type: str
    logging_enabled: bool
    retention_ms: int | None
    window_size: int | None
    retain_duplicates: bool


def make_store(name: str, kind: str, directory: Path | str | None, *, retention_ms: int | None = None,
               window_size: int | None = None, retain_duplicates: bool = False) -> ByteStore:
    """A store of ``kind`` ("key_value", "window", "session"): RocksDB at ``directory``, else memory."""
    if kind == "key_value":
        return InMemoryKeyValueStore(name) if directory is None else RocksDBKeyValueStore(name, directory)
    if kind not in ("window", "session"):
        raise StateStoreError(f"store {name!r}: unknown store kind {kind!r}")
    if retention_ms is None:
        raise StateStoreError(f"{kind} store {name!r} needs a retention period")
    if kind == "window":
        if window_size is None:
            raise StateStoreError(f"window store {name!r} needs a window size")
        if directory is None:
            return InMemoryWindowStore(name, retention_ms, window_size, retain_duplicates)
        return RocksDBWindowStore(name, directory, retention_ms, window_size, retain_duplicates)
    if directory is None:
        return InMemorySessionStore(name, retention_ms)
    return RocksDBSessionStore(name, directory, retention_ms)


class DslStoreSupplier:
    """The supplier the DSL puts into window/session specs (see the module docstring)."""

    __slots__ = ("kind", "name", "retain_duplicates", "retention_ms", "window_size")

    def __init__(self, name: str, kind: str, retention_ms: int, window_size: int | None = None,
                 retain_duplicates: bool = False) -> None:
        self.name = name
        self.kind = kind
        self.retention_ms = retention_ms
        self.window_size = window_size
        self.retain_duplicates = retain_duplicates

    def __call__(self, directory: Path | str | None = None) -> ByteStore:
        """The store, in memory, or in RocksDB at ``directory`` when one is given."""
        return make_store(self.name, self.kind, directory, retention_ms=self.retention_ms,
                          window_size=self.window_size, retain_duplicates=self.retain_duplicates)


def build_store(spec: StoreSpecLike, rocksdb_dir: Path | str | None) -> Any:
    """The byte store of ``spec`` for a task whose RocksDB stores live under ``rocksdb_dir``.

    ``rocksdb_dir`` None (no state directory) makes every store in memory.
    """
    supplier = spec.supplier
    if supplier is not None and not isinstance(supplier, DslStoreSupplier):
        return supplier()  # a user's own store
    directory: Path | None = None
    if spec.store_type == "rocksdb" and rocksdb_dir is not None:
        directory = Path(rocksdb_dir) / spec.name
        directory.parent.mkdir(parents=True, exist_ok=True)
    elif spec.store_type not in ("rocksdb", "in_memory"):
        raise StateStoreError(f"store {spec.name!r}: unknown store type {spec.store_type!r}")
    if isinstance(supplier, DslStoreSupplier):
        return supplier(directory)
    return make_store(spec.name, spec.kind, directory, retention_ms=spec.retention_ms,
                      window_size=spec.window_size, retain_duplicates=spec.retain_duplicates)


def changelog_topic_config(spec: StoreSpecLike) -> dict[str, str]:
    """Config of the store's changelog topic, as Kafka Streams creates it.

    Key-value stores: compacted. Window and session stores: ``compact,delete`` with
    ``retention.ms`` = store retention + 1 day, so expired windows leave the changelog too.
    """
    if spec.kind == "key_value" or spec.retention_ms is None:
        return {"cleanup.policy": "compact"}
    return {"cleanup.policy": "compact,delete",
            "retention.ms": str(spec.retention_ms + WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS)}
