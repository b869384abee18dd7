"""ListOffsets (key 2): offsets by timestamp and by the special timestamps below.

Special (negative) timestamps each need a minimum request version, checked as Kafka's
ReplicaManager does: an older request, or a negative timestamp Kafka does not know, answers
UNSUPPORTED_VERSION for that partition; a partition asked for twice in one request answers
INVALID_REQUEST for every copy. The tiered-storage timestamps: -4 (earliest local, KIP-1005)
is the first offset on local disk, -2 the log start with remote data included; -5 (latest
tiered) is the end of the newest segment in remote storage (-1 without remote storage or before
the first copy); -6 (earliest pending upload, KIP-1023, the reason for v11) is the first offset
not yet copied to remote storage, as Kafka 4.3 answers it (no offset, -1, on a log without
remote storage). On a tiered log a timestamp and -3 (max timestamp) also search the remote
segments (``core/replica/remote_offsets.py``): the lookup runs on the remote tier's reader
threads and the handler awaits it, at most ``remote.list.offsets.request.timeout.ms``
(REQUEST_TIMED_OUT past it, as Kafka's DelayedRemoteListOffsets).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from kio.schema.errors import ErrorCode

from strom.core.errors import RequestTimedOutError
from strom.core.protocol.messages import response_messages
from strom.core.replica.remote_offsets import earliest_pending_upload
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, error_of, response_throttle

if TYPE_CHECKING:
    from strom.core.replica.partition import Partition
    from strom.core.server.handlers._deps import ReplicaDeps
    from strom.core.server.handlers._kio_types import ListOffsetsRequest, ListOffsetsResponse

API_KEY = 2
VERSIONS = (1, 11)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6

# The first request version that may carry each special timestamp (Kafka's table).
MIN_VERSION = {LATEST: 1, EARLIEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
               EARLIEST_PENDING_UPLOAD: 11}
REMOTE_LIST_OFFSETS_TIMEOUT_MS = 30_000  # Kafka's remote.list.offsets.request.timeout.ms default


@runtime_checkable
class RemoteOffsetLookup(Protocol):
    """The remote tier's ListOffsets search (``RemoteLogBinding``), present only on a broker with
    ``remote.log.storage.system.enable``."""

    def offset_for_timestamp(self, part: Partition, timestamp: int) -> Future[tuple[int, int, int] | None]: ...


def _remote_lookup(deps: ReplicaDeps, part: Partition, timestamp: int) -> Future[tuple[int, int, int] | None] | None:
    """A timestamp or -3 on a tiered log: the remote tier's lookup, started on its reader threads
    (None: the local log answers)."""
    remote = deps.replica_manager.remote_fetcher
    if not isinstance(remote, RemoteOffsetLookup) or not part.log.remote_log_enabled:
        return None
    return remote.offset_for_timestamp(part, timestamp)


@dataclass(slots=True)
class _Answer:
    partition_index: int
    code: int = 0
    timestamp: int = -1
    offset: int = -1
    epoch: int = -1

    def found(self, found: tuple[int, int, int] | None, high_watermark: int) -> None:
        if found is not None and found[0] < high_watermark:
            self.offset, self.timestamp, self.epoch = found


async def _await_remote(deps: ReplicaDeps, waiting: list[tuple[_Answer, Partition, int, Future[tuple[int, int, int] | None]]]
                        ) -> None:
    """The remote lookups of one request, concurrently, each bounded by
    ``remote.list.offsets.request.timeout.ms`` (REQUEST_TIMED_OUT past it, as Kafka's
    DelayedRemoteListOffsets)."""
    # Not a BrokerConfig field: a Kafka key the config keeps as given (validated by Kafka's table).
    timeout_ms = int((deps.config.model_extra or {}).get("remote.list.offsets.request.timeout.ms",
                                                         REMOTE_LIST_OFFSETS_TIMEOUT_MS))
    done = await asyncio.gather(*(asyncio.wait_for(asyncio.wrap_future(future), timeout_ms / 1000)
                                  for _, _, _, future in waiting), return_exceptions=True)
    for (answer, part, timestamp, _), result in zip(waiting, done, strict=True):
        if isinstance(result, TimeoutError):
            result = RequestTimedOutError(f"ListOffsets of {part.topic}-{part.index} at timestamp {timestamp}: "
                                          f"remote storage did not answer within {timeout_ms} ms")
        if isinstance(result, BaseException):
            if not isinstance(result, Exception):
                raise result
            answer.code = error_of(result)[0]
        else:
            answer.found(result, part.high_watermark)


async def handle(deps: ReplicaDeps, ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    m = response_messages(API_KEY, ctx.api_version)
    isolation = getattr(request, "isolation_level", 0)
    denied = authorize_topics(deps, ctx, "DESCRIBE", [t.name for t in request.topics])
    seen: set[tuple[str, int]] = set()
    duplicates: set[tuple[str, int]] = set()
    for t in request.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            (duplicates if tp in seen else seen).add(tp)
    answered: set[tuple[str, int]] = set()
    by_topic: list[tuple[str, list[_Answer]]] = []
    waiting: list[tuple[_Answer, Partition, int, Future[tuple[int, int, int] | None]]] = []
    for t in request.topics:
        answers: list[_Answer] = []
        for p in t.partitions:
            if (t.name, p.partition_index) in answered:
                continue  # a partition asked for twice is answered once (Kafka keys answers by partition)
            answered.add((t.name, p.partition_index))
            a = _Answer(p.partition_index)
            answers.append(a)
            if t.name in denied:
                a.code = int(ErrorCode.topic_authorization_failed)
            elif (t.name, p.partition_index) in duplicates:
                a.code = int(ErrorCode.invalid_request)
            elif p.timestamp < 0 and ctx.api_version < MIN_VERSION.get(p.timestamp, 1 << 15):
                a.code = int(ErrorCode.unsupported_version)
            else:
                try:
                    part = deps.replica_manager.get_partition(t.name, p.partition_index)
                    part.check_leader_epoch(getattr(p, "current_leader_epoch", -1))
                    ts = p.timestamp
                    if ts == LATEST:
                        a.offset = part.last_stable_offset if isolation == 1 else part.high_watermark
                        a.epoch = part.leader_epoch
                    elif ts in (EARLIEST, EARLIEST_LOCAL):
                        # The log answers the start offset with the epoch of its leader-epoch cache.
                        a.offset, _, a.epoch = part.fetch_offset_for_timestamp(ts) or (part.log_start_offset, -1, -1)
                    elif ts == LATEST_TIERED:
                        # The end of the newest segment copied to remote storage; -1 for a
                        # topic without remote storage or with nothing copied yet.
                        a.offset, _, a.epoch = part.fetch_offset_for_timestamp(ts) or (-1, -1, -1)
                    elif ts == EARLIEST_PENDING_UPLOAD:
                        a.offset, _, a.epoch = earliest_pending_upload(part.log)
                    elif (future := _remote_lookup(deps, part, ts)) is not None:
                        waiting.append((a, part, ts, future))
                    else:
                        a.found(part.fetch_offset_for_timestamp(ts), part.high_watermark)
                except Exception as e:
                    a.code = error_of(e)[0]
        by_topic.append((t.name, answers))
    if waiting:
        await _await_remote(deps, waiting)
    topics = tuple(m.make("ListOffsetsTopicResponse", name=name, partitions=tuple(
        m.make("ListOffsetsPartitionResponse", partition_index=a.partition_index, error_code=a.code,
               timestamp=a.timestamp, offset=a.offset, leader_epoch=a.epoch, old_style_offsets=())
        for a in answers)) for name, answers in by_topic)
    return m.make("ListOffsetsResponse", throttle_time=response_throttle(deps, ctx), topics=topics)
