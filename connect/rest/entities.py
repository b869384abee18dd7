"""Herder value types -> Kafka Connect's REST JSON shapes.

The herder returns its own value types (``ConnectorInfo``, ``ConnectorStateInfo``,
``ConnectorTaskId``, ...); this module renders them exactly as Kafka Connect's REST entities
render, so clients written for Kafka Connect parse our responses. Values that already are plain
JSON (dicts, lists) pass through; objects offering ``to_json()`` are trusted to know their shape.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any


def plain(value: Any) -> Any:
    """A JSON-serialisable copy of ``value`` (enums by name, dataclasses by field)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, enum.Enum):
        return value.name if not isinstance(value.value, str) else value.value
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return plain(to_json())
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _get(obj: Any, *names: str, default: Any = None) -> Any:
    for name in names:
        if isinstance(obj, Mapping):
            if name in obj:
                return obj[name]
        elif hasattr(obj, name):
            return getattr(obj, name)
    return default


def _type_name(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, enum.Enum):
        value = value.value if isinstance(value.value, str) else value.name
    return str(value).lower()


def task_id(value: Any) -> dict[str, Any]:
    """``{"connector": name, "task": n}``."""
    if isinstance(value, Mapping) and set(value) >= {"connector", "task"}:
        return {"connector": value["connector"], "task": int(value["task"])}
    if isinstance(value, tuple) and len(value) == 2 and not hasattr(value, "connector"):
        return {"connector": value[0], "task": int(value[1])}
    return {"connector": value.connector, "task": int(value.task)}


def connector_info(info: Any) -> dict[str, Any]:
    """Kafka's ConnectorInfo: ``{"name", "config", "tasks": [task ids], "type"}``."""
    if callable(getattr(info, "to_json", None)):
        return dict(plain(info))
    return {
        "name": _get(info, "name"),
        "config": {str(k): (None if v is None else str(v)) for k, v in dict(_get(info, "config", default={})).items()},
        "tasks": [task_id(t) for t in (_get(info, "tasks", default=[]) or [])],
        "type": _type_name(_get(info, "type", "connector_type")),
    }


def _state(value: Any, *, task: bool) -> dict[str, Any]:
    if callable(getattr(value, "to_json", None)):
        return dict(plain(value))
    out: dict[str, Any] = {}
    if task:
        ident = _get(value, "id", "task")
        out["id"] = ident if isinstance(ident, int) else task_id(ident)["task"]
    out["state"] = _type_name(_get(value, "state")).upper()  # type: ignore[union-attr]
    out["worker_id"] = _get(value, "worker_id", "worker")
    trace = _get(value, "trace")
    if trace:
        out["trace"] = trace
    version = _get(value, "version")
    if version:
        out["version"] = version
    return out


def task_state(value: Any) -> dict[str, Any]:
    """Kafka's TaskState: ``{"id", "state", "worker_id", "trace"?}``."""
    return _state(value, task=True)


def connector_state_info(value: Any) -> dict[str, Any]:
    """Kafka's ConnectorStateInfo: ``{"name", "connector": {...}, "tasks": [...], "type"}``."""
    if callable(getattr(value, "to_json", None)):
        return dict(plain(value))
    return {
        "name": _get(value, "name"),
        "connector": _state(_get(value, "connector"), task=False),
        "tasks": sorted((task_state(t) for t in (_get(value, "tasks", default=[]) or [])),
                        key=lambda t: t["id"]),
        "type": _type_name(_get(value, "type")),
    }


def task_info(value: Any) -> dict[str, Any]:
    """Kafka's TaskInfo: ``{"id": {"connector", "task"}, "config": {...}}``."""
    if callable(getattr(value, "to_json", None)):
        return dict(plain(value))
    return {"id": task_id(_get(value, "id")), "config": plain(_get(value, "config", default={}))}


def connector_offsets(value: Any) -> dict[str, Any]:
    """Kafka's ConnectorOffsets: ``{"offsets": [{"partition": {...}, "offset": {...}}]}``."""
    value = plain(value)
    if isinstance(value, Mapping) and "offsets" in value:
        return {"offsets": list(value["offsets"])}
    return {"offsets": list(value or [])}


def plugin_desc(value: Any) -> dict[str, Any]:
    """Kafka's PluginInfo: ``{"class", "type", "version"}``."""
    if isinstance(value, Mapping):
        return {"class": value.get("class"), "type": _type_name(value.get("type")),
                "version": value.get("version")}
    return {"class": _get(value, "class_name", "klass", "class"), "type": _type_name(_get(value, "type")),
            "version": _get(value, "version")}
