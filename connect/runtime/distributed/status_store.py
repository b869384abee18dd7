"""The status topic (``status.storage.topic``): connector and task states, and the topics each
connector uses, in Kafka Connect's record format.

- ``status-connector-<n>``    ``{"state": "RUNNING", "trace": null, "worker_id": "host:port", "generation": 7}``
- ``status-task-<n>-<i>``     the same fields
- ``status-topic-<topic>:connector-<n>``
  ``{"topic": {"name": t, "connector": n, "task": i, "discoverTimestamp": ms}}``

Tombstones delete. Every worker reads the whole topic, so any worker answers a status request;
each writes the states of what it runs.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strom.connect.runtime.distributed.kafka_log import KafkaBasedLog, check_compacted, ensure_topic

log = logging.getLogger(__name__)

CONNECTOR_STATUS_PREFIX = "status-connector-"
TASK_STATUS_PREFIX = "status-task-"
TOPIC_STATUS_PREFIX = "status-topic-"
TOPIC_STATUS_SEPARATOR = ":connector-"
STATES = ("UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "RESTARTING", "DESTROYED", "STOPPED")


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


def _task_key(connector: str, task: int) -> str:
    return f"{TASK_STATUS_PREFIX}{connector}-{task}"


class KafkaStatusBackingStore:
    """Reads and writes the status topic (see the module docstring)."""

    def __init__(self, topic: str, producer_conf: Mapping[str, Any], consumer_conf: Mapping[str, Any],
                 admin_conf: Mapping[str, Any], partitions: int = 5, replication_factor: int = 3) -> None:
        self.topic = topic
        self.admin_conf = dict(admin_conf)
        self.partitions = partitions
        self.replication_factor = replication_factor
        self._lock = threading.Lock()
        self._connectors: dict[str, Status] = {}
        self._tasks: dict[tuple[str, int], Status] = {}
        self._topics: dict[str, dict[str, TopicStatus]] = {}
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
        key = CONNECTOR_STATUS_PREFIX + status.connector if status.task is None else \
            _task_key(status.connector, status.task)
        self.log.send(key.encode(), status.to_json())
        self._store(key, status)  # read-your-writes before the reader catches up

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
        """Tombstones for a deleted connector's statuses (Kafka writes them as DESTROYED first)."""
        with self._lock:
            tasks = {t for (c, t) in self._tasks if c == connector} | set(range(task_count))
        records: list[tuple[bytes | None, bytes | None]] = [((CONNECTOR_STATUS_PREFIX + connector).encode(), None)]
        records += [(_task_key(connector, t).encode(), None) for t in sorted(tasks)]
        self.log.send_all(records)
        with self._lock:
            self._connectors.pop(connector, None)
            for t in tasks:
                self._tasks.pop((connector, t), None)

    # -- reading ------------------------------------------------------------------------------

    def get(self, connector: str) -> Status | None:
        with self._lock:
            return self._connectors.get(connector)

    def get_task(self, connector: str, task: int) -> Status | None:
        with self._lock:
            return self._tasks.get((connector, task))

    def get_all(self, connector: str) -> list[Status]:
        with self._lock:
            return sorted((s for (c, _), s in self._tasks.items() if c == connector), key=lambda s: s.task or 0)

    def connectors(self) -> list[str]:
        with self._lock:
            return sorted(self._connectors)

    def topics(self, connector: str) -> list[str]:
        with self._lock:
            return sorted(self._topics.get(connector, {}))

    def _store(self, key: str, status: Status | None) -> None:
        with self._lock:
            if key.startswith(CONNECTOR_STATUS_PREFIX):
                name = key[len(CONNECTOR_STATUS_PREFIX):]
                if status is None:
                    self._connectors.pop(name, None)
                else:
                    self._connectors[name] = status
            else:
                parsed = _parse_task_status_key(key)
                if parsed is None:
                    return
                if status is None:
                    self._tasks.pop(parsed, None)
                else:
                    self._tasks[parsed] = status

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
        elif key.startswith(TASK_STATUS_PREFIX):
            parsed = _parse_task_status_key(key)
            if parsed is None:
                return
            connector, task = parsed
        else:
            return
        if value is None:
            self._store(key, None)
            return
        state = value.get("state")
        if state not in STATES:
            log.error("ignoring status record %s: unknown state %r", key, state)
            return
        gen = value.get("generation")
        self._store(key, Status(connector, task, str(state), str(value.get("worker_id") or ""),
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
