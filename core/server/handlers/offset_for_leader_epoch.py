"""OffsetForLeaderEpoch (key 23): the end offset of a leader epoch, for log truncation (KIP-101/320).

Consumers use it after a leader change to detect log divergence; followers to truncate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, error_of, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ReplicaDeps
    from strom.core.server.handlers._kio_types import (
        OffsetForLeaderEpochRequest,
        OffsetForLeaderEpochResponse,
    )

API_KEY = 23
VERSIONS = (2, 4)


async def handle(deps: ReplicaDeps, ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    m = response_messages(API_KEY, ctx.api_version)
    denied = authorize_topics(deps, ctx, "DESCRIBE", [t.topic for t in request.topics])
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, epoch, end = 0, -1, -1
            if t.topic in denied:
                code = int(ErrorCode.topic_authorization_failed)
            else:
                try:
                    part = deps.replica_manager.get_partition(t.topic, p.partition)
                    part.check_leader_epoch(p.current_leader_epoch)
                    epoch, end = part.last_offset_for_leader_epoch(p.leader_epoch)
                except Exception as e:
                    code = error_of(e)[0]
            parts.append(m.make("EpochEndOffset", error_code=code, partition=p.partition, leader_epoch=epoch,
                                end_offset=end))
        topics.append(m.make("OffsetForLeaderTopicResult", topic=t.topic, partitions=tuple(parts)))
    return m.make("OffsetForLeaderEpochResponse", throttle_time=response_throttle(deps, ctx), topics=tuple(topics))
