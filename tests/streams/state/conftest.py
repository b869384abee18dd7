"""One conformance suite against every backend: fixtures build each store kind in memory and
in RocksDB; ``reopen`` closes a store and opens the same one again (persistent backends)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from strom.streams.state import (
    InMemoryKeyValueStore,
    InMemorySessionStore,
    InMemoryWindowStore,
    RocksDBKeyValueStore,
    RocksDBSessionStore,
    RocksDBWindowStore,
)

BACKENDS = ["memory", "rocksdb"]


class Factory:
    """Opens stores of one backend under ``tmp``; closes them all at teardown."""

    def __init__(self, backend: str, tmp: Path) -> None:
        self.backend = backend
        self.tmp = tmp
        self.opened: list[Any] = []
        self._n = itertools.count()

    def _path(self, name: str) -> Path:
        return self.tmp / "rocksdb" / name

    def _track(self, store: Any) -> Any:
        self.opened.append(store)
        return store

    def kv(self, name: str = "kv") -> Any:
        if self.backend == "memory":
            return self._track(InMemoryKeyValueStore(name))
        return self._track(RocksDBKeyValueStore(name, self._path(name)))

    def window(self, name: str = "win", retention: int = 10_000, size: int = 100, dups: bool = False) -> Any:
        if self.backend == "memory":
            return self._track(InMemoryWindowStore(name, retention, size, dups))
        return self._track(RocksDBWindowStore(name, self._path(name), retention, size, dups))

    def session(self, name: str = "sess", retention: int = 10_000) -> Any:
        if self.backend == "memory":
            return self._track(InMemorySessionStore(name, retention))
        return self._track(RocksDBSessionStore(name, self._path(name), retention))

    def close_all(self) -> None:
        for s in self.opened:
            s.close()


@pytest.fixture(params=BACKENDS)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    f = Factory(request.param, tmp_path)
    yield f
    f.close_all()


@pytest.fixture
def rocks(tmp_path: Path) -> Iterator[Factory]:
    f = Factory("rocksdb", tmp_path)
    yield f
    f.close_all()


Opener = Callable[..., Any]
