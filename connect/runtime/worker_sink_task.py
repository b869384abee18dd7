"""WorkerSinkTask: confluent-kafka consumer → converters → transformations → ``SinkTask.put``.

The consumer is in group ``connect-<connector>`` and subscribes to ``topics`` or
``topics.regex``; rebalances call ``SinkTask.open`` / ``close`` (offsets of revoked partitions are
committed first, as in Kafka). Records that fail conversion or transformation go through the
task's :class:`RetryWithToleranceOperator` (log, DLQ with the original bytes and headers).

Offsets are committed only after ``pre_commit`` (by default ``flush``) succeeded for them, every
``offset.flush.interval.ms``, on ``request_commit()``, on revocation and on stop; DLQ records
are flushed before. A commit that fails (the coordinator away: librdkafka gives up after
``socket.timeout.ms``) is logged and retried at the next commit; reading the committed offsets
of newly assigned partitions is retried for ``default.api.timeout.ms``, then the task fails. If ``pre_commit`` fails, the consumer is rewound to the last committed
offsets, so the records are delivered again (at-least-once). A ``RetriableException`` from
``put`` pauses the partitions and retries the same batch after ``context.timeout(ms)``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future
from functools import partial
from typing import Any

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KTopicPartition

from strom.connect.api.batches import SinkRecordBatch
from strom.connect.api.records import CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE, Headers, SinkRecord
from strom.connect.api.records import TopicPartition as TP
from strom.connect.api.task import ErrantRecordReporter, SinkTaskContext
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
from strom.connect.runtime.worker import TransformationChain, WorkerTask, _notify

log = logging.getLogger("strom.connect.sink")

_TS_TYPES = {0: NO_TIMESTAMP_TYPE, 1: CREATE_TIME, 2: LOG_APPEND_TIME}
JAVA_ONLY_CONSUMER_KEYS = ("max.poll.records", "key.deserializer", "value.deserializer")
FETCH_QUEUE_BACKOFF_MS = 1
DEFAULT_API_TIMEOUT_MS = 60000  # Kafka's consumer default.api.timeout.ms


class WorkerErrantRecordReporter(ErrantRecordReporter):
    """``SinkTaskContext.errant_record_reporter()``: report a record the task could not handle."""

    def __init__(self, sink: WorkerSinkTask) -> None:
        self._sink = sink

    def report(self, record: SinkRecord, error: BaseException) -> Future[None]:
        done: Future[None] = Future()
        sink = self._sink
        raw = sink.raw_by_position.get((record.original_topic, record.original_kafka_partition,
                                        record.original_kafka_offset))
        ctx = ProcessingContext(sink.id.connector, sink.id.task, Stage.TASK_PUT, executing_class=sink.task,
                                consumer_message=raw)
        if raw is None:  # not in the current batch: re-serialize the record, as Kafka's reporter does
            ctx.consumer_record = sink.to_raw(record)
        try:
            sink.operator.execute_failed(ctx, error)
        except BaseException as exc:  # errors.tolerance=none: the task fails with it
            done.set_exception(exc)
            raise
        # DLQ records are flushed before the offsets are committed; the report is done now.
        done.set_result(None)
        return done


class WorkerSinkTaskContext(SinkTaskContext):
    """What a sink task sees of the worker (``SinkTaskContext``)."""

    def __init__(self, sink: WorkerSinkTask, props: dict[str, str]) -> None:
        self._sink = sink
        self._props = props
        self.offsets_requested: dict[TP, int] = {}
        self.timeout_ms = 0
        self.commit_requested = False
        self._reporter = WorkerErrantRecordReporter(sink)

    def configs(self) -> dict[str, str]:
        return self._props

    def offset(self, tp_or_map: Any, offset: int | None = None) -> None:
        if isinstance(tp_or_map, dict):
            self.offsets_requested.update({TP(*tp): int(o) for tp, o in tp_or_map.items()})
        else:
            assert offset is not None
            self.offsets_requested[TP(*tp_or_map)] = int(offset)

    def timeout(self, ms: int) -> None:
        self.timeout_ms = int(ms)

    def assignment(self) -> set[TP]:
        return set(self._sink.assigned)

    def pause(self, *partitions: TP) -> None:
        self._sink.task_paused.update(TP(*p) for p in partitions)
        self._sink.consumer.pause([KTopicPartition(p[0], p[1]) for p in partitions])

    def resume(self, *partitions: TP) -> None:
        self._sink.task_paused.difference_update(TP(*p) for p in partitions)
        if not self._sink.paused:
            self._sink.consumer.resume([KTopicPartition(p[0], p[1]) for p in partitions])

    def request_commit(self) -> None:
        self.commit_requested = True

    def errant_record_reporter(self) -> WorkerErrantRecordReporter | None:
        # As Kafka: only when errors are reported somewhere (a DLQ topic or the error log).
        if not self._sink.operator.reporters:
            return None
        self._sink.track_raw = True  # keep the consumed bytes so a reported record can go to the DLQ
        return self._reporter


class WorkerSinkTask(WorkerTask):
    """Runs one sink task (see the module doc)."""

    def __init__(self, task_id: ConnectorTaskId, task: Any, task_props: dict[str, str], cfg: ConnectorConfig,
                 worker_config: WorkerConfig, key_converter: Any, value_converter: Any, header_converter: Any,
                 transforms: TransformationChain, operator: RetryWithToleranceOperator,
                 consumer_conf: dict[str, Any], status_listener: Any, target_state: TargetState,
                 on_exit: Any = None) -> None:
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
        conf = dict(consumer_conf)
        self.batch_size = int(conf.pop("max.poll.records", 500))
        # Kafka's bound of a blocking consumer call (librdkafka has no such key: the worker keeps it).
        self.api_timeout_ms = int(conf.pop("default.api.timeout.ms", DEFAULT_API_TIMEOUT_MS))
        for key in JAVA_ONLY_CONSUMER_KEYS:
            conf.pop(key, None)
        # librdkafka stops fetching for fetch.queue.backoff.ms (default 1 s) whenever its local
        # queue is over queued.min.messages; a consumer doing per-record work (as a sink does)
        # then stalls a second at a time: measured 100k records/s with the default, 430k with 1 ms.
        # Java's consumer has no such pause; an explicit consumer setting still wins.
        conf.setdefault("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS)
        self.consumer_conf = conf
        self.consumer: Any = None
        self.context = WorkerSinkTaskContext(self, task_props)
        self.pctx = ProcessingContext(task_id.connector, task_id.task)
        self._key_to = key_converter.to_connect_data
        self._value_to = value_converter.to_connect_data
        # Optional batch form of the converters (``to_connect_data_batch(topic, values) ->
        # (schema, values)``): one call per consumed batch instead of two per record.
        self._key_batch = getattr(key_converter, "to_connect_data_batch", None)
        self._value_batch = getattr(value_converter, "to_connect_data_batch", None)
        self.assigned: set[TP] = set()
        self.task_paused: set[TP] = set()
        self.current_offsets: dict[TP, int] = {}
        self.last_committed: dict[TP, int] = {}
        self.raw_by_position: dict[tuple[str, int | None, int], Any] = {}
        self.track_raw = False
        self._pending: tuple[Sequence[SinkRecord], dict[TP, int]] | None = None
        self._task_started = False
        self._task_stopped = False
        self._consumer_paused = False
        self.records_put = 0
        self.commits = 0
        # Kafka's sink-task-metrics (strom.connect.runtime.metrics): counted per batch.
        self.records_read = 0
        self.put_batches = 0
        self.put_time_ms_total = 0.0
        self.put_time_ms_max = 0.0

    # -- loop -----------------------------------------------------------------------------

    def execute(self) -> None:
        self.consumer = Consumer(self.consumer_conf)
        self.task.initialize(self.context)
        self.task.start(self.task_props)
        self._task_started = True
        topics = self.task_props.get("topics") or self.cfg.originals.get("topics") or ""
        regex = self.task_props.get("topics.regex") or self.cfg.originals.get("topics.regex") or ""
        if regex:
            # librdkafka treats a subscription starting with ^ as a regex; Kafka's is a full match.
            pattern = regex if regex.startswith("^") else "^" + regex
            sub = [pattern if pattern.endswith("$") else pattern + "$"]
        else:
            sub = [t.strip() for t in topics.split(",") if t.strip()]
        self.consumer.subscribe(sub, on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_lost)
        _notify(self.status_listener, "on_startup", self.id)
        flush_s = self.worker_config.offset_flush_interval_ms / 1000
        next_commit = time.monotonic() + flush_s
        while not self.stopping.is_set():
            if self.paused:
                self._pause_consumer(True)
                if not self.wait_while_paused():
                    break
                self._pause_consumer(False)
                continue
            self._iteration()
            now = time.monotonic()
            if now >= next_commit or self.context.commit_requested:
                self.context.commit_requested = False
                self.commit_offsets()
                next_commit = now + flush_s

    def while_paused(self) -> None:
        # Keep polling: the group would otherwise evict this member after max.poll.interval.ms.
        msgs = self.consumer.consume(self.batch_size, 0.1)
        if msgs:  # paused partitions return nothing; anything else would be a bug to surface
            log.warning("task %s-%d received %d records while paused", self.id.connector, self.id.task, len(msgs))

    def _pause_consumer(self, pause: bool) -> None:
        if pause == self._consumer_paused:
            return
        self._consumer_paused = pause
        parts = [KTopicPartition(tp.topic, tp.partition) for tp in self.assigned
                 if pause or tp not in self.task_paused]
        if parts:
            (self.consumer.pause if pause else self.consumer.resume)(parts)

    def _iteration(self) -> None:
        if self._pending is not None:  # a retriable put failure: wait, then deliver the same batch
            wait = self.context.timeout_ms / 1000
            self.consumer.consume(self.batch_size, max(wait, 0.0) or 0.1)
            self._deliver(*self._pending)
            return
        msgs = self.consumer.consume(self.batch_size, 0.5)
        if not msgs:
            return
        # Records only: consume() also returns error events (a subscribed topic that does not
        # exist yet, partition EOF), which Kafka's sink-record-read-total does not count.
        # (filter(None, ...) rather than .count(None): KafkaError's == raises on None.)
        self.records_read += len(msgs) - sum(1 for _ in filter(None, map(Message.error, msgs)))
        self._deliver(*self._convert_messages(msgs))

    def _convert_fast(self, msgs: list[Any]) -> tuple[Sequence[SinkRecord], dict[TP, int]] | None:
        """The common case in one pass per batch: no errors, no headers, one topic, no
        transformations, batch-capable converters. ``None`` when the batch does not qualify or a
        converter fails; the per-record path then handles (and reports) it.

        The message accessors run through ``map`` over the unbound methods, in C, and the result
        is a :class:`SinkRecordBatch`: no Python-level work per record unless the task iterates."""
        key_batch, value_batch = self._key_batch, self._value_batch
        if self.transforms or self.track_raw or key_batch is None or value_batch is None:
            return None
        if any(map(Message.error, msgs)) or any(map(Message.headers, msgs)):
            return None
        topics = set(map(Message.topic, msgs))
        if len(topics) != 1:
            return None
        topic = topics.pop()
        if topic is None:
            return None
        try:
            key_schema, keys = key_batch(topic, list(map(Message.key, msgs)))
            value_schema, values = value_batch(topic, list(map(Message.value, msgs)))
        except Exception:
            return None
        parts: list[int] = list(map(Message.partition, msgs))  # type: ignore[arg-type]  # consumed: never None
        offsets: list[int] = list(map(Message.offset, msgs))  # type: ignore[arg-type]  # consumed: never None
        # The records themselves are built only if the task asks for them (see SinkRecordBatch).
        records = SinkRecordBatch(topic, parts, offsets, key_schema, keys, value_schema, values,
                                  list(map(Message.timestamp, msgs)))
        # A partition's messages come in offset order: the last one per partition wins.
        return records, {TP(topic, part): off + 1 for part, off in dict(zip(parts, offsets, strict=True)).items()}

    def _convert_messages(self, msgs: list[Any]) -> tuple[Sequence[SinkRecord], dict[TP, int]]:
        fast = self._convert_fast(msgs)
        if fast is not None:
            return fast
        records: list[SinkRecord] = []
        pctx = self.pctx
        operator = self.operator
        convert = self._convert
        raw = self.raw_by_position
        raw.clear()
        track_raw = self.track_raw
        ends: dict[tuple[str, int], int] = {}
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                if err.fatal():
                    raise KafkaException(err)
                log.warning("task %s-%d consumer error: %s", self.id.connector, self.id.task, err)
                continue
            topic, part, off = msg.topic(), msg.partition(), msg.offset()
            if track_raw:
                raw[(topic, part, off)] = msg
            # Skipped and filtered records have nothing to put, but their offsets move on with the batch.
            ends[(topic, part)] = off + 1
            try:
                record = convert(msg, topic, part, off)
            except Exception as exc:
                # The context is filled only on failure: this loop runs once per record.
                pctx.consumer_message = msg
                pctx.consumer_record = None
                try:
                    record = operator.recover(partial(convert, msg, topic, part, off), pctx, exc)
                except Tolerated:
                    record = None
                pctx.consumer_message = None
            if record is not None:
                records.append(record)
        batch_end = {TP(t, p): o for (t, p), o in ends.items()}
        return records, batch_end

    def _convert(self, msg: Any, topic: str, partition: int, offset: int) -> SinkRecord | None:
        # The stage is tracked in a local and copied to the processing context only on failure.
        stage = Stage.KEY_CONVERTER
        try:
            key = self._key_to(topic, msg.key())
            stage = Stage.VALUE_CONVERTER
            value = self._value_to(topic, msg.value())
            raw_headers = msg.headers()
            headers = None  # the record creates its (empty) Headers only when asked for them
            if raw_headers:
                stage = Stage.HEADER_CONVERTER
                hc = self.header_converter.to_connect_header
                headers = Headers()
                for hk, hv in raw_headers:
                    headers.add(hk, hc(topic, hk, hv))
            ts_type, ts = msg.timestamp()
            record: SinkRecord | None = SinkRecord(
                topic, partition, key.schema, key.value, value.schema, value.value, offset,
                ts if ts_type else None, _TS_TYPES.get(ts_type, NO_TIMESTAMP_TYPE), headers)
            if self.transforms:
                stage = Stage.TRANSFORMATION
                record = self.transforms.apply(record, self.pctx)
        except Exception:
            pctx = self.pctx
            pctx.stage = stage
            if stage is not Stage.TRANSFORMATION:  # the chain names the failing transformation itself
                pctx.executing_class = {Stage.HEADER_CONVERTER: self.header_converter,
                                        Stage.KEY_CONVERTER: self.key_converter,
                                        Stage.VALUE_CONVERTER: self.value_converter}[stage]
            raise
        return record

    def to_raw(self, record: SinkRecord) -> RawRecord:
        topic = record.original_topic
        hc = self.header_converter.from_connect_header
        headers = [(h.key, hc(topic, h.key, h.schema, h.value)) for h in record.headers] or None
        return RawRecord(topic, record.original_kafka_partition or 0, record.original_kafka_offset,
                         record.timestamp,
                         self.key_converter.from_connect_data(topic, record.key_schema, record.key),
                         self.value_converter.from_connect_data(topic, record.value_schema, record.value),
                         headers)

    def _deliver(self, records: Sequence[SinkRecord], batch_end: dict[TP, int]) -> None:
        if records:
            started = time.perf_counter()
            try:
                self.task.put(records)
            except RetriableException as exc:
                log.warning("task %s-%d: put failed, retrying the batch: %s", self.id.connector, self.id.task, exc)
                if self._pending is None:
                    self._pending = (records, batch_end)
                    self._pause_for_retry(True)
                return
            except Exception as exc:
                raise ConnectException(f"Exiting WorkerSinkTask due to unrecoverable exception: {exc}") from exc
            self.records_put += len(records)
            put_ms = (time.perf_counter() - started) * 1000
            self.put_batches += 1
            self.put_time_ms_total += put_ms
            self.put_time_ms_max = max(self.put_time_ms_max, put_ms)
        if self._pending is not None:
            self._pending = None
            self._pause_for_retry(False)
        offsets = self.current_offsets
        for tp, end in batch_end.items():
            if tp in self.assigned:  # a partition revoked meanwhile is no longer ours to commit
                offsets[tp] = end
        if self.context.offsets_requested:  # SinkTaskContext.offset() called during put
            self._apply_requested_offsets()

    def _apply_requested_offsets(self) -> None:
        requested, self.context.offsets_requested = self.context.offsets_requested, {}
        for tp, offset in requested.items():
            if tp not in self.assigned:
                continue
            try:
                self.consumer.seek(KTopicPartition(tp.topic, tp.partition, offset))
            except KafkaException as exc:
                log.error("task %s-%d: seek of %s to %d failed: %s", self.id.connector, self.id.task, tp, offset, exc)
                continue
            self.current_offsets[tp] = offset

    def _pause_for_retry(self, pause: bool) -> None:
        parts = [KTopicPartition(tp.topic, tp.partition) for tp in self.assigned if tp not in self.task_paused]
        if parts and not self._consumer_paused:
            (self.consumer.pause if pause else self.consumer.resume)(parts)

    # -- offsets ------------------------------------------------------------------------

    def commit_offsets(self, partitions: set[TP] | None = None) -> None:
        """``pre_commit`` (flush) then a synchronous consumer commit of what it returned."""
        current = {tp: o for tp, o in self.current_offsets.items()
                   if tp in self.assigned and (partitions is None or tp in partitions)}
        if not current:
            return
        try:
            committable = self.task.pre_commit(dict(current))
            self.operator.flush(self.worker_config.offset_flush_timeout_ms / 1000)
        except Exception as exc:
            log.error("task %s-%d: offset commit failed (pre_commit/flush threw), rewinding to the last "
                      "committed offsets: %s", self.id.connector, self.id.task, exc)
            self._rewind(set(current))
            return
        to_commit = [KTopicPartition(tp[0], tp[1], int(o)) for tp, o in (committable or {}).items()
                     if TP(*tp) in self.assigned and self.last_committed.get(TP(*tp)) != o]
        if not to_commit:
            return
        try:
            self.consumer.commit(offsets=to_commit, asynchronous=False)
        except KafkaException as exc:
            log.error("task %s-%d: commit of offsets failed: %s", self.id.connector, self.id.task, exc)
            return
        for tp in to_commit:
            self.last_committed[TP(tp.topic, tp.partition)] = tp.offset
        self.commits += 1

    def _rewind(self, partitions: set[TP]) -> None:
        for tp in partitions:
            offset = self.last_committed.get(tp)
            if offset is None:
                continue
            self.current_offsets[tp] = offset
            try:
                self.consumer.seek(KTopicPartition(tp.topic, tp.partition, offset))
            except KafkaException as exc:
                log.error("task %s-%d: rewind of %s failed: %s", self.id.connector, self.id.task, tp, exc)
        self._pending = None

    # -- rebalance callbacks (run inside consumer.consume on this thread) --------------------

    def _committed(self, consumer: Any, partitions: list[Any]) -> list[Any]:
        """The group's committed offsets of ``partitions``. The coordinator being away or moved is
        retried for ``default.api.timeout.ms``; past it the task fails naming the bound."""
        deadline = time.monotonic() + self.api_timeout_ms / 1000
        while True:
            remaining = deadline - time.monotonic()
            try:
                return list(consumer.committed(partitions, timeout=max(remaining, 1.0)))
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                transient = isinstance(err, KafkaError) and (err.retriable() or err.code() in (
                    KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._WAIT_COORD,
                    KafkaError._ALL_BROKERS_DOWN, KafkaError.NOT_COORDINATOR,
                    KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.COORDINATOR_LOAD_IN_PROGRESS))
                if not transient:
                    raise
                if time.monotonic() >= deadline or self.stopping.is_set():
                    raise ConnectException(
                        f"task {self.id.connector}-{self.id.task}: the committed offsets of {len(partitions)} "
                        f"assigned partitions could not be read within default.api.timeout.ms="
                        f"{self.api_timeout_ms}: {err}") from exc
                log.warning("task %s-%d: reading committed offsets failed, retrying: %s",
                            self.id.connector, self.id.task, err)

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        tps = [TP(p.topic, p.partition) for p in partitions]
        committed = self._committed(consumer, partitions)
        for p in committed:
            if p.offset != OFFSET_INVALID and p.offset >= 0:
                self.last_committed[TP(p.topic, p.partition)] = p.offset
                self.current_offsets[TP(p.topic, p.partition)] = p.offset
        self.assigned.update(tps)
        self.active_topics.update(tp.topic for tp in tps)
        self.context.offsets_requested.clear()
        self.task.open(tps)
        if self.context.offsets_requested:  # the task asked for its own starting offsets
            for p in partitions:
                req = self.context.offsets_requested.get(TP(p.topic, p.partition))
                if req is not None:
                    p.offset = req
                    self.current_offsets[TP(p.topic, p.partition)] = req
            self.context.offsets_requested.clear()
            consumer.assign(partitions)
        if self._consumer_paused or self.paused:
            consumer.pause(partitions)
            self._consumer_paused = True

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        tps = {TP(p.topic, p.partition) for p in partitions}
        try:
            if self._pending is None:
                self.commit_offsets(tps)
        finally:
            self._close_partitions(tps)

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        self._close_partitions({TP(p.topic, p.partition) for p in partitions})

    def _close_partitions(self, tps: set[TP]) -> None:
        tps = tps & self.assigned
        try:
            if self._task_started and not self._task_stopped and tps:
                self.task.close(sorted(tps))
        finally:
            self.assigned.difference_update(tps)
            self.task_paused.difference_update(tps)
            for tp in tps:
                self.current_offsets.pop(tp, None)
                self.last_committed.pop(tp, None)
            self._pending = None

    def close(self) -> None:
        try:
            if self.consumer is not None and self.failure is None and self._pending is None:
                self.commit_offsets()
        finally:
            try:
                if self._task_started and self.assigned:
                    self._close_partitions(set(self.assigned))
            finally:
                try:
                    if self._task_started:
                        self._task_stopped = True
                        self.task.stop()
                finally:
                    self.transforms.close()
                    self.operator.close()
                    if self.consumer is not None:
                        self.consumer.close()

