"""The console's HTTP server: the JSON API under /api/... and the static pages.

Admin calls block (librdkafka futures), so each runs in a thread with a deadline; a failure is a
JSON ``{"error": message}`` with status 4xx/5xx that the page shows as text, never a stack trace.
A sampler task keeps, in memory, log-end offsets (cluster throughput) and group lag over time.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from aiohttp import web

from strom.console.kafka import Cluster, ConsoleError

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
CALL_TIMEOUT_S = 15.0
SAMPLE_INTERVAL_S = 5.0
HISTORY = 120  # samples kept per series (10 minutes at the default interval)
T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Console:
    """State of one console: the cluster client, the optional Connect URL and the sampled history."""

    def __init__(self, bootstrap: str, connect_url: str | None = None, read_only: bool = False,
                 sample_interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.cluster = Cluster(bootstrap)
        self.connect_url = connect_url.rstrip("/") if connect_url else None
        self.read_only = read_only
        self.sample_interval_s = sample_interval_s
        self.throughput: collections.deque[dict[str, float]] = collections.deque(maxlen=HISTORY)
        self.lag_history: dict[str, collections.deque[dict[str, float]]] = {}
        self._last_end: tuple[float, int] | None = None
        self._sampler: asyncio.Task[None] | None = None

    def start_sampling(self) -> None:
        """Sample from the first API call on: an unopened console makes no calls to the cluster."""
        if self._sampler is None:
            self._sampler = asyncio.get_running_loop().create_task(self.sampler())

    def stop_sampling(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            self._sampler = None

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.wait_for(asyncio.to_thread(fn, *args), CALL_TIMEOUT_S)
        except TimeoutError:
            raise ConsoleError(f"the cluster did not answer within {CALL_TIMEOUT_S:.0f} s") from None

    async def sample(self) -> None:
        """One sample: total log-end offset (its rate is the throughput) and every group's lag."""
        now = time.time()
        ends = await self.call(self.cluster.end_offsets)
        total = sum(v for (t, _), v in ends.items() if v > 0 and not t.startswith("__"))
        if self._last_end is not None and now > self._last_end[0]:
            rate = max(0.0, (total - self._last_end[1]) / (now - self._last_end[0]))
            self.throughput.append({"t": now, "records_per_s": rate})
        self._last_end = (now, total)
        for g in await self.call(self.cluster.groups):
            try:
                lag = await self.call(self.cluster.group_lag, g["group"])
            except ConsoleError:
                continue
            series = self.lag_history.setdefault(g["group"], collections.deque(maxlen=HISTORY))
            series.append({"t": now, "lag": float(sum(r["lag"] for r in lag))})

    async def sampler(self) -> None:
        while True:
            try:
                await self.sample()
            except (ConsoleError, OSError) as e:
                log.debug("console sample failed: %s", e)
            except Exception:
                log.exception("console sample failed")
            await asyncio.sleep(self.sample_interval_s)

    # ---- Connect REST --------------------------------------------------------------------------
    async def connect(self, method: str, path: str, body: Any = None) -> Any:
        if not self.connect_url:
            raise ConsoleError("no Connect worker: start the console with --connect-url URL")
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=CALL_TIMEOUT_S)) as s, \
                    s.request(method, self.connect_url + path, json=body) as r:
                data: Any = await r.json(content_type=None) if r.content_length != 0 else None
                if r.status >= 400:
                    msg = data.get("message") if isinstance(data, dict) else None
                    raise ConsoleError(f"Connect {r.status}: {msg or r.reason}")
                return data
        except (aiohttp.ClientError, TimeoutError) as e:
            raise ConsoleError(f"Connect worker {self.connect_url} unreachable: {e or type(e).__name__}") from None


CONSOLE: web.AppKey[Console] = web.AppKey("console", Console)
SAMPLE: web.AppKey[bool] = web.AppKey("sample", bool)


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    console: Console = request.app[CONSOLE]
    if request.path.startswith("/api/") and request.app[SAMPLE]:
        console.start_sampling()
    if request.path.startswith("/api/") and request.method not in ("GET", "HEAD") and console.read_only:
        return web.json_response({"error": "the console is read-only (--read-only)"}, status=403)
    try:
        return await handler(request)
    except ConsoleError as e:
        return web.json_response({"error": str(e)}, status=400)
    except web.HTTPException:
        raise
    except (ValueError, KeyError) as e:
        return web.json_response({"error": f"bad request: {e}"}, status=400)
    except Exception as e:
        log.exception("console: %s %s failed", request.method, request.path)
        return web.json_response({"error": f"{type(e).__name__}: {e}"}, status=500)


def _c(request: web.Request) -> Console:
    console: Console = request.app[CONSOLE]
    return console


async def _json(request: web.Request) -> dict[str, Any]:
    body = await request.json() if request.can_read_body else {}
    if not isinstance(body, dict):
        raise ValueError("expected a JSON object")
    return body


async def info(request: web.Request) -> web.Response:
    c = _c(request)
    return web.json_response({"read_only": c.read_only, "connect": bool(c.connect_url),
                              "bootstrap": c.cluster.bootstrap})


async def overview(request: web.Request) -> web.Response:
    c = _c(request)
    data = await c.call(c.cluster.overview)
    data["throughput"] = list(c.throughput)
    return web.json_response(data)


async def topics(request: web.Request) -> web.Response:
    c = _c(request)
    return web.json_response(await c.call(c.cluster.topics))


async def create_topic(request: web.Request) -> web.Response:
    c = _c(request)
    b = await _json(request)
    await c.call(c.cluster.create_topic, str(b["name"]), int(b.get("partitions", 1)),
                 int(b.get("replication_factor", 1)), {str(k): str(v) for k, v in b.get("configs", {}).items()})
    return web.json_response({"created": b["name"]}, status=201)


async def topic(request: web.Request) -> web.Response:
    c = _c(request)
    return web.json_response(await c.call(c.cluster.topic, request.match_info["name"]))


async def delete_topic(request: web.Request) -> web.Response:
    c = _c(request)
    await c.call(c.cluster.delete_topic, request.match_info["name"])
    return web.json_response({"deleted": request.match_info["name"]})


async def add_partitions(request: web.Request) -> web.Response:
    c = _c(request)
    b = await _json(request)
    await c.call(c.cluster.add_partitions, request.match_info["name"], int(b["partitions"]))
    return web.json_response({"partitions": int(b["partitions"])})


async def alter_configs(request: web.Request) -> web.Response:
    c = _c(request)
    b = await _json(request)
    await c.call(c.cluster.alter_topic_configs, request.match_info["name"],
                 {str(k): str(v) for k, v in b.get("set", {}).items()}, [str(k) for k in b.get("delete", [])])
    return web.json_response(await c.call(c.cluster.topic_configs, request.match_info["name"]))


def _int(q: Any, key: str, default: int | None = None) -> int | None:
    v = q.get(key)
    return default if v in (None, "") else int(v)


async def messages(request: web.Request) -> web.Response:
    c = _c(request)
    q = request.query
    limit = min(_int(q, "limit", 50) or 50, 500)
    window = min(_int(q, "window", 1000) or 1000, 10000)  # the search window is bounded
    data = await c.call(c.cluster.messages, request.match_info["name"], _int(q, "partition", 0) or 0,
                        _int(q, "offset"), _int(q, "timestamp"), limit, q.get("search") or None, window)
    return web.json_response(data)


async def groups(request: web.Request) -> web.Response:
    c = _c(request)
    return web.json_response(await c.call(c.cluster.groups))


async def group(request: web.Request) -> web.Response:
    c = _c(request)
    name = request.match_info["name"]
    data = await c.call(c.cluster.group, name)
    data["lag_history"] = list(c.lag_history.get(name, []))
    return web.json_response(data)


async def reset_offsets(request: web.Request) -> web.Response:
    c = _c(request)
    b = await _json(request)
    to = str(b.get("to", "earliest"))
    if to not in ("earliest", "latest", "offset"):
        raise ConsoleError("to must be earliest, latest or offset")
    off = b.get("offset")
    lag = await c.call(c.cluster.reset_offsets, request.match_info["name"], to, None if off is None else int(off))
    return web.json_response({"lag": lag})


async def streams(request: web.Request) -> web.Response:
    """Kafka Streams applications: the consumer groups whose members are Streams threads."""
    c = _c(request)
    apps = []
    for g in await c.call(c.cluster.groups):
        try:
            d = await c.call(c.cluster.group, g["group"])
        except ConsoleError:
            continue
        # KIP-1071 groups report type STREAMS; classic/KIP-848 ones are found by their members' client ids.
        if d["streams"] or g["type"].upper() == "STREAMS":
            apps.append({"application_id": g["group"], "state": d["state"], "members": d["members"],
                         "lag": d["lag"], "total_lag": sum(r["lag"] for r in d["lag"])})
    return web.json_response(apps)


async def connectors(request: web.Request) -> web.Response:
    c = _c(request)
    data = await c.connect("GET", "/connectors?expand=status&expand=info")
    return web.json_response(data)


async def connector_create(request: web.Request) -> web.Response:
    c = _c(request)
    b = await _json(request)
    return web.json_response(await c.connect("POST", "/connectors", b), status=201)


async def connector_action(request: web.Request) -> web.Response:
    c = _c(request)
    name, action = request.match_info["name"], request.match_info["action"]
    if action == "pause":
        await c.connect("PUT", f"/connectors/{name}/pause")
    elif action == "resume":
        await c.connect("PUT", f"/connectors/{name}/resume")
    elif action == "restart":
        await c.connect("POST", f"/connectors/{name}/restart?includeTasks=true")
    elif action == "delete":
        await c.connect("DELETE", f"/connectors/{name}")
    else:
        raise ConsoleError(f"unknown action {action}")
    return web.json_response({"connector": name, "action": action})


async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html")


def make_app(console: Console, sample: bool = True) -> web.Application:
    app = web.Application(middlewares=[errors])
    app[CONSOLE] = console
    r = app.router
    r.add_get("/", index)
    r.add_get("/api/info", info)
    r.add_get("/api/overview", overview)
    r.add_get("/api/topics", topics)
    r.add_post("/api/topics", create_topic)
    r.add_get("/api/topics/{name}", topic)
    r.add_delete("/api/topics/{name}", delete_topic)
    r.add_post("/api/topics/{name}/partitions", add_partitions)
    r.add_post("/api/topics/{name}/configs", alter_configs)
    r.add_get("/api/topics/{name}/messages", messages)
    r.add_get("/api/groups", groups)
    r.add_get("/api/groups/{name}", group)
    r.add_post("/api/groups/{name}/reset-offsets", reset_offsets)
    r.add_get("/api/streams", streams)
    r.add_get("/api/connectors", connectors)
    r.add_post("/api/connectors", connector_create)
    r.add_post("/api/connectors/{name}/{action}", connector_action)
    r.add_static("/static/", STATIC)

    app[SAMPLE] = sample

    async def stop_sampler(app: web.Application) -> None:
        console.stop_sampling()
    app.on_cleanup.append(stop_sampler)
    return app


async def serve(console: Console, host: str, port: int) -> web.AppRunner:
    """Bind and start the console; raises OSError when the port is taken."""
    runner = web.AppRunner(make_app(console), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner


def run_forever(console: Console, host: str, port: int, on_bound: Callable[[int], None] | None = None) -> None:
    """Run the console on its own event loop until the process ends (``strom console`` and ``strom dev``)."""
    async def main() -> None:
        runner = await serve(console, host, port)
        bound = port
        for s in runner.addresses:
            bound = s[1]
            break
        if on_bound is not None:
            on_bound(bound)
        await asyncio.Event().wait()
    asyncio.run(main())
