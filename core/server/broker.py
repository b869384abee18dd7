"""The broker process: wires storage, KRaft metadata, replicas, plugins and listeners.

Start-up order: listeners checked and bound (a busy port or a listener strom cannot secure
ends the start before any data directory is touched) -> plugins -> LogManager (recovery) ->
metadata system (raft log replay; the ReplicaManager is a publisher, so replay re-attaches
existing logs) -> broker registration -> coordinators -> listeners accept (clients that
connected earlier waited in the backlog) -> ``bootstrap.servers=HOST:PORT`` on stdout.
Shutdown runs the other way and ends with the clean-shutdown marker. Everything runs on one asyncio loop (uvloop when
installed); recovery, fsync and log maintenance run in worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import functools
import logging
import signal
import sys
import time
import typing
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode
from kio.static.constants import uuid_zero

from strom.core.config import BrokerConfig, split_csv
from strom.core.controller.metadata_system import MetadataSystem
from strom.core.controller.quorum_controller import CreatableTopic, QuorumController
from strom.core.coordinator.group.coordinator import GroupCoordinator
from strom.core.coordinator.producer_ids import ProducerIdManager
from strom.core.coordinator.runtime import CoordinatorRuntime
from strom.core.coordinator.share.coordinator import ShareCoordinator
from strom.core.coordinator.txn.coordinator import TransactionCoordinator
from strom.core.exceptions import ConfigError, KafkaError
from strom.core.group_config import broker_value
from strom.core.log.manager import LogManager
from strom.core.metadata.image import MetadataImage
from strom.core.protocol import codec
from strom.core.protocol.exceptions import MalformedRequestError, UnsupportedVersionRequestError
from strom.core.raft.client import RaftClient
from strom.core.replica.manager import ReplicaManager
from strom.core.security.acl_publisher import AclPublisher
from strom.core.security.listener_security import ListenerSecurity, build_listener_security
from strom.core.security.quota_control import QuotaPublisher
from strom.core.security.sasl.scram import ScramCredentialStore, ScramPublisher
from strom.core.server import handlers
from strom.core.server.context import RequestContext
from strom.core.server.handlers import api_versions
from strom.core.server.handlers._deps import ListedBroker
from strom.core.server.handlers.fetch import FetchRows
from strom.core.server.handlers.produce import ProduceResults
from strom.core.server.metrics import FETCH_KEY, PRODUCE_KEY, BrokerMetrics, MetricsServer
from strom.core.server.network import Listener, ListenerError, RateLimitedLog, SocketLimits
from strom.core.server.purgatory import Purgatory
from strom.core.share.share_partition_manager import SharePartitionManager
from strom.core.share.share_session import DEFAULT_MAX_SHARE_SESSIONS, ShareSessionCache
from strom.plugins.builtin.allow_all import AllowAllAuthorizer
from strom.plugins.hookspecs.authorizers import (
    AclOperation,
    Action,
    AuthorizationResult,
    ClusterMetadataAuthorizer,
    ResourcePattern,
    ResourceType,
    authorize_by_resource_type,
)
from strom.plugins.hookspecs.authorizers import RequestContext as AuthContext
from strom.plugins.hookspecs.quotas import ClientQuotaConsumer, ConnectionRateQuotas, QuotaType
from strom.plugins.hookspecs.storage import RemoteStorageManager
from strom.plugins.manager import get_plugin_manager, load_authorizer, load_quota_manager

if TYPE_CHECKING:
    from collections.abc import Mapping

    from strom.core.coordinator.runtime import CoordinatorHost
    from strom.core.replica.partition import Partition
    from strom.core.replica.remote_log import RemoteLogBinding
    from strom.core.server.handlers._deps import (
        AclDeps,
        ApiVersionsDeps,
        BrokerLifecycleDeps,
        ClusterDeps,
        ControllerDeps,
        CoordinatorRuntimeDeps,
        GroupDeps,
        ImageDeps,
        MetadataDeps,
        PartitionTxnDeps,
        ProducerIdDeps,
        QuorumDeps,
        ReplicaDeps,
        RequestDeps,
        ShareCoordinatorDeps,
        ShareFetchDeps,
        ShareGroupOffsetsDeps,
        TxnDeps,
    )
    from strom.core.server.handlers.find_coordinator import FindCoordinatorDeps
    from strom.core.server.handlers.txn_offset_commit import TxnOffsetCommitDeps

log = logging.getLogger(__name__)

MAINTENANCE_INTERVAL_S = 1.0
# Kafka's SecurityProtocol ids, keyed by the listener names that default to them.
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
# The broker-listener APIs a controller listener also serves (Kafka 4.3.1's ControllerApis, the
# admin APIs of KIP-919's --bootstrap-controller): Kafka's controller advertises each with the
# range strom's handler has (probed). Left out: Fetch (the controller's is the raft fetch of
# __cluster_metadata) and DescribeCluster (the controller's lists controllers, not brokers).
CONTROLLER_ADMIN_APIS = frozenset({17, 19, 20, 29, 30, 31, 32, 33, 36, 37, 43, 44, 45, 46, 49, 50, 51, 55, 57})
# What strom's listeners can provide (TLS and SASL: strom.core.security).
SUPPORTED_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def bind_listeners(config: BrokerConfig, scram_store: ScramCredentialStore | None = None) -> list[Listener]:
    """The broker listeners of ``config``, checked and bound but not yet accepting.

    Runs before anything reads or writes a data directory, so a listener strom cannot serve,
    a missing or bad TLS/SASL setting (named in the message) or a busy port ends the start with
    one line (:class:`ListenerError`) and nothing touched. A controller listener (one named in
    ``controller.listener.names``) is bound too: this node's in-process controller serves
    BrokerRegistration and BrokerHeartbeat there to other brokers (KIP-631); at least one broker
    listener is required. ``scram_store``: the SCRAM credentials the
    SASL listeners check (the broker feeds it from the metadata log); a new one by default.
    """
    scram_store = scram_store if scram_store is not None else ScramCredentialStore()
    limits = SocketLimits.from_config(config)
    protocol_map = config.security_protocol_map()
    controller_names = {n.strip() for n in config.controller_listener_names.split(",")}
    wanted: list[tuple[str, str, int, ListenerSecurity]] = []
    for name, host, port in config.listener_list():
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
                "not implemented yet); remove it from 'listeners', or map its name to PLAINTEXT in "
                "'listener.security.protocol.map' to serve it unencrypted and unauthenticated knowingly")
        if any(w[0] == name for w in wanted):
            # Kafka's check (KafkaConfig): a listener name is the key of its endpoint.
            raise ListenerError(f"each listener must have a different name; {name} appears twice in "
                                f"'listeners' ({config.listeners})")
        try:
            security = build_listener_security(name, protocol, config, scram_store)
        except ConfigError as e:
            raise ListenerError(f"listener {uri} ({protocol}): {e}") from None
        security.scram_store = scram_store
        wanted.append((name, host, port, security))
    broker_names = [w[0] for w in wanted if w[0] not in controller_names]
    if not broker_names:
        raise ListenerError("no broker listener configured in 'listeners' (each one named is a controller "
                            "listener of 'controller.listener.names')")
    _check_listener_names(config, broker_names)
    listeners: list[Listener] = []
    try:
        for name, host, port, security in wanted:
            listener = Listener(name, host, port, max_request_bytes=config.socket_request_max_bytes,
                                security_protocol=security.protocol, limits=limits, security=security)
            listener.bind()
            listeners.append(listener)
    except BaseException:
        for listener in listeners:
            listener.unbind()
        raise
    return listeners


def _check_listener_names(config: BrokerConfig, names: list[str]) -> None:
    """``advertised.listeners`` names only listeners of ``listeners`` (each once, with a port),
    and ``inter.broker.listener.name``, when set, is one of them (Kafka's KafkaConfig checks;
    strom's single node opens no inter-broker connection yet, but the name is what a multi-node
    cluster's brokers will use)."""
    advertised: list[str] = []
    for item in split_csv(config.advertised_listeners or ""):
        name, sep, rest = item.partition("://")
        _, colon, port_text = rest.rpartition(":")
        if not sep or not colon or not port_text.isdigit():
            raise ListenerError(f"advertised.listeners: {item!r} is not NAME://host:port")
        if name not in names:
            raise ListenerError(f"advertised.listeners: {name} is not a listener of 'listeners' "
                                f"({', '.join(names)})")
        if name in advertised:
            raise ListenerError(f"advertised.listeners: each listener must have a different name; {name} appears "
                                "twice")
        advertised.append(name)
    if "inter.broker.listener.name" in config.model_fields_set or "inter_broker_listener_name" in config.model_fields_set:
        inter = config.inter_broker_listener_name
        if inter not in names:
            raise ListenerError(f"inter.broker.listener.name must be a listener name defined in advertised.listeners "
                                f"or listeners; {inter!r} is not one of {', '.join(names)}")


class Broker:
    """A combined broker + controller node."""

    def __init__(self, config: BrokerConfig, listeners: list[Listener] | None = None) -> None:
        """``listeners``: sockets already bound by :func:`bind_listeners` (``strom dev`` binds
        them before it formats a new data directory); by default they are bound here, first
        of all, so a busy port is reported before any data directory is opened."""
        self.config = config
        self.node_id = config.node_id
        self.listeners: list[Listener] = listeners if listeners is not None else bind_listeners(config)
        # Controller listeners (controller.listener.names) answer the controller's APIs only.
        self.controller_listener_names = frozenset(n.strip() for n in config.controller_listener_names.split(","))
        for listener in self.listeners:
            listener.dispatcher = (self.dispatch_controller if listener.name in self.controller_listener_names
                                   else self.dispatch)
        # The SCRAM credentials the SASL listeners check, fed from the metadata log at start.
        self.scram_credentials = next((listener.security.scram_store for listener in self.listeners
                                       if listener.security is not None), ScramCredentialStore())
        try:
            self._open_components(config)
        except BaseException:
            for listener in self.listeners:
                listener.unbind()
            raise

    def _open_components(self, config: BrokerConfig) -> None:
        self.handlers = handlers.registry()
        self.controller_handlers = handlers.controller_registry()
        self.plugin_manager = get_plugin_manager(
            blocklist=[b for b in config.strom_plugins_blocklist.split(",") if b.strip()])
        self.authorizer = load_authorizer(self.plugin_manager, config)
        self.quota_manager = load_quota_manager(self.plugin_manager, config)
        if isinstance(self.quota_manager, ConnectionRateQuotas):  # connection_creation_rate per IP
            for listener in self.listeners:
                listener.limits.connection_rate = self.quota_manager
        self.log_manager = LogManager(config.log_dir_list, config)
        self.replica_manager = ReplicaManager(config, self.log_manager, fetch_purgatory=Purgatory("fetch"),
                                              produce_purgatory=Purgatory("produce"))
        self.metadata = MetadataSystem.open(config)
        self.producer_ids = ProducerIdManager(self.metadata.controller, self.node_id)
        self.coordinator_runtime = CoordinatorRuntime(self)
        self.txn_coordinator = TransactionCoordinator(self)
        self.group_coordinator = GroupCoordinator(self)
        self.share_coordinator = ShareCoordinator(self)  # __share_group_state (KIP-932)
        # KIP-932's data path: share sessions and the share partitions ShareFetch acquires from.
        self.share_sessions = ShareSessionCache(
            int(broker_value(config, "group.share.max.share.sessions") or DEFAULT_MAX_SHARE_SESSIONS))
        self.share_partition_manager = SharePartitionManager(self)
        for listener in self.listeners:
            listener.on_connection_closed = functools.partial(self._connection_closed, listener.name)
        self._tasks: list[asyncio.Task[Any]] = []
        self._stopped = asyncio.Event()
        self.incarnation_id = uuid.uuid4()
        # The epoch of this incarnation's registration (Kafka's BrokerLifecycleManager.brokerEpoch);
        # -1 until registered. The clean-shutdown marker keeps it for the next start (KIP-966).
        self.broker_epoch = -1
        # KIP-405: with remote.log.storage.system.enable off nothing of the tier is imported.
        self.remote_storage_manager: RemoteStorageManager | None = None
        self.remote_log: RemoteLogBinding | None = None
        if config.remote_log_storage_system_enable:
            from strom.core.replica.remote_log import load_storage_manager

            self.remote_storage_manager = load_storage_manager(self.plugin_manager, config)
        # strom.metrics.listener: Prometheus /metrics (strom.core.server.metrics); None = off, and
        # then dispatch records nothing.
        self.metrics: BrokerMetrics | None = None
        self._metrics_server: MetricsServer | None = None
        if config.strom_metrics_listener:
            self.metrics = BrokerMetrics(self, _api_label)
            try:
                self._metrics_server = MetricsServer(self.metrics, config.strom_metrics_listener)
            except ValueError as e:
                raise ConfigError("strom.metrics.listener", config.strom_metrics_listener, str(e)) from None

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.to_thread(self.log_manager.startup)
        self.metadata.add_publisher(self.replica_manager)
        self.metadata.add_publisher(ScramPublisher(self.scram_credentials))
        if isinstance(self.authorizer, ClusterMetadataAuthorizer):  # its ACLs are replayed from the log
            self.metadata.add_publisher(AclPublisher(self.authorizer))
        if isinstance(self.quota_manager, ClientQuotaConsumer):  # client quotas are metadata records
            self.metadata.add_publisher(QuotaPublisher(self.quota_manager))
        await self.metadata.start()
        protocols = {listener.name: listener.security_protocol for listener in self.listeners}
        endpoints = [(name, host, port, SECURITY_PROTOCOLS[protocols[name]]) for name, host, port in self.endpoints()]
        controller_endpoints = [(listener.name, _reachable(listener.host), listener.port,
                                 SECURITY_PROTOCOLS[listener.security_protocol])
                                for listener in self.listeners if listener.name in self.controller_listener_names]
        # PreviousBrokerEpoch: the epoch the clean-shutdown markers held, -1 after a crash; the
        # controller runs Kafka's handleBrokerShutdown (clean or unclean) with it.
        previous = self.log_manager.previous_broker_epoch
        self.broker_epoch = await self.metadata.controller.register_broker(
            self.node_id, endpoints, self.config.broker_rack, self.incarnation_id, previous_broker_epoch=previous,
            controller_endpoints=controller_endpoints)
        # Other brokers' sessions lapse from now on (this node's own never does).
        self.metadata.controller.start_session_timer()
        # Kafka's BrokerLifecycleManager line, with the epoch it sent.
        log.info("Successfully registered broker %d with broker epoch %d (previous broker epoch %d)", self.node_id,
                 self.broker_epoch, previous)
        await self.txn_coordinator.start(self.coordinator_runtime)
        await self.group_coordinator.start(self.coordinator_runtime)
        await self.share_coordinator.start(self.coordinator_runtime)
        # A member that leaves a share group (or whose session expires) gives its acquired records back.
        self.group_coordinator.add_share_member_listener(self.share_partition_manager.on_share_member_left)
        self._tasks.append(asyncio.create_task(self._maintenance_loop(), name="log-maintenance"))
        # The ports were bound before anything else; clients that connected meanwhile waited
        # in the backlog and are served from now on.
        for listener in self.listeners:
            await listener.start()
            mechanisms = listener.security.sasl_mechanisms if listener.security is not None else {}
            # Tests and tools read the port of each listener from this line (only the first is announced).
            log.info("listening on %s://%s:%d (%s%s)", listener.name, listener.host, listener.port,
                     listener.security_protocol, f", SASL {','.join(mechanisms)}" if mechanisms else "")
        if self._metrics_server is not None and not await self._metrics_server.start():
            self._metrics_server = None  # the port is taken: logged, the broker serves on
        if self.remote_storage_manager is not None:
            await self._start_remote_log()

    def _connection_closed(self, listener_name: str, address: str) -> None:
        """A client connection closed: its share sessions end and their members' records go back
        (Kafka's connection-disconnect listener of the share session cache)."""
        try:
            for session in self.share_sessions.remove_connection(f"{listener_name}/{address}"):
                self.share_partition_manager.release(session.group_id, session.member_id, list(session.partitions))
        except Exception:
            log.exception("ending the share sessions of connection %s on %s failed", address, listener_name)

    async def _start_remote_log(self) -> None:
        """The remote log manager, once the listeners serve (its metadata manager is a client of
        this broker), built off the loop; then the replica manager reports tiered leadership."""
        from strom.core.replica.remote_log import RemoteLogBinding

        assert self.remote_storage_manager is not None
        own = next(((h, p) for n, h, p in self.endpoints() if n == self.config.inter_broker_listener_name),
                   None) or self.endpoints()[0][1:]
        self.remote_log = await asyncio.to_thread(RemoteLogBinding.start, self.plugin_manager, self.config,
                                                  self.remote_storage_manager, f"{own[0]}:{own[1]}")
        self.replica_manager.remote_fetcher = self.remote_log
        self.replica_manager.set_remote_roles_listener(self.remote_log.on_roles)

    async def stop(self) -> None:
        if self.remote_log is not None:  # first: its metadata clients talk to this broker
            self.replica_manager.set_remote_roles_listener(None)
            self.replica_manager.remote_fetcher = None
            await asyncio.to_thread(self.remote_log.close)
        if self._metrics_server is not None:
            await self._metrics_server.close()
        for listener in self.listeners:
            await listener.close()
        await self.metadata.controller.stop_session_timer()
        await self.txn_coordinator.close()
        await self.group_coordinator.close()
        await self.share_partition_manager.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.metadata.close()
        await asyncio.to_thread(self.log_manager.shutdown, self.broker_epoch)

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
                host, _, port_text = rest.rpartition(":")
                advertised[name] = (host, int(port_text))
        out = []
        for listener in self.listeners:
            if listener.name in self.controller_listener_names:
                continue  # the controller's, not a broker endpoint
            host, port = advertised.get(listener.name, (listener.host, listener.port))
            out.append((listener.name, _reachable(host), port))
        return out

    def controller_api_versions(self) -> dict[int, tuple[int, int]]:
        """What the controller listener answers: ApiVersions, its own handlers and the admin
        APIs Kafka's controller serves too."""
        return {api_versions.API_KEY: api_versions.VERSIONS,
                **{key: h.VERSIONS for key, h in self.handlers.items() if key in CONTROLLER_ADMIN_APIS},
                **{key: h.VERSIONS for key, h in self.controller_handlers.items()}}

    # -- views used by handlers ---------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self.metadata.image

    @property
    def controller(self) -> QuorumController:
        return self.metadata.controller

    @property
    def raft(self) -> RaftClient:
        return self.metadata.raft

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

    def authorize(self, ctx: RequestContext, operation: str, resource_type: str, names: Iterable[str], *,
                  audit: bool = True) -> list[bool]:
        """Ask the configured authorizer about ``operation`` on each named resource."""
        names = list(names)
        if isinstance(self.authorizer, AllowAllAuthorizer):
            return [True] * len(names)
        pctx = AuthContext(principal=ctx.principal, client_id=ctx.client_id, client_address=ctx.client_address,
                           listener_name=ctx.listener_name, security_protocol=ctx.security_protocol,
                           api_key=ctx.api_key, api_version=ctx.api_version, correlation_id=ctx.correlation_id)
        op, rtype = AclOperation[operation], ResourceType[resource_type]
        actions = [Action(op, ResourcePattern(rtype, n), 1, audit, audit) for n in names]
        return [r is AuthorizationResult.ALLOWED for r in self.authorizer.authorize(pctx, actions)]

    def authorize_by_resource_type(self, ctx: RequestContext, operation: str, resource_type: str) -> bool:
        """May the principal perform ``operation`` on some resource of ``resource_type``?"""
        if isinstance(self.authorizer, AllowAllAuthorizer):
            return True
        pctx = AuthContext(principal=ctx.principal, client_id=ctx.client_id, client_address=ctx.client_address,
                           listener_name=ctx.listener_name, security_protocol=ctx.security_protocol,
                           api_key=ctx.api_key, api_version=ctx.api_version, correlation_id=ctx.correlation_id)
        result = authorize_by_resource_type(self.authorizer, pctx, AclOperation[operation], ResourceType[resource_type])
        return result is AuthorizationResult.ALLOWED

    def record_quota(self, ctx: RequestContext, quota_type: str, value: float) -> int:
        """Charge ``value`` to the client's quota; returns the throttle time in ms."""
        return int(self.quota_manager.record(ctx.principal, ctx.client_id, QuotaType[quota_type], value,
                                             int(time.time() * 1000)))

    async def create_internal_topic(self, topic: CreatableTopic) -> tuple[int, str | None]:
        """Create one topic through the controller (the coordinators' internal topics)."""
        [result] = await self.metadata.controller.create_topics([topic])
        return result.error_code, result.error_message

    async def auto_create_topics(self, names: list[str]) -> dict[str, int]:
        """Create topics with the broker's defaults (Metadata auto-creation)."""
        if not names:
            return {}
        results = await self.metadata.controller.create_topics([CreatableTopic(name=n) for n in names])
        return {r.name: r.error_code for r in results}

    # -- metrics (read on scrape, strom.core.server.metrics) ------------------------------------

    def metrics_partitions(self) -> Mapping[tuple[str, int], Partition]:
        return self.replica_manager.partitions

    def metrics_committed_offsets(self) -> Iterable[tuple[str, str, int, int]]:
        for group, offsets in self.group_coordinator.offsets.committed.items():
            for (topic, partition), value in offsets.items():
                yield group, topic, partition, value.offset

    def metrics_connections(self) -> Iterable[tuple[str, int]]:
        return [(listener.name, listener.connection_count) for listener in self.listeners]

    def _record_metrics(self, metrics: BrokerMetrics, header: codec.RequestHeader, request: Any,
                        response: Any, started: float) -> None:
        """Per request and per partition of a produce or fetch, never per record."""
        api_key = header.api_key
        kind: str | None = None
        if api_key == PRODUCE_KEY:
            topic_data = request.topic_data
            if response is None:  # acks=0: a failed append would have closed the connection
                image = self.image
                for topic in topic_data:
                    name = topic.name if header.api_version < 13 else image.topic_name(topic.topic_id)
                    if name is not None:
                        for pd in topic.partition_data:
                            metrics.appended(name, pd.records or b"")
            elif isinstance(response, ProduceResults):
                for topic, results in zip(topic_data, response.topics, strict=False):
                    for pd, result in zip(topic.partition_data, results.partitions, strict=False):
                        if result.error_code == 0:
                            metrics.appended(results.name, pd.records or b"")
        elif api_key == FETCH_KEY:
            state = getattr(request, "replica_state", None)
            replica_id = state.replica_id if state is not None else getattr(request, "replica_id", -1)
            kind = "FetchFollower" if replica_id >= 0 else "FetchConsumer"
            if replica_id < 0 and isinstance(response, FetchRows):
                for rows in response.topics:
                    size = 0
                    for row in rows.partitions:
                        if row.records:
                            size += len(row.records)
                    if size:
                        metrics.fetched(rows.name, size)
        metrics.request_done(api_key, header.api_version, time.perf_counter() - started, kind)

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
        started = time.perf_counter()
        request = codec.decode_request(header, frame, body_pos)
        try:
            response = await handler.handle(self, ctx, request)
        except (MalformedRequestError, UnsupportedVersionRequestError):
            raise  # a handler's way to close the connection (Kafka closes it too)
        except Exception as e:
            # Kafka answers a failed handler with the API's error response (AbstractRequest.
            # getErrorResponse): UNKNOWN_SERVER_ERROR, or the code of a KafkaError. strom can
            # build it for every API whose response has a top-level error code; for the rest
            # the connection is closed with one line (the socket layer logs it).
            code = int(e.code) if isinstance(e, KafkaError) else int(ErrorCode.unknown_server_error)
            response = error_response(header.api_key, header.api_version, code)
            if response is None:
                raise
            _HANDLER_ERRORS.log(logging.ERROR, "%s v%d from %s on listener %s failed; answered %s: %s",
                                _api_label(header.api_key, header.api_version), header.api_version,
                                ctx.client_address, ctx.listener_name, ErrorCode(code).name.upper(),
                                _describe_exception(e))
        if response is None:
            out = None
        elif hasattr(response, "frame_parts"):  # a handler's own encoder (Fetch, Produce, EndTxn, AddPartitionsToTxn)
            out = response.frame_parts(header.api_version, header.correlation_id)
        else:
            out = codec.encode_response(header.api_key, header.api_version, header.correlation_id, response)
        if self.metrics is not None:
            self._record_metrics(self.metrics, header, request, response, started)
        return out

    async def dispatch_controller(self, ctx: RequestContext, header: codec.RequestHeader, frame: bytes,
                                  body_pos: int) -> bytes | list[bytes | memoryview] | None:
        """The controller listener's requests: ApiVersions (listing the controller's APIs),
        BrokerRegistration, BrokerHeartbeat and the admin APIs of :data:`CONTROLLER_ADMIN_APIS`
        (answered as on a broker listener). Any other API closes the connection, as Kafka's
        controller listener does with an API it does not enable there."""
        key, version = header.api_key, header.api_version
        if key in CONTROLLER_ADMIN_APIS and key in self.handlers:
            return await self.dispatch(ctx, header, frame, body_pos)
        if key == api_versions.API_KEY:
            lo, hi = api_versions.VERSIONS
            if not lo <= version <= hi:
                response = api_versions.build(self, 0, ErrorCode.unsupported_version,
                                              api_keys=self.controller_api_versions())
                return codec.encode_response(key, 0, header.correlation_id, response)
            response = api_versions.build(self, version, api_keys=self.controller_api_versions())
            return codec.encode_response(key, version, header.correlation_id, response)
        handler = self.controller_handlers.get(key)
        if handler is None:
            raise MalformedRequestError(f"{_api_label(key, version)} (API key {key}) is not served on controller "
                                        f"listener {ctx.listener_name}; send it to a broker listener")
        lo, hi = handler.VERSIONS
        if not lo <= version <= hi:
            raise UnsupportedVersionRequestError(f"API key {key} version {version} is outside {lo}..{hi}")
        request = codec.decode_request(header, frame, body_pos)
        try:
            response = await handler.handle(self, ctx, request)
        except (MalformedRequestError, UnsupportedVersionRequestError):
            raise
        except Exception as e:
            code = int(e.code) if isinstance(e, KafkaError) else int(ErrorCode.unknown_server_error)
            response = error_response(key, version, code)
            if response is None:
                raise
            _HANDLER_ERRORS.log(logging.ERROR, "%s v%d from %s on controller listener %s failed; answered %s: %s",
                                _api_label(key, version), version, ctx.client_address, ctx.listener_name,
                                ErrorCode(code).name.upper(), _describe_exception(e))
        return codec.encode_response(key, version, header.correlation_id, response)

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
                # One write (print() writes the newline apart): the dev console's lines go to
                # the same pipe from another thread and must not split this one.
                sys.stdout.write(f"bootstrap.servers={host}:{port}\n")
                sys.stdout.flush()
            await self._stopped.wait()
            log.info("shutting down")
        finally:
            await self.stop()


_HANDLER_ERRORS = RateLimitedLog(log, "request handler errors")

if TYPE_CHECKING:
    def _serves_every_handler(broker: Broker) -> None:
        """Never called: mypy checks here that the Broker satisfies the Protocol each handler
        declares (dispatch passes itself as ``deps``); tests/unit/test_handler_types.py checks
        that every handler's Protocol is listed."""
        api_versions_deps: ApiVersionsDeps = broker
        acl_deps: AclDeps = broker
        cluster_deps: ClusterDeps = broker
        controller_deps: ControllerDeps = broker
        coordinator_runtime_deps: CoordinatorRuntimeDeps = broker
        group_deps: GroupDeps = broker
        image_deps: ImageDeps = broker
        metadata_deps: MetadataDeps = broker
        partition_txn_deps: PartitionTxnDeps = broker
        producer_id_deps: ProducerIdDeps = broker
        quorum_deps: QuorumDeps = broker
        replica_deps: ReplicaDeps = broker
        request_deps: RequestDeps = broker
        txn_deps: TxnDeps = broker
        find_coordinator_deps: FindCoordinatorDeps = broker
        txn_offset_commit_deps: TxnOffsetCommitDeps = broker
        coordinator_host: CoordinatorHost = broker
        share_coordinator_deps: ShareCoordinatorDeps = broker
        share_fetch_deps: ShareFetchDeps = broker
        share_group_offsets_deps: ShareGroupOffsetsDeps = broker
        broker_lifecycle_deps: BrokerLifecycleDeps = broker
        del (share_fetch_deps, share_group_offsets_deps, broker_lifecycle_deps)
        del (api_versions_deps, acl_deps, cluster_deps, controller_deps, coordinator_runtime_deps, group_deps, image_deps,
             metadata_deps, partition_txn_deps, producer_id_deps, quorum_deps, replica_deps, request_deps, txn_deps,
             find_coordinator_deps, txn_offset_commit_deps, coordinator_host, share_coordinator_deps)


def _reachable(host: str) -> str:
    """A wildcard bind address is advertised as the loopback address."""
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def _api_label(api_key: int, api_version: int) -> str:
    try:
        return str(codec.request_class(api_key, api_version).__name__).removesuffix("Request")
    except Exception:
        return f"api key {api_key}"


def _describe_exception(e: BaseException) -> str:
    """``Type: message at file:line`` of the innermost frame: one line, not a traceback."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else ""
    return f"{type(e).__name__}: {e}{where}"


def _empty_value(hint: Any, kafka_type: str | None) -> Any:
    """The zero value of one response field ("" / 0 / None / () / a nested entity)."""
    args = typing.get_args(hint)
    nullable = type(None) in args
    if kafka_type is None:
        if typing.get_origin(hint) is tuple:
            return ()
        if nullable:
            return None
        if dataclasses.is_dataclass(hint):
            return _empty_entity(hint, None)
        raise TypeError(f"no empty value for {hint!r}")
    if nullable:
        return None
    if kafka_type in ("int8", "int16", "int32", "int64", "uint16", "uint32", "float64"):
        return hint(0)
    if kafka_type == "string":
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        return uuid_zero
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return hint.parse(datetime.timedelta(0))
    raise TypeError(f"no empty value for {kafka_type}")


def _empty_entity(cls: Any, error_code: int | None) -> Any:
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        kafka_type = f.metadata.get("kafka_type")
        if f.name == "error_code" and error_code is not None:
            values[f.name] = ErrorCode(error_code)
        else:
            values[f.name] = _empty_value(hints[f.name], kafka_type)
    return cls(**values)


@functools.cache
def _has_top_level_error(api_key: int, api_version: int) -> bool:
    cls = codec.response_class(api_key, api_version)
    return any(f.name == "error_code" for f in dataclasses.fields(cls))


def error_response(api_key: int, api_version: int, code: int) -> Any | None:
    """The response of an API whose top-level ``error_code`` carries ``code`` and whose other
    fields are empty; None for an API without a top-level error code (or one strom cannot
    fill in)."""
    try:
        if not _has_top_level_error(api_key, api_version):
            return None
        return _empty_entity(codec.response_class(api_key, api_version), code)
    except Exception:
        return None


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
