"""The status topic (``status.storage.topic``): connector and task states, and the topics each
connector uses, in Kafka Connect's record format.

- ``status-connector-<n>``    ``{"state": "RUNNING", "trace": null, "worker_id": "host:port", "generation": 7}``
- ``status-task-<n>-<i>``     the same fields
- ``status-topic-<topic>:connector-<n>``
  ``{"topic": {"name": t, "connector": n, "task": i, "discoverTimestamp": ms}}``

Tombstones delete (a connector's tombstone drops its tasks' statuses too); a ``DESTROYED`` status
is written as a tombstone. Every worker reads the whole topic, so any worker answers a status
request; each writes the states of what it runs.

Zombie guard, as Kafka Connect's ``KafkaStatusBackingStore``: a status carries the group
generation of the worker that wrote it. ``put`` writes unconditionally (RUNNING, PAUSED, ...);
``put_safe`` (used for UNASSIGNED on shutdown and FAILED) writes only if the latest status known
for the key is absent, was written by the same worker, or has an older-or-equal generation, so a
worker that was kicked out of the group cannot replace a newer owner's state with its own. On
read, records apply in log order, except that a task's UNASSIGNED is ignored over a RUNNING of the
same or a newer generation (a late shutdown report racing the new owner's start). Like Kafka's,
this narrows the window for conflicts; it cannot close it (a write not yet read is not seen).

Each key's cache entry holds the status replayed from the log plus this store's own last write
until the reader reaches it (read-your-writes); writes are compared by log offset so the
reader's older records never roll a newer local write back.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strom.connect.exceptions import ConnectException
from strom.connect.runtime.distributed.kafka_log import KafkaBasedLog, check_compacted, ensure_topic

log = logging.getLogger(__name__)

CONNECTOR_STATUS_PREFIX = "status-connector-"
TASK_STATUS_PREFIX = "status-task-"
TOPIC_STATUS_PREFIX = "status-topic-"
TOPIC_STATUS_SEPARATOR = ":connector-"
STATES = ("UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "RESTARTING", "DESTROYED", "STOPPED")
SEND_ATTEMPTS = 3
"""Tries per status write; a retry is skipped once the write is stale (see ``_send``)."""


@dataclass(frozen=True)
class Status:
    """State of one connector (``task`` None) or task, as a worker last reported it."""

    connector: str
    task: int | None
    state: str
    worker_id: str
    trace: str | None = None
    generation: int = 0

    def to_json(self) -> bytes:
        return json.dumps({"state": self.state, "trace": self.trace, "worker_id": self.worker_id,
                           "generation": self.generation}, separators=(",", ":")).encode()


@dataclass(frozen=True)
class TopicStatus:
    topic: str
    connector: str
    task: int
    discover_timestamp: int


class _Entry:
    """Cache of one status key (Kafka's ``CacheEntry``), guarded by the store's lock.

    ``value``/``offset``: the status the reader replayed and the offset of the last record it
    applied for this key. ``pending``/``pending_offset``: this store's own write (None for a
    tombstone) until the reader passes its offset. ``sequence`` counts this store's writes so a
    retry can tell a newer write was issued meanwhile; ``removals`` counts tombstones read (Kafka
    drops the entry and marks it deleted), which voids retries of writes made before them. An
    entry outlives its tombstone so that the tombstone's offset still orders later writes.
    """

    __slots__ = ("offset", "pending", "pending_offset", "removals", "sequence", "value")

    def __init__(self) -> None:
        self.value: Status | None = None
        self.offset = -1
        self.pending: Status | None = None
        self.pending_offset = -1
        self.sequence = 0
        self.removals = 0

    def current(self) -> Status | None:
        """The latest status known for the key: our unread write if any, else the replayed one."""
        return self.pending if self.pending_offset >= 0 else self.value

    def increment(self) -> int:
        self.sequence += 1
        return self.sequence

    def can_write_safely(self, status: Status, sequence: int | None = None) -> bool:
        """Kafka's rule: no status yet, or written by the same worker, or by an older-or-equal
        generation; with ``sequence``, also no newer write by this store since."""
        cur = self.current()
        ok = cur is None or cur.worker_id == status.worker_id or cur.generation <= status.generation
        return ok and (sequence is None or sequence == self.sequence)


def _ignored_on_read(prev: Status | None, status: Status) -> bool:
    """A task's UNASSIGNED does not replace a RUNNING of the same or a newer generation: a worker
    that had not yet read the new owner's RUNNING reported its own shutdown after it (Kafka
    accepts that a generation reset may hide an UNASSIGNED briefly; the owner's next report fixes it)."""
    return (status.task is not None and status.state == "UNASSIGNED" and prev is not None
            and prev.state == "RUNNING" and prev.generation >= status.generation)


def _task_key(connector: str, task: int) -> str:
    return f"{TASK_STATUS_PREFIX}{connector}-{task}"


def _status_key(status: Status) -> str:
    return CONNECTOR_STATUS_PREFIX + status.connector if status.task is None else \
        _task_key(status.connector, status.task)


class KafkaStatusBackingStore:
    """Reads and writes the status topic (see the module docstring)."""

    def __init__(self, topic: str, producer_conf: Mapping[str, Any], consumer_conf: Mapping[str, Any],
                 admin_conf: Mapping[str, Any], partitions: int = 5, replication_factor: int = 3) -> None:
        self.topic = topic
        self.admin_conf = dict(admin_conf)
        self.partitions = partitions
        self.replication_factor = replication_factor
        self._lock = threading.Lock()
        self._connectors: dict[str, _Entry] = {}
        self._tasks: dict[tuple[str, int], _Entry] = {}
        self._topics: dict[str, dict[str, TopicStatus]] = {}
        # Generation of this store's latest write: a retry of a write from an older one is dropped.
        self._generation = 0
        self.log = KafkaBasedLog(topic, producer_conf, consumer_conf, self._apply, name="status")

    def start(self, timeout: float = 30.0) -> None:
        ensure_topic(self.admin_conf, self.topic, self.partitions, self.replication_factor, timeout)
        check_compacted(self.admin_conf, self.topic, timeout)
        self.log.start(timeout)

    def stop(self) -> None:
        self.log.stop()

    def refresh(self, timeout: float = 30.0) -> None:
        self.log.read_to_end(timeout)

    # -- writing ------------------------------------------------------------------------------

    def put(self, status: Status) -> None:
        """Write ``status`` whatever is known for its key (Kafka: RUNNING, PAUSED, STOPPED,
        RESTARTING, DESTROYED)."""
        self._send(status, safe=False)

    def put_safe(self, status: Status) -> bool:
        """Write ``status`` only if the key's latest known status is absent, is this worker's, or
        has an older-or-equal generation (Kafka: UNASSIGNED on shutdown, FAILED). Returns whether
        it was written."""
        return self._send(status, safe=True)

    def _send(self, status: Status, safe: bool) -> bool:
        key = _status_key(status)
        with self._lock:
            self._generation = status.generation
            entry = self._entry(key, create=True)
            assert entry is not None
            if safe and not entry.can_write_safely(status):
                cur = entry.current()
                log.debug("not writing %s %s of %s gen %d over %s of %s gen %d", key, status.state,
                          status.worker_id, status.generation, cur and cur.state, cur and cur.worker_id,
                          cur.generation if cur else -1)
                return False
            sequence = entry.increment()
            removals = entry.removals
        value = None if status.state == "DESTROYED" else status.to_json()
        for attempt in range(1, SEND_ATTEMPTS + 1):
            try:
                _, offset = self.log.send(key.encode(), value)
                break
            except ConnectException:
                with self._lock:
                    # As Kafka's retry: drop the write once its key was deleted, a newer
                    # generation wrote here, or (safe) a newer write or owner took the key.
                    stale = entry.removals != removals or status.generation != self._generation or \
                        (safe and not entry.can_write_safely(status, sequence))
                if stale:
                    log.debug("dropping failed stale status write %s %s", key, status.state)
                    return False
                if attempt == SEND_ATTEMPTS:
                    raise
                log.warning("status write %s failed; retrying", key)
        with self._lock:
            self._store_local(key, offset, None if value is None else status)
        return True

    def put_topic(self, ts: TopicStatus) -> None:
        key = f"{TOPIC_STATUS_PREFIX}{ts.topic}{TOPIC_STATUS_SEPARATOR}{ts.connector}"
        value = {"topic": {"name": ts.topic, "connector": ts.connector, "task": ts.task,
                           "discoverTimestamp": ts.discover_timestamp}}
        self.log.send(key.encode(), json.dumps(value, separators=(",", ":")).encode())
        with self._lock:
            self._topics.setdefault(ts.connector, {})[ts.topic] = ts

    def delete_topics(self, connector: str) -> None:
        with self._lock:
            topics = list(self._topics.get(connector, {}))
        if topics:
            self.log.send_all([(f"{TOPIC_STATUS_PREFIX}{t}{TOPIC_STATUS_SEPARATOR}{connector}".encode(), None)
                               for t in topics])
        with self._lock:
            self._topics.pop(connector, None)

    def delete_connector(self, connector: str, task_count: int) -> None:
        """Tombstones for a deleted connector's statuses (Kafka writes them as DESTROYED)."""
        with self._lock:
            tasks = {t for (c, t), e in self._tasks.items() if c == connector and e.current() is not None}
            tasks |= set(range(task_count))
            keys = [CONNECTOR_STATUS_PREFIX + connector] + [_task_key(connector, t) for t in sorted(tasks)]
            for key in keys:
                entry = self._entry(key, create=True)
                assert entry is not None
                entry.increment()
        results = self.log.send_all([(k.encode(), None) for k in keys])
        with self._lock:
            for key, (_, offset) in zip(keys, results, strict=True):
                self._store_local(key, offset, None)

    # -- reading ------------------------------------------------------------------------------

    def get(self, connector: str) -> Status | None:
        with self._lock:
            entry = self._connectors.get(connector)
            return entry.current() if entry is not None else None

    def get_task(self, connector: str, task: int) -> Status | None:
        with self._lock:
            entry = self._tasks.get((connector, task))
            return entry.current() if entry is not None else None

    def get_all(self, connector: str) -> list[Status]:
        with self._lock:
            found = [e.current() for (c, _), e in self._tasks.items() if c == connector]
        return sorted((s for s in found if s is not None), key=lambda s: s.task or 0)

    def connectors(self) -> list[str]:
        with self._lock:
            return sorted(n for n, e in self._connectors.items() if e.current() is not None)

    def topics(self, connector: str) -> list[str]:
        with self._lock:
            return sorted(self._topics.get(connector, {}))

    # -- cache (callers hold self._lock) ---------------------------------------------------------

    def _entry(self, key: str, create: bool) -> _Entry | None:
        if key.startswith(CONNECTOR_STATUS_PREFIX):
            name = key[len(CONNECTOR_STATUS_PREFIX):]
            entry = self._connectors.get(name)
            if entry is None and create:
                entry = self._connectors[name] = _Entry()
            return entry
        parsed = _parse_task_status_key(key)
        if parsed is None:
            return None
        entry = self._tasks.get(parsed)
        if entry is None and create:
            entry = self._tasks[parsed] = _Entry()
        return entry

    def _store_local(self, key: str, offset: int, status: Status | None) -> None:
        """Make our acknowledged write at ``offset`` visible before the reader gets there, unless
        the reader (or a later write of ours) is already past it."""
        entry = self._entry(key, create=True)
        if entry is None or offset <= entry.offset or offset <= entry.pending_offset:
            return
        if status is not None and _ignored_on_read(entry.current(), status):
            return  # the reader will ignore it too
        entry.pending, entry.pending_offset = status, offset

    def _remove(self, key: str, offset: int) -> None:
        """A tombstone at ``offset`` deletes the key; a connector's also deletes its tasks'
        statuses (as Kafka's does). A write of ours after the tombstone stays visible."""
        entry = self._entry(key, create=True)
        if entry is None:
            return
        entry.offset = max(entry.offset, offset)
        entry.value = None
        entry.removals += 1
        if entry.pending_offset <= offset:
            entry.pending, entry.pending_offset = None, -1
        if key.startswith(CONNECTOR_STATUS_PREFIX):
            name = key[len(CONNECTOR_STATUS_PREFIX):]
            # Task keys live in other partitions, so offsets do not order them against this
            # tombstone: drop everything, our unread writes too, as Kafka drops the entries.
            for (c, _), task_entry in self._tasks.items():
                if c == name:
                    task_entry.value, task_entry.pending, task_entry.pending_offset = None, None, -1
                    task_entry.removals += 1

    def _replay(self, key: str, offset: int, status: Status | None) -> None:
        """Apply the record at ``offset`` as every worker does, in log order."""
        with self._lock:
            if status is None:
                self._remove(key, offset)
                return
            entry = self._entry(key, create=True)
            if entry is None:
                return
            if offset <= entry.offset:
                return  # offsets only grow per partition; this guards a re-delivered record
            entry.offset = offset
            if entry.pending_offset >= 0 and offset >= entry.pending_offset:
                entry.pending, entry.pending_offset = None, -1  # our write is read back
            if _ignored_on_read(entry.value, status):
                log.debug("ignoring stale %s %s gen %d over RUNNING gen %d", key, status.state,
                          status.generation, entry.value.generation if entry.value else -1)
                return
            entry.value = status

    def _apply(self, partition: int, offset: int, key_raw: bytes | None, value_raw: bytes | None) -> None:
        if key_raw is None:
            return
        key = key_raw.decode("utf-8", "replace")
        value: Any = None
        if value_raw is not None:
            try:
                value = json.loads(value_raw)
            except ValueError:
                log.error("ignoring status record %s: value is not JSON", key)
                return
            if not isinstance(value, dict):
                return
        if key.startswith(TOPIC_STATUS_PREFIX):
            self._apply_topic(key, value)
            return
        if key.startswith(CONNECTOR_STATUS_PREFIX):
            connector, task = key[len(CONNECTOR_STATUS_PREFIX):], None
            if not connector:
                return
        elif key.startswith(TASK_STATUS_PREFIX):
            parsed = _parse_task_status_key(key)
            if parsed is None:
                return
            connector, task = parsed
        else:
            return
        if value is None:
            self._replay(key, offset, None)
            return
        state = value.get("state")
        if state not in STATES:
            log.error("ignoring status record %s: unknown state %r", key, state)
            return
        gen = value.get("generation")
        self._replay(key, offset, Status(connector, task, str(state), str(value.get("worker_id") or ""),
                                         value.get("trace"), int(gen) if isinstance(gen, int) else 0))

    def _apply_topic(self, key: str, value: dict[str, Any] | None) -> None:
        body = key[len(TOPIC_STATUS_PREFIX):]
        topic, sep, connector = body.rpartition(TOPIC_STATUS_SEPARATOR)
        if not sep:
            return
        with self._lock:
            if value is None:
                self._topics.get(connector, {}).pop(topic, None)
                return
            t = value.get("topic") or {}
            ts = int(t.get("discoverTimestamp") or time.time() * 1000)
            self._topics.setdefault(connector, {})[topic] = TopicStatus(topic, connector, int(t.get("task") or 0), ts)


def _parse_task_status_key(key: str) -> tuple[str, int] | None:
    name, _, num = key[len(TASK_STATUS_PREFIX):].rpartition("-")
    if not name or not num.isdigit():
        return None
    return name, int(num)
