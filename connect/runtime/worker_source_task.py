"""WorkerSourceTask: poll → transformations → converters → confluent-kafka producer.

Records pass the transformation chain (predicates, ``negate``), then the header, key and value
converters, all under the task's :class:`RetryWithToleranceOperator`: a failed record is
reported (log, DLQ) and, with ``errors.tolerance=all``, skipped.

Offsets (at-least-once, the default): the offsets of a poll's records become committable only
once the producer acknowledged all of them *and* every earlier poll's records
(:class:`SubmittedRecords`), so a crash never commits past an unwritten record. Committable
offsets are written to the offset store every ``offset.flush.interval.ms`` and on stop (after
the producer is flushed); then ``SourceTask.commit()`` is called.

Exactly-once (worker ``exactly.once.source.support=enabled``): a transactional producer
(``transactional.id`` = ``<group.id>-<connector>-<task>``, ``connect-standalone-...`` without a
group) writes each transaction's records; the transaction ends per ``transaction.boundary``
(``poll``: every non-empty poll; ``interval``: every ``transaction.boundary.interval.ms``;
``connector``: when the task's :class:`TransactionContext` asks). The offsets of every record
of the transaction are written in the same transaction when the offset store supports
``produce_in_transaction`` (the distributed offsets topic); otherwise (standalone's file) they are
written right after the commit — records are then exactly-once in Kafka, and a crash between
commit and file write re-sends at most that one transaction.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from typing import Any

from confluent_kafka import KafkaException, Producer

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
from strom.connect.runtime.worker import TransformationChain, WorkerTask

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


class WorkerSourceTask(WorkerTask):
    """Runs one source task (see the module doc)."""

    def __init__(self, task_id: ConnectorTaskId, task: Any, task_props: dict[str, str], cfg: ConnectorConfig,
                 worker_config: WorkerConfig, key_converter: Any, value_converter: Any, header_converter: Any,
                 transforms: TransformationChain, operator: RetryWithToleranceOperator,
                 offset_store: OffsetBackingStore, producer_conf: dict[str, Any], status_listener: Any,
                 target_state: TargetState, on_exit: Any = None) -> None:
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
        self.eos = worker_config.exactly_once_enabled
        self.boundary = cfg.get("transaction.boundary") if self.eos else "poll"
        interval = cfg.get("transaction.boundary.interval.ms")
        self.txn_interval_s = (worker_config.offset_flush_interval_ms if interval is None else interval) / 1000
        conf = dict(producer_conf)
        if self.eos:
            conf["transactional.id"] = (f"{worker_config.group_id or 'connect-standalone'}-"
                                        f"{task_id.connector}-{task_id.task}")
            conf["enable.idempotence"] = True
        self.producer_conf = conf
        self.producer: Any = None
        self.writer = OffsetStorageWriter(offset_store, task_id.connector)
        self.submitted = SubmittedRecords()
        self.txn_context = WorkerTransactionContext() if self.eos and self.boundary == "connector" else None
        self.context = WorkerSourceTaskContext(task_props, OffsetStorageReaderImpl(offset_store, task_id.connector),
                                               self.txn_context)
        self.pctx = ProcessingContext(task_id.connector, task_id.task)
        self._key_from = key_converter.from_connect_data
        self._value_from = value_converter.from_connect_data
        # Optional batch form of the converters (``from_connect_data_batch(topic, schemas,
        # values)``): one call per poll instead of two per record.
        self._key_batch = getattr(key_converter, "from_connect_data_batch", None)
        self._value_batch = getattr(value_converter, "from_connect_data_batch", None)
        self._delivery_error: Exception | None = None
        self._txn_open = False
        self._txn_offsets: dict[Any, tuple[Mapping[str, Any], Mapping[str, Any] | None]] = {}
        self._task_started = False
        # commit_record is per-record work: call it only for tasks that override it.
        base = getattr(type(task), "__mro__", ())
        self._wants_commit_record = any("commit_record" in vars(c) for c in base[:-1]
                                        if c.__module__ != "strom.connect.api.task")
        self.records_sent = 0

    # -- loop ---------------------------------------------------------------------------

    def execute(self) -> None:
        self.producer = Producer(self.producer_conf)
        if self.eos:
            self.producer.init_transactions(60)  # fences an earlier incarnation of this task
        self.task.initialize(self.context)
        self.task.start(self.task_props)
        self._task_started = True
        from strom.connect.runtime.worker import _notify

        _notify(self.status_listener, "on_startup", self.id)
        flush_s = self.worker_config.offset_flush_interval_ms / 1000
        next_flush = time.monotonic() + flush_s
        next_txn = time.monotonic() + self.txn_interval_s
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
                self._send(records)
            producer_poll(0)
            if self._delivery_error is not None:
                raise ConnectException(f"producing failed: {self._delivery_error}") from self._delivery_error
            now = time.monotonic()
            if self.eos:
                if self._txn_open and (
                        (self.boundary == "poll" and records)
                        or (self.boundary == "interval" and now >= next_txn)
                        or self.boundary == "connector"):
                    self._end_batch(force=self.boundary != "connector")
                if now >= next_txn:
                    next_txn = now + self.txn_interval_s
            elif now >= next_flush:
                self.commit_offsets()
                next_flush = now + flush_s

    def _send(self, records: Sequence[SourceRecord]) -> None:
        if not self.eos and not self._wants_commit_record and self._send_fast(records):
            return
        pctx = self.pctx
        operator = self.operator
        produce = self.producer.produce
        convert = self._convert
        eos = self.eos
        txn = self.txn_context
        # Under EOS offsets follow the transactions; the batch only counts acks.
        batch = SubmittedBatch() if eos else self.submitted.new_batch()
        note = batch.note
        callback = self._batch_callback(batch)
        per_record = self._wants_commit_record
        for record in records:
            if eos and not self._txn_open:
                self.producer.begin_transaction()
                self._txn_open = True
            try:
                out = convert(record)
            except Exception as exc:
                pctx.source_record = record  # the context is filled only on failure (per-record loop)
                try:
                    out = operator.recover(lambda r=record: convert(r), pctx, exc)
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
                while True:
                    try:
                        produce(topic, value, key, partition, callback, None, ts, headers)  # see _send_fast
                        break
                    except BufferError:  # local queue full: serve delivery reports, then retry
                        self.producer.poll(0.1)
                        if self.stopping.is_set() and not eos:
                            self.producer.poll(0)
                    except KafkaException as exc:
                        if not self.cfg.tolerance_all:
                            raise ConnectException(f"producing to {topic} failed: {exc}") from exc
                        pctx.stage = Stage.KAFKA_PRODUCE
                        pctx.executing_class = None
                        pctx.source_record = record
                        operator.report(pctx, exc)
                        batch.pending -= 1
                        self._record_done(record, note)
                        break
                if eos:
                    self._txn_offset(record)
                else:
                    note(record)
                self.records_sent += 1
            if txn is not None:
                rid = id(record)
                if rid in txn.abort_after:
                    txn.abort_after.discard(rid)
                    self._abort_transaction()
                elif rid in txn.commit_after:
                    txn.commit_after.discard(rid)
                    self._commit_transaction()
        pctx.source_record = None

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
        batch = self._produce_converted(topic, keys, values, repeat(records.kafka_partition, n),
                                        repeat(records.timestamp, n), records)
        partition, offset = records.source_partition, records.last_source_offset()
        if partition is not None and offset is not None:
            batch.offsets[id(partition)] = (partition, offset)
        return True

    def _produce_converted(self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes | None],
                           partitions: Iterable[int | None], stamps: Iterable[int | None],
                           records: Sequence[SourceRecord]) -> SubmittedBatch:
        """Produce converted keys and values as one acknowledgement batch (``records[i]`` is
        looked at only to report a record that could not be produced)."""
        self.active_topics.add(topic)
        batch = self.submitted.new_batch()
        callback = self._batch_callback(batch)
        produce = self.producer.produce
        batch.pending += len(values)
        sent = 0
        for i, (key, value, partition, ts) in enumerate(zip(keys, values, partitions, stamps, strict=True)):
            while True:
                try:
                    # Positional (topic, value, key, partition, callback, on_delivery, timestamp):
                    # confluent-kafka parses keyword arguments at twice the cost per call.
                    produce(topic, value, key, -1 if partition is None else partition, callback, None,
                            0 if ts is None or ts < 0 else ts)
                    sent += 1
                    break
                except BufferError:  # local queue full: serve delivery reports, then retry
                    self.producer.poll(0.1)
                except KafkaException as exc:
                    if not self.cfg.tolerance_all:
                        raise ConnectException(f"producing to {topic} failed: {exc}") from exc
                    pctx = self.pctx
                    pctx.stage = Stage.KAFKA_PRODUCE
                    pctx.executing_class = None
                    pctx.source_record = records[i]
                    self.operator.report(pctx, exc)
                    pctx.source_record = None
                    batch.pending -= 1
                    break
        self.records_sent += sent
        return batch

    def _record_done(self, record: SourceRecord, note: Any) -> None:
        if self._wants_commit_record:
            self.task.commit_record(record, None)
        if self.eos:
            self._txn_offset(record)
        else:
            note(record)

    def _txn_offset(self, record: SourceRecord) -> None:
        # Records without a source partition or offset have nothing to commit (as in Kafka).
        if record.source_partition is not None and record.source_offset is not None:
            self._txn_offsets[_freeze_partition(record.source_partition)] = (
                record.source_partition, record.source_offset)

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
        if self.cfg.tolerance_all and not self.eos:
            # Tolerated: report the record as it was produced (converted bytes), then let it pass.
            ts_type, ts = msg.timestamp()
            raw = RawRecord(msg.topic(), msg.partition() if msg.partition() is not None else -1, -1,
                            ts if ts_type else None, msg.key(), msg.value(), msg.headers())
            self.operator.report(ProcessingContext(self.id.connector, self.id.task, Stage.KAFKA_PRODUCE,
                                                   consumer_record=raw), exc)
            batch.pending -= 1
        elif self._delivery_error is None:
            self._delivery_error = exc  # the batch stays unacknowledged: its offsets never commit

    def _batch_callback(self, batch: SubmittedBatch) -> Any:
        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                batch.pending -= 1
            else:
                self._delivery_failed(batch, err, msg)

        return on_delivery

    def _record_callback(self, batch: SubmittedBatch, record: SourceRecord) -> Any:
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

    # -- offsets / transactions ------------------------------------------------------------

    def _end_batch(self, force: bool) -> None:
        if self.eos:
            if self._txn_open:
                txn = self.txn_context
                if txn is not None and txn.abort_requested:
                    txn.abort_requested = False
                    self._abort_transaction()
                elif force or (txn is not None and txn.commit_requested):
                    if txn is not None:
                        txn.commit_requested = False
                    self._commit_transaction()
        else:
            self.commit_offsets()

    def commit_offsets(self, flush_timeout: float | None = None) -> None:
        """At-least-once: write the offsets of acknowledged records, then ``task.commit()``."""
        if flush_timeout is not None:
            remaining = self.producer.flush(flush_timeout)
            if remaining:
                log.warning("task %s-%d: %d records unacknowledged at commit; their offsets wait",
                            self.id.connector, self.id.task, remaining)
        else:
            self.producer.poll(0)
        if self._delivery_error is not None:
            raise ConnectException(f"producing failed: {self._delivery_error}") from self._delivery_error
        self.operator.flush(self.worker_config.offset_flush_timeout_ms / 1000)  # DLQ before offsets
        for partition, offset in self.submitted.committable():
            self.writer.offset(partition, offset)
        if self.writer.begin_flush():
            self.writer.do_flush()
        self.task.commit()

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
            self.producer.commit_transaction(60)
            self._txn_open = False
        except BaseException:
            if flushing:
                self.writer.cancel_flush()
            self._abort_transaction()
            raise
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
                self.producer.abort_transaction(30)
            except KafkaException as exc:
                log.error("task %s-%d: abort_transaction failed: %s", self.id.connector, self.id.task, exc)

    def close(self) -> None:
        try:
            if self.producer is not None and self.failure is None:
                timeout = self.worker_config.offset_flush_timeout_ms / 1000
                if self.eos:
                    if self._txn_open:
                        self._commit_transaction()
                else:
                    self.commit_offsets(flush_timeout=timeout)
        finally:
            try:
                if self._task_started:
                    self.task.stop()
            finally:
                if self.eos and self._txn_open:
                    self._abort_transaction()
                self.transforms.close()
                self.operator.close()
                if self.producer is not None:
                    self.producer.flush(1)
                    close = getattr(self.producer, "close", None)
                    if close is not None:
                        close()
