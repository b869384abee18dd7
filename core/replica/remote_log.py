"""The broker's side of the remote tier (KIP-405): loads the remote storage and remote log
metadata managers, runs :class:`~strom.tiered.remote_log_manager.RemoteLogManager` and hands it
the leadership changes of ``remote.storage.enable`` partitions.

Only a broker with ``remote.log.storage.system.enable=true`` imports this module. The metadata
manager is a Kafka client of this very broker, so it is built once the listeners serve; every
call into the managers blocks (network, S3), so leadership changes go to one worker thread in
the order they happened, never run on the event loop.
"""

from __future__ import annotations

import bisect
import logging
import struct
import threading
from collections import OrderedDict
from collections.abc import Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol, runtime_checkable

import pluggy

from strom.core.config import BrokerConfig
from strom.core.errors import KafkaStorageError, OffsetOutOfRangeError
from strom.core.exceptions import ConfigError
from strom.core.log.remote_view import UnifiedLogTieredView
from strom.core.records.pieces import RecordPieces
from strom.core.replica.manager import StoppedPartition
from strom.core.replica.partition import Partition
from strom.core.replica.remote_offsets import RemoteOffsetReader
from strom.plugins.exceptions import RemoteStorageError
from strom.plugins.hookspecs.storage import (
    REMOTE_CONFIG_KEY,
    IndexType,
    RemoteLogMetadataManager,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteStorageManager,
    TopicIdPartition,
)
from strom.plugins.manager import (
    config_properties,
    load_remote_log_metadata_manager,
    load_remote_storage_manager,
)
from strom.tiered.chunked_rsm import NotCached
from strom.tiered.config_values import ConfigReader
from strom.tiered.remote_log_manager import RemoteLogManager, TieredLog
from strom.tiered.rlm_quota import RLMQuotaManager
from strom.tiered.topic_based_rlmm import TopicBasedRemoteLogMetadataManager

log = logging.getLogger(__name__)

RLMM_BOOTSTRAP_KEY = "rlmm.config.remote.log.metadata.common.client.bootstrap.servers"
_BATCH_START = struct.Struct(">qi")  # a record batch's base offset and length
_LAST_OFFSET_DELTA = struct.Struct(">i")  # at byte 23 of a batch
_INDEX_ENTRY = struct.Struct(">ii")  # an offset index entry: relative offset, position
_ABORTED_TXN = struct.Struct(">hqqqq")  # a .txnindex entry: version, producer id, first, last, LSO

_HEADER_NEEDED = 27  # a batch's base offset, length, ..., last offset delta (bytes 23..26)
READ_PIECE_BYTES = 1024 * 1024  # pieces taken from a plain stream
READ_SLACK_BYTES = 1024 * 1024  # past max_bytes, for the batches before the offset in a first range
PREFETCHED_REMEMBERED = 1000
PREFETCH_SEGMENTS = 4  # at most this many segments ahead of a reader

RemoteRead = tuple[RecordPieces, "list[tuple[int, int]] | None"]


@runtime_checkable
class PieceReadingStorageManager(Protocol):
    """A remote storage manager that also hands out a segment's bytes as views of its chunks
    (no stream copies) and can start fetching a segment ahead of a reader (strom's chunked
    manager, :class:`strom.tiered.chunked_rsm.ChunkedRemoteStorageManager`)."""

    prefetch_max_size: int  # bytes fetched ahead of a reader (0: none)

    def fetch_log_segment_pieces(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                                 end_position: int | None = None, *,
                                 cached_only: bool = False) -> Generator[memoryview, None, None]: ...

    def prefetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int) -> None: ...

    def cached_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes | None: ...


def load_storage_manager(pm: pluggy.PluginManager, config: BrokerConfig) -> RemoteStorageManager:
    """The remote storage manager, built (and its ``rsm.config.`` keys checked) at broker start."""
    rsm = load_remote_storage_manager(pm, config)
    if rsm is None:
        raise ConfigError(REMOTE_CONFIG_KEY, config.remote_log_storage_manager_class_name,
                          "a remote storage manager plugin name (required when "
                          "remote.log.storage.system.enable=true)")
    return rsm


def topic_id_partition(part: Partition) -> TopicIdPartition:
    return TopicIdPartition(part.topic_id, part.topic, part.index)


class RemoteLogBinding:
    """The running remote tier of one broker: the managers and the leadership event thread."""

    def __init__(self, rsm: RemoteStorageManager, rlmm: RemoteLogMetadataManager, manager: RemoteLogManager, *,
                 reader_threads: int = 10, max_wait_s: float = 0.5,
                 fetch_quota: RLMQuotaManager | None = None) -> None:
        self.rsm, self.rlmm, self.manager = rsm, rlmm, manager
        self._events = ThreadPoolExecutor(1, thread_name_prefix="remote-log-leadership")
        # remote.log.reader.threads: remote fetches, never on the event loop.
        self._readers = ThreadPoolExecutor(reader_threads, thread_name_prefix="remote-log-reader")
        self.max_wait_s = max_wait_s
        self.fetch_quota = fetch_quota if fetch_quota is not None else RLMQuotaManager(2**63 - 1)
        self._pieces_rsm = rsm if isinstance(rsm, PieceReadingStorageManager) else None
        # A read whose every piece is in memory (strom's metadata cache, the indexes and chunk
        # caches) is served on the event loop, as a local read is: a sequential consumer's reads
        # are prefetched hits, and the two thread hops of a pooled read cost more than the read.
        self._inline_reads = self._pieces_rsm is not None and isinstance(rlmm, TopicBasedRemoteLogMetadataManager)
        self.reads_in_memory = self.reads_pooled = 0  # logged at close (bench/tiered_fetch.py shows them)
        # Segments whose successor was prefetched already (each read near a segment's end asks).
        self._prefetched: OrderedDict[RemoteLogSegmentId, None] = OrderedDict()
        self._prefetched_lock = threading.Lock()
        # (segment, offset) -> byte position: where the batches after a read's last one start.
        # A sequential consumer's next fetch begins there, so it needs no offset index (one GET
        # per segment fewer: a read at a segment's start offset begins at byte 0).
        self._next_positions: OrderedDict[tuple[RemoteLogSegmentId, int], int] = OrderedDict()
        self.offsets = RemoteOffsetReader(rsm, rlmm)  # ListOffsets over remote segments

    def offset_for_timestamp(self, part: Partition, timestamp: int) -> Future[tuple[int, int, int] | None]:
        """ListOffsets by timestamp or -3 over the remote segments too (remote_offsets.py), on a reader thread."""
        with part.log.lock:
            epochs = part.log.epoch_cache.entries()
        return self._readers.submit(self.offsets.find, part.log, topic_id_partition(part), epochs, timestamp)

    @classmethod
    def start(cls, pm: pluggy.PluginManager, config: BrokerConfig, rsm: RemoteStorageManager,
              bootstrap: str) -> RemoteLogBinding:
        """Build the metadata manager against ``bootstrap`` (this broker, unless the operator named
        other servers) and start the copy task. Blocking: call it off the event loop."""
        props = config_properties(config)
        if not props.get(RLMM_BOOTSTRAP_KEY):
            props[RLMM_BOOTSTRAP_KEY] = bootstrap
        props["node.id"] = config.node_id
        rlmm = load_remote_log_metadata_manager(pm, props)
        manager = RemoteLogManager(rsm, rlmm, broker_id=config.node_id, config=props)
        readers = ConfigReader(props).integer("remote.log.reader.threads", 10, minimum=1)
        manager.start()
        log.info("remote log manager started (metadata through %s)", props[RLMM_BOOTSTRAP_KEY])
        return cls(rsm, rlmm, manager, reader_threads=readers, max_wait_s=config.remote_fetch_max_wait_ms / 1000,
                   fetch_quota=RLMQuotaManager.from_config(props))

    # -- remote fetch -----------------------------------------------------------------------

    def fetch_quota_exceeded(self) -> bool:
        """Kafka's ``isRemoteLogFetchQuotaExceeded``: while true a Fetch reads nothing remote."""
        return self.fetch_quota.is_quota_exceeded()

    def read(self, part: Partition, offset: int, max_bytes: int, min_one_message: bool,
             read_committed: bool) -> Future[RemoteRead]:
        """Event loop: snapshot what the read needs of the log, read on a reader thread."""
        with part.log.lock:
            epochs = part.log.epoch_cache.entries()
        if self._inline_reads:
            done: Future[RemoteRead] = Future()
            try:
                done.set_result(self._read_or_storage_error(part, epochs, offset, max_bytes, min_one_message,
                                                            read_committed, cached_only=True))
                self.reads_in_memory += 1
                return done
            except NotCached as e:  # something to fetch: on a reader thread
                log.debug("remote read of %s-%d at offset %d goes to a reader thread: %s not in memory",
                          part.topic, part.index, offset, e)
            except Exception as e:  # the same answer a reader thread gives (OFFSET_OUT_OF_RANGE, ...)
                done.set_exception(e)
                return done
        self.reads_pooled += 1
        return self._readers.submit(self._read_or_storage_error, part, epochs, offset, max_bytes, min_one_message,
                                    read_committed)

    def _read_or_storage_error(self, part: Partition, epochs: list[tuple[int, int]], offset: int, max_bytes: int,
                               min_one_message: bool, read_committed: bool, *,
                               cached_only: bool = False) -> RemoteRead:
        tip = topic_id_partition(part)
        try:
            meta, records, upper = self._read(tip, epochs, offset, max_bytes, min_one_message, cached_only)
            self.fetch_quota.record(len(records))
            if not read_committed:
                return records, None
            return records, self._aborted(part, tip, epochs, meta, offset, upper, cached_only)
        except RemoteStorageError as e:
            # A retriable answer (clients retry KAFKA_STORAGE_ERROR): S3 down for a while, or the
            # partition's remote metadata not loaded yet after a leadership change.
            log.warning("remote read of %s at offset %d failed: %s", tip, offset, e)
            raise KafkaStorageError(f"reading {tip} at offset {offset} from remote storage: {e}") from e

    def _segment_for(self, tip: TopicIdPartition, epochs: list[tuple[int, int]],
                     offset: int) -> RemoteLogSegmentMetadata:
        # Kafka's fetchRemoteLogSegmentMetadata: the epoch of the offset, then the later ones (a
        # segment is found under each epoch it holds records of).
        i = max(bisect.bisect_right([start for _, start in epochs], offset) - 1, 0)
        for epoch, _ in epochs[i:]:
            found = self.rlmm.remote_log_segment_metadata(tip, epoch, offset)
            if found is not None:
                return found
        raise OffsetOutOfRangeError(f"{tip}: no remote segment holds offset {offset}")

    def _index(self, meta: RemoteLogSegmentMetadata, index_type: IndexType, cached_only: bool) -> bytes:
        """A segment's index, fetched; or with ``cached_only`` from memory (else NotCached)."""
        if not cached_only:
            with self.rsm.fetch_index(meta, index_type) as stream:
                return stream.read()
        cached = self._pieces_rsm.cached_index(meta, index_type) if self._pieces_rsm is not None else None
        if cached is None:
            raise NotCached(f"{index_type.name} index of {meta.segment_id}")
        return cached

    def _position(self, meta: RemoteLogSegmentMetadata, offset: int, cached_only: bool = False) -> int:
        """Where to start reading for ``offset``: byte 0 for the segment's start offset, the end
        of an earlier read that stopped just before ``offset``, else the position of the last
        offset index entry at or below it (0 without one). Batches before ``offset`` that the
        reader meets from there are skipped."""
        if offset <= meta.start_offset:
            return 0
        with self._prefetched_lock:
            known = self._next_positions.get((meta.segment_id, offset))
        if known is not None:
            return known
        data = self._index(meta, IndexType.OFFSET, cached_only)
        entries = len(data) // _INDEX_ENTRY.size
        relative = offset - meta.start_offset
        # Binary search over the entries (increasing relative offsets); a preallocated index's
        # zero tail (an entry 0/0 after the first) ends the entries.
        lo, hi = 0, entries
        while lo < hi:
            mid = (lo + hi) // 2
            rel, pos = _INDEX_ENTRY.unpack_from(data, mid * _INDEX_ENTRY.size)
            if (mid and rel == 0 and pos == 0) or rel > relative:
                hi = mid
            else:
                lo = mid + 1
        return _INDEX_ENTRY.unpack_from(data, (lo - 1) * _INDEX_ENTRY.size)[1] if lo else 0

    def _aborted(self, part: Partition, tip: TopicIdPartition, epochs: list[tuple[int, int]],
                 meta: RemoteLogSegmentMetadata, offset: int, upper: int,
                 cached_only: bool = False) -> list[tuple[int, int]]:
        """Kafka's ``RemoteLogManager.collectAbortedTransactions``: (producer id, first offset) of
        the aborted transactions overlapping ``[offset, upper)``, from the transaction indexes of
        this remote segment and the following ones, then of the local log, until an entry's last
        stable offset reaches ``upper`` (no later marker can concern the data returned)."""
        aborted: list[tuple[int, int]] = []
        segment: RemoteLogSegmentMetadata | None = meta
        while segment is not None:
            if not segment.txn_index_empty:
                data = self._index(segment, IndexType.TRANSACTION, cached_only)
                for n in range(len(data) // _ABORTED_TXN.size):
                    _, producer_id, first, last, lso = _ABORTED_TXN.unpack_from(data, n * _ABORTED_TXN.size)
                    if last >= offset and first < upper:
                        aborted.append((producer_id, first))
                    if lso >= upper:
                        return aborted
            segment = self._next_with_txn_index(tip, epochs, segment.end_offset + 1)
        # Kafka's collectAbortedTransactionInLocalSegments: the local indexes over the same range,
        # for a transaction read from S3 whose abort marker is on local disk; an entry of a segment
        # both copied and still local is kept once.
        seen = set(aborted)
        aborted += [t for t in part.log.collect_aborted_transactions(offset, upper) if t not in seen]
        return aborted

    def _next_with_txn_index(self, tip: TopicIdPartition, epochs: list[tuple[int, int]],
                             offset: int) -> RemoteLogSegmentMetadata | None:
        i = max(bisect.bisect_right([start for _, start in epochs], offset) - 1, 0)
        for epoch, _ in epochs[i:]:
            found = self.rlmm.next_segment_with_txn_index(tip, epoch, offset)
            if found is not None:
                return found
        return None

    def _read(self, tip: TopicIdPartition, epochs: list[tuple[int, int]], offset: int, max_bytes: int,
              min_one_message: bool, cached_only: bool = False
              ) -> tuple[RemoteLogSegmentMetadata, RecordPieces, int]:
        """Kafka's RemoteLogReader: whole batches of one remote segment from the one holding
        ``offset``, at most ``max_bytes`` but the first (KIP-74), and the offset after them.

        The segment's bytes come as pieces (views of cached chunks, or of the response body) and
        only the batch headers are read from them; the batches returned stay views of the
        pieces (never joined: the response is written from them)."""
        meta = self._segment_for(tip, epochs, offset)
        start = self._position(meta, offset, cached_only)
        buf = _Pieces(self._segment_pieces(meta, start, max_bytes + READ_SLACK_BYTES, cached_only))
        upper = offset
        try:
            pos, first = 0, -1
            while buf.fill(pos + _HEADER_NEEDED):
                head = buf.slice(pos, pos + _HEADER_NEEDED)
                base, length = _BATCH_START.unpack_from(head)
                end = pos + _BATCH_START.size + length
                if not buf.fill(end):
                    break  # the segment's end
                next_offset = base + _LAST_OFFSET_DELTA.unpack_from(head, 23)[0] + 1
                if next_offset <= offset:
                    pos = end
                    continue
                if first < 0:
                    first = pos
                if end - first > max_bytes and (pos > first or not min_one_message):
                    break
                pos, upper = end, next_offset
            records = RecordPieces(buf.views(first, pos) if first >= 0 else ())
        finally:
            buf.close()
        if records:
            with self._prefetched_lock:
                self._next_positions[(meta.segment_id, upper)] = start + pos
                if len(self._next_positions) > PREFETCHED_REMEMBERED:
                    self._next_positions.popitem(last=False)
        rsm = self._pieces_rsm
        if rsm is not None and 0 < meta.segment_size_in_bytes - (start + pos) < max(rsm.prefetch_max_size, max_bytes):
            # The prefetch window (or the next fetch) reaches past this segment: have the next one
            # fetched meanwhile, so a sequential reader never waits at a segment boundary.
            with self._prefetched_lock:
                first_ask = meta.segment_id not in self._prefetched
                self._prefetched[meta.segment_id] = None
                if len(self._prefetched) > PREFETCHED_REMEMBERED:
                    self._prefetched.popitem(last=False)
            if first_ask:
                self._readers.submit(self._prefetch_next, tip, epochs, meta, max(rsm.prefetch_max_size, max_bytes))
        return meta, records, upper

    def _segment_pieces(self, meta: RemoteLogSegmentMetadata, start: int, first_range: int,
                        cached_only: bool = False) -> Generator[bytes | memoryview, None, None]:
        """The segment's bytes from ``start`` on, as pieces: the first ``first_range`` bytes in one
        ranged read, then ranges twice as long each (a reader that needs more: a large first
        batch, many batches before the offset) until the segment's end."""
        size = meta.segment_size_in_bytes
        pos, want = start, first_range
        while size <= 0 or pos < size:
            last = pos + want - 1 if size <= 0 else min(pos + want, size) - 1
            got = 0
            pieces: Iterator[bytes | memoryview]
            if self._pieces_rsm is not None:
                pieces = self._pieces_rsm.fetch_log_segment_pieces(meta, pos, last, cached_only=cached_only)
            else:
                pieces = _stream_pieces(self.rsm, meta, pos, last)
            try:
                for piece in pieces:
                    got += len(piece)
                    yield piece
            finally:
                close = getattr(pieces, "close", None)
                if close is not None:
                    close()
            if got < last - pos + 1:
                return  # the segment ended first
            pos += got
            want *= 2

    def _prefetch_next(self, tip: TopicIdPartition, epochs: list[tuple[int, int]],
                       meta: RemoteLogSegmentMetadata, window: int) -> None:
        """Prefetch the segments after ``meta`` that the window's ``window`` bytes reach into (at
        most PREFETCH_SEGMENTS): their GETs run side by side with the reads of this one."""
        rsm = self._pieces_rsm
        if rsm is None:
            return
        try:
            for _ in range(PREFETCH_SEGMENTS):
                meta = self._segment_for(tip, epochs, meta.end_offset + 1)
                # Only the chunks (and the manifest they need): a reader coming from the segment
                # before starts at this one's start offset, byte 0, without its offset index.
                rsm.prefetch_log_segment(meta, 0)
                window -= meta.segment_size_in_bytes
                if window <= 0 or meta.segment_size_in_bytes <= 0:
                    break
        except (OffsetOutOfRangeError, RemoteStorageError) as e:  # the end of the remote log, or S3 away
            log.debug("no prefetch after %s of %s: %s", meta.segment_id, tip, e)

    def on_roles(self, leaders: list[Partition], followers: list[Partition],
                 stopped: list[StoppedPartition]) -> None:
        """The replica manager's listener (event loop): queue the change for the worker thread."""
        views: dict[TopicIdPartition, TieredLog] = {topic_id_partition(p): UnifiedLogTieredView(p.log)
                                                   for p in leaders}
        follower_ids = {topic_id_partition(p) for p in followers}
        stopped_ids = {TopicIdPartition(topic_id, topic, index) for topic, index, topic_id, _ in stopped}
        deleted = {TopicIdPartition(topic_id, topic, index) for topic, index, topic_id, gone in stopped if gone}
        self._events.submit(self._apply, views, follower_ids, stopped_ids, deleted)

    def _apply(self, leaders: dict[TopicIdPartition, TieredLog], followers: set[TopicIdPartition],
               stopped: set[TopicIdPartition], deleted: set[TopicIdPartition]) -> None:
        try:
            for tip in deleted:  # topic deletion removes the remote data too (Kafka's stopPartitions)
                self.manager.delete_remote_partition(tip)
            if stopped:
                self.manager.on_stopped_partitions(stopped)
            if leaders or followers:
                self.manager.on_leadership_change(leaders, followers)
        except Exception:  # the next metadata change or restart tries again; the broker goes on
            log.exception("remote log manager: applying leadership change failed")

    def close(self) -> None:
        """Stop the copy task and the managers (blocking)."""
        log.info("remote reads: %d served from memory on the event loop, %d on reader threads",
                 self.reads_in_memory, self.reads_pooled)
        self._events.shutdown(wait=True, cancel_futures=True)
        self._readers.shutdown(wait=True, cancel_futures=True)
        self.manager.close()
        for closing in (self.rlmm, self.rsm):
            try:
                closing.close()
            except Exception:
                log.exception("closing %s", type(closing).__name__)


def _stream_pieces(rsm: RemoteStorageManager, meta: RemoteLogSegmentMetadata, first: int,
                   last: int) -> Generator[bytes, None, None]:
    """Bytes ``first..last`` of a segment from any manager's stream, in pieces."""
    with rsm.fetch_log_segment(meta, first, last) as stream:
        while piece := stream.read(READ_PIECE_BYTES):
            yield piece


class _Pieces:
    """Byte pieces pulled from an iterator on demand, addressed as one run of bytes."""

    def __init__(self, source: Generator[bytes | memoryview, None, None]) -> None:
        self._source = source
        self._views: list[memoryview] = []
        self._starts: list[int] = []
        self.size = 0

    def fill(self, n: int) -> bool:
        """Pull pieces until ``n`` bytes are held; False if the source ends first."""
        while self.size < n:
            piece = next(self._source, None)
            if piece is None:
                return False
            if piece:
                self._starts.append(self.size)
                self._views.append(memoryview(piece).cast("B"))
                self.size += len(piece)
        return True

    def slice(self, lo: int, hi: int) -> bytes:
        """Bytes ``lo..hi`` (exclusive; held already), copied once."""
        i = bisect.bisect_right(self._starts, lo) - 1
        first = self._views[i]
        offset = lo - self._starts[i]
        if offset + (hi - lo) <= len(first):
            return first[offset:offset + hi - lo].tobytes()
        parts = [first[offset:]]
        at = self._starts[i] + len(first)
        while at < hi:
            i += 1
            view = self._views[i]
            parts.append(view[:hi - at])
            at += len(view)
        return b"".join(parts)

    def views(self, lo: int, hi: int) -> list[memoryview]:
        """Bytes ``lo..hi`` (exclusive; held already) as views of the pieces, uncopied."""
        if lo >= hi:
            return []
        i = bisect.bisect_right(self._starts, lo) - 1
        at = self._starts[i]
        out: list[memoryview] = []
        while at < hi:
            view = self._views[i]
            out.append(view[max(lo - at, 0):min(hi - at, len(view))])
            at += len(view)
            i += 1
        return out

    def close(self) -> None:
        self._views.clear()
        self._source.close()
