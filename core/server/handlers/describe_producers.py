"""DescribeProducers (key 61, KIP-664): the active producers of partitions hosted here.

As Kafka's ``KafkaApis.handleDescribeProducersRequest``: per topic, an illegal name answers
INVALID_TOPIC_EXCEPTION, a principal without READ on it TOPIC_AUTHORIZATION_FAILED and a topic
the metadata does not know UNKNOWN_TOPIC_OR_PARTITION (these three with Kafka's message); per
partition, one this broker does not host answers NOT_LEADER_OR_FOLLOWER when the metadata knows
it, else UNKNOWN_TOPIC_OR_PARTITION (no message). Any local replica answers, leader or follower
(the admin client may aim the request at a chosen broker). Each producer of the partition log's
producer state is listed: id, epoch, last sequence, last timestamp, coordinator epoch and the
first offset of its open transaction (-1 for none).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import response_throttle
from strom.core.topic_names import MAX_NAME_LENGTH

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ReplicaDeps
    from strom.core.server.handlers._kio_types import DescribeProducersRequest, DescribeProducersResponse

API_KEY = 61
VERSIONS = (0, 0)

# Kafka's ``Errors.X.message()``: ``new ApiError(Errors.X)`` sends it as the error message.
_DEFAULT_MESSAGES = {
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
}


_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def _invalid_topic_reason(name: str) -> str | None:
    """Kafka's ``Topic.detectInvalidTopic``: why ``name`` is not a legal topic name, or None.

    Its wording differs from the one CreateTopics answers with (``topic_names``), so it is here.
    """
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name.encode("utf-16-le")) // 2 > MAX_NAME_LENGTH:  # Java counts UTF-16 units
        return f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    if not _LEGAL.fullmatch(name):
        return f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


async def handle(deps: ReplicaDeps, ctx: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    m = response_messages(API_KEY, ctx.api_version)
    image = deps.image
    rm = deps.replica_manager
    names = list(dict.fromkeys(str(t.name) for t in request.topics))
    invalid: dict[str, tuple[int, str | None]] = {}
    for n in names:
        reason = _invalid_topic_reason(n)
        if reason is not None:
            invalid[n] = (int(ErrorCode.invalid_topic_exception), f"Topic name is invalid: {reason}")
    legal = [n for n in names if n not in invalid]
    readable = deps.authorize(ctx, "READ", "TOPIC", legal) if legal else []
    denied = {n for n, ok in zip(legal, readable, strict=True) if not ok}

    topics = []
    for t in request.topics:
        name = str(t.name)
        topic_error = invalid.get(name)
        if topic_error is None and name in denied:
            topic_error = (int(ErrorCode.topic_authorization_failed),
                           _DEFAULT_MESSAGES[ErrorCode.topic_authorization_failed])
        elif topic_error is None and name not in image.topics:
            topic_error = (int(ErrorCode.unknown_topic_or_partition),
                           _DEFAULT_MESSAGES[ErrorCode.unknown_topic_or_partition])
        partitions = []
        for requested_index in t.partition_indexes:
            index = int(requested_index)
            if topic_error is not None:
                partitions.append(m.make("PartitionResponse", partition_index=index, error_code=topic_error[0],
                                         error_message=topic_error[1], active_producers=()))
                continue
            part = rm.partitions.get((name, index))
            if part is None:
                known = index in image.topics[name].partitions
                code = ErrorCode.not_leader_or_follower if known else ErrorCode.unknown_topic_or_partition
                partitions.append(m.make("PartitionResponse", partition_index=index, error_code=code,
                                         error_message=None, active_producers=()))
                continue
            producers = tuple(
                m.make("ProducerState", producer_id=pid, producer_epoch=epoch, last_sequence=seq,
                       last_timestamp=ts, coordinator_epoch=coord, current_txn_start_offset=txn)
                for pid, epoch, seq, ts, coord, txn in part.active_producers())
            partitions.append(m.make("PartitionResponse", partition_index=index, error_code=0,
                                     error_message=None, active_producers=producers))
        topics.append(m.make("TopicResponse", name=name, partitions=tuple(partitions)))
    return m.make("DescribeProducersResponse", throttle_time=response_throttle(deps, ctx), topics=tuple(topics))
