"""DescribeTopicPartitions (key 75, KIP-966): topics and their partitions, paged by a cursor.

What the Java Admin client's ``describeTopics`` (and ``kafka-topics.sh --describe``) uses when
the broker offers it. Answers from the latest committed MetadataImage, as Kafka 4.3's
DescribeTopicPartitionsRequestHandler does (observed against the reference broker):

* an empty topic list means every topic; otherwise the named topics, deduplicated. Either way
  only names ``>=`` the cursor's topic name are considered, in name order;
* a cursor whose topic is not among the named topics, or whose partition index is negative, fails
  the whole request with INVALID_REQUEST; an empty topic name fails it with UNKNOWN_SERVER_ERROR
  (Kafka's authorizer lookup throws on it). A failed request answers one error entry per
  requested topic, in request order, with no authorized operations;
* at most ``response_partition_limit`` partitions (clamped to 1..2000, Kafka's
  ``max.request.partition.size.limit`` default) are described. When a topic is cut short
  ``next_cursor`` points at its next partition; when the budget is used up exactly, at the next
  topic (partition 0) — even one that does not exist. A cursor past a topic's last partition
  describes it with no partitions;
* topics that do not exist answer UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an
  illegal name) when named, and cost nothing from the budget; unauthorized named topics answer
  TOPIC_AUTHORIZATION_FAILED after the others (without an id: their existence is not disclosed);
  when listing every topic, unauthorized ones are left out;
* strom has no eligible leader replicas (KIP-966 ELR): like Kafka for a partition without
  them, both ELR lists are empty, not null.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.errors import InvalidTopicError
from strom.core.metadata.image import MetadataImage, TopicImage
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import (
    AUTHORIZED_OPERATIONS_OMITTED,
    INTERNAL_TOPICS,
    authorize_topics,
    authorized_operations,
    response_throttle,
)
from strom.core.topic_names import validate_topic_name

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ImageDeps
    from strom.core.server.handlers._kio_types import (
        DescribeTopicPartitionsRequest,
        DescribeTopicPartitionsResponse,
    )

API_KEY = 75
VERSIONS = (0, 0)
ZERO_UUID = uuid.UUID(int=0)
INT32_MIN = AUTHORIZED_OPERATIONS_OMITTED  # "authorized operations not computed" (failed requests)
MAX_PARTITION_LIMIT = 2000  # Kafka's max.request.partition.size.limit default


def authorized_topic_operations(deps: ImageDeps, ctx: RequestContext, topic: str) -> int:
    """topic_authorized_operations: the bit set of the TOPIC operations the caller is allowed."""
    return authorized_operations(deps, ctx, "TOPIC", [topic])[0]


def _failed(m: Any, ctx: RequestContext, deps: ImageDeps, request: DescribeTopicPartitionsRequest,
            code: ErrorCode) -> Any:
    """Kafka's getErrorResponse: one error entry per requested topic, in request order."""
    topics = tuple(m.make("DescribeTopicPartitionsResponseTopic", error_code=int(code), name=t.name,
                          topic_id=ZERO_UUID, is_internal=False, partitions=(),
                          topic_authorized_operations=INT32_MIN) for t in request.topics)
    return m.make("DescribeTopicPartitionsResponse", throttle_time=response_throttle(deps, ctx),
                  topics=topics, next_cursor=None)


def _partitions(m: Any, topic: TopicImage, start: int, budget: int) -> tuple[list[Any], int]:
    """Partitions ``start``.. of ``topic`` up to ``budget`` of them; and the next index (-1: done)."""
    count = len(topic.partitions)
    upper = min(count, start + budget)
    out = []
    for index in range(start, upper):
        reg = topic.partitions.get(index)
        if reg is None:
            continue  # a hole in the registrations: Kafka skips it too
        leader_ok = reg.leader >= 0
        out.append(m.make(
            "DescribeTopicPartitionsResponsePartition",
            error_code=0 if leader_ok else int(ErrorCode.leader_not_available),
            partition_index=index, leader_id=reg.leader if leader_ok else -1, leader_epoch=reg.leader_epoch,
            replica_nodes=tuple(reg.replicas), isr_nodes=tuple(reg.isr),
            eligible_leader_replicas=(), last_known_elr=(), offline_replicas=()))
    return out, (upper if upper < count else -1)


def _missing_topic_error(name: str) -> int:
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return int(ErrorCode.invalid_topic_exception)
    return int(ErrorCode.unknown_topic_or_partition)


async def handle(deps: ImageDeps, ctx: RequestContext, request: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    m = response_messages(API_KEY, 0)
    image: MetadataImage = deps.image
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    list_all = len(request.topics) == 0

    if list_all:
        candidates = {n for n in image.topics if n >= cursor_topic}
    else:
        candidates = {t.name for t in request.topics if t.name >= cursor_topic}
        if cursor is not None and cursor.topic_name not in candidates:
            return _failed(m, ctx, deps, request, ErrorCode.invalid_request)
    if cursor is not None and cursor.partition_index < 0:
        return _failed(m, ctx, deps, request, ErrorCode.invalid_request)
    if "" in candidates:
        # Kafka fails the whole request on an empty name it gets to describe (its topic resource
        # lookup throws); an empty name sorted before the cursor is just skipped.
        return _failed(m, ctx, deps, request, ErrorCode.unknown_server_error)

    names = sorted(candidates)
    denied = authorize_topics(deps, ctx, "DESCRIBE", names)
    budget = max(min(MAX_PARTITION_LIMIT, int(request.response_partition_limit)), 1)
    topics: list[Any] = []
    next_cursor = None
    for name in (n for n in names if n not in denied):
        if budget == 0:
            # The budget ran out exactly at a topic boundary: resume at this topic.
            next_cursor = m.make("Cursor", topic_name=name, partition_index=0)
            break
        topic = image.topics.get(name)
        if topic is None:
            if not list_all:
                topics.append(m.make("DescribeTopicPartitionsResponseTopic", error_code=_missing_topic_error(name),
                                     name=name, topic_id=ZERO_UUID, is_internal=name in INTERNAL_TOPICS,
                                     partitions=(), topic_authorized_operations=authorized_topic_operations(
                                         deps, ctx, name)))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        parts, next_index = _partitions(m, topic, start, budget)
        topics.append(m.make("DescribeTopicPartitionsResponseTopic", error_code=0, name=name,
                             topic_id=topic.topic_id, is_internal=name in INTERNAL_TOPICS, partitions=tuple(parts),
                             topic_authorized_operations=authorized_topic_operations(deps, ctx, name)))
        if next_index != -1:
            next_cursor = m.make("Cursor", topic_name=name, partition_index=next_index)
            break
        budget -= len(parts)

    if not list_all:
        # Kafka discloses neither the id nor the existence of a topic the caller may not describe.
        topics += [m.make("DescribeTopicPartitionsResponseTopic", error_code=int(ErrorCode.topic_authorization_failed),
                          name=name, topic_id=ZERO_UUID, is_internal=False, partitions=(),
                          topic_authorized_operations=INT32_MIN)
                   for name in names if name in denied]
    return m.make("DescribeTopicPartitionsResponse", throttle_time=response_throttle(deps, ctx),
                  topics=tuple(topics), next_cursor=next_cursor)
