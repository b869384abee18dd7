"""OffsetCommit (key 8): a group member (or a simple consumer) commits offsets with metadata.

Topic checks (authorization, existence) answer per partition here; the group coordinator
answers the rest, for a KIP-848 group all partitions alike when it refuses the member epoch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group.api_support import coordinator_of, denied_groups
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, response_throttle

if TYPE_CHECKING:
    from strom.core.server.broker import Broker

API_KEY = 8
VERSIONS = (2, 9)


async def handle(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    m = response_messages(API_KEY, ctx.api_version)
    group_id = request.group_id
    codes: dict[tuple[str, int], int] = {}
    coordinator = coordinator_of(broker)
    group_error = 0
    if denied_groups(broker, ctx, "READ", [group_id]):
        group_error = int(ErrorCode.group_authorization_failed)
    elif coordinator is None:
        group_error = int(ErrorCode.coordinator_not_available)
    denied = authorize_topics(broker, ctx, "READ", [t.name for t in request.topics]) if not group_error else set()
    topics = broker.image.topics
    wanted: list[tuple[str, int, int, int, str | None]] = []
    for t in request.topics:
        known = topics.get(t.name)
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if group_error:
                codes[tp] = group_error
            elif t.name in denied:
                codes[tp] = int(ErrorCode.topic_authorization_failed)
            elif known is None or p.partition_index not in known.partitions:
                codes[tp] = int(ErrorCode.unknown_topic_or_partition)
            else:
                wanted.append((t.name, p.partition_index, p.committed_offset,
                               getattr(p, "committed_leader_epoch", -1), p.committed_metadata))
    if wanted and coordinator is not None:
        codes.update(await coordinator.commit_offsets(
            group_id, request.generation_id_or_member_epoch, request.member_id,
            getattr(request, "group_instance_id", None), wanted, api_version=ctx.api_version))
    out = []
    for t in request.topics:
        parts = tuple(m.make("OffsetCommitResponsePartition", partition_index=p.partition_index,
                             error_code=codes.get((t.name, p.partition_index), 0)) for p in t.partitions)
        out.append(m.make("OffsetCommitResponseTopic", name=t.name, partitions=parts))
    return m.make("OffsetCommitResponse", throttle_time=response_throttle(broker, ctx), topics=tuple(out))
