"""The ``Herder``: what the REST layer (and the CLI) call to manage connectors, and the value
types it answers with.

A herder (``StandaloneHerder``, ``DistributedHerder``) owns the connector configurations and
drives the worker. Its methods are synchronous and may block (the REST server calls them off its
event loop). Errors are the classes of :mod:`strom.connect.exceptions` (``NotFoundError`` 404,
``AlreadyExistsError``/``RebalanceNeededError`` 409, ``NotLeaderError`` for forwarding,
``BadRequestError`` 400). Every value type has ``to_json()`` giving Kafka Connect's REST JSON.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from strom.connect.plugins import PluginDesc


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


__all__ = [
    "ConnectorInfo",
    "ConnectorOffset",
    "ConnectorOffsets",
    "ConnectorState",
    "ConnectorStateInfo",
    "ConnectorTaskId",
    "ConnectorType",
    "Herder",
    "State",
    "TargetState",
    "TaskInfo",
    "TaskState",
]
