"""ReplicaManager: the partitions this broker hosts, driven by the metadata log.

It is a metadata publisher: every committed metadata change arrives as a new image, and the
manager creates logs for new partitions, applies leader/ISR changes, applies topic config
changes and deletes the logs of deleted topics. Produce and fetch handlers go through it.
Event-loop only; appends wake delayed fetches through the fetch purgatory.

The purgatories are the server's (``strom.core.server.purgatory``), handed in by whoever builds
the manager: the replica layer names only what it calls on them (:class:`DelayedOperations`), so
it imports nothing from the server layer above it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import Future
from typing import Protocol

from strom.core.config import BrokerConfig, LogConfig
from strom.core.errors import KafkaStorageError, UnknownTopicOrPartitionError
from strom.core.log.manager import LogManager
from strom.core.metadata.delta import MetadataDelta
from strom.core.metadata.image import MetadataImage
from strom.core.records.batch import iter_headers
from strom.core.records.pieces import RecordPieces
from strom.core.replica.partition import AppendResult, Partition, ValidatedRecords

log = logging.getLogger(__name__)

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4


class DelayedOperations(Protocol):
    """Requests waiting on partitions (Kafka's DelayedOperationPurgatory): a change to a key wakes
    its waiters, which re-check their condition."""

    async def wait_until(self, keys: Iterable[Hashable], condition: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``condition()`` holds (re-checked when a key is touched) or the timeout."""
        ...

    def check_and_complete(self, key: Hashable) -> int:
        """Wake the waiters of ``key``; how many were woken."""
        ...


class RemoteFetcher(Protocol):
    """Reads of a tiered partition below its local log start, served from remote storage (the
    broker's remote tier; Kafka's ``RemoteLogManager.asyncRead``)."""

    max_wait_s: float  # remote.fetch.max.wait.ms

    def read(self, part: Partition, offset: int, max_bytes: int, min_one_message: bool,
             read_committed: bool) -> Future[tuple[RecordPieces, list[tuple[int, int]] | None]]:
        """Whole batches from the remote segment holding ``offset``, read on a reader thread, with
        the aborted transactions over them when ``read_committed`` (else ``None``)."""
        ...


# The remote tier's view of leadership (KIP-405): (new leaders, new followers, stopped
# partitions as (topic, index, topic id, whether the topic was deleted)), for partitions of
# remote.storage.enable topics only.
StoppedPartition = tuple[str, int, uuid.UUID, bool]
RemoteRolesListener = Callable[[list[Partition], list[Partition], list[StoppedPartition]], None]


class ReplicaManager:
    """Owns every :class:`Partition` of this broker."""

    def __init__(self, config: BrokerConfig, log_manager: LogManager, *, fetch_purgatory: DelayedOperations,
                 produce_purgatory: DelayedOperations) -> None:
        self.config = config
        self.log_manager = log_manager
        self.node_id = config.node_id
        self.partitions: dict[tuple[str, int], Partition] = {}
        # Fetches waiting for data (woken by appends); acks=all produces waiting for the high
        # watermark.
        self.fetch_purgatory = fetch_purgatory
        self.produce_purgatory = produce_purgatory
        self._topic_configs: dict[str, dict[str, str]] = {}
        self._dynamic_broker: dict[str, str] = {}
        # Partitions whose log could not be created (every log dir offline): they answer
        # KAFKA_STORAGE_ERROR, as Kafka's offline partitions do; the next image retries them.
        self.offline_partitions: dict[tuple[str, int], str] = {}
        # Set only when remote.log.storage.system.enable is on; None costs the metadata path nothing.
        self._remote_roles_listener: RemoteRolesListener | None = None
        self._remote_roles: dict[tuple[str, int], tuple[uuid.UUID, bool]] = {}
        self.remote_fetcher: RemoteFetcher | None = None

    # -- metadata publisher -------------------------------------------------------------------

    def on_metadata_update(self, delta: MetadataDelta | None, image: MetadataImage) -> None:
        """Reconcile hosted partitions with a newly committed metadata image."""
        live: set[tuple[str, int]] = set()
        dynamic = {**image.configs.get((BROKER_RESOURCE, ""), {}),
                   **image.configs.get((BROKER_RESOURCE, str(self.node_id)), {})}
        dynamic_changed = dynamic != self._dynamic_broker
        self._dynamic_broker = dynamic
        for topic in image.topics.values():
            overrides = dict(image.configs.get((TOPIC_RESOURCE, topic.name), {}))
            config_changed = dynamic_changed or self._topic_configs.get(topic.name) != overrides
            if config_changed and overrides.get("remote.storage.enable") == "true" \
                    and not self.config.remote_log_storage_system_enable:
                # Kafka 4.3 (LogManager.updateTopicConfig, a non-fatal metadata publishing fault):
                # the broker runs on and the log, not tiered here, serves its local data only.
                log.error("Error updating topic %s with new configuration: %s: You have to delete all topics "
                          "with the property remote.storage.enable=true before disabling tiered storage "
                          "cluster-wide (remote.log.storage.system.enable=false on this broker); the topic "
                          "serves its local data only", topic.name, overrides)
            self._topic_configs[topic.name] = overrides
            for index, reg in topic.partitions.items():
                if self.node_id not in reg.replicas:
                    continue
                key = (topic.name, index)
                live.add(key)
                part = self.partitions.get(key)
                if part is None or part.topic_id != topic.topic_id:
                    if part is not None:  # same name, new topic id: the old topic was deleted
                        self._drop(part)
                    try:
                        part = self._create(topic.name, index, topic.topic_id, overrides)
                    except KafkaStorageError as e:  # logged once by the log dir failure channel
                        self.offline_partitions[key] = e.message
                        continue
                    self.offline_partitions.pop(key, None)
                elif config_changed:
                    part.update_config(self._log_config(overrides))
                part.apply_registration(tuple(reg.replicas), tuple(reg.isr), reg.leader,
                                        reg.leader_epoch, reg.partition_epoch)
        for key in [k for k in self.partitions if k not in live]:
            self._drop(self.partitions[key])
        for key in [k for k in self.offline_partitions if k not in live]:
            del self.offline_partitions[key]
        for name in [n for n in self._topic_configs if n not in image.topics]:
            del self._topic_configs[name]
        if self._remote_roles_listener is not None:
            self._publish_remote_roles(self._remote_roles_listener, image)

    def set_remote_roles_listener(self, listener: RemoteRolesListener | None) -> None:
        """Tell ``listener`` the roles of every tiered partition now, then each change (Kafka's
        ``RemoteLogManager.onLeadershipChange`` / ``stopPartitions`` calls)."""
        self._remote_roles_listener = listener
        self._remote_roles = {}
        if listener is not None:
            self._publish_remote_roles(listener, None)

    def _publish_remote_roles(self, listener: RemoteRolesListener, image: MetadataImage | None) -> None:
        current = {key: (part.topic_id, part.is_leader) for key, part in self.partitions.items()
                   if part.log.config.get("remote.storage.enable")}
        leaders: list[Partition] = []
        followers: list[Partition] = []
        for key, role in current.items():
            if self._remote_roles.get(key) != role:
                (leaders if role[1] else followers).append(self.partitions[key])
        stopped = [(key[0], key[1], old[0], image is not None and (
                        old[0] not in image.topics_by_id or self._remote_disabled_with_delete(key, old)))
                   for key, old in self._remote_roles.items() if key not in current or current[key][0] != old[0]]
        self._remote_roles = current
        if leaders or followers or stopped:
            listener(leaders, followers, stopped)

    def _remote_disabled_with_delete(self, key: tuple[str, int], old: tuple[uuid.UUID, bool]) -> bool:
        """KIP-950: the leader of a topic turned to ``remote.storage.enable=false`` with
        ``remote.log.delete.on.disable=true`` moves its log start to the local log start, and its
        remote data is deleted as a deleted topic's is (Kafka's ``maybeUpdateRemoteLogComponents``)."""
        part = self.partitions.get(key)
        if part is None or part.topic_id != old[0] or not part.is_leader \
                or not part.log.config.get("remote.log.delete.on.disable"):
            return False
        part.log.maybe_increment_log_start_offset(part.log.local_log_start_offset)
        return True

    def _log_config(self, overrides: dict[str, str]) -> LogConfig:
        return LogConfig.build(self.config, overrides, self._dynamic_broker)

    def _create(self, topic: str, index: int, topic_id: uuid.UUID, overrides: dict[str, str]) -> Partition:
        config = self._log_config(overrides)
        plog = self.log_manager.get_or_create_log(topic, index, topic_id, config)
        plog.update_config(config)  # a log loaded at start-up got the broker defaults
        part = Partition(topic, index, topic_id, plog, self.node_id)
        part.decompression_max_bytes = self.config.decompression_max_bytes
        self.partitions[part.key] = part
        return part

    def _drop(self, part: Partition) -> None:
        log.info("deleting partition %s-%d", part.topic, part.index)
        self.partitions.pop(part.key, None)
        self.log_manager.delete_log(part.topic, part.index)
        self.fetch_purgatory.check_and_complete(part.key)

    # -- data path ----------------------------------------------------------------------------

    def get_partition(self, topic: str, index: int) -> Partition:
        part = self.partitions.get((topic, index))
        if part is None:
            offline = self.offline_partitions.get((topic, index))
            if offline is not None:
                raise KafkaStorageError(f"{topic}-{index} is offline: {offline}")
            raise UnknownTopicOrPartitionError(f"this broker does not host {topic}-{index}")
        return part

    def append_records(self, topic: str, index: int, records: bytes, required_acks: int) -> AppendResult:
        return self.append_to_partition(self.get_partition(topic, index), records, required_acks)

    def append_to_partition(self, part: Partition, records: bytes, required_acks: int, *,
                            inline_bytes: int | None = None) -> AppendResult:
        """Produce's append to a partition it has looked up: validate, append, wake the fetches.
        With ``inline_bytes``, ValidateOffLoop means: validate in a thread, then append_validated."""
        return self._appended(part, part.append_records_as_leader(records, required_acks, inline_bytes=inline_bytes))

    def append_coordinator_records(self, part: Partition, batch: bytes | bytearray, *,
                                   required_acks: int = 1) -> AppendResult:
        """Append a batch the broker built (a coordinator's state records: Kafka's
        AppendOrigin.COORDINATOR, no client validation) as the leader, wake the fetches."""
        buf = bytearray(batch)
        return self._appended(part, part.append_as_leader(buf, list(iter_headers(buf)), required_acks,
                                                          origin="coordinator"))

    def append_marker(self, part: Partition, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int, *, transaction_version: int = 0) -> AppendResult:
        """Write a COMMIT/ABORT marker as the leader (WriteTxnMarkers), wake the fetches."""
        return self._appended(part, part.append_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                                                       transaction_version=transaction_version))

    def _appended(self, part: Partition, result: AppendResult) -> AppendResult:
        self.fetch_purgatory.check_and_complete(part.key)
        return result

    def append_validated(self, part: Partition, validated: ValidatedRecords, required_acks: int) -> AppendResult:
        """Append records validated off the event loop (Partition.validate_records), wake the fetches."""
        return self._appended(part, part.append_validated(validated, required_acks))

    def partitions_of(self, keys: Iterable[tuple[str, int]]) -> list[Partition | None]:
        return [self.partitions.get(k) for k in keys]
