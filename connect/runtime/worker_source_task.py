"""Source tasks: poll → transformations → converters → confluent-kafka producer.

:class:`AbstractWorkerSourceTask` holds what every source task shares (Kafka's
``AbstractWorkerSourceTask``): the poll loop, conversion, the send paths and their one retry loop,
delivery reports, closing. Records pass the transformation chain (predicates, ``negate``), then
the header, key and value converters, all under the task's :class:`RetryWithToleranceOperator`:
a failed record is reported (log, DLQ) and, with ``errors.tolerance=all``, skipped.

Back-pressure is not a record error. A full producer queue (``BufferError``) and retriable
producer errors (transport, all brokers down, timed out, coordinator moved) are retried, serving
delivery reports meanwhile, for at most ``max.block.ms`` (a producer key as in Kafka; librdkafka
has none, so the worker keeps it; unset it is ``delivery.timeout.ms``) and, once the task is
stopping, at most ``task.shutdown.graceful.timeout.ms``. A record librdkafka could not deliver
within ``delivery.timeout.ms`` fails the task (never tolerated as the record's fault). An
exhausted bound fails the task with a message naming it.

:class:`WorkerSourceTask` (at-least-once, the default): the offsets of a poll's records become
committable only once the producer acknowledged all of them *and* every earlier poll's records
(:class:`SubmittedRecords`), so a crash never commits past an unwritten record. Committable
offsets are written to the offset store every ``offset.flush.interval.ms`` and on stop (after
the producer is flushed); then ``SourceTask.commit()`` is called. A failed offset write is
logged and retried at the next commit.

:class:`ExactlyOnceWorkerSourceTask` (worker ``exactly.once.source.support=enabled``; Kafka's
``ExactlyOnceWorkerSourceTask``): a transactional producer (``transactional.id`` =
``<group.id>-<connector>-<task>``, ``connect-standalone-...`` without a group) writes each
transaction's records; the transaction ends per ``transaction.boundary`` (``poll``: every
non-empty poll; ``interval``: every ``transaction.boundary.interval.ms``; ``connector``: when the
task's :class:`TransactionContext` asks). The offsets of every record of the transaction are
written in the same transaction when the offset store supports ``produce_in_transaction`` (the
distributed offsets topic); otherwise (standalone's file) they are written right after the commit
— records are then exactly-once in Kafka, and a crash between commit and file write re-sends at
most that one transaction. ``init_transactions`` and ``commit_transaction`` are retried on
retriable errors within ``transaction.timeout.ms``.
"""

from __future__ import annotations

import logging
import time
from abc import abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from itertools import repeat
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from strom.connect.api.batches import SourceRecordBatch
from strom.connect.api.records import RecordMetadata, SourceRecord, peek_headers
from strom.connect.api.task import SourceTaskContext, TransactionContext
from strom.connect.exceptions import ConnectException, RetriableException
from strom.connect.runtime.config import ConnectorConfig, WorkerConfig
from strom.connect.runtime.errors import (
    ProcessingContext,
    RawRecord,
    RetryWithToleranceOperator,
    Stage,
    Tolerated,
)
from strom.connect.runtime.herder import ConnectorTaskId, TargetState
from strom.connect.runtime.offsets import OffsetBackingStore, OffsetStorageReaderImpl, OffsetStorageWriter
from strom.connect.runtime.worker import TransformationChain, WorkerTask, _notify

log = logging.getLogger("strom.connect.source")


def _freeze_partition(partition: Mapping[str, Any]) -> Any:
    try:
        return tuple(sorted(partition.items()))
    except TypeError:  # unhashable or unorderable values: fall back to their JSON text
        import json

        return json.dumps(partition, sort_keys=True, default=str)


class SubmittedBatch:
    """The records of one ``poll()``: how many await their ack, and the last offset per partition.

    Offsets are keyed by the identity of the partition dict (tasks usually reuse one dict per
    partition; the batch keeps the dicts alive, so identities stay unique); equal dicts of
    different identity are merged when the batch is committed.
    """

    __slots__ = ("offsets", "pending")

    def __init__(self) -> None:
        self.pending = 0
        self.offsets: dict[int, tuple[Mapping[str, Any], Mapping[str, Any]]] = {}

    def note(self, record: SourceRecord) -> None:
        partition, offset = record.source_partition, record.source_offset
        if partition is not None and offset is not None:  # as Kafka: no offset, nothing to commit
            self.offsets[id(partition)] = (partition, offset)


class SubmittedRecords:
    """Batches in send order; a batch's offsets are committable once it and every earlier batch
    are fully acknowledged, so a crash never commits past an unwritten record. Tracking acks per
    batch rather than per record keeps the per-record work to one counter decrement."""

    def __init__(self) -> None:
        self._batches: deque[SubmittedBatch] = deque()

    def new_batch(self) -> SubmittedBatch:
        batch = SubmittedBatch()
        self._batches.append(batch)
        return batch

    @property
    def outstanding(self) -> int:
        return sum(b.pending for b in self._batches)

    def committable(self) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
        merged: dict[Any, tuple[Mapping[str, Any], Mapping[str, Any]]] = {}
        batches = self._batches
        while batches and batches[0].pending <= 0:
            for partition, offset in batches.popleft().offsets.values():
                merged[_freeze_partition(partition)] = (partition, offset)
        return list(merged.values())


class WorkerTransactionContext(TransactionContext):
    """``TransactionContext`` for ``transaction.boundary=connector``."""

    def __init__(self) -> None:
        self.commit_requested = False
        self.abort_requested = False
        self.commit_after: set[int] = set()
        self.abort_after: set[int] = set()

    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        if record is None:
            self.commit_requested = True
        else:
            self.commit_after.add(id(record))

    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        if record is None:
            self.abort_requested = True
        else:
            self.abort_after.add(id(record))


class WorkerSourceTaskContext(SourceTaskContext):
    """What a source task sees of the worker (``SourceTaskContext``)."""

    def __init__(self, props: dict[str, str], reader: OffsetStorageReaderImpl,
                 txn: WorkerTransactionContext | None) -> None:
        self._props = props
        self._reader = reader
        self._txn = txn

    def configs(self) -> dict[str, str]:
        return self._props

    @property
    def offset_storage_reader(self) -> OffsetStorageReaderImpl:
        return self._reader

    def transaction_context(self) -> WorkerTransactionContext | None:
        return self._txn


# -- back-pressure -----------------------------------------------------------------------------

# librdkafka's local and transient conditions: the broker is away, the queue is full, a request
# timed out, the coordinator moved. They are back-pressure, never a record's fault.
_RETRIABLE_CODES = frozenset({
    KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT,
    KafkaError._QUEUE_FULL, KafkaError._WAIT_COORD, KafkaError._RESOLVE, KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND, KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NETWORK_EXCEPTION,
})
# A newer producer with the same transactional.id exists: this instance is a zombie.
_FENCED_CODES = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})
DEFAULT_DELIVERY_TIMEOUT_MS = 300000  # librdkafka's message.timeout.ms (alias delivery.timeout.ms)
DEFAULT_TRANSACTION_TIMEOUT_MS = 60000  # librdkafka's and Kafka's transaction.timeout.ms


def is_retriable(exc: BaseException) -> bool:
    """True for the producer's back-pressure: a full local queue or a retriable/transient error."""
    if isinstance(exc, BufferError):
        return True
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err: KafkaError = exc.args[0]
        return bool(err.retriable()) or err.code() in _RETRIABLE_CODES
    return False


def is_fenced(exc: BaseException) -> bool:
    """True if ``exc`` (or its cause) says a newer producer with the same transactional.id fenced ours."""
    while exc is not None:
        if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError) \
                and exc.args[0].code() in _FENCED_CODES:
            return True
        exc = exc.__cause__  # type: ignore[assignment]
    return False


def _error_code_retriable(err: KafkaError) -> bool:
    return bool(err.retriable()) or err.code() in _RETRIABLE_CODES


# -- the tasks ---------------------------------------------------------------------------------


class AbstractWorkerSourceTask(WorkerTask):
    """What both source tasks share (Kafka's ``AbstractWorkerSourceTask``): the poll loop, the
    conversion of records, the send paths and their single retry loop, delivery reports and
    closing. Subclasses decide what a batch of records is and when offsets are committed."""

    def __init__(self, task_id: ConnectorTaskId, task: Any, task_props: dict[str, str], cfg: ConnectorConfig,
                 worker_config: WorkerConfig, key_converter: Any, value_converter: Any, header_converter: Any,
                 transforms: TransformationChain, operator: RetryWithToleranceOperator,
                 offset_store: OffsetBackingStore, producer_conf: dict[str, Any], status_listener: Any,
                 target_state: TargetState, on_exit: Callable[[WorkerTask], None] | None = None) -> None:
        super().__init__(task_id, status_listener, target_state, on_exit)
        self.task = task
        self.task_props = task_props
        self.cfg = cfg
        self.worker_config = worker_config
        self.key_converter = key_converter
        self.value_converter = value_converter
        self.header_converter = header_converter
        self.transforms = transforms
        self.operator = operator
        operator.stopping = self.stopping
        self.offset_store = offset_store
        conf = dict(producer_conf)
        self.delivery_timeout_ms = int(conf.get("delivery.timeout.ms", conf.get("message.timeout.ms",
                                                                                DEFAULT_DELIVERY_TIMEOUT_MS)))
        # Kafka's max.block.ms bounds how long a send waits for room in the producer's buffer;
        # librdkafka has no such key (produce() raises BufferError at once), so the worker keeps
        # it. Unset, a full queue may wait as long as its records may: delivery.timeout.ms.
        self.max_block_ms = int(conf.pop("max.block.ms", self.delivery_timeout_ms))
        self.producer_conf = self._configure_producer(conf)
        self.producer: Any = None
        self.writer = OffsetStorageWriter(offset_store, task_id.connector)
        self.context = WorkerSourceTaskContext(task_props, OffsetStorageReaderImpl(offset_store, task_id.connector),
                                               self._transaction_context())
        self.pctx = ProcessingContext(task_id.connector, task_id.task)
        self._key_from = key_converter.from_connect_data
        self._value_from = value_converter.from_connect_data
        # Optional batch form of the converters (``from_connect_data_batch(topic, schemas,
        # values)``): one call per poll instead of two per record.
        self._key_batch = getattr(key_converter, "from_connect_data_batch", None)
        self._value_batch = getattr(value_converter, "from_connect_data_batch", None)
        self._delivery_error: Exception | None = None
        self._task_started = False
        self._producer_unusable = False  # fenced, or a transactional call left in flight
        # commit_record is per-record work: call it only for tasks that override it.
        base = getattr(type(task), "__mro__", ())
        self._wants_commit_record = any("commit_record" in vars(c) for c in base[:-1]
                                        if c.__module__ != "strom.connect.api.task")
        # A task with the batch form of the acknowledgement keeps the columnar path for its
        # SourceRecordBatches (one call per batch, not a record object and a call per record).
        self._wants_batch_ack = any("commit_record_batch" in vars(c) for c in base[:-1]
                                    if c.__module__ != "strom.connect.api.task")
        self.records_sent = 0
        self.records_polled = 0  # Kafka's source-record-poll-total (strom.connect.runtime.metrics)

    # -- hooks ----------------------------------------------------------------------------

    def _configure_producer(self, conf: dict[str, Any]) -> dict[str, Any]:
        return conf

    def _transaction_context(self) -> WorkerTransactionContext | None:
        return None

    def _init_producer(self) -> None:
        """After the producer is created, before the task starts."""

    @abstractmethod
    def _new_batch(self) -> SubmittedBatch:
        raise NotImplementedError

    @abstractmethod
    def _offset_done(self, record: SourceRecord, note: Callable[[SourceRecord], None]) -> None:
        """The record was sent (or filtered/skipped): its offset may be committed with its batch."""
        raise NotImplementedError

    def _before_record(self) -> None:
        """Before each record of the per-record path is converted."""

    def _after_record(self, record: SourceRecord) -> None:
        """After each record of the per-record path."""

    @abstractmethod
    def _after_poll(self, records: Sequence[SourceRecord] | None, now: float) -> None:
        """Once per loop, after the poll's records were handed to the producer."""
        raise NotImplementedError

    @abstractmethod
    def _end_batch(self, force: bool) -> None:
        """Commit what can be committed (on pause and at the end)."""
        raise NotImplementedError

    def _tolerate_delivery_errors(self) -> bool:
        return False

    @abstractmethod
    def _final_commit(self) -> None:
        """On a clean stop, before ``task.stop()``."""
        raise NotImplementedError

    def _after_task_stop(self) -> None:
        """On every stop, after ``task.stop()``, before the producer is closed."""

    # -- loop ---------------------------------------------------------------------------

    def execute(self) -> None:
        self.producer = Producer(self.producer_conf)
        self._init_producer()
        self.task.initialize(self.context)
        self.task.start(self.task_props)
        self._task_started = True
        _notify(self.status_listener, "on_startup", self.id)
        producer_poll = self.producer.poll
        while not self.stopping.is_set():
            if self.paused:
                self._end_batch(force=True)
                if not self.wait_while_paused():
                    break
                continue
            try:
                records = self.task.poll()
            except RetriableException as exc:
                log.warning("task %s-%d poll failed (retrying): %s", self.id.connector, self.id.task, exc)
                records = None
            if records:
                self.records_polled += len(records)
                self._send(records)
            producer_poll(0)
            self._raise_delivery_error()
            self._after_poll(records, time.monotonic())

    def _raise_delivery_error(self) -> None:
        if self._delivery_error is not None:
            raise ConnectException(f"producing failed: {self._delivery_error}") from self._delivery_error

    def _send(self, records: Sequence[SourceRecord]) -> None:
        pctx = self.pctx
        operator = self.operator
        produce = self.producer.produce
        convert = self._convert
        batch = self._new_batch()
        note = batch.note
        callback = self._batch_callback(batch)
        per_record = self._wants_commit_record
        before, after = self._before_record, self._after_record
        for record in records:
            before()
            try:
                out = convert(record)
            except Exception as exc:
                pctx.source_record = record  # the context is filled only on failure (per-record loop)
                try:
                    out = operator.recover(partial(convert, record), pctx, exc)
                except Tolerated:
                    out = None
            if out is None:  # filtered or skipped: its offset is done
                self._record_done(record, note)
            else:
                topic, partition, key, value, ts, headers, transformed = out
                if per_record:
                    callback = self._record_callback(batch, transformed)
                if partition is None:
                    partition = -1  # librdkafka's "unassigned": the configured partitioner decides
                if ts is None or ts < 0:
                    ts = 0  # the producer stamps the current time
                batch.pending += 1
                try:
                    produce(topic, value, key, partition, callback, None, ts, headers)  # see _produce_converted
                except (BufferError, KafkaException) as exc:
                    if not self._produce_retrying(exc, record, topic, value, key, partition, callback, ts, headers):
                        batch.pending -= 1
                        self._record_done(record, note)
                        after(record)
                        continue
                self._offset_done(record, note)
                self.records_sent += 1
            after(record)
        pctx.source_record = None

    def _produce_converted(self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes | None],
                           partitions: Iterable[int | None], stamps: Iterable[int | None],
                           records: Sequence[SourceRecord], acked: SourceRecordBatch | None = None) -> SubmittedBatch:
        """Produce converted keys and values as one acknowledgement batch (``records[i]`` is
        looked at only to report a record that could not be produced); with ``acked``, the task's
        ``commit_record_batch`` is called once every record is written."""
        self.active_topics.add(topic)
        batch = self._new_batch()
        callback = self._batch_callback(batch) if acked is None else self._acked_batch_callback(batch, acked)
        produce = self.producer.produce
        batch.pending += len(values)
        sent = 0
        for i, (key, value, partition, ts) in enumerate(zip(keys, values, partitions, stamps, strict=True)):
            p = -1 if partition is None else partition
            t = 0 if ts is None or ts < 0 else ts
            try:
                # Positional (topic, value, key, partition, callback, on_delivery, timestamp):
                # confluent-kafka parses keyword arguments at twice the cost per call.
                produce(topic, value, key, p, callback, None, t)
            except (BufferError, KafkaException) as exc:
                if not self._produce_retrying(exc, records[i], topic, value, key, p, callback, t, None):
                    batch.pending -= 1
                    continue
            sent += 1
        self.records_sent += sent
        return batch

    def _produce_retrying(self, exc: BaseException, record: SourceRecord, topic: str, value: bytes | None,
                          key: bytes | None, partition: int, callback: Any, ts: int,
                          headers: list[tuple[str, bytes | None]] | None) -> bool:
        """The one retry loop of every send path, entered when ``produce()`` raised ``exc``.

        A full queue and retriable errors are back-pressure (Kafka's ``max.block.ms``): delivery
        reports are served and the record handed over again, for at most ``max.block.ms`` (while
        the task is stopping, at most ``task.shutdown.graceful.timeout.ms``); past that the task
        fails naming the bound. Any other error is the record's: it fails the task, or with
        ``errors.tolerance=all`` is reported and skipped (returns False).
        """
        start = time.monotonic()
        deadline = start + self.max_block_ms / 1000
        attempts = 0
        while True:
            if not is_retriable(exc):
                if not self.cfg.tolerance_all:
                    raise ConnectException(f"producing to {topic} failed: {exc}") from exc
                pctx = self.pctx
                pctx.stage = Stage.KAFKA_PRODUCE
                pctx.executing_class = None
                pctx.source_record = record
                self.operator.report(pctx, exc)
                pctx.source_record = None
                return False
            now = time.monotonic()
            if self.stopping.is_set():
                deadline = min(deadline, now + self.worker_config.task_shutdown_graceful_timeout_ms / 1000)
            if now >= deadline:
                bound = "task.shutdown.graceful.timeout.ms" if self.stopping.is_set() else "max.block.ms"
                raise ConnectException(
                    f"task {self.id.connector}-{self.id.task}: a record for {topic} could not be handed to the "
                    f"producer within {bound} ({now - start:.1f} s, {attempts} attempts): {exc}") from exc
            if attempts == 0 and not isinstance(exc, BufferError):
                log.warning("task %s-%d: producing to %s failed, retrying: %s", self.id.connector, self.id.task,
                            topic, exc)
            attempts += 1
            self.producer.poll(0.1)  # serve delivery reports: frees room in the queue
            try:
                self.producer.produce(topic, value, key, partition, callback, None, ts, headers)
                return True
            except (BufferError, KafkaException) as again:
                exc = again

    def _record_done(self, record: SourceRecord, note: Callable[[SourceRecord], None]) -> None:
        if self._wants_commit_record:
            self.task.commit_record(record, None)
        self._offset_done(record, note)

    def while_paused(self) -> None:
        self.producer.poll(0)  # keep serving delivery reports so acknowledged offsets can commit

    def _convert(self, record: SourceRecord) -> tuple[Any, ...] | None:
        # The stage is tracked in a local and copied to the processing context only on failure:
        # this runs once per record.
        stage = Stage.TRANSFORMATION
        try:
            if self.transforms:
                record = self.transforms.apply(record, self.pctx)
                if record is None:
                    return None
            topic = record.topic
            self.active_topics.add(topic)
            headers = None
            record_headers = peek_headers(record)  # record.headers would allocate an empty Headers
            if record_headers:
                stage = Stage.HEADER_CONVERTER
                hc = self.header_converter.from_connect_header
                headers = [(h.key, hc(topic, h.key, h.schema, h.value)) for h in record_headers]
            stage = Stage.KEY_CONVERTER
            key = self._key_from(topic, record.key_schema, record.key)
            stage = Stage.VALUE_CONVERTER
            value = self._value_from(topic, record.value_schema, record.value)
        except Exception:
            pctx = self.pctx
            pctx.stage = stage
            if stage is not Stage.TRANSFORMATION:  # the chain names the failing transformation itself
                pctx.executing_class = {Stage.HEADER_CONVERTER: self.header_converter,
                                        Stage.KEY_CONVERTER: self.key_converter,
                                        Stage.VALUE_CONVERTER: self.value_converter}[stage]
            raise
        return topic, record.kafka_partition, key, value, record.timestamp, headers, record

    def _delivery_failed(self, batch: SubmittedBatch, err: Any, msg: Any) -> None:
        exc = KafkaException(err)
        if isinstance(err, KafkaError) and _error_code_retriable(err):
            # librdkafka retried it until delivery.timeout.ms ran out: the bound is exhausted,
            # not the record at fault, so it is never tolerated as a record error.
            if self._delivery_error is None:
                self._delivery_error = ConnectException(
                    f"a record for {msg.topic()} was not acknowledged within delivery.timeout.ms="
                    f"{self.delivery_timeout_ms}: {err}")
            return
        if self._tolerate_delivery_errors():
            # Tolerated: report the record as it was produced (converted bytes), then let it pass.
            ts_type, ts = msg.timestamp()
            raw = RawRecord(msg.topic(), msg.partition() if msg.partition() is not None else -1, -1,
                            ts if ts_type else None, msg.key(), msg.value(), msg.headers())
            self.operator.report(ProcessingContext(self.id.connector, self.id.task, Stage.KAFKA_PRODUCE,
                                                   consumer_record=raw), exc)
            batch.pending -= 1
        elif self._delivery_error is None:
            self._delivery_error = exc  # the batch stays unacknowledged: its offsets never commit

    def _batch_callback(self, batch: SubmittedBatch) -> Callable[[Any, Any], None]:
        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                batch.pending -= 1
            else:
                self._delivery_failed(batch, err, msg)

        return on_delivery

    def _acked_batch_callback(self, batch: SubmittedBatch, records: SourceRecordBatch) -> Callable[[Any, Any], None]:
        """For tasks overriding ``commit_record_batch``: the batch callback, collecting where each
        record was written; the task is called once, after the last acknowledgement."""
        commit_record_batch = self.task.commit_record_batch
        offsets: list[int] = []
        append = offsets.append
        n = len(records)

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                self._delivery_failed(batch, err, msg)
                return
            batch.pending -= 1
            append(msg.offset())  # reports of one partition come in produce order
            if len(offsets) == n:
                commit_record_batch(records, offsets)

        return on_delivery

    def _record_callback(self, batch: SubmittedBatch, record: SourceRecord) -> Callable[[Any, Any], None]:
        """For tasks overriding ``commit_record``: the same, plus the per-record call."""
        commit_record = self.task.commit_record

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                self._delivery_failed(batch, err, msg)
                return
            batch.pending -= 1
            ts = msg.timestamp()
            commit_record(record, RecordMetadata(msg.topic(), msg.partition(), msg.offset(),
                                                 ts[1] if ts[0] else None))

        return on_delivery

    def close(self) -> None:
        try:
            if self.producer is not None and self.failure is None:
                self._final_commit()
        finally:
            try:
                if self._task_started:
                    self.task.stop()
            finally:
                self._after_task_stop()
                self.transforms.close()
                self.operator.close()
                if self.producer is not None:
                    self._close_producer()

    def _close_producer(self) -> None:
        producer = self.producer
        try:
            if self._producer_unusable:
                # Fenced, or a transactional call still in flight: flushing would wait for what
                # can never be acknowledged and close() would try to abort a transaction the
                # producer can no longer touch, so the queue is dropped (the broker aborts the
                # transaction) and the producer destroyed with its last reference.
                producer.purge(in_queue=True, in_flight=True)
                self.producer = None
                return
            producer.flush(1)
            close = getattr(producer, "close", None)
            if close is not None:
                close()
        except KafkaException as exc:
            # close() of a fenced producer reports the fencing again; the task's state is settled.
            log.info("task %s-%d: closing the producer: %s", self.id.connector, self.id.task, exc)


class WorkerSourceTask(AbstractWorkerSourceTask):
    """Runs one source task at least once (see the module doc)."""

    def __init__(self, task_id: ConnectorTaskId, task: Any, task_props: dict[str, str], cfg: ConnectorConfig,
                 worker_config: WorkerConfig, key_converter: Any, value_converter: Any, header_converter: Any,
                 transforms: TransformationChain, operator: RetryWithToleranceOperator,
                 offset_store: OffsetBackingStore, producer_conf: dict[str, Any], status_listener: Any,
                 target_state: TargetState, on_exit: Callable[[WorkerTask], None] | None = None) -> None:
        super().__init__(task_id, task, task_props, cfg, worker_config, key_converter, value_converter,
                         header_converter, transforms, operator, offset_store, producer_conf, status_listener,
                         target_state, on_exit)
        self.submitted = SubmittedRecords()
        self._next_flush = 0.0

    def _new_batch(self) -> SubmittedBatch:
        return self.submitted.new_batch()

    def _offset_done(self, record: SourceRecord, note: Callable[[SourceRecord], None]) -> None:
        note(record)

    def _tolerate_delivery_errors(self) -> bool:
        return self.cfg.tolerance_all

    def _init_producer(self) -> None:
        self._next_flush = time.monotonic() + self.worker_config.offset_flush_interval_ms / 1000

    def _after_poll(self, records: Sequence[SourceRecord] | None, now: float) -> None:
        if now >= self._next_flush:
            self.commit_offsets()
            self._next_flush = now + self.worker_config.offset_flush_interval_ms / 1000

    def _end_batch(self, force: bool) -> None:
        self.commit_offsets()

    def _final_commit(self) -> None:
        self.commit_offsets(flush_timeout=self.worker_config.offset_flush_timeout_ms / 1000)

    def _send(self, records: Sequence[SourceRecord]) -> None:
        if isinstance(records, SourceRecordBatch) and self._wants_batch_ack:
            if self._send_fast(records):
                return
        elif not self._wants_commit_record and self._send_fast(records):
            return
        super()._send(records)

    def _send_fast(self, records: Sequence[SourceRecord]) -> bool:
        """The common case in one pass per poll: no transformations, no headers, one topic and
        batch-capable converters. Returns False (nothing sent) when the batch does not qualify or
        a converter fails; ``_send`` then takes the per-record path, which reports errors.

        A :class:`SourceRecordBatch` is sent from its columns: no record object is built."""
        key_batch, value_batch = self._key_batch, self._value_batch
        if self.transforms or key_batch is None or value_batch is None:
            return False
        if isinstance(records, SourceRecordBatch):
            return self._send_columns(records, key_batch, value_batch)
        topic = records[0].topic
        if any(map(peek_headers, records)) or any(r.topic != topic for r in records):
            return False
        try:
            keys = key_batch(topic, [r.key_schema for r in records], [r.key for r in records])
            values = value_batch(topic, [r.value_schema for r in records], [r.value for r in records])
        except Exception:
            return False
        batch = self._produce_converted(topic, keys, values, [r.kafka_partition for r in records],
                                        [r.timestamp for r in records], records)
        # Every record's offset is done once the batch is acknowledged; the last per partition wins.
        batch.offsets.update({id(r.source_partition): (r.source_partition, r.source_offset) for r in records
                              if r.source_partition is not None and r.source_offset is not None})
        return True

    def _send_columns(self, records: SourceRecordBatch, key_batch: Any, value_batch: Any) -> bool:
        topic, n = records.topic, len(records)
        try:
            if records.keys is None and records.key_schema is None:
                keys: Sequence[bytes | None] = [None] * n  # null keys without a schema: nothing to convert
            else:
                keys = key_batch(topic, [records.key_schema] * n,
                                 [None] * n if records.keys is None else records.keys)
            values = value_batch(topic, [records.value_schema] * n, records.values)
        except Exception:
            return False
        stamps = repeat(records.timestamp, n) if records.timestamps is None else records.timestamps
        batch = self._produce_converted(topic, keys, values, repeat(records.kafka_partition, n), stamps, records,
                                        records if self._wants_batch_ack else None)
        partition, offset = records.source_partition, records.last_source_offset()
        if partition is not None and offset is not None:
            batch.offsets[id(partition)] = (partition, offset)
        return True

    def commit_offsets(self, flush_timeout: float | None = None) -> None:
        """At-least-once: write the offsets of acknowledged records, then ``task.commit()``.

        An offset write that fails (the offsets topic unreachable within its bound) is logged and
        retried at the next commit, as Kafka's ``commitOffsets``: the records are in Kafka, only
        their offsets wait, and a crash meanwhile re-sends them (at least once)."""
        if flush_timeout is not None:
            remaining = self.producer.flush(flush_timeout)
            if remaining:
                log.warning("task %s-%d: %d records unacknowledged at commit; their offsets wait",
                            self.id.connector, self.id.task, remaining)
        else:
            self.producer.poll(0)
        self._raise_delivery_error()
        try:
            self.operator.flush(self.worker_config.offset_flush_timeout_ms / 1000)  # DLQ before offsets
        except RetriableException as exc:
            log.warning("task %s-%d: dead letter queue records still in flight; offsets wait for the next "
                        "commit: %s", self.id.connector, self.id.task, exc)
            return
        for partition, offset in self.submitted.committable():
            self.writer.offset(partition, offset)
        if self.writer.begin_flush():
            try:
                self.writer.do_flush()  # cancels the flush itself on failure: the offsets stay staged
            except ConnectException as exc:
                log.error("task %s-%d: committing offsets failed, retrying at the next commit: %s",
                          self.id.connector, self.id.task, exc)
                return
        self.task.commit()


class ExactlyOnceWorkerSourceTask(AbstractWorkerSourceTask):
    """Runs one source task exactly once (worker ``exactly.once.source.support=enabled``; Kafka's
    ``ExactlyOnceWorkerSourceTask``): a transactional producer, transactions ended per
    ``transaction.boundary``, the offsets of each transaction's records written in it."""

    def __init__(self, task_id: ConnectorTaskId, task: Any, task_props: dict[str, str], cfg: ConnectorConfig,
                 worker_config: WorkerConfig, key_converter: Any, value_converter: Any, header_converter: Any,
                 transforms: TransformationChain, operator: RetryWithToleranceOperator,
                 offset_store: OffsetBackingStore, producer_conf: dict[str, Any], status_listener: Any,
                 target_state: TargetState, on_exit: Callable[[WorkerTask], None] | None = None) -> None:
        self.boundary: str = cfg.get("transaction.boundary")
        interval = cfg.get("transaction.boundary.interval.ms")
        self.txn_interval_s = (worker_config.offset_flush_interval_ms if interval is None else interval) / 1000
        self.transactional_id = (f"{worker_config.group_id or 'connect-standalone'}-"
                                 f"{task_id.connector}-{task_id.task}")
        self.txn_context = WorkerTransactionContext() if self.boundary == "connector" else None
        super().__init__(task_id, task, task_props, cfg, worker_config, key_converter, value_converter,
                         header_converter, transforms, operator, offset_store, producer_conf, status_listener,
                         target_state, on_exit)
        self.transaction_timeout_ms = int(self.producer_conf.get("transaction.timeout.ms",
                                                                 DEFAULT_TRANSACTION_TIMEOUT_MS))
        self._txn_open = False
        self._txn_offsets: dict[Any, tuple[Mapping[str, Any], Mapping[str, Any] | None]] = {}
        self._next_txn = 0.0

    def _configure_producer(self, conf: dict[str, Any]) -> dict[str, Any]:
        conf["transactional.id"] = self.transactional_id
        conf["enable.idempotence"] = True
        return conf

    def _transaction_context(self) -> WorkerTransactionContext | None:
        return self.txn_context

    def _init_producer(self) -> None:
        # Fences an earlier incarnation of this task. Retried within its bound: the coordinator
        # may be loading or away for a moment.
        self._transactional_call("init_transactions", self.producer.init_transactions)
        self._next_txn = time.monotonic() + self.txn_interval_s

    def _new_batch(self) -> SubmittedBatch:
        return SubmittedBatch()  # offsets follow the transactions; the batch only counts acks

    def _offset_done(self, record: SourceRecord, note: Callable[[SourceRecord], None]) -> None:
        # Records without a source partition or offset have nothing to commit (as in Kafka).
        if record.source_partition is not None and record.source_offset is not None:
            self._txn_offsets[_freeze_partition(record.source_partition)] = (
                record.source_partition, record.source_offset)

    def _before_record(self) -> None:
        if not self._txn_open:
            self.producer.begin_transaction()
            self._txn_open = True

    def _after_record(self, record: SourceRecord) -> None:
        txn = self.txn_context
        if txn is None:
            return
        rid = id(record)
        if rid in txn.abort_after:
            txn.abort_after.discard(rid)
            self._abort_transaction()
        elif rid in txn.commit_after:
            txn.commit_after.discard(rid)
            self._commit_transaction()

    def _after_poll(self, records: Sequence[SourceRecord] | None, now: float) -> None:
        boundary = self.boundary
        if self._txn_open and ((boundary == "poll" and records) or (boundary == "interval" and now >= self._next_txn)
                               or boundary == "connector"):
            self._end_batch(force=boundary != "connector")
        if now >= self._next_txn:
            self._next_txn = now + self.txn_interval_s

    def _end_batch(self, force: bool) -> None:
        if not self._txn_open:
            return
        txn = self.txn_context
        if txn is not None and txn.abort_requested:
            txn.abort_requested = False
            self._abort_transaction()
        elif force or (txn is not None and txn.commit_requested):
            if txn is not None:
                txn.commit_requested = False
            self._commit_transaction()

    def _final_commit(self) -> None:
        if self._txn_open:
            self._commit_transaction()

    def _after_task_stop(self) -> None:
        if self._txn_open:
            self._abort_transaction()

    def _transactional_call(self, name: str, call: Callable[[float], None]) -> None:
        """``call(timeout)`` (init/commit of a transaction), retried on retriable errors within
        ``transaction.timeout.ms``; past it the task fails naming the call and the bound.
        Abortable and fatal errors are raised as they come."""
        start = time.monotonic()
        deadline = start + self.transaction_timeout_ms / 1000
        while True:
            remaining = deadline - time.monotonic()
            try:
                call(max(remaining, 1.0))
                return
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                retriable = isinstance(err, KafkaError) and err.retriable() and not err.fatal() \
                    and not err.txn_requires_abort()
                if not retriable:
                    raise
                if time.monotonic() >= deadline or (self.stopping.is_set() and name != "commit_transaction"):
                    self._producer_unusable = True  # the call stays in flight inside librdkafka
                    raise ConnectException(
                        f"task {self.id.connector}-{self.id.task}: {name} did not complete within "
                        f"transaction.timeout.ms={self.transaction_timeout_ms}: {err}") from exc
                log.warning("task %s-%d: %s failed, retrying: %s", self.id.connector, self.id.task, name, err)
                self.producer.poll(0.1)

    def _commit_transaction(self) -> None:
        for partition, offset in self._txn_offsets.values():
            self.writer.offset(partition, offset)
        self._txn_offsets.clear()
        flushing = self.writer.begin_flush()
        in_txn = False
        try:
            self.operator.flush(self.worker_config.offset_flush_timeout_ms / 1000)
            if flushing:
                produce_in_txn = getattr(self.offset_store, "produce_in_transaction", None)
                if produce_in_txn is not None:
                    in_txn = bool(produce_in_txn(self.producer, self.writer.flushing()))
            self._transactional_call("commit_transaction", self.producer.commit_transaction)
            self._txn_open = False
        except BaseException as exc:
            if flushing:
                self.writer.cancel_flush()
            if not is_fenced(exc):
                self._abort_transaction()
                raise
            # A newer instance took the transactional.id over (zombie fencing, or this task was
            # restarted elsewhere): the broker aborted the open transaction, and aborting from a
            # fenced producer only fails again. Stopping, that is how a generation ends; running,
            # this instance must not go on.
            self._txn_open = False
            self._txn_offsets.clear()
            self._producer_unusable = True
            if self.stopping.is_set():
                log.info("task %s-%d was fenced by a newer instance of transactional.id %s while stopping; "
                         "its last transaction is aborted", self.id.connector, self.id.task, self.transactional_id)
                return
            raise ConnectException(f"task {self.id.connector}-{self.id.task} was fenced: a newer producer with "
                                   f"transactional.id {self.transactional_id} exists") from exc
        if flushing:
            if in_txn:
                self.writer.complete_flush()
            else:
                self.writer.do_flush()
        self.task.commit()

    def _abort_transaction(self) -> None:
        self._txn_offsets.clear()
        if self._txn_open:
            self._txn_open = False
            try:
                self.producer.abort_transaction(self.transaction_timeout_ms / 1000)
            except KafkaException as exc:
                self._producer_unusable = True  # e.g. a commit still in flight: close() must not wait on it
                log.error("task %s-%d: abort_transaction failed: %s", self.id.connector, self.id.task, exc)


def source_task_class(worker_config: WorkerConfig) -> type[AbstractWorkerSourceTask]:
    """The source task class the worker runs: exactly-once when the worker enables it."""
    return ExactlyOnceWorkerSourceTask if worker_config.exactly_once_enabled else WorkerSourceTask


__all__ = [
    "AbstractWorkerSourceTask",
    "ExactlyOnceWorkerSourceTask",
    "SubmittedBatch",
    "SubmittedRecords",
    "WorkerSourceTask",
    "WorkerSourceTaskContext",
    "WorkerTransactionContext",
    "is_fenced",
    "is_retriable",
    "source_task_class",
]
