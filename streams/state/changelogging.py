"""Change-logging wrappers: every write is also recorded as a changelog record.

A wrapper delegates to its inner store and appends ``(changelog key, value | None)`` to
``pending`` for each write that took effect; the runtime drains it with
:meth:`drain_changelog` and produces the records to ``<application.id>-<store>-changelog``
(see :func:`changelog_topic`). Keys use Kafka's changelog layouts (:mod:`.keys`).
:meth:`restore` replays changelog records into the inner store without logging them again,
committing after each batch with the next offset so an interrupted restore resumes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from strom.streams.state import keys as K
from strom.streams.state.api import ChangelogOffsets, TopicPartition, Windowed
from strom.streams.state.keyvalue import BytesKeyValueStore
from strom.streams.state.session import BytesSessionStore
from strom.streams.state.window import BytesWindowStore

ChangelogRecord = tuple[bytes, bytes | None]
#: (offset, key, value) as read from the changelog topic
OffsetRecord = tuple[int, bytes, bytes | None]


def changelog_topic(application_id: str, store_name: str) -> str:
    return f"{application_id}-{store_name}-changelog"


class _ChangeLogging(ABC):
    _inner: Any

    def __init__(self) -> None:
        self.pending: list[ChangelogRecord] = []

    # -- shared StateStore surface ---------------------------------------------------------
    @property
    def name(self) -> str:
        return str(self._inner.name)

    @property
    def persistent(self) -> bool:
        return bool(self._inner.persistent)

    @property
    def is_open(self) -> bool:
        return bool(self._inner.is_open)

    @property
    def inner(self) -> Any:
        return self._inner

    def commit(self, changelog_offsets: ChangelogOffsets) -> None:
        self._inner.commit(changelog_offsets)

    def committed_offsets(self) -> ChangelogOffsets:
        return dict(self._inner.committed_offsets())

    def flush(self) -> None:
        self._inner.flush()

    def close(self) -> None:
        self._inner.close()

    def approximate_num_entries(self) -> int:
        return int(self._inner.approximate_num_entries())

    # -- changelog -------------------------------------------------------------------------
    def drain_changelog(self) -> list[ChangelogRecord]:
        out, self.pending = self.pending, []
        return out

    @abstractmethod
    def _apply(self, key: bytes, value: bytes | None) -> None:
        raise NotImplementedError

    def restore(
        self,
        records: Iterable[OffsetRecord],
        changelog_partition: TopicPartition,
        batch_size: int = 10_000,
        on_progress: Callable[[int], None] | None = None,
    ) -> int:
        """Apply changelog records in batches; returns the number restored.

        After each batch the inner store commits ``{changelog_partition: last offset + 1}``
        and ``on_progress`` gets the running total (the runtime logs the progress line).
        """
        restored = 0
        in_batch = 0
        last_offset: int | None = None
        for offset, key, value in records:
            self._apply(key, value)
            last_offset = offset
            restored += 1
            in_batch += 1
            if in_batch >= batch_size:
                self._inner.commit({changelog_partition: offset + 1})
                in_batch = 0
                if on_progress is not None:
                    on_progress(restored)
        if in_batch and last_offset is not None:
            self._inner.commit({changelog_partition: last_offset + 1})
            if on_progress is not None:
                on_progress(restored)
        return restored


class ChangeLoggingKeyValueStore(_ChangeLogging):
    def __init__(self, inner: BytesKeyValueStore) -> None:
        super().__init__()
        self._inner: BytesKeyValueStore = inner

    def get(self, key: bytes) -> bytes | None:
        return self._inner.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self._inner.put(key, value)
        self.pending.append((key, value))

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None:
        old = self._inner.put_if_absent(key, value)
        if old is None:
            self.pending.append((key, value))
        return old

    def put_all(self, entries: list[tuple[bytes, bytes | None]]) -> None:
        self._inner.put_all(entries)
        self.pending.extend(entries)

    def delete(self, key: bytes) -> bytes | None:
        old = self._inner.delete(key)
        self.pending.append((key, None))  # Kafka logs the tombstone even for a missing key
        return old

    def range(
        self, from_key: bytes | None, to_key: bytes | None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        return self._inner.range(from_key, to_key, reverse)

    def all(self, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        return self._inner.all(reverse)

    def prefix_scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        return self._inner.prefix_scan(prefix)

    def _apply(self, key: bytes, value: bytes | None) -> None:
        self._inner.put(key, value)


class ChangeLoggingWindowStore(_ChangeLogging):
    def __init__(self, inner: BytesWindowStore) -> None:
        super().__init__()
        self._inner: BytesWindowStore = inner

    @property
    def window_size(self) -> int:
        return self._inner.window_size

    @property
    def retention_period(self) -> int:
        return self._inner.retention_period

    @property
    def observed_stream_time(self) -> int:
        return self._inner.observed_stream_time

    def put(self, key: bytes, value: bytes | None, window_start: int) -> None:
        if self._inner.put_with_seq(key, value, window_start, None):
            self.pending.append((K.window_changelog_key(key, window_start, self._inner.last_seq), value))

    def fetch_one(self, key: bytes, window_start: int) -> bytes | None:
        return self._inner.fetch_one(key, window_start)

    def fetch(
        self, key: bytes, time_from: int, time_to: int, reverse: bool = False
    ) -> Iterator[tuple[int, bytes]]:
        return self._inner.fetch(key, time_from, time_to, reverse)

    def fetch_range(
        self,
        key_from: bytes | None,
        key_to: bytes | None,
        time_from: int,
        time_to: int,
        reverse: bool = False,
    ) -> Iterator[tuple[Windowed, bytes]]:
        return self._inner.fetch_range(key_from, key_to, time_from, time_to, reverse)

    def fetch_all(
        self, time_from: int, time_to: int, reverse: bool = False
    ) -> Iterator[tuple[Windowed, bytes]]:
        return self._inner.fetch_all(time_from, time_to, reverse)

    def all(self, reverse: bool = False) -> Iterator[tuple[Windowed, bytes]]:
        return self._inner.all(reverse)

    def _apply(self, key: bytes, value: bytes | None) -> None:
        user_key, start, seq = K.parse_window_changelog_key(key)
        self._inner.put_with_seq(user_key, value, start, seq if self._inner.retain_duplicates else None)


class ChangeLoggingSessionStore(_ChangeLogging):
    def __init__(self, inner: BytesSessionStore) -> None:
        super().__init__()
        self._inner: BytesSessionStore = inner

    @property
    def retention_period(self) -> int:
        return self._inner.retention_period

    @property
    def observed_stream_time(self) -> int:
        return self._inner.observed_stream_time

    def put(self, key: bytes, start: int, end: int, value: bytes | None) -> None:
        if self._inner.put_session(key, start, end, value):
            self.pending.append((K.session_changelog_key(key, start, end), value))

    def remove(self, key: bytes, start: int, end: int) -> None:
        self.put(key, start, end, None)

    def fetch_session(self, key: bytes, start: int, end: int) -> bytes | None:
        return self._inner.fetch_session(key, start, end)

    def find_sessions(
        self, key: bytes, earliest_session_end: int, latest_session_start: int
    ) -> Iterator[tuple[Windowed, bytes]]:
        return self._inner.find_sessions(key, earliest_session_end, latest_session_start)

    def find_sessions_range(
        self,
        key_from: bytes | None,
        key_to: bytes | None,
        earliest_session_end: int,
        latest_session_start: int,
    ) -> Iterator[tuple[Windowed, bytes]]:
        return self._inner.find_sessions_range(key_from, key_to, earliest_session_end, latest_session_start)

    def fetch(self, key: bytes) -> Iterator[tuple[Windowed, bytes]]:
        return self._inner.fetch(key)

    def all(self) -> Iterator[tuple[Windowed, bytes]]:
        return self._inner.all()

    def _apply(self, key: bytes, value: bytes | None) -> None:
        user_key, start, end = K.parse_session_changelog_key(key)
        self._inner.put_session(user_key, start, end, value)
