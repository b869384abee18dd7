"""ListOffsets over a tiered log's remote segments (KIP-405): Kafka's
``RemoteLogManager.findOffsetByTimestamp`` / ``RemoteLogOffsetReader`` for a timestamp that falls
in a remote segment, the largest timestamp (-3) when it lives in remote storage, and -6
(EARLIEST_PENDING_UPLOAD, KIP-1023) as ``UnifiedLog.fetchEarliestPendingUploadOffset`` answers it.

A timestamp lookup walks the remote segments of the leader epochs from the log start's on, as
Kafka does: the first COPY_SEGMENT_FINISHED segment whose largest timestamp reaches the target
is searched through its time index and offset index (fetched with the remote storage manager's
``fetch_index`` and kept in a size-bounded cache, Kafka's ``RemoteIndexCache``), then the batches
from that position; a segment also on local disk is searched locally; nothing found remotely
falls back to the local log. Every call here blocks (S3): the binding runs it on its reader
threads, never on the event loop.

No import of ``strom.tiered``: the broker's ListOffsets handler imports this module for -6 on
every broker, tiered or not.
"""

from __future__ import annotations

import logging
import struct
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, BinaryIO

from strom.core.errors import KafkaStorageError
from strom.core.records.builder import decode_records
from strom.plugins.exceptions import RemoteStorageError
from strom.plugins.hookspecs.storage import (
    IndexType,
    RemoteLogMetadataManager,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteStorageManager,
    TopicIdPartition,
)

if TYPE_CHECKING:
    from strom.core.log.log import UnifiedLog

log = logging.getLogger(__name__)

MAX_TIMESTAMP = -3
# (offset, timestamp, leader epoch): what ListOffsets answers for one partition.
TimestampAndOffset = tuple[int, int, int]

_TIME_ENTRY = struct.Struct(">qi")  # a .timeindex entry: timestamp, relative offset
_OFFSET_ENTRY = struct.Struct(">ii")  # an .index entry: relative offset, position
_BATCH_START = struct.Struct(">qi")  # a batch's base offset and length (the bytes after it)
_BATCH_FIELDS = struct.Struct(">i")  # partition leader epoch at byte 12, last offset delta at 23
_MAX_TS_AT = 35  # a batch's max timestamp (8 bytes)
DEFAULT_INDEX_CACHE_BYTES = 64 * 1024 * 1024


def earliest_pending_upload(log_: UnifiedLog) -> TimestampAndOffset:
    """ListOffsets -6 (KIP-1023), as Kafka 4.3's ``fetchEarliestPendingUploadOffset``: the first
    offset not yet in remote storage. A log without remote storage answers no offset (-1, epoch
    -1); a tiered log that copied nothing yet answers the log start (nothing copied) or, when its
    local start is past the log start (copies this leader has not learnt of yet), no offset."""
    with log_.lock:
        if not log_.remote_log_enabled:
            return -1, -1, -1
        highest = log_.highest_offset_in_remote_storage
        log_start = log_.log_start_offset
        if highest == -1:
            if log_.local_log_start_offset != log_start:
                return -1, -1, -1
            first = log_.epoch_cache.earliest_entry
            return log_start, -1, first[0] if first is not None and first[1] <= log_start else -1
        offset = max(highest + 1, log_start)
        epoch = log_.epoch_cache.epoch_for_offset(offset)
        return offset, -1, -1 if epoch is None else epoch


class RemoteIndexCache:
    """Offset and time indexes of remote segments, fetched once and kept up to ``max_bytes``
    (least recently used out first), as Kafka's ``RemoteIndexCache``
    (``remote.log.index.file.cache.total.size.bytes``)."""

    def __init__(self, rsm: RemoteStorageManager, max_bytes: int = DEFAULT_INDEX_CACHE_BYTES) -> None:
        self.rsm = rsm
        self.max_bytes = max_bytes
        self._lock = threading.Lock()  # reader threads share the cache
        self._entries: OrderedDict[tuple[object, IndexType], bytes] = OrderedDict()
        self._size = 0
        self.fetches = 0  # how many indexes were fetched from remote storage (the cache's misses)

    def index(self, meta: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        key = (meta.segment_id.id, index_type)
        with self._lock:
            data = self._entries.get(key)
            if data is not None:
                self._entries.move_to_end(key)
                return data
        with self.rsm.fetch_index(meta, index_type) as stream:
            data = _read_all(stream)
        with self._lock:
            self.fetches += 1
            if key not in self._entries:
                self._entries[key] = data
                self._size += len(data)
            while self._size > self.max_bytes and len(self._entries) > 1:
                _, dropped = self._entries.popitem(last=False)
                self._size -= len(dropped)
        return data

    def lookup_position(self, meta: RemoteLogSegmentMetadata, timestamp: int, starting_offset: int) -> int:
        """Kafka's ``RemoteIndexCache.lookupTimestamp``: the time index's last entry at or below
        ``timestamp`` gives an offset; the offset index gives the position of the last entry at
        or below it (and at or below ``starting_offset``'s, whichever is higher)."""
        target = meta.start_offset
        times = self.index(meta, IndexType.TIMESTAMP)
        last_ts = -1
        for n in range(len(times) // _TIME_ENTRY.size):
            ts, relative = _TIME_ENTRY.unpack_from(times, n * _TIME_ENTRY.size)
            if ts <= last_ts or ts > timestamp:
                break  # the zero tail of a preallocated index, or past the target
            last_ts, target = ts, meta.start_offset + relative
        target = max(target, starting_offset)
        offsets = self.index(meta, IndexType.OFFSET)
        position = 0
        for n in range(len(offsets) // _OFFSET_ENTRY.size):
            relative, pos = _OFFSET_ENTRY.unpack_from(offsets, n * _OFFSET_ENTRY.size)
            if (n and relative == 0 and pos == 0) or meta.start_offset + relative > target:
                break
            position = pos
        return position


class RemoteOffsetReader:
    """ListOffsets lookups that may need remote segments (run on a worker thread)."""

    def __init__(self, rsm: RemoteStorageManager, rlmm: RemoteLogMetadataManager, *,
                 index_cache_bytes: int = DEFAULT_INDEX_CACHE_BYTES) -> None:
        self.rsm, self.rlmm = rsm, rlmm
        self.indexes = RemoteIndexCache(rsm, index_cache_bytes)

    def find(self, log_: UnifiedLog, tip: TopicIdPartition, epochs: Sequence[tuple[int, int]],
             timestamp: int) -> TimestampAndOffset | None:
        """A timestamp (>= 0) or -3 over remote and local data; RemoteStorageError becomes the
        retriable KAFKA_STORAGE_ERROR."""
        try:
            if timestamp == MAX_TIMESTAMP:
                return self._max_timestamp(log_, tip)
            return self._by_timestamp(log_, tip, epochs, timestamp)
        except RemoteStorageError as e:
            log.warning("ListOffsets of %s at timestamp %d from remote storage failed: %s", tip, timestamp, e)
            raise KafkaStorageError(f"looking up {tip} at timestamp {timestamp} in remote storage: {e}") from e

    def _by_timestamp(self, log_: UnifiedLog, tip: TopicIdPartition, epochs: Sequence[tuple[int, int]],
                      timestamp: int) -> TimestampAndOffset | None:
        # Kafka's findOffsetByTimestamp: from the epoch of the log start on, the first finished
        # segment (of that epoch) whose largest timestamp reaches the target and which ends at or
        # above the log start; a segment also on local disk is searched there instead.
        start = log_.log_start_offset
        starts = [s for _, s in epochs]
        first = max(sum(1 for s in starts if s <= start) - 1, 0)
        for epoch, _ in epochs[first:]:
            for meta in self.rlmm.list_remote_log_segments(tip, epoch):
                if meta.state is not RemoteLogSegmentState.COPY_SEGMENT_FINISHED or \
                        meta.max_timestamp_ms < timestamp or meta.end_offset < start:
                    continue
                if meta.start_offset < log_.local_log_start_offset:
                    return lookup_timestamp(self.rsm, self.indexes, meta, timestamp, start)
                return log_.fetch_offset_by_timestamp(timestamp)
        # Kafka's RemoteLogOffsetReader: nothing remote, so the local log answers.
        return log_.fetch_offset_by_timestamp(timestamp)

    def _max_timestamp(self, log_: UnifiedLog, tip: TopicIdPartition) -> TimestampAndOffset | None:
        """The record with the largest timestamp over remote and local data (KIP-734's meaning,
        KAFKA-17552): the finished remote segment with the largest ``max_timestamp_ms`` not also
        on local disk against the local answer; on a tie the earlier offset."""
        local = log_.fetch_offset_by_timestamp(MAX_TIMESTAMP)
        local_start = log_.local_log_start_offset
        start = log_.log_start_offset
        best: RemoteLogSegmentMetadata | None = None
        for meta in self.rlmm.list_remote_log_segments(tip):
            if meta.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED and meta.start_offset < local_start \
                    and meta.end_offset >= start and (best is None or meta.max_timestamp_ms > best.max_timestamp_ms):
                best = meta
        if best is None or best.max_timestamp_ms < 0 or (local is not None and local[1] > best.max_timestamp_ms):
            return local
        return lookup_timestamp(self.rsm, self.indexes, best, best.max_timestamp_ms, start) or local

def lookup_timestamp(rsm: RemoteStorageManager, indexes: RemoteIndexCache, meta: RemoteLogSegmentMetadata,
                     timestamp: int, starting_offset: int) -> TimestampAndOffset | None:
    """Kafka's ``RemoteLogManager.lookupTimestamp``: from the position the cached indexes give, the
    first record of the remote segment with timestamp >= ``timestamp`` and offset >=
    ``starting_offset``."""
    position = indexes.lookup_position(meta, timestamp, starting_offset)
    with rsm.fetch_log_segment(meta, position) as stream:
        while True:
            head = _read_exact(stream, _BATCH_START.size)
            if len(head) < _BATCH_START.size:
                return None
            base, length = _BATCH_START.unpack(head)
            body = _read_exact(stream, length)
            if len(body) < length:
                return None
            batch = head + body
            last = base + _BATCH_FIELDS.unpack_from(batch, 23)[0]
            max_ts = struct.unpack_from(">q", batch, _MAX_TS_AT)[0]
            if max_ts < timestamp or last < starting_offset:
                continue
            epoch = _BATCH_FIELDS.unpack_from(batch, 12)[0]
            for rec in decode_records(batch):
                if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                    return rec.offset, rec.timestamp, epoch if epoch >= 0 else -1


def _read_all(stream: BinaryIO) -> bytes:
    chunks = []
    while chunk := stream.read(1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    """``n`` bytes of a stream, fewer only at its end (a chunked stream may return short reads)."""
    data = stream.read(n)
    while len(data) < n:
        more = stream.read(n - len(data))
        if not more:
            break
        data += more
    return data
