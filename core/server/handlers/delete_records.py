"""DeleteRecords (key 21): advance a partition's log start offset (its low watermark)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.errors import OffsetOutOfRangeError
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, error_of, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ReplicaDeps
    from strom.core.server.handlers._kio_types import DeleteRecordsRequest, DeleteRecordsResponse

API_KEY = 21
VERSIONS = (0, 2)
HIGH_WATERMARK = -1  # offset -1 means "delete everything up to the high watermark"


async def handle(deps: ReplicaDeps, ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    m = response_messages(API_KEY, ctx.api_version)
    denied = authorize_topics(deps, ctx, "DELETE", [t.name for t in request.topics])
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            low, code = -1, 0
            if t.name in denied:
                code = int(ErrorCode.topic_authorization_failed)
            else:
                try:
                    part = deps.replica_manager.get_partition(t.name, p.partition_index)
                    offset = part.high_watermark if p.offset == HIGH_WATERMARK else p.offset
                    if offset < 0 or offset > part.high_watermark:
                        raise OffsetOutOfRangeError(
                            f"offset {p.offset} is outside [0, high watermark {part.high_watermark}]")
                    low = part.delete_records_on_leader(offset)
                except Exception as e:
                    code = error_of(e)[0]
            parts.append(m.make("DeleteRecordsPartitionResult", partition_index=p.partition_index,
                                low_watermark=low, error_code=code))
        topics.append(m.make("DeleteRecordsTopicResult", name=t.name, partitions=tuple(parts)))
    return m.make("DeleteRecordsResponse", throttle_time=response_throttle(deps, ctx), topics=tuple(topics))
