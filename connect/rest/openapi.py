"""The OpenAPI 3 document served at GET /openapi.json, describing Kafka Connect's REST API."""

from __future__ import annotations

from typing import Any

_ERROR = {"$ref": "#/components/schemas/Error"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _resp(code: int, desc: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"description": desc}
    if schema is not None:
        out["content"] = _json(schema)
    return {str(code): out}


def _op(summary: str, responses: dict[str, Any], *, body: dict[str, Any] | None = None,
        params: list[dict[str, Any]] | None = None, errors: tuple[int, ...] = (404, 500)) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": dict(responses)}
    for code in errors:
        op["responses"].setdefault(str(code), {"description": "Error", "content": _json(_ERROR)})
    if body is not None:
        op["requestBody"] = {"required": True, "content": _json(body)}
    if params:
        op["parameters"] = params
    return op


def _path_param(name: str, schema_type: str = "string") -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": schema_type}}


def _query(name: str, schema_type: str = "boolean", desc: str = "") -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": {"type": schema_type},
            "description": desc}


_C = [_path_param("connector")]
_CT = [_path_param("connector"), _path_param("task", "integer")]
_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_REF = {name: {"$ref": f"#/components/schemas/{name}"} for name in (
    "ConnectorInfo", "ConnectorStateInfo", "TaskState", "TaskInfo", "ConnectorOffsets", "PluginInfo",
    "ConfigKeyInfo", "ConfigInfos", "ServerInfo", "Message", "CreateConnectorRequest", "LoggerLevel")}

_SCHEMAS: dict[str, Any] = {
    "Error": {"type": "object", "properties": {"error_code": {"type": "integer"},
                                                "message": {"type": "string"}}},
    "ServerInfo": {"type": "object", "properties": {"version": {"type": "string"},
                                                     "commit": {"type": "string"},
                                                     "kafka_cluster_id": {"type": "string"}}},
    "ConnectorTaskId": {"type": "object", "properties": {"connector": {"type": "string"},
                                                          "task": {"type": "integer"}}},
    "ConnectorInfo": {"type": "object", "properties": {
        "name": {"type": "string"}, "config": _STR_MAP,
        "tasks": {"type": "array", "items": {"$ref": "#/components/schemas/ConnectorTaskId"}},
        "type": {"type": "string", "enum": ["source", "sink", "unknown"]}}},
    "CreateConnectorRequest": {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string"}, "config": _STR_MAP,
        "initial_state": {"type": "string", "enum": ["RUNNING", "PAUSED", "STOPPED"]}}},
    "ConnectorState": {"type": "object", "properties": {
        "state": {"type": "string"}, "worker_id": {"type": "string"}, "trace": {"type": "string"}}},
    "TaskState": {"type": "object", "properties": {
        "id": {"type": "integer"}, "state": {"type": "string"}, "worker_id": {"type": "string"},
        "trace": {"type": "string"}}},
    "ConnectorStateInfo": {"type": "object", "properties": {
        "name": {"type": "string"}, "connector": {"$ref": "#/components/schemas/ConnectorState"},
        "tasks": {"type": "array", "items": {"$ref": "#/components/schemas/TaskState"}},
        "type": {"type": "string"}}},
    "TaskInfo": {"type": "object", "properties": {
        "id": {"$ref": "#/components/schemas/ConnectorTaskId"}, "config": _STR_MAP}},
    "ConnectorOffsets": {"type": "object", "properties": {"offsets": {"type": "array", "items": {
        "type": "object", "properties": {"partition": {"type": "object"},
                                         "offset": {"type": "object", "nullable": True}}}}}},
    "Message": {"type": "object", "properties": {"message": {"type": "string"}}},
    "PluginInfo": {"type": "object", "properties": {
        "class": {"type": "string"}, "type": {"type": "string"}, "version": {"type": "string"}}},
    "ConfigKeyInfo": {"type": "object", "properties": {
        k: {"type": t} for k, t in (("name", "string"), ("type", "string"), ("required", "boolean"),
                                    ("default_value", "string"), ("importance", "string"),
                                    ("documentation", "string"), ("group", "string"),
                                    ("order_in_group", "integer"), ("width", "string"),
                                    ("display_name", "string"))} | {
        "dependents": {"type": "array", "items": {"type": "string"}}}},
    "ConfigInfos": {"type": "object", "properties": {
        "name": {"type": "string"}, "error_count": {"type": "integer"},
        "groups": {"type": "array", "items": {"type": "string"}},
        "configs": {"type": "array", "items": {"type": "object", "properties": {
            "definition": {"$ref": "#/components/schemas/ConfigKeyInfo"},
            "value": {"type": "object", "properties": {
                "name": {"type": "string"}, "value": {"type": "string", "nullable": True},
                "recommended_values": {"type": "array", "items": {"type": "string"}},
                "errors": {"type": "array", "items": {"type": "string"}},
                "visible": {"type": "boolean"}}}}}}}},
    "LoggerLevel": {"type": "object", "properties": {"level": {"type": "string"},
                                                      "last_modified": {"type": "integer", "nullable": True}}},
}


def openapi_document(version: str) -> dict[str, Any]:
    """The OpenAPI 3.0 description of every route the REST server answers."""
    paths: dict[str, Any] = {
        "/": {"get": _op("Worker version and Kafka cluster id", _resp(200, "OK", _REF["ServerInfo"]), errors=(500,))},
        "/health": {"get": _op("Worker health (KIP-1017)", _resp(200, "Healthy") | _resp(503, "Starting"),
                               errors=(500,))},
        "/openapi.json": {"get": _op("This document", _resp(200, "OK", {"type": "object"}), errors=())},
        "/metrics": {"get": _op("Prometheus metrics under Kafka Connect's names", _resp(200, "Text exposition format"),
                                errors=(500,))},
        "/connectors": {
            "get": _op("List connectors", _resp(200, "Names, or a map when expanded",
                                                {"oneOf": [{"type": "array", "items": {"type": "string"}},
                                                           {"type": "object"}]}),
                       params=[{"name": "expand", "in": "query", "required": False,
                                "schema": {"type": "array", "items": {"type": "string",
                                                                      "enum": ["status", "info"]}},
                                "style": "form", "explode": True}], errors=(500,)),
            "post": _op("Create a connector", _resp(201, "Created", _REF["ConnectorInfo"]),
                        body=_REF["CreateConnectorRequest"], errors=(400, 409, 500))},
        "/connectors/{connector}": {
            "get": _op("Connector info", _resp(200, "OK", _REF["ConnectorInfo"]), params=_C),
            "delete": _op("Delete a connector", _resp(204, "Deleted"), params=_C, errors=(404, 409, 500))},
        "/connectors/{connector}/config": {
            "get": _op("Connector config", _resp(200, "OK", _STR_MAP), params=_C),
            "put": _op("Create or replace a connector's config",
                       _resp(200, "Updated", _REF["ConnectorInfo"]) | _resp(201, "Created", _REF["ConnectorInfo"]),
                       body=_STR_MAP, params=_C, errors=(400, 409, 500)),
            "patch": _op("Patch a connector's config (null removes a key)", _resp(200, "OK", _REF["ConnectorInfo"]),
                         body={"type": "object"}, params=_C, errors=(400, 404, 409, 500))},
        "/connectors/{connector}/status": {
            "get": _op("Connector and task states", _resp(200, "OK", _REF["ConnectorStateInfo"]), params=_C)},
        "/connectors/{connector}/tasks": {
            "get": _op("Task configs", _resp(200, "OK", {"type": "array", "items": _REF["TaskInfo"]}), params=_C)},
        "/connectors/{connector}/tasks/{task}/status": {
            "get": _op("Task state", _resp(200, "OK", _REF["TaskState"]), params=_CT)},
        "/connectors/{connector}/restart": {
            "post": _op("Restart a connector (and tasks)",
                        _resp(202, "Restarting", _REF["ConnectorStateInfo"]) | _resp(204, "Restarted"),
                        params=[*_C, _query("includeTasks"), _query("onlyFailed")], errors=(404, 409, 500))},
        "/connectors/{connector}/tasks/{task}/restart": {
            "post": _op("Restart a task", _resp(204, "Restarted"), params=_CT, errors=(404, 409, 500))},
        **{f"/connectors/{{connector}}/{verb}": {
            "put": _op(f"{verb.capitalize()} a connector", _resp(202, "Accepted"), params=_C, errors=(404, 409, 500))}
           for verb in ("pause", "resume", "stop")},
        "/connectors/{connector}/offsets": {
            "get": _op("Connector offsets", _resp(200, "OK", _REF["ConnectorOffsets"]), params=_C),
            "patch": _op("Alter offsets (connector must be STOPPED)", _resp(200, "OK", _REF["Message"]),
                         body=_REF["ConnectorOffsets"], params=_C, errors=(400, 404, 500)),
            "delete": _op("Reset offsets (connector must be STOPPED)", _resp(200, "OK", _REF["Message"]),
                          params=_C, errors=(400, 404, 500))},
        "/connectors/{connector}/topics": {
            "get": _op("Active topics", _resp(200, "OK", {"type": "object"}), params=_C)},
        "/connectors/{connector}/topics/reset": {
            "put": _op("Reset active topics", _resp(202, "Accepted"), params=_C)},
        "/connector-plugins": {
            "get": _op("Installed plugins", _resp(200, "OK", {"type": "array", "items": _REF["PluginInfo"]}),
                       params=[_query("connectorsOnly", desc="false lists converters, transforms, ...")],
                       errors=(500,))},
        "/connector-plugins/{plugin}/config": {
            "get": _op("A plugin's config definition",
                       _resp(200, "OK", {"type": "array", "items": _REF["ConfigKeyInfo"]}),
                       params=[_path_param("plugin")])},
        "/connector-plugins/{plugin}/config/validate": {
            "put": _op("Validate a connector config", _resp(200, "OK", _REF["ConfigInfos"]), body=_STR_MAP,
                       params=[_path_param("plugin")], errors=(400, 404, 500))},
        "/admin/loggers": {
            "get": _op("Logger levels", _resp(200, "OK", {"type": "object",
                                                          "additionalProperties": _REF["LoggerLevel"]}),
                       errors=(500,))},
        "/admin/loggers/{logger}": {
            "get": _op("A logger's level", _resp(200, "OK", _REF["LoggerLevel"]), params=[_path_param("logger")]),
            "put": _op("Set a logger's level (and its descendants')",
                       _resp(200, "Affected loggers", {"type": "array", "items": {"type": "string"}})
                       | _resp(204, "Applied cluster-wide"),
                       body={"type": "object", "properties": {"level": {"type": "string"}}},
                       params=[_path_param("logger"), _query("scope", "string", "worker or cluster")],
                       errors=(400, 404, 500))},
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "strom.connect REST API (Kafka Connect compatible)", "version": version},
        "paths": paths,
        "components": {"schemas": _SCHEMAS},
    }
