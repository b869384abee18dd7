"""The ``Herder``: what the REST layer (and the CLI) call to manage connectors, the value
types it answers with, and :class:`AbstractHerder`, what both herders share.

A herder (``StandaloneHerder``, ``DistributedHerder``, both under ``AbstractHerder``) owns the
connector configurations and drives the worker. Its methods are synchronous and may block (the REST server calls them off its
event loop). Errors are the classes of :mod:`strom.connect.exceptions` (``NotFoundError`` 404,
``AlreadyExistsError``/``RebalanceNeededError`` 409, ``NotLeaderError`` for forwarding,
``BadRequestError`` 400). Every value type has ``to_json()`` giving Kafka Connect's REST JSON.
"""

from __future__ import annotations

import enum
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from strom.connect.api.config import ConfigValue, config_infos
from strom.connect.api.connector import SinkConnectorContext, SourceConnectorContext
from strom.connect.exceptions import BadRequestError, ConfigException, ConnectException, NotFoundError
from strom.connect.runtime.config import ConnectorConfig, WorkerConfig, connector_config_def
from strom.connect.runtime.errors import format_trace
from strom.connect.runtime.offsets import (
    OffsetStorageReaderImpl,
    connector_offsets,
    serialize_key,
    serialize_offset,
)

if TYPE_CHECKING:
    from strom.connect.plugins import PluginDesc
    from strom.connect.runtime.worker import Worker

log = logging.getLogger(__name__)


class TargetState(enum.StrEnum):
    """The state a connector is asked to be in (Kafka's ``TargetState``)."""

    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


class ConnectorType(enum.StrEnum):
    """Kafka's ``ConnectorType``; the value is the REST spelling."""

    SOURCE = "source"
    SINK = "sink"
    UNKNOWN = "unknown"


class State(enum.StrEnum):
    """Runtime status of a connector or task (Kafka's ``AbstractStatus.State``)."""

    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"
    STOPPED = "STOPPED"
    DESTROYED = "DESTROYED"


@dataclass(frozen=True, slots=True, order=True)
class ConnectorTaskId:
    """One task of a connector; orders by connector, then task number."""

    connector: str
    task: int

    def to_json(self) -> dict[str, Any]:
        return {"connector": self.connector, "task": self.task}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConnectorTaskId:
        return cls(str(data["connector"]), int(data["task"]))

    def __str__(self) -> str:
        return f"{self.connector}-{self.task}"


@dataclass(frozen=True, slots=True)
class ConnectorInfo:
    """A connector's configuration and tasks (``GET /connectors/{c}``)."""

    name: str
    config: Mapping[str, str]
    tasks: tuple[ConnectorTaskId, ...] = ()
    type: ConnectorType = ConnectorType.UNKNOWN

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "config": dict(self.config),
                "tasks": [t.to_json() for t in self.tasks], "type": ConnectorType(self.type).value}


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """A task's id and configuration (an element of ``GET /connectors/{c}/tasks``)."""

    id: ConnectorTaskId
    config: Mapping[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id.to_json(), "config": dict(self.config)}


@dataclass(frozen=True, slots=True)
class ConnectorState:
    """A connector's status: state, the worker running it and the trace of a failure."""

    state: State
    worker_id: str
    trace: str | None = None
    version: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": State(self.state).value, "worker_id": self.worker_id}
        if self.trace:  # Kafka omits an empty trace (JsonInclude.NON_EMPTY)
            out["trace"] = self.trace
        if self.version:
            out["version"] = self.version
        return out


@dataclass(frozen=True, slots=True)
class TaskState:
    """A task's status (``GET /connectors/{c}/tasks/{n}/status``)."""

    id: int
    state: State
    worker_id: str
    trace: str | None = None
    version: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "state": State(self.state).value, "worker_id": self.worker_id}
        if self.trace:
            out["trace"] = self.trace
        if self.version:
            out["version"] = self.version
        return out


@dataclass(frozen=True, slots=True)
class ConnectorStateInfo:
    """A connector's and its tasks' status (``GET /connectors/{c}/status``)."""

    name: str
    connector: ConnectorState
    tasks: tuple[TaskState, ...] = ()
    type: ConnectorType = ConnectorType.UNKNOWN

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "connector": self.connector.to_json(),
                "tasks": [t.to_json() for t in sorted(self.tasks, key=lambda t: t.id)],
                "type": ConnectorType(self.type).value}


@dataclass(frozen=True, slots=True)
class ConnectorOffset:
    """One partition's offset: a source partition/offset pair, or for sinks
    ``{"kafka_topic", "kafka_partition"}`` / ``{"kafka_offset"}`` (Kafka's shapes)."""

    partition: Mapping[str, Any]
    offset: Mapping[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {"partition": dict(self.partition),
                "offset": None if self.offset is None else dict(self.offset)}


@dataclass(frozen=True, slots=True)
class ConnectorOffsets:
    """``GET /connectors/{c}/offsets`` and the body of ``PATCH`` on it."""

    offsets: tuple[ConnectorOffset, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {"offsets": [o.to_json() for o in self.offsets]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConnectorOffsets:
        """Parse a PATCH body; a missing or malformed ``offsets`` list is a ``BadRequestError``."""
        from strom.connect.exceptions import BadRequestError

        raw = data.get("offsets") if isinstance(data, Mapping) else None
        if not isinstance(raw, list):
            raise BadRequestError("Partitions / offsets need to be provided for an alter offsets request")
        out: list[ConnectorOffset] = []
        for item in raw:
            if not isinstance(item, Mapping) or not isinstance(item.get("partition"), Mapping):
                raise BadRequestError("Each offset entry needs a 'partition' object")
            offset = item.get("offset")
            if offset is not None and not isinstance(offset, Mapping):
                raise BadRequestError("An 'offset' must be an object or null")
            out.append(ConnectorOffset(dict(item["partition"]), None if offset is None else dict(offset)))
        return cls(tuple(out))


@runtime_checkable
class Herder(Protocol):
    """What the REST API needs from a herder. Names follow Kafka's ``Herder`` in snake_case."""

    def connectors(self) -> list[str]:
        """Names of all connectors."""
        ...

    def connector_info(self, name: str) -> ConnectorInfo:
        ...

    def connector_config(self, name: str) -> dict[str, str]:
        ...

    def put_connector_config(self, name: str, config: Mapping[str, str], allow_replace: bool,
                             initial_state: TargetState | None = None) -> tuple[bool, ConnectorInfo]:
        """Create (``created=True``) or, when ``allow_replace``, update a connector. A create of an
        existing name without ``allow_replace`` raises ``AlreadyExistsError``; an invalid config
        raises ``BadRequestError`` listing the errors."""
        ...

    def patch_connector_config(self, name: str, patch: Mapping[str, str | None]) -> ConnectorInfo:
        """Merge ``patch`` into the config (``None`` removes a key)."""
        ...

    def delete_connector(self, name: str) -> None:
        ...

    def connector_status(self, name: str) -> ConnectorStateInfo:
        ...

    def task_status(self, task_id: ConnectorTaskId) -> TaskState:
        ...

    def task_configs(self, name: str) -> list[TaskInfo]:
        ...

    def restart_connector(self, name: str, include_tasks: bool = False,
                          only_failed: bool = False) -> ConnectorStateInfo | None:
        """Restart; ``None`` for a plain connector restart (REST 204), else the status of what is
        being restarted (REST 202), as Kafka does."""
        ...

    def restart_task(self, task_id: ConnectorTaskId) -> None:
        ...

    def pause_connector(self, name: str) -> None:
        ...

    def resume_connector(self, name: str) -> None:
        ...

    def stop_connector(self, name: str) -> None:
        ...

    def connector_offsets(self, name: str) -> ConnectorOffsets:
        ...

    def alter_connector_offsets(self, name: str, offsets: ConnectorOffsets) -> str:
        """Alter the offsets of a STOPPED connector; returns Kafka's success message."""
        ...

    def reset_connector_offsets(self, name: str) -> str:
        """Reset the offsets of a STOPPED connector; returns Kafka's success message."""
        ...

    def connector_active_topics(self, name: str) -> list[str]:
        ...

    def reset_connector_active_topics(self, name: str) -> None:
        ...

    def validate_connector_config(self, config: Mapping[str, str]) -> dict[str, Any]:
        """Kafka's ``ConfigInfos`` JSON (see :func:`strom.connect.api.config.config_infos`)."""
        ...

    def plugins(self) -> Sequence[PluginDesc]:
        ...

    def kafka_cluster_id(self) -> str:
        ...

    def leader_url(self) -> str | None:
        """The REST URL of the leader (``None`` when this worker leads or in standalone)."""
        ...


# -- what both herders share ------------------------------------------------------------------

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

    def __init__(self, herder: AbstractHerder, name: str) -> None:
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



class AbstractHerder(ABC):
    """What the standalone and distributed herders share (Kafka's ``AbstractHerder``): the
    worker, the status listener and connector contexts, config validation, the plugin list, the
    cluster id and connector offsets over REST (sink offsets are the consumer group
    ``connect-<name>``'s, through one AdminClient; source offsets are the worker's offset store).

    A subclass says where connector configs and target states live (``_connector_config``,
    ``_target_state``), how statuses are kept (``_set_status``) and how a connector's tasks are
    reconfigured (``_reconfigure``).
    """

    worker: Worker

    def __init__(self, config: WorkerConfig, registry: Any) -> None:
        self.config = config
        self.registry = registry
        self.worker_id = advertised_worker_id(config)
        self._lock = threading.RLock()
        self._admin_client: Any = None
        self._cluster_id: str | None = None
        self._stopped = False

    # -- what a subclass provides -------------------------------------------------------------

    @abstractmethod
    def _connector_config(self, name: str) -> dict[str, str] | None:
        """The connector's stored configuration, ``None`` if there is no such connector."""

    @abstractmethod
    def _target_state(self, name: str) -> TargetState:
        """The state the connector is asked to be in."""

    @abstractmethod
    def _set_status(self, id: Any, state: State, trace: str | None) -> None:
        """Record the state of a connector (``id`` its name) or task (a ``ConnectorTaskId``)."""

    @abstractmethod
    def _reconfigure(self, name: str) -> None:
        """``ConnectorContext.request_task_reconfiguration``: regenerate the connector's task configs."""

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    # -- shared helpers -----------------------------------------------------------------------

    def _require(self, name: str) -> dict[str, str]:
        cfg = self._connector_config(name)
        if cfg is None:
            raise NotFoundError(f"Connector {name} not found")
        return cfg

    def _type(self, name: str) -> ConnectorType:
        from strom.connect.runtime.worker import connector_kind  # worker imports this module

        cfg = self._connector_config(name)
        try:
            cls = self.registry.connector_class(cfg["connector.class"]) if cfg is not None else None
            return ConnectorType(connector_kind(cls)) if cls is not None else ConnectorType.UNKNOWN
        except Exception:
            return ConnectorType.UNKNOWN

    def _ctx(self, name: str) -> _ConnectorContext:
        if self._type(name) == ConnectorType.SOURCE:
            return _SourceContext(self, name)
        return _SinkContext(self, name)

    @staticmethod
    def _named_config(name: str, config: Mapping[str, Any]) -> dict[str, str]:
        """The config of a PUT/POST as strings, its ``name`` the one of the URL."""
        cfg = {str(k): property_str(v) for k, v in config.items()}
        if cfg.get("name", name) != name:
            raise BadRequestError(f"Connector name configuration ({cfg['name']}) doesn't match connector "
                                  f"name in the URL ({name})")
        cfg["name"] = name
        return cfg

    def _validate_or_raise(self, cfg: Mapping[str, str]) -> None:
        result = self.validate_connector_config(cfg)
        if result["error_count"]:
            errors = [f"{c['value']['name']}: {e}" for c in result["configs"]
                      if c.get("value") for e in c["value"]["errors"]]
            raise BadRequestError(f"Connector configuration is invalid and contains the following "
                                  f"{result['error_count']} error(s):\n" + "\n".join(errors))

    @staticmethod
    def _patched(cfg: Mapping[str, str], patch: Mapping[str, str | None]) -> dict[str, str]:
        """``cfg`` with ``patch`` merged in (``None`` removes a key)."""
        out = dict(cfg)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = v
        return out

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
        if self._target_state(name) != TargetState.STOPPED:
            raise BadRequestError(NOT_STOPPED.format(name=name))
        return self._type(name)

    def alter_connector_offsets(self, name: str, offsets: ConnectorOffsets) -> str:
        with self._lock:
            kind = self._require_stopped(name)
            cfg = dict(self._require(name))
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
            cfg = dict(self._require(name))
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

    # -- validation, plugins, cluster -----------------------------------------------------------

    def validate_connector_config(self, config: Mapping[str, str]) -> dict[str, Any]:
        from strom.connect.runtime.worker import connector_kind  # worker imports this module

        props = {str(k): property_str(v) for k, v in config.items()}
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

    def plugins(self) -> Sequence[PluginDesc]:
        return self.registry.plugin_descs()

    def kafka_cluster_id(self) -> str:
        if self._cluster_id is None:
            md = self._admin().list_topics(timeout=30)
            self._cluster_id = md.cluster_id or ""
        return self._cluster_id



def property_str(value: Any) -> str:
    """A config value as the string Kafka would hold (booleans as ``true``/``false``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def advertised_worker_id(config: WorkerConfig) -> str:
    """Kafka's worker id: the advertised REST host:port."""
    listener = config.listeners.split(",")[0].strip()
    hostport = listener.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    host = config.rest_advertised_host_name or host or "localhost"
    port = str(config.rest_advertised_port or port or 8083)
    return f"{host}:{port}"


__all__ = [
    "AbstractHerder",
    "ConnectorInfo",
    "ConnectorOffset",
    "ConnectorOffsets",
    "ConnectorState",
    "ConnectorStateInfo",
    "ConnectorTaskId",
    "ConnectorType",
    "Herder",
    "State",
    "StatusListener",
    "TargetState",
    "TaskInfo",
    "TaskState",
    "advertised_worker_id",
    "property_str",
]
