"""``MirrorCheckpointConnector`` and ``MirrorCheckpointTask`` (Kafka's): translate the source
cluster's consumer group offsets into target offsets and publish them as checkpoints in
``<source>.checkpoints.internal`` on the target (Kafka's record format), and, with
``sync.group.offsets.enabled``, commit them into the target's groups that have no active member.

Translation uses the offset syncs the source task writes (:class:`OffsetSyncStore`). It never
skips a record: an offset between two syncs translates to one past the earlier sync (rounds
down). Unlike Kafka's store, which keeps 64 syncs per partition at exponentially growing
distances (so a group far behind the log end translates to far before its true position), this
store keeps every sync the source wrote, and the source writes one at least every
``offset.lag.max`` records: any committed offset translates to within ``offset.lag.max``
records of the truth however far it lags.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, KafkaError
from confluent_kafka import TopicPartition as KTopicPartition
from confluent_kafka.admin import AdminClient

from strom.connect.api.config import ConfigDef
from strom.connect.api.connector import ExactlyOnceSupport, SourceConnector
from strom.connect.api.records import SourceRecord
from strom.connect.api.task import SourceTask, Task
from strom.connect.data import Schema
from strom.connect.mirror import clients
from strom.connect.mirror.clients import MirrorCallAbandoned, MirrorRetriableError
from strom.connect.mirror.config import CHECKPOINT_CONFIG_DEF, TASK_CONSUMER_GROUPS, MirrorCheckpointConfig
from strom.connect.mirror.offsets import validate_offsets
from strom.connect.mirror.records import Checkpoint, OffsetSync

log = logging.getLogger(__name__)

# Far more than the 64 of Kafka's store: at offset.lag.max=100 this keeps exact translation
# for 20 million records of a partition's history; beyond, the oldest half is thinned.
MAX_SYNCS_PER_PARTITION = 200_000
# Kafka's Worker.CONNECTOR_GRACEFUL_SHUTDOWN_TIMEOUT_MS: how long stop() waits for the
# connector's background thread (its client waits look at the stop event every clients.STOP_CHECK_S).
# The longest one poll() waits for the source's answers: a poll returns within about this
# (plus the offset-syncs read), so the worker's stop is seen between polls however long the
# answers take (they are waited for over several polls, up to admin.timeout.ms).
POLL_WAIT_S = 1.0


class OffsetSyncStore:
    """The offset syncs of every partition, read from the offset-syncs topic (Kafka's
    ``OffsetSyncStore``, keeping every sync instead of 64).

    Invariants per partition: upstream offsets strictly increase, and so do downstream ones. A
    sync whose upstream offset is not above the last one (the source task rewound after a
    restart) drops the syncs at or above it first, as Kafka's store does, so a translation
    never uses a sync from before a rewind that a newer one contradicts.
    """

    def __init__(self, max_per_partition: int = MAX_SYNCS_PER_PARTITION) -> None:
        self._up: dict[tuple[str, int], list[int]] = {}
        self._down: dict[tuple[str, int], list[int]] = {}
        self._max = max_per_partition
        self._lock = threading.Lock()
        self.read_to_end = False

    def add(self, sync: OffsetSync) -> None:
        tp = (sync.topic, sync.partition)
        with self._lock:
            ups = self._up.setdefault(tp, [])
            downs = self._down.setdefault(tp, [])
            if ups and (sync.upstream_offset <= ups[-1] or sync.downstream_offset <= downs[-1]):
                i = bisect.bisect_left(ups, sync.upstream_offset)
                j = bisect.bisect_left(downs, sync.downstream_offset)
                k = min(i, j)
                del ups[k:], downs[k:]
            ups.append(sync.upstream_offset)
            downs.append(sync.downstream_offset)
            if len(ups) > self._max:
                half = len(ups) // 2
                # Thin the older half (every other sync): old offsets stay translatable, less exactly.
                self._up[tp] = ups[:half:2] + ups[half:]
                self._down[tp] = downs[:half:2] + downs[half:]

    def syncs(self, topic: str, partition: int) -> int:
        with self._lock:
            return len(self._up.get((topic, partition), ()))

    def translate_downstream(self, topic: str, partition: int, upstream_offset: int) -> int | None:
        """The target offset for upstream offset ``upstream_offset`` of ``topic``/``partition``
        (the upstream topic): ``None`` when the store is not read to the end or has no sync for
        the partition, -1 when the offset is older than every sync (Kafka's answers)."""
        if not self.read_to_end:
            return None
        with self._lock:
            ups = self._up.get((topic, partition))
            if not ups:
                return None
            i = bisect.bisect_right(ups, upstream_offset) - 1
            if i < 0:
                return -1  # too far in the past to translate accurately
            up, down = ups[i], self._down[(topic, partition)][i]
        # Past the sync we only know the next record lands after it: one past, never more
        # (over-estimating could skip records; Kafka's reasoning).
        return down if upstream_offset == up else down + 1


class OffsetSyncReader:
    """Feeds an :class:`OffsetSyncStore` from the offset-syncs topic (partition 0, from the
    beginning; its own consumer, polled by the checkpoint task)."""

    def __init__(self, consumer_config: Mapping[str, str], topic: str, store: OffsetSyncStore) -> None:
        props = dict(consumer_config)
        props.setdefault("group.id", "mm2-offset-syncs-reader-unused")
        self.consumer = Consumer(props)
        self.topic = topic
        self.store = store
        self.consumer.assign([KTopicPartition(topic, 0, OFFSET_BEGINNING)])
        self._end: int | None = None

    def poll(self, timeout: float) -> int:
        """Read what is there (up to ``timeout`` s); marks the store read to the end once the
        position reached the end offset seen at the first call."""
        n = 0
        deadline = time.monotonic() + timeout
        while True:
            if self._end is None:
                try:
                    _, high = self.consumer.get_watermark_offsets(KTopicPartition(self.topic, 0),
                                                                  timeout=max(0.1, deadline - time.monotonic()))
                    self._end = high
                except Exception as exc:  # librdkafka raises KafkaException on timeout: retry later
                    log.debug("end offset of %s not known yet: %s", self.topic, exc)
            msgs = self.consumer.consume(10000, max(0.0, min(0.2, deadline - time.monotonic())))
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                        # the source connector has not created it yet: expected at start, every poll
                        log.debug("reading %s: %s", self.topic, err.str())
                    elif err.code() != KafkaError._PARTITION_EOF:
                        log.warning("reading %s: %s", self.topic, err.str())
                    continue
                try:
                    self.store.add(OffsetSync.deserialize(msg.key(), msg.value()))
                    n += 1
                except Exception as exc:  # a corrupt sync is skipped, as Kafka's KafkaBasedLog would fail it
                    log.warning("skipping an unreadable offset sync at %s-0@%d: %s", self.topic, msg.offset(), exc)
            if not self.store.read_to_end and self._end is not None:
                pos = self.consumer.position([KTopicPartition(self.topic, 0)])[0].offset
                if self._end == 0 or pos >= self._end:
                    self.store.read_to_end = True
            if (not msgs and self.store.read_to_end) or time.monotonic() >= deadline:
                return n

    def close(self) -> None:
        self.consumer.close()


class MirrorCheckpointConnector(SourceConnector):
    """Finds the source's consumer groups and hands them to checkpoint tasks."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.mirror.MirrorCheckpointConnector"

    def __init__(self) -> None:
        self.cfg: MirrorCheckpointConfig | None = None
        self.known_groups: list[str] = []
        self._background_thread = clients.BackgroundThread()
        self._stop = self._background_thread.stopping

    def config(self) -> ConfigDef:
        return CHECKPOINT_CONFIG_DEF

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        # Checkpoints are idempotent (compacted, latest wins): safe under exactly-once workers.
        return ExactlyOnceSupport.SUPPORTED

    def task_class(self) -> type[Task]:
        return MirrorCheckpointTask

    def alter_offsets(self, props: Mapping[str, str],
                      offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> bool:
        """Kafka's: partitions ``{"group", "topic", "partition"}``, offsets ``{"offset": 0}``."""
        return validate_offsets(offsets, ("group", "topic"), "partition", offset_must_be_zero=True)

    def start(self, props: dict[str, str]) -> None:
        cfg = self.cfg = MirrorCheckpointConfig(props)
        for key in MirrorCheckpointConfig.unknown_keys(props):
            log.warning("The configuration '%s' was supplied but isn't a known config.", key)
        self._background_thread.reset()
        if not cfg.enabled:
            return
        self._source_admin = clients.admin_client(cfg.source_admin_config("source-admin"))
        self._target_admin = clients.admin_client(cfg.target_admin_config("target-admin"))
        try:
            clients.create_topic(self._target_admin, cfg.checkpoints_topic, 1, cfg.checkpoints_replication_factor,
                                 {"cleanup.policy": "compact"}, cfg.admin_timeout_s)
            self.known_groups = self._find_groups()
        except MirrorRetriableError as exc:
            log.warning("%s: initial group discovery did not finish (%s); retrying in the background",
                        cfg.connector_name, exc)
        self._background_thread.start(self._background, f"mirror-checkpoint-{cfg.connector_name}")

    def stop(self) -> None:
        self._background_thread.stop(self.cfg.connector_name if self.cfg else "MirrorCheckpointConnector")
        # librdkafka handles have no close(): dropping the last reference ends their threads
        for name in ("_source_admin", "_target_admin"):
            self.__dict__.pop(name, None)

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        cfg = self.cfg
        if cfg is None or not cfg.enabled or not self.known_groups:
            return []
        if cfg.emit_checkpoints_interval_s < 0 and cfg.sync_group_offsets_interval_s < 0:
            return []
        n = min(max_tasks, len(self.known_groups))
        per_task: list[list[str]] = [[] for _ in range(n)]
        for i, g in enumerate(sorted(self.known_groups)):
            per_task[i % n].append(g)
        return [cfg.task_config(TASK_CONSUMER_GROUPS, groups, i) for i, groups in enumerate(per_task)]

    def _find_groups(self) -> list[str]:
        cfg = self.cfg
        assert cfg is not None
        fut = self._source_admin.list_consumer_groups(request_timeout=cfg.admin_timeout_s)
        listing = clients.result(fut, cfg.admin_timeout_s, "listing consumer groups", self._stop)
        if listing.errors and not listing.valid:
            # librdkafka answers an unreachable cluster with errors and no group: that is no
            # answer, not "no groups" (which would take every checkpoint task away)
            raise MirrorRetriableError(f"listing consumer groups: {listing.errors[0]}")
        groups = sorted(g.group_id for g in listing.valid if cfg.group_filter.should_replicate_group(g.group_id))
        return groups

    def _background(self) -> None:
        cfg = self.cfg
        assert cfg is not None
        interval = cfg.refresh_groups_interval_s
        if interval <= 0:
            interval = 5.0 if not self.known_groups else float("inf")  # until the first discovery worked
        while not self._stop.wait(min(interval, 3600.0)):
            try:
                groups = self._find_groups()
            except MirrorCallAbandoned:
                return  # stop() was called
            except MirrorRetriableError as exc:
                log.warning("%s: %s; retrying at the next round", cfg.connector_name, exc)
                continue
            if groups != self.known_groups:
                log.info("%s: checkpointing %d group(s)", cfg.connector_name, len(groups))
                self.known_groups = groups
                if self.context is not None:
                    self.context.request_task_reconfiguration()
            if cfg.refresh_groups_interval_s <= 0:
                return


class MirrorCheckpointTask(SourceTask):
    """Emits checkpoints of its groups every ``emit.checkpoints.interval.seconds`` and syncs
    them into idle target groups every ``sync.group.offsets.interval.seconds``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.mirror.MirrorCheckpointTask"

    def __init__(self) -> None:
        self.cfg: MirrorCheckpointConfig | None = None
        self.groups: list[str] = []
        self.store = OffsetSyncStore()
        self.reader: OffsetSyncReader | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._last: dict[tuple[str, str, int], Checkpoint] = {}
        self._next_emit = 0.0
        self._next_sync = 0.0
        # the source's answers asked for at an earlier poll, and until when they are waited for
        self._offset_futures: dict[str, Future[ConsumerGroupTopicPartitions]] = {}
        self._offsets_deadline = 0.0

    def start(self, props: dict[str, str]) -> None:
        cfg = self.cfg = MirrorCheckpointConfig(props)
        self.groups = [g for g in props.get(TASK_CONSUMER_GROUPS, "").split(",") if g]
        self._stopping.clear()
        self._source_admin: AdminClient = clients.admin_client(cfg.source_admin_config("checkpoint-source-admin"))
        self._target_admin: AdminClient = clients.admin_client(cfg.target_admin_config("checkpoint-target-admin"))
        self.reader = OffsetSyncReader(cfg.offset_syncs_consumer_config(), cfg.offset_syncs_topic, self.store)
        now = time.monotonic()
        self._next_emit = now if cfg.emit_checkpoints_interval_s >= 0 else float("inf")
        self._next_sync = now if cfg.sync_group_offsets_interval_s >= 0 else float("inf")

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            reader, self.reader = self.reader, None
            if reader is not None:
                reader.close()
        for name in ("_source_admin", "_target_admin"):
            self.__dict__.pop(name, None)

    def poll(self) -> Sequence[SourceRecord] | None:
        cfg = self.cfg
        assert cfg is not None
        with self._lock:
            if self.reader is None:
                return None
            self.reader.poll(min(1.0, cfg.consumer_poll_timeout_s))
        now = time.monotonic()
        due_emit, due_sync = now >= self._next_emit, now >= self._next_sync
        if not (due_emit or due_sync):
            self._stopping.wait(min(0.5, max(0.0, min(self._next_emit, self._next_sync) - now)))
            return None
        if not self.store.read_to_end:
            return None
        try:
            checkpoints = self.checkpoints(POLL_WAIT_S)
        except MirrorRetriableError as exc:
            log.warning("%s: %s; retrying at the next round", cfg.connector_name, exc)
            return None
        if checkpoints is None:
            return None  # the answers are still on their way: looked at again at the next poll
        records: list[SourceRecord] = []
        if due_emit:
            self._next_emit = now + cfg.emit_checkpoints_interval_s
            records = [self._record(cp) for cp in checkpoints if self._changed(cp)]
        if due_sync:
            self._next_sync = now + cfg.sync_group_offsets_interval_s
            try:
                self.sync_group_offsets(checkpoints)
            except MirrorRetriableError as exc:
                log.warning("%s: syncing group offsets: %s; retrying at the next round", cfg.connector_name, exc)
        return records or None

    def _changed(self, cp: Checkpoint) -> bool:
        key = (cp.group, cp.topic, cp.partition)
        if self._last.get(key) == cp:
            return False
        self._last[key] = cp
        return True

    def _record(self, cp: Checkpoint) -> SourceRecord:
        cfg = self.cfg
        assert cfg is not None
        return SourceRecord(cp.connect_partition(), {"offset": 0}, cfg.checkpoints_topic, 0,
                            Schema.BYTES_SCHEMA, cp.record_key(), Schema.BYTES_SCHEMA, cp.record_value(),
                            int(time.time() * 1000))

    def checkpoints(self, wait: float | None = None) -> list[Checkpoint] | None:
        """The current checkpoint of every partition of every group of the task.

        With ``wait``, the source's answers are waited for at most that long per call: None
        means they have not all come yet and the next call waits for the same requests again,
        until ``admin.timeout.ms`` after they were sent (then :class:`MirrorRetriableError`)."""
        cfg = self.cfg
        assert cfg is not None
        out: list[Checkpoint] = []
        if not self.groups:
            return out
        timeout = cfg.admin_timeout_s
        policy = cfg.replication_policy
        if not self._offset_futures:
            # librdkafka answers one group per ListConsumerGroupOffsets call.
            self._offset_futures = {g: self._source_admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(g)], request_timeout=timeout)[g] for g in self.groups}
            self._offsets_deadline = time.monotonic() + timeout
        futures = self._offset_futures
        remaining = self._offsets_deadline - time.monotonic()
        _, pending = concurrent.futures.wait(futures.values(), max(0.0, remaining if wait is None
                                                                   else min(wait, remaining)))
        if pending:
            if time.monotonic() < self._offsets_deadline:
                return None
            self._offset_futures = {}
            raise MirrorRetriableError(f"listing offsets of {len(pending)} group(s): no answer within "
                                       f"admin.timeout.ms ({timeout:.0f} s)")
        self._offset_futures = {}
        topic_filter = cfg.topic_filter
        for group, fut in futures.items():
            res = clients.result(fut, 0.0, f"listing offsets of group {group}")
            for tp in res.topic_partitions or ():
                if tp.offset < 0 or tp.error is not None:
                    continue
                if not topic_filter.should_replicate_topic(tp.topic) or policy.is_internal_topic(tp.topic):
                    continue
                downstream = self.store.translate_downstream(tp.topic, tp.partition, tp.offset)
                if downstream is None or downstream < 0:
                    continue
                out.append(Checkpoint(group, policy.format_remote_topic(cfg.source_cluster_alias, tp.topic),
                                      tp.partition, tp.offset, downstream, tp.metadata or ""))
        return out

    def sync_group_offsets(self, checkpoints: Iterable[Checkpoint]) -> None:
        """Commit translated offsets into target groups with no active member, never moving a
        group's offset backwards (Kafka's ``syncGroupOffset``)."""
        cfg = self.cfg
        assert cfg is not None
        timeout = cfg.admin_timeout_s
        by_group: dict[str, list[Checkpoint]] = {}
        for cp in checkpoints:
            by_group.setdefault(cp.group, []).append(cp)
        if not by_group:
            return
        described = self._target_admin.describe_consumer_groups(list(by_group), request_timeout=timeout)
        for group, cps in by_group.items():
            try:
                desc = clients.result(described[group], timeout, f"describing target group {group}")
                if desc.members:
                    log.debug("target group %s has active members: not syncing its offsets", group)
                    continue
            except MirrorRetriableError:
                raise
            except Exception as exc:  # a group unknown on the target: nothing to protect, sync it
                log.debug("target group %s: %s", group, exc)
            current = clients.result(self._target_admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=timeout)[group], timeout,
                f"listing offsets of target group {group}")
            committed = {(tp.topic, tp.partition): tp.offset for tp in current.topic_partitions or ()}
            moves = [KTopicPartition(cp.topic, cp.partition, cp.downstream_offset) for cp in cps
                     if committed.get((cp.topic, cp.partition), -1) < cp.downstream_offset]
            if moves:
                fut = self._target_admin.alter_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group, moves)], request_timeout=timeout)[group]
                clients.result(fut, timeout, f"committing offsets of target group {group}")
                log.info("synced %d offset(s) of group %s to the target", len(moves), group)
