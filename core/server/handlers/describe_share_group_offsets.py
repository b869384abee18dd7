"""DescribeShareGroupOffsets (key 90, v0-v1): a share group's start offset per share partition.

As Kafka 4.3.1's ``KafkaApis`` and ``GroupCoordinatorService.describeShareGroupOffsets`` answer
(checked against it): DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED for that group (no
topics); topics null means every share partition the group has state for, then unauthorized
topics are left out; named topics the principal may not DESCRIBE answer
TOPIC_AUTHORIZATION_FAILED per partition (topic id zero, start offset -1). A topic the metadata
does not know, a partition never initialized and a group that does not exist are not errors:
the start offset is -1 (as OffsetFetch answers "no offset"). The start offset and the
delivery-complete count come from the share coordinator's state (ReadShareGroupStateSummary);
v1's lag is the high watermark minus the start offset minus the records already delivered
(-1 when the start offset is -1). The leader epoch is the one the state was last written with,
0 before a share-partition leader wrote it (Kafka's PartitionFactory.DEFAULT_LEADER_EPOCH; its
4.3.1 broker answers 0 for a state only initialized, as for none).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.errors import TopicAuthorizationError
from strom.core.protocol.messages import Messages, response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, error_of, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ShareGroupOffsetsDeps
    from strom.core.server.handlers._kio_types import (
        DescribeShareGroupOffsetsRequest,
        DescribeShareGroupOffsetsResponse,
    )

API_KEY = 90
VERSIONS = (0, 1)

UNINITIALIZED_START_OFFSET = -1
DEFAULT_LEADER_EPOCH = 0


def share_partition_lag(deps: ShareGroupOffsetsDeps, topic: str, partition: int, start_offset: int,
                        delivery_complete_count: int) -> int:
    """Records of the partition not yet delivered to the group (-1: unknown)."""
    if start_offset < 0:
        return -1
    part = deps.replica_manager.partitions.get((topic, partition))
    if part is None:
        return -1
    # A state written before any delivery has no count (-1): nothing delivered past the start.
    return part.high_watermark - start_offset - max(delivery_complete_count, 0)


def _partition(m: Messages, deps: ShareGroupOffsetsDeps, group_id: str, topic: str, topic_id: uuid.UUID | None,
               partition: int) -> object:
    summary = None
    if topic_id is not None:
        summary = deps.share_coordinator.read_summary(group_id, topic_id, partition)
    start = summary.start_offset if summary is not None else UNINITIALIZED_START_OFFSET
    lag = share_partition_lag(deps, topic, partition, start, summary.delivery_complete_count) if summary else -1
    epoch = max(summary.leader_epoch, DEFAULT_LEADER_EPOCH) if summary is not None else DEFAULT_LEADER_EPOCH
    return m.make("DescribeShareGroupOffsetsResponsePartition", partition_index=partition, start_offset=start,
                  leader_epoch=epoch, lag=lag, error_code=0, error_message=None)


def _describe_group(m: Messages, deps: ShareGroupOffsetsDeps, ctx: RequestContext, group_id: str,
                    topics: list[tuple[str, list[int]]] | None) -> tuple[object, ...]:
    image = deps.image
    out: list[object] = []
    if topics is None:
        # Every share partition with state, by topic; topics deleted since are left out (Kafka
        # reads them through the metadata image too), and so are topics the principal may not
        # DESCRIBE.
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic_id, partition in deps.share_coordinator.group_partitions(group_id):
            by_topic.setdefault(topic_id, set()).add(partition)
        named = [(t.name, tid, sorted(ps)) for tid, ps in by_topic.items()
                 if (t := image.topic_by_id(tid)) is not None]
        denied = authorize_topics(deps, ctx, "DESCRIBE", [name for name, _, _ in named])
        for name, tid, parts in named:
            if name in denied:
                continue
            out.append(m.make("DescribeShareGroupOffsetsResponseTopic", topic_name=name, topic_id=tid,
                              partitions=tuple(_partition(m, deps, group_id, name, tid, p) for p in parts)))
        return tuple(out)
    denied = authorize_topics(deps, ctx, "DESCRIBE", [name for name, _ in topics])
    refused: list[object] = []
    for name, parts in topics:
        if name in denied:
            # Kafka appends the unauthorized topics after the answered ones.
            refused.append(m.make(
                "DescribeShareGroupOffsetsResponseTopic", topic_name=name, topic_id=None, partitions=tuple(
                    m.make("DescribeShareGroupOffsetsResponsePartition", partition_index=p,
                           start_offset=UNINITIALIZED_START_OFFSET, leader_epoch=DEFAULT_LEADER_EPOCH, lag=-1,
                           error_code=ErrorCode.topic_authorization_failed,
                           error_message=TopicAuthorizationError.description)
                    for p in parts)))
            continue
        topic = image.topics.get(name)
        known_id = topic.topic_id if topic is not None else None
        out.append(m.make("DescribeShareGroupOffsetsResponseTopic", topic_name=name, topic_id=known_id,
                          partitions=tuple(_partition(m, deps, group_id, name, known_id, p) for p in parts)))
    return tuple(out + refused)


async def handle(deps: ShareGroupOffsetsDeps, ctx: RequestContext,
                 request: DescribeShareGroupOffsetsRequest) -> DescribeShareGroupOffsetsResponse:
    m = response_messages(API_KEY, ctx.api_version)
    groups = []
    for g in request.groups:
        error, message = 0, None
        topics: tuple[object, ...] = ()
        if not deps.authorize(ctx, "DESCRIBE", "GROUP", [g.group_id])[0]:
            # Kafka sets only the code here (no message).
            error = int(ErrorCode.group_authorization_failed)
        else:
            try:
                deps.group_coordinator.check_available(g.group_id)
                wanted = None if g.topics is None else [(str(t.topic_name), [int(p) for p in t.partitions])
                                                        for t in g.topics]
                topics = _describe_group(m, deps, ctx, g.group_id, wanted)
            except Exception as e:
                error, message = error_of(e)
        groups.append(m.make("DescribeShareGroupOffsetsResponseGroup", group_id=g.group_id, topics=topics,
                             error_code=error, error_message=message))
    return m.make("DescribeShareGroupOffsetsResponse", throttle_time=response_throttle(deps, ctx),
                  groups=tuple(groups))
