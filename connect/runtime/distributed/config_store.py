"""The config topic (``config.storage.topic``): connector configs, task configs, target states,
restart requests and the session key, in Kafka Connect's record format.

Keys are plain strings, values schemaless JSON (Kafka's ``JsonConverter`` with
``schemas.enable=false``), so a Kafka Connect worker reads what strom writes and back:

- ``connector-<n>``      ``{"properties": {...}}``; a tombstone deletes the connector
- ``task-<n>-<i>``       ``{"properties": {...}}``; applied only when the commit arrives
- ``commit-<n>``         ``{"tasks": N}``: tasks 0..N-1 written before it become the connector's
- ``target-state-<n>``   ``{"state": "STARTED"|"PAUSED", "state.v2": "STARTED"|"PAUSED"|"STOPPED"}``
- ``restart-connector-<n>`` ``{"include-tasks": bool, "only-failed": bool}``
- ``session-key``        ``{"key": base64, "algorithm": "HmacSHA256", "creation-timestamp": ms}``
- ``tasks-fencing-<n>``  ``{"task-count": N}`` (Kafka's ``TASK_COUNT_RECORD_V0``): the leader wrote it
  after fencing the transactional producers of the connector's previous task generation (KIP-618)

Zombie fencing bookkeeping follows Kafka's ``KafkaConfigBackingStore``: a ``commit-<n>`` of a
connector whose config is known puts it in ``pending_fencing``; a ``tasks-fencing-<n>`` record takes
it out and becomes the connector's ``task_count_records`` entry (the size of the generation the next
round must fence). Neither is cleared by a connector tombstone, as in Kafka: zombies of a deleted
connector may still run when a connector of the same name comes back.

The topic has one partition so that every worker applies records in the same order; the
position after the last applied record is the "config offset" members compare in the group.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from strom.connect.exceptions import ConnectException
from strom.connect.runtime.distributed.kafka_log import KafkaBasedLog, check_compacted, ensure_topic

log = logging.getLogger(__name__)

CONNECTOR_PREFIX = "connector-"
TASK_PREFIX = "task-"
COMMIT_PREFIX = "commit-"
TARGET_STATE_PREFIX = "target-state-"
RESTART_PREFIX = "restart-connector-"
SESSION_KEY = "session-key"
TASK_COUNT_PREFIX = "tasks-fencing-"  # Kafka's TASK_COUNT_RECORD_PREFIX
TARGET_STATES = ("STARTED", "PAUSED", "STOPPED")

# Listener events (kind, connector name or "" for the session key).
CONNECTOR_UPDATED, CONNECTOR_REMOVED, TASKS_UPDATED, TARGET_STATE_CHANGED, RESTART_REQUESTED, SESSION_KEY_UPDATED = (
    "connector-updated", "connector-removed", "tasks-updated", "target-state", "restart", "session-key")
TASK_COUNT_UPDATED = "task-count"

ConfigListener = Callable[[str, str], None]


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _parse_task_key(key: str) -> tuple[str, int] | None:
    """``task-<connector>-<i>``: the connector name may itself contain dashes."""
    body = key[len(TASK_PREFIX):]
    name, _, num = body.rpartition("-")
    if not name or not num.lstrip("-").isdigit():
        return None
    return name, int(num)


@dataclass(frozen=True)
class RestartRequest:
    connector: str
    include_tasks: bool = False
    only_failed: bool = False


@dataclass
class ClusterConfigState:
    """A consistent snapshot of the config topic (Kafka's ``ClusterConfigState``)."""

    offset: int = -1
    connector_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    task_configs: dict[tuple[str, int], dict[str, str]] = field(default_factory=dict)
    task_counts: dict[str, int] = field(default_factory=dict)
    target_states: dict[str, str] = field(default_factory=dict)
    inconsistent: set[str] = field(default_factory=set)
    session_key: dict[str, Any] | None = None
    task_count_records: dict[str, int] = field(default_factory=dict)
    task_config_generations: dict[str, int] = field(default_factory=dict)
    pending_fencing: set[str] = field(default_factory=set)

    def is_pending_fencing(self, connector: str) -> bool:
        """Kafka's ``pendingFencing``: task configs newer than the last task-count record."""
        return connector in self.pending_fencing

    def task_count_record(self, connector: str) -> int | None:
        return self.task_count_records.get(connector)

    def task_config_generation(self, connector: str) -> int | None:
        return self.task_config_generations.get(connector)

    def connectors(self) -> list[str]:
        return sorted(self.connector_configs)

    def tasks(self, connector: str) -> list[tuple[str, int]]:
        if connector in self.inconsistent:
            return []
        return [(connector, i) for i in range(self.task_counts.get(connector, 0))]

    def all_tasks(self) -> list[tuple[str, int]]:
        return [t for c in self.connectors() for t in self.tasks(c)]

    def target_state(self, connector: str) -> str:
        return self.target_states.get(connector, "STARTED")

    def task_config(self, task: tuple[str, int]) -> dict[str, str] | None:
        return self.task_configs.get((task[0], task[1]))


class KafkaConfigBackingStore:
    """Reads and writes the config topic (see the module docstring)."""

    def __init__(self, topic: str, producer_conf: Mapping[str, Any], consumer_conf: Mapping[str, Any],
                 admin_conf: Mapping[str, Any], replication_factor: int = 3,
                 listener: ConfigListener | None = None) -> None:
        self.topic = topic
        self.admin_conf = dict(admin_conf)
        self.replication_factor = replication_factor
        self.listener = listener
        self._lock = threading.RLock()
        self._state = ClusterConfigState()
        self._deferred: dict[str, dict[int, dict[str, str]]] = {}
        self.restart_requests: list[RestartRequest] = []
        self.log = KafkaBasedLog(topic, producer_conf, consumer_conf, self._apply, name="config")

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> None:
        partitions = ensure_topic(self.admin_conf, self.topic, 1, self.replication_factor, timeout)
        if partitions != 1:
            # Kafka Connect refuses too: with several partitions workers could apply configs in different orders.
            raise ConnectException(f"config topic {self.topic} must have exactly 1 partition, it has {partitions}")
        check_compacted(self.admin_conf, self.topic, timeout)
        self.log.start(timeout)

    def stop(self) -> None:
        self.log.stop()

    def refresh(self, timeout: float = 30.0) -> int:
        """Read the topic to its end; returns the config offset reached."""
        self.log.read_to_end(timeout)
        return self.snapshot().offset

    def snapshot(self) -> ClusterConfigState:
        with self._lock:
            s = self._state
            return ClusterConfigState(s.offset, {k: dict(v) for k, v in s.connector_configs.items()},
                                      dict(s.task_configs), dict(s.task_counts), dict(s.target_states),
                                      set(s.inconsistent), s.session_key, dict(s.task_count_records),
                                      dict(s.task_config_generations), set(s.pending_fencing))

    # -- writing ------------------------------------------------------------------------------

    def put_connector_config(self, name: str, props: Mapping[str, str], target_state: str | None = None) -> None:
        records = []
        if target_state is not None:
            records.append(self._target_state_record(name, target_state))
        records.append(((CONNECTOR_PREFIX + name).encode(),
                        _json({"properties": {str(k): str(v) for k, v in props.items()}})))
        self.log.send_all(records)

    def remove_connector_config(self, name: str) -> None:
        self.log.send_all([((CONNECTOR_PREFIX + name).encode(), None), ((TARGET_STATE_PREFIX + name).encode(), None)])

    def put_task_configs(self, name: str, configs: Sequence[Mapping[str, str]]) -> None:
        """Task configs then the commit record, as Kafka writes them (the commit makes them take effect)."""
        records: list[tuple[bytes | None, bytes | None]] = [
            (f"{TASK_PREFIX}{name}-{i}".encode(), _json({"properties": {str(k): str(v) for k, v in c.items()}}))
            for i, c in enumerate(configs)]
        records.append(((COMMIT_PREFIX + name).encode(), _json({"tasks": len(configs)})))
        self.log.send_all(records)

    def put_task_count_record(self, name: str, task_count: int, timeout: float = 30.0) -> None:
        """Kafka's ``putTaskCountRecord``: write ``tasks-fencing-<n>`` and read it back."""
        self.log.send_all([((TASK_COUNT_PREFIX + name).encode(), _json({"task-count": int(task_count)}))])
        self.log.read_to_end(timeout)

    def _target_state_record(self, name: str, state: str) -> tuple[bytes, bytes]:
        if state not in TARGET_STATES:
            raise ConnectException(f"unknown target state {state!r}")
        # Workers older than Kafka 3.5 read only "state", which knows no STOPPED.
        v1 = "PAUSED" if state == "STOPPED" else state
        return (TARGET_STATE_PREFIX + name).encode(), _json({"state": v1, "state.v2": state})

    def put_target_state(self, name: str, state: str) -> None:
        self.log.send_all([self._target_state_record(name, state)])

    def put_restart_request(self, req: RestartRequest) -> None:
        self.log.send((RESTART_PREFIX + req.connector).encode(),
                      _json({"include-tasks": req.include_tasks, "only-failed": req.only_failed}))

    def put_session_key(self, key_b64: str, algorithm: str, creation_ms: int) -> None:
        self.log.send(SESSION_KEY.encode(), _json({"key": key_b64, "algorithm": algorithm,
                                                   "creation-timestamp": creation_ms}))

    # -- reading ------------------------------------------------------------------------------

    def _apply(self, partition: int, offset: int, key_raw: bytes | None, value_raw: bytes | None) -> None:
        events: list[tuple[str, str]] = []
        with self._lock:
            self._state.offset = offset + 1
            if key_raw is None:
                return
            key = key_raw.decode("utf-8", "replace")
            value: Any = None
            if value_raw is not None:
                try:
                    value = json.loads(value_raw)
                except ValueError:
                    log.error("ignoring config record %s@%d: value is not JSON", key, offset)
                    return
                if not isinstance(value, dict):
                    log.error("ignoring config record %s@%d: value is not a JSON object", key, offset)
                    return
            events = self._apply_record(key, value, offset)
        if self.listener is not None:
            for kind, name in events:
                try:
                    self.listener(kind, name)
                except Exception:
                    log.exception("config listener failed on %s %s", kind, name)

    def _apply_record(self, key: str, value: dict[str, Any] | None, offset: int) -> list[tuple[str, str]]:
        s = self._state
        if key.startswith(CONNECTOR_PREFIX):
            name = key[len(CONNECTOR_PREFIX):]
            if value is None:
                s.connector_configs.pop(name, None)
                s.target_states.pop(name, None)
                s.task_counts.pop(name, None)
                s.inconsistent.discard(name)
                self._deferred.pop(name, None)
                for t in [t for t in s.task_configs if t[0] == name]:
                    del s.task_configs[t]
                return [(CONNECTOR_REMOVED, name)]
            props = value.get("properties")
            if not isinstance(props, dict):
                log.error("ignoring %s@%d: no properties map", key, offset)
                return []
            s.connector_configs[name] = {str(k): str(v) for k, v in props.items()}
            return [(CONNECTOR_UPDATED, name)]
        if key.startswith(TARGET_STATE_PREFIX):
            name = key[len(TARGET_STATE_PREFIX):]
            if value is None:
                s.target_states.pop(name, None)
                return []
            state = value.get("state.v2", value.get("state"))
            if state not in TARGET_STATES:
                log.error("ignoring %s@%d: unknown state %r", key, offset, state)
                return []
            s.target_states[name] = str(state)
            return [(TARGET_STATE_CHANGED, name)]
        if key.startswith(TASK_PREFIX):
            parsed = _parse_task_key(key)
            if parsed is None or value is None:
                return []
            props = value.get("properties")
            if not isinstance(props, dict):
                return []
            self._deferred.setdefault(parsed[0], {})[parsed[1]] = {str(k): str(v) for k, v in props.items()}
            return []
        if key.startswith(COMMIT_PREFIX):
            name = key[len(COMMIT_PREFIX):]
            if value is None:
                return []
            n = value.get("tasks")
            if not isinstance(n, int) or n < 0:
                log.error("ignoring %s@%d: bad task count %r", key, offset, n)
                return []
            if name in s.connector_configs:
                # Kafka: task configs newer than the last task-count record need a round of
                # fencing before tasks may start with them (set even for an inconsistent set).
                s.pending_fencing.add(name)
            deferred = self._deferred.pop(name, {})
            if n > 0 and not all(i in deferred for i in range(n)):
                # Kafka marks such a connector inconsistent until a complete set is committed; tasks
                # written by an earlier commit stay usable for the ones we did receive now.
                known = {i: s.task_configs.get((name, i)) for i in range(n)}
                if not all(i in deferred or known[i] is not None for i in range(n)):
                    s.inconsistent.add(name)
                    return []
            for t in [t for t in s.task_configs if t[0] == name and t[1] >= n]:
                del s.task_configs[t]
            for i, props in deferred.items():
                if i < n:
                    s.task_configs[(name, i)] = props
            # Kafka bumps it only when task records came with the commit; every applied commit
            # bumps ours, so a fencing round also notices a newer 0-task (stopped) generation.
            gen = s.task_config_generations.get(name)
            s.task_config_generations[name] = 0 if gen is None else gen + 1
            s.task_counts[name] = n
            s.inconsistent.discard(name)
            return [(TASKS_UPDATED, name)]
        if key.startswith(RESTART_PREFIX):
            if value is None:
                return []
            name = key[len(RESTART_PREFIX):]
            self.restart_requests.append(RestartRequest(name, bool(value.get("include-tasks", False)),
                                                        bool(value.get("only-failed", False))))
            return [(RESTART_REQUESTED, name)]
        if key.startswith(TASK_COUNT_PREFIX):
            name = key[len(TASK_COUNT_PREFIX):]
            count = None if value is None else value.get("task-count")
            if not isinstance(count, int) or isinstance(count, bool):
                log.error("ignoring %s@%d: bad task count %r", key, offset, count)
                return []
            s.task_count_records[name] = count
            s.pending_fencing.discard(name)
            return [(TASK_COUNT_UPDATED, name)]
        if key == SESSION_KEY:
            s.session_key = value
            return [(SESSION_KEY_UPDATED, "")]
        # Other records (logger-cluster-*) are not ours to act on.
        return []

    def take_restart_requests(self) -> list[RestartRequest]:
        with self._lock:
            out, self.restart_requests = self.restart_requests, []
            return out
