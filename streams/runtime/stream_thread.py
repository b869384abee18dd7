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
reports.

Broker outages (issue 28) follow Kafka Streams' ``task.timeout.ms`` rules. Every blocking client
call gets a finite timeout (``max.block.ms``, cut to what ``task.timeout.ms`` leaves): flush,
``send_offsets_to_transaction``, ``commit_transaction``, ``abort_transaction``,
``init_transactions``. A call failing on a retriable condition (``KafkaError.retriable()``, an
unreachable broker, a moved coordinator, a request that timed out) or a full producer queue
(``BufferError``) is back-pressure: the thread serves delivery reports and retries, logs a
WARNING naming what it waits for (KafkaStreams reports REBALANCING meanwhile; a call still
blocked after a second counts as waiting too, not only one that has failed), and never hands
the condition to the production exception handler. A record not delivered for a retriable
reason, an error that dooms the transaction (``txn_requires_abort()``), or a wait outliving
``task.timeout.ms`` is Kafka Streams' TaskCorrupted: the tasks are closed dirty (under EOS the
transaction is aborted, and the producer re-created when the abort cannot complete) and
re-created from the committed offsets and changelogs after a rejoin. A fatal producer error
under EOS (fenced, invalid epoch, a transaction the coordinator timed out) is TaskMigrated, as
above. Neither reaches the uncaught-exception handler; any other failure stops the thread and
asks it (see :class:`KafkaStreams`). librdkafka gives a synchronous consumer commit no timeout
parameter; it bounds the call itself (``socket.timeout.ms`` per request, the session timeout
while it waits for a coordinator), and its retriable failures are retried here like the others.

Dead letters (see :mod:`strom.streams.topology.errors`) go through a second, non-transactional
producer of the thread, flushed before every commit and abort, so that an aborted transaction
does not take them along.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from strom.streams.exceptions import StreamsError, TaskCorruptedError, TaskMigratedError
from strom.streams.runtime.config import StreamsConfig
from strom.streams.runtime.partition_group import PartitionGroup
from strom.streams.runtime.task import StreamTask
from strom.streams.topology.errors import (
    ErrorContext,
    ErrorHandling,
    ErrorKind,
    HandlerResponse,
    is_retriable,
)
from strom.streams.topology.runtime import EmitBatchError, Headers
from strom.streams.topology.topology import SubTopology, Topology

if TYPE_CHECKING:
    from strom.streams.runtime.standby import StandbyManager

logger = logging.getLogger(__name__)

# Commit refusals meaning another generation of the group may own this thread's tasks now.
_MIGRATED = frozenset({KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION})
# Fatal producer errors meaning the producer's epoch is gone (librdkafka reports _FENCED).
_FENCED = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})
# What a failure the producer caused may be raised as (SystemError: see the module doc).
_PRODUCER_FAILURES = (KafkaException, StreamsError, SystemError)
# A WARNING about one wait is repeated at most this often (s).
_WARN_EVERY_S = 10.0
# A full producer queue, or a blocking call without an answer, is a wait worth reporting (state,
# WARNING) once it lasts this long (s).
_QUEUE_FULL_WARN_S = 1.0
# A blocking call is waited for in slices of at most this long (s), so that a call still blocked
# is reported while it lasts: one call may take max.block.ms (10 s in the outage tests, 60 s by
# default), longer than the outage it waits out, and a wait reported only once the call has
# returned was never reported at all (issue 28: the EOS word count stayed RUNNING through an 8 s
# stall, blocked in its commit's flush).
_REPORT_SLICE_S = 0.5
# Pause between two attempts of a call that failed at once rather than by timing out (s).
_RETRY_BACKOFF_S = 0.1
# How long the thread's last steps (abort, flush, close) may take when it is failing or closing (s).
_LAST_WORDS_S = 10.0
# How long past its own timeout a transactional call may stay blocked before its producer is
# declared wedged (s): librdkafka 2.16 was seen blocked in send_offsets_to_transaction for
# minutes after a broker restart, whatever timeout it was given (issue 28).
_WEDGED_GRACE_S = 2.0


class ProducerWedgedError(TaskCorruptedError):
    """A transactional call of the thread's producer outlived its timeout: the producer is given
    up (left to its blocked call) and replaced; its transaction is aborted by the coordinator
    when the new producer, with the same transactional.id, initializes."""


def _call_bounded(call: Callable[[float], Any], timeout: float, what: str,
                  blocked: Callable[[float], None] | None = None) -> None:
    """``call(timeout)`` on a helper thread, waited for at most ``timeout`` plus a grace: a client
    call that ignores its timeout cannot block the stream thread (see _WEDGED_GRACE_S). While the
    call lasts, ``blocked(seconds so far)`` is called every _REPORT_SLICE_S."""
    outcome: list[BaseException | None] = []
    done = threading.Event()

    def run() -> None:
        try:
            call(timeout)
            outcome.append(None)
        except BaseException as exc:  # handed to the stream thread below
            outcome.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name=f"txn-call-{what.split()[0]}", daemon=True).start()
    started = time.monotonic()
    end = started + timeout + _WEDGED_GRACE_S
    while not done.wait(max(0.0, min(_REPORT_SLICE_S, end - time.monotonic()))):
        now = time.monotonic()
        if now >= end:
            break
        if blocked is not None:
            blocked(now - started)
    if not done.is_set():
        raise ProducerWedgedError(f"{what} stayed blocked {timeout + _WEDGED_GRACE_S:.1f} s, past its "
                                  f"timeout of {timeout:.1f} s")
    if outcome[0] is not None:
        raise outcome[0]


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
    """Kafka Streams' StreamThread states."""

    CREATED = "CREATED"
    STARTING = "STARTING"
    PARTITIONS_REVOKED = "PARTITIONS_REVOKED"
    PARTITIONS_ASSIGNED = "PARTITIONS_ASSIGNED"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    DEAD = "DEAD"
    ERROR = "ERROR"


class _Wait:
    """One bounded wait of the thread: its deadline (``task.timeout.ms`` from its start) and the
    WARNING it logs while it lasts."""

    __slots__ = ("deadline", "logged_at", "since", "thread", "what")

    def __init__(self, thread: StreamThread, what: str) -> None:
        self.thread = thread
        self.what = what
        self.since = time.monotonic()
        self.deadline = self.since + thread.config.task_timeout_ms / 1000
        self.logged_at = 0.0

    def timeout(self) -> float:
        """The timeout of one blocking call (s): max.block.ms, cut to what the deadline leaves."""
        left = self.deadline - time.monotonic()
        return max(0.1, min(self.thread.config.max_block_ms / 1000, left))

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def stalled(self, why: str) -> None:
        """The call failed on a retriable condition: surface it (state, WARNING) and go on."""
        t = self.thread
        now = time.monotonic()
        t.waiting_for = self.what
        if now - self.logged_at >= _WARN_EVERY_S:
            self.logged_at = now
            t.log(f"[{t.app}] WARN {t.name}: waiting for {self.what} for {now - self.since:.1f} s ({why}); "
                  f"retrying until task.timeout.ms ({t.config.task_timeout_ms} ms) has passed")

    def blocked(self, seconds: float) -> None:
        """A call of this wait has been blocked ``seconds`` so far without an answer: past
        _QUEUE_FULL_WARN_S, surfaced like a failed attempt (the call goes on)."""
        if time.monotonic() - self.since >= _QUEUE_FULL_WARN_S:
            self.stalled(f"no answer for {seconds:.1f} s")

    def corrupted(self, why: str) -> TaskCorruptedError:
        return TaskCorruptedError(f"{self.what} did not complete within task.timeout.ms "
                                  f"({self.thread.config.task_timeout_ms} ms): {why}")

    def done(self) -> None:
        if self.thread.waiting_for == self.what:
            self.thread.waiting_for = None


class StreamThread(threading.Thread):
    """Polls, processes and commits for the tasks assigned to its consumer."""

    def __init__(self, topology: Topology, config: StreamsConfig, subs: list[SubTopology],
                 resolve: Callable[[str], str], transactional_id: str, index: int,
                 log: Callable[[str], None], *, errors: ErrorHandling | None = None,
                 global_stores: Mapping[str, Any] | None = None, standbys: StandbyManager | None = None,
                 client_id: str | None = None,
                 on_failure: Callable[[StreamThread, BaseException], None] | None = None) -> None:
        super().__init__(name=f"{config.application_id}-StreamThread-{index}", daemon=True)
        self.topology = topology
        self.config = config
        self.app = config.application_id
        self.index = index
        self.log = log
        self.lock = threading.RLock()  # held while tasks/stores change; store queries take it too
        self.state = ThreadState.CREATED
        self.errors = errors
        self.global_stores = global_stores
        self.standbys = standbys
        #: called once the thread has failed and cleaned up (KafkaStreams' uncaught-exception path)
        self.on_failure = on_failure
        #: task id -> records restored from changelogs when it last became active here
        self.restored: dict[str, int] = {}
        self.error: BaseException | None = None
        #: what a call of this thread has been retrying for since it last failed (None: nothing)
        self.waiting_for: str | None = None
        #: times this thread closed its tasks dirty and rejoined (TaskMigrated/TaskCorrupted)
        self.tasks_recreated = 0
        # Kafka's stream-thread-metrics (strom.streams.runtime.metrics): added per batch and per commit.
        self.poll_total = 0
        self.process_total = 0
        self.commit_total = 0
        self.commit_ms_total = 0.0
        self.commit_ms_max = 0.0
        self._stop_event = threading.Event()
        self.tasks: dict[tuple[int, int], StreamTask] = {}
        self._route: dict[tuple[str, int], Callable[..., None]] = {}
        self._positions: dict[tuple[str, int], int] = {}
        #: input partition -> the record queues of its task, for tasks of several input partitions
        #: (a single-partition task's records go straight to it: nothing to choose between)
        self._groups: dict[tuple[str, int], PartitionGroup] = {}
        self._topic_sub: dict[str, SubTopology] = {}
        for sub in subs:
            for t in sub.source_topics:
                self._topic_sub[resolve(t)] = sub
        self._changelog_end: dict[tuple[str, int], int] = {}
        #: delivery failures that are about the record (a handler saw them under at_least_once)
        self._delivery_errors: list[KafkaError] = []
        #: delivery failures for a retriable reason: the output since the last commit is incomplete
        self._lost_deliveries: list[KafkaError] = []
        self._in_txn = False
        self._dirty = False
        #: the producer could not abort its transaction: it is replaced before it is used again
        self._producer_broken = False
        #: a call of the producer is still blocked: it must not be used (nor closed) any more
        self._producer_wedged = False
        #: wedged producers given up, kept referenced until their blocked call returns
        self._abandoned: list[Producer] = []
        eos = config.exactly_once
        self.consumer_conf: dict[str, Any] = {
            "bootstrap.servers": config.bootstrap_servers,
            "group.id": self.app,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # range: equal partition numbers of co-partitioned topics land on one member
            "partition.assignment.strategy": "range",
            "isolation.level": "read_committed" if eos else "read_uncommitted",
            # librdkafka stops fetching a partition whose local queue holds queued.min.messages
            # and waits this long before the next fetch (default 1000 ms); a task that drains
            # 100,000 records in a fraction of a second then sat idle for the rest (the word
            # count's repartition topic: 5.8 s -> 2.1-3.9 s for 100,000 lines in-process).
            # Kafka's Java consumer fetches again as soon as its buffer is consumed.
            "fetch.queue.backoff.ms": 100,
            **({"client.id": client_id} if client_id else {}),
            **config.client_timeouts(producer=False),
            **config.consumer,
            # a task of several input partitions waits on an empty one until the fetcher says
            # it is at its end (max.task.idle.ms; strom.streams.runtime.partition_group)
            "enable.partition.eof": True,
        }
        producer_conf: dict[str, Any] = {
            "bootstrap.servers": config.bootstrap_servers,
            "partitioner": "murmur2_random",  # Kafka's default partitioner (Java clients)
            "linger.ms": 5,
            # under EOS too: the changelog end offsets the stores record come from here
            "on_delivery": self._on_delivery,
            **config.client_timeouts(producer=True),
            **config.producer,
        }
        self._dlq_topic = config.dead_letter_queue_topic
        # the dead-letter producer: the same settings, never transactional, idempotent
        self._dlq_conf = {k: v for k, v in producer_conf.items() if k not in ("transactional.id", "on_delivery")}
        self._dlq_conf["enable.idempotence"] = True
        self._dlq_conf["on_delivery"] = self._on_dead_letter_delivery
        self._dlq_producer: Producer | None = None
        if eos:
            producer_conf["transactional.id"] = transactional_id
        self._producer_conf = producer_conf
        self.producer = Producer(producer_conf)
        #: producers this thread replaced after they were fenced or broken (exactly_once_v2)
        self.producers_replaced = 0
        self.consumer = Consumer(self.consumer_conf)
        self._restore_conf = {k: v for k, v in self.consumer_conf.items()
                              if k not in ("partition.assignment.strategy",)}
        self._restore_conf["group.id"] = f"{self.app}-restore"

    # -- producer ---------------------------------------------------------------------------

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            if is_retriable(err) and not err.fatal():
                # not the record's fault (the broker was away for longer than the producer
                # waits): the output since the last commit is incomplete, the tasks are redone
                self._lost_deliveries.append(err)
                return
            topic = msg.topic() or "?"
            if (self.errors is not None and not self.config.exactly_once and not err.fatal()
                    and not topic.endswith("-changelog")):
                # at_least_once: the production handler may let the output go (under EOS the
                # failed send dooms the transaction whatever a handler says)
                ctx = ErrorContext(ErrorKind.PRODUCTION, KafkaException(err), "?", None, -1, -1, msg.key(),
                                   msg.value(), -1, msg.headers(), sink_topic=f"{topic}-{msg.partition()}")
                if self.errors.handlers[ErrorKind.PRODUCTION](ctx) is HandlerResponse.CONTINUE:
                    self.errors.skipped[ErrorKind.PRODUCTION] += 1
                    self.log(f"[{self.app}] WARN {ctx.describe()}; skipped (handler answered CONTINUE)")
                    return
            self._delivery_errors.append(err)
            return
        topic = msg.topic() or ""
        if topic.endswith("-changelog"):
            part = msg.partition()
            off = msg.offset()
            if part is not None and off is not None:
                key = (topic, part)
                if off + 1 > self._changelog_end.get(key, -1):
                    self._changelog_end[key] = off + 1

    def _on_dead_letter_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:  # nothing else would tell: the record it describes was skipped or failed
            headers = dict(msg.headers() or [])

            def header(name: str) -> str:
                value = headers.get(f"__streams.errors.{name}")
                return value.decode(errors="replace") if isinstance(value, bytes) else str(value)

            self.log(f"[{self.app}] ERROR {self.name}: a dead letter for the record at topic={header('topic')} "
                     f"partition={header('partition')} offset={header('offset')} could not be written to "
                     f"{msg.topic()}: {err.str()}")

    def _send(self, producer: Producer, topic: str, key: bytes | None, value: bytes | None, *,
              partition: int = -1, timestamp: int = 0, headers: Headers = None) -> None:
        """``produce`` with back-pressure: a full queue is waited out (serving delivery reports)
        within task.timeout.ms, never passed on as the record's failure."""
        hdrs: list[tuple[str, str | bytes | None]] | None = [(k, v) for k, v in headers] if headers else None
        wait: _Wait | None = None
        while True:
            try:
                # positional: about half the cost of keywords per call; None as on_delivery
                # keeps the producer's default callback (confluent-kafka's produce)
                producer.produce(topic, value, key, partition, None, None, timestamp, hdrs)
                break
            except BufferError:
                if wait is None:
                    wait = _Wait(self, f"space in the producer queue (sending to {topic})")
                elif wait.expired:
                    raise wait.corrupted("the producer queue stayed full") from None
                elif time.monotonic() - wait.since >= _QUEUE_FULL_WARN_S:
                    wait.stalled("queue full: the broker is not acknowledging records")
                producer.poll(_RETRY_BACKOFF_S)
        if wait is not None:
            wait.done()

    def _emit(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
              headers: Headers) -> None:
        if topic == self._dlq_topic:
            self._dead_letter(topic, key, value, timestamp, headers)
            return
        self._dirty = True
        self._send(self.producer, topic, key, value, timestamp=timestamp, headers=headers)

    def _emit_batch(self, topic: str, keys: list[bytes | None], values: list[bytes | None],
                    timestamps: list[int], headers: list[Headers]) -> None:
        """A sink's batch, produced in order: ``produce`` in a loop (a full queue or a failure
        goes the ``_send`` way for that record); a failure at element i is EmitBatchError(i)."""
        i = 0
        try:
            if topic == self._dlq_topic:
                for i in range(len(keys)):
                    self._dead_letter(topic, keys[i], values[i], timestamps[i], headers[i])
                return
            self._dirty = True
            producer = self.producer
            produce = producer.produce
            for i in range(len(keys)):
                h = headers[i]
                try:
                    # positional arguments (see _send): partition -1 = the partitioner's choice
                    if h:
                        produce(topic, values[i], keys[i], -1, None, None, timestamps[i], list(h))
                    else:
                        produce(topic, values[i], keys[i], -1, None, None, timestamps[i])
                except BufferError:
                    # queue full: wait for room the way a single record does
                    self._send(producer, topic, keys[i], values[i], timestamp=timestamps[i], headers=h)
            # delivery reports hold their message's place in the queue until served: serving
            # them per batch keeps the queue from filling (it did ~25,000 times per 100,000
            # word-count lines when they were served once per poll of 1,000 records)
            producer.poll(0)
        except Exception as exc:
            raise EmitBatchError(i) from exc

    def _dead_letter(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
                     headers: Headers) -> None:
        """A dead letter goes through the thread's non-transactional producer (see the module
        doc): an abort of the transaction it belongs to does not lose it."""
        if self._dlq_producer is None:
            self._dlq_producer = Producer(self._dlq_conf)
        self._send(self._dlq_producer, topic, key, value, timestamp=timestamp, headers=headers)

    def _flush(self, producer: Producer, what: str) -> None:
        """Flushes ``producer`` within task.timeout.ms (each flush bounded by max.block.ms)."""
        wait = _Wait(self, what)
        while True:
            # in slices (see _REPORT_SLICE_S): the records' delivery is what is waited for, and
            # flush() has no state of its own to lose between two calls
            remaining = producer.flush(min(_REPORT_SLICE_S, wait.timeout()))
            if remaining == 0:
                wait.done()
                return
            if wait.expired:
                raise wait.corrupted(f"{remaining} records not acknowledged")
            waited = time.monotonic() - wait.since
            if waited >= _QUEUE_FULL_WARN_S:
                wait.stalled(f"{remaining} records not acknowledged for {waited:.1f} s")

    def _flush_dead_letters(self) -> None:
        if self._dlq_producer is not None and len(self._dlq_producer):
            self._flush(self._dlq_producer, "the delivery of dead letters")

    def _retrying(self, what: str, call: Callable[[float], Any], *, abortable: bool = True,
                  producer_call: bool = True) -> None:
        """Runs a blocking client call with a finite timeout, retrying it while it fails on a
        retriable condition, until task.timeout.ms has passed (then TaskCorruptedError).

        A fatal error is raised as it is (a fenced producer: TaskMigrated in the loop); one that
        dooms the transaction (``txn_requires_abort``) is TaskCorruptedError at once; so is a
        group that moved on (``_MIGRATED``) when the call is the transaction's."""
        wait = _Wait(self, what)
        while True:
            try:
                if producer_call:
                    _call_bounded(call, wait.timeout(), what, wait.blocked)
                else:
                    call(wait.timeout())
                wait.done()
                return
            except ProducerWedgedError:
                self._producer_wedged = True
                self._producer_broken = True
                raise
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if err.fatal():
                    raise
                if abortable and err.txn_requires_abort():
                    if err.code() in _MIGRATED:  # the group moved on: its tasks may be elsewhere now
                        raise TaskMigratedError(f"{what} refused ({err.str()}): the group moved on "
                                                f"without this thread") from exc
                    raise TaskCorruptedError(f"{what} failed ({err.str()}): the transaction must be aborted") from exc
                if not is_retriable(err) or err.code() == KafkaError.REBALANCE_IN_PROGRESS:
                    raise
                if wait.expired:
                    raise wait.corrupted(err.str()) from exc
                wait.stalled(err.str())
                if err.code() != KafkaError._TIMED_OUT:
                    self._stop_event.wait(_RETRY_BACKOFF_S)  # failed at once: do not spin

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
                                  cache_max_entries=self.config.cache_max_entries(),
                                  emit_batch=self._emit_batch)
                try:
                    # Kafka's order: every store of the task is restored (RESTORING) before its
                    # processors are initialised and records flow (RUNNING), so a processor's
                    # ``init`` reading its store sees the restored state
                    self.restored[task.id] = task.restore(self._restore_conf, self.log,
                                                          timeout_s=self.config.task_timeout_ms / 1000)
                    task.start_processing()
                except BaseException:
                    task.close(clean=False)
                    raise
                self.tasks[key] = task
            inputs: dict[tuple[int, int], list[tuple[str, int]]] = {}
            for tp in partitions:
                sub = self._topic_sub.get(tp.topic)
                if sub is not None:
                    self._route[(tp.topic, tp.partition)] = self.tasks[(sub.id, tp.partition)].process_batch
                    inputs.setdefault((sub.id, tp.partition), []).append((tp.topic, tp.partition))
            for key, tps in inputs.items():
                task = self.tasks[key]
                if len(tps) > 1 and task.partition_group is None:
                    task.partition_group = PartitionGroup(sorted(tps), self.config.max_task_idle_ms)
                if task.partition_group is not None:
                    for tp_ in task.partition_group.partitions:
                        self._groups[tp_] = task.partition_group
            self.log(f"[{self.app}] {self.name}: assigned tasks {sorted(t.id for t in self.tasks.values())}")
            self.state = ThreadState.RUNNING

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self.lock:
            self.state = ThreadState.PARTITIONS_REVOKED
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
            if fenced is not None or self._producer_broken:
                # before the next assignment's tasks start: they need a producer that works
                self._new_producer(fenced.str() if fenced is not None else "its transaction could not be aborted")

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self.lock:
            self.state = ThreadState.PARTITIONS_REVOKED
            self._abort()
            self._close_tasks(clean=False)
            if self._producer_broken:
                self._new_producer("its transaction could not be aborted")

    def _close_tasks(self, clean: bool) -> None:
        for task in self.tasks.values():
            task.close(clean)
        if self.standbys is not None:
            self.standbys.deactivated(list(self.tasks))
        self.tasks.clear()
        self._route.clear()
        self._groups.clear()
        self._positions.clear()
        # every task is closed: end offsets of changelog records no commit took (an aborted
        # transaction's) must not be recorded by a later task of the same changelog partition
        self._changelog_end.clear()

    def _abort(self, last_words: bool = False) -> KafkaError | None:
        """Aborts the open transaction (EOS), retrying within task.timeout.ms (``last_words``: a
        few seconds); returns the producer's fatal error if it has one (then there is nothing to
        abort: the transaction died with the producer's epoch). A transaction that cannot be
        aborted in time marks the producer broken: it is replaced, and the new producer's
        ``init_transactions`` has the coordinator abort it."""
        fatal: KafkaError | None = None
        try:
            self._flush_dead_letters()
        except TaskCorruptedError as exc:
            self.log(f"[{self.app}] ERROR {self.name}: {exc}")
        if self.config.exactly_once and self._in_txn and self._producer_wedged:
            self._in_txn = False  # the coordinator aborts it when the replacement initializes
        if self.config.exactly_once and self._in_txn:
            try:
                if last_words:
                    self.producer.abort_transaction(_LAST_WORDS_S)
                else:
                    self._retrying("the abort of the transaction", self.producer.abort_transaction, abortable=False)
            except (KafkaException, SystemError, TaskCorruptedError) as exc:
                fatal = next((e for e in _kafka_errors(exc) if e.fatal()), None)
                if fatal is None:
                    self.log(f"[{self.app}] WARN {self.name}: abort_transaction failed: {exc!r}; "
                             f"the producer will be replaced")
                    self._producer_broken = True
            self._in_txn = False
        self._dirty = False
        self._delivery_errors.clear()
        self._lost_deliveries.clear()
        return fatal

    def _fenced(self, exc: BaseException) -> KafkaError | None:
        """Under exactly_once_v2, the fatal producer error ``exc`` came from (fenced, invalid
        epoch, a transaction the coordinator aborted: the producer is unusable and is replaced),
        if it came from one; None otherwise. Aborts the open transaction on the way (the caller's
        work failed anyway): ``abort_transaction`` reports the producer's fatal error when the
        chain does not name it (a send refused with _FATAL, a SystemError from a callback)."""
        if not self.config.exactly_once:
            return None
        errors = _kafka_errors(exc)
        if not errors and not _has_system_error(exc):
            return None  # not the producer's doing (a processor's bug, a handler answering FAIL)
        fatal = [e for e in errors if e.fatal()]
        probed = self._abort()
        if probed is not None:
            fatal.append(probed)
        return next((e for e in fatal if e.code() in _FENCED), fatal[0] if fatal else None)

    def _new_producer(self, why: str) -> None:
        """Replaces the producer (Kafka Streams' ``reInitializeThreadProducer``): the new one's
        ``init_transactions`` gets a new epoch from the coordinator, which aborts whatever the
        old one left open."""
        self.log(f"[{self.app}] {self.name}: replacing its producer ({why})")
        if self._producer_wedged:
            # a call of it is still blocked in librdkafka: leave it be (closing it would block too)
            self._abandoned.append(self.producer)
            self._producer_wedged = False
        else:
            self._close_producer(discard=True)
        # the old producer's last delivery reports (failures of the dead transaction) are moot
        self._delivery_errors.clear()
        self._lost_deliveries.clear()
        self._in_txn = False
        self._dirty = False
        self._producer_broken = False
        self.producer = Producer(self._producer_conf)
        self._init_transactions()
        self.producers_replaced += 1

    def _init_transactions(self) -> None:
        """``init_transactions`` within task.timeout.ms; past it the thread fails (no producer)."""
        try:
            self._retrying("init_transactions (the transaction coordinator)", self.producer.init_transactions,
                           abortable=False)
        except TaskCorruptedError as exc:
            raise StreamsError(f"{self.name}: {exc}") from exc

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
            started = time.perf_counter()
            self._begin()
            for task in self.tasks.values():
                # the record caches' net updates go out (and into the changelogs) first
                task.runtime.flush_caches()
            producer = self.producer
            produce = producer.produce
            for task in self.tasks.values():
                for (topic, part), records in task.drain_changelogs():
                    for k, v in records:
                        try:
                            produce(topic, v, k, part)
                        except BufferError:  # queue full: wait for room (within task.timeout.ms)
                            self._send(producer, topic, k, v, partition=part)
                    producer.poll(0)  # serve delivery reports: they hold queue space
            offsets = [TopicPartition(t, p, o) for (t, p), o in self._positions.items()]
            self._flush_dead_letters()
            self._flush(self.producer, "the delivery of the output")
            if self._lost_deliveries:
                err = self._lost_deliveries[0]
                raise TaskCorruptedError(f"{len(self._lost_deliveries)} records were not delivered ({err.str()}); "
                                         f"the tasks are processed again from their last commit") from KafkaException(err)
            if self._delivery_errors:
                err = self._delivery_errors[0]
                raise StreamsError(f"producing failed: {err}") from KafkaException(err)
            if self.config.exactly_once:
                if offsets:
                    group = self.consumer.consumer_group_metadata()
                    self._retrying("send_offsets_to_transaction (the group coordinator)",
                                   lambda t: self.producer.send_offsets_to_transaction(offsets, group, t))
                self._retrying("commit_transaction (the transaction coordinator)", self.producer.commit_transaction)
                self._in_txn = False
                for task in self.tasks.values():
                    task.commit_stores(self._changelog_end)
            else:
                for task in self.tasks.values():
                    task.commit_stores(self._changelog_end)
                if offsets:
                    self._retrying("the offset commit (the group coordinator)",
                                   lambda _t: self.consumer.commit(offsets=offsets, asynchronous=False),
                                   abortable=False, producer_call=False)
            self._positions.clear()
            self._dirty = False
            commit_ms = (time.perf_counter() - started) * 1000
            self.commit_total += 1
            self.commit_ms_total += commit_ms
            self.commit_ms_max = max(self.commit_ms_max, commit_ms)

    # -- loop -------------------------------------------------------------------------------

    def shutdown(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        self.state = ThreadState.STARTING
        try:
            if self.config.exactly_once:
                self._init_transactions()  # fences a previous incarnation's producer
            self._subscribe()
            self._loop()
            self.state = ThreadState.PENDING_SHUTDOWN
            with self.lock:
                clean = True
                try:
                    self.commit()
                except (TaskCorruptedError, TaskMigratedError) as exc:
                    # as Kafka: what cannot be committed at shutdown is closed dirty, no error
                    self.log(f"[{self.app}] WARN {self.name}: last commit failed ({exc}); "
                             f"closing its tasks without committing")
                    self._abort(last_words=True)
                    clean = False
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
            self._close_producer(discard=not clean)
            self.state = ThreadState.DEAD
        except BaseException as exc:  # the thread dies; KafkaStreams' uncaught-exception handler decides
            self.error = exc
            self.log(f"[{self.app}] ERROR {self.name} failed: {exc!r}")
            with self.lock:
                try:
                    if not self.config.exactly_once:
                        try:  # at_least_once: deliver what was sent
                            self.producer.flush(_LAST_WORDS_S)
                        except Exception as flush_exc:
                            self.log(f"[{self.app}] {self.name}: flush after failure failed: {flush_exc!r}")
                    self._abort(last_words=True)
                    try:
                        self._close_tasks(clean=False)
                    finally:
                        self._close_consumer()
                        self._close_producer(discard=True)
                finally:
                    self.state = ThreadState.ERROR
            if self.on_failure is not None:
                self.on_failure(self, exc)

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
            raise TaskMigratedError(f"commit refused ({err.str()}): the group moved on without this thread") from exc

    def _task_migrated(self, why: str, fenced: KafkaError | None = None) -> None:
        """Kafka Streams' TaskMigrated/TaskCorrupted handling: close every task without committing
        (under EOS its state is wiped and restored when it reopens), replace a fenced or broken
        producer, rejoin."""
        self.log(f"[{self.app}] WARN {self.name}: {why}; closing its tasks without committing and rejoining")
        with self.lock:
            self.state = ThreadState.PARTITIONS_REVOKED
            self._abort()
            self._close_tasks(clean=False)
            if fenced is not None or self._producer_broken:
                self._new_producer(fenced.str() if fenced is not None else "its transaction could not be aborted")
            self.tasks_recreated += 1
            self.waiting_for = None
        # A fresh subscription gets a fresh assignment, read from the committed offsets: the
        # consumer's own positions are past records no task has processed into a commit.
        self.consumer.unsubscribe()
        self._subscribe()

    def _revive(self, why: str) -> None:
        """Kafka Streams' TaskCorrupted handling: close every task without committing, replace a
        broken producer, then re-create the tasks of the same assignment from the committed
        offsets (the consumer seeks back to them) and their changelogs. The thread stays in the
        group: a rejoin would wait on the same coordinator the failed commit waited on."""
        self.log(f"[{self.app}] WARN {self.name}: {why}; closing its tasks without committing and "
                 f"re-creating them from the last commit")
        with self.lock:
            self.state = ThreadState.PARTITIONS_ASSIGNED
            self._abort()
            self._close_tasks(clean=False)
            if self._producer_broken:
                self._new_producer("its transaction could not be aborted")
            self.tasks_recreated += 1
            self.waiting_for = None
            assignment = self.consumer.assignment()
            if not assignment:
                return
            try:
                self._seek_to_committed(assignment)
            except KafkaException as exc:  # a partition not fetching yet cannot seek: rejoin instead
                self.log(f"[{self.app}] WARN {self.name}: cannot seek back to the committed offsets ({exc}); "
                         f"rejoining")
                self.consumer.unsubscribe()
                self._subscribe()
                return
            self._on_assign(self.consumer, assignment)

    def _seek_to_committed(self, assignment: list[TopicPartition]) -> None:
        """Moves the consumer back to the committed offsets of ``assignment`` (retried within
        task.timeout.ms; past it the thread fails: it cannot tell where its input resumes)."""
        found: list[list[TopicPartition]] = []
        try:
            self._retrying("the committed offsets (the group coordinator)",
                           lambda t: found.append(self.consumer.committed(assignment, timeout=t)),
                           abortable=False, producer_call=False)
        except TaskCorruptedError as exc:
            raise StreamsError(f"{self.name}: {exc}") from exc
        reset = str(self.consumer_conf.get("auto.offset.reset", "earliest"))
        for tp in found[-1]:
            offset = tp.offset
            if offset < 0:  # nothing committed: where auto.offset.reset starts
                offset = OFFSET_END if reset in ("latest", "largest", "end") else OFFSET_BEGINNING
            self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))

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

    def _close_producer(self, discard: bool = False) -> None:
        """Closes the producer (and the dead-letter producer, after delivering what it holds).

        ``close()`` flushes without a bound, so what it would wait for is flushed with one first
        and, when ``discard`` (a failed or replaced producer) or past that bound, purged."""
        producers = [p for p in (self._dlq_producer, self.producer)
                     if p is not None and not (p is self.producer and self._producer_wedged)]
        self._dlq_producer = None
        for producer in producers:
            try:
                if discard and producer is self.producer:
                    producer.purge(in_queue=True, in_flight=True)
                if producer.flush(_LAST_WORDS_S):
                    self.log(f"[{self.app}] WARN {self.name}: {len(producer)} records not delivered at close; "
                             f"dropped (their input is not committed)")
                    producer.purge(in_queue=True, in_flight=True)
                    producer.flush(1.0)
                close = getattr(producer, "close", None)  # confluent-kafka >= 2.x has Producer.close
                if close is not None:
                    close()
            except (KafkaException, SystemError) as exc:
                # close() flushes, serving what the producer still had queued: for a fenced producer
                # its fatal error (raised by confluent-kafka once served) or a delivery callback run
                # with it pending; the producer is gone either way
                self.log(f"[{self.app}] {self.name}: closing the producer: {exc!r}")

    def _process_run(self, tp: tuple[str, int], run: list[Message], now_ms: int) -> None:
        """Consecutive records of one partition (offset order) through its task, as one batch."""
        proc = self._route.get(tp)
        if proc is None or not run:
            return  # revoked meanwhile
        # a record (not an event) always has an offset
        offsets = cast(list[int], [m.offset() for m in run])
        timestamps: list[int] = [m.timestamp()[1] for m in run]
        if min(timestamps) < 0:  # no timestamp: the wall clock (as before, per record)
            timestamps = [ts if ts >= 0 else now_ms for ts in timestamps]
        proc(tp[0], tp[1], offsets, [m.key() for m in run], [m.value() for m in run], timestamps,
             [m.headers() for m in run])
        self._positions[tp] = offsets[-1] + 1

    def _take_run(self, tp: tuple[str, int], run: list[Message], now_ms: int) -> None:
        """A fetched run of one partition: processed at once, or queued in its task's partition
        group when the task has other input partitions to choose between."""
        if not run:
            return
        group = self._groups.get(tp)
        if group is None:
            self._process_run(tp, run, now_ms)
        else:
            group.add_records(tp, run)

    def _process_groups(self, now_ms: int) -> None:
        """Kafka's StreamTask.process for tasks of several input partitions: while the task is
        processable, the head records with the smallest timestamp go next (partition_group.py)."""
        seen: set[int] = set()
        for group in self._groups.values():
            if id(group) in seen:
                continue
            seen.add(id(group))
            while group.ready_to_process(now_ms):
                if self.config.exactly_once and not self._in_txn:
                    self._begin()
                nxt = group.next_run(now_ms)
                if nxt is None:
                    break
                self._process_run(nxt[0], cast(list[Message], nxt[1]), now_ms)

    def _loop(self) -> None:
        consume = self.consumer.consume
        batch = self.config.max_poll_records
        poll_s = self.config.poll_ms / 1000
        interval = self.config.commit_interval / 1000
        eos = self.config.exactly_once
        next_commit = time.monotonic() + interval
        while not self._stop_event.is_set():
            try:
                msgs: list[Any] = consume(batch, poll_s)
                if msgs:
                    self.poll_total += 1
                    # events (partition EOF with enable.partition.eof, errors) are taken off below
                    self.process_total += len(msgs)
                    with self.lock:
                        if eos and not self._in_txn:
                            self._begin()
                        now_ms = int(time.time() * 1000)
                        # consecutive records of one partition go to its task as one batch
                        run: list[Any] = []
                        run_tp: tuple[str, int] = ("", -1)
                        for m in msgs:
                            err = m.error()
                            if err is not None:
                                self.process_total -= 1  # an event, not a record
                                if err.code() == KafkaError._PARTITION_EOF:
                                    group = self._groups.get((m.topic(), m.partition()))
                                    if group is not None:
                                        self._take_run(run_tp, run, now_ms)
                                        run = []
                                        run_tp = ("", -1)
                                        group.at_end((m.topic(), m.partition()))
                                    continue
                                if err.fatal():
                                    self._take_run(run_tp, run, now_ms)
                                    raise KafkaException(err)
                                self.log(f"[{self.app}] consumer error: {err}")
                                continue
                            tp = (m.topic(), m.partition())
                            if tp != run_tp:
                                if run:
                                    self._take_run(run_tp, run, now_ms)
                                run = []
                                run_tp = tp
                            run.append(m)
                        if run:
                            self._take_run(run_tp, run, now_ms)
                if self._groups:
                    # also without new records: an idle deadline may have passed
                    with self.lock:
                        self._process_groups(int(time.time() * 1000))
                if self.tasks:
                    with self.lock:
                        if eos and not self._in_txn:
                            self._begin()
                        now_ms = int(time.time() * 1000)
                        for task in self.tasks.values():
                            task.runtime.punctuate_wall_clock(now_ms)
                self.producer.poll(0)
                if self._lost_deliveries and not eos:
                    # at_least_once: output since the last commit was lost; redo it now rather
                    # than commit input offsets past it at the next interval
                    raise TaskCorruptedError(f"{len(self._lost_deliveries)} records were not delivered "
                                             f"({self._lost_deliveries[0].str()})")
                if time.monotonic() >= next_commit:
                    self._commit_or_rejoin()
                    next_commit = time.monotonic() + interval
            except TaskCorruptedError as exc:
                self._revive(str(exc))
                next_commit = time.monotonic() + interval
            except TaskMigratedError as exc:
                self._task_migrated(str(exc))
                next_commit = time.monotonic() + interval
            except _PRODUCER_FAILURES as exc:
                # Kafka Streams handles TaskMigrated around a whole iteration: a fenced producer
                # may fail a send, a poll, a begin, a flush or a commit
                fenced = self._fenced(exc)
                if fenced is None:
                    raise
                self._task_migrated(f"its producer failed ({fenced.str()}; surfaced as "
                                    f"{type(exc).__name__})", fenced)
                next_commit = time.monotonic() + interval
