"""``MirrorSourceConnector`` and ``MirrorSourceTask`` (Kafka's): replicate topics of the source
cluster into the target cluster the worker produces to.

The connector discovers the source's topic partitions (topics / topics.exclude, never internal
topics nor topics that came from the target: cycles), creates the remote topics on the target
(``<source>.<topic>`` by the replication policy) with the source's partition count and synced
configs, and hands the partitions to its tasks round robin. A background thread re-discovers
every ``refresh.topics.interval.seconds`` (new topics, added partitions: task reconfiguration)
and re-syncs configs every ``sync.topic.configs.interval.seconds``.

A task consumes its partitions (assign, no group; its position is the Connect source offset
``{"offset": n}`` of the partition ``{"cluster", "topic", "partition"}``) and returns each
record to the same partition of the remote topic, key, value, headers and timestamp
unchanged: a poll's records of one partition go as one SourceRecordBatch (columns the worker
produces from, acknowledged once through ``commit_record_batch``), or as SourceRecords when one
has headers (acknowledged through ``commit_record``); 100 B records measured 81k -> 172k
records/s (bench/mirror.py, 200,000 records). From the producer's acknowledgements it writes offset syncs (Kafka's
``OffsetSyncWriter``): one at the first record of a partition, whenever offsets stop being
contiguous upstream or go backwards downstream, and at least every ``offset.lag.max``
downstream records; the latest record's sync is written at each offset commit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as KTopicPartition

from strom.connect.api.batches import SourceRecordBatch
from strom.connect.api.config import ConfigDef
from strom.connect.api.connector import ExactlyOnceSupport, SourceConnector
from strom.connect.api.records import Header, Headers, RecordMetadata, SourceRecord
from strom.connect.api.task import SourceTask, Task
from strom.connect.data import Schema
from strom.connect.exceptions import ConnectException
from strom.connect.mirror import clients
from strom.connect.mirror.clients import MirrorCallAbandoned, MirrorRetriableError
from strom.connect.mirror.config import (
    SOURCE_CONFIG_DEF,
    TASK_TOPIC_PARTITIONS,
    MirrorSourceConfig,
    decode_topic_partition,
    encode_topic_partition,
)
from strom.connect.mirror.offsets import validate_offsets
from strom.connect.mirror.records import OffsetSync

log = logging.getLogger(__name__)

SOURCE_FETCH_BYTES = 16 * 1024 * 1024
RETRY_BACKOFF_S = 5.0  # between attempts of a discovery or config sync that failed retriably
# Kafka's Worker.CONNECTOR_GRACEFUL_SHUTDOWN_TIMEOUT_MS: how long stop() waits for the
# background thread (its client waits look at the stop event every clients.STOP_CHECK_S).
# A stopping task's last offset syncs: a reachable cluster takes them in milliseconds, and an
# unreachable one never will, so the flush is short and must leave the task room within
# task.shutdown.graceful.timeout.ms (5 s by default, shared by every task of the worker).
OFFSET_SYNCS_CLOSE_TIMEOUT_S = 1.0
PARTITION_CLUSTER = "cluster"
PARTITION_TOPIC = "topic"
PARTITION_PARTITION = "partition"
OFFSET_KEY = "offset"


def wrap_partition(topic: str, partition: int, source_cluster_alias: str) -> dict[str, Any]:
    """Kafka's ``MirrorUtils.wrapPartition``: the Connect source partition of a topic partition."""
    return {PARTITION_CLUSTER: source_cluster_alias, PARTITION_TOPIC: topic, PARTITION_PARTITION: partition}


def is_cycle(config: MirrorSourceConfig, topic: str) -> bool:
    """Whether ``topic`` came (directly or through other clusters) from the target cluster."""
    policy = config.replication_policy
    source = policy.topic_source(topic)
    if source is None:
        return False
    if source == config.target_cluster_alias:
        return True
    upstream = policy.upstream_topic(topic)
    if upstream is None or upstream == topic:
        return False  # IdentityReplicationPolicy: cannot tell from the name
    return is_cycle(config, upstream)


def should_replicate_topic(config: MirrorSourceConfig, topic: str) -> bool:
    """Kafka's rule: (included, or a heartbeats topic) and not internal and not a cycle."""
    policy = config.replication_policy
    return ((config.topic_filter.should_replicate_topic(topic) or policy.is_heartbeats_topic(topic))
            and not policy.is_internal_topic(topic) and not is_cycle(config, topic))


class MirrorSourceConnector(SourceConnector):
    """Replicates a set of topics from the source cluster to the target."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.mirror.MirrorSourceConnector"

    def __init__(self) -> None:
        self.cfg: MirrorSourceConfig | None = None
        self.known: dict[str, int] = {}  # source topic -> partition count
        self._background_thread = clients.BackgroundThread()
        self._stop = self._background_thread.stopping
        self._lock = threading.Lock()

    def config(self) -> ConfigDef:
        return SOURCE_CONFIG_DEF

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """Supported when the source consumer reads committed records only (Kafka's rule)."""
        level = (props.get("source.consumer.isolation.level") or props.get("consumer.isolation.level")
                 or props.get("source.cluster.isolation.level") or "read_uncommitted")
        return ExactlyOnceSupport.SUPPORTED if level == "read_committed" else ExactlyOnceSupport.UNSUPPORTED

    def task_class(self) -> type[Task]:
        return MirrorSourceTask

    def alter_offsets(self, props: Mapping[str, str],
                      offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> bool:
        """Kafka's: partitions ``{"cluster", "topic", "partition"}``, offsets ``{"offset": n}``."""
        return validate_offsets(offsets, (PARTITION_CLUSTER, PARTITION_TOPIC), PARTITION_PARTITION)

    def start(self, props: dict[str, str]) -> None:
        cfg = MirrorSourceConfig(props)
        for key in MirrorSourceConfig.unknown_keys(props):
            log.warning("The configuration '%s' was supplied but isn't a known config.", key)
        self.cfg = cfg
        self._background_thread.reset()
        if not cfg.enabled:
            return
        self._source_admin = clients.admin_client(cfg.source_admin_config("source-admin"))
        self._target_admin = clients.admin_client(cfg.target_admin_config("target-admin"))
        self._offset_syncs_admin = clients.admin_client(cfg.offset_syncs_admin_config())
        self._discovered = False
        try:
            self._create_offset_syncs_topic()
            self._refresh(first=True)
            self._discovered = True
        except MirrorRetriableError as exc:
            log.warning("%s: initial topic discovery did not finish (%s); retrying in the background",
                        cfg.connector_name, exc)
        self._background_thread.start(self._background, f"mirror-source-{cfg.connector_name}")

    def stop(self) -> None:
        self._background_thread.stop(self.cfg.connector_name if self.cfg else "MirrorSourceConnector")
        # librdkafka handles have no close(): dropping the last reference ends their threads
        for name in ("_source_admin", "_target_admin", "_offset_syncs_admin"):
            self.__dict__.pop(name, None)

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        cfg = self.cfg
        if cfg is None or not cfg.enabled:
            return []
        with self._lock:
            partitions = sorted((p, t) for t, n in self.known.items() for p in range(n))
        if not partitions:
            return []
        n_tasks = min(max_tasks, len(partitions))
        per_task: list[list[str]] = [[] for _ in range(n_tasks)]
        # Kafka sorts by partition then topic and deals round robin, so a topic spreads over tasks.
        for i, (p, t) in enumerate(partitions):
            per_task[i % n_tasks].append(encode_topic_partition(t, p))
        return [cfg.task_config(TASK_TOPIC_PARTITIONS, parts, i) for i, parts in enumerate(per_task)]

    # -- discovery ------------------------------------------------------------------------------
    def _create_offset_syncs_topic(self) -> None:
        cfg = self.cfg
        assert cfg is not None
        if not cfg.emit_offset_syncs:
            return
        clients.create_topic(self._offset_syncs_admin, cfg.offset_syncs_topic, 1, cfg.offset_syncs_replication_factor,
                             {"cleanup.policy": "compact"}, cfg.admin_timeout_s, self._stop)

    def _background(self) -> None:
        cfg = self.cfg
        assert cfg is not None
        refresh, sync = cfg.refresh_topics_interval_s, cfg.sync_topic_configs_interval_s
        now = time.monotonic()
        # Until the first discovery worked (the source or target was unreachable at start), it
        # is retried every RETRY_BACKOFF_S whatever the refresh interval, refresh off included.
        next_refresh = now + (refresh if refresh > 0 else float("inf"))
        if not self._discovered:
            next_refresh = now + RETRY_BACKOFF_S
        next_sync = now + sync if sync > 0 else float("inf")
        while not self._stop.wait(max(0.05, min(next_refresh, next_sync, now + 1.0) - time.monotonic())):
            now = time.monotonic()
            step = "refresh"
            try:
                if now >= next_refresh:
                    next_refresh = now + (refresh if refresh > 0 else float("inf"))
                    self._create_offset_syncs_topic()
                    self._refresh(first=False)
                    self._discovered = True
                if now >= next_sync:
                    step = "sync"
                    next_sync = now + sync
                    self._sync_topic_configs()
            except MirrorCallAbandoned:
                return  # stop() was called
            except MirrorRetriableError as exc:
                # Back-pressure: an unreachable cluster delays the work, it never fails the connector.
                retry = time.monotonic() + RETRY_BACKOFF_S
                if step == "refresh":
                    next_refresh = min(next_refresh, retry)
                else:
                    next_sync = min(next_sync, retry)
                log.warning("%s: %s; retrying in %.0f s", cfg.connector_name, exc, RETRY_BACKOFF_S)
            except Exception as exc:  # the connector's own thread: report the failure, never die silently
                log.exception("%s: background refresh failed", cfg.connector_name)
                if self.context is not None:
                    self.context.raise_error(exc)
                return

    def _refresh(self, first: bool) -> None:
        """Find the topics to replicate; create/grow remote topics; reconfigure tasks on change."""
        cfg = self.cfg
        assert cfg is not None
        timeout = cfg.admin_timeout_s
        source = {t: n for t, n in clients.topic_partitions(self._source_admin, timeout, self._stop).items()
                  if should_replicate_topic(cfg, t)}
        with self._lock:
            changed = source != self.known
        if not changed and not first:
            return
        self._create_remote_topics(source)
        with self._lock:
            old, self.known = self.known, source
        if source != old:
            log.info("%s: replicating %d topic(s), %d partition(s)", cfg.connector_name, len(source),
                     sum(source.values()))
            if not first and self.context is not None:
                self.context.request_task_reconfiguration()

    def _create_remote_topics(self, source: Mapping[str, int]) -> None:
        cfg = self.cfg
        assert cfg is not None
        timeout = cfg.admin_timeout_s
        policy = cfg.replication_policy
        existing = clients.topic_partitions(self._target_admin, timeout, self._stop)
        missing = {t: n for t, n in source.items() if policy.format_remote_topic(cfg.source_cluster_alias, t)
                   not in existing}
        configs = clients.topic_configs(self._source_admin, missing, timeout, self._stop) if missing else {}
        prop_filter = cfg.config_property_filter
        from confluent_kafka.admin import NewTopic

        new = [NewTopic(policy.format_remote_topic(cfg.source_cluster_alias, t), num_partitions=n,
                        replication_factor=cfg.replication_factor,
                        config={k: v for k, v in configs.get(t, {}).items()
                                if prop_filter.should_replicate_config_property(k)})
               for t, n in missing.items()]
        for name in clients.create_topics(self._target_admin, new, timeout, self._stop):
            log.info("%s: created remote topic %s", cfg.connector_name, name)
        grow = {}
        for t, n in source.items():
            remote = policy.format_remote_topic(cfg.source_cluster_alias, t)
            if remote in existing and existing[remote] < n:
                grow[remote] = n
        if grow:
            clients.add_partitions(self._target_admin, grow, timeout, self._stop)
            log.info("%s: added partitions to %s", cfg.connector_name, grow)

    def _sync_topic_configs(self) -> None:
        cfg = self.cfg
        assert cfg is not None
        with self._lock:
            topics = list(self.known)
        if not topics:
            return
        prop_filter = cfg.config_property_filter
        configs = clients.topic_configs(self._source_admin, topics, cfg.admin_timeout_s, self._stop)
        remote = {cfg.replication_policy.format_remote_topic(cfg.source_cluster_alias, t):
                  {k: v for k, v in values.items() if prop_filter.should_replicate_config_property(k)}
                  for t, values in configs.items()}
        clients.alter_topic_configs(self._target_admin, remote, cfg.admin_timeout_s, self._stop)


@dataclass
class _PartitionState:
    """Kafka's ``OffsetSyncWriter.PartitionState``: when does a partition need an offset sync."""

    max_offset_lag: int
    previous_upstream: int = -1
    previous_downstream: int = -1
    last_sync_downstream: int = -1
    should_sync: bool = False

    def update(self, upstream: int, downstream: int) -> bool:
        no_previous = self.last_sync_downstream == -1
        # A translation lands one past the last sync, hence the +1 (Kafka's comment).
        too_stale = downstream - (self.last_sync_downstream + 1) >= self.max_offset_lag
        skipped_upstream = upstream - self.previous_upstream != 1
        truncated_downstream = downstream < self.previous_downstream
        if no_previous or too_stale or skipped_upstream or truncated_downstream:
            self.last_sync_downstream = downstream
            self.should_sync = True
        self.previous_upstream = upstream
        self.previous_downstream = downstream
        return self.should_sync

    def reset(self) -> None:
        self.should_sync = False


@dataclass
class OffsetSyncWriter:
    """Sends offset syncs (Kafka's ``OffsetSyncWriter``): a needed sync is sent at once;
    otherwise the partition's latest sync waits for the next offset commit. A sync the
    producer's full queue refused waits in ``pending`` for the next round (back-pressure)."""

    producer: Producer | None
    topic: str
    max_offset_lag: int
    # where the topic is, for messages: "cluster A (offset-syncs.topic.location=source)"
    where: str = "its cluster"
    states: dict[tuple[str, int], _PartitionState] = field(default_factory=dict)
    pending: dict[tuple[str, int], OffsetSync] = field(default_factory=dict)
    delayed: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def maybe_queue(self, topic: str, partition: int, upstream: int, downstream: int) -> None:
        if self.producer is None:
            return  # emit.offset-syncs.enabled=false
        tp = (topic, partition)
        with self.lock:
            state = self.states.get(tp)
            if state is None:
                state = self.states[tp] = _PartitionState(self.max_offset_lag)
            if not state.update(upstream, downstream):
                # The partition's latest position, written at the next commit; a tuple, not an
                # OffsetSync: this runs for every record.
                self.delayed[tp] = (upstream, downstream)
                return
            state.reset()
            self.delayed.pop(tp, None)
        sync = OffsetSync(topic, partition, upstream, downstream)
        # Sent at once (Kafka fires pending syncs from commitRecord): queuing them until the
        # next poll would let later records of the batch overwrite them, and the syncs would
        # end up further apart than offset.lag.max.
        self._send(sync)

    def maybe_queue_batch(self, topic: str, partition: int, upstream: Sequence[int],
                          downstream: Sequence[int]) -> None:
        """``maybe_queue`` for each record of a batch, without a step per record when both offset
        runs are contiguous (the common case): then after the first record only offset.lag.max
        can call for a sync, at known downstream offsets."""
        n = len(upstream)
        if self.producer is None or n == 0:
            return
        if upstream[-1] - upstream[0] != n - 1 or downstream[-1] - downstream[0] != n - 1:
            for up, down in zip(upstream, downstream, strict=True):
                self.maybe_queue(topic, partition, up, down)
            return
        self.maybe_queue(topic, partition, upstream[0], downstream[0])
        if n == 1:
            return
        tp = (topic, partition)
        u0, d0, u_last, d_last = upstream[0], downstream[0], upstream[-1], downstream[-1]
        syncs: list[OffsetSync] = []
        with self.lock:
            state = self.states[tp]
            while True:
                # too_stale fires at last_sync + 1 + lag; after the first record it lies past d0
                down = max(state.last_sync_downstream + 1 + self.max_offset_lag, d0 + 1)
                if down > d_last:
                    break
                state.last_sync_downstream = down
                syncs.append(OffsetSync(topic, partition, u0 + (down - d0), down))
            state.previous_upstream, state.previous_downstream = u_last, d_last
            state.reset()
            if syncs and syncs[-1].downstream_offset == d_last:
                self.delayed.pop(tp, None)
            else:
                self.delayed[tp] = (u_last, d_last)
        for sync in syncs:
            self._send(sync)

    def promote_delayed(self) -> None:
        with self.lock:
            for (topic, partition), (up, down) in self.delayed.items():
                self.pending[(topic, partition)] = OffsetSync(topic, partition, up, down)
            self.delayed.clear()

    def fire_pending(self) -> None:
        if self.producer is None:
            return
        with self.lock:
            syncs, self.pending = self.pending, {}
            for tp in syncs:
                self.states[tp].reset()
        for sync in syncs.values():
            self._send(sync)
        self.producer.poll(0)

    def _send(self, sync: OffsetSync) -> None:
        assert self.producer is not None
        try:
            self.producer.produce(self.topic, key=sync.record_key(), value=sync.record_value(),
                                  partition=0, on_delivery=self._delivered)
        except BufferError:
            # A full queue is back-pressure: a later sync of the partition supersedes this one.
            with self.lock:
                self.pending.setdefault((sync.topic, sync.partition), sync)

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            log.warning("offset sync to %s on %s not written: %s (a later sync supersedes it)", self.topic,
                        self.where, err)

    def close(self, timeout: float) -> None:
        if self.producer is not None:
            remaining = self.producer.flush(timeout)
            if remaining:
                # Expected while that cluster is unreachable: checkpoints translate from the syncs
                # written before, and the next task writes newer ones once it is back.
                log.warning("%d offset sync(s) to %s on %s not written within %.1f s; expected while that "
                            "cluster is unreachable (checkpoints keep translating from the earlier syncs)",
                            remaining, self.topic, self.where, timeout)
                self.producer.purge(in_queue=True, in_flight=True)
            # librdkafka handles have no close(): dropping the last reference ends their threads
            # (a stopped task object may be kept, and its producer would go on reconnecting)
            self.producer = None


class _SourceOffsets(Sequence[Mapping[str, Any]]):
    """A batch's source offsets as Kafka's ``{"offset": n}`` maps, built only when asked for
    (the worker reads the last one; offset syncs read ``offsets``)."""

    __slots__ = ("offsets",)

    def __init__(self, offsets: list[int]) -> None:
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets)

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        if isinstance(index, slice):
            return [{OFFSET_KEY: o} for o in self.offsets[index]]
        return {OFFSET_KEY: self.offsets[index]}


class MirrorSourceTask(SourceTask):
    """Consumes assigned source partitions and returns their records for the remote topics."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.mirror.MirrorSourceTask"
    MAX_RECORDS_PER_POLL = 5000

    def __init__(self) -> None:
        self.cfg: MirrorSourceConfig | None = None
        self.consumer: Consumer | None = None
        self.syncs: OffsetSyncWriter | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._remote: dict[str, str] = {}
        self._source_partitions: dict[tuple[str, int], dict[str, Any]] = {}
        # One poll's records, per source partition: the worker takes one batch per poll() call
        self._ready: deque[Sequence[SourceRecord]] = deque()

    def start(self, props: dict[str, str]) -> None:
        cfg = self.cfg = MirrorSourceConfig(props)
        self._stopping = False
        assigned = [decode_topic_partition(s) for s in props.get(TASK_TOPIC_PARTITIONS, "").split(",") if s]
        consumer_props = cfg.source_consumer_config("replication-consumer")
        consumer_props.setdefault("group.id", f"mm2-{cfg.source_cluster_alias}-{cfg.target_cluster_alias}-unused")
        # Larger fetches than librdkafka's 1 MiB per partition: measured 107k -> 172k records/s
        # for this task's poll alone (100 B records); prefetch stays bounded by librdkafka's
        # queued.max.messages.kbytes. A consumer.max.partition.fetch.bytes override wins.
        consumer_props.setdefault("max.partition.fetch.bytes", str(SOURCE_FETCH_BYTES))
        self.consumer = Consumer(consumer_props)
        reader = self.context.offset_storage_reader if self.context is not None else None
        tps = []
        for topic, partition in assigned:
            committed = reader.offset(wrap_partition(topic, partition, cfg.source_cluster_alias)) if reader else None
            offset = OFFSET_BEGINNING
            if committed is not None and isinstance(committed.get(OFFSET_KEY), int) and committed[OFFSET_KEY] >= 0:
                offset = committed[OFFSET_KEY] + 1
            tps.append(KTopicPartition(topic, partition, offset))
            self._remote[topic] = cfg.replication_policy.format_remote_topic(cfg.source_cluster_alias, topic)
        self.consumer.assign(tps)
        producer = None
        if cfg.emit_offset_syncs and tps:
            producer = Producer({**cfg.offset_syncs_producer_config(), "linger.ms": "10"})
        cluster = cfg.source_cluster_alias if cfg.offset_syncs_on_source else cfg.target_cluster_alias
        self.syncs = OffsetSyncWriter(producer, cfg.offset_syncs_topic, cfg.max_offset_lag,
                                      f"cluster {cluster} (offset-syncs.topic.location="
                                      f"{cfg.offset_syncs_topic_location})")
        log.info("%s: task %s replicating %d partition(s)", cfg.connector_name, props.get("task.index"), len(tps))

    def poll(self) -> Sequence[SourceRecord] | None:
        cfg = self.cfg
        assert cfg is not None
        if self._stopping:
            return None
        if self.syncs is not None:
            self.syncs.fire_pending()
        if self._ready:
            return self._ready.popleft()
        with self._lock:
            if self._stopping or self.consumer is None:
                return None
            msgs = self.consumer.consume(self.MAX_RECORDS_PER_POLL, cfg.consumer_poll_timeout_s)
        if not msgs:
            return None
        alias = cfg.source_cluster_alias
        groups: dict[tuple[str, int], list[Message]] = {}
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                if err.fatal():
                    raise ConnectException(f"consuming from {alias}: {err.str()}")
                # librdkafka retries everything else itself: back-pressure, not a task failure.
                log.warning("consuming from %s: %s (retrying)", alias, err.str())
                continue
            topic, partition = msg.topic(), msg.partition()
            assert topic is not None and partition is not None  # a message without error has both
            group = groups.get((topic, partition))
            if group is None:
                group = groups[(topic, partition)] = []
            group.append(msg)
        for (topic, partition), group in groups.items():
            self._ready.append(self._records(alias, topic, partition, group))
        return self._ready.popleft() if self._ready else None

    def _records(self, alias: str, topic: str, partition: int, msgs: list[Message]) -> Sequence[SourceRecord]:
        """One partition's records: a SourceRecordBatch (produced from its columns, acknowledged
        by ``commit_record_batch``) unless a record has headers, which the columns do not carry."""
        bytes_schema = Schema.OPTIONAL_BYTES_SCHEMA
        # One source-partition dict per partition, shared by its records (read-only).
        sp = self._source_partitions.get((topic, partition))
        if sp is None:
            sp = self._source_partitions[(topic, partition)] = {PARTITION_CLUSTER: alias, PARTITION_TOPIC: topic,
                                                                PARTITION_PARTITION: partition}
        remote = self._remote[topic]
        if not any(msg.headers() for msg in msgs):
            stamps = [ts if ts_type else None for ts_type, ts in (msg.timestamp() for msg in msgs)]
            # a consumed message without error always has an offset
            offsets: list[int] = [msg.offset() for msg in msgs]  # type: ignore[misc]
            return SourceRecordBatch(sp, _SourceOffsets(offsets), remote, bytes_schema,
                                     [msg.value() for msg in msgs], key_schema=bytes_schema,
                                     keys=[msg.key() for msg in msgs], kafka_partition=partition, timestamps=stamps)
        out: list[SourceRecord] = []
        for msg in msgs:
            raw_headers = msg.headers()
            headers = None
            if raw_headers:
                # librdkafka gives a list of (key, value) pairs: repeated keys and order kept
                pairs = raw_headers.items() if isinstance(raw_headers, dict) else raw_headers
                headers = Headers([Header(k, bytes_schema, v) for k, v in pairs])
            ts_type, ts = msg.timestamp()
            out.append(SourceRecord(sp, {OFFSET_KEY: msg.offset()}, remote, partition, bytes_schema, msg.key(),
                                    bytes_schema, msg.value(), ts if ts_type else None, headers))
        return out

    def commit_record_batch(self, batch: SourceRecordBatch, offsets: Sequence[int]) -> None:
        sp = batch.source_partition
        if self.syncs is None or sp is None or not isinstance(batch.source_offsets, _SourceOffsets):
            return
        self.syncs.maybe_queue_batch(sp[PARTITION_TOPIC], sp[PARTITION_PARTITION], batch.source_offsets.offsets,
                                     offsets)

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        if metadata is None or self.syncs is None or record.source_partition is None or record.source_offset is None:
            return  # dropped by a transform: nothing downstream to sync to
        sp = record.source_partition
        self.syncs.maybe_queue(sp[PARTITION_TOPIC], sp[PARTITION_PARTITION], record.source_offset[OFFSET_KEY],
                               metadata.offset)

    def commit(self) -> None:
        """Sends the delayed syncs (each partition's latest position), as Kafka's ``commit()``.

        The worker calls this after each offset commit, every ``offset.flush.interval.ms``: so the
        sync of a topic's last record arrives up to that long (60 s by default) after the
        producer stops, in Kafka 4.3.1 as here (tests/connect/mirror/test_mirror_last_sync.py)."""
        if self.syncs is not None:
            self.syncs.promote_delayed()
            self.syncs.fire_pending()

    def stop(self) -> None:
        self._stopping = True
        self._ready.clear()  # polled, not sent: their offsets were never committed, so they are read again
        with self._lock:
            consumer, self.consumer = self.consumer, None
            if consumer is not None:
                consumer.close()
        if self.syncs is not None:
            self.syncs.close(OFFSET_SYNCS_CLOSE_TIMEOUT_S)
