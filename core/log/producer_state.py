"""Producer state of one partition log: idempotent sequence checks, duplicates, open transactions.

Kafka's ``ProducerStateManager`` / ``ProducerAppendInfo`` / ``ProducerStateEntry``:

* per producer id: epoch, the metadata of its last 5 batches (sequences and offsets, for
  duplicate detection), the first offset of its ongoing transaction, the coordinator epoch of
  its last transaction marker and the timestamp of its last write;
* validation of an append (:class:`ProducerAppendInfo`) by origin: ``client`` appends get the
  epoch and sequence checks, ``coordinator`` appends (markers, transactional offset commits)
  the epoch check only, ``replication`` appends (followers, rebuilding from the log) none;
* the ongoing transactions, ordered by first offset: their minimum is the log's first
  unstable offset, which bounds the last stable offset;
* snapshots ``<20-digit offset>.snapshot`` in Kafka's format (``ProducerSnapshot`` v1): int16
  version, uint32 CRC-32C of the rest, int32 entry count, then per producer
  ``producer_id int64, epoch int16, last_sequence int32, last_offset int64, offset_delta int32,
  timestamp int64, coordinator_epoch int32, current_txn_first_offset int64`` (-1 = none). As in
  Kafka a snapshot keeps only each producer's last batch.

Thread-safety: not thread-safe; the owning :class:`~strom.core.log.log.UnifiedLog` calls it under its lock.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import crc32c

from strom.core.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
)
from strom.core.exceptions import CorruptSnapshotError, KafkaError

logger = logging.getLogger(__name__)

ORIGIN_CLIENT = "client"
ORIGIN_COORDINATOR = "coordinator"
ORIGIN_REPLICATION = "replication"
_ORIGINS = (ORIGIN_CLIENT, ORIGIN_COORDINATOR, ORIGIN_REPLICATION)

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAP_HEADER = struct.Struct(">hI")  # version, crc
_SNAP_COUNT = struct.Struct(">i")
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_OFFSET = 2
_ENTRIES_OFFSET = 6


SHORT_MAX = 32767


def decrement_sequence(seq: int, dec: int) -> int:
    """Kafka's ``DefaultRecordBatch.decrementSequence`` (sequences wrap at 2**31)."""
    if seq < dec:
        return INT32_MAX - (dec - seq) + 1
    return seq - dec


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def snapshot_path(dir_path: Path, offset: int) -> Path:
    return dir_path / f"{offset:020d}{SNAPSHOT_SUFFIX}"


class BatchMetadata(NamedTuple):
    """One retained batch of a producer (Kafka keeps the last sequence and the offset delta)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


_make_batch_metadata = BatchMetadata._make


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batches[0].first_offset if self.batches else -1

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch,
                                  self.last_timestamp, self.current_txn_first_offset,
                                  deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN))

    def maybe_update_producer_epoch(self, epoch: int) -> bool:
        """A new epoch forgets the batches of the old one (their sequences no longer apply)."""
        if self.producer_epoch != epoch:
            self.batches.clear()
            self.producer_epoch = epoch
            return True
        return False

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int,
                  txn_first_offset: int | None = None) -> None:
        """A data batch; ``txn_first_offset`` when it opens a transaction (its first offset)."""
        if self.producer_epoch != epoch:  # maybe_update_producer_epoch, inline (once per append)
            self.batches.clear()
            self.producer_epoch = epoch
        # _make: the namedtuple's Python __new__ skipped (one batch per producer append).
        self.batches.append(_make_batch_metadata((last_seq, last_offset, offset_delta, timestamp)))
        self.last_timestamp = timestamp
        if txn_first_offset is not None:
            self.current_txn_first_offset = txn_first_offset

    def end_transaction(self, epoch: int, coordinator_epoch: int, timestamp: int) -> None:
        """A COMMIT/ABORT marker: the transaction is over (Kafka's ``ProducerStateEntry.update``)."""
        self.maybe_update_producer_epoch(epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = None
        self.last_timestamp = timestamp

    def find_duplicate_batch(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.last_seq == last_seq and b.first_seq == first_seq:  # a field first: first_seq is computed
                return b
        return None


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


class ProducerAppendInfo:
    """The checks and state changes of one append for one producer.

    Nothing is changed in the manager until :meth:`ProducerStateManager.update` commits it, so an
    append that fails validation leaves the producer state untouched. The checks read the
    producer's committed entry, and the one change an append usually makes (one batch or one
    marker) waits as a pending call that the commit applies to that entry in place: no entry is
    copied per append. A second batch or marker of the same producer in one append (a follower's
    run of batches, a replay) first applies the pending change to a private copy of the entry
    and works on that copy from then on, as does an append of a producer with no entry yet.
    """

    __slots__ = ("_current_epoch", "_entry", "_owned", "_pending", "origin", "producer_id", "started_txns")

    def __init__(self, producer_id: int, current: ProducerStateEntry | None, origin: str) -> None:
        if origin not in _ORIGINS:
            raise ValueError(f"unknown append origin {origin!r}; expected one of {_ORIGINS}")
        self.producer_id = producer_id
        self.origin = origin
        if current is None:
            self._current_epoch = NO_PRODUCER_EPOCH
            self._entry = ProducerStateEntry(producer_id)
            self._owned = True  # a new entry of this append's own: changed at once
        else:
            self._current_epoch = current.producer_epoch
            self._entry = current  # the committed entry: read only until the commit
            self._owned = False
        # A change to the committed entry, left for the commit: (ProducerStateEntry method, args).
        self._pending: tuple[Callable[..., None], tuple[int | None, ...]] | None = None
        self.started_txns: list[int] = []  # first offsets of transactions begun by this append

    def _state(self) -> ProducerStateEntry:
        """The entry the next check reads: the committed one while no change is pending, else a
        private copy with the pending change applied."""
        pending = self._pending
        if pending is not None:
            entry = self._entry.copy()
            pending[0](entry, *pending[1])
            self._entry, self._owned, self._pending = entry, True, None
        return self._entry

    def _change(self, entry: ProducerStateEntry, method: Callable[..., None], args: tuple[int | None, ...]) -> None:
        """``method(entry, *args)`` now on an entry of this append's own, else at the commit."""
        if self._owned:
            method(entry, *args)
        else:
            self._pending = (method, args)

    def commit(self, producers: dict[int, ProducerStateEntry]) -> None:
        """Apply the append to ``producers`` (the manager's map; :meth:`ProducerStateManager.update`)."""
        pending = self._pending
        if pending is not None:
            pending[0](self._entry, *pending[1])  # the committed entry, changed in place
            self._pending = None
        elif self._owned:
            producers[self.producer_id] = self._entry

    def _refuse(self, error: type[KafkaError], msg: str, level: int = logging.WARNING) -> None:
        """Refuse a client's or coordinator's append with ``error``; a replicated one (a follower,
        or a log being rebuilt) must still load, so there it is only logged."""
        if self.origin != ORIGIN_REPLICATION:
            raise error(msg)
        logger.log(level, "%s", msg)

    def _reject_epoch(self, epoch: int, current: int, offset: int) -> None:
        # Kafka 2.7+ answers INVALID_PRODUCER_EPOCH here (PRODUCER_FENCED is the coordinator's).
        self._refuse(InvalidProducerEpochError, f"epoch of producer {self.producer_id} at offset {offset} "
                                                f"is {epoch}, older than the last seen epoch {current}")

    def _check_producer_epoch(self, entry: ProducerStateEntry, epoch: int, offset: int,
                              transaction_version: int = 0) -> None:
        current = entry.producer_epoch
        # TV2 markers always carry a bumped epoch, so an equal epoch is stale there (KIP-890),
        # unless it is the retry of a marker already written (no transaction open any more).
        invalid = epoch <= current if transaction_version >= 2 else epoch < current
        if not invalid:
            return
        if transaction_version >= 2 and epoch == current and (
                entry.current_txn_first_offset is None or epoch == SHORT_MAX):
            # A retried marker (no transaction open), or one at the last epoch, which cannot be bumped.
            return
        self._reject_epoch(epoch, current, offset)

    def _check_sequence(self, entry: ProducerStateEntry, epoch: int, first_seq: int, offset: int) -> None:
        if epoch != entry.producer_epoch:
            # A new epoch must start over at 0, unless the producer is unknown here (its state
            # may have been removed by retention or expiration: Kafka then accepts any sequence).
            if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceNumberError(
                    f"invalid sequence number for new epoch of producer {self.producer_id} at offset {offset}: "
                    f"{epoch} (request epoch), {first_seq} (sequence), {entry.producer_epoch} (current epoch)")
            return
        batches = entry.batches
        last_seq = batches[-1].last_seq if batches else NO_SEQUENCE
        if not (self._current_epoch == NO_PRODUCER_EPOCH or first_seq == last_seq + 1
                or (first_seq == 0 and last_seq == INT32_MAX)):  # in_sequence(last_seq, first_seq), inline
            raise OutOfOrderSequenceNumberError(
                f"out of order sequence number for producer {self.producer_id} at offset {offset}: "
                f"{first_seq} (incoming sequence), {last_seq} (current end sequence)")

    def append_data_batch(self, epoch: int, first_seq: int, last_seq: int, timestamp: int,
                          first_offset: int, last_offset: int, transactional: bool) -> None:
        entry = self._entry if self._pending is None else self._state()
        if epoch < entry.producer_epoch:  # _check_producer_epoch for a data batch, inline
            self._reject_epoch(epoch, entry.producer_epoch, first_offset)
        if self.origin == ORIGIN_CLIENT:
            self._check_sequence(entry, epoch, first_seq, first_offset)
        # A new epoch does not end the open transaction: the batch is checked against it as it stands.
        txn_first = entry.current_txn_first_offset
        if txn_first is not None and not transactional:
            # Kafka raises for followers too; a log being rebuilt must still load, so only warn.
            self._refuse(InvalidTxnStateError,
                         f"expected a transactional write from producer {self.producer_id} at offset {first_offset}")
        starts_txn = txn_first is None and transactional
        if starts_txn:
            self.started_txns.append(first_offset)
        self._change(entry, ProducerStateEntry.add_batch, (epoch, last_seq, last_offset, last_offset - first_offset,
                                                           timestamp, first_offset if starts_txn else None))

    def append_end_txn_marker(self, commit: bool, epoch: int, coordinator_epoch: int, offset: int,
                              timestamp: int, transaction_version: int = 0) -> CompletedTxn | None:
        """A COMMIT/ABORT marker at ``offset``; returns the completed transaction (None if it held no data)."""
        entry = self._entry if self._pending is None else self._state()
        self._check_producer_epoch(entry, epoch, offset, transaction_version)
        if entry.coordinator_epoch > coordinator_epoch:
            self._refuse(TransactionCoordinatorFencedError,
                         f"invalid coordinator epoch for producer {self.producer_id} at offset {offset}: "
                         f"{coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)", logging.INFO)
        first = entry.current_txn_first_offset
        completed = None if first is None else CompletedTxn(self.producer_id, first, offset, not commit)
        self._change(entry, ProducerStateEntry.end_transaction, (epoch, coordinator_epoch, timestamp))
        return completed


class ProducerStateManager:
    """All producers of one partition log, its ongoing transactions and its snapshot files."""

    def __init__(self, dir_path: Path, *, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.dir = dir_path
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        # Ongoing transactions: first offset -> producer id, with the first offsets kept sorted.
        self._ongoing: dict[int, int] = {}
        self._ongoing_offsets: list[int] = []
        self.map_end_offset = 0  # the state reflects every batch below this offset
        self.last_snap_offset = 0
        self._unsynced_snapshots: list[Path] = []

    # -- queries ------------------------------------------------------------------------------

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest ongoing transaction (None when there is none)."""
        return self._ongoing_offsets[0] if self._ongoing_offsets else None

    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its ongoing transaction."""
        return {pid: first for first, pid in self._ongoing.items()}

    def last_stable_offset_after(self, txn: CompletedTxn) -> int:
        """The LSO once ``txn`` completes: the next other ongoing transaction, else after its marker."""
        for first in self._ongoing_offsets:
            if self._ongoing[first] != txn.producer_id:
                return first
        return txn.last_offset + 1

    # -- updates ------------------------------------------------------------------------------

    def prepare_update(self, producer_id: int, origin: str) -> ProducerAppendInfo:
        return ProducerAppendInfo(producer_id, self.producers.get(producer_id), origin)

    def update(self, info: ProducerAppendInfo) -> None:
        """Commit a validated append."""
        info.commit(self.producers)
        for first in info.started_txns:
            self._ongoing[first] = info.producer_id
            bisect.insort(self._ongoing_offsets, first)

    def complete_txn(self, txn: CompletedTxn) -> None:
        if self._ongoing.pop(txn.first_offset, None) is None:
            raise ValueError(f"no ongoing transaction of producer {txn.producer_id} at offset {txn.first_offset}")
        i = bisect.bisect_left(self._ongoing_offsets, txn.first_offset)
        del self._ongoing_offsets[i]

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    def _load_entry(self, entry: ProducerStateEntry) -> None:
        self.producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:
            self._ongoing[entry.current_txn_first_offset] = entry.producer_id
            bisect.insort(self._ongoing_offsets, entry.current_txn_first_offset)

    def _clear(self) -> None:
        self.producers.clear()
        self._ongoing.clear()
        self._ongoing_offsets.clear()

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` without an open transaction."""
        limit = self.producer_id_expiration_ms
        expired = [pid for pid, e in self.producers.items()
                   if e.current_txn_first_offset is None and now_ms - e.last_timestamp >= limit]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    # -- snapshots ----------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        out = []
        for path in self.dir.iterdir():
            stem, _, ext = path.name.partition(".")
            if ext == SNAPSHOT_SUFFIX[1:] and len(stem) == 20 and stem.isdigit():
                out.append(int(stem))
        return sorted(out)

    @property
    def latest_snapshot_offset(self) -> int | None:
        offsets = self.snapshot_offsets()
        return offsets[-1] if offsets else None

    def take_snapshot(self, *, sync: bool = False) -> Path | None:
        """Write the state at ``map_end_offset`` unless a snapshot of it exists already.

        Written to a temporary file and renamed, so a crash leaves the old file or the new one.
        Without ``sync`` the fsync waits for :meth:`sync_snapshots` (the log's next flush).
        """
        if self.map_end_offset <= self.last_snap_offset and snapshot_path(self.dir, self.map_end_offset).exists():
            return None
        path = snapshot_path(self.dir, self.map_end_offset)
        write_snapshot(path, self.producers.values(), sync=sync)
        if not sync:
            self._unsynced_snapshots.append(path)
        self.last_snap_offset = self.map_end_offset
        return path

    def take_unsynced_snapshots(self) -> list[Path]:
        """Snapshot files written since the last call (the caller fsyncs them outside its lock)."""
        out, self._unsynced_snapshots = self._unsynced_snapshots, []
        return out

    def delete_snapshots_before(self, offset: int) -> None:
        for off in self.snapshot_offsets():
            if off < offset:
                snapshot_path(self.dir, off).unlink(missing_ok=True)

    def delete_snapshots_after(self, offset: int) -> None:
        for off in self.snapshot_offsets():
            if off > offset:
                snapshot_path(self.dir, off).unlink(missing_ok=True)

    def truncate_and_reload(self, log_start: int, log_end: int, max_snapshot_offset: int, now_ms: int) -> None:
        """Drop snapshots outside [first segment base, log end], then load the newest valid
        snapshot at or below ``max_snapshot_offset``; ``map_end_offset`` says where replay starts.

        Kafka's ``truncateAndReload`` + ``loadFromSnapshot``: a corrupt snapshot is deleted and
        the next older one tried; without one, the state is empty from ``log_start``. Expired
        producers are not loaded.
        """
        self.delete_snapshots_before(log_start)
        self.delete_snapshots_after(log_end)
        self._clear()
        for off in reversed(self.snapshot_offsets()):
            if off > max_snapshot_offset:
                continue
            path = snapshot_path(self.dir, off)
            try:
                entries = read_snapshot(path)
            except (CorruptSnapshotError, OSError) as e:
                logger.warning("Deleting the corrupt producer snapshot %s: %s", path, e)
                path.unlink(missing_ok=True)
                continue
            for entry in entries:
                if entry.current_txn_first_offset is not None or \
                        now_ms - entry.last_timestamp < self.producer_id_expiration_ms:
                    self._load_entry(entry)
            self.map_end_offset = self.last_snap_offset = off
            return
        self.map_end_offset = self.last_snap_offset = log_start

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._clear()
        self.delete_snapshots_before(2**63 - 1)
        self.map_end_offset = self.last_snap_offset = offset


def write_snapshot(path: Path, entries: Iterable[ProducerStateEntry], *, sync: bool = False) -> None:
    items = list(entries)
    body = bytearray(_SNAP_COUNT.pack(len(items)))
    for e in items:
        body += _SNAP_ENTRY.pack(
            e.producer_id, e.producer_epoch, e.last_seq, e.last_data_offset, e.last_offset_delta,
            e.last_timestamp, e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
    data = _SNAP_HEADER.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + body
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    data = path.read_bytes()
    if len(data) < _ENTRIES_OFFSET + _SNAP_COUNT.size:
        raise CorruptSnapshotError(f"{len(data)} bytes is too short for a snapshot")
    version, crc = _SNAP_HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    computed = crc32c.crc32c(memoryview(data)[_ENTRIES_OFFSET:])
    if computed != crc:
        raise CorruptSnapshotError(f"CRC mismatch (stored 0x{crc:08x}, computed 0x{computed:08x})")
    (count,) = _SNAP_COUNT.unpack_from(data, _ENTRIES_OFFSET)
    start = _ENTRIES_OFFSET + _SNAP_COUNT.size
    if count < 0 or len(data) != start + count * _SNAP_ENTRY.size:
        raise CorruptSnapshotError(f"{count} entries do not fit {len(data)} bytes")
    out = []
    for pid, epoch, last_seq, last_offset, delta, ts, coord_epoch, txn_first in _SNAP_ENTRY.iter_unpack(data[start:]):
        entry = ProducerStateEntry(pid, epoch, coord_epoch, ts, None if txn_first < 0 else txn_first)
        if last_offset >= 0:
            entry.batches.append(BatchMetadata(last_seq, last_offset, delta, ts))
        out.append(entry)
    return out
