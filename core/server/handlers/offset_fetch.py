"""OffsetFetch (key 9): committed offsets of a group (v8+ of several groups; null topics = all).

``require_stable`` (v7+) answers UNSTABLE_OFFSET_COMMIT for partitions with a transactional
offset commit still waiting for its marker. A group-level error (unknown member, stale member
epoch, coordinator errors) comes with no topics from v2 on, as Kafka's error responses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group.api_support import coordinator_of, denied_groups
from strom.core.protocol.messages import Messages, response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, response_throttle

if TYPE_CHECKING:
    from strom.core.server.broker import Broker

API_KEY = 9
VERSIONS = (1, 9)

Row = tuple[str, int, int, int, str, int]


def _fetch(broker: Broker, ctx: RequestContext, group_id: str, topics: Any, require_stable: bool,
           member_id: str | None, member_epoch: int) -> tuple[int, list[Row]]:
    """(group error, rows); a group error comes with no rows, as Kafka answers it."""
    requested = None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]
    coordinator = coordinator_of(broker)
    if denied_groups(broker, ctx, "DESCRIBE", [group_id]):
        return int(ErrorCode.group_authorization_failed), []
    if coordinator is None:
        return int(ErrorCode.coordinator_not_available), []
    names = [n for n, _ in requested] if requested is not None else []
    denied = authorize_topics(broker, ctx, "DESCRIBE", names)
    allowed = None if requested is None else [(n, ps) for n, ps in requested if n not in denied]
    error, rows = coordinator.fetch_offsets(group_id, allowed, require_stable, member_id, member_epoch)
    if error:
        return error, []
    if requested is None:
        seen = sorted({r[0] for r in rows})
        hidden = authorize_topics(broker, ctx, "DESCRIBE", seen)
        return 0, [r for r in rows if r[0] not in hidden]
    found = {(r[0], r[1]): r for r in rows}
    out = []
    for name, partitions in requested:
        for p in partitions:
            row = found.get((name, p))
            out.append(row if row is not None and name not in denied
                       else (name, p, -1, -1, "", int(ErrorCode.topic_authorization_failed)))
    return 0, out


def _topics(m: Messages, rows: list[Row], batched: bool) -> tuple[Any, ...]:
    topic_cls = "OffsetFetchResponseTopics" if batched else "OffsetFetchResponseTopic"
    part_cls = "OffsetFetchResponsePartitions" if batched else "OffsetFetchResponsePartition"
    by_topic: dict[str, list[Any]] = {}
    for name, p, offset, epoch, metadata, code in rows:
        by_topic.setdefault(name, []).append(m.make(part_cls, partition_index=p, committed_offset=offset,
                                                    committed_leader_epoch=epoch, metadata=metadata,
                                                    error_code=code))
    return tuple(m.make(topic_cls, name=n, partitions=tuple(ps)) for n, ps in by_topic.items())


async def handle(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    v = ctx.api_version
    m = response_messages(API_KEY, v)
    require_stable = bool(getattr(request, "require_stable", False))
    if v >= 8:
        groups = []
        for g in request.groups:
            error, rows = _fetch(broker, ctx, g.group_id, g.topics, require_stable,
                                 getattr(g, "member_id", None), getattr(g, "member_epoch", -1))
            groups.append(m.make("OffsetFetchResponseGroup", group_id=g.group_id, topics=_topics(m, rows, True),
                                 error_code=error))
        return m.make("OffsetFetchResponse", throttle_time=response_throttle(broker, ctx), groups=tuple(groups))
    error, rows = _fetch(broker, ctx, request.group_id, request.topics, require_stable, None, -1)
    if v < 2 and error:
        # v1 has no group-level error: it goes into every requested partition.
        rows = [(t.name, p, -1, -1, "", error) for t in request.topics or () for p in t.partition_indexes]
    return m.make("OffsetFetchResponse", throttle_time=response_throttle(broker, ctx),
                  topics=_topics(m, rows, False), error_code=error)
