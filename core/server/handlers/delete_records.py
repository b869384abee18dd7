"""DeleteRecords (key 21): advance a partition's log start offset (its low watermark)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from strom.core.errors import OffsetOutOfRangeError
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, partition_call, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ReplicaDeps
    from strom.core.server.handlers._kio_types import DeleteRecordsRequest, DeleteRecordsResponse

API_KEY = 21
VERSIONS = (0, 2)
HIGH_WATERMARK = -1  # offset -1 means "delete everything up to the high watermark"


def _delete_records(deps: ReplicaDeps, topic: str, index: int, requested: int) -> int:
    """Advance the partition's log start to ``requested``; returns the new low watermark."""
    part = deps.replica_manager.get_partition(topic, index)
    offset = part.high_watermark if requested == HIGH_WATERMARK else requested
    if offset < 0 or offset > part.high_watermark:
        raise OffsetOutOfRangeError(f"offset {requested} is outside [0, high watermark {part.high_watermark}]")
    return part.delete_records_on_leader(offset)


async def handle(deps: ReplicaDeps, ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    denied = authorize_topics(deps, ctx, "DELETE", [t.name for t in request.topics])
    m = response_messages(API_KEY, ctx.api_version)
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, low = partition_call(denied, t.name, partial(_delete_records, deps, t.name, p.partition_index,
                                                               p.offset))
            parts.append(m.make("DeleteRecordsPartitionResult", partition_index=p.partition_index,
                                low_watermark=-1 if low is None else low, error_code=code))
        topics.append(m.make("DeleteRecordsTopicResult", name=t.name, partitions=tuple(parts)))
    return m.make("DeleteRecordsResponse", throttle_time=response_throttle(deps, ctx), topics=tuple(topics))
