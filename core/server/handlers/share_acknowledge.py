"""ShareAcknowledge (key 79, KIP-932): acknowledge acquired records without fetching.

As Kafka's ``KafkaApis.handleShareAcknowledgeRequest``: READ on the group, a non-empty member id,
a share session that exists at the request's epoch (epoch 0 cannot open one:
INVALID_SHARE_SESSION_EPOCH; epoch -1 acknowledges, then closes the session and releases what
the member still holds). Each partition answers its acknowledgement's error (INVALID_RECORD_STATE
for an offset the member does not hold, UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED); the
acknowledgements are persisted to the share coordinator before the answer.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.coordinator.share.share_partition import AcknowledgementBatch
from strom.core.errors import KafkaError
from strom.core.protocol.messages import Messages, response_messages
from strom.core.server.handlers._common import authorize_topics
from strom.core.server.handlers.share_fetch import ack_batches, no_leader
from strom.core.share.share_partition_manager import FetchTarget
from strom.core.share.share_session import FINAL_EPOCH

if TYPE_CHECKING:
    from strom.core.server.context import RequestContext
    from strom.core.server.handlers._deps import ShareFetchDeps
    from strom.core.server.handlers._kio_types import ShareAcknowledgeRequest, ShareAcknowledgeResponse

API_KEY = 79
VERSIONS = (1, 2)
ZERO_UUID = uuid.UUID(int=0)


def _error(m: Messages, code: int, message: str | None) -> ShareAcknowledgeResponse:
    response: ShareAcknowledgeResponse = m.make(
        "ShareAcknowledgeResponse", throttle_time=0, error_code=code, error_message=message,
        acquisition_lock_timeout=0, responses=(), node_endpoints=())
    return response


async def handle(deps: ShareFetchDeps, ctx: RequestContext, request: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    m = response_messages(API_KEY, ctx.api_version)
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    epoch = int(request.share_session_epoch)
    if not deps.authorize(ctx, "READ", "GROUP", [group_id])[0]:
        return _error(m, int(ErrorCode.group_authorization_failed), None)
    if not member_id:
        return _error(m, int(ErrorCode.invalid_request), "The member id must not be empty")
    try:
        session = deps.share_sessions.acknowledge_session(group_id, member_id, epoch)
    except KafkaError as e:
        return _error(m, int(e.code), e.message or None)
    image = deps.image
    manager = deps.share_partition_manager
    names = {t.topic_id or ZERO_UUID: image.topic_name(t.topic_id) for t in request.topics}
    denied = authorize_topics(deps, ctx, "READ", sorted({n for n in names.values() if n}))

    results: dict[tuple[uuid.UUID, int], tuple[int, str | None]] = {}
    to_ack: dict[FetchTarget, list[AcknowledgementBatch]] = {}
    for t in request.topics:
        tid = t.topic_id or ZERO_UUID
        name = names[tid]
        for p in t.partitions:
            tp = (tid, int(p.partition_index))
            if name is None:
                results[tp] = (int(ErrorCode.unknown_topic_id), None)
            elif name in denied:
                results[tp] = (int(ErrorCode.topic_authorization_failed), None)
            else:
                try:
                    to_ack[FetchTarget(tid, name, tp[1])] = ack_batches(
                        p.acknowledgement_batches, ctx.api_version,
                        is_renew_ack=bool(getattr(request, "is_renew_ack", False)),
                        renew_enabled=manager.renew_acknowledge_enabled(group_id))
                except KafkaError as e:
                    results[tp] = (int(e.code), e.message or None)
    if to_ack:
        for target, result in (await manager.acknowledge(group_id, member_id, to_ack)).items():
            results[(target.topic_id, target.partition)] = result
    if epoch == FINAL_EPOCH:
        deps.share_sessions.remove(group_id, member_id)
        manager.release(group_id, member_id, list(session.partitions))

    by_topic: dict[uuid.UUID, list[object]] = {}
    for (tid, partition), (code, message) in results.items():
        by_topic.setdefault(tid, []).append(m.make("PartitionData", partition_index=partition, error_code=code,
                                                   error_message=message, current_leader=no_leader(m)))
    response: ShareAcknowledgeResponse = m.make(
        "ShareAcknowledgeResponse", throttle_time=0, error_code=0, error_message=None,
        acquisition_lock_timeout=manager.record_lock_duration_ms(group_id),
        responses=tuple(m.make("ShareAcknowledgeTopicResponse", topic_id=tid, partitions=tuple(parts))
                        for tid, parts in by_topic.items()),
        node_endpoints=())
    return response
