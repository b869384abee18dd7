"""KafkaStreams: runs a :class:`Topology` against a Kafka cluster (Kafka's ``KafkaStreams``).

``start()`` creates the internal topics (``<application.id>-<name>-repartition`` with the
partition count of the upstream sub-topology's sources, ``<application.id>-<store>-changelog``
compacted, with the partition count of its sub-topology's sources) with the AdminClient, then
starts ``num.stream.threads`` :class:`StreamThread` s, each a member of the consumer group
``application.id``. ``store(name)`` gives read-only access (key, range, all) to the local
instances of a store across this instance's tasks (interactive queries).

Under exactly_once_v2 a thread's ``transactional.id`` is ``<application.id>-<process id>-<n>``
where the process id is a UUID kept in ``<state.dir>/<application.id>/`` (as Kafka Streams
does), so a restarted instance fences and aborts the transaction its crashed predecessor left
open instead of waiting for it to time out.

A stream thread rides out broker outages itself (see :mod:`strom.streams.runtime.stream_thread`:
bounded calls retried within ``task.timeout.ms``, then its tasks re-created; a fenced producer
replaced). While one of its calls is retrying, the instance reports REBALANCING, not RUNNING.
A thread that fails for any other reason asks the uncaught-exception handler
(:meth:`KafkaStreams.set_uncaught_exception_handler`): REPLACE_THREAD starts a new thread in its
place, SHUTDOWN_CLIENT (the default, as in Kafka) stops the instance, which goes to ERROR.
Runtime lines go through :mod:`logging` (``log_line``) unless ``log`` is given.
"""

from __future__ import annotations

import enum
import json
import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from strom.partitioner import murmur2_partition
from strom.streams.exceptions import StreamsError, TopologyError
from strom.streams.processor.stores import AUTO_SERDE, KeyValueStoreFacade
from strom.streams.runtime.config import StreamsConfig
from strom.streams.runtime.global_thread import GlobalStreamThread
from strom.streams.runtime.iq_http import IQServer
from strom.streams.runtime.membership import GroupView, consumer_client_id
from strom.streams.runtime.queries import (
    HostInfo,
    KeyQueryMetadata,
    ReadOnlyKeyValueStore,
    ReadOnlySessionStore,
    ReadOnlyWindowStore,
    StreamsMetadata,
    view_for,
)
from strom.streams.runtime.standby import StandbyManager, place_standbys
from strom.streams.runtime.stream_thread import StreamThread, ThreadState
from strom.streams.state.changelogging import changelog_topic
from strom.streams.state.factory import changelog_topic_config
from strom.streams.topology.errors import ErrorHandling
from strom.streams.topology.topology import SinkNodeDef, SubTopology, Topology

if TYPE_CHECKING:
    from strom.streams.runtime.metrics import StreamsMetrics

PROCESS_FILE = "kafka-streams-process-metadata"
logger = logging.getLogger(__name__)


class State(enum.Enum):
    CREATED = "CREATED"
    REBALANCING = "REBALANCING"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    NOT_RUNNING = "NOT_RUNNING"
    ERROR = "ERROR"


class StreamThreadExceptionResponse(enum.Enum):
    """What the uncaught-exception handler answers for a stream thread that failed (Kafka's
    ``StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse``)."""

    #: start a new stream thread in place of the failed one; the others go on
    REPLACE_THREAD = "REPLACE_THREAD"
    #: stop every thread of this instance; the instance goes to ERROR (Kafka's default)
    SHUTDOWN_CLIENT = "SHUTDOWN_CLIENT"
    #: stop the whole application; strom's group protocol cannot ask the other instances, so
    #: this instance shuts down as with SHUTDOWN_CLIENT and logs that the others go on
    SHUTDOWN_APPLICATION = "SHUTDOWN_APPLICATION"


UncaughtExceptionHandler = Callable[[BaseException], StreamThreadExceptionResponse]


def _level_of(line: str) -> int:
    """The logging level a runtime line carries (its ``WARN``/``ERROR`` word), INFO otherwise."""
    head = line.split("] ", 1)[-1]
    if head.startswith("ERROR") or " ERROR " in line[:120]:
        return logging.ERROR
    if head.startswith("WARN") or " WARN " in line[:120]:
        return logging.WARNING
    return logging.INFO


def log_line(line: str) -> None:
    """The default ``log`` of an application: each runtime line through :mod:`logging` at its level."""
    logger.log(_level_of(line), line)


class KafkaStreams:
    """A running instance of a streams application; see the module docstring."""

    def __init__(self, topology: Topology, config: Mapping[str, Any] | StreamsConfig,
                 log: Callable[[str], None] | None = None) -> None:
        self.config = StreamsConfig.load(config)
        topology.validate()
        self.topology = topology
        self.app = self.config.application_id
        #: where runtime lines go: :mod:`logging` by default; tests pass a callable to collect them
        self.log = log or log_line
        self.subtopologies: list[SubTopology] = topology.subtopologies()
        self._threads: list[StreamThread] = []
        self._state = State.CREATED
        c = self.config
        self.error_handling = ErrorHandling(c.deserialization_exception_handler, c.processing_exception_handler,
                                    c.production_exception_handler, c.dead_letter_queue_topic, self._log_error)
        self.global_thread: GlobalStreamThread | None = None
        self.standbys: StandbyManager | None = None
        self.iq_server: IQServer | None = None
        # strom.metrics.listener: Prometheus /metrics (strom.streams.runtime.metrics); its URL once started
        self.metrics: StreamsMetrics | None = None
        self.metrics_url: str | None = None
        self.group: GroupView | None = None
        self.process_id = ""
        self._uncaught_handler: UncaughtExceptionHandler | None = None
        # (client-level) pieces the thread failure path needs, kept from start()
        self._thread_args: dict[str, Any] = {}
        self._state_lock = threading.Lock()
        #: threads started in place of failed ones (REPLACE_THREAD)
        self.threads_replaced = 0
        if c.iq_http_enable and not c.application_server:
            raise StreamsError("strom.iq.http.enable needs application.server=<host>:<port> to listen on")

    def _log_error(self, line: str) -> None:
        self.log(f"[{self.app}] {line}")

    @property
    def process_key(self) -> str:
        """How this instance appears in the group (client ids ``<process key>-StreamThread-n...``)."""
        return f"{self.app}-{self.process_id}"

    # -- topics -----------------------------------------------------------------------------

    def resolve_topic(self, name: str) -> str:
        return f"{self.app}-{name}" if name in self.topology.internal_topics else name

    def internal_topic_specs(self, source_partitions: Mapping[str, int]) -> dict[str, tuple[int, dict[str, str]]]:
        """Real internal topic name -> (partitions, topic config), given external topics' counts."""
        counts: dict[str, int] = dict(source_partitions)
        rp = self.topology.repartition_partitions
        for _ in range(len(self.subtopologies) + 1):  # propagate through chains of repartitions
            for sub in self.subtopologies:
                for node_name in sub.nodes:
                    node = self.topology.nodes[node_name]
                    if not (isinstance(node, SinkNodeDef) and node.topic in self.topology.internal_topics):
                        continue
                    real = self.resolve_topic(node.topic)
                    known = [counts[self.resolve_topic(t)] for t in sub.source_topics
                             if self.resolve_topic(t) in counts]
                    n = rp.get(node.topic) or (max(known) if known else None)
                    if n is not None:
                        counts[real] = n
        specs: dict[str, tuple[int, dict[str, str]]] = {}
        for topic in self.topology.internal_topics:
            real = self.resolve_topic(topic)
            if real not in counts:
                raise TopologyError(f"cannot size repartition topic {real!r}: no upstream source partitions")
            specs[real] = (counts[real], {})
        for sub in self.subtopologies:
            n = max(counts[self.resolve_topic(t)] for t in sub.source_topics)
            for store in sub.stores:
                spec = self.topology.stores[store]
                if spec.logging_enabled:
                    specs[changelog_topic(self.app, store)] = (n, changelog_topic_config(spec))
        return specs

    def _create_internal_topics(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.config.bootstrap_servers, **self.config.admin})
        md = admin.list_topics(timeout=30)
        external = {t for sub in self.subtopologies for t in sub.source_topics
                    if t not in self.topology.internal_topics}
        global_topics = {g.topic for g in self.topology.global_stores.values()}
        missing = sorted(t for t in external | global_topics
                         if t not in md.topics or md.topics[t].error is not None)
        if missing:
            raise StreamsError(f"source topics missing: {missing}; create them before starting the application")
        specs = self.internal_topic_specs({t: len(md.topics[t].partitions) for t in external})
        new = [NewTopic(name, num_partitions=n, replication_factor=self.config.replication_factor, config=cfg)
               for name, (n, cfg) in sorted(specs.items()) if name not in md.topics]
        if not new:
            return
        for name, fut in admin.create_topics(new, operation_timeout=30).items():
            try:
                fut.result()
                self.log(f"[{self.app}] created internal topic {name} ({specs[name][0]} partitions)")
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise StreamsError(f"creating internal topic {name!r} failed: {exc}") from exc

    def _process_id(self) -> str:
        directory = Path(self.config.state_dir) / self.app
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / PROCESS_FILE
        try:
            return str(json.loads(path.read_text())["processId"])
        except (FileNotFoundError, ValueError, KeyError):
            pid = str(uuid.uuid4())
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"processId": pid}))
            tmp.replace(path)
            return pid

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        if self._state is not State.CREATED:
            raise StreamsError(f"KafkaStreams can only be started once (state {self._state.value})")
        self._state = State.REBALANCING
        c = self.config
        try:
            self._create_internal_topics()
            pid = self.process_id = self._process_id()
            if c.num_standby_replicas or c.application_server:
                self.group = GroupView(c.bootstrap_servers, self.app, c.admin)
            global_stores = None
            if self.topology.global_stores:
                # Kafka: global stores are complete before any stream thread processes a record
                # the same handlers, but no dead-letter queue: the global thread has no producer
                # (Kafka adds one only with KIP-1295)
                global_errors = ErrorHandling(c.deserialization_exception_handler, c.processing_exception_handler,
                                              c.production_exception_handler, None, self._log_error)
                self.global_thread = GlobalStreamThread(self.topology, c, global_errors, self.log)
                try:
                    self.global_thread.bootstrap()
                except BaseException:
                    self.global_thread.close_unstarted()
                    self.global_thread = None
                    raise
                global_stores = self.global_thread.stores
            if c.num_standby_replicas and self.group is not None:
                self.standbys = StandbyManager(self.topology, c, self.subtopologies, self.resolve_topic,
                                               self.group, self.process_key, self.log)
            self._thread_args = {"global_stores": global_stores, "pid": pid}
            for i in range(1, c.num_stream_threads + 1):
                self._threads.append(self._new_thread(i))
            if c.iq_http_enable:
                host_info = HostInfo.parse(c.application_server)
                assert host_info is not None
                self.iq_server = IQServer(self, host_info.host, host_info.port)
        except BaseException:
            self._state = State.ERROR
            if self.global_thread is not None:  # bootstrapped, never started
                self.global_thread.close_unstarted()
                self.global_thread = None
            raise
        if self.global_thread is not None:
            self.global_thread.start()
        for t in self._threads:
            t.start()
        if self.standbys is not None:
            self.standbys.start()
        if self.iq_server is not None:
            self.iq_server.start()
        if c.metrics_listener:
            from strom.streams.runtime.metrics import StreamsMetrics

            self.metrics = StreamsMetrics(self.app, lambda: list(self._threads))
            self.metrics_url = self.metrics.serve(c.metrics_listener)

    def _new_thread(self, i: int) -> StreamThread:
        """Stream thread number ``i`` (a replacement keeps the number, hence the transactional.id,
        so its producer fences whatever the failed one left open)."""
        c = self.config
        pid = self._thread_args["pid"]
        return StreamThread(
            self.topology, c, self.subtopologies, self.resolve_topic, f"{self.app}-{pid}-{i}", i,
            self.log, errors=self.error_handling, global_stores=self._thread_args["global_stores"],
            standbys=self.standbys, client_id=consumer_client_id(self.app, pid, i, c.application_server),
            on_failure=self._on_thread_failure)

    def set_uncaught_exception_handler(self, handler: UncaughtExceptionHandler) -> None:
        """Decides what follows when a stream thread fails (Kafka's ``setUncaughtExceptionHandler``):
        ``handler(exception)`` returns a :class:`StreamThreadExceptionResponse`. Without one, as
        in Kafka, the client shuts down (SHUTDOWN_CLIENT) and the instance goes to ERROR. Only
        failures the thread cannot recover from reach it: a broker outage (retried within
        ``task.timeout.ms``, then the tasks are re-created) and a fenced producer (TaskMigrated)
        are handled inside the thread."""
        if self._state is not State.CREATED:
            raise StreamsError(f"the uncaught-exception handler can only be set before start() "
                               f"(state {self._state.value})")
        self._uncaught_handler = handler

    def _on_thread_failure(self, thread: StreamThread, exc: BaseException) -> None:
        """Runs on the failed thread once it has cleaned up: asks the handler, then acts."""
        response = StreamThreadExceptionResponse.SHUTDOWN_CLIENT
        if self._uncaught_handler is not None:
            try:
                answer = self._uncaught_handler(exc)
            except Exception as handler_exc:  # a broken handler must not leave the app half-dead
                self.log(f"[{self.app}] ERROR the uncaught-exception handler raised {handler_exc!r}; "
                         f"shutting down the client")
            else:
                if isinstance(answer, StreamThreadExceptionResponse):
                    response = answer
                else:
                    self.log(f"[{self.app}] ERROR the uncaught-exception handler returned {answer!r}, not a "
                             f"StreamThreadExceptionResponse; shutting down the client")
        with self._state_lock:
            if self._state in (State.PENDING_SHUTDOWN, State.NOT_RUNNING):
                return  # closing anyway
            if response is StreamThreadExceptionResponse.REPLACE_THREAD:
                new = self._new_thread(thread.index)
                self._threads[self._threads.index(thread)] = new
                self.threads_replaced += 1
                self.log(f"[{self.app}] WARN {thread.name} failed ({exc!r}); the uncaught-exception handler "
                         f"answered REPLACE_THREAD: starting a new one")
                new.start()
                return
            if response is StreamThreadExceptionResponse.SHUTDOWN_APPLICATION:
                self.log(f"[{self.app}] ERROR SHUTDOWN_APPLICATION: this instance shuts down; strom cannot "
                         f"ask the application's other instances to (Kafka does through its assignor)")
            self.log(f"[{self.app}] ERROR {thread.name} failed ({exc!r}); shutting down the client")
            self._state = State.ERROR
            for t in self._threads:
                t.shutdown()

    def close(self, timeout: float | None = None) -> bool:
        """Stops the threads (commit, close tasks, leave the group); True if all stopped in time."""
        if self._state in (State.CREATED, State.NOT_RUNNING):
            self._state = State.NOT_RUNNING
            return True
        with self._state_lock:
            failed_before = self._state is State.ERROR
            self._state = State.PENDING_SHUTDOWN
        if self.iq_server is not None:
            self.iq_server.close()
        if self.metrics is not None:
            self.metrics.close()
        for t in self._threads:
            t.shutdown()
        for t in self._threads:
            if t.ident is not None:
                t.join(timeout)
        # after the stream threads: they may still hand tasks to/from standbys and read globals
        others: list[Any] = [x for x in (self.standbys, self.global_thread) if x is not None and x.ident is not None]
        for x in others:
            x.shutdown()
        for x in others:
            x.join(timeout)
        done = not any(t.is_alive() for t in [*self._threads, *others])
        failed = failed_before or any(t.state is ThreadState.ERROR for t in self._threads) or any(
            x.error is not None for x in others)
        self._state = State.ERROR if failed else State.NOT_RUNNING if done else State.PENDING_SHUTDOWN
        return done

    def state(self) -> State:
        if self._state in (State.CREATED, State.NOT_RUNNING, State.PENDING_SHUTDOWN, State.ERROR):
            return self._state
        states = [t.state for t in self._threads]
        if any(s is ThreadState.ERROR for s in states) or (
                self.global_thread is not None and self.global_thread.error is not None):
            return State.ERROR
        # a thread retrying a call past its bound (the broker away) is not RUNNING (issue 28)
        if states and all(s is ThreadState.RUNNING for s in states) and not any(
                t.waiting_for for t in self._threads):
            return State.RUNNING
        return State.REBALANCING

    def errors(self) -> list[BaseException]:
        threads: list[Any] = [*self._threads, self.global_thread, self.standbys]
        return [t.error for t in threads if t is not None and t.error is not None]

    def restored_records(self) -> dict[str, int]:
        """task id -> changelog records its active task restored when it last opened here."""
        out: dict[str, int] = {}
        for t in self._threads:
            out.update(t.restored)
        return out

    def store(self, name: str) -> ReadOnlyKeyValueStore | ReadOnlyWindowStore | ReadOnlySessionStore:
        """Read-only view of store ``name`` over this instance's tasks (interactive queries):
        key-value, window or session by the store's kind; a global store is read from the
        instance's single copy."""
        if name in self.topology.global_stores:
            if self.global_thread is None:
                raise StreamsError(f"global store {name!r} is not available before start()")
            facade = self.global_thread.stores[name]
            lock = self.global_thread.lock
            return view_for(self.topology.global_stores[name].store.kind, name, lambda: [(lock, facade)])
        spec = self.topology.stores.get(name)
        if spec is None:
            raise StreamsError(f"no state store named {name!r}; stores: "
                               f"{sorted(self.topology.stores) + sorted(self.topology.global_stores)}")

        def parts() -> list[tuple[Any, KeyValueStoreFacade]]:
            out = []
            for t in self._threads:
                with t.lock:
                    for task in t.tasks.values():
                        if name in task.sub.stores:
                            out.append((t.lock, task.runtime.stores[name]))
            return out

        return view_for(spec.kind, name, parts)

    def store_key_serde(self, name: str) -> Any:
        """The serde keys of store ``name`` are written with (spec, else default, else internal)."""
        g = self.topology.global_stores.get(name)
        spec = g.store if g is not None else self.topology.stores.get(name)
        if spec is None:
            raise StreamsError(f"no state store named {name!r}")
        return spec.key_serde or self.config.default_key_serde or AUTO_SERDE

    # -- metadata ---------------------------------------------------------------------------

    def _group(self) -> GroupView:
        if self.group is None:
            raise StreamsError("key metadata needs application.server (or num.standby.replicas) and start()")
        return self.group

    def _store_sub(self, name: str) -> SubTopology:
        for sub in self.subtopologies:
            if name in sub.stores:
                return sub
        raise StreamsError(f"no state store named {name!r} in a sub-topology; "
                           f"stores: {sorted(self.topology.stores)}")

    def query_metadata_for_key(self, store: str, key: Any, serializer: Any = None,
                               partitioner: Callable[[bytes, int], int] | None = None) -> KeyQueryMetadata:
        """Which instance holds ``key`` of ``store``: the key is serialized with ``serializer`` (a
        serde or ``fn(topic, key)``; default: the store's key serde) and partitioned as Kafka's
        default partitioner does (murmur2), or with ``partitioner(key bytes, partitions)``."""
        group = self._group()
        sub = self._store_sub(store)
        topics = [self.resolve_topic(t) for t in sub.source_topics]
        n = group.partition_count(topics[0])
        ser = serializer if serializer is not None else self.store_key_serde(store)
        fn = getattr(ser, "serialize", ser)
        kb = fn(topics[0], key)
        if not isinstance(kb, bytes | bytearray):
            raise StreamsError(f"the serializer of {key!r} returned {type(kb).__name__}, not bytes")
        partition = (partitioner or murmur2_partition)(bytes(kb), n)
        instances = group.instances()
        owner = next((p for p, inst in instances.items()
                      if any((t, partition) in inst.partitions for t in topics)), None)
        standby_hosts: frozenset[HostInfo] = frozenset()
        if owner is not None and self.config.num_standby_replicas:
            placed = place_standbys({(sub.id, partition): owner}, instances, self.config.num_standby_replicas)
            standby_hosts = frozenset(h for p in placed.get((sub.id, partition), [])
                                      if (h := HostInfo.parse(instances[p].server)) is not None)
        host = HostInfo.parse(instances[owner].server) if owner is not None else None
        return KeyQueryMetadata(host, standby_hosts, partition, owner)

    def metadata_for_key(self, store: str, key: Any, serializer: Any = None) -> StreamsMetadata | None:
        """The instance whose active task holds ``key`` of ``store`` (None while unassigned)."""
        meta = self.query_metadata_for_key(store, key, serializer)
        if meta.active_process is None:
            return None
        return next((m for m in self.streams_metadata() if m.process_id == meta.active_process), None)

    def streams_metadata(self) -> list[StreamsMetadata]:
        """Every instance of the application with its host, stores and partitions."""
        group = self._group()
        topic_sub = {self.resolve_topic(t): sub for sub in self.subtopologies for t in sub.source_topics}
        out = []
        for process, inst in sorted(group.instances().items()):
            stores = set(self.topology.global_stores)
            for topic, _ in inst.partitions:
                sub = topic_sub.get(topic)
                if sub is not None:
                    stores.update(sub.stores)
            out.append(StreamsMetadata(HostInfo.parse(inst.server), process, stores, set(inst.partitions)))
        return out

    def __enter__(self) -> KafkaStreams:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
