"""The REST server: an aiohttp application on its own thread and event loop.

The worker's own threads (herder, tasks) stay independent of HTTP: ``RestServer.start()``
returns once every listener is bound (port 0 binds a free port, read back through ``urls``),
and ``stop()`` closes the listeners and joins the thread. Listeners follow Kafka Connect's
``listeners`` worker config: a comma-separated list of ``http://host:port`` and
``https://host:port`` URLs, default ``http://127.0.0.1:8083`` (loopback). https listeners and
basic authentication are configured as Kafka Connect's (see :mod:`strom.connect.rest.security`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import ssl
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from strom.connect.rest.app import build_app
from strom.connect.rest.security import (
    BasicAuthenticator,
    advertised_scheme,
    forwarding_context,
    server_context,
)

DEFAULT_LISTENER = "http://127.0.0.1:8083"

log = logging.getLogger(__name__)


class AccessLogger(AbstractAccessLogger):
    """One INFO line per request, as Kafka Connect's RestServer request log writes it (Jetty's
    extended NCSA format plus the duration in ms):
    ``127.0.0.1 - - [28/Nov/2026:01:02:03 +0000] "GET /connectors HTTP/1.1" 200 2 "-" "curl/8.5.0" 4``."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time_s: float) -> None:
        user = "-"
        if request.headers.get("Authorization", "").lower().startswith("basic "):
            user = "(basic)"  # the name is in the credentials; never log those
        when = time.strftime("%d/%b/%Y:%H:%M:%S %z")
        size = response.body_length
        self.logger.info('%s - %s [%s] "%s %s HTTP/%d.%d" %d %s "%s" "%s" %d', request.remote or "-", user, when,
                         request.method, request.path_qs, request.version.major, request.version.minor,
                         response.status, size if size else "-", request.headers.get("Referer", "-"),
                         request.headers.get("User-Agent", "-"), round(time_s * 1000))


def parse_listeners(listeners: str | list[str] | tuple[str, ...] | None) -> list[tuple[str, int]]:
    """``"http://h:p, https://h2:p2"`` -> ``[(h, p), (h2, p2)]``; a clear error for anything else."""
    return [(host, port) for _scheme, host, port in parse_listener_urls(listeners)]


def parse_listener_urls(listeners: str | list[str] | tuple[str, ...] | None) -> list[tuple[str, str, int]]:
    """``"http://h:p, https://h2:p2"`` -> ``[("http", h, p), ("https", h2, p2)]``."""
    if listeners is None or listeners == "" or listeners == []:
        listeners = DEFAULT_LISTENER
    items = [s.strip() for s in listeners.split(",")] if isinstance(listeners, str) else [
        s.strip() for s in listeners]
    out: list[tuple[str, str, int]] = []
    for item in items:
        if not item:
            continue
        parts = urlsplit(item)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise ValueError(f"invalid value {item!r} for config 'listeners': expected http://host:port "
                             "or https://host:port")
        try:
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"invalid value {item!r} for config 'listeners': bad port") from exc
        if port is None:
            raise ValueError(f"invalid value {item!r} for config 'listeners': a port is required")
        # Kafka: an empty host binds all interfaces.
        out.append((scheme, parts.hostname or "0.0.0.0", port))
    if not out:
        raise ValueError("invalid value for config 'listeners': no listener given")
    return out


class RestServer:
    """Serves Kafka Connect's REST API over ``herder`` until ``stop()``."""

    def __init__(self, herder: Any, listeners: str | list[str] | None = None, *,
                 advertised_host: str | None = None, advertised_port: int | None = None,
                 threads: int = 8, registry: Any = None, security: Mapping[str, Any] | None = None,
                 advertised_listener: str | None = None) -> None:
        """``security``: the worker's keys (``listeners.https.*``, ``ssl.*``,
        ``rest.extension.classes``, ``java.security.auth.login.config``); read here, so a bad
        one fails the construction naming the key."""
        self.herder = herder
        self.registry = registry
        urls = parse_listener_urls(listeners)
        self.schemes = [scheme for scheme, _h, _p in urls]
        self.listeners = [(host, port) for _s, host, port in urls]
        self.advertised_host = advertised_host
        self.advertised_port = advertised_port
        worker = dict(security or {})
        self._ssl: ssl.SSLContext | None = server_context(worker) if "https" in self.schemes else None
        # the forwarding client speaks https whenever the cluster's listeners do
        self._forward_ssl: ssl.SSLContext | None = forwarding_context(worker) if "https" in self.schemes else None
        self.authenticator = BasicAuthenticator.from_worker(worker)
        raw = ",".join(listeners) if isinstance(listeners, (list, tuple)) else listeners
        self.advertised_scheme = advertised_scheme(raw, advertised_listener)
        self._threads = threads
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._bound: list[tuple[str, int]] = []

    @classmethod
    def from_worker_config(cls, herder: Any, config: Any) -> RestServer:
        """Build from a ``WorkerConfig`` (``listeners``, ``rest.advertised.host.name/port``)."""
        def get(attr: str, key: str) -> Any:
            if isinstance(config, dict):
                return config.get(key)
            return getattr(config, attr, None)
        port = get("rest_advertised_port", "rest.advertised.port")
        originals = config if isinstance(config, dict) else config.originals()
        return cls(herder, get("listeners", "listeners"),
                   advertised_host=get("rest_advertised_host_name", "rest.advertised.host.name"),
                   advertised_port=int(port) if port not in (None, "") else None,
                   security=originals,
                   advertised_listener=get("rest_advertised_listener", "rest.advertised.listener"))

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> RestServer:
        if self._thread is not None:
            raise RuntimeError("REST server already started")
        self._executor = concurrent.futures.ThreadPoolExecutor(self._threads, thread_name_prefix="connect-rest")
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True, name="connect-rest")
        self._thread.start()
        try:
            ready.result(timeout)
        except BaseException:
            self._thread.join(5)
            self._thread = None
            self._executor.shutdown(wait=False)
            raise
        return self

    def _run(self, ready: concurrent.futures.Future[None]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            loop.close()
            return
        if not ready.done():
            ready.set_result(None)
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._shutdown())
            loop.close()

    async def _serve(self) -> None:
        assert self._executor is not None
        app = build_app(self.herder, self._executor, self.registry, authenticator=self.authenticator,
                        forward_ssl=self._forward_ssl)
        runner = web.AppRunner(app, access_log=log, access_log_class=AccessLogger, handle_signals=False)
        await runner.setup()
        self._runner = runner
        try:
            for scheme, (host, port) in zip(self.schemes, self.listeners, strict=True):
                site = web.TCPSite(runner, host, port, reuse_address=True,
                                   ssl_context=self._ssl if scheme == "https" else None)
                await site.start()
                server = site._server  # aiohttp exposes the bound port only here
                sockets = getattr(server, "sockets", None) or []
                bound = sockets[0].getsockname()[1] if sockets else port
                self._bound.append((host, int(bound)))
        except BaseException:
            await runner.cleanup()
            raise

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def stop(self, timeout: float = 30.0) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        self._thread = None
        self._loop = None
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def __enter__(self) -> RestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses -----------------------------------------------------------------------------

    @property
    def urls(self) -> list[str]:
        """The bound listener URLs (port 0 resolved)."""
        return [f"{scheme}://{_url_host(h)}:{p}" for scheme, (h, p) in zip(self.schemes, self._bound, strict=False)]

    @property
    def url(self) -> str:
        """The first bound listener's URL."""
        if not self._bound:
            raise RuntimeError("REST server is not started")
        return self.urls[0]

    def advertised_url(self) -> str:
        """The URL other workers use to reach this one (forwarding to the leader): the first
        listener of the advertised scheme (``rest.advertised.listener``)."""
        index = self.schemes.index(self.advertised_scheme) if self.advertised_scheme in self.schemes else 0
        host, port = self._bound[index] if len(self._bound) > index else self.listeners[index]
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        host = self.advertised_host or host
        port = self.advertised_port or port
        return f"{self.advertised_scheme}://{_url_host(host)}:{port}/"


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
