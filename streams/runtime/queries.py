"""Interactive queries: which read-only view a running application's store gets, and key metadata.

``KafkaStreams.store(name)`` returns the view matching the store's kind (:func:`view_for`):
the same ``ReadOnlyKeyValueStore`` / ``ReadOnlyWindowStore`` / ``ReadOnlySessionStore`` of
strom.streams.processor.readonly that the TopologyTestDriver returns (Kafka has one read-only
API for both), re-exported here. Each view reads every local task holding a partition of the
store (under that task's thread lock), or the instance's single copy of a global store. A key's
owner elsewhere is found with ``KafkaStreams.query_metadata_for_key`` (:class:`KeyQueryMetadata`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from strom.streams.processor.readonly import (
    KeyValue,
    Parts,
    ReadOnlyKeyValueStore,
    ReadOnlySessionStore,
    ReadOnlyWindowStore,
)


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


__all__ = ["HostInfo", "KeyQueryMetadata", "KeyValue", "Parts", "ReadOnlyKeyValueStore", "ReadOnlySessionStore",
           "ReadOnlyWindowStore", "StreamsMetadata", "view_for"]


def view_for(kind: str, name: str, parts: Parts) -> ReadOnlyKeyValueStore | ReadOnlyWindowStore | ReadOnlySessionStore:
    """The read-only view of a store of ``kind`` ("key_value", "window" or "session")."""
    if kind == "window":
        return ReadOnlyWindowStore(name, parts)
    if kind == "session":
        return ReadOnlySessionStore(name, parts)
    return ReadOnlyKeyValueStore(name, parts)
