"""StandaloneHerder: one worker process, connector configs in memory, offsets in a file.

Implements the :class:`~strom.connect.runtime.herder.Herder` protocol over a
:class:`~strom.connect.runtime.worker.Worker` whose offset store is the
``offset.storage.file.filename`` file (:class:`FileOffsetBackingStore`). Configs come from the
command line (``strom connect standalone worker.properties c1.properties ...``) or REST and are
not persisted (as in Kafka). Statuses are kept in memory from the worker's listener callbacks;
a failed connector or task carries its trace.

Sink connector offsets (REST ``/offsets``) are the consumer group ``connect-<name>``'s, read and
changed with confluent-kafka's AdminClient; source offsets are those of the file.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from strom.connect.api.config import ConfigValue, config_infos
from strom.connect.api.connector import SinkConnectorContext, SourceConnectorContext
from strom.connect.exceptions import (
    AlreadyExistsError,
    BadRequestError,
    ConfigException,
    ConnectException,
    NotFoundError,
)
from strom.connect.runtime.config import ConnectorConfig, WorkerConfig, connector_config_def
from strom.connect.runtime.errors import format_trace
from strom.connect.runtime.herder import (
    ConnectorInfo,
    ConnectorOffset,
    ConnectorOffsets,
    ConnectorState,
    ConnectorStateInfo,
    ConnectorTaskId,
    ConnectorType,
    State,
    TargetState,
    TaskInfo,
    TaskState,
)
from strom.connect.runtime.offsets import (
    FileOffsetBackingStore,
    MemoryOffsetBackingStore,
    OffsetBackingStore,
    OffsetStorageReaderImpl,
    connector_offsets,
    serialize_key,
    serialize_offset,
)
from strom.connect.runtime.worker import Worker, connector_kind

log = logging.getLogger("strom.connect.standalone")

ALTERED = "The offsets for this connector have been altered successfully"
RESET = "The offsets for this connector have been reset successfully"
NOT_STOPPED = ("Connectors must be in the STOPPED state before their offsets can be modified. This can be "
               "done for the specified connector by issuing a 'PUT' request to the "
               "'/connectors/{name}/stop' endpoint")


class StatusListener:
    """Turns the worker's status callbacks into connector/task states, handed to ``set_status``.

    The standalone herder keeps them in memory; the distributed one writes them to the status
    topic.
    """

    def __init__(self, set_status: Callable[[Any, State, str | None], None]) -> None:
        self._set = set_status

    def on_startup(self, id: Any) -> None:
        self._set(id, State.RUNNING, None)

    def on_pause(self, id: Any) -> None:
        self._set(id, State.PAUSED, None)

    def on_resume(self, id: Any) -> None:
        self._set(id, State.RUNNING, None)

    def on_failure(self, id: Any, exc: BaseException) -> None:
        self._set(id, State.FAILED, format_trace(exc))

    def on_shutdown(self, id: Any) -> None:
        self._set(id, State.UNASSIGNED, None)

    def on_stop(self, id: Any) -> None:
        self._set(id, State.STOPPED, None)

    def on_restart(self, id: Any) -> None:
        self._set(id, State.RESTARTING, None)


class _ConnectorContext:
    """``ConnectorContext`` of one connector: reconfiguration requests and background failures."""

    def __init__(self, herder: StandaloneHerder, name: str) -> None:
        self.herder = herder
        self.name = name

    def request_task_reconfiguration(self) -> None:
        # Off the connector's thread: reconfiguring stops tasks and may call back into it.
        threading.Thread(target=self.herder._reconfigure, args=(self.name,), daemon=True,
                         name=f"reconfigure-{self.name}").start()

    def raise_error(self, exc: BaseException) -> None:
        self.herder._set_status(self.name, State.FAILED, format_trace(exc))


class _SourceContext(_ConnectorContext, SourceConnectorContext):
    @property
    def offset_storage_reader(self) -> OffsetStorageReaderImpl:
        return OffsetStorageReaderImpl(self.herder.worker.offset_store, self.name)


class _SinkContext(_ConnectorContext, SinkConnectorContext):
    pass


class StandaloneHerder:
    """The herder of ``strom connect standalone`` (see the module doc)."""

    def __init__(self, config: WorkerConfig, registry: Any, worker: Worker | None = None) -> None:
        self.config = config
        self.registry = registry
        self.worker = worker or Worker(config, registry, self._offset_store_factory)
        self.worker_id = _worker_id(config)
        self._lock = threading.RLock()
        self._status_lock = threading.Lock()
        self._listener = StatusListener(self._set_status)
        self._configs: dict[str, dict[str, str]] = {}
        self._targets: dict[str, TargetState] = {}
        self._task_configs: dict[str, list[dict[str, str]]] = {}
        self._status: dict[Any, tuple[State, str | None]] = {}
        self._active_topics: dict[str, set[str]] = {}
        self._cluster_id: str | None = None
        self._admin_client: Any = None
        self._stopped = False

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

    def _require(self, name: str) -> dict[str, str]:
        cfg = self._configs.get(name)
        if cfg is None:
            raise NotFoundError(f"Connector {name} not found")
        return cfg

    def _type(self, name: str) -> ConnectorType:
        try:
            cls = self.registry.connector_class(self._configs[name]["connector.class"])
            return ConnectorType(connector_kind(cls))
        except Exception:
            return ConnectorType.UNKNOWN

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
        cfg = {str(k): _str(v) for k, v in config.items()}
        if cfg.get("name", name) != name:
            raise BadRequestError(f"Connector name configuration ({cfg['name']}) doesn't match connector "
                                  f"name in the URL ({name})")
        cfg["name"] = name
        result = self.validate_connector_config(cfg)
        if result["error_count"]:
            errors = [f"{c['value']['name']}: {e}" for c in result["configs"]
                      if c.get("value") for e in c["value"]["errors"]]
            raise BadRequestError(f"Connector configuration is invalid and contains the following "
                                  f"{result['error_count']} error(s):\n" + "\n".join(errors))
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
            cfg = dict(self._require(name))
        for k, v in patch.items():
            if v is None:
                cfg.pop(k, None)
            else:
                cfg[k] = v
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

    def _ctx(self, name: str) -> _ConnectorContext:
        if self._type(name) == ConnectorType.SOURCE:
            return _SourceContext(self, name)
        return _SinkContext(self, name)

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

    # -- offsets --------------------------------------------------------------------------------

    def connector_offsets(self, name: str) -> ConnectorOffsets:
        with self._lock:
            self._require(name)
            kind = self._type(name)
        if kind == ConnectorType.SINK:
            return ConnectorOffsets(tuple(
                ConnectorOffset({"kafka_topic": t, "kafka_partition": p}, {"kafka_offset": o})
                for (t, p), o in sorted(self._group_offsets(name).items())))
        return ConnectorOffsets(tuple(ConnectorOffset(p, o)
                                      for p, o in connector_offsets(self.worker.offset_store, name)))

    def _require_stopped(self, name: str) -> ConnectorType:
        self._require(name)
        if self._targets[name] != TargetState.STOPPED:
            raise BadRequestError(NOT_STOPPED.format(name=name))
        return self._type(name)

    def alter_connector_offsets(self, name: str, offsets: ConnectorOffsets) -> str:
        with self._lock:
            kind = self._require_stopped(name)
            cfg = dict(self._configs[name])
        if not offsets.offsets:
            raise BadRequestError("Partitions / offsets need to be provided for an alter offsets request")
        connector = self.registry.connector_class(cfg["connector.class"])()
        if kind == ConnectorType.SINK:
            from confluent_kafka import TopicPartition as KTP

            from strom.connect.api.records import TopicPartition as TP

            parsed: dict[Any, int | None] = {}
            for o in offsets.offsets:
                try:
                    tp = TP(str(o.partition["kafka_topic"]), int(o.partition["kafka_partition"]))
                    parsed[tp] = None if o.offset is None else int(o.offset["kafka_offset"])
                except (KeyError, TypeError, ValueError) as exc:
                    raise BadRequestError(f"Invalid sink partition/offset {o.to_json()}: {exc}") from None
            connector.alter_offsets(cfg, parsed)
            if any(v is None for v in parsed.values()):
                raise BadRequestError("Resetting single partitions of a sink connector is not supported by "
                                      "this worker; use DELETE /connectors/{name}/offsets")
            self._alter_group(name, [KTP(tp.topic, tp.partition, off) for tp, off in parsed.items() if off is not None])
            return ALTERED
        pairs = [(dict(o.partition), None if o.offset is None else dict(o.offset)) for o in offsets.offsets]
        connector.alter_offsets(cfg, pairs)
        self.worker.offset_store.set({serialize_key(name, p): serialize_offset(off) for p, off in pairs})
        return ALTERED

    def reset_connector_offsets(self, name: str) -> str:
        with self._lock:
            kind = self._require_stopped(name)
            cfg = dict(self._configs[name])
        connector = self.registry.connector_class(cfg["connector.class"])()
        if kind == ConnectorType.SINK:
            current = self._group_offsets(name)
            from strom.connect.api.records import TopicPartition as TP

            connector.alter_offsets(cfg, {TP(t, p): None for (t, p) in current})
            self._delete_group(name)
            return RESET
        current_src = connector_offsets(self.worker.offset_store, name)
        connector.alter_offsets(cfg, [(p, None) for p, _ in current_src])
        self.worker.offset_store.set({serialize_key(name, p): None for p, _ in current_src})
        return RESET

    def _admin(self) -> Any:
        # One client kept for the herder's life: a dropped AdminClient never completes its futures.
        if self._admin_client is None:
            from confluent_kafka.admin import AdminClient

            self._admin_client = AdminClient(self.config.admin_config())
        return self._admin_client

    def _group_offsets(self, name: str) -> dict[tuple[str, int], int]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        futs = self._admin().list_consumer_group_offsets([ConsumerGroupTopicPartitions(f"connect-{name}")])
        out: dict[tuple[str, int], int] = {}
        for fut in futs.values():
            res = fut.result(30)
            for tp in res.topic_partitions or ():
                if tp.offset >= 0:
                    out[(tp.topic, tp.partition)] = tp.offset
        return out

    def _alter_group(self, name: str, tps: list[Any]) -> None:
        from confluent_kafka import ConsumerGroupTopicPartitions

        futs = self._admin().alter_consumer_group_offsets([ConsumerGroupTopicPartitions(f"connect-{name}", tps)])
        for fut in futs.values():
            fut.result(30)

    def _delete_group(self, name: str) -> None:
        from confluent_kafka import KafkaException

        futs = self._admin().delete_consumer_groups([f"connect-{name}"], request_timeout=30)
        for fut in futs.values():
            try:
                fut.result(30)
            except KafkaException as exc:
                if "GROUP_ID_NOT_FOUND" not in str(exc):
                    raise ConnectException(f"resetting the offsets of {name} failed: {exc}") from exc

    # -- topics, validation, plugins ---------------------------------------------------------

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

    def validate_connector_config(self, config: Mapping[str, str]) -> dict[str, Any]:
        props = {str(k): _str(v) for k, v in config.items()}
        class_name = props.get("connector.class")
        if not class_name:
            raise BadRequestError("Connector config " + str(props) + " contains no connector type")
        try:
            cls = self.registry.connector_class(class_name)
        except ConfigException as exc:
            raise BadRequestError(str(exc)) from None
        kind = connector_kind(cls)
        cdef = connector_config_def(kind)
        values: list[ConfigValue] = list(cdef.validate(props))
        by_name = {v.name: v for v in values}
        extra: list[ConfigValue] = []
        for problem in ConnectorConfig.errors(props, kind):
            key = problem.key or "connector.class"
            cv = by_name.get(key)
            if cv is None:
                cv = ConfigValue(key, props.get(key))
                extra.append(cv)
                by_name[key] = cv
            if not cv.errors:  # the ConfigDef may have reported the same problem already
                cv.add_error_message(problem.message or str(problem))
        for plural, lookup in (("transforms", self.registry.transformation_class),
                               ("predicates", self.registry.predicate_class)):
            for alias in [a.strip() for a in props.get(plural, "").split(",") if a.strip()]:
                key = f"{plural}.{alias}.type"
                cv = ConfigValue(key, props.get(key))
                try:
                    plugin = lookup(props[key])()
                    own = {k[len(f"{plural}.{alias}."):]: v for k, v in props.items()
                           if k.startswith(f"{plural}.{alias}.")}
                    for v in plugin.config().validate(own):
                        if v.errors:
                            extra.append(ConfigValue(f"{plural}.{alias}.{v.name}", v.value, [], list(v.errors)))
                except Exception as exc:
                    cv.add_error_message(str(exc))
                extra.append(cv)
        connector = cls()
        cdef.merge(connector.config())
        try:
            conn_values = connector.validate(props).config_values
        except Exception as exc:
            by_name["connector.class"].add_error_message(str(exc))
            conn_values = []
        known = {v.name for v in values}
        merged = values + [v for v in conn_values if v.name not in known] + extra
        return config_infos(class_name, cdef, merged)

    def plugins(self) -> Sequence[Any]:
        return self.registry.plugin_descs()

    def kafka_cluster_id(self) -> str:
        if self._cluster_id is None:
            md = self._admin().list_topics(timeout=30)
            self._cluster_id = md.cluster_id or ""
        return self._cluster_id

    def leader_url(self) -> str | None:
        return None


def _str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _worker_id(config: WorkerConfig) -> str:
    """Kafka's worker id: the advertised REST host:port."""
    listener = config.listeners.split(",")[0].strip()
    hostport = listener.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    host = config.rest_advertised_host_name or host or "localhost"
    port = str(config.rest_advertised_port or port or 8083)
    return f"{host}:{port}"
