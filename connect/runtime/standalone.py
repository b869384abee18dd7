"""StandaloneHerder: one worker process, connector configs in memory, offsets in a file.

Implements the :class:`~strom.connect.runtime.herder.Herder` protocol over a
:class:`~strom.connect.runtime.worker.Worker` whose offset store is the
``offset.storage.file.filename`` file (:class:`FileOffsetBackingStore`). Configs come from the
command line (``strom connect standalone worker.properties c1.properties ...``) or REST and are
not persisted (as in Kafka). Statuses are kept in memory from the worker's listener callbacks;
a failed connector or task carries its trace.

Sink connector offsets (REST ``/offsets``) are the consumer group ``connect-<name>``'s, read and
changed with confluent-kafka's AdminClient; source offsets are those of the file (both through
:class:`~strom.connect.runtime.herder.AbstractHerder`, shared with the distributed herder).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from strom.connect.exceptions import (
    AlreadyExistsError,
    NotFoundError,
)
from strom.connect.runtime.config import ConnectorConfig, WorkerConfig
from strom.connect.runtime.errors import format_trace
from strom.connect.runtime.herder import (
    AbstractHerder,
    ConnectorInfo,
    ConnectorState,
    ConnectorStateInfo,
    ConnectorTaskId,
    State,
    StatusListener,
    TargetState,
    TaskInfo,
    TaskState,
)
from strom.connect.runtime.offsets import (
    FileOffsetBackingStore,
    MemoryOffsetBackingStore,
    OffsetBackingStore,
)
from strom.connect.runtime.worker import Worker

log = logging.getLogger("strom.connect.standalone")


class StandaloneHerder(AbstractHerder):
    """The herder of ``strom connect standalone`` (see the module doc)."""

    def __init__(self, config: WorkerConfig, registry: Any, worker: Worker | None = None) -> None:
        super().__init__(config, registry)
        self.worker = worker or Worker(config, registry, self._offset_store_factory)
        self._status_lock = threading.Lock()
        self._listener = StatusListener(self._set_status)
        self._configs: dict[str, dict[str, str]] = {}
        self._targets: dict[str, TargetState] = {}
        self._task_configs: dict[str, list[dict[str, str]]] = {}
        self._status: dict[Any, tuple[State, str | None]] = {}
        self._active_topics: dict[str, set[str]] = {}

    def _offset_store_factory(self) -> OffsetBackingStore:
        path = self.config.offset_storage_file_filename
        if not path:
            log.warning("offset.storage.file.filename is not set: source offsets are kept in memory only")
            return MemoryOffsetBackingStore()
        return FileOffsetBackingStore(path)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        log.info("standalone herder started (worker %s)", self.worker_id)

    def stop(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self.worker.stop()
        log.info("standalone herder stopped")

    # -- status -------------------------------------------------------------------------------

    def _set_status(self, id: Any, state: State, trace: str | None) -> None:
        # Its own lock: task threads report while the herder (holding _lock) waits for them to stop.
        with self._status_lock:
            name = id.connector if isinstance(id, ConnectorTaskId) else id
            if name not in self._configs:
                return  # a late callback of a deleted connector
            if isinstance(id, ConnectorTaskId) and id.task >= len(self._task_configs.get(name, ())):
                return  # a task of an older generation
            self._status[id] = (state, trace)

    def _connector_state(self, name: str) -> ConnectorState:
        state, trace = self._status.get(name, (State.UNASSIGNED, None))
        return ConnectorState(state, self.worker_id, trace)

    def _task_state(self, id: ConnectorTaskId) -> TaskState:
        state, trace = self._status.get(id, (State.UNASSIGNED, None))
        return TaskState(id.task, state, self.worker_id, trace)

    def _connector_config(self, name: str) -> dict[str, str] | None:
        return self._configs.get(name)

    def _target_state(self, name: str) -> TargetState:
        return self._targets[name]

    # -- reads ----------------------------------------------------------------------------------

    def connectors(self) -> list[str]:
        with self._lock:
            return sorted(self._configs)

    def connector_info(self, name: str) -> ConnectorInfo:
        with self._lock:
            cfg = self._require(name)
            tasks = tuple(ConnectorTaskId(name, i) for i in range(len(self._task_configs.get(name, ()))))
            return ConnectorInfo(name, dict(cfg), tasks, self._type(name))

    def connector_config(self, name: str) -> dict[str, str]:
        with self._lock:
            return dict(self._require(name))

    def connector_status(self, name: str) -> ConnectorStateInfo:
        with self._lock:
            self._require(name)
            tasks = tuple(self._task_state(ConnectorTaskId(name, i))
                          for i in range(len(self._task_configs.get(name, ()))))
            return ConnectorStateInfo(name, self._connector_state(name), tasks, self._type(name))

    def task_status(self, id: ConnectorTaskId) -> TaskState:
        with self._lock:
            self._require(id.connector)
            if id.task >= len(self._task_configs.get(id.connector, ())) or id.task < 0:
                raise NotFoundError(f"Task {id} not found")
            return self._task_state(id)

    def task_configs(self, name: str) -> list[TaskInfo]:
        with self._lock:
            self._require(name)
            return [TaskInfo(ConnectorTaskId(name, i), dict(c))
                    for i, c in enumerate(self._task_configs.get(name, ()))]

    # -- writes ---------------------------------------------------------------------------------

    def put_connector_config(self, name: str, config: Mapping[str, str], allow_replace: bool,
                             initial_state: TargetState | None = None) -> tuple[bool, ConnectorInfo]:
        cfg = self._named_config(name, config)
        self._validate_or_raise(cfg)
        with self._lock:
            exists = name in self._configs
            if exists and not allow_replace:
                raise AlreadyExistsError(f"Connector {name} already exists")
            if exists:
                self._stop_tasks(name)
                self.worker.stop_connector(name)
                target = self._targets[name]
            else:
                target = initial_state or TargetState.STARTED
            self._configs[name] = cfg
            self._targets[name] = target
            self._start_connector(name)
            return not exists, self.connector_info(name)

    def patch_connector_config(self, name: str, patch: Mapping[str, str | None]) -> ConnectorInfo:
        with self._lock:
            cfg = self._patched(self._require(name), patch)
        return self.put_connector_config(name, cfg, True)[1]

    def delete_connector(self, name: str) -> None:
        with self._lock:
            self._require(name)
            self._stop_tasks(name)
            self.worker.stop_connector(name)
            for d in (self._configs, self._targets, self._task_configs, self._active_topics):
                d.pop(name, None)
            for key in [k for k in self._status if k == name or
                        (isinstance(k, ConnectorTaskId) and k.connector == name)]:
                del self._status[key]

    def _start_connector(self, name: str) -> None:
        target = self._targets[name]
        ok = self.worker.start_connector(name, self._configs[name], self._ctx(name), self._listener, target)
        if ok and target != TargetState.STOPPED:
            self._update_tasks(name)

    def _update_tasks(self, name: str) -> None:
        cfg = self._configs[name]
        try:
            new = self.worker.connector_task_configs(name, ConnectorConfig(cfg).tasks_max)
        except Exception as exc:
            self._set_status(name, State.FAILED, format_trace(exc))
            return
        old = self._task_configs.get(name)
        if old == new and all(t in self.worker.task_ids() for t in self._task_ids(name)):
            return
        self._stop_tasks(name)
        self._task_configs[name] = new
        self._start_tasks(name)

    def _task_ids(self, name: str) -> list[ConnectorTaskId]:
        return [ConnectorTaskId(name, i) for i in range(len(self._task_configs.get(name, ())))]

    def _start_tasks(self, name: str) -> None:
        for tid in self._task_ids(name):
            self._start_task(tid)

    def _start_task(self, tid: ConnectorTaskId) -> None:
        self._status[tid] = (State.UNASSIGNED, None)
        self.worker.start_task(tid, self._configs[tid.connector], self._task_configs[tid.connector][tid.task],
                               self._listener, self._targets[tid.connector])

    def _stop_tasks(self, name: str) -> None:
        ids = [t for t in self.worker.task_ids() if t.connector == name]
        self._collect_active_topics(name)
        self.worker.stop_and_await_tasks(ids)

    def _reconfigure(self, name: str) -> None:
        with self._lock:
            if name in self._configs and self._targets.get(name) != TargetState.STOPPED \
                    and self.worker.is_running(name):
                self._update_tasks(name)

    def restart_connector(self, name: str, include_tasks: bool = False,
                          only_failed: bool = False) -> ConnectorStateInfo | None:
        with self._lock:
            self._require(name)
            if not include_tasks and not only_failed:
                self.worker.stop_connector(name)
                self._start_connector(name)
                return None
            before = self.connector_status(name)
            restart_conn = not only_failed or before.connector.state == State.FAILED
            restart_tasks = [t.id for t in before.tasks
                             if include_tasks and (not only_failed or t.state == State.FAILED)]
            plan = ConnectorStateInfo(
                name,
                ConnectorState(State.RESTARTING, self.worker_id) if restart_conn else before.connector,
                tuple(TaskState(t.id, State.RESTARTING, self.worker_id) if t.id in restart_tasks else t
                      for t in before.tasks), before.type)
            if restart_conn:
                self.worker.stop_connector(name)
                ok = self.worker.start_connector(name, self._configs[name], self._ctx(name), self._listener,
                                                 self._targets[name])
                if not ok:
                    return plan
            for n in restart_tasks:
                tid = ConnectorTaskId(name, n)
                self.worker.stop_and_await_task(tid)
                self._start_task(tid)
            return plan

    def restart_task(self, id: ConnectorTaskId) -> None:
        with self._lock:
            self._require(id.connector)
            if not 0 <= id.task < len(self._task_configs.get(id.connector, ())):
                raise NotFoundError(f"Task {id} not found")
            self.worker.stop_and_await_task(id)
            self._start_task(id)

    def pause_connector(self, name: str) -> None:
        with self._lock:
            self._require(name)
            if self._targets[name] == TargetState.STOPPED:
                self._targets[name] = TargetState.PAUSED
                self.worker.set_target_state(name, TargetState.PAUSED)
                self._update_tasks(name)
                return
            self._targets[name] = TargetState.PAUSED
            self.worker.set_target_state(name, TargetState.PAUSED)

    def resume_connector(self, name: str) -> None:
        with self._lock:
            self._require(name)
            previous = self._targets[name]
            self._targets[name] = TargetState.STARTED
            if not self.worker.is_running(name):
                self._start_connector(name)
                return
            self.worker.set_target_state(name, TargetState.STARTED)
            if previous == TargetState.STOPPED:
                self._update_tasks(name)

    def stop_connector(self, name: str) -> None:
        with self._lock:
            self._require(name)
            self._targets[name] = TargetState.STOPPED
            self._stop_tasks(name)
            for tid in self._task_ids(name):
                self._status.pop(tid, None)
            self._task_configs[name] = []  # as Kafka: a stopped connector has no task configs
            self.worker.set_target_state(name, TargetState.STOPPED)
            if not self.worker.is_running(name):
                self._status[name] = (State.STOPPED, None)

    # -- topics -------------------------------------------------------------------------------

    def _collect_active_topics(self, name: str) -> None:
        topics = self._active_topics.setdefault(name, set())
        for tid in self.worker.task_ids():
            if tid.connector == name:
                topics.update(self.worker.task_active_topics(tid))

    def connector_active_topics(self, name: str) -> list[str]:
        with self._lock:
            self._require(name)
            self._collect_active_topics(name)
            return sorted(self._active_topics.get(name, ()))

    def reset_connector_active_topics(self, name: str) -> None:
        with self._lock:
            self._require(name)
            self._active_topics[name] = set()
            for tid in self.worker.task_ids():
                if tid.connector == name:
                    self.worker.task_active_topics(tid).clear()

    def leader_url(self) -> str | None:
        return None


