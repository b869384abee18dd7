"""Fetch (key 1): read whole record batches, long-polling through the fetch purgatory.

Consumers read up to the high watermark (read_committed: the last stable offset); followers
(replica id >= 0) up to the log end. Each partition gets at most ``partition_max_bytes`` and
the response at most ``max_bytes``, except that the first partition with data always returns
at least one whole batch (KIP-74) so a large batch can never stall a consumer. When fewer than
``min_bytes`` are available the request waits in the purgatory as a :class:`DelayedFetch` until
appends bring enough or ``max_wait`` passes. Fetch sessions (KIP-227) are answered sessionless
(session id 0), which clients accept as "send full fetches".

A waiting fetch never re-reads its partitions when woken: like Kafka's ``DelayedFetch.tryComplete``
it compares, per partition, where the readable end was when it read (a
:class:`~strom.core.log.local_log.LogOffsetMetadata`: offset, segment, position) with the
partition's offset snapshot now, and estimates the bytes that arrived from the position
difference (the partition's ``partition_max_bytes`` when the end moved to another segment or
its position is not known). It reads once more only to answer.

Fetch v18 adds ``high_watermark`` (a tagged field of each request partition: the high watermark
a replica fetcher already knows, KIP-1166) so a leader can answer a follower early when it moved.
strom's partitions have no remote followers, and a consumer never sets it, so it is decoded (kio)
and otherwise ignored; the v18 response is the v17 one.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from kio.schema.errors import ErrorCode

from strom.core.errors import OffsetOutOfRangeError
from strom.core.log.local_log import LogOffsetMetadata
from strom.core.protocol.fetch_response import PartitionRow, TopicRows, encode_fetch_response
from strom.core.protocol.messages import ms
from strom.core.records.pieces import RecordPieces
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, authorize_topics, error_of, throttle

if TYPE_CHECKING:
    from strom.core.log.log import LogOffsetSnapshot
    from strom.core.metadata.image import PartitionRegistration
    from strom.core.replica.manager import ReplicaManager
    from strom.core.replica.partition import Partition, ReadResult
    from strom.core.server.handlers._deps import ReplicaDeps
    from strom.core.server.handlers._kio_types import FetchRequest

log = logging.getLogger(__name__)

API_KEY = 1
VERSIONS = (4, 18)
ZERO_UUID = uuid.UUID(int=0)
READ_COMMITTED = 1


class FetchPartition(Protocol):
    """The fields of a request partition this handler reads (every version's class has them)."""

    @property
    def partition(self) -> int: ...
    @property
    def fetch_offset(self) -> int: ...
    @property
    def partition_max_bytes(self) -> int: ...


class _Target:
    """One requested partition: what was asked, and what the first read saw of it."""

    __slots__ = ("bytes_seen", "end_seen", "error", "fp", "name", "part", "topic_id")

    def __init__(self, name: str, topic_id: uuid.UUID, fp: FetchPartition, error: int) -> None:
        self.name = name
        self.topic_id = topic_id
        self.fp = fp
        self.error = error
        # Set when the fetch waits: the partition read, the readable end it read up to, and
        # the bytes that read returned.
        self.part: Partition | None = None
        self.end_seen = LogOffsetMetadata(-1)
        self.bytes_seen = 0


Row = tuple[_Target, "ReadResult[bytes] | ReadResult[RecordPieces] | None", int, "str | None"]


class _RemoteRead:
    """A partition read below its local log start (a tiered log): served from remote storage."""

    __slots__ = ("budget", "future", "min_one", "part", "row")

    def __init__(self, row: int, part: Partition, budget: int, min_one: bool) -> None:
        self.row, self.part, self.budget, self.min_one = row, part, budget, min_one
        self.future: Future[tuple[RecordPieces, list[tuple[int, int]] | None]] | None = None


@runtime_checkable
class _FetchQuota(Protocol):
    """A remote fetcher with Kafka's remote fetch quota (``remote.log.manager.fetch.max.bytes.per.second``)."""

    def fetch_quota_exceeded(self) -> bool: ...


def _remote_fetch_throttled(fetcher: object) -> bool:
    return isinstance(fetcher, _FetchQuota) and fetcher.fetch_quota_exceeded()


def _remote_readable(part: Partition, offset: int) -> bool:
    log = part.log
    return log.remote_log_enabled and log.log_start_offset <= offset < log.local_log_start_offset


def _readable_end(snapshot: LogOffsetSnapshot, replica_id: int, isolation: int) -> LogOffsetMetadata:
    """Kafka's FetchIsolation: followers read to the log end, consumers to the HW or the LSO."""
    if replica_id >= 0:
        return snapshot.log_end_offset
    return snapshot.last_stable_offset if isolation == READ_COMMITTED else snapshot.high_watermark


class DelayedFetch:
    """A Fetch waiting for ``min_bytes`` (Kafka's ``DelayedFetch``): :meth:`try_complete` is the
    purgatory's condition and reads no segment."""

    def __init__(self, replica_manager: ReplicaManager, targets: list[_Target], min_bytes: int,
                 replica_id: int, isolation: int) -> None:
        self._replica_manager = replica_manager
        self._targets = targets
        self._min_bytes = min_bytes
        self._replica_id = replica_id
        self._isolation = isolation

    def try_complete(self) -> bool:
        """True when the fetch should be answered now: enough bytes have arrived (estimated from
        offset snapshots), or a partition changed in a way only a read can report (leadership,
        deletion, truncation below what was read)."""
        accumulated = 0
        for t in self._targets:
            try:
                part = self._replica_manager.get_partition(t.name, t.fp.partition)
                if part is not t.part:
                    return True  # deleted and created again meanwhile
                part.check_leader_epoch(getattr(t.fp, "current_leader_epoch", -1))
                end = _readable_end(part.fetch_offset_snapshot(), self._replica_id, self._isolation)
            except Exception:  # whatever it is, the read answers it (as the re-read did)
                return True
            seen = t.end_seen
            if end.message_offset < seen.message_offset or end.message_offset < t.fp.fetch_offset:
                return True  # truncated: the read answers with the new state
            if end.message_offset == seen.message_offset:
                available = t.bytes_seen
            elif end.on_same_segment(seen):
                available = t.bytes_seen + end.position_diff(seen)
            else:
                # Kafka's bound when the end is on a later segment (or its position is not known).
                available = t.fp.partition_max_bytes
            accumulated += min(available, t.fp.partition_max_bytes)
        return accumulated >= self._min_bytes


async def handle(deps: ReplicaDeps, ctx: RequestContext, request: FetchRequest) -> FetchRows:
    image = deps.image
    rm = deps.replica_manager
    replica_state = getattr(request, "replica_state", None)
    replica_id: int = replica_state.replica_id if replica_state is not None else getattr(request, "replica_id", -1)
    isolation: int = getattr(request, "isolation_level", 0)
    max_bytes: int = getattr(request, "max_bytes", 0x7FFFFFFF)

    targets: list[list[_Target]] = []
    names: list[str] = []
    partitions: list[Mapping[int, PartitionRegistration]] = []  # each request topic's partitions in the image
    for ft in request.topics:
        topic_id: uuid.UUID | None = getattr(ft, "topic_id", None)
        name: str | None = getattr(ft, "topic", None)
        error = 0
        if name is None:
            found = image.topics_by_id.get(topic_id) if topic_id else None
            if found is None:
                error, name = int(ErrorCode.unknown_topic_id), ""
            else:
                name = found.name
        else:
            found = image.topics.get(name)
            topic_id = found.topic_id if found is not None else ZERO_UUID
        names.append(name)
        partitions.append(found.partitions if found is not None else {})
        targets.append([_Target(name, topic_id or ZERO_UUID, fp, error) for fp in ft.partitions])
    if replica_id >= 0:  # a follower's fetch: CLUSTER_ACTION on the cluster, not READ (Kafka's KafkaApis)
        denied = set() if authorize_cluster(deps, ctx, "CLUSTER_ACTION") else {n for n in names if n}
    else:
        denied = authorize_topics(deps, ctx, "READ", [n for n in set(names) if n])
    for group, known in zip(targets, partitions, strict=True):
        for t in group:
            if t.error:
                continue
            if t.name in denied:
                t.error = int(ErrorCode.topic_authorization_failed)
            elif t.fp.partition not in known:
                # Like Kafka (KafkaApis), after authorization and before reading: the same
                # answer as an unknown id or a denied topic (see the aborted list below).
                t.error = int(ErrorCode.unknown_topic_or_partition)

    remote: list[_RemoteRead] = []

    def read_all() -> tuple[list[Row], int, bool]:
        out: list[Row] = []
        total = 0
        errored = False
        remote.clear()
        for group in targets:
            for t in group:
                result: ReadResult[bytes] | None = None
                code, message = t.error, None
                if code == 0:
                    try:
                        part = rm.get_partition(t.name, t.fp.partition)
                        part.check_leader_epoch(getattr(t.fp, "current_leader_epoch", -1))
                        budget = min(t.fp.partition_max_bytes, max(max_bytes - total, 0))
                        result = part.read_records(t.fp.fetch_offset, budget, replica_id=replica_id,
                                                   min_one_message=total == 0, isolation_level=isolation)
                        total += len(result.records)
                        t.part = part
                        t.bytes_seen = len(result.records)
                    except OffsetOutOfRangeError as e:
                        # KIP-405: below a tiered log's local start the data is remote (Kafka's
                        # ReplicaManager turns this into a remote fetch, consumers only).
                        if rm.config.remote_log_storage_system_enable and replica_id < 0 and _remote_readable(
                                part, t.fp.fetch_offset):
                            t.part = part
                            if rm.remote_fetcher is None:
                                # The tier starts once the listeners serve (its metadata manager
                                # is a client of this broker). Until then a retriable error:
                                # OFFSET_OUT_OF_RANGE would make the consumer reset its position.
                                code, message = int(ErrorCode.kafka_storage_error), (
                                    "the remote log manager is starting; retry")
                            elif _remote_fetch_throttled(rm.remote_fetcher):
                                # Kafka's ReplicaManager: over the remote fetch quota the remote read
                                # is skipped and the partition answers no records, without an error;
                                # the fetch then waits as any fetch short of min_bytes.
                                result = _empty_read(part, isolation)
                                t.bytes_seen = 0
                            else:
                                remote.append(_RemoteRead(len(out), part, budget, total == 0))
                        else:
                            code, message = error_of(e)
                    except Exception as e:
                        code, message = error_of(e)
                errored = errored or code != 0
                out.append((t, result, code, message))
        return out, total, errored

    rows, total, errored = read_all()
    min_bytes = max(request.min_bytes, 1)
    max_wait_s = ms(request.max_wait) / 1000
    if remote:
        total += await _read_remote(rm, remote, rows, isolation)
    elif total < min_bytes and not errored and max_wait_s > 0 and rows:
        waiting = [t for group in targets for t in group]
        for t in waiting:
            # Still on the event loop since the read: the snapshot is the state it read.
            assert t.part is not None  # every partition was read without error
            t.end_seen = _readable_end(t.part.fetch_offset_snapshot(), replica_id, isolation)
        delayed = DelayedFetch(rm, waiting, min_bytes, replica_id, isolation)
        keys = [(t.name, t.fp.partition) for t in waiting]
        await rm.fetch_purgatory.wait_until(keys, delayed.try_complete, max_wait_s)
        # Kafka's DelayedFetch.onComplete: one read, whether completed or expired.
        rows, total, _ = read_all()

    throttle_ms = throttle(deps, ctx, "FETCH", total) if replica_id < 0 else 0
    if throttle_ms > 0:
        # Kafka's handleFetchRequest: a throttled fetch is answered empty (a sessionless
        # context's throttled response) and its bytes are taken back off the fetch quota.
        deps.record_quota(ctx, "FETCH", -float(total))
        return FetchRows(throttle_ms, [])
    by_topic: dict[tuple[str, uuid.UUID], list[PartitionRow]] = {}
    for t, result, code, _message in rows:
        key = (t.name, t.topic_id)
        if result is None:
            # A partition refused before reading (unknown id, topic or partition; not
            # authorized) carries an empty aborted list in Kafka's answer, a read error null.
            row = PartitionRow(t.fp.partition, code, -1, -1, -1, () if t.error else None, b"")
        else:
            row = PartitionRow(t.fp.partition, 0, result.high_watermark, result.last_stable_offset,
                               result.log_start_offset,
                               tuple(result.aborted_transactions or ()) if isolation == READ_COMMITTED else None,
                               result.records)
        by_topic.setdefault(key, []).append(row)
    return FetchRows(throttle_ms, [TopicRows(name, tid, parts) for (name, tid), parts in by_topic.items()])


def _empty_read(part: Partition, isolation: int) -> ReadResult[bytes]:
    from strom.core.replica.partition import ReadResult  # the handler layer imports the replica layer lazily

    return ReadResult(b"", part.high_watermark, part.last_stable_offset, part.log_start_offset, part.log_end_offset,
                      [] if isolation == READ_COMMITTED else None)


async def _read_remote(rm: ReplicaManager, remote: list[_RemoteRead], rows: list[Row], isolation: int) -> int:
    """Kafka's DelayedRemoteFetch: the remote reads run on reader threads; the fetch waits in the
    purgatory until they are done or ``remote.fetch.max.wait.ms`` passes (then those partitions
    answer no records). Fills their rows; returns the bytes read."""
    from strom.core.replica.partition import ReadResult  # the handler layer imports the replica layer lazily

    fetcher = rm.remote_fetcher
    assert fetcher is not None
    loop = asyncio.get_running_loop()
    key = ("remote-fetch", id(remote))
    for r in remote:
        r.future = fetcher.read(r.part, rows[r.row][0].fp.fetch_offset, r.budget, r.min_one,
                                isolation == READ_COMMITTED)
        r.future.add_done_callback(lambda _: loop.call_soon_threadsafe(rm.fetch_purgatory.check_and_complete, key))
    await rm.fetch_purgatory.wait_until([key], lambda: all(r.future is not None and r.future.done()
                                                           for r in remote), fetcher.max_wait_s)
    total = 0
    for r in remote:
        t = rows[r.row][0]
        assert r.future is not None
        records = RecordPieces(())
        aborted: list[tuple[int, int]] | None = [] if isolation == READ_COMMITTED else None
        if r.future.done():
            error = r.future.exception()
            if error is not None:
                code, message = error_of(error)
                rows[r.row] = (t, None, code, message)
                continue
            records, aborted = r.future.result()
        else:
            # Kafka's DelayedRemoteFetch on expiry: the partition answers no records this time; the
            # read goes on (a chunk cache keeps what it brings for the client's next fetch).
            log.debug("remote read of %s-%d at offset %d not done within remote.fetch.max.wait.ms", t.name,
                      t.fp.partition, t.fp.fetch_offset)
            r.future.cancel()
        part = r.part
        result = ReadResult(records, part.high_watermark, part.last_stable_offset, part.log_start_offset,
                            part.log_end_offset, aborted)
        total += len(records)
        rows[r.row] = (t, result, 0, None)
    return total


class FetchRows:
    """A Fetch response encoded by the fast path (see strom.core.protocol.fetch_response)."""

    __slots__ = ("throttle_ms", "topics")

    def __init__(self, throttle_ms: int, topics: list[TopicRows]) -> None:
        self.throttle_ms = throttle_ms
        self.topics = topics

    def frame_parts(self, version: int, correlation_id: int) -> list[bytes | memoryview]:
        return encode_fetch_response(version, correlation_id, self.throttle_ms, 0, 0, self.topics)
