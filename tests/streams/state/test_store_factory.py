"""build_store: the byte store of a StoreSpec by kind and type; changelog topic configs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from strom.streams.exceptions import StateStoreError
from strom.streams.state.factory import DslStoreSupplier, build_store, changelog_topic_config
from strom.streams.state.keyvalue import BytesKeyValueStore, InMemoryKeyValueStore
from strom.streams.state.session import BytesSessionStore
from strom.streams.state.window import BytesWindowStore
from strom.streams.topology.topology import StoreSpec


@pytest.mark.parametrize("kind,cls", [("key_value", BytesKeyValueStore), ("window", BytesWindowStore),
                                      ("session", BytesSessionStore)])
@pytest.mark.parametrize("store_type", ["rocksdb", "in_memory"])
def test_kind_and_type(tmp_path: Path, kind: str, cls: Any, store_type: str) -> None:
    spec = StoreSpec("s", None, kind=kind, store_type=store_type, retention_ms=1000,
                     window_size=10 if kind == "window" else None)
    store: Any = build_store(spec, tmp_path / "rocksdb")
    try:
        assert isinstance(store, cls)
        assert store.persistent == (store_type == "rocksdb")
        assert (tmp_path / "rocksdb" / "s").is_dir() == (store_type == "rocksdb")
    finally:
        store.close()


def test_dsl_supplier_is_persistent_only_with_a_directory(tmp_path: Path) -> None:
    sup = DslStoreSupplier("w", "window", 100, 10, retain_duplicates=True)
    alone = sup()  # what a runtime that calls spec.supplier() gets
    assert isinstance(alone, BytesWindowStore) and not alone.persistent and alone.retain_duplicates
    store = build_store(StoreSpec("w", sup, kind="window", retention_ms=100, window_size=10), tmp_path)
    assert store.persistent and store.retain_duplicates
    store.put(b"k", b"v1", 5)
    store.put(b"k", b"v2", 5)
    store.commit({("app-w-changelog", 0): 2})
    store.close()
    reopened = build_store(StoreSpec("w", sup, kind="window", retention_ms=100, window_size=10), tmp_path)
    try:
        assert list(reopened.fetch(b"k", 0, 10)) == [(5, b"v1"), (5, b"v2")]
        assert reopened.committed_offsets() == {("app-w-changelog", 0): 2}
        assert reopened.observed_stream_time == 5
    finally:
        reopened.close()


def test_user_supplier_and_no_state_dir() -> None:
    mine = InMemoryKeyValueStore("mine")
    assert build_store(StoreSpec("mine", lambda: mine), "/nonexistent") is mine
    spec = StoreSpec("s", None, kind="session", retention_ms=10)
    assert not build_store(spec, None).persistent  # no state directory: in memory


def test_bad_specs() -> None:
    with pytest.raises(StateStoreError, match="needs a window size"):
        build_store(StoreSpec("w", None, kind="window", store_type="in_memory", retention_ms=5), None)
    with pytest.raises(StateStoreError, match="needs a retention"):
        build_store(StoreSpec("s", None, kind="session", store_type="in_memory"), None)
    with pytest.raises(StateStoreError, match="unknown store kind"):
        build_store(StoreSpec("x", None, kind="tree", store_type="in_memory"), None)
    with pytest.raises(StateStoreError, match="unknown store type"):
        build_store(StoreSpec("x", None, store_type="lmdb"), "/tmp")


def test_changelog_topic_config() -> None:
    assert changelog_topic_config(StoreSpec("kv")) == {"cleanup.policy": "compact"}
    w = StoreSpec("w", None, kind="window", retention_ms=60_000, window_size=1000)
    assert changelog_topic_config(w) == {"cleanup.policy": "compact,delete",
                                         "retention.ms": str(60_000 + 86_400_000)}


def test_duplicate_sequence_survives_reopen_and_restore(tmp_path: Path) -> None:
    """Retained duplicates of one key and time keep distinct sequence numbers across a reopen
    (committed with the data) and a restore (taken from the changelog keys)."""
    from strom.streams.state.changelogging import ChangeLoggingWindowStore

    spec = StoreSpec("j", None, kind="window", retention_ms=100, window_size=10, retain_duplicates=True)
    store: Any = ChangeLoggingWindowStore(build_store(spec, tmp_path / "a"))
    store.put(b"k", b"v1", 5)
    store.put(b"k", b"v2", 5)
    changelog = store.drain_changelog()
    store.commit({})
    store.close()
    reopened: Any = build_store(spec, tmp_path / "a")
    reopened.put(b"k", b"v3", 5)
    assert [v for _, v in reopened.fetch(b"k", 5, 5)] == [b"v1", b"v2", b"v3"]
    reopened.close()
    restored: Any = ChangeLoggingWindowStore(build_store(spec, tmp_path / "b"))
    restored.restore(((i, k, v) for i, (k, v) in enumerate(changelog)), ("app-j-changelog", 0))
    restored.put(b"k", b"v3", 5)
    assert [v for _, v in restored.fetch(b"k", 5, 5)] == [b"v1", b"v2", b"v3"]
    restored.close()
