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


async def _offset_for_timestamp(deps: ReplicaDeps, part: Partition, timestamp: int) -> tuple[int, int, int] | None:
    """A timestamp or -3: from the remote tier when the log is tiered, else from the local log."""
    remote = deps.replica_manager.remote_fetcher
    if not isinstance(remote, RemoteOffsetLookup) or not part.log.remote_log_enabled:
        return part.fetch_offset_for_timestamp(timestamp)
    # Not a BrokerConfig field: a Kafka key the config keeps as given (validated by Kafka's table).
    timeout_ms = int((deps.config.model_extra or {}).get("remote.list.offsets.request.timeout.ms",
                                                         REMOTE_LIST_OFFSETS_TIMEOUT_MS))
    try:
        return await asyncio.wait_for(asyncio.wrap_future(remote.offset_for_timestamp(part, timestamp)),
                                      timeout_ms / 1000)
    except TimeoutError:
        raise RequestTimedOutError(f"ListOffsets of {part.topic}-{part.index} at timestamp {timestamp}: "
                                   f"remote storage did not answer within {timeout_ms} ms") from None


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
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            if (t.name, p.partition_index) in answered:
                continue  # a partition asked for twice is answered once (Kafka keys answers by partition)
            answered.add((t.name, p.partition_index))
            offset, timestamp, epoch, code, _message = -1, -1, -1, 0, None
            if t.name in denied:
                code = int(ErrorCode.topic_authorization_failed)
            elif (t.name, p.partition_index) in duplicates:
                code = int(ErrorCode.invalid_request)
            elif p.timestamp < 0 and ctx.api_version < MIN_VERSION.get(p.timestamp, 1 << 15):
                code = int(ErrorCode.unsupported_version)
            else:
                try:
                    part = deps.replica_manager.get_partition(t.name, p.partition_index)
                    part.check_leader_epoch(getattr(p, "current_leader_epoch", -1))
                    ts = p.timestamp
                    if ts == LATEST:
                        offset = part.last_stable_offset if isolation == 1 else part.high_watermark
                        epoch = part.leader_epoch
                    elif ts in (EARLIEST, EARLIEST_LOCAL):
                        # The log answers the start offset with the epoch of its leader-epoch cache.
                        offset, _, epoch = part.fetch_offset_for_timestamp(ts) or (part.log_start_offset, -1, -1)
                    elif ts == LATEST_TIERED:
                        # The end of the newest segment copied to remote storage; -1 for a
                        # topic without remote storage or with nothing copied yet.
                        offset, _, epoch = part.fetch_offset_for_timestamp(ts) or (-1, -1, -1)
                    elif ts == EARLIEST_PENDING_UPLOAD:
                        offset, _, epoch = earliest_pending_upload(part.log)
                    else:
                        found = await _offset_for_timestamp(deps, part, ts)
                        if found is not None:
                            offset, timestamp, epoch = found
                            if offset >= part.high_watermark:
                                offset, timestamp, epoch = -1, -1, -1
                except Exception as e:
                    code, _message = error_of(e)
            parts.append(m.make("ListOffsetsPartitionResponse", partition_index=p.partition_index,
                                error_code=code, timestamp=timestamp, offset=offset, leader_epoch=epoch,
                                old_style_offsets=()))
        topics.append(m.make("ListOffsetsTopicResponse", name=t.name, partitions=tuple(parts)))
    return m.make("ListOffsetsResponse", throttle_time=response_throttle(deps, ctx), topics=tuple(topics))
