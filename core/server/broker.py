"""The broker process: wires storage, KRaft metadata, replicas, plugins and listeners.

Start-up order: plugins -> LogManager (recovery) -> metadata system (raft log replay; the
ReplicaManager is a publisher, so replay re-attaches existing logs) -> listeners -> broker
registration -> ``bootstrap.servers=HOST:PORT`` on stdout. Shutdown runs the other way and
ends with the clean-shutdown marker. Everything runs on one asyncio loop (uvloop when
installed); recovery, fsync and log maintenance run in worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
import uuid
from collections.abc import Iterable
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from strom.core.config import BrokerConfig
from strom.core.controller.quorum_controller import CreatableTopic
from strom.core.coordinator.group.coordinator import GroupCoordinator
from strom.core.coordinator.producer_ids import ProducerIdManager
from strom.core.coordinator.runtime import CoordinatorRuntime
from strom.core.coordinator.txn.coordinator import TransactionCoordinator
from strom.core.log.manager import LogManager
from strom.core.metadata.system import MetadataSystem
from strom.core.protocol import codec
from strom.core.protocol.exceptions import MalformedRequestError, UnsupportedVersionRequestError
from strom.core.replica.manager import ReplicaManager
from strom.core.server import handlers
from strom.core.server.context import RequestContext
from strom.core.server.handlers import api_versions
from strom.core.server.network import Listener, ListenerError, SocketLimits
from strom.plugins.builtin.allow_all import AllowAllAuthorizer
from strom.plugins.hookspecs.authorizers import (
    AclOperation,
    Action,
    AuthorizationResult,
    ResourcePattern,
    ResourceType,
)
from strom.plugins.hookspecs.authorizers import RequestContext as AuthContext
from strom.plugins.hookspecs.quotas import QuotaType
from strom.plugins.manager import get_plugin_manager, load_authorizer, load_quota_manager

log = logging.getLogger(__name__)

MAINTENANCE_INTERVAL_S = 1.0
# Kafka's SecurityProtocol ids, keyed by the listener names that default to them.
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
# What strom's listeners can actually provide. A listener of another protocol is refused at
# start rather than served as plaintext under a name (and a Metadata entry) that says secure.
SUPPORTED_SECURITY_PROTOCOLS = ("PLAINTEXT",)


def bind_listeners(config: BrokerConfig) -> list[Listener]:
    """The broker listeners of ``config``, checked and bound but not yet accepting.

    Runs before anything reads or writes a data directory, so a listener strom cannot serve or
    a busy port ends the start with one line (:class:`ListenerError`) and nothing touched.
    Controller listeners are skipped: the single voter's controller is in this process.
    """
    limits = SocketLimits.from_config(config)
    protocol_map = config.security_protocol_map()
    controller_names = {n.strip() for n in config.controller_listener_names.split(",")}
    wanted: list[tuple[str, str, int, str]] = []
    for name, host, port in config.listener_list():
        if name in controller_names:
            continue
        uri = f"{name}://{host}:{port}"
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ListenerError(f"listener {uri}: no security protocol defined for listener {name}; "
                                f"add {name}:PLAINTEXT to 'listener.security.protocol.map'")
        if protocol not in SUPPORTED_SECURITY_PROTOCOLS:
            via = "" if protocol == name else f" (listener.security.protocol.map maps {name} to {protocol})"
            raise ListenerError(
                f"listener {uri} uses security protocol {protocol}{via}, which strom cannot provide: "
                f"strom supports {', '.join(SUPPORTED_SECURITY_PROTOCOLS)} listeners only (TLS and SASL are "
                "not implemented yet); remove it from 'listeners' or serve it as PLAINTEXT knowingly")
        wanted.append((name, host, port, protocol))
    if not wanted:
        raise ListenerError("no broker listener configured in 'listeners' (each one named is a controller "
                            "listener of 'controller.listener.names')")
    listeners: list[Listener] = []
    try:
        for name, host, port, protocol in wanted:
            listener = Listener(name, host, port, max_request_bytes=config.socket_request_max_bytes,
                                security_protocol=protocol, limits=limits)
            listener.bind()
            listeners.append(listener)
    except BaseException:
        for listener in listeners:
            listener.unbind()
        raise
    return listeners


class ListedBroker(NamedTuple):
    """A broker as Metadata, DescribeCluster and FindCoordinator list it."""

    node_id: int
    host: str
    port: int
    rack: str | None
    fenced: bool


class Broker:
    """A combined broker + controller node."""

    def __init__(self, config: BrokerConfig, listeners: list[Listener] | None = None) -> None:
        """``listeners``: sockets already bound by :func:`bind_listeners` (``strom dev`` binds
        them before it formats a new data directory); by default they are bound here, first
        of all, so a busy port is reported before any data directory is opened."""
        self.config = config
        self.node_id = config.node_id
        self.listeners: list[Listener] = listeners if listeners is not None else bind_listeners(config)
        for listener in self.listeners:
            listener.dispatcher = self.dispatch
        try:
            self._open_components(config)
        except BaseException:
            for listener in self.listeners:
                listener.unbind()
            raise

    def _open_components(self, config: BrokerConfig) -> None:
        self.handlers = handlers.registry()
        self.plugin_manager = get_plugin_manager(
            blocklist=[b for b in config.strom_plugins_blocklist.split(",") if b.strip()])
        self.authorizer = load_authorizer(self.plugin_manager, config)
        self.quota_manager = load_quota_manager(self.plugin_manager, config)
        self.log_manager = LogManager(config.log_dir_list, config)
        self.replica_manager = ReplicaManager(config, self.log_manager)
        self.metadata = MetadataSystem.open(config)
        self.producer_ids = ProducerIdManager(self.metadata.controller, self.node_id)
        self.coordinator_runtime = CoordinatorRuntime(self)
        self.txn_coordinator = TransactionCoordinator(self)
        self.group_coordinator = GroupCoordinator(self)
        self._tasks: list[asyncio.Task[Any]] = []
        self._stopped = asyncio.Event()
        self.incarnation_id = uuid.uuid4()

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.to_thread(self.log_manager.startup)
        self.metadata.add_publisher(self.replica_manager)
        await self.metadata.start()
        protocols = {listener.name: listener.security_protocol for listener in self.listeners}
        endpoints = [(name, host, port, SECURITY_PROTOCOLS[protocols[name]]) for name, host, port in self.endpoints()]
        await self.metadata.controller.register_broker(self.node_id, endpoints, self.config.broker_rack,
                                                       self.incarnation_id)
        await self.txn_coordinator.start(self.coordinator_runtime)
        await self.group_coordinator.start(self.coordinator_runtime)
        self._tasks.append(asyncio.create_task(self._maintenance_loop(), name="log-maintenance"))
        # The ports were bound before anything else; clients that connected meanwhile waited
        # in the backlog and are served from now on.
        for listener in self.listeners:
            await listener.start()

    async def stop(self) -> None:
        for listener in self.listeners:
            await listener.close()
        await self.txn_coordinator.close()
        await self.group_coordinator.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.metadata.close()
        await asyncio.to_thread(self.log_manager.shutdown)

    async def _maintenance_loop(self) -> None:
        while True:
            await asyncio.sleep(MAINTENANCE_INTERVAL_S)
            try:
                await asyncio.to_thread(self.log_manager.run_maintenance, int(time.time() * 1000))
            except Exception:
                log.exception("log maintenance failed; retrying in %.0fs", MAINTENANCE_INTERVAL_S)

    def endpoints(self) -> list[tuple[str, str, int]]:
        """(listener name, host, port) of each broker listener as advertised to clients."""
        advertised: dict[str, tuple[str, int]] = {}
        if self.config.advertised_listeners:
            for item in self.config.advertised_listeners.split(","):
                name, _, rest = item.strip().partition("://")
                host, _, port = rest.rpartition(":")
                advertised[name] = (host, int(port))
        out = []
        for listener in self.listeners:
            host, port = advertised.get(listener.name, (listener.host, listener.port))
            if host in ("", "0.0.0.0", "::"):
                host = "127.0.0.1"
            out.append((listener.name, host, port))
        return out

    # -- views used by handlers ---------------------------------------------------------------

    @property
    def image(self) -> Any:
        return self.metadata.image

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id

    def controller_id(self) -> int:
        return self.node_id

    def metadata_version_level(self) -> tuple[int, int]:
        """(finalized metadata.version level, epoch of the features) for ApiVersions."""
        image = self.image
        return image.metadata_version, max(image.offset, 0)

    def broker_endpoints(self, listener_name: str, *, include_fenced: bool = False) -> list[ListedBroker]:
        """Every registered broker with an endpoint on ``listener_name``, by node id. Fenced
        brokers only with ``include_fenced`` (Metadata leaves them out, as Kafka's does;
        DescribeCluster v2 can ask for them). Before this broker's own registration is in the
        image, it lists itself."""
        out = []
        for b in self.image.brokers.values():
            if b.fenced and not include_fenced:
                continue
            for ep in b.endpoints:
                if ep.name == listener_name:
                    out.append(ListedBroker(b.broker_id, ep.host, ep.port, b.rack, b.fenced))
        if not out:
            for name, host, port in self.endpoints():
                if name == listener_name:
                    out.append(ListedBroker(self.node_id, host, port, self.config.broker_rack, False))
        return sorted(out)

    def api_versions(self) -> dict[int, tuple[int, int]]:
        return {key: h.VERSIONS for key, h in self.handlers.items()}

    def authorize(self, ctx: RequestContext, operation: str, resource_type: str, names: Iterable[str]) -> list[bool]:
        """Ask the configured authorizer about ``operation`` on each named resource."""
        names = list(names)
        if isinstance(self.authorizer, AllowAllAuthorizer):
            return [True] * len(names)
        pctx = AuthContext(principal=ctx.principal, client_id=ctx.client_id, client_address=ctx.client_address,
                           listener_name=ctx.listener_name, security_protocol=ctx.security_protocol,
                           api_key=ctx.api_key, api_version=ctx.api_version, correlation_id=ctx.correlation_id)
        op, rtype = AclOperation[operation], ResourceType[resource_type]
        actions = [Action(op, ResourcePattern(rtype, n)) for n in names]
        return [r is AuthorizationResult.ALLOWED for r in self.authorizer.authorize(pctx, actions)]

    def record_quota(self, ctx: RequestContext, quota_type: str, value: float) -> int:
        """Charge ``value`` to the client's quota; returns the throttle time in ms."""
        return int(self.quota_manager.record(ctx.principal, ctx.client_id, QuotaType[quota_type], value,
                                             int(time.time() * 1000)))

    async def auto_create_topics(self, names: list[str]) -> dict[str, int]:
        """Create topics with the broker's defaults (Metadata auto-creation)."""
        if not names:
            return {}
        results = await self.metadata.controller.create_topics([CreatableTopic(name=n) for n in names])
        return {r.name: r.error_code for r in results}

    # -- dispatch -----------------------------------------------------------------------------

    async def dispatch(self, ctx: RequestContext, header: codec.RequestHeader, frame: bytes,
                       body_pos: int) -> bytes | list[bytes | memoryview] | None:
        handler = self.handlers.get(header.api_key)
        if handler is None:
            raise MalformedRequestError(f"unknown API key {header.api_key}")
        lo, hi = handler.VERSIONS
        if not lo <= header.api_version <= hi:
            if header.api_key == api_versions.API_KEY:
                response = api_versions.build(self, 0, ErrorCode.unsupported_version)
                return codec.encode_response(header.api_key, 0, header.correlation_id, response)
            raise UnsupportedVersionRequestError(
                f"API key {header.api_key} version {header.api_version} is outside {lo}..{hi}")
        request = codec.decode_request(header, frame, body_pos)
        response = await handler.handle(self, ctx, request)
        if response is None:
            return None
        if hasattr(response, "frame_parts"):  # a handler's own encoder (Fetch, Produce, EndTxn, AddPartitionsToTxn)
            return response.frame_parts(header.api_version, header.correlation_id)
        return codec.encode_response(header.api_key, header.api_version, header.correlation_id, response)

    # -- running ------------------------------------------------------------------------------

    async def run_until_signal(self, announce: bool = True) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, self._stopped.set)
        try:
            await self.start()
            if announce:
                _, host, port = self.endpoints()[0]
                print(f"bootstrap.servers={host}:{port}", flush=True)
            await self._stopped.wait()
            log.info("shutting down")
        finally:
            await self.stop()


def run_broker(config: BrokerConfig, listeners: list[Listener] | None = None) -> None:
    """Run a broker until SIGINT/SIGTERM (the `strom broker start` / `strom dev` commands).

    ``listeners``: already bound by :func:`bind_listeners` (else bound first thing here)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:
        runner = asyncio.run
    runner(Broker(config, listeners).run_until_signal())
