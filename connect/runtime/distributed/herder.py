"""``DistributedHerder``: one member of a Connect cluster (``group.id``).

Workers join a classic group of protocol type ``connect`` (:mod:`.membership`); the leader runs
the incremental cooperative assignor (:mod:`.assignor`) over the connectors and tasks of the
config topic; each worker starts and stops what it is assigned through its
:class:`~strom.connect.runtime.worker.Worker`. State lives in the three internal topics:

- configs (:mod:`.config_store`): the leader writes connector configs and target states (REST
  writes reaching a follower raise ``NotLeaderError`` so the REST layer forwards them); the
  worker running a connector writes its task configs (Kafka routes them through the leader over
  internal REST; the records are the same);
- statuses (:mod:`.status_store`): each worker writes the states of what it runs;
- source offsets (:mod:`.offset_store`): the worker's offset store.

One herder thread does all membership and assignment work: rejoin when the coordinator asks,
when the set of connectors or tasks changes, when our assignment revoked something, or when a
scheduled rebalance delay (a lost worker's work held back) expires. Every worker reacts to
config-topic records as they are read (restart a reconfigured connector it owns, apply a target
state, execute restart requests). A worker whose session expires (killed) loses its work; the
leader hands it to the others after ``scheduled.rebalance.max.delay.ms``.

Zombie fencing (KIP-618, worker ``exactly.once.source.support=enabled``): new task configs of a
source connector leave it "pending fencing" (see :mod:`.config_store`). Its tasks are not
started while it is; the leader fences the transactional ids of the previous generation
(:mod:`.fencing`, the rules of Kafka's ``DistributedHerder.doFenceZombieSourceTasks``) and writes
the ``tasks-fencing-<n>`` record, and every worker starts its held-back tasks when it reads it.
Kafka's tasks ask the leader for the round (``PUT /connectors/<n>/fence`` from a follower); here
the leader starts the round itself when it reads the commit or becomes leader, so no internal
REST call is needed: the records written and the ids fenced are the same.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

from strom.connect.exceptions import (
    AlreadyExistsError,
    ConfigException,
    ConnectException,
    NotFoundError,
    NotLeaderError,
    RebalanceNeededError,
)
from strom.connect.runtime.config import ConnectorConfig, WorkerConfig
from strom.connect.runtime.distributed.assignor import (
    CONFIG_MISMATCH,
    ExtendedAssignment,
    IncrementalCooperativeAssignor,
    WorkerState,
    deserialize_assignment,
    deserialize_metadata,
    join_protocols,
    serialize_assignment,
)
from strom.connect.runtime.distributed.config_store import (
    CONNECTOR_REMOVED,
    CONNECTOR_UPDATED,
    RESTART_REQUESTED,
    TARGET_STATE_CHANGED,
    TASK_COUNT_UPDATED,
    TASKS_UPDATED,
    ClusterConfigState,
    KafkaConfigBackingStore,
    RestartRequest,
)
from strom.connect.runtime.distributed.fencing import fence_producers, transactional_ids
from strom.connect.runtime.distributed.membership import GroupMembership, MembershipError
from strom.connect.runtime.distributed.offset_store import KafkaOffsetBackingStore
from strom.connect.runtime.distributed.status_store import KafkaStatusBackingStore, Status, TopicStatus
from strom.connect.runtime.errors import format_trace
from strom.connect.runtime.herder import (
    AbstractHerder,
    ConnectorInfo,
    ConnectorOffsets,
    ConnectorState,
    ConnectorStateInfo,
    ConnectorTaskId,
    ConnectorType,
    State,
    StatusListener,
    TargetState,
    TaskInfo,
    TaskState,
)
from strom.connect.runtime.offsets import OffsetBackingStore
from strom.connect.runtime.worker import Worker

log = logging.getLogger("strom.connect.distributed")

WRITE_TIMEOUT = 30.0
REBALANCE_WAIT = 15.0  # how long a REST write waits for a rebalance to finish


class DistributedHerder(AbstractHerder):
    """The herder of ``strom connect distributed`` (see the module doc).

    Validation, plugin listing, cluster id and connector offsets are the
    :class:`~strom.connect.runtime.herder.AbstractHerder`'s; everything stateful is the cluster's.
    """

    def __init__(self, config: WorkerConfig, registry: Any, worker: Worker | None = None) -> None:
        for key, value in (("group.id", config.group_id), ("config.storage.topic", config.config_storage_topic),
                           ("offset.storage.topic", config.offset_storage_topic),
                           ("status.storage.topic", config.status_storage_topic)):
            if not value:
                raise ConfigException(key, value, "distributed mode requires it")
        super().__init__(config, registry)
        self.url = f"{config.rest_advertised_scheme}://{self.worker_id}"
        self._task_restart_lock = threading.Lock()
        producer = config.producer_config()
        consumer = config.consumer_config()
        admin = config.admin_config()
        self._events: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        self.config_store = KafkaConfigBackingStore(
            str(config.config_storage_topic), producer, consumer, admin, config.config_storage_replication_factor,
            listener=lambda kind, name: self._on_config_event(kind, name))
        self.status_store = KafkaStatusBackingStore(
            str(config.status_storage_topic), producer, consumer, admin, config.status_storage_partitions,
            config.status_storage_replication_factor)
        self._producer_conf, self._consumer_conf, self._admin_conf = producer, consumer, admin
        # Built in start() unless given: its offset store needs the broker.
        self.worker: Worker = cast(Worker, worker)
        self._listener = StatusListener(self._put_status)
        self.membership = GroupMembership(
            config.bootstrap_servers, str(config.group_id), client_id=config.client_id or f"connect-{self.worker_id}",
            session_timeout_ms=config.session_timeout_ms, rebalance_timeout_ms=config.rebalance_timeout_ms,
            heartbeat_interval_ms=config.heartbeat_interval_ms, security=admin)
        self.assignor = IncrementalCooperativeAssignor(config.scheduled_rebalance_max_delay_ms)
        self.sessioned = config.connect_protocol == "sessioned"
        # Our view, owned by the herder thread.
        self._snapshot = ClusterConfigState()
        self._connectors: set[str] = set()            # assigned to us
        self._tasks: set[ConnectorTaskId] = set()
        self._leader_id = ""
        self._leader_url: str | None = None
        self._generation = -1
        self._member_id = ""
        self._rebalancing = True
        self._rejoin_at: float | None = None
        self._rejoin_now = threading.Event()
        self._wake = threading.Event()
        self._published_topics: set[tuple[str, str]] = set()
        self._thread: threading.Thread | None = None
        self._stop_event = threading.Event()
        self._started = threading.Event()
        # Zombie fencing: tasks assigned here but held back until their connector is fenced;
        # connectors with a fencing round running on this (leader) worker, and those whose round
        # must run once more because a trigger came while it ran.
        self._fence_lock = threading.Lock()
        self._awaiting_fencing: set[ConnectorTaskId] = set()
        self._fencing_active: set[str] = set()
        self._fencing_again: set[str] = set()

    # -- lifecycle ----------------------------------------------------------------------------

    def _offset_store_factory(self) -> OffsetBackingStore:
        return KafkaOffsetBackingStore(str(self.config.offset_storage_topic), self._producer_conf,
                                       self._consumer_conf, self._admin_conf, self.config.offset_storage_partitions,
                                       self.config.offset_storage_replication_factor)

    def start(self) -> None:
        """Read the internal topics, then join the group on the herder thread."""
        self.config_store.start()
        self.status_store.start()
        self.config_store.take_restart_requests()  # requests of the past are done
        while True:  # events of the initial read are history too
            try:
                self._events.get_nowait()
            except queue.Empty:
                break
        self._snapshot = self.config_store.snapshot()
        if self.worker is None:
            self.worker = Worker(self.config, self.registry, self._offset_store_factory)
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"distributed-herder-{self.worker_id}")
        self._thread.start()
        log.info("distributed herder %s started (group %s)", self.worker_id, self.config.group_id)

    def stop(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._stop_event.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(60)
        # Stop (and flush) our tasks before leaving, so no other worker runs them alongside ours.
        if self.worker is not None:
            self.worker.stop()
        self.membership.close(leave=True)
        self.config_store.stop()
        self.status_store.stop()
        log.info("distributed herder %s stopped", self.worker_id)

    def wait_for_assignment(self, timeout: float = 60.0) -> bool:
        """True once this worker is a member of a stable generation (tests, CLI)."""
        return self._started.wait(timeout)

    # -- herder thread ------------------------------------------------------------------------

    def _run(self) -> None:
        last_topics = 0.0
        while not self._stop_event.is_set():
            try:
                self._process_events()
                due = self._rejoin_at is not None and time.monotonic() >= self._rejoin_at
                if self.membership.rejoin_needed.is_set() or self._rejoin_now.is_set() or due:
                    self._rebalance()
                    continue
                if time.monotonic() - last_topics > 1.0:
                    last_topics = time.monotonic()
                    self._publish_active_topics()
            except MembershipError as e:
                log.info("group membership of %s: %s", self.worker_id, e)
                self._rebalancing = True
                self._rejoin_now.set()
                self._stop_event.wait(0.5)
                continue
            except Exception:
                log.exception("distributed herder %s tick failed", self.worker_id)
                self._stop_event.wait(0.5)
                continue
            self._wake.wait(0.2)
            self._wake.clear()

    def _rebalance(self) -> None:
        self._rebalancing = True
        self._rejoin_now.clear()
        self._rejoin_at = None
        self.config_store.refresh()
        self._process_events()
        snap = self.config_store.snapshot()
        state = WorkerState(self.url, snap.offset, ExtendedAssignment(
            connectors=tuple(sorted(self._connectors)), tasks=tuple((t.connector, t.task) for t in sorted(self._tasks)),
            config_offset=self._snapshot.offset))
        joined = self.membership.join(join_protocols(state, self.sessioned))
        assignments: dict[str, bytes] = {}
        if joined.is_leader:
            members = {m: deserialize_metadata(meta) for m, meta in joined.members.items()}
            # The leader must have read at least as far as any member (Kafka: CONFIG_MISMATCH otherwise).
            need = max(s.config_offset for s in members.values())
            if need > snap.offset:
                self.config_store.refresh()
                snap = self.config_store.snapshot()
            leader_url = members[joined.member_id].url
            version = 2 if joined.protocol_name == "sessioned" else 1
            out = self.assignor.perform_assignment(
                joined.member_id, leader_url, snap.offset, snap.connectors(), snap.all_tasks(), members,
                joined.generation, version)
            assignments = {m: serialize_assignment(a) for m, a in out.items()}
            if self.sessioned and snap.session_key is None:
                self._write_session_key()
        mine = deserialize_assignment(self.membership.sync(assignments, joined.protocol_name))
        self._generation, self._member_id = joined.generation, joined.member_id
        self._leader_id, self._leader_url = mine.leader, mine.leader_url
        if mine.error == CONFIG_MISMATCH:
            log.info("config offset behind the leader's (%d); reading on and rejoining", mine.config_offset)
            self.config_store.refresh()
            self._rejoin_now.set()
            return
        self.membership.start_heartbeats()
        if not self._catch_up(mine.config_offset):
            # As Kafka: no new work without its configs; what was revoked is given up all the same
            # (the leader counts on it), and the next round hands the new work out again.
            self._apply_assignment(replace(mine, connectors=(), tasks=()))
            self._rejoin_now.set()
            return
        self._apply_assignment(mine)
        if mine.revoked_connectors or mine.revoked_tasks:
            self._rejoin_now.set()  # revoked work is handed out in the next round
        elif mine.delay > 0:
            self._rejoin_at = time.monotonic() + mine.delay / 1000
        self._rebalancing = False
        self._started.set()
        log.info("worker %s: generation %d, leader %s, runs connectors %s and tasks %s", self.worker_id,
                 self._generation, self._leader_url, sorted(self._connectors),
                 [str(t) for t in sorted(self._tasks)])

    def _catch_up(self, offset: int) -> bool:
        """Read the config topic at least as far as the leader had when it assigned (Kafka's
        "Catching up to assignment's config offset"): the assignment may name a connector or
        task whose config our reader has not applied yet, e.g. one created just before another
        worker led this round. Starting work from an older view would skip it, while our next
        JoinGroup reports it as ours, so no leader would hand it out again. False if the topic
        cannot be read in time (the caller rejoins)."""
        have = self.config_store.snapshot().offset
        if have >= offset:
            return True
        log.info("worker %s: config offset %d behind the assignment's %d; reading the config topic on",
                 self.worker_id, have, offset)
        try:
            self.config_store.refresh(self.config.worker_sync_timeout_ms / 1000)
        except ConnectException as e:
            log.warning("worker %s: cannot catch up with the assignment's config offset %d within "
                        "worker.sync.timeout.ms=%d: %s", self.worker_id, offset, self.config.worker_sync_timeout_ms, e)
            return False
        return True

    def _write_session_key(self) -> None:
        key = base64.b64encode(os.urandom(32)).decode()
        self.config_store.put_session_key(key, "HmacSHA256", int(time.time() * 1000))

    def _apply_assignment(self, a: ExtendedAssignment) -> None:
        revoked_tasks = [ConnectorTaskId(c, t) for c, t in a.revoked_tasks]
        if revoked_tasks:
            self.worker.stop_and_await_tasks(revoked_tasks)
        for c in a.revoked_connectors:
            self.worker.stop_connector(c)
        # Sets are replaced, never mutated: REST threads iterate them.
        self._connectors = self._connectors - set(a.revoked_connectors)
        self._tasks = self._tasks - set(revoked_tasks)
        self._forget_awaiting(set(revoked_tasks))
        self._snapshot = self.config_store.snapshot()
        for c in a.connectors:
            self._connectors = self._connectors | {c}
            self._start_connector_here(c)
        for c, t in a.tasks:
            tid = ConnectorTaskId(c, t)
            self._tasks = self._tasks | {tid}
            self._start_task_here(tid)
        if self._is_leader():
            # A new leader takes over rounds its predecessor left unfinished.
            for name in self._snapshot.pending_fencing:
                self._maybe_start_fencing(name)

    def _start_connector_here(self, name: str) -> None:
        cfg = self._snapshot.connector_configs.get(name)
        if cfg is None:
            return
        if self.worker.is_running(name):
            self.worker.stop_connector(name)
        target = TargetState(self._snapshot.target_state(name))
        ok = self.worker.start_connector(name, cfg, self._ctx(name), self._listener, target)
        if ok:
            self._reconfigure_tasks(name)

    def _reconfigure_tasks(self, name: str) -> None:
        """Owner of ``name``: write new task configs if the connector's differ from the topic's."""
        snap = self.config_store.snapshot()
        cfg = snap.connector_configs.get(name)
        if cfg is None or not self.worker.is_running(name):
            return
        if snap.target_state(name) == TargetState.STOPPED:
            new: list[dict[str, str]] = []  # as Kafka: a stopped connector has no tasks
        else:
            try:
                new = self.worker.connector_task_configs(name, ConnectorConfig(cfg).tasks_max)
            except Exception as exc:
                self._put_status(name, State.FAILED, format_trace(exc))
                return
        old = [snap.task_config(t) for t in snap.tasks(name)]
        if old != new or name in snap.inconsistent:
            self.config_store.put_task_configs(name, new)

    def _start_task_here(self, tid: ConnectorTaskId) -> None:
        conn = self._snapshot.connector_configs.get(tid.connector)
        task = self._snapshot.task_config((tid.connector, tid.task))
        if conn is None or task is None:
            return
        # A REST restart (caller's thread) and the herder thread may restart one task at once:
        # stop-then-start must be one step, or the second start finds the task still running.
        with self._task_restart_lock:
            if tid in self.worker.task_ids():
                self.worker.stop_and_await_task(tid)
            # The store's live state, not our snapshot: a task-count record read after this check
            # is still to come as an event (which starts the task), one read before is seen here.
            if self._needs_fencing(tid.connector, self.config_store.snapshot()):
                # Kafka: an exactly-once source task does not bring up its producer before the
                # previous generation is fenced; it starts when the task-count record is read.
                with self._fence_lock:
                    self._awaiting_fencing.add(tid)
                # Re-checked once registered: the record may have been read (and its event
                # handled, without this task) between the check above and the add.
                if self._needs_fencing(tid.connector, self.config_store.snapshot()):
                    log.info("task %s-%d waits for zombie fencing of its connector", tid.connector, tid.task)
                    if self._is_leader():
                        self._maybe_start_fencing(tid.connector)
                    return
            self._forget_awaiting({tid})
            self.worker.start_task(tid, conn, task, self._listener,
                                   TargetState(self._snapshot.target_state(tid.connector)))

    # -- zombie fencing (KIP-618) ---------------------------------------------------------------

    def _is_leader(self) -> bool:
        return bool(self._leader_id) and self._leader_id == self._member_id

    def _forget_awaiting(self, tids: set[ConnectorTaskId]) -> None:
        with self._fence_lock:
            self._awaiting_fencing -= tids

    def awaiting_fencing(self) -> list[ConnectorTaskId]:
        """Tasks assigned here that wait for their connector's fencing round (tests, diagnostics)."""
        with self._fence_lock:
            return sorted(self._awaiting_fencing)

    def _needs_fencing(self, name: str, snap: ClusterConfigState) -> bool:
        return (self.config.exactly_once_enabled and snap.is_pending_fencing(name)
                and self._type(name) == ConnectorType.SOURCE)

    def _start_awaiting(self, name: str) -> None:
        """The connector's task-count record was read: start its held-back tasks."""
        with self._fence_lock:
            ready = sorted(t for t in self._awaiting_fencing if t.connector == name)
        for tid in ready:
            if tid in self._tasks:
                self._start_task_here(tid)
            else:
                self._forget_awaiting({tid})

    def _maybe_start_fencing(self, name: str) -> None:
        """Leader: run a fencing round for ``name`` on its own thread unless one runs already.

        Kafka does a round when a task is about to start; a connector without tasks has none
        to start, so its round waits for the next task configs.
        """
        snap = self.config_store.snapshot()
        if not snap.tasks(name) or not self._needs_fencing(name, snap):
            return
        with self._fence_lock:
            if name in self._fencing_active:
                self._fencing_again.add(name)
                return
            self._fencing_active.add(name)
        threading.Thread(target=self._fencing_thread, args=(name,), daemon=True,
                         name=f"zombie-fencing-{self.worker_id}-{name}").start()

    def _fencing_thread(self, name: str) -> None:
        while not self._stop_event.is_set():
            try:
                self.fence_zombie_source_tasks(name)
            except Exception:
                if self._stop_event.is_set():
                    break
                log.exception("zombie fencing of connector %s failed; retrying", name)
                self._stop_event.wait(1.0)
                continue
            with self._fence_lock:
                if name not in self._fencing_again:
                    break
                self._fencing_again.discard(name)
        with self._fence_lock:
            self._fencing_active.discard(name)
            self._fencing_again.discard(name)

    def fence_zombie_source_tasks(self, name: str) -> None:
        """One round of Kafka's ``doFenceZombieSourceTasks`` on the leader: fence the transactional
        ids of the previous generation, then write the ``tasks-fencing-<n>`` record."""
        while not self._stop_event.is_set() and self._is_leader():
            self.config_store.refresh(WRITE_TIMEOUT)
            snap = self.config_store.snapshot()
            if name not in snap.connector_configs or not snap.is_pending_fencing(name):
                return  # Kafka: the last task-count record is newer than the task configs
            task_count = snap.task_counts.get(name, 0)
            previous = snap.task_count_record(name)
            generation = snap.task_config_generation(name)
            # Kafka's rules: no task-count record yet means no transactional producer was ever
            # brought up for the connector, so nothing to fence; one task before and one now
            # means the new task 0 fences the old one itself (same transactional id).
            if previous is not None and (previous != 1 or task_count != 1):
                ids = transactional_ids(str(self.config.group_id), name, previous)
                log.info("fencing zombies of connector %s: transactional ids %s", name, ids)
                fence_producers(self._producer_conf, ids, WRITE_TIMEOUT)
                self.config_store.refresh(WRITE_TIMEOUT)
                if self.config_store.snapshot().task_config_generation(name) != generation:
                    # Kafka fails such a round (409) and the next task start asks again: newer
                    # task configs came meanwhile, whose count is the one to record.
                    continue
            if not self._is_leader():
                return
            self.config_store.put_task_count_record(name, task_count, WRITE_TIMEOUT)
            log.info("connector %s fenced; task count record %d written", name, task_count)
            return

    # -- config-topic events ------------------------------------------------------------------

    def _on_config_event(self, kind: str, name: str) -> None:
        # Runs on the config reader thread: hand over to the herder thread.
        self._events.put((kind, name))
        self._wake.set()

    def _process_events(self) -> None:
        events: list[tuple[str, str]] = []
        while True:
            try:
                events.append(self._events.get_nowait())
            except queue.Empty:
                break
        if not events:
            return
        old = self._snapshot
        self._snapshot = self.config_store.snapshot()
        new = self._snapshot
        for kind, name in events:
            if kind == CONNECTOR_UPDATED:
                if name not in old.connector_configs:
                    self._rejoin_now.set()  # a new connector: the leader must assign it
                    if name in self._connectors and not self.worker.is_running(name):
                        # Assigned before its config reached us (as Kafka, a config update of a
                        # connector we own starts it).
                        self._start_connector_here(name)
                elif name in self._connectors and old.connector_configs.get(name) != new.connector_configs.get(name):
                    self._start_connector_here(name)
            elif kind == CONNECTOR_REMOVED:
                if name in self._connectors:
                    self.worker.stop_connector(name)
                    self._connectors = self._connectors - {name}
                mine = [t for t in self._tasks if t.connector == name]
                self._forget_awaiting(set(mine))
                if mine:
                    self.worker.stop_and_await_tasks(mine)
                    self._tasks = self._tasks - set(mine)
                self._rejoin_now.set()
            elif kind == TASKS_UPDATED:
                self._tasks_updated(name, old, new)
                if self._is_leader():
                    self._maybe_start_fencing(name)
            elif kind == TASK_COUNT_UPDATED:
                if not new.is_pending_fencing(name):
                    self._start_awaiting(name)
            elif kind == TARGET_STATE_CHANGED:
                self._target_state_changed(name, old, new)
            elif kind == RESTART_REQUESTED:
                for req in self.config_store.take_restart_requests():
                    self._restart_here(req)
        old_set = {(c, t) for c in old.connectors() for t in range(len(old.tasks(c)))}
        new_set = {(c, t) for c in new.connectors() for t in range(len(new.tasks(c)))}
        if old_set != new_set:
            self._rejoin_now.set()

    def _tasks_updated(self, name: str, old: ClusterConfigState, new: ClusterConfigState) -> None:
        count = len(new.tasks(name))
        # Exactly-once sources: a new generation gets fenced, which would fence a task of the old
        # one left running because its config did not change; so all of them restart (as Kafka).
        restart_all = self.config.exactly_once_enabled and self._type(name) == ConnectorType.SOURCE
        for tid in sorted(t for t in self._tasks if t.connector == name):
            if tid.task >= count:
                self.worker.stop_and_await_task(tid)
                self._tasks = self._tasks - {tid}
                self._forget_awaiting({tid})
            elif restart_all or old.task_config((name, tid.task)) != new.task_config((name, tid.task)) \
                    or tid not in self.worker.task_ids():
                self._start_task_here(tid)

    def _target_state_changed(self, name: str, old: ClusterConfigState, new: ClusterConfigState) -> None:
        state = TargetState(new.target_state(name))
        if name in self._connectors or any(t.connector == name for t in self._tasks):
            self.worker.set_target_state(name, state)
        was = old.target_state(name)
        if name in self._connectors and state != was and (state == TargetState.STOPPED or was == TargetState.STOPPED):
            self._reconfigure_tasks(name)

    def _restart_here(self, req: RestartRequest) -> None:
        snap = self._snapshot
        restart_conn = req.connector in self._connectors
        if restart_conn and req.only_failed:
            st = self.status_store.get(req.connector)
            restart_conn = st is not None and st.state == State.FAILED
        if restart_conn:
            self._put_status(req.connector, State.RESTARTING)
            self.worker.stop_connector(req.connector)
            self._start_connector_here(req.connector)
        if req.include_tasks:
            for tid in sorted(t for t in self._tasks if t.connector == req.connector):
                if req.only_failed:
                    ts = self.status_store.get_task(tid.connector, tid.task)
                    if ts is None or ts.state != State.FAILED:
                        continue
                if snap.task_config((tid.connector, tid.task)) is not None:
                    self._put_status(tid, State.RESTARTING)
                    self._start_task_here(tid)

    def _publish_active_topics(self) -> None:
        for tid in list(self._tasks):
            for topic in self.worker.task_active_topics(tid):
                if (tid.connector, topic) not in self._published_topics:
                    self.status_store.put_topic(TopicStatus(topic, tid.connector, tid.task, int(time.time() * 1000)))
                    self._published_topics.add((tid.connector, topic))

    # -- status -------------------------------------------------------------------------------

    def _put_status(self, id: Any, state: State, trace: str | None = None) -> None:
        task = id.task if isinstance(id, ConnectorTaskId) else None
        name = id.connector if isinstance(id, ConnectorTaskId) else str(id)
        if name not in self.config_store.snapshot().connector_configs:
            return  # a late callback of a deleted connector must not bring its status back
        try:
            status = Status(name, task, str(State(state)), self.worker_id, trace, self._generation)
            if state in (State.UNASSIGNED, State.FAILED):
                # As Kafka's AbstractHerder (putSafe): a worker that lost the connector/task to a
                # newer generation must not replace the new owner's state with its shutdown/failure.
                self.status_store.put_safe(status)
            else:
                self.status_store.put(status)
        except Exception:
            log.exception("cannot write the status of %s", id)

    # -- helpers for REST calls ---------------------------------------------------------------

    def _snap(self) -> ClusterConfigState:
        return self.config_store.snapshot()

    def _connector_config(self, name: str) -> dict[str, str] | None:
        return self._snap().connector_configs.get(name)

    def _target_state(self, name: str) -> TargetState:
        return TargetState(self._snap().target_state(name))

    def _reconfigure(self, name: str) -> None:
        # ConnectorContext.request_task_reconfiguration (called off the connector's thread).
        if name in self._connectors:
            self._reconfigure_tasks(name)

    def _set_status(self, id: Any, state: State, trace: str | None) -> None:
        self._put_status(id, state, trace)

    def _check_leader(self) -> None:
        """Writes go through the leader; a rebalance in progress is waited out (as Kafka queues
        requests until its member is stable), then 409 if it does not end in time."""
        deadline = time.monotonic() + REBALANCE_WAIT
        while (self._rebalancing or not self._leader_id) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._rebalancing or not self._leader_id:
            raise RebalanceNeededError("Cannot complete request momentarily due to stale configuration "
                                       "(typically caused by a concurrent config change)")
        if self._leader_id != self._member_id:
            raise NotLeaderError("Cannot complete request because of a conflicting operation "
                                 "(e.g. worker rebalance)", self._leader_url)

    def _check_leader_known(self) -> None:
        with contextlib.suppress(NotLeaderError):
            self._check_leader()

    def _await_config(self) -> None:
        self.config_store.refresh(WRITE_TIMEOUT)

    # -- reads ----------------------------------------------------------------------------------

    def connectors(self) -> list[str]:
        return self._snap().connectors()

    def connector_info(self, name: str) -> ConnectorInfo:
        snap = self._snap()
        cfg = snap.connector_configs.get(name)
        if cfg is None:
            raise NotFoundError(f"Connector {name} not found")
        tasks = tuple(ConnectorTaskId(c, t) for c, t in snap.tasks(name))
        return ConnectorInfo(name, dict(cfg), tasks, self._type(name))

    def connector_config(self, name: str) -> dict[str, str]:
        return dict(self._require(name))

    def connector_status(self, name: str) -> ConnectorStateInfo:
        snap = self._snap()
        if name not in snap.connector_configs:
            raise NotFoundError(f"Connector {name} not found")
        st = self.status_store.get(name)
        conn = ConnectorState(State(st.state), st.worker_id, st.trace) if st else ConnectorState(State.UNASSIGNED, "")
        tasks = tuple(self._task_state(ConnectorTaskId(c, t)) for c, t in snap.tasks(name))
        return ConnectorStateInfo(name, conn, tasks, self._type(name))

    def _task_state(self, tid: ConnectorTaskId) -> TaskState:
        st = self.status_store.get_task(tid.connector, tid.task)
        if st is None:
            return TaskState(tid.task, State.UNASSIGNED, "")
        return TaskState(tid.task, State(st.state), st.worker_id, st.trace)

    def task_status(self, id: ConnectorTaskId) -> TaskState:
        snap = self._snap()
        if id.connector not in snap.connector_configs:
            raise NotFoundError(f"Connector {id.connector} not found")
        if (id.connector, id.task) not in snap.tasks(id.connector):
            raise NotFoundError(f"Task {id} not found")
        return self._task_state(id)

    def task_configs(self, name: str) -> list[TaskInfo]:
        snap = self._snap()
        if name not in snap.connector_configs:
            raise NotFoundError(f"Connector {name} not found")
        return [TaskInfo(ConnectorTaskId(c, t), dict(snap.task_config((c, t)) or {})) for c, t in snap.tasks(name)]

    def leader_url(self) -> str | None:
        if self._leader_id and self._leader_id == self._member_id:
            return None
        return self._leader_url

    def assigned_tasks(self) -> list[ConnectorTaskId]:
        """Tasks this worker is assigned (tests, diagnostics)."""
        return sorted(self._tasks)

    def assigned_connectors(self) -> list[str]:
        return sorted(self._connectors)

    # -- writes (leader) ------------------------------------------------------------------------

    def put_connector_config(self, name: str, config: Mapping[str, str], allow_replace: bool,
                             initial_state: TargetState | None = None) -> tuple[bool, ConnectorInfo]:
        cfg = self._named_config(name, config)
        self._check_leader()
        self._validate_or_raise(cfg)
        with self._lock:
            self._await_config()
            exists = name in self._snap().connector_configs
            if exists and not allow_replace:
                raise AlreadyExistsError(f"Connector {name} already exists")
            target = None if exists else (initial_state or TargetState.STARTED)
            self.config_store.put_connector_config(name, cfg, str(target) if target is not None else None)
            self._await_config()
        return not exists, self.connector_info(name)

    def patch_connector_config(self, name: str, patch: Mapping[str, str | None]) -> ConnectorInfo:
        return self.put_connector_config(name, self._patched(self._require(name), patch), True)[1]

    def delete_connector(self, name: str) -> None:
        self._require(name)
        self._check_leader()
        with self._lock:
            tasks = len(self._snap().tasks(name))
            self.config_store.remove_connector_config(name)
            self._await_config()
            self.status_store.delete_connector(name, tasks)
            self.status_store.delete_topics(name)

    def restart_connector(self, name: str, include_tasks: bool = False,
                          only_failed: bool = False) -> ConnectorStateInfo | None:
        self._require(name)
        self._check_leader()
        before = self.connector_status(name)
        self.config_store.put_restart_request(RestartRequest(name, include_tasks, only_failed))
        if not include_tasks and not only_failed:
            return None
        restart_conn = not only_failed or before.connector.state == State.FAILED
        return ConnectorStateInfo(
            name,
            ConnectorState(State.RESTARTING, before.connector.worker_id) if restart_conn else before.connector,
            tuple(TaskState(t.id, State.RESTARTING, t.worker_id)
                  if include_tasks and (not only_failed or t.state == State.FAILED) else t for t in before.tasks),
            before.type)

    def restart_task(self, id: ConnectorTaskId) -> None:
        self.task_status(id)  # 404s
        self._check_leader_known()
        if id in self._tasks:
            self._put_status(id, State.RESTARTING)
            self._start_task_here(id)
            return
        # Kafka forwards a task restart to the worker that runs the task.
        st = self.status_store.get_task(id.connector, id.task)
        if st is None or not st.worker_id or st.worker_id == self.worker_id:
            raise RebalanceNeededError(f"Task {id} is not assigned to a worker right now")
        raise NotLeaderError(f"Task {id} runs on {st.worker_id}", f"http://{st.worker_id}")

    def _set_target(self, name: str, state: TargetState) -> None:
        self._require(name)
        self._check_leader()
        self.config_store.put_target_state(name, str(state))
        self._await_config()

    def pause_connector(self, name: str) -> None:
        self._set_target(name, TargetState.PAUSED)

    def resume_connector(self, name: str) -> None:
        self._set_target(name, TargetState.STARTED)

    def stop_connector(self, name: str) -> None:
        self._set_target(name, TargetState.STOPPED)

    # -- offsets --------------------------------------------------------------------------------

    def alter_connector_offsets(self, name: str, offsets: ConnectorOffsets) -> str:
        self._check_leader()
        return super().alter_connector_offsets(name, offsets)

    def reset_connector_offsets(self, name: str) -> str:
        self._check_leader()
        return super().reset_connector_offsets(name)

    # -- topics ---------------------------------------------------------------------------------

    def connector_active_topics(self, name: str) -> list[str]:
        self._require(name)
        local = {t for tid in list(self._tasks) if tid.connector == name
                 for t in self.worker.task_active_topics(tid)}
        self.status_store.refresh()
        return sorted(set(self.status_store.topics(name)) | local)

    def reset_connector_active_topics(self, name: str) -> None:
        self._require(name)
        self.status_store.delete_topics(name)
        self._published_topics = {p for p in self._published_topics if p[0] != name}
        for tid in list(self._tasks):
            if tid.connector == name:
                self.worker.task_active_topics(tid).clear()


__all__ = ["DistributedHerder"]
