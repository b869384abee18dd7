"""StreamThread: one consumer of the application's group, its tasks, producer and commit loop.

The thread subscribes to every sub-topology's source topics (repartition topics included);
partitions assigned to it become tasks ``(sub-topology id, partition)`` (stores opened, then
restored from their changelogs, only then processors initialised and records processed), revoked
ones are committed and closed. Each polled batch is routed record by
record to its task's :class:`TopologyRuntime`; sink output goes straight to the producer.
Every ``commit.interval.ms`` the thread commits:

* at_least_once: changelog writes produced, producer flushed, stores committed with their
  changelog offsets (one WriteBatch each), consumer offsets committed;
* exactly_once_v2: one transactional producer per thread; the open transaction gets the
  changelog writes and the consumer positions (``send_offsets_to_transaction``), is committed,
  and only then are the stores committed locally; a new transaction begins at once.

If a commit fails, the tasks are closed without committing their stores (under EOS without a
checkpoint, so their state is wiped and restored from the changelog when they reopen).

A commit refused because the group went on without this member (UNKNOWN_MEMBER_ID or
ILLEGAL_GENERATION: the thread outlived ``max.poll.interval.ms``, or a rebalance raced the
commit) is Kafka Streams' TaskMigratedException: the thread aborts its transaction, closes its
tasks without committing, and rejoins; the input since the last commit is processed again. A
REBALANCE_IN_PROGRESS refusal under at_least_once is retried at the next interval, as in Kafka.

Under exactly_once_v2 a fenced producer is handled the same way (Kafka Streams turns
ProducerFenced/InvalidProducerEpoch into TaskMigrated): a transaction that outlived
``transaction.timeout.ms`` is aborted by the coordinator, which bumps the producer's epoch, and
librdkafka then reports the producer fenced (``_FENCED``, fatal). The thread closes its tasks
without committing, replaces its producer by a new one whose ``init_transactions`` gets a new
epoch (Kafka Streams' ``reInitializeThreadProducer``) and rejoins. The fence can surface anywhere
the producer is used (produce, poll, flush, commit, begin); confluent-kafka may even report it as
a ``SystemError`` from ``flush()``: it runs the delivery callback (which must stay, as it is where
the changelog end offsets the stores record come from) while the fatal error is already raised,
and the callback's first call fails on that. So a failure under EOS is classified by the Kafka
errors in its exception chain and, when in doubt, by the fatal error ``abort_transaction``
reports.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from strom.streams.exceptions import StreamsError
from strom.streams.runtime.config import StreamsConfig
from strom.streams.runtime.task import StreamTask
from strom.streams.topology.errors import ErrorContext, ErrorHandling, ErrorKind, HandlerResponse
from strom.streams.topology.runtime import Headers
from strom.streams.topology.topology import SubTopology, Topology

if TYPE_CHECKING:
    from strom.streams.runtime.standby import StandbyManager

# Commit refusals meaning another generation of the group may own this thread's tasks now.
_MIGRATED = frozenset({KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION})
# Fatal producer errors meaning the producer's epoch is gone (librdkafka reports _FENCED).
_FENCED = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})
# What a failure the producer caused may be raised as (SystemError: see the module doc).
_PRODUCER_FAILURES = (KafkaException, StreamsError, SystemError)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception in its chain (causes and contexts), outermost first."""
    out: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or any(e is seen for seen in out):
            continue
        out.append(e)
        todo += [e.__cause__, e.__context__]
    return out


def _kafka_errors(exc: BaseException) -> list[KafkaError]:
    """The Kafka errors in ``exc``'s chain, outermost first."""
    return [e.args[0] for e in _chain(exc)
            if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError)]


def _has_system_error(exc: BaseException) -> bool:
    return any(isinstance(e, SystemError) for e in _chain(exc))


class ThreadState(enum.Enum):
    CREATED = "CREATED"
    STARTING = "STARTING"
    PARTITIONS_ASSIGNED = "PARTITIONS_ASSIGNED"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    DEAD = "DEAD"
    ERROR = "ERROR"


class StreamThread(threading.Thread):
    """Polls, processes and commits for the tasks assigned to its consumer."""

    def __init__(self, topology: Topology, config: StreamsConfig, subs: list[SubTopology],
                 resolve: Callable[[str], str], transactional_id: str, index: int,
                 log: Callable[[str], None], *, errors: ErrorHandling | None = None,
                 global_stores: Mapping[str, Any] | None = None, standbys: StandbyManager | None = None,
                 client_id: str | None = None) -> None:
        super().__init__(name=f"{config.application_id}-StreamThread-{index}", daemon=True)
        self.topology = topology
        self.config = config
        self.app = config.application_id
        self.log = log
        self.lock = threading.RLock()  # held while tasks/stores change; store queries take it too
        self.state = ThreadState.CREATED
        self.errors = errors
        self.global_stores = global_stores
        self.standbys = standbys
        #: task id -> records restored from changelogs when it last became active here
        self.restored: dict[str, int] = {}
        self.error: BaseException | None = None
        self._stop_event = threading.Event()
        self.tasks: dict[tuple[int, int], StreamTask] = {}
        self._route: dict[tuple[str, int], Callable[..., None]] = {}
        self._positions: dict[tuple[str, int], int] = {}
        self._topic_sub: dict[str, SubTopology] = {}
        for sub in subs:
            for t in sub.source_topics:
                self._topic_sub[resolve(t)] = sub
        self._changelog_end: dict[tuple[str, int], int] = {}
        self._delivery_errors: list[KafkaError] = []
        self._in_txn = False
        self._dirty = False
        eos = config.exactly_once
        self.consumer_conf: dict[str, Any] = {
            "bootstrap.servers": config.bootstrap_servers,
            "group.id": self.app,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # range: equal partition numbers of co-partitioned topics land on one member
            "partition.assignment.strategy": "range",
            "isolation.level": "read_committed" if eos else "read_uncommitted",
            **({"client.id": client_id} if client_id else {}),
            **config.consumer,
        }
        producer_conf: dict[str, Any] = {
            "bootstrap.servers": config.bootstrap_servers,
            "partitioner": "murmur2_random",  # Kafka's default partitioner (Java clients)
            "linger.ms": 5,
            # under EOS too: the changelog end offsets the stores record come from here
            "on_delivery": self._on_delivery,
            **config.producer,
        }
        if eos:
            producer_conf["transactional.id"] = transactional_id
        self._producer_conf = producer_conf
        self.producer = Producer(producer_conf)
        #: producers this thread replaced after they were fenced (exactly_once_v2)
        self.producers_replaced = 0
        self.consumer = Consumer(self.consumer_conf)
        self._restore_conf = {k: v for k, v in self.consumer_conf.items()
                              if k not in ("partition.assignment.strategy",)}
        self._restore_conf["group.id"] = f"{self.app}-restore"

    # -- producer ---------------------------------------------------------------------------

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            if (self.errors is not None and not self.config.exactly_once
                    and not msg.topic().endswith("-changelog")):
                # at_least_once: the production handler may let the output go (under EOS the
                # failed send dooms the transaction whatever a handler says)
                ctx = ErrorContext(ErrorKind.PRODUCTION, KafkaException(err), "?", None, -1, -1, msg.key(),
                                   msg.value(), -1, msg.headers(), sink_topic=msg.topic())
                if self.errors.handlers[ErrorKind.PRODUCTION](ctx) is HandlerResponse.CONTINUE:
                    self.errors.skipped[ErrorKind.PRODUCTION] += 1
                    self.log(f"[{self.app}] WARN {ctx.describe()}; skipped (handler answered CONTINUE)")
                    return
            self._delivery_errors.append(err)
            return
        topic = msg.topic()
        if topic.endswith("-changelog"):
            key = (topic, msg.partition())
            off = msg.offset() + 1
            if off > self._changelog_end.get(key, -1):
                self._changelog_end[key] = off

    def _emit(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
              headers: Headers) -> None:
        self._dirty = True
        try:
            self.producer.produce(topic, value, key, timestamp=timestamp,
                                  headers=list(headers) if headers else None)
        except BufferError:
            self.producer.poll(0.1)  # queue full: serve delivery reports, then retry once
            self.producer.produce(topic, value, key, timestamp=timestamp,
                                  headers=list(headers) if headers else None)

    # -- tasks ------------------------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self.lock:
            self.state = ThreadState.PARTITIONS_ASSIGNED
            wanted: dict[tuple[int, int], SubTopology] = {}
            for tp in partitions:
                sub = self._topic_sub.get(tp.topic)
                if sub is not None:
                    wanted[(sub.id, tp.partition)] = sub
            for key, sub in sorted(wanted.items(), key=lambda kv: kv[0]):
                if key in self.tasks:
                    continue
                if self.standbys is not None:
                    self.standbys.release(key)  # its warm stores become the active task's
                task = StreamTask(self.topology, sub, key[1], application_id=self.app,
                                  state_dir=self.config.state_dir, emit=self._emit,
                                  exactly_once=self.config.exactly_once,
                                  default_key_serde=self.config.default_key_serde,
                                  default_value_serde=self.config.default_value_serde,
                                  errors=self.errors, global_stores=self.global_stores,
                                  cache_max_entries=self.config.cache_max_entries())
                try:
                    # Kafka's order: every store of the task is restored (RESTORING) before its
                    # processors are initialised and records flow (RUNNING), so a processor's
                    # ``init`` reading its store sees the restored state
                    self.restored[task.id] = task.restore(self._restore_conf, self.log)
                    task.start_processing()
                except BaseException:
                    task.close(clean=False)
                    raise
                self.tasks[key] = task
            for tp in partitions:
                sub = self._topic_sub.get(tp.topic)
                if sub is not None:
                    self._route[(tp.topic, tp.partition)] = self.tasks[(sub.id, tp.partition)].process_input
            self.log(f"[{self.app}] {self.name}: assigned tasks {sorted(t.id for t in self.tasks.values())}")
            self.state = ThreadState.RUNNING

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self.lock:
            clean = True
            fenced: KafkaError | None = None
            try:
                self.commit()
            except _PRODUCER_FAILURES as exc:
                clean = False
                self.log(f"[{self.app}] {self.name}: commit on revocation failed ({exc!r}); "
                         f"closing tasks without committing")
                fenced = self._fenced(exc)
                self._abort()
            self._close_tasks(clean)
            if fenced is not None:
                # before the next assignment's tasks start: they need a producer that works
                self._new_producer(fenced)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self.lock:
            self._abort()
            self._close_tasks(clean=False)

    def _close_tasks(self, clean: bool) -> None:
        for task in self.tasks.values():
            task.close(clean)
        if self.standbys is not None:
            self.standbys.deactivated(list(self.tasks))
        self.tasks.clear()
        self._route.clear()
        self._positions.clear()
        # every task is closed: end offsets of changelog records no commit took (an aborted
        # transaction's) must not be recorded by a later task of the same changelog partition
        self._changelog_end.clear()

    def _abort(self) -> KafkaError | None:
        """Aborts the open transaction (EOS); returns the producer's fatal error if it has one
        (then there is nothing to abort: the transaction died with the producer's epoch)."""
        fatal: KafkaError | None = None
        if self.config.exactly_once and self._in_txn:
            try:
                self.producer.abort_transaction(30)
            except (KafkaException, SystemError) as exc:
                fatal = next((e for e in _kafka_errors(exc) if e.fatal()), None)
                if fatal is None:
                    self.log(f"[{self.app}] {self.name}: abort_transaction failed: {exc!r}")
            self._in_txn = False
        self._dirty = False
        self._delivery_errors.clear()
        return fatal

    def _fenced(self, exc: BaseException) -> KafkaError | None:
        """Under exactly_once_v2, the error saying this thread's producer was fenced, if ``exc``
        came from that; None otherwise. Aborts the open transaction on the way (the caller's work
        failed anyway): ``abort_transaction`` reports the producer's fatal error when the chain
        does not name it (a send refused with _FATAL, a SystemError from a callback)."""
        if not self.config.exactly_once:
            return None
        errors = _kafka_errors(exc)
        if not errors and not _has_system_error(exc):
            return None  # not the producer's doing (a processor's bug, a handler answering FAIL)
        fatal = [e for e in errors if e.fatal()]
        probed = self._abort()
        if probed is not None:
            fatal.append(probed)
        return next((e for e in fatal if e.code() in _FENCED), None)

    def _new_producer(self, fenced: KafkaError) -> None:
        """Replaces the fenced producer (Kafka Streams' ``reInitializeThreadProducer``): the new
        one's ``init_transactions`` gets a new epoch from the coordinator."""
        self.log(f"[{self.app}] {self.name}: replacing its fenced producer ({fenced.str()})")
        self._close_producer()
        # the old producer's last delivery reports (failures of the dead transaction) are moot
        self._delivery_errors.clear()
        self._in_txn = False
        self._dirty = False
        self.producer = Producer(self._producer_conf)
        self.producer.init_transactions(60)
        self.producers_replaced += 1

    # -- commit -----------------------------------------------------------------------------

    def _begin(self) -> None:
        if self.config.exactly_once and not self._in_txn:
            self.producer.begin_transaction()
            self._in_txn = True

    def commit(self) -> None:
        """Commits the tasks' output, changelogs, stores and input offsets (see module doc)."""
        with self.lock:
            if not self._dirty and not self._positions:
                return
            self._begin()
            for task in self.tasks.values():
                # the record caches' net updates go out (and into the changelogs) first
                task.runtime.flush_caches()
            produce = self.producer.produce
            for task in self.tasks.values():
                for (topic, part), records in task.drain_changelogs():
                    for k, v in records:
                        try:
                            produce(topic, v, k, partition=part)
                        except BufferError:
                            self.producer.poll(0.1)
                            produce(topic, v, k, partition=part)
            offsets = [TopicPartition(t, p, o) for (t, p), o in self._positions.items()]
            remaining = self.producer.flush(30)
            if remaining:
                raise StreamsError(f"{remaining} records not delivered within 30 s")
            if self._delivery_errors:
                err = self._delivery_errors[0]
                raise StreamsError(f"producing failed: {err}") from KafkaException(err)
            if self.config.exactly_once:
                if offsets:
                    self.producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata())
                self.producer.commit_transaction()
                self._in_txn = False
                for task in self.tasks.values():
                    task.commit_stores(self._changelog_end)
            else:
                for task in self.tasks.values():
                    task.commit_stores(self._changelog_end)
                if offsets:
                    self.consumer.commit(offsets=offsets, asynchronous=False)
            self._positions.clear()
            self._dirty = False

    # -- loop -------------------------------------------------------------------------------

    def shutdown(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        self.state = ThreadState.STARTING
        try:
            if self.config.exactly_once:
                self.producer.init_transactions(60)  # fences a previous incarnation's producer
            self._subscribe()
            self._loop()
            self.state = ThreadState.PENDING_SHUTDOWN
            with self.lock:
                clean = True
                try:
                    self.commit()
                except _PRODUCER_FAILURES as exc:
                    fenced = self._fenced(exc)
                    if fenced is None:
                        raise
                    # as Kafka: a fenced producer at shutdown closes the tasks dirty, no error
                    self.log(f"[{self.app}] {self.name}: last commit failed, its producer was fenced "
                             f"({fenced.str()}); closing its tasks without committing")
                    clean = False
                self._close_tasks(clean=clean)
            self._close_consumer()
            if clean:  # a fenced producer has nothing left to deliver
                self.producer.flush(10)
            self._close_producer()
            self.state = ThreadState.DEAD
        except BaseException as exc:  # the thread dies; KafkaStreams reports ERROR
            self.error = exc
            self.state = ThreadState.ERROR
            self.log(f"[{self.app}] {self.name} failed: {exc!r}")
            with self.lock:
                if not self.config.exactly_once:
                    try:  # at_least_once: deliver what was sent (dead letters too)
                        self.producer.flush(10)
                    except Exception as flush_exc:
                        self.log(f"[{self.app}] {self.name}: flush after failure failed: {flush_exc!r}")
                self._abort()
                try:
                    self._close_tasks(clean=False)
                finally:
                    self._close_consumer()
                    self._close_producer()

    def _subscribe(self) -> None:
        self.consumer.subscribe(sorted(self._topic_sub), on_assign=self._on_assign,
                                on_revoke=self._on_revoke, on_lost=self._on_lost)

    def _commit_or_rejoin(self) -> None:
        """The periodic commit; a refusal by a group that moved on closes the tasks and rejoins."""
        try:
            self.commit()
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() == KafkaError.REBALANCE_IN_PROGRESS and not self.config.exactly_once:
                self.log(f"[{self.app}] {self.name}: commit refused during a rebalance; retrying at the next interval")
                return
            if err.code() not in _MIGRATED:
                raise  # a fenced producer is handled by the loop (it may fail outside commits too)
            self._task_migrated(f"commit refused ({err.str()}): the group moved on without this thread")

    def _task_migrated(self, why: str, fenced: KafkaError | None = None) -> None:
        """Kafka Streams' TaskMigrated handling: close every task without committing (under EOS
        its state is wiped and restored when it reopens), replace a fenced producer, rejoin."""
        self.log(f"[{self.app}] {self.name}: {why}; closing its tasks without committing and rejoining")
        with self.lock:
            self._abort()
            self._close_tasks(clean=False)
            if fenced is not None:
                self._new_producer(fenced)
        # A fresh subscription gets a fresh assignment, read from the committed offsets: the
        # consumer's own positions are past records no task has processed into a commit.
        self.consumer.unsubscribe()
        self._subscribe()

    def _close_consumer(self) -> None:
        # librdkafka 2.16 aborts the whole process (assert !rkcg_subscription in
        # rd_kafka_cgrp_destroy_final) when a consumer is closed while a re-subscription is
        # pending (unsubscribe + subscribe, the rejoin after TaskMigrated, then a shutdown before
        # the new assignment); unsubscribing first avoids it. The tasks are closed already.
        try:
            self.consumer.unsubscribe()
        except KafkaException as exc:
            self.log(f"[{self.app}] {self.name}: unsubscribe before close failed: {exc}")
        self.consumer.close()

    def _close_producer(self) -> None:
        close = getattr(self.producer, "close", None)  # confluent-kafka >= 2.x has Producer.close
        if close is None:
            return
        try:
            close()
        except (KafkaException, SystemError) as exc:
            # close() flushes, serving what the producer still had queued: for a fenced producer
            # its fatal error (raised by confluent-kafka once served) or a delivery callback run
            # with it pending; the producer is gone either way
            self.log(f"[{self.app}] {self.name}: closing the producer: {exc!r}")

    def _loop(self) -> None:
        consume = self.consumer.consume
        batch = self.config.max_poll_records
        poll_s = self.config.poll_ms / 1000
        interval = self.config.commit_interval / 1000
        eos = self.config.exactly_once
        positions = self._positions
        route = self._route
        next_commit = time.monotonic() + interval
        while not self._stop_event.is_set():
            try:
                msgs: list[Any] = consume(batch, poll_s)
                if msgs:
                    with self.lock:
                        if eos and not self._in_txn:
                            self._begin()
                        now_ms = int(time.time() * 1000)
                        for m in msgs:
                            err = m.error()
                            if err is not None:
                                if err.code() == KafkaError._PARTITION_EOF:
                                    continue
                                if err.fatal():
                                    raise KafkaException(err)
                                self.log(f"[{self.app}] consumer error: {err}")
                                continue
                            topic = m.topic()
                            part = m.partition()
                            proc = route.get((topic, part))
                            if proc is None:
                                continue  # revoked meanwhile
                            offset = m.offset()
                            ts = m.timestamp()[1]
                            proc(topic, part, offset, m.key(), m.value(), ts if ts >= 0 else now_ms, m.headers())
                            positions[(topic, part)] = offset + 1
                if self.tasks:
                    with self.lock:
                        if eos and not self._in_txn:
                            self._begin()
                        now_ms = int(time.time() * 1000)
                        for task in self.tasks.values():
                            task.runtime.punctuate_wall_clock(now_ms)
                self.producer.poll(0)
                if time.monotonic() >= next_commit:
                    self._commit_or_rejoin()
                    next_commit = time.monotonic() + interval
            except _PRODUCER_FAILURES as exc:
                # Kafka Streams handles TaskMigrated around a whole iteration: a fenced producer
                # may fail a send, a poll, a begin, a flush or a commit
                fenced = self._fenced(exc)
                if fenced is None:
                    raise
                self._task_migrated(f"its producer was fenced ({fenced.str()}; surfaced as "
                                    f"{type(exc).__name__})", fenced)
                next_commit = time.monotonic() + interval
