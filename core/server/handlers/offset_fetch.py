"""OffsetFetch (key 9): committed offsets of a group (v8+ of several groups; null topics = all).

``require_stable`` (v7+) answers UNSTABLE_OFFSET_COMMIT for partitions with a transactional
offset commit still waiting for its marker. A group-level error (unknown member, stale member
epoch, coordinator errors) comes with no topics from v2 on, as Kafka's error responses.

From v10 (KIP-848) topics are named by topic id. As Kafka 4.3 answers: a requested id the
metadata image does not know (the zero UUID included) gets UNKNOWN_TOPIC_ID for each of its
partitions, and an "all topics" answer leaves out committed topics that no longer have an id
(they cannot be written without one). Topics failed before the coordinator (unknown id, topic
authorization) come after the coordinator's answer, in request order, as in Kafka.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group.api_support import coordinator_of, denied_groups
from strom.core.metadata.records import ZERO_UUID
from strom.core.protocol.messages import Messages, response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, response_throttle
from strom.core.server.handlers.offset_commit import TOPIC_IDS_FROM

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import GroupDeps
    from strom.core.server.handlers._kio_types import OffsetFetchRequest, OffsetFetchResponse

API_KEY = 9
VERSIONS = (1, 10)

Row = tuple[str, int, int, int, str, int]


def _fetch(deps: GroupDeps, ctx: RequestContext, group_id: str, requested: list[tuple[str | None, list[int]]] | None,
           require_stable: bool, member_id: str | None, member_epoch: int) -> tuple[int, list[Row], list[tuple[int, int]]]:
    """(group error, rows, failed topics): ``requested`` names each topic (None: an unknown id);
    failed topics are (request position, error) in request order, answered after the rows as
    Kafka does. A group error comes with neither, as Kafka answers it."""
    coordinator = coordinator_of(deps)
    if denied_groups(deps, ctx, "DESCRIBE", [group_id]):
        return int(ErrorCode.group_authorization_failed), [], []
    if coordinator is None:
        return int(ErrorCode.coordinator_not_available), [], []
    names = [n for n, _ in requested if n is not None] if requested is not None else []
    denied = authorize_topics(deps, ctx, "DESCRIBE", names)
    allowed = None if requested is None else [(n, ps) for n, ps in requested if n is not None and n not in denied]
    error, rows = coordinator.fetch_offsets(group_id, allowed, require_stable, member_id, member_epoch)
    if error:
        return error, [], []
    if requested is None:
        seen = sorted({r[0] for r in rows})
        hidden = authorize_topics(deps, ctx, "DESCRIBE", seen)
        return 0, [r for r in rows if r[0] not in hidden], []
    found = {(r[0], r[1]): r for r in rows}
    out: list[Row] = []
    failed: list[tuple[int, int]] = []
    for i, (name, partitions) in enumerate(requested):
        if name is None:
            failed.append((i, int(ErrorCode.unknown_topic_id)))
        elif name in denied:
            failed.append((i, int(ErrorCode.topic_authorization_failed)))
        else:
            out.extend(found.get((name, p), (name, p, -1, -1, "", 0)) for p in partitions)
    return 0, out, failed


def _topics(m: Messages, rows: list[Row], batched: bool, ids: dict[str, uuid.UUID] | None = None) -> list[Any]:
    """Response topics from rows; with ``ids`` (v10) named by id, rows of id-less topics left out."""
    topic_cls = "OffsetFetchResponseTopics" if batched else "OffsetFetchResponseTopic"
    part_cls = "OffsetFetchResponsePartitions" if batched else "OffsetFetchResponsePartition"
    by_topic: dict[str, list[Any]] = {}
    for name, p, offset, epoch, metadata, code in rows:
        if ids is not None and ids.get(name, ZERO_UUID) == ZERO_UUID:
            continue
        by_topic.setdefault(name, []).append(m.make(part_cls, partition_index=p, committed_offset=offset,
                                                    committed_leader_epoch=epoch, metadata=metadata,
                                                    error_code=code))
    return [m.make(topic_cls, name=n, topic_id=None if ids is None else ids[n], partitions=tuple(ps))
            for n, ps in by_topic.items()]


def _failed_topics(m: Messages, request_topics: Any, failed: list[tuple[int, int]], batched: bool) -> list[Any]:
    """Topics answered with one error for each requested partition (the request's name or id echoed)."""
    topic_cls = "OffsetFetchResponseTopics" if batched else "OffsetFetchResponseTopic"
    part_cls = "OffsetFetchResponsePartitions" if batched else "OffsetFetchResponsePartition"
    out = []
    for i, code in failed:
        t = request_topics[i]
        out.append(m.make(topic_cls, name=getattr(t, "name", None), topic_id=getattr(t, "topic_id", None),
                          partitions=tuple(m.make(part_cls, partition_index=p, committed_offset=-1,
                                                  committed_leader_epoch=-1, metadata="", error_code=code)
                                           for p in t.partition_indexes)))
    return out


def _requested(deps: GroupDeps, topics: Any, by_id: bool) -> list[tuple[str | None, list[int]]] | None:
    """Each request topic's name (None for an id the image does not know) and partitions."""
    if topics is None:
        return None
    image = deps.image
    return [(image.topic_name(t.topic_id) if by_id else t.name, list(t.partition_indexes)) for t in topics]


def _group(deps: GroupDeps, ctx: RequestContext, m: Messages, g: Any, require_stable: bool) -> Any:
    """One group's answer (v8+)."""
    by_id = ctx.api_version >= TOPIC_IDS_FROM
    error, rows, failed = _fetch(deps, ctx, g.group_id, _requested(deps, g.topics, by_id), require_stable,
                                 getattr(g, "member_id", None), getattr(g, "member_epoch", -1))
    image = deps.image
    ids = {r[0]: image.topic_id(r[0]) for r in rows} if by_id else None
    topics = _topics(m, rows, True, ids) + _failed_topics(m, g.topics, failed, True)
    return m.make("OffsetFetchResponseGroup", group_id=g.group_id, topics=tuple(topics), error_code=error)


async def handle(deps: GroupDeps, ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    v = ctx.api_version
    m = response_messages(API_KEY, v)
    require_stable = bool(getattr(request, "require_stable", False))
    by_version: Any = request  # mypy cannot narrow the Union by ctx.api_version
    if v >= 8:
        groups = tuple(_group(deps, ctx, m, g, require_stable) for g in by_version.groups)
        return m.make("OffsetFetchResponse", throttle_time=response_throttle(deps, ctx), groups=groups)
    error, rows, failed = _fetch(deps, ctx, by_version.group_id, _requested(deps, by_version.topics, False),
                                 require_stable, None, -1)
    topics = _topics(m, rows, False) + _failed_topics(m, by_version.topics, failed, False)
    if v < 2 and error:
        # v1 has no group-level error: it goes into every requested partition.
        asked = by_version.topics or ()
        topics = _failed_topics(m, asked, [(i, error) for i in range(len(asked))], False)
    return m.make("OffsetFetchResponse", throttle_time=response_throttle(deps, ctx),
                  topics=tuple(topics), error_code=error)
