"""Kafka's ``TopicBasedRemoteLogMetadataManager``: remote segment metadata as records of the
``__remote_log_metadata`` topic, read back into per-partition caches.

Configured with Kafka's keys (the broker's ``rlmm.config.`` prefix stripped):

===============================================================  ==========  ======================
``remote.log.metadata.topic.num.partitions``                     50          partitions of the topic
``remote.log.metadata.topic.replication.factor``                 3           its replication factor
``remote.log.metadata.topic.retention.ms``                       -1          its retention
``remote.log.metadata.consume.wait.ms``                          120000      a write waits this long to
                                                                             be read back
``remote.log.metadata.initialization.retry.max.timeout.ms``      120000      topic creation retries
``remote.log.metadata.common.client.*``, ``...producer.*``,                  client properties
``...consumer.*``                                                            (``bootstrap.servers`` required)
===============================================================  ==========  ======================

A write publishes one record (no key) to the partition :func:`metadata_partition` picks and
returns once this manager's consumer has applied it (Kafka's ``waitTillConsumptionCatchesUp``), so
a read after a write sees it. The consumer (one thread, confluent-kafka) reads the metadata
partitions of the user partitions this broker leads or follows, from the beginning: the caches are
rebuilt from the topic at every start. State transitions are checked against the cache before a
record is published, and again when any record is applied (a bad record from elsewhere is logged
and skipped, as Kafka's consumer task does).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping, Set

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from strom.plugins.exceptions import (
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageNotReadyError,
)
from strom.plugins.hookspecs.storage import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from strom.tiered.config_values import ConfigReader
from strom.tiered.remote_log_metadata_cache import RemoteLogMetadataCache
from strom.tiered.remote_log_metadata_serde import (
    RemoteLogMetadata,
    RemoteLogMetadataSerdeError,
    RemoteLogSegmentMetadataSnapshot,
    deserialize,
    metadata_partition,
    serialize,
)

log = logging.getLogger(__name__)

REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"
COMMON_CLIENT_PREFIX = "remote.log.metadata.common.client."
PRODUCER_PREFIX = "remote.log.metadata.producer."
CONSUMER_PREFIX = "remote.log.metadata.consumer."
POLL_SECONDS = 0.1

ConfigValue = str | int | float | bool


class TopicBasedRemoteLogMetadataManager:
    """The remote log metadata manager ``topic-based`` (Kafka's default)."""

    def __init__(self, configs: Mapping[str, object], *, broker_id: int = -1, config_prefix: str = "rlmm.config.") -> None:
        self.broker_id = broker_id
        self._config_prefix = config_prefix
        self._lock = threading.Condition()
        self._caches: dict[TopicIdPartition, RemoteLogMetadataCache] = {}
        self._applied: dict[int, int] = {}  # metadata partition -> next offset to apply
        self._assigned: set[int] = set()
        self._to_assign: set[int] = set()
        self._to_unassign: set[int] = set()
        # A metadata partition re-read from the beginning for newly hosted partitions: below this
        # offset its records go to those caches only (the others have them already).
        self._rereading: dict[int, tuple[int, set[TopicIdPartition]]] = {}
        # A newly hosted partition's cache until its metadata partition is read up to the end it
        # had then (Kafka's isReady): (metadata partition, that end). A read meanwhile would see
        # only some of its segments, so it is refused as not ready (retriable), never answered
        # as "no segment holds this offset" (a consumer would reset its position).
        self._loading: dict[TopicIdPartition, tuple[int, int]] = {}
        self._closed = threading.Event()
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._offsets: Consumer
        self._thread: threading.Thread | None = None
        self.configure(configs)

    # -- set-up -----------------------------------------------------------------------------

    def configure(self, configs: Mapping[str, object]) -> None:
        r = ConfigReader(configs, self._config_prefix)
        self.num_partitions = r.integer("remote.log.metadata.topic.num.partitions", 50, minimum=1)
        self.replication_factor = r.integer("remote.log.metadata.topic.replication.factor", 3, minimum=1,
                                            maximum=32767)
        self.retention_ms = r.integer("remote.log.metadata.topic.retention.ms", -1, minimum=-1)
        self.consume_wait_s = r.integer("remote.log.metadata.consume.wait.ms", 120_000, minimum=0) / 1000
        self.init_timeout_s = r.integer("remote.log.metadata.initialization.retry.max.timeout.ms", 120_000,
                                        minimum=0) / 1000
        self.init_retry_s = r.integer("remote.log.metadata.initialization.retry.interval.ms", 100, minimum=0) / 1000
        r.string(COMMON_CLIENT_PREFIX + "bootstrap.servers")  # required: fail here, naming it
        common = _client_props(configs, COMMON_CLIENT_PREFIX)
        self._producer_props = {**common, **_client_props(configs, PRODUCER_PREFIX)}
        self._consumer_props = {**common, **_client_props(configs, CONSUMER_PREFIX)}
        self._admin_props = dict(common)
        if self._thread is None:
            self._start()

    def _start(self) -> None:
        self._ensure_topic()
        self._producer = Producer({"acks": "all", "enable.idempotence": True, "linger.ms": 0,
                                   **self._producer_props})
        self._consumer = Consumer({"group.id": f"__remote_log_metadata-{self.broker_id}",
                                   "enable.auto.commit": False, "enable.partition.eof": False,
                                   "isolation.level": "read_committed", **self._consumer_props})
        # End offsets are asked by callers' threads on a consumer of their own: the reading one
        # belongs to its thread.
        self._offsets = Consumer({"group.id": f"__remote_log_metadata-{self.broker_id}-offsets",
                                  "enable.auto.commit": False, "isolation.level": "read_committed",
                                  **self._consumer_props})
        self._offsets_lock = threading.Lock()
        self._thread = threading.Thread(target=self._consume, name="remote-log-metadata-consumer", daemon=True)
        self._thread.start()

    def _ensure_topic(self) -> None:
        """Create the topic (Kafka's settings for it) or check the existing one's partition count."""
        admin = AdminClient(self._admin_props)
        deadline = time.monotonic() + self.init_timeout_s
        topic = NewTopic(REMOTE_LOG_METADATA_TOPIC, self.num_partitions, self.replication_factor, config={
            "cleanup.policy": "delete", "retention.ms": str(self.retention_ms)})
        while True:
            try:
                admin.create_topics([topic])[REMOTE_LOG_METADATA_TOPIC].result(max(1.0, deadline - time.monotonic()))
                log.info("created %s with %d partitions", REMOTE_LOG_METADATA_TOPIC, self.num_partitions)
                return
            except KafkaException as e:
                err: KafkaError = e.args[0]
                if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    break
                if not err.retriable() or time.monotonic() >= deadline:
                    raise RemoteStorageError(f"cannot create {REMOTE_LOG_METADATA_TOPIC}: {err.str()}") from e
            time.sleep(self.init_retry_s)  # a retry interval (Kafka's initialization.retry.interval.ms)
        described = admin.list_topics(REMOTE_LOG_METADATA_TOPIC, timeout=max(1.0, deadline - time.monotonic()))
        existing = len(described.topics[REMOTE_LOG_METADATA_TOPIC].partitions)
        if existing != self.num_partitions:
            raise RemoteStorageError(
                f"{REMOTE_LOG_METADATA_TOPIC} has {existing} partitions, but "
                f"{self._config_prefix}remote.log.metadata.topic.num.partitions is {self.num_partitions}")

    # -- the consumer thread ----------------------------------------------------------------

    def _consume(self) -> None:
        assert self._consumer is not None
        consumer = self._consumer
        while not self._closed.is_set():
            with self._lock:
                add, self._to_assign = self._to_assign, set()
                drop, self._to_unassign = self._to_unassign, set()
            if drop:
                consumer.incremental_unassign([TopicPartition(REMOTE_LOG_METADATA_TOPIC, p) for p in drop])
            if add:
                consumer.incremental_assign([TopicPartition(REMOTE_LOG_METADATA_TOPIC, p, OFFSET_BEGINNING)
                                             for p in add])
            try:
                msg = consumer.poll(POLL_SECONDS)
            except RuntimeError:  # closed under us
                return
            if msg is None:
                continue
            if msg.error() is not None:
                log.warning("reading %s: %s", REMOTE_LOG_METADATA_TOPIC, msg.error())
                continue
            self._apply_message(msg)

    def _apply_message(self, msg: Message) -> None:
        partition, offset, value = msg.partition(), msg.offset(), msg.value()
        assert partition is not None and offset is not None
        try:
            record = deserialize(value or b"")
        except RemoteLogMetadataSerdeError as e:
            log.error("skipping unreadable record %s-%d@%d: %s", REMOTE_LOG_METADATA_TOPIC, partition, offset, e)
            record = None
        with self._lock:
            only: set[TopicIdPartition] | None = None
            if partition in self._rereading:
                end, only = self._rereading[partition]
                if offset + 1 >= end:
                    del self._rereading[partition]
                if offset >= end:
                    only = None
            if record is not None and partition in self._assigned:
                try:
                    self._apply(record, only)
                except RemoteStorageError as e:  # Kafka's consumer task logs and goes on
                    log.warning("skipping %s-%d@%d: %s", REMOTE_LOG_METADATA_TOPIC, partition, offset, e)
            self._applied[partition] = max(self._applied.get(partition, 0), offset + 1)
            self._lock.notify_all()

    def _apply(self, record: RemoteLogMetadata, only: set[TopicIdPartition] | None) -> None:
        if isinstance(record, RemoteLogSegmentMetadataSnapshot):
            return  # snapshot records live in snapshot files, never in the topic
        tip = record.topic_id_partition if not isinstance(record, RemoteLogSegmentMetadataUpdate) \
            else record.segment_id.topic_id_partition
        cache = self._caches.get(tip)
        if cache is None or (only is not None and tip not in only):
            return  # a partition this broker does not host, or one whose cache has this record
        if isinstance(record, RemoteLogSegmentMetadata):
            cache.add_copy_in_progress_segment(record)
        elif isinstance(record, RemoteLogSegmentMetadataUpdate):
            cache.update_remote_log_segment_metadata(record)
        else:
            cache.put_partition_delete(record)
            if record.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
                self._caches[tip] = RemoteLogMetadataCache(tip)  # its segments are all gone

    # -- writes -----------------------------------------------------------------------------

    def _publish(self, tip: TopicIdPartition, record: RemoteLogMetadata) -> None:
        if self._producer is None:
            raise RemoteStorageError("remote log metadata manager is closed")
        partition = metadata_partition(tip, self.num_partitions)
        result: list[Message | KafkaError] = []
        self._producer.produce(REMOTE_LOG_METADATA_TOPIC, serialize(record), partition=partition,
                               on_delivery=lambda err, msg: result.append(err if err is not None else msg))
        deadline = time.monotonic() + self.consume_wait_s
        while not result:
            if time.monotonic() >= deadline:
                raise RemoteStorageError(f"publishing to {REMOTE_LOG_METADATA_TOPIC}-{partition} timed out")
            self._producer.poll(POLL_SECONDS)
        outcome = result[0]
        if isinstance(outcome, KafkaError):
            raise RemoteStorageError(f"publishing to {REMOTE_LOG_METADATA_TOPIC}-{partition} failed: {outcome.str()}")
        offset = outcome.offset()
        assert offset is not None
        with self._lock:
            if partition not in self._assigned and partition not in self._to_assign:
                return  # no cache of ours reads it
            if not self._lock.wait_for(lambda: self._applied.get(partition, 0) > offset,
                                       max(0.0, deadline - time.monotonic())):
                raise RemoteStorageError(f"{REMOTE_LOG_METADATA_TOPIC}-{partition}@{offset} was not read back "
                                         f"within remote.log.metadata.consume.wait.ms")

    def add_remote_log_segment_metadata(self, metadata: RemoteLogSegmentMetadata) -> None:
        tip = metadata.topic_id_partition
        with self._lock:
            cache = self._caches.get(tip)
            if cache is not None:
                cache.check_add(metadata)
        self._publish(tip, metadata)

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        tip = update.segment_id.topic_id_partition
        with self._lock:
            cache = self._caches.get(tip)
            if cache is not None:
                cache.check_update(update)
        self._publish(tip, update)

    def put_remote_partition_delete_metadata(self, metadata: RemotePartitionDeleteMetadata) -> None:
        with self._lock:
            cache = self._caches.get(metadata.topic_id_partition)
            if cache is not None:
                cache.check_partition_delete(metadata)
        self._publish(metadata.topic_id_partition, metadata)

    # -- reads ------------------------------------------------------------------------------

    def _cache(self, tip: TopicIdPartition) -> RemoteLogMetadataCache:
        # Caller holds the lock.
        cache = self._caches.get(tip)
        if cache is None:  # Kafka's RemotePartitionMetadataStore says the same
            raise RemoteResourceNotFoundError(f"No resource found for partition: {tip}")
        if not self._loaded(tip):
            partition, end = self._loading[tip]
            raise RemoteStorageNotReadyError(
                f"the remote log metadata of {tip} is still being read ({REMOTE_LOG_METADATA_TOPIC}-{partition} "
                f"at offset {self._applied.get(partition, 0)} of {end})")
        return cache

    def _loaded(self, tip: TopicIdPartition) -> bool:
        # Caller holds the lock.
        loading = self._loading.get(tip)
        if loading is None:
            return True
        partition, end = loading
        if self._applied.get(partition, 0) < end:
            return False
        del self._loading[tip]
        return True

    def remote_log_segment_metadata(self, topic_id_partition: TopicIdPartition, epoch_for_offset: int,
                                    offset: int) -> RemoteLogSegmentMetadata | None:
        with self._lock:
            return self._cache(topic_id_partition).segment_for(epoch_for_offset, offset)

    def highest_offset_for_epoch(self, topic_id_partition: TopicIdPartition, leader_epoch: int) -> int | None:
        with self._lock:
            return self._cache(topic_id_partition).highest_offset_for_epoch(leader_epoch)

    def next_segment_with_txn_index(self, topic_id_partition: TopicIdPartition, epoch: int,
                                    offset: int) -> RemoteLogSegmentMetadata | None:
        with self._lock:
            return self._cache(topic_id_partition).next_segment_with_txn_index(epoch, offset)

    def list_remote_log_segments(self, topic_id_partition: TopicIdPartition,
                                 leader_epoch: int | None = None) -> Iterator[RemoteLogSegmentMetadata]:
        with self._lock:
            return iter(list(self._cache(topic_id_partition).segments(leader_epoch)))

    def remote_log_size(self, topic_id_partition: TopicIdPartition, leader_epoch: int) -> int:
        with self._lock:
            return self._cache(topic_id_partition).remote_log_size(leader_epoch)

    # -- partitions -------------------------------------------------------------------------

    def on_partition_leadership_changes(self, leader_partitions: Set[TopicIdPartition],
                                        follower_partitions: Set[TopicIdPartition]) -> None:
        """Start following these partitions' metadata; returns once it is read up to the end."""
        if self._consumer is None:
            raise RemoteStorageError("remote log metadata manager is closed")
        wanted = set(leader_partitions) | set(follower_partitions)
        with self._lock:
            new = {tip for tip in wanted if tip not in self._caches}
            fresh = {metadata_partition(tip, self.num_partitions) for tip in new} - self._assigned
        ends: dict[int, int] = {}
        with self._offsets_lock:
            for p in fresh:
                _, high = self._offsets.get_watermark_offsets(TopicPartition(REMOTE_LOG_METADATA_TOPIC, p),
                                                              timeout=self.consume_wait_s)
                ends[p] = high
        with self._lock:
            for tip in new:
                self._caches[tip] = RemoteLogMetadataCache(tip)
            # A partition already assigned has been read for others only; re-read it for the new caches.
            again = {metadata_partition(tip, self.num_partitions) for tip in new} & self._assigned
            for p in again:
                ends[p] = self._applied.get(p, 0)
                self._applied[p] = 0
                self._rereading[p] = (ends[p], {tip for tip in new
                                                if metadata_partition(tip, self.num_partitions) == p})
            self._to_unassign |= again
            self._to_assign |= fresh | again
            self._assigned |= fresh | again
            for tip in new:
                p = metadata_partition(tip, self.num_partitions)
                self._loading[tip] = (p, ends.get(p, self._applied.get(p, 0)))
            if not self._lock.wait_for(lambda: all(self._applied.get(p, 0) >= end for p, end in ends.items()),
                                       self.consume_wait_s):
                raise RemoteStorageError(f"reading {REMOTE_LOG_METADATA_TOPIC} up to its end timed out "
                                         "(remote.log.metadata.consume.wait.ms)")

    def on_stopped_partitions(self, partitions: Set[TopicIdPartition]) -> None:
        with self._lock:
            for tip in partitions:
                self._caches.pop(tip, None)
                self._loading.pop(tip, None)
            needed = {metadata_partition(tip, self.num_partitions) for tip in self._caches}
            unneeded = self._assigned - needed
            self._assigned -= unneeded
            self._to_unassign |= unneeded
            for p in unneeded:
                self._applied.pop(p, None)

    def is_ready(self, topic_id_partition: TopicIdPartition) -> bool:
        """Kafka's ``isReady``: the partition's metadata has been loaded."""
        with self._lock:
            return topic_id_partition in self._caches and self._loaded(topic_id_partition)

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
            self._offsets.close()
        if self._producer is not None:
            self._producer.flush(5)
            self._producer = None


def _client_props(configs: Mapping[str, object], prefix: str) -> dict[str, ConfigValue]:
    out: dict[str, ConfigValue] = {}
    for key, value in configs.items():
        if key.startswith(prefix) and isinstance(value, str | int | float | bool):
            out[key[len(prefix):]] = value
    return out
