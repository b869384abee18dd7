"""Kafka Connect's REST resources as an aiohttp application over a ``Herder``.

Paths, JSON bodies and status codes are Kafka Connect's (ConnectorsResource,
ConnectorPluginsResource, LoggingResource, RootResource). Herder calls may block (a standalone
herder starts connectors inline), so each runs on the server's thread pool, never on the loop.

Errors are Kafka's ``{"error_code": N, "message": "..."}``. A follower that gets
``NotLeaderError`` forwards the request to the leader's URL, with Kafka's ``forward`` query
flag bounding the hops to two; ``RebalanceNeededError`` is a 409.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import logging
import ssl
import subprocess
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from strom import __version__
from strom.connect import exceptions as cx
from strom.connect.exceptions import RestError
from strom.connect.rest import entities
from strom.connect.rest.loggers import ROOT, LoggerLevels, parse_level
from strom.connect.rest.openapi import openapi_document
from strom.connect.rest.security import UNAUTHORIZED_BODY, BasicAuthenticator, is_internal_request
from strom.connect.runtime.herder import ConnectorOffsets, ConnectorTaskId, TargetState

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

HERDER_KEY = web.AppKey("herder", object)
EXECUTOR_KEY = web.AppKey("executor", concurrent.futures.Executor)
LOGGERS_KEY = web.AppKey("loggers", LoggerLevels)
STATE_KEY = web.AppKey("state", dict)
AUTH_KEY = web.AppKey("authenticator", BasicAuthenticator)
FORWARD_SSL_KEY = web.AppKey("forward_ssl", ssl.SSLContext)

FORWARD_TIMEOUT = aiohttp.ClientTimeout(total=90)
STALE_CONFIG = ("Cannot complete request momentarily due to stale configuration "
                "(typically caused by a concurrent config change)")
REBALANCE = "Cannot complete request because of a conflicting operation (e.g. worker rebalance)"


def _commit_id() -> str:
    """The git commit of the source tree, as Kafka's AppInfoParser reports its build commit."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short=16", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parent, timeout=5, check=False)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


_COMMIT = _commit_id()


def error_status(exc: BaseException) -> int:
    """The HTTP status of an exception from the herder (Kafka's ConnectExceptionMapper)."""
    status = getattr(exc, "status_code", None) or getattr(exc, "status", None)
    if isinstance(status, int) and 400 <= status < 600:
        return status
    table: list[tuple[str, int]] = [
        ("NotFoundError", 404), ("AlreadyExistsError", 409), ("RebalanceNeededError", 409),
        ("BadRequestError", 400), ("ConfigException", 400),
    ]
    for name, code in table:
        cls = getattr(cx, name, None)
        if isinstance(cls, type) and isinstance(exc, cls):
            return code
    return 500


def error_response(status: int, message: str) -> web.Response:
    return web.json_response({"error_code": status, "message": message}, status=status)


async def call(request: web.Request, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a herder method off the loop; await it when it returns an awaitable or a future."""
    loop = asyncio.get_running_loop()
    result = await loop.run_in_executor(request.app[EXECUTOR_KEY], lambda: fn(*args, **kwargs))
    if isinstance(result, concurrent.futures.Future):
        result = await asyncio.wrap_future(result)
    elif inspect.isawaitable(result):
        result = await result
    return result


def herder_of(request: web.Request) -> Any:
    return request.app[HERDER_KEY]


async def json_body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        raise RestError(400, "Request body is required")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RestError(400, f"Cannot deserialize request body: {exc}") from exc


def query_bool(request: web.Request, name: str, default: bool = False) -> bool:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    raise RestError(400, f"Invalid boolean value for query parameter {name}: {raw}")


def _task_id(connector: str, task: str) -> Any:
    try:
        return ConnectorTaskId(connector, int(task))
    except ValueError as exc:
        raise RestError(404, f"HTTP 404 Not Found: task id {task!r} is not a number") from exc


def _config_strings(config: Any, what: str = "config") -> dict[str, str]:
    if not isinstance(config, Mapping):
        raise RestError(400, f"Connector {what} must be a JSON object")
    out: dict[str, str] = {}
    for key, value in config.items():
        if value is None:
            raise RestError(400, f"Connector {what} value for {key!r} must not be null")
        out[str(key)] = value if isinstance(value, str) else json.dumps(value) if isinstance(
            value, (list, dict)) else str(value).lower() if isinstance(value, bool) else str(value)
    return out


def _check_name(name: str, config: dict[str, str]) -> None:
    """Kafka's checkAndPutConnectorConfigName: the config's name must match the path's."""
    included = config.get("name")
    if included is not None and included != name:
        raise RestError(400, f"Connector name configuration ({included}) doesn't match connector name "
                             f"in the URL ({name})")
    config["name"] = name


# ------------------------------------------------------------------------------ middleware


@web.middleware
async def basic_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Kafka's JaasBasicAuthFilter: 401 unless the credentials pass, internal requests exempt."""
    authenticator = request.app.get(AUTH_KEY)
    if (authenticator is not None and not is_internal_request(request.method, request.path)
            and not authenticator.authenticate(request.headers.get("Authorization"))):
        # debug, as Kafka: a mistyped password must not flood the log
        log.debug("REST request %s %s failed authentication", request.method, request.path)
        return web.Response(status=401, text=UNAUTHORIZED_BODY)
    return await handler(request)


@web.middleware
async def errors_and_forwarding(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except RestError as exc:
        return error_response(exc.status, exc.message)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(exc.status, f"HTTP {exc.status} {exc.reason}")
    except Exception as exc:
        not_leader = getattr(cx, "NotLeaderError", None)
        if isinstance(not_leader, type) and isinstance(exc, not_leader):
            return await forward_to_leader(request, exc)
        status = error_status(exc)
        if status >= 500:
            log.exception("REST request %s %s failed", request.method, request.path)
        message = str(exc) or type(exc).__name__
        if status == 409 and type(exc).__name__ == "RebalanceNeededError" and not str(exc):
            message = REBALANCE
        return error_response(status, message)


async def forward_to_leader(request: web.Request, exc: BaseException) -> web.StreamResponse:
    """Send the request to the leader and relay its answer (Kafka's completeOrForwardRequest)."""
    forward = request.query.get("forward")
    if forward is not None and forward.lower() == "false":
        # Already forwarded twice: the cluster's view is changing under us.
        return error_response(409, STALE_CONFIG)
    leader = getattr(exc, "leader_url", None)
    if not leader:
        try:
            leader = await call(request, herder_of(request).leader_url)
        except Exception:
            leader = None
    if not leader:
        return error_response(409, REBALANCE)
    # The first hop may forward once more (the leader may have changed); the second may not.
    params = dict(request.query)
    params["forward"] = "true" if forward is None else "false"
    url = str(leader).rstrip("/") + request.path
    body = await request.read() or None  # cached by aiohttp when the handler read it already
    headers = {"Content-Type": request.headers.get("Content-Type", "application/json"),
               "Accept": "application/json"}
    # Kafka's RestClient passes the caller's credentials on to the leader
    if "Authorization" in request.headers:
        headers["Authorization"] = request.headers["Authorization"]
    tls = request.app.get(FORWARD_SSL_KEY)
    try:
        async with aiohttp.ClientSession(timeout=FORWARD_TIMEOUT) as session, session.request(
                request.method, url, params=params, data=body, headers=headers,
                ssl=tls if tls is not None and url.startswith("https:") else True) as resp:
            payload = await resp.read()
            return web.Response(status=resp.status, body=payload,
                                content_type=resp.content_type if payload else None)
    except (TimeoutError, aiohttp.ClientError) as err:
        return error_response(500, f"Error trying to forward REST request: {err}")


# ------------------------------------------------------------------------------ root


async def root(request: web.Request) -> web.Response:
    cluster_id = await call(request, herder_of(request).kafka_cluster_id)
    return web.json_response({"version": __version__, "commit": _COMMIT, "kafka_cluster_id": cluster_id})


async def health(request: web.Request) -> web.Response:
    """KIP-1017: 200 when ready, 503 while starting, 500 when the herder does not answer."""
    herder = herder_of(request)
    ready = getattr(herder, "is_ready", None)
    try:
        if callable(ready) and not await call(request, ready):
            return web.json_response({"status": "starting", "message": "Worker is still starting up."},
                                     status=503)
        await asyncio.wait_for(call(request, herder.connectors), timeout=10)
    except Exception as exc:
        return web.json_response({"status": "unhealthy",
                                  "message": f"Worker was unable to handle this request: {exc}"},
                                 status=500)
    return web.json_response({"status": "healthy",
                              "message": "Worker has completed startup and is ready to handle requests."})


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document(__version__))


# ------------------------------------------------------------------------------ connectors


async def list_connectors(request: web.Request) -> web.Response:
    herder = herder_of(request)
    names = sorted(await call(request, herder.connectors))
    expand = request.query.getall("expand", [])
    if not expand:
        return web.json_response(names)
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        entry: dict[str, Any] = {}
        try:
            if "status" in expand:
                entry["status"] = entities.connector_state_info(await call(request, herder.connector_status, name))
            if "info" in expand:
                entry["info"] = entities.connector_info(await call(request, herder.connector_info, name))
        except Exception as exc:
            if error_status(exc) != 404:
                raise
            continue
        out[name] = entry
    return web.json_response(out)


async def create_connector(request: web.Request) -> web.Response:
    body = await json_body(request)
    if not isinstance(body, Mapping):
        raise RestError(400, "Request body must be a JSON object with 'name' and 'config'")
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise RestError(400, "Connector name cannot be null or empty")
    name = name.strip()
    if "/" in name:
        raise RestError(400, "Connector name cannot contain '/'")
    config = _config_strings(body.get("config") if body.get("config") is not None else {})
    _check_name(name, config)
    initial = body.get("initial_state")
    if initial is not None and str(initial).upper() not in ("RUNNING", "PAUSED", "STOPPED"):
        raise RestError(400, f"Invalid initial state {initial!r}: expected RUNNING, PAUSED or STOPPED")
    herder = herder_of(request)
    kwargs: dict[str, Any] = {}
    if initial is not None:
        # REST says RUNNING where the herder's TargetState says STARTED (KIP-980).
        kwargs["initial_state"] = {"RUNNING": TargetState.STARTED, "PAUSED": TargetState.PAUSED,
                                   "STOPPED": TargetState.STOPPED}[str(initial).upper()]
    _created, info = await call(request, herder.put_connector_config, name, config, False, **kwargs)
    return web.json_response(entities.connector_info(info), status=201,
                             headers={"Location": f"/connectors/{name}"})


async def get_connector(request: web.Request) -> web.Response:
    info = await call(request, herder_of(request).connector_info, request.match_info["c"])
    return web.json_response(entities.connector_info(info))


async def get_config(request: web.Request) -> web.Response:
    config = await call(request, herder_of(request).connector_config, request.match_info["c"])
    return web.json_response(entities.plain(config))


async def put_config(request: web.Request) -> web.Response:
    name = request.match_info["c"]
    config = _config_strings(await json_body(request))
    _check_name(name, config)
    created, info = await call(request, herder_of(request).put_connector_config, name, config, True)
    headers = {"Location": f"/connectors/{name}"} if created else None
    return web.json_response(entities.connector_info(info), status=201 if created else 200, headers=headers)


async def patch_config(request: web.Request) -> web.Response:
    name = request.match_info["c"]
    body = await json_body(request)
    if not isinstance(body, Mapping):
        raise RestError(400, "Connector config patch must be a JSON object")
    # null removes a key (KIP-477); other values become strings like every connector config.
    patch: dict[str, str | None] = {str(k): None if v is None else _config_strings({k: v})[str(k)]
                                    for k, v in body.items()}
    if "name" in patch and patch["name"] != name:
        raise RestError(400, f"Connector name configuration ({patch['name']}) doesn't match connector name "
                             f"in the URL ({name})")
    info = await call(request, herder_of(request).patch_connector_config, name, patch)
    return web.json_response(entities.connector_info(info))


async def delete_connector(request: web.Request) -> web.Response:
    await call(request, herder_of(request).delete_connector, request.match_info["c"])
    return web.Response(status=204)


async def connector_status(request: web.Request) -> web.Response:
    state = await call(request, herder_of(request).connector_status, request.match_info["c"])
    return web.json_response(entities.connector_state_info(state))


async def task_configs(request: web.Request) -> web.Response:
    tasks = await call(request, herder_of(request).task_configs, request.match_info["c"])
    return web.json_response([entities.task_info(t) for t in tasks])


async def task_status(request: web.Request) -> web.Response:
    tid = _task_id(request.match_info["c"], request.match_info["n"])
    state = await call(request, herder_of(request).task_status, tid)
    return web.json_response(entities.task_state(state))


async def restart_connector(request: web.Request) -> web.Response:
    name = request.match_info["c"]
    include_tasks = query_bool(request, "includeTasks")
    only_failed = query_bool(request, "onlyFailed")
    result = await call(request, herder_of(request).restart_connector, name, include_tasks, only_failed)
    if not include_tasks and not only_failed:
        return web.Response(status=204)  # Kafka's backward-compatible plain restart
    if result is None:
        result = await call(request, herder_of(request).connector_status, name)
    return web.json_response(entities.connector_state_info(result), status=202)


async def restart_task(request: web.Request) -> web.Response:
    tid = _task_id(request.match_info["c"], request.match_info["n"])
    await call(request, herder_of(request).restart_task, tid)
    return web.Response(status=204)


def _target_state_handler(method: str) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        await call(request, getattr(herder_of(request), method), request.match_info["c"])
        return web.Response(status=202)
    handler.__name__ = method
    return handler


async def get_offsets(request: web.Request) -> web.Response:
    offsets = await call(request, herder_of(request).connector_offsets, request.match_info["c"])
    return web.json_response(entities.connector_offsets(offsets))


async def alter_offsets(request: web.Request) -> web.Response:
    body = await json_body(request)
    raw = body.get("offsets") if isinstance(body, Mapping) else None
    if not isinstance(raw, list) or not raw:
        raise RestError(400, "Partitions / offsets need to be provided for an alter offsets request")
    parsed = ConnectorOffsets.from_json(body)
    result = await call(request, herder_of(request).alter_connector_offsets, request.match_info["c"], parsed)
    message = _message(result, "The offsets for this connector have been altered successfully")
    return web.json_response({"message": message})


async def reset_offsets(request: web.Request) -> web.Response:
    result = await call(request, herder_of(request).reset_connector_offsets, request.match_info["c"])
    message = _message(result, "The offsets for this connector have been reset successfully")
    return web.json_response({"message": message})


def _message(result: Any, default: str) -> str:
    if isinstance(result, str) and result:
        return result
    if isinstance(result, Mapping) and isinstance(result.get("message"), str):
        return str(result["message"])
    text = getattr(result, "message", None)
    return text if isinstance(text, str) and text else default


async def active_topics(request: web.Request) -> web.Response:
    name = request.match_info["c"]
    topics = await call(request, herder_of(request).connector_active_topics, name)
    if isinstance(topics, Mapping):  # already Kafka's {"name": {"topics": [...]}}
        return web.json_response(entities.plain(topics))
    return web.json_response({name: {"topics": sorted(topics or [])}})


async def reset_topics(request: web.Request) -> web.Response:
    await call(request, herder_of(request).reset_connector_active_topics, request.match_info["c"])
    return web.Response(status=202)


# ------------------------------------------------------------------------------ plugins


_CONNECTOR_TYPES = ("source", "sink")


async def _plugin_descs(request: web.Request) -> list[dict[str, Any]]:
    plugins = await call(request, herder_of(request).plugins)
    descs = plugins.plugin_descs() if hasattr(plugins, "plugin_descs") else plugins
    return [entities.plugin_desc(d) for d in descs]


async def list_plugins(request: web.Request) -> web.Response:
    only = query_bool(request, "connectorsOnly", default=True)
    descs = await _plugin_descs(request)
    if only:
        descs = [d for d in descs if d["type"] in _CONNECTOR_TYPES]
    return web.json_response(sorted(descs, key=lambda d: (d["class"] or "", d["type"] or "")))


def _registry(request: web.Request) -> Any:
    """The plugin registry: given to the server, else the herder's (or its worker's), else the default."""
    registry = request.app[STATE_KEY].get("registry")
    if registry is None:
        herder = herder_of(request)
        registry = getattr(herder, "registry", None) or getattr(getattr(herder, "worker", None), "registry", None)
    if registry is None:
        from strom.connect.plugins import PluginRegistry

        registry = PluginRegistry()
    request.app[STATE_KEY]["registry"] = registry
    return registry


def _resolve_plugin(registry: Any, name: str) -> type | None:
    """The class of any kind of plugin called ``name`` (Kafka serves config for every kind)."""
    from strom.connect.plugins import PluginKind

    for kind in PluginKind:
        try:
            return registry.resolve(name, kind)
        except Exception:
            continue
    return None


def config_key_info(key: Any) -> dict[str, Any]:
    """Kafka's ConfigKeyInfo (KIP-769) of one ConfigDef key."""
    default = _attr(key, "default_value", "default")
    no_default = _is_no_default(default)
    type_ = _attr(key, "type")
    importance = _attr(key, "importance")
    return {
        "name": _attr(key, "name"),
        "type": _enum_name(type_),
        "required": no_default,
        "default_value": None if no_default or default is None else _default_text(default),
        "importance": _enum_name(importance),
        "documentation": _attr(key, "documentation", "doc") or "",
        "group": _attr(key, "group"),
        "order_in_group": _attr(key, "order_in_group", "order", default=-1),
        "width": _enum_name(_attr(key, "width")) or "NONE",
        "display_name": _attr(key, "display_name") or _attr(key, "name"),
        "dependents": list(_attr(key, "dependents", default=()) or ()),
    }


def _attr(obj: Any, *names: str, default: Any = None) -> Any:
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
    return default


def _is_no_default(value: Any) -> bool:
    try:
        from strom.connect.api.config import NO_DEFAULT
    except ImportError:  # pragma: no cover - the SPI is part of the package
        return False
    return value is NO_DEFAULT


def _enum_name(value: Any) -> str | None:
    if value is None:
        return None
    name = getattr(value, "name", None)
    return str(name if isinstance(name, str) else value).upper()


def _default_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


async def plugin_config(request: web.Request) -> web.Response:
    name = request.match_info["p"]
    cls = _resolve_plugin(await call(request, _registry, request), name)
    if cls is None:
        raise RestError(404, f"Unknown plugin {name}.")
    config_def = cls().config()
    keys = config_def.config_keys
    values = keys.values() if isinstance(keys, Mapping) else keys
    return web.json_response([config_key_info(k) for k in values])


async def validate_config(request: web.Request) -> web.Response:
    plugin = request.match_info["p"]
    config = _config_strings(await json_body(request))
    included = config.get("connector.class")
    if included is not None and not _same_plugin(included, plugin):
        raise RestError(400, f"Included connector type {included} does not match request type {plugin}")
    config["connector.class"] = included or plugin
    result = await call(request, herder_of(request).validate_connector_config, config)
    return web.json_response(entities.plain(result))


def _same_plugin(a: str, b: str) -> bool:
    def norm(s: str) -> str:
        return s.rsplit(".", 1)[-1].removesuffix("Connector")
    return a == b or a.endswith(b) or b.endswith(a) or norm(a) == norm(b)


# ------------------------------------------------------------------------------ loggers


async def all_loggers(request: web.Request) -> web.Response:
    return web.json_response(request.app[LOGGERS_KEY].all_levels())


async def get_logger(request: web.Request) -> web.Response:
    name = request.match_info["logger"]
    entry = request.app[LOGGERS_KEY].level(name)
    if entry is None:
        raise RestError(404, f"Logger {name} not found.")
    return web.json_response(entry)


async def set_logger(request: web.Request) -> web.Response:
    name = request.match_info["logger"]
    body = await json_body(request)
    level_text = body.get("level") if isinstance(body, Mapping) else None
    if not isinstance(level_text, str) or not level_text:
        raise RestError(400, "The log level must be specified in the request body as 'level'")
    level = parse_level(level_text)
    if level is None:
        raise RestError(404, f"invalid log level '{level_text}'.")
    scope = request.query.get("scope", "worker").lower()
    if scope not in ("worker", "cluster"):
        scope = "worker"  # Kafka logs a warning and treats unknown scopes as worker
    herder = herder_of(request)
    if scope == "cluster" and hasattr(herder, "set_cluster_logger_level"):
        await call(request, herder.set_cluster_logger_level, name, level_text.upper())
        return web.Response(status=204)
    affected = request.app[LOGGERS_KEY].set_level(name if name else ROOT, level)
    if scope == "cluster":
        return web.Response(status=204)
    return web.json_response(affected)


async def metrics(request: web.Request) -> web.Response:
    # Not the broker's constant: Connect imports nothing of core but its config (the layering).
    from strom.connect.runtime.metrics import CONTENT_TYPE, ConnectMetrics

    body = await call(request, ConnectMetrics(herder_of(request)).exposition)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


# ------------------------------------------------------------------------------ app


def build_app(herder: Any, executor: concurrent.futures.Executor, registry: Any = None, *,
              authenticator: BasicAuthenticator | None = None,
              forward_ssl: ssl.SSLContext | None = None) -> web.Application:
    """The aiohttp application serving Kafka Connect's REST API over ``herder``; with an
    ``authenticator`` every request but the internal ones needs basic credentials;
    ``forward_ssl`` is the TLS context of requests forwarded to an https leader."""
    app = web.Application(middlewares=[basic_auth, errors_and_forwarding])
    if authenticator is not None:
        app[AUTH_KEY] = authenticator
    if forward_ssl is not None:
        app[FORWARD_SSL_KEY] = forward_ssl
    app[HERDER_KEY] = herder
    app[STATE_KEY] = {"registry": registry}
    app[EXECUTOR_KEY] = executor
    app[LOGGERS_KEY] = LoggerLevels()
    r = app.router
    r.add_get("/", root)
    r.add_get("/health", health)
    r.add_get("/metrics", metrics)  # Prometheus, Kafka Connect's names (strom.connect.runtime.metrics)
    r.add_get("/openapi.json", openapi)
    r.add_get("/connectors", list_connectors)
    r.add_post("/connectors", create_connector)
    r.add_get("/connectors/{c}", get_connector)
    r.add_delete("/connectors/{c}", delete_connector)
    r.add_get("/connectors/{c}/config", get_config)
    r.add_put("/connectors/{c}/config", put_config)
    r.add_patch("/connectors/{c}/config", patch_config)
    r.add_get("/connectors/{c}/status", connector_status)
    r.add_get("/connectors/{c}/tasks", task_configs)
    r.add_get("/connectors/{c}/tasks/{n}/status", task_status)
    r.add_post("/connectors/{c}/restart", restart_connector)
    r.add_post("/connectors/{c}/tasks/{n}/restart", restart_task)
    r.add_put("/connectors/{c}/pause", _target_state_handler("pause_connector"))
    r.add_put("/connectors/{c}/resume", _target_state_handler("resume_connector"))
    r.add_put("/connectors/{c}/stop", _target_state_handler("stop_connector"))
    r.add_get("/connectors/{c}/offsets", get_offsets)
    r.add_patch("/connectors/{c}/offsets", alter_offsets)
    r.add_delete("/connectors/{c}/offsets", reset_offsets)
    r.add_get("/connectors/{c}/topics", active_topics)
    r.add_put("/connectors/{c}/topics/reset", reset_topics)
    r.add_get("/connector-plugins", list_plugins)
    r.add_get("/connector-plugins/{p}/config", plugin_config)
    r.add_put("/connector-plugins/{p}/config/validate", validate_config)
    r.add_get("/admin/loggers", all_loggers)
    r.add_get("/admin/loggers/{logger}", get_logger)
    r.add_put("/admin/loggers/{logger}", set_logger)
    return app
