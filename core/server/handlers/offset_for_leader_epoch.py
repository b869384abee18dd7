"""OffsetForLeaderEpoch (key 23): the end offset of a leader epoch, for log truncation (KIP-101/320).

Consumers use it after a leader change to detect log divergence; followers to truncate.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, partition_call, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ReplicaDeps
    from strom.core.server.handlers._kio_types import (
        OffsetForLeaderEpochRequest,
        OffsetForLeaderEpochResponse,
    )

API_KEY = 23
VERSIONS = (2, 4)


def _end_offset(deps: ReplicaDeps, topic: str, index: int, current_leader_epoch: int,
                leader_epoch: int) -> tuple[int, int]:
    """(epoch, end offset) of ``leader_epoch`` in the partition, if the caller's epoch is current."""
    part = deps.replica_manager.get_partition(topic, index)
    part.check_leader_epoch(current_leader_epoch)
    return part.last_offset_for_leader_epoch(leader_epoch)


async def handle(deps: ReplicaDeps, ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    m = response_messages(API_KEY, ctx.api_version)
    denied = authorize_topics(deps, ctx, "DESCRIBE", [t.topic for t in request.topics])
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, found = partition_call(denied, t.topic, partial(
                _end_offset, deps, t.topic, p.partition, p.current_leader_epoch, p.leader_epoch))
            epoch, end = found or (-1, -1)
            parts.append(m.make("EpochEndOffset", error_code=code, partition=p.partition, leader_epoch=epoch,
                                end_offset=end))
        topics.append(m.make("OffsetForLeaderTopicResult", topic=t.topic, partitions=tuple(parts)))
    return m.make("OffsetForLeaderEpochResponse", throttle_time=response_throttle(deps, ctx), topics=tuple(topics))
