"""Key-value stores over an ordered byte map: :class:`InMemoryKeyValueStore` and
:class:`RocksDBKeyValueStore` (one implementation, two backends)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from strom.streams.state.api import ChangelogOffsets
from strom.streams.state.backend import MemoryBytes, OrderedBytes, RocksBytes, check_open


class BytesKeyValueStore:
    """A :class:`~strom.streams.state.api.KeyValueStore` over any :class:`OrderedBytes`."""

    def __init__(self, name: str, backend: OrderedBytes) -> None:
        self._name = name
        self._b = backend
        self._open = True

    @property
    def name(self) -> str:
        return self._name

    @property
    def persistent(self) -> bool:
        return self._b.persistent

    @property
    def is_open(self) -> bool:
        return self._open

    def get(self, key: bytes) -> bytes | None:
        check_open(self._open, self._name)
        return self._b.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        check_open(self._open, self._name)
        self._b.put(key, value)

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None:
        old = self.get(key)
        if old is None:
            self._b.put(key, value)
        return old

    def put_all(self, entries: list[tuple[bytes, bytes | None]]) -> None:
        check_open(self._open, self._name)
        for k, v in entries:
            self._b.put(k, v)

    def delete(self, key: bytes) -> bytes | None:
        old = self.get(key)
        if old is not None:
            self._b.put(key, None)
        return old

    def range(
        self, from_key: bytes | None, to_key: bytes | None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        check_open(self._open, self._name)
        if from_key is not None and to_key is not None and from_key > to_key:
            return iter(())  # Kafka: an inverted range is empty, not an error
        return self._b.range(from_key, to_key, reverse)

    def all(self, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        return self.range(None, None, reverse)

    def prefix_scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        check_open(self._open, self._name)
        for k, v in self._b.range(prefix, None, False):
            if not k.startswith(prefix):
                break
            yield k, v

    def approximate_num_entries(self) -> int:
        check_open(self._open, self._name)
        return self._b.count()

    def commit(self, changelog_offsets: ChangelogOffsets) -> None:
        check_open(self._open, self._name)
        self._b.commit(changelog_offsets, {})

    def committed_offsets(self) -> ChangelogOffsets:
        return self._b.committed_offsets()

    def flush(self) -> None:
        check_open(self._open, self._name)
        self._b.flush()

    def close(self) -> None:
        if self._open:
            self._open = False
            self._b.close()


class InMemoryKeyValueStore(BytesKeyValueStore):
    def __init__(self, name: str) -> None:
        super().__init__(name, MemoryBytes())


class RocksDBKeyValueStore(BytesKeyValueStore):
    """Persistent store at ``path`` (see :func:`strom.streams.state.directory.store_path`)."""

    def __init__(self, name: str, path: Path | str) -> None:
        super().__init__(name, RocksBytes(path))
