"""OffsetDelete (key 47): drop committed offsets of partitions the group no longer consumes.

Partitions of unknown topics (or beyond a topic's partition count) get UNKNOWN_TOPIC_OR_PARTITION;
a group-level error (unknown group, non-empty classic group of another protocol) comes with
no topics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group.api_support import group_coordinator_for
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import GroupDeps
    from strom.core.server.handlers._kio_types import OffsetDeleteRequest, OffsetDeleteResponse

API_KEY = 47
VERSIONS = (0, 0)


async def handle(deps: GroupDeps, ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    m = response_messages(API_KEY, ctx.api_version)
    coordinator, error = group_coordinator_for(deps, ctx, "DELETE", request.group_id)
    codes: dict[tuple[str, int], int] = {}
    if coordinator is not None:
        denied = authorize_topics(deps, ctx, "READ", [t.name for t in request.topics])
        topics = deps.image.topics
        wanted: list[tuple[str, list[int]]] = []
        for t in request.topics:
            # As Kafka's KafkaApis: unauthorized topics, then unknown topics and partitions are
            # answered here; the coordinator only sees partitions that exist.
            known = topics.get(t.name)
            valid: list[int] = []
            for p in t.partitions:
                if t.name in denied:
                    codes[(t.name, p.partition_index)] = int(ErrorCode.topic_authorization_failed)
                elif known is None or p.partition_index not in known.partitions:
                    codes[(t.name, p.partition_index)] = int(ErrorCode.unknown_topic_or_partition)
                else:
                    valid.append(p.partition_index)
            if valid:
                wanted.append((t.name, valid))
        error, results = await coordinator.delete_offsets(request.group_id, wanted)
        codes.update(results)
    topics_out = () if error else tuple(
        m.make("OffsetDeleteResponseTopic", name=t.name, partitions=tuple(
            m.make("OffsetDeleteResponsePartition", partition_index=p.partition_index,
                   error_code=codes.get((t.name, p.partition_index), 0)) for p in t.partitions))
        for t in request.topics)
    return m.make("OffsetDeleteResponse", error_code=error, throttle_time=response_throttle(deps, ctx),
                  topics=topics_out)
