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
from strom.core.server.network import Listener
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


class ListedBroker(NamedTuple):
    """A broker as Metadata, DescribeCluster and FindCoordinator list it."""

    node_id: int
    host: str
    port: int
    rack: str | None
    fenced: bool


class Broker:
    """A combined broker + controller node."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
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
        self.listeners: list[Listener] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self._stopped = asyncio.Event()
        self.incarnation_id = uuid.uuid4()

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.to_thread(self.log_manager.startup)
        self.metadata.add_publisher(self.replica_manager)
        await self.metadata.start()
        controller_names = {n.strip() for n in self.config.controller_listener_names.split(",")}
        for name, host, port in self.config.listener_list():
            if name in controller_names:
                continue  # single voter: the controller is in this process
            listener = Listener(name, host, port, self.dispatch,
                                max_request_bytes=self.config.socket_request_max_bytes)
            await listener.start()
            self.listeners.append(listener)
        if not self.listeners:
            raise RuntimeError("no broker listener configured in 'listeners'")
        endpoints = [(name, host, port, SECURITY_PROTOCOLS.get(name, 0)) for name, host, port in self.endpoints()]
        await self.metadata.controller.register_broker(self.node_id, endpoints, self.config.broker_rack,
                                                       self.incarnation_id)
        await self.txn_coordinator.start(self.coordinator_runtime)
        await self.group_coordinator.start(self.coordinator_runtime)
        self._tasks.append(asyncio.create_task(self._maintenance_loop(), name="log-maintenance"))

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


def run_broker(config: BrokerConfig) -> None:
    """Run a broker until SIGINT/SIGTERM (the `strom broker start` / `strom dev` commands)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:
        runner = asyncio.run
    runner(Broker(config).run_until_signal())
