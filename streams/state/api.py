"""The state store protocols: one per kind (key-value, window, session), all byte-level.

Keys and values are ``bytes``; the DSL wraps stores with serdes (like Kafka Streams' Metered
stores). Every store has a ``commit(changelog_offsets)`` that makes the writes since the last
commit durable together with the changelog offsets they correspond to; ``committed_offsets()``
returns what the last commit stored. Ranges are inclusive at both ends, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple, Protocol, runtime_checkable

TopicPartition = tuple[str, int]
ChangelogOffsets = dict[TopicPartition, int]


class Windowed(NamedTuple):
    """A key with its window ``[start, end)`` (Kafka's ``Windowed<K>``); session ends are inclusive."""

    key: bytes
    start: int
    end: int


@runtime_checkable
class StateStore(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def persistent(self) -> bool: ...

    @property
    def is_open(self) -> bool: ...

    def commit(self, changelog_offsets: ChangelogOffsets) -> None: ...

    def committed_offsets(self) -> ChangelogOffsets: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class KeyValueStore(StateStore, Protocol):
    def get(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes | None) -> None: ...

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None: ...

    def put_all(self, entries: list[tuple[bytes, bytes | None]]) -> None: ...

    def delete(self, key: bytes) -> bytes | None: ...

    def range(
        self, from_key: bytes | None, to_key: bytes | None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]: ...

    def all(self, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]: ...

    def prefix_scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]: ...

    def approximate_num_entries(self) -> int: ...


@runtime_checkable
class WindowStore(StateStore, Protocol):
    @property
    def window_size(self) -> int: ...

    @property
    def retention_period(self) -> int: ...

    @property
    def observed_stream_time(self) -> int: ...

    def put(self, key: bytes, value: bytes | None, window_start: int) -> None: ...

    def fetch_one(self, key: bytes, window_start: int) -> bytes | None: ...

    def fetch(
        self, key: bytes, time_from: int, time_to: int, reverse: bool = False
    ) -> Iterator[tuple[int, bytes]]: ...

    def fetch_range(
        self,
        key_from: bytes | None,
        key_to: bytes | None,
        time_from: int,
        time_to: int,
        reverse: bool = False,
    ) -> Iterator[tuple[Windowed, bytes]]: ...

    def fetch_all(
        self, time_from: int, time_to: int, reverse: bool = False
    ) -> Iterator[tuple[Windowed, bytes]]: ...

    def all(self, reverse: bool = False) -> Iterator[tuple[Windowed, bytes]]: ...


@runtime_checkable
class SessionStore(StateStore, Protocol):
    @property
    def retention_period(self) -> int: ...

    @property
    def observed_stream_time(self) -> int: ...

    def put(self, key: bytes, start: int, end: int, value: bytes | None) -> None: ...

    def remove(self, key: bytes, start: int, end: int) -> None: ...

    def fetch_session(self, key: bytes, start: int, end: int) -> bytes | None: ...

    def find_sessions(
        self, key: bytes, earliest_session_end: int, latest_session_start: int
    ) -> Iterator[tuple[Windowed, bytes]]: ...

    def find_sessions_range(
        self,
        key_from: bytes | None,
        key_to: bytes | None,
        earliest_session_end: int,
        latest_session_start: int,
    ) -> Iterator[tuple[Windowed, bytes]]: ...

    def fetch(self, key: bytes) -> Iterator[tuple[Windowed, bytes]]: ...
