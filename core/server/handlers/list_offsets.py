"""ListOffsets (key 2): offsets by timestamp, earliest (-2), latest (-1), max timestamp (-3)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, error_of, response_throttle

if TYPE_CHECKING:
    from strom.core.server.broker import Broker

API_KEY = 2
VERSIONS = (1, 10)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4


async def handle(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    m = response_messages(API_KEY, ctx.api_version)
    isolation = getattr(request, "isolation_level", 0)
    denied = authorize_topics(broker, ctx, "DESCRIBE", [t.name for t in request.topics])
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            offset, timestamp, epoch, code, _message = -1, -1, -1, 0, None
            if t.name in denied:
                code = int(ErrorCode.topic_authorization_failed)
            else:
                try:
                    part = broker.replica_manager.get_partition(t.name, p.partition_index)
                    part.check_leader_epoch(getattr(p, "current_leader_epoch", -1))
                    ts = p.timestamp
                    if ts == LATEST:
                        offset = part.last_stable_offset if isolation == 1 else part.high_watermark
                        epoch = part.leader_epoch
                    elif ts in (EARLIEST, EARLIEST_LOCAL):
                        offset = part.log.log_start_offset
                        epoch = part.log.epoch_for_offset(offset) if hasattr(part.log, "epoch_for_offset") else -1
                    else:
                        found = part.log.fetch_offset_by_timestamp(ts)
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
    return m.make("ListOffsetsResponse", throttle_time=response_throttle(broker, ctx), topics=tuple(topics))
