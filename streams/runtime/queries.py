"""Interactive queries: read-only views of a running application's stores, and key metadata.

``KafkaStreams.store(name)`` returns the view matching the store's kind (key-value here; window
and session views are strom.streams.processor.readonly's, over the same ``parts`` protocol);
each view reads every local task holding a partition of the store (under that task's thread
lock), or the instance's single copy of a global store. A key's owner elsewhere is found with
``KafkaStreams.query_metadata_for_key`` (:class:`KeyQueryMetadata`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from strom.streams.processor.readonly import ReadOnlySessionStore, ReadOnlyWindowStore
from strom.streams.processor.stores import KeyValueStoreFacade

#: (lock, facade) of each local task holding a part of a store
Parts = Callable[[], list[tuple[Any, KeyValueStoreFacade]]]


@dataclass(frozen=True, order=True)
class HostInfo:
    host: str
    port: int

    @classmethod
    def parse(cls, server: str | None) -> HostInfo | None:
        if not server:
            return None
        host, _, port = server.rpartition(":")
        return cls(host, int(port))

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class StreamsMetadata:
    """One instance of the application: where it serves queries and what it holds."""

    host_info: HostInfo | None
    process_id: str
    state_store_names: set[str] = field(default_factory=set)
    topic_partitions: set[tuple[str, int]] = field(default_factory=set)
    standby_state_store_names: set[str] = field(default_factory=set)
    standby_topic_partitions: set[tuple[str, int]] = field(default_factory=set)


@dataclass(frozen=True)
class KeyQueryMetadata:
    """Where a key lives: the partition, the instance with its active task, and standbys."""

    active_host: HostInfo | None
    standby_hosts: frozenset[HostInfo]
    partition: int
    #: the active instance's process key (application.id-process id); None if unassigned
    active_process: str | None = None


class _View:
    def __init__(self, name: str, parts: Parts) -> None:
        self.name = name
        self._parts = parts


class ReadOnlyKeyValueStore(_View):
    """Typed read access to one key-value store over every local task holding a partition of it."""

    def get(self, key: Any) -> Any:
        for lock, facade in self._parts():
            with lock:
                value = facade.get(key)
            if value is not None:
                return value
        return None

    def _merged(self, fetch: Callable[[KeyValueStoreFacade], Iterator[tuple[Any, Any]]]) -> Iterator[tuple[Any, Any]]:
        rows: list[tuple[bytes, Any, Any]] = []
        for lock, facade in self._parts():
            with lock:
                # order across tasks by serialized key, as each task's store is ordered
                rows.extend((facade._kser(facade._topic, k) or b"", k, v) for k, v in fetch(facade))
        rows.sort(key=lambda r: r[0])
        return iter([(k, v) for _, k, v in rows])

    def range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        """Entries with serialized keys in [from_key, to_key] from all local partitions."""
        return self._merged(lambda f: f.range(from_key, to_key))

    def all(self) -> Iterator[tuple[Any, Any]]:
        return self._merged(lambda f: f.all())

    def approximate_num_entries(self) -> int:
        total = 0
        for lock, facade in self._parts():
            with lock:
                total += facade.approximate_num_entries()
        return total


__all__ = ["HostInfo", "KeyQueryMetadata", "ReadOnlyKeyValueStore", "ReadOnlySessionStore", "ReadOnlyWindowStore",
           "StreamsMetadata", "view_for"]


def view_for(kind: str, name: str, parts: Parts) -> ReadOnlyKeyValueStore | ReadOnlyWindowStore | ReadOnlySessionStore:
    if kind == "window":
        return ReadOnlyWindowStore(name, parts)
    if kind == "session":
        return ReadOnlySessionStore(name, parts)
    return ReadOnlyKeyValueStore(name, parts)
