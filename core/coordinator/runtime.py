"""Coordinator runtime: the internal topics the group and transaction coordinators live in.

A coordinator's state is records in a compacted internal topic (``__consumer_offsets``,
``__transaction_state``). This runtime creates those topics through the controller, appends a
coordinator's records to one of their partitions as the partition leader, reads a partition
back from its log start so a coordinator can replay it at start-up, and writes transaction
markers (COMMIT/ABORT control batches) to the partitions of a transaction.

Appends bypass client validation: the batches are built here (coordinator origin) and may carry
a producer id without a sequence, as Kafka's coordinators write them. Event-loop only.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from kio.schema.errors import ErrorCode

from strom.core.config import BrokerConfig
from strom.core.controller.quorum_controller import CreatableTopic
from strom.core.errors import KafkaError, for_code
from strom.core.metadata.image import MetadataImage
from strom.core.records.batch import iter_headers
from strom.core.records.builder import LogRecord, build_keyed_batch, decode_records
from strom.core.replica.manager import ReplicaManager

if TYPE_CHECKING:
    from strom.core.coordinator.group.coordinator import GroupCoordinator

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
READ_CHUNK_BYTES = 1 << 20


def java_string_hashcode(value: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@functools.lru_cache(maxsize=16384)  # asked on every group/transaction request; the hash loops in Python
def java_hash_partition(key: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % partitions``: the coordinator partition of a key."""
    h = java_string_hashcode(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class CoordinatorNode(Protocol):
    """What every coordinator uses of the node it runs in (the broker satisfies it): the config,
    the metadata image and the replica manager (leadership of the internal topics' partitions).
    The runtime and each coordinator's host Protocol add what only they use."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def image(self) -> MetadataImage: ...
    @property
    def replica_manager(self) -> ReplicaManager: ...


class CoordinatorHost(CoordinatorNode, Protocol):
    """What the runtime needs of the node it runs in: besides :class:`CoordinatorNode`, the
    controller that creates topics and the group coordinator to tell about transactions ending
    on ``__consumer_offsets``."""

    @property
    def group_coordinator(self) -> GroupCoordinator: ...

    async def create_internal_topic(self, topic: CreatableTopic) -> tuple[int, str | None]:
        """Create a topic through the controller: (error code, error message)."""
        ...


class CoordinatorRuntime:
    """Internal-topic I/O shared by the group and transaction coordinators."""

    def __init__(self, broker: CoordinatorHost) -> None:
        self.broker = broker
        self._topic_locks: dict[str, asyncio.Lock] = {}

    # -- topics -------------------------------------------------------------------------------

    def topic_exists(self, name: str, partitions: int | None = None) -> bool:
        topic = self.broker.image.topics.get(name)
        return topic is not None and (partitions is None or len(topic.partitions) >= partitions)

    async def ensure_topic(self, name: str, partitions: int, configs: dict[str, str]) -> None:
        """Create the internal topic through the controller unless it exists."""
        lock = self._topic_locks.setdefault(name, asyncio.Lock())
        async with lock:
            if name in self.broker.image.topics:
                return
            code, message = await self.broker.create_internal_topic(
                CreatableTopic(name=name, num_partitions=partitions, replication_factor=-1, configs=configs))
            if code not in (0, int(ErrorCode.topic_already_exists)):
                raise for_code(code)(f"cannot create internal topic {name}: {message or ErrorCode(code).name}")
            log.info("created internal topic %s with %d partitions", name, partitions)

    # -- appends ------------------------------------------------------------------------------

    async def append(self, topic: str, partition: int, records: list[tuple[bytes | None, bytes | None]],
                     *, producer_id: int = -1, producer_epoch: int = -1, transactional: bool = False) -> int:
        """Append one batch of (key, value) records as the partition leader; returns its last offset."""
        return self.append_now(topic, partition, records, producer_id=producer_id, producer_epoch=producer_epoch,
                               transactional=transactional)

    def append_now(self, topic: str, partition: int, records: list[tuple[bytes | None, bytes | None]],
                   *, producer_id: int = -1, producer_epoch: int = -1, transactional: bool = False) -> int:
        """:meth:`append` without a suspension point: the caller knows nothing runs in between.

        The same leader append as Produce's (``ReplicaManager``), with coordinator origin."""
        if not records:
            raise ValueError("append needs at least one record")
        rm = self.broker.replica_manager
        batch = build_keyed_batch(records, producer_id=producer_id, producer_epoch=producer_epoch,
                                  transactional=transactional)
        return rm.append_coordinator_records(rm.get_partition(topic, partition), batch).last_offset

    # -- reads --------------------------------------------------------------------------------

    def read(self, topic: str, partition: int) -> Iterator[LogRecord]:
        """Every record of a partition from its log start to its log end, control records included."""
        part = self.broker.replica_manager.get_partition(topic, partition)
        offset = part.log_start_offset
        while offset < part.log_end_offset:
            records = part.read_to_log_end(offset, READ_CHUNK_BYTES)
            if not records:
                break
            last = offset
            for record in decode_records(records):
                last = record.offset
                if record.offset >= offset:
                    yield record
            batches = list(iter_headers(records))
            offset = max(last + 1, batches[-1][1].last_offset + 1 if batches else last + 1)

    # -- transaction markers ------------------------------------------------------------------

    async def write_txn_markers(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                                commit: bool, partitions: list[tuple[str, int]],
                                transaction_version: int = 0) -> dict[tuple[str, int], int]:
        """Write a COMMIT or ABORT marker to each partition; returns the error code per partition.

        ``transaction_version`` 2 markers carry the epoch bumped by EndTxn; the partition then
        refuses a marker at the producer's current epoch unless it is a retry (KIP-890).
        """
        rm = self.broker.replica_manager
        results: dict[tuple[str, int], int] = {}
        offsets_touched = False
        for topic, index in partitions:
            try:
                rm.append_marker(rm.get_partition(topic, index), producer_id, producer_epoch, commit,
                                 coordinator_epoch, transaction_version=transaction_version)
                results[(topic, index)] = 0
                offsets_touched = offsets_touched or topic == OFFSETS_TOPIC
            except KafkaError as e:
                results[(topic, index)] = int(e.code)  # the marker's answer per partition (WriteTxnMarkers)
            except Exception as e:
                # The log turns its OSErrors into KafkaStorageError; anything else is a bug.
                log.error("writing a transaction marker to %s-%d failed", topic, index, exc_info=e)
                results[(topic, index)] = int(ErrorCode.unknown_server_error)
        if offsets_touched:
            self.broker.group_coordinator.on_transaction_completed(producer_id, commit)
        return results
