"""One partition replica on this broker: its log, its role, ISR and high watermark.

The structures are the replicated design's (leader epoch, partition epoch, replicas, ISR, the
log end offsets of remote replicas, a high watermark that is the minimum log end offset over
the ISR); with a single node the ISR is this broker alone, so the high watermark follows the
log end offset at once. Used from the event loop only; the ``UnifiedLog`` underneath has its own lock.

Idempotence and transactions live in the log (``UnifiedLog.append_as_leader`` checks producer batches,
``UnifiedLog.last_stable_offset``, ``UnifiedLog.collect_aborted_transactions``); the partition passes them on:
a duplicate produce answers the original offsets, markers come through :meth:`Partition.append_marker`.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Generic, Literal, NamedTuple, TypeVar

from strom.core.config import LogConfig
from strom.core.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from strom.core.log.log import LogOffsetSnapshot, UnifiedLog
from strom.core.log.producer_state import ProducerStateEntry
from strom.core.records.batch import BatchHeader, iter_headers
from strom.core.records.pieces import RecordPieces
from strom.core.records.validate import validate_produce_batches


class AppendResult(NamedTuple):
    """What Produce answers for one partition's append. A NamedTuple, immutable as the frozen
    dataclass it was, and made for every append at a third of that one's cost."""

    first_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    # The batch was a retry of one already in the log: nothing was appended, the offsets are
    # the original ones (Kafka answers NONE with them).
    duplicate: bool = False


_make_append_result = AppendResult._make


class ValidatedRecords(NamedTuple):
    """A produce request's records for one partition, validated: the bytes (a private copy the
    append patches in place) and the position and header of each batch."""

    buf: bytearray
    batches: list[tuple[int, BatchHeader]]


Records = TypeVar("Records", bytes, RecordPieces)


@dataclass(frozen=True, slots=True)
class ReadResult(Generic[Records]):
    records: Records  # bytes from the local log; RecordPieces from a remote read (chunk views)
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int
    # read_committed only: (producer id, first offset) of the aborted transactions overlapping
    # the returned batches (FetchResponse AbortedTransactions); None for read_uncommitted.
    aborted_transactions: list[tuple[int, int]] | None = None


class ProducerRow(NamedTuple):
    """One active producer of a partition, as DescribeProducers answers it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1: no transaction open


class Partition:
    """A replica of one topic-partition hosted by this broker.

    The partition owns its log: callers ask the partition (Kafka's ``Partition`` methods), never
    reach through to the log, so leadership and the high watermark are checked in one place.
    """

    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: UnifiedLog, local_id: int) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.local_id = local_id
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        # Log end offsets of the other replicas, as learnt from their fetches (leader only).
        self.remote_leos: dict[int, int] = {}
        # What a compressed produce batch may expand to (strom.decompression.max.bytes, set by
        # the ReplicaManager; None: no bound).
        self.decompression_max_bytes: int | None = None
        self._name = f"{topic}-{index}"

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_id

    @property
    def config(self) -> LogConfig:
        return self.log.config

    def update_config(self, config: LogConfig) -> None:
        """The topic's config changed (a committed ConfigRecord or a dynamic broker default)."""
        self.log.update_config(config)

    def apply_registration(self, replicas: tuple[int, ...], isr: tuple[int, ...], leader: int,
                           leader_epoch: int, partition_epoch: int) -> None:
        """Take the partition's state from a committed metadata registration."""
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self.leader_id = leader
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.remote_leos = {r: self.remote_leos.get(r, 0) for r in self.replicas if r != self.local_id}
        if self.is_leader:
            self.maybe_increment_high_watermark()

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Kafka's fencing of requests that carry a leader epoch (KIP-320)."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(f"epoch {current_leader_epoch} < current {self.leader_epoch}")
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(f"epoch {current_leader_epoch} > current {self.leader_epoch}")

    # -- produce ------------------------------------------------------------------------------

    def append_records_as_leader(self, records: bytes, required_acks: int, *,
                                 inline_bytes: int | None = None) -> AppendResult:
        """Validate and append a produce request's records for this partition.

        With ``inline_bytes`` (the event loop calls it so) validation may raise
        :class:`~strom.core.records.validate.ValidateOffLoop`: validate in a worker thread with
        :meth:`validate_records`, then :meth:`append_validated`.
        """
        self._check_can_append(required_acks)
        return self.append_validated(self.validate_records(records, inline_bytes=inline_bytes), required_acks)

    def validate_records(self, records: bytes, *, inline_bytes: int | None = None) -> ValidatedRecords:
        """Kafka's LogValidator over a produce request's records for this partition. Reads only
        the topic's config: safe to run in a worker thread."""
        config = self.log.config
        buf = bytearray(records)
        batches = validate_produce_batches(
            buf, max_batch_bytes=config.max_message_bytes, compacted=config.compact,
            now_ms=int(time.time() * 1000),
            timestamp_before_max_ms=config.message_timestamp_before_max_ms,
            timestamp_after_max_ms=config.message_timestamp_after_max_ms,
            log_append_time=config.log_append_time, topic_partition=self._name,
            max_decompressed_bytes=self.decompression_max_bytes, inline_bytes=inline_bytes)
        return ValidatedRecords(buf, batches)

    def append_validated(self, validated: ValidatedRecords, required_acks: int) -> AppendResult:
        """Append records :meth:`validate_records` accepted (leadership is checked again: a
        validation in a worker thread may have outlived it)."""
        return self.append_as_leader(validated.buf, validated.batches, required_acks, origin="client")

    def append_as_leader(self, buf: bytearray, batches: list[tuple[int, BatchHeader]], required_acks: int, *,
                         origin: Literal["client", "coordinator"]) -> AppendResult:
        """The one leader append (Kafka's ``Partition.appendRecordsToLeader``): leadership and
        min.insync.replicas checked, offsets assigned in ``buf``, the high watermark moved.
        ``origin="coordinator"``: batches the broker built itself (Kafka's AppendOrigin.COORDINATOR),
        which skip client validation and may carry a producer id without a sequence."""
        self._check_can_append(required_acks)
        info = self.log.append_as_leader(buf, batches, self.leader_epoch, origin=origin)
        self.maybe_increment_high_watermark()
        # The log's answer already holds what Produce returns: the append time is -1 unless the
        # topic uses LogAppendTime (and for a duplicate), the log start offset is the one at the
        # append (as Kafka answers from its LogAppendInfo).
        return _make_append_result((info.first_offset, info.last_offset, info.log_append_time_ms,
                                    info.log_start_offset, info.duplicate))  # _make: no namedtuple __new__

    def _check_can_append(self, required_acks: int) -> None:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.local_id} is not the leader of {self.topic}-{self.index}")
        if required_acks == -1 and len(self.isr) < self.log.config.min_insync_replicas:
            raise NotEnoughReplicasError(
                f"ISR {list(self.isr)} is smaller than min.insync.replicas={self.log.config.min_insync_replicas}")

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int, *, transaction_version: int = 0) -> AppendResult:
        """Write a COMMIT/ABORT control marker as the leader (WriteTxnMarkers).

        Raises NotLeaderOrFollowerError off the leader, InvalidProducerEpochError for a stale
        producer epoch, TransactionCoordinatorFencedError for a stale coordinator epoch.
        """
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.local_id} is not the leader of {self.topic}-{self.index}")
        info = self.log.append_control_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                                              self.leader_epoch, transaction_version=transaction_version)
        self.maybe_increment_high_watermark()
        return AppendResult(info.first_offset, info.last_offset, -1, self.log.log_start_offset)

    def aborted_transactions(self, fetch_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """``(producer_id, first_offset)`` of aborted transactions overlapping ``[fetch_offset, upper)``."""
        return self.log.collect_aborted_transactions(fetch_offset, upper_bound_offset)

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min log end offset over the ISR (this broker's LEO for itself)."""
        leo = self.log.log_end_offset
        isr = self.isr
        if not isr or isr == (self.local_id,):  # the leader alone (the usual single node): no list
            new_hw = leo
        else:
            new_hw = min([leo] + [self.remote_leos.get(r, 0) for r in isr if r != self.local_id])
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            return True
        return False

    # -- fetch --------------------------------------------------------------------------------

    def read_records(self, fetch_offset: int, max_bytes: int, *, replica_id: int = -1,
                     min_one_message: bool = True, isolation_level: int = 0) -> ReadResult[bytes]:
        """Read whole batches from ``fetch_offset``; consumers are bounded by the high watermark
        (read_uncommitted) or the last stable offset (read_committed), followers by the LEO."""
        log = self.log
        hw = log.high_watermark
        lso = self.last_stable_offset
        max_offset = None if replica_id >= 0 else lso if isolation_level == 1 else hw
        info = log.read(fetch_offset, max_bytes, max_offset, min_one_message)
        aborted = None
        if isolation_level == 1 and replica_id < 0:
            aborted = []
            if info.records:
                # Kafka bounds the search by the end of the data returned (header walk only).
                upper = lso
                for _, h in iter_headers(info.records):
                    upper = h.next_offset
                aborted = log.collect_aborted_transactions(fetch_offset, upper)
        return ReadResult(bytes(info.records), hw, lso, log.log_start_offset, log.log_end_offset, aborted)

    @property
    def last_stable_offset(self) -> int:
        """min(first offset of the oldest ongoing transaction, high watermark)."""
        return int(self.log.last_stable_offset)

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_dir(self) -> str:
        """The log dir holding this partition's directory (DescribeLogDirs groups by it)."""
        return str(self.log.dir.parent)

    @property
    def size_in_bytes(self) -> int:
        return self.log.size_in_bytes

    def read_to_log_end(self, offset: int, max_bytes: int) -> bytes | bytearray | memoryview:
        """Whole batches from ``offset`` up to the log end, control batches included (Kafka's
        FetchIsolation.LOG_END, as a coordinator loads its partition); empty past the end."""
        return self.log.read(offset, max_bytes, None, True).records

    def fetch_offset_snapshot(self) -> LogOffsetSnapshot:
        """Log start, LEO, HW and LSO with their place on disk where known, reading no segment
        (Kafka's ``Partition.fetchOffsetSnapshot``: what a delayed fetch compares with)."""
        return self.log.fetch_offset_snapshot()

    def fetch_offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """``(offset, timestamp, leader epoch)`` of the first record at or after ``timestamp``
        (ListOffsets; -1 latest, -2 earliest, -3 max timestamp, -4 earliest local)."""
        return self.log.fetch_offset_by_timestamp(timestamp)

    def last_offset_for_leader_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` of the largest epoch <= ``leader_epoch`` (OffsetForLeaderEpoch)."""
        return self.log.end_offset_for_epoch(leader_epoch)

    def delete_records_on_leader(self, offset: int) -> int:
        """Move the log start offset up to ``offset`` (DeleteRecords); returns the low watermark."""
        self.log.maybe_increment_log_start_offset(offset)
        return self.log.log_start_offset

    def needs_flush(self) -> bool:
        """flush.messages / flush.ms ask for an fsync before the ack (cheap when neither is set)."""
        return self.log.config.flushes and self.log.needs_flush()

    def flush(self) -> None:
        """fsync the log (blocking: call it off the event loop)."""
        self.log.flush()

    def producer_entry(self, producer_id: int) -> ProducerStateEntry | None:
        """The producer's last state on this partition (idempotence, KIP-890's verification)."""
        return self.log.producer_state.producers.get(producer_id)  # last_entry(), without the call

    def active_producers(self) -> list[ProducerRow]:
        """Every producer the partition keeps state for (Kafka's ``activeProducerState``).

        Read under the log's lock: appends change the producer state from worker threads too.
        """
        log = self.log
        with log.lock:
            return [ProducerRow(e.producer_id, e.producer_epoch, e.last_seq, e.last_timestamp, e.coordinator_epoch,
                                -1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
                    for e in log.producer_state.producers.values()]
