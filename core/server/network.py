"""The socket side of the broker: accept connections, read frames, write responses.

Each connection is served by one coroutine that reads a request, has it handled and writes
the response before reading the next one. This is Kafka's per-connection ordering (the
channel is muted while a request is in flight); clients that pipeline requests simply find
them waiting in the socket buffer. A frame that cannot be parsed closes only its own
connection, with one (rate-limited) WARNING line; every other connection goes on.

Limits, as Kafka's ``SocketServer`` applies them (:class:`SocketLimits`, shared by every
listener of a broker):

* ``connections.max.idle.ms``: a connection that has not delivered a complete request within
  this bound is closed. The clock starts when the connection is ready for a request (accepted,
  or its previous response written) and restarts when a request's 4-byte size arrives, so it
  covers an idle connection, a half-sent size and a half-sent request alike. Kafka measures
  the time since the last bytes moved instead; strom bounds the whole request, so a client
  trickling one byte at a time cannot hold a connection (and its buffer) for ever. A response
  the client does not read within the bound closes the connection too. Time spent handling a
  request (a long-poll Fetch) or waiting for request memory does not count. Negative: never.
* ``max.connections``: above it the listeners stop accepting (new connections wait in the
  kernel's backlog) until a connection closes, as Kafka's acceptor does.
* ``max.connections.per.ip`` / ``max.connections.per.ip.overrides``: a new connection above
  its address's limit is closed at once.
* ``queued.max.request.bytes``: Kafka's request memory pool (non-strict, as Kafka builds it):
  once a request's size is known, its bytes are taken from the pool before they are read; while
  the pool is empty, connections stop reading (the kernel's socket buffers and TCP push back on
  the clients) until a request in flight is done and gives its bytes back. Memory held by
  requests is thereby bounded by the pool plus one request, plus each connection's read-ahead
  (at most 2 MiB, what StreamReader buffers before it pauses the socket). The bytes go back
  once the request has been handled. -1 (Kafka's default): unbounded.
* Running out of file descriptors on accept (EMFILE/ENFILE) is logged at most once a minute,
  with the process's RLIMIT_NOFILE and the fix; the listener retries when a connection closes
  (or after 0.1 s). Connections waiting meanwhile stay in the kernel's backlog.

Security (:mod:`strom.core.security`, one :class:`~strom.core.security.listener_security.ListenerSecurity`
per listener):

* SSL and SASL_SSL listeners run TLS on each connection (the handshake within
  ``connections.max.idle.ms``, at most 60 s); a failed handshake closes it with a rate-limited
  WARNING. On an SSL listener the client's certificate names the principal through
  ``ssl.principal.mapping.rules`` (no certificate: ``User:ANONYMOUS``).
* SASL_PLAINTEXT and SASL_SSL connections authenticate first (ApiVersions, SaslHandshake,
  SaslAuthenticate: :class:`~strom.core.security.sasl.authenticator.SaslServerAuthenticator`),
  reading frames of at most ``sasl.server.max.receive.size`` meanwhile; any other request closes
  the connection. A failed authentication sends its error response, closes the connection and
  logs one rate-limited WARNING with the client's address and the mechanism (never a password).
  A SaslHandshake on an authenticated connection whose session has an end re-authenticates it
  (KIP-368); any other request after the session's end closes the connection.
* The principal (``User:alice``) is in every request's context, for the authorizer and quotas.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import ipaddress
import logging
import math
import resource
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from strom.core.exceptions import BrokerError
from strom.core.protocol import codec
from strom.core.protocol.exceptions import MalformedRequestError, UnsupportedVersionRequestError
from strom.core.security.principal import ANONYMOUS, NoMatchingRule, dn_from_peercert
from strom.core.security.sasl.authenticator import (
    SASL_HANDSHAKE,
    AuthenticationFailed,
    SaslServerAuthenticator,
)
from strom.core.server.context import RequestContext

if TYPE_CHECKING:
    from strom.core.security.listener_security import ListenerSecurity
    from strom.plugins.hookspecs.quotas import ConnectionRateQuotas

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
INT_MAX = 2**31 - 1
# StreamReader pauses the socket once twice this much is buffered: the read-ahead of one
# connection beyond the request it is reading.
_READ_LIMIT = 1 << 20
# Frames above this are read chunk by chunk into a buffer of their own (one copy of the frame
# in memory, where StreamReader.readexactly would hold two at its peak).
_LARGE_FRAME = 1 << 20
# How often idle connections are looked for at most (and the suppressed-warning summaries
# flushed); a small connections.max.idle.ms is checked at a quarter of its value.
_HOUSEKEEPING_S = 1.0
# Connections accepted per wake-up of the listening socket: enough to drain a burst quickly,
# few enough that requests on open connections do not wait long behind it.
_ACCEPT_BATCH = 128
# errnos of accept() that mean "out of descriptors or kernel memory": wait for a close, retry.
_ACCEPT_EXHAUSTED = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}

# (ctx, header, frame, body position) -> encoded response frame (bytes or a list of buffers),
# or None for no response (acks=0). A large frame arrives as a read-only memoryview.
Dispatcher = Callable[[RequestContext, codec.RequestHeader, Any, int],
                      Awaitable[bytes | list[bytes | memoryview] | None]]


class ListenerError(BrokerError):
    """A listener cannot be opened (busy port, unknown host, unsupported security protocol)."""


class RateLimitedLog:
    """At most ``burst`` lines per ``interval_s`` of one kind; then one summary line.

    A flood of bad frames (200,000 of them) must not fill the log: the first ``burst`` of an
    interval are logged, the rest counted, and "suppressed K similar ..." is logged when the
    next line of the kind comes or at the next :meth:`flush` (the listeners' housekeeping).
    """

    def __init__(self, logger: logging.Logger, what: str, *, burst: int = 10, interval_s: float = 10.0) -> None:
        self.logger = logger
        self.what = what
        self.burst = burst
        self.interval_s = interval_s
        self._window_start = time.monotonic()
        self._logged = 0
        self._suppressed = 0
        self._level = logging.WARNING

    def log(self, level: int, msg: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._window_start >= self.interval_s:
            self.flush(now)
        if self._logged < self.burst:
            self._logged += 1
            self.logger.log(level, msg, *args)
        else:
            self._suppressed += 1
            self._level = max(self._level, level)

    def flush(self, now: float | None = None) -> None:
        """End the current window if it is over, logging the summary of what it suppressed."""
        now = time.monotonic() if now is None else now
        if now - self._window_start < self.interval_s:
            return
        if self._suppressed:
            self.logger.log(self._level, "suppressed %d similar %s in the last %.0fs", self._suppressed,
                            self.what, now - self._window_start)
        self._window_start = now
        self._logged = self._suppressed = 0
        self._level = logging.WARNING


class MemoryPool:
    """Kafka's ``SimpleMemoryPool`` in its non-strict mode, for ``queued.max.request.bytes``.

    A request may take its bytes while any are left (the pool may go negative by at most one
    request, so a single request larger than what is left is never starved); otherwise it
    waits, first come first served, until requests in flight give theirs back.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.available = size
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    async def acquire(self, n: int) -> None:
        if self.available > 0 and not self._waiters:
            self.available -= n
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                self._wake_next()  # it was our turn: pass it on
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)
            raise
        self.available -= n
        if self.available > 0:
            self._wake_next()

    def release(self, n: int) -> None:
        self.available += n
        if self.available > 0:
            self._wake_next()

    def _wake_next(self) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return


class ConnectionQuotas:
    """``max.connections``, ``max.connections.per.ip`` and its overrides, over every listener."""

    def __init__(self, max_connections: int = INT_MAX, max_per_ip: int = INT_MAX,
                 overrides: Mapping[str, int] | None = None) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = _resolve_overrides(overrides or {})
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self._on_close: list[Callable[[], None]] = []

    def limit_for(self, ip: str) -> int:
        return self.overrides.get(_normalize_ip(ip), self.max_per_ip)

    def try_open(self, ip: str) -> bool:
        """Count a new connection from ``ip``; False (and nothing counted) above its limit."""
        count = self.per_ip.get(ip, 0)
        if count >= self.limit_for(ip):
            return False
        self.per_ip[ip] = count + 1
        self.total += 1
        return True

    def closed(self, ip: str) -> None:
        count = self.per_ip.get(ip, 0) - 1
        if count > 0:
            self.per_ip[ip] = count
        else:
            self.per_ip.pop(ip, None)
        self.total -= 1
        if self._on_close:
            callbacks, self._on_close = self._on_close, []
            for callback in callbacks:
                callback()

    @property
    def at_max(self) -> bool:
        return self.total >= self.max_connections

    def call_on_close(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once, when the next connection closes."""
        self._on_close.append(callback)


def _normalize_ip(ip: str) -> str:
    try:
        addr = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return ip
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return str(addr.ipv4_mapped)
    return str(addr)


def _resolve_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """Overrides keyed by address: a host name counts for each of its addresses, as Kafka's
    ``InetAddress.getByName`` lookup makes it count for the address it resolves to."""
    out: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            out[str(ipaddress.ip_address(host))] = count
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as e:
            raise ListenerError(f"max.connections.per.ip.overrides: cannot resolve host {host!r} ({e}); "
                                "use its IP address or fix the name") from None
        for info in infos:
            out[_normalize_ip(str(info[4][0]))] = count
    return out


class SocketLimits:
    """The limits and shared state of every listener of one broker (see the module docstring)."""

    def __init__(self, *, connections_max_idle_ms: int = 600000, max_connections: int = INT_MAX,
                 max_connections_per_ip: int = INT_MAX, max_connections_per_ip_overrides: Mapping[str, int] | None = None,
                 queued_max_request_bytes: int = -1, listen_backlog: int = 1024) -> None:
        self.idle_s = connections_max_idle_ms / 1000 if connections_max_idle_ms >= 0 else math.inf
        self.quotas = ConnectionQuotas(max_connections, max_connections_per_ip, max_connections_per_ip_overrides)
        # The quota plugin's per-IP connection_creation_rate (set by the broker when it has one).
        self.connection_rate: ConnectionRateQuotas | None = None
        self.pool = MemoryPool(queued_max_request_bytes) if queued_max_request_bytes > 0 else None
        self.listen_backlog = listen_backlog
        self.closing_log = RateLimitedLog(log, "connection-closing warnings")
        self.rejected_log = RateLimitedLog(log, "rejected connections")
        self.fd_log = RateLimitedLog(log, "accept failures", burst=1, interval_s=60.0)
        self.auth_log = RateLimitedLog(log, "authentication failures")

    @classmethod
    def from_config(cls, config: Any) -> SocketLimits:
        """From a :class:`~strom.core.config.BrokerConfig`."""
        return cls(connections_max_idle_ms=config.connections_max_idle_ms, max_connections=config.max_connections,
                   max_connections_per_ip=config.max_connections_per_ip,
                   max_connections_per_ip_overrides=config.connection_overrides(),
                   queued_max_request_bytes=config.queued_max_request_bytes,
                   listen_backlog=config.socket_listen_backlog_size)

    @property
    def housekeeping_s(self) -> float:
        return min(_HOUSEKEEPING_S, self.idle_s / 4) if self.idle_s > 0 else 0.01

    def flush_logs(self) -> None:
        now = time.monotonic()
        for limiter in (self.closing_log, self.rejected_log, self.fd_log, self.auth_log):
            limiter.flush(now)


def bind_socket(name: str, host: str, port: int, backlog: int = 1024) -> socket.socket:
    """A listening, non-blocking socket for ``name://host:port``; a failure is one line that
    names the listener and the way out (no traceback)."""
    where = f"listener {name}://{host}:{port}"
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ListenerError(f"{where}: cannot resolve host {host!r} ({e.strerror}); "
                            "fix the host in 'listeners'") from None
    family, type_, proto, _, addr = infos[0]
    sock = socket.socket(family, type_, proto)
    try:
        # As asyncio.start_server did: a restart may bind while old connections sit in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            why = "address already in use; stop the other process or choose another port in 'listeners'"
        elif e.errno == errno.EADDRNOTAVAIL:
            why = "address not available on this host; choose one of its addresses in 'listeners'"
        elif e.errno == errno.EACCES:
            why = "permission denied (ports below 1024 need privileges); choose another port in 'listeners'"
        else:
            why = f"{e.strerror or e}"
        raise ListenerError(f"{where}: {why}") from None
    return sock


def _api_name(api_key: int, api_version: int) -> str:
    # From kio's key -> name table, not its schema classes: loading a class per fuzzed (key,
    # version) just to name it imported every schema module kio has (+25 MiB RSS, issue 20 fuzz).
    from kio.schema.index import api_key_map

    name = api_key_map.get(api_key)
    return "unknown API" if name is None else "".join(part.title() for part in name.split("_"))


async def _not_ready(ctx: RequestContext, header: codec.RequestHeader, frame: Any,
                     body_pos: int) -> bytes | list[bytes | memoryview] | None:
    raise RuntimeError("listener has no dispatcher yet")


class _Connection:
    """What the housekeeping task needs to know of a connection."""

    __slots__ = ("deadline", "header", "transport")

    def __init__(self, transport: asyncio.WriteTransport, deadline: float) -> None:
        self.transport = transport
        self.deadline = deadline  # monotonic time by which a request must have arrived (inf: busy)
        self.header: codec.RequestHeader | None = None  # of the request being read or handled


class Listener:
    """One listening socket (a Kafka listener such as ``PLAINTEXT://127.0.0.1:9092``).

    :meth:`bind` takes the port (a broker does so before it touches its data directories);
    :meth:`start` begins accepting once the broker is ready to serve.
    """

    def __init__(self, name: str, host: str, port: int, dispatcher: Dispatcher | None = None, *,
                 max_request_bytes: int, security_protocol: str = "PLAINTEXT",
                 limits: SocketLimits | None = None, security: ListenerSecurity | None = None) -> None:
        """``security``: TLS and SASL of the listener (None: plaintext, every client ANONYMOUS)."""
        self.name = name
        self.host = host
        self.port = port
        self.dispatcher: Dispatcher = dispatcher or _not_ready
        # Called with a connection's client address once it closed (the broker ends the share
        # sessions opened on it, as Kafka's connection-disconnect listener).
        self.on_connection_closed: Callable[[str], None] | None = None
        self.max_request_bytes = max_request_bytes
        self.security_protocol = security_protocol
        self.limits = limits or SocketLimits()
        self.security = security
        self._sock: socket.socket | None = None
        self._event_loop: asyncio.AbstractEventLoop | None = None
        self._accepting = False
        self._closed = False
        self._housekeeping_task: asyncio.Task[None] | None = None
        self._connections: dict[asyncio.Task[Any], _Connection] = {}

    def bind(self) -> None:
        """Take the port now (idempotent); ``port`` 0 becomes the port the system picked."""
        if self._sock is None:
            self._sock = bind_socket(self.name, self.host, self.port, self.limits.listen_backlog)
            self.port = self._sock.getsockname()[1]

    def unbind(self) -> None:
        """Give the port back without having served (a start that failed)."""
        if self._sock is not None and self._event_loop is None:
            self._sock.close()
            self._sock = None

    async def start(self) -> None:
        self.bind()
        self._event_loop = asyncio.get_running_loop()
        self._resume_accepting()
        self._housekeeping_task = self._event_loop.create_task(self._housekeeping(), name=f"idle-{self.name}")

    async def close(self) -> None:
        self._closed = True
        self._pause_accepting()
        if self._housekeeping_task is not None:
            self._housekeeping_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._housekeeping_task
        if self._sock is not None:
            self._sock.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    # -- accepting ----------------------------------------------------------------------------
    # Accepting runs in the loop's reader callback, as asyncio's own servers do: a connection is
    # accepted as soon as the socket is readable, with no task hop in between (each hop costs a
    # client's connect() a loop iteration).

    def _resume_accepting(self) -> None:
        if self._event_loop is not None and self._sock is not None and not self._accepting and not self._closed:
            self._event_loop.add_reader(self._sock.fileno(), self._accept_ready)
            self._accepting = True

    def _pause_accepting(self) -> None:
        if self._accepting and self._event_loop is not None and self._sock is not None:
            self._event_loop.remove_reader(self._sock.fileno())
            self._accepting = False

    def _accept_ready(self) -> None:
        assert self._sock is not None and self._event_loop is not None
        quotas = self.limits.quotas
        for _ in range(_ACCEPT_BATCH):
            if quotas.at_max:
                # Kafka's acceptor stops accepting at max.connections until one closes; the
                # new connections wait in the kernel's backlog meanwhile.
                self._pause_accepting()
                quotas.call_on_close(self._resume_accepting)
                return
            try:
                sock, peer = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in _ACCEPT_EXHAUSTED:
                    self._report_exhausted(e)
                    # The pending connection stays in the backlog; retry once a connection
                    # closes, or shortly (another process may free descriptors too).
                    self._pause_accepting()
                    quotas.call_on_close(self._resume_accepting)
                    self._event_loop.call_later(0.1, self._resume_accepting)
                    return
                if e.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EPERM):
                    continue  # that client gave up before we accepted it
                self.limits.fd_log.log(logging.ERROR, "listener %s cannot accept connections: %s",
                                       self.name, e)
                return
            sock.setblocking(False)
            ip = str(peer[0]) if isinstance(peer, tuple) else str(peer)
            address = f"{ip}:{peer[1]}" if isinstance(peer, tuple) else ip
            rate = self.limits.connection_rate
            held_ms = rate.record_connection(_normalize_ip(ip), int(time.time() * 1000)) if rate is not None else 0
            if held_ms > 0:
                # Kafka's ConnectionQuotas over connection_creation_rate: the connection is accepted
                # but never served, and closed once the rate is back under the quota.
                self.limits.rejected_log.log(
                    logging.INFO, "throttled connection from %s on listener %s for %d ms: the address is over "
                    "its connection_creation_rate quota", address, self.name, held_ms)
                self._event_loop.call_later(held_ms / 1000, sock.close)
                continue
            if not quotas.try_open(_normalize_ip(ip)):
                self.limits.rejected_log.log(
                    logging.INFO, "rejected connection from %s on listener %s: the address already has the "
                    "configured maximum of %d connections (max.connections.per.ip / "
                    "max.connections.per.ip.overrides)", address, self.name, quotas.limit_for(ip))
                sock.close()
                continue
            task = self._event_loop.create_task(self._serve(sock, _normalize_ip(ip), address))
            self._connections[task] = _Connection(_NO_TRANSPORT, time.monotonic() + self.limits.idle_s)

    def _report_exhausted(self, e: OSError) -> None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if e.errno in (errno.EMFILE, errno.ENFILE):
            self.limits.fd_log.log(
                logging.ERROR, "listener %s cannot accept connections: out of file descriptors (%s); this "
                "process may open %s (RLIMIT_NOFILE soft limit, hard limit %s) and has %d connections open: "
                "raise the limit (`ulimit -n`, LimitNOFILE= in a systemd unit) or lower max.connections; "
                "waiting connections are accepted as descriptors free up", self.name,
                errno.errorcode.get(e.errno or 0, e.strerror), _fmt_limit(soft), _fmt_limit(hard),
                self.limits.quotas.total)
        else:
            self.limits.fd_log.log(logging.ERROR, "listener %s cannot accept connections: %s; retrying",
                                   self.name, e.strerror)

    async def _housekeeping(self) -> None:
        while True:
            await asyncio.sleep(self.limits.housekeeping_s)
            now = time.monotonic()
            for conn in list(self._connections.values()):
                if now > conn.deadline and conn.transport is not _NO_TRANSPORT:
                    # abort(): a client that does not read must not keep the close waiting
                    conn.deadline = math.inf
                    log.debug("closing connection on %s: no complete request within "
                              "connections.max.idle.ms", self.name)
                    conn.transport.abort()
            self.limits.flush_logs()

    # -- serving ------------------------------------------------------------------------------

    async def _serve(self, sock: socket.socket, ip: str, address: str) -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        conn = self._connections.get(task) or _Connection(_NO_TRANSPORT, math.inf)
        self._connections[task] = conn
        writer: asyncio.StreamWriter | None = None
        try:
            reader = asyncio.StreamReader(limit=_READ_LIMIT, loop=loop)
            protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
            security = self.security
            tls = security.ssl_context if security is not None else None
            if tls is None:
                transport, _ = await loop.connect_accepted_socket(lambda: protocol, sock=sock)
            else:
                timeout = min(self.limits.idle_s, 60.0)
                try:
                    transport, _ = await loop.connect_accepted_socket(lambda: protocol, sock=sock, ssl=tls,
                                                                      ssl_handshake_timeout=timeout)
                except (ssl.SSLError, TimeoutError, ConnectionError, OSError) as e:
                    self.limits.auth_log.log(logging.WARNING, "TLS handshake with %s on listener %s failed: %s",
                                             address, self.name, _tls_reason(e))
                    return
            writer = asyncio.StreamWriter(transport, protocol, reader, loop)
            conn.transport = writer.transport
            principal = ANONYMOUS
            authenticator: SaslServerAuthenticator | None = None
            if security is not None and security.principal_mapper is not None:
                mapped = self._certificate_principal(transport, address, security)
                if mapped is None:
                    return
                principal = mapped
            if security is not None and security.uses_sasl:
                authenticator = SaslServerAuthenticator(security.sasl_mechanisms, self._api_versions_answer(address))
                if not await self._authenticate(reader, writer, address, conn, authenticator, None):
                    return
                principal = authenticator.principal
            await self._loop(reader, writer, address, conn, principal, authenticator)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away (or was closed for idling)
        except asyncio.CancelledError:
            pass
        except MalformedRequestError as e:
            self._closing(address, conn, "malformed", e)
        except UnsupportedVersionRequestError as e:
            self._closing(address, conn, "unsupported", e)
        except Exception as e:
            self._closing(address, conn, "error", e)
        finally:
            self._connections.pop(task, None)
            self.limits.quotas.closed(ip)
            if self.on_connection_closed is not None:
                self.on_connection_closed(address)
            if writer is None:
                with contextlib.suppress(OSError):
                    sock.close()
            else:
                if writer.transport.get_write_buffer_size():
                    writer.transport.abort()  # unsent data of a client that stopped reading
                else:
                    writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()

    def _closing(self, address: str, conn: _Connection, kind: str, e: BaseException) -> None:
        header = conn.header
        what = (f"{_api_name(header.api_key, header.api_version)} v{header.api_version} "
                f"(api key {header.api_key}, correlation id {header.correlation_id})"
                if header is not None else "request")
        if kind == "error":
            # A bug, not bad input: one line with where it happened, no traceback flood.
            tb = e.__traceback__
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            where = f" at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else ""
            self.limits.closing_log.log(
                logging.ERROR, "closing connection from %s on listener %s after an unexpected error in %s: "
                "%s: %s%s", address, self.name, what, type(e).__name__, e, where)
        else:
            reason = "malformed" if kind == "malformed" else "unsupported"
            self.limits.closing_log.log(
                logging.WARNING, "closing connection from %s on listener %s: %s %s: %s", address, self.name,
                reason, what, e)

    # -- security -------------------------------------------------------------------------------

    def _certificate_principal(self, transport: asyncio.BaseTransport, address: str,
                               security: ListenerSecurity) -> str | None:
        """``User:<mapped DN>`` of the client's certificate, ANONYMOUS without one; None (and a
        warning) when no ``ssl.principal.mapping.rules`` rule applies: the connection closes."""
        cert = transport.get_extra_info("peercert")
        if not cert:
            return ANONYMOUS
        dn = dn_from_peercert(cert)
        assert security.principal_mapper is not None
        try:
            return "User:" + security.principal_mapper.name(dn)
        except NoMatchingRule as e:
            self.limits.auth_log.log(logging.WARNING, "closing connection from %s on listener %s: %s "
                                     "(ssl.principal.mapping.rules)", address, self.name, e)
            return None

    def _api_versions_answer(self, address: str) -> Callable[[codec.RequestHeader, bytes, int], Awaitable[bytes]]:
        """ApiVersions before authentication, answered by the broker's own handler."""
        async def answer(header: codec.RequestHeader, frame: bytes, body_pos: int) -> bytes:
            ctx = RequestContext(header.api_key, header.api_version, header.correlation_id, header.client_id or "",
                                 address, self.name, self.security_protocol)
            response = await self.dispatcher(ctx, header, frame, body_pos)
            if response is None:
                return b""
            return response if isinstance(response, bytes) else b"".join(bytes(part) for part in response)
        return answer

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, address: str,
                            conn: _Connection, authenticator: SaslServerAuthenticator, first: bytes | None) -> bool:
        """Run the SASL exchange until it is complete (True) or has failed (False: the error
        response, if any, has been sent and the caller closes the connection). ``first``: a
        frame already read (the SaslHandshake that begins a re-authentication)."""
        assert self.security is not None
        max_bytes = self.security.sasl_max_receive_size
        idle_s = self.limits.idle_s
        while not authenticator.complete:
            if first is not None:
                frame, first = first, None
            else:
                conn.header = None
                conn.deadline = time.monotonic() + idle_s
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                if size <= 0 or size > max_bytes:
                    self.limits.auth_log.log(
                        logging.WARNING, "failed authentication with %s on listener %s: a frame of %d bytes during "
                        "SASL authentication is outside 1..%d (sasl.server.max.receive.size)", address, self.name,
                        size, max_bytes)
                    return False
                frame = await reader.readexactly(size)
            conn.deadline = math.inf
            try:
                response = await authenticator.receive(frame)
            except AuthenticationFailed as e:
                self.limits.auth_log.log(
                    logging.WARNING, "failed %s with %s on listener %s (SASL mechanism %s): %s",
                    "re-authentication" if authenticator.reauthenticating else "authentication", address, self.name,
                    e.mechanism or "none chosen", e)
                if e.response:
                    writer.write(e.response)
                    with contextlib.suppress(ConnectionError):
                        await writer.drain()
                # Kafka's connection.failed.authentication.delay.ms: the close waits, so a client
                # reads the error response before it sees the connection go (and a client that
                # retries at once is slowed down). Then close gracefully: the caller's close would
                # abort a connection with unsent bytes (TLS keeps some buffered after drain).
                conn.deadline = math.inf
                await asyncio.sleep(self.security.failed_authentication_delay_ms / 1000)
                writer.close()
                with contextlib.suppress(ConnectionError, TimeoutError, ssl.SSLError):
                    await asyncio.wait_for(writer.wait_closed(), min(idle_s, 10.0))
                return False
            if response:
                writer.write(response)
                if writer.transport.get_write_buffer_size():
                    conn.deadline = time.monotonic() + idle_s
                    await writer.drain()
        return True

    async def _loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, address: str,
                    conn: _Connection, principal: str = ANONYMOUS,
                    authenticator: SaslServerAuthenticator | None = None) -> None:
        idle_s = self.limits.idle_s
        pool = self.limits.pool
        max_request_bytes = self.max_request_bytes
        while True:
            conn.header = None
            conn.deadline = time.monotonic() + idle_s
            (size,) = _SIZE.unpack(await reader.readexactly(4))
            if size <= 0 or size > max_request_bytes:
                raise MalformedRequestError(
                    f"request size {size} is outside 1..{max_request_bytes} "
                    "(socket.request.max.bytes); not a Kafka client?")
            if pool is not None:
                conn.deadline = math.inf  # waiting for memory is the broker's doing, not the client's
                await pool.acquire(size)
            try:
                conn.deadline = time.monotonic() + idle_s  # the request must arrive within the bound
                if size > _LARGE_FRAME:
                    frame: Any = await _read_large(reader, size)
                else:
                    frame = await reader.readexactly(size)
                conn.deadline = math.inf
                header, body_pos = codec.parse_header(frame)
                conn.header = header
                if authenticator is not None:
                    if header.api_key == SASL_HANDSHAKE and authenticator.maybe_begin_reauthentication():
                        if not await self._authenticate(reader, writer, address, conn, authenticator, bytes(frame)):
                            return
                        principal = authenticator.principal
                        continue
                    if authenticator.session_expired():
                        # Kafka's SocketServer closes a connection whose session ended (KIP-368).
                        self.limits.closing_log.log(
                            logging.INFO, "closing connection from %s on listener %s: its SASL session of %s "
                            "expired without re-authentication (connections.max.reauth.ms)", address, self.name,
                            principal)
                        return
                ctx = RequestContext(header.api_key, header.api_version, header.correlation_id,
                                     header.client_id or "", address, self.name, self.security_protocol,
                                     principal)
                response = await self.dispatcher(ctx, header, frame, body_pos)
                del frame
            finally:
                if pool is not None:
                    pool.release(size)
            if response is not None:
                if isinstance(response, list):
                    writer.writelines(response)  # record buffers go to the transport uncopied
                else:
                    writer.write(response)
                del response
                if writer.transport.get_write_buffer_size():
                    conn.deadline = time.monotonic() + idle_s  # a client that stops reading is idle
                    await writer.drain()
            if ctx.throttle_ms > 0:
                # A quota was exceeded: the channel stays muted for the throttle time (KIP-219).
                conn.deadline = math.inf
                await asyncio.sleep(ctx.throttle_ms / 1000)


class _NoTransport(asyncio.WriteTransport):
    """Stands for the transport of a connection being set up (housekeeping skips it)."""


_NO_TRANSPORT = _NoTransport()


async def _read_large(reader: asyncio.StreamReader, size: int) -> memoryview:
    """``size`` bytes into one buffer of their own, a chunk at a time (read-only view)."""
    buf = bytearray(size)
    view = memoryview(buf)
    pos = 0
    while pos < size:
        chunk = await reader.read(min(size - pos, _READ_LIMIT))
        if not chunk:
            raise asyncio.IncompleteReadError(b"", size)
        view[pos:pos + len(chunk)] = chunk
        pos += len(chunk)
    return view.toreadonly()


def _tls_reason(e: BaseException) -> str:
    if isinstance(e, ssl.SSLError):
        return e.reason or str(e)
    if isinstance(e, TimeoutError):
        return "no handshake within the time allowed"
    return str(e) or type(e).__name__


def _fmt_limit(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)
