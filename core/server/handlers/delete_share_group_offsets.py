"""DeleteShareGroupOffsets (key 92, v0): drop a share group's state of whole topics.

As Kafka 4.3.1's ``KafkaApis`` and ``GroupCoordinatorService.deleteShareGroupOffsets`` answer
(checked against it): DELETE on the group, else GROUP_AUTHORIZATION_FAILED for the whole request;
READ on each topic, else TOPIC_AUTHORIZATION_FAILED for it (listed first). The group must exist
(GROUP_ID_NOT_FOUND, "Group X not found."), be a share group and have no members
(NON_EMPTY_GROUP); a group error answers the whole request with no topics. A topic the metadata
does not know is UNKNOWN_TOPIC_OR_PARTITION with the error's text; one the group has no state for
is UNKNOWN_TOPIC_OR_PARTITION "There is no offset information to delete." (both listed after the
deleted topics). Deleting a topic drops the state of all its share partitions through the share
coordinator (DeleteShareGroupState: tombstones in ``__share_group_state``), so the next fetch
starts from ``share.auto.offset.reset``.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.errors import (
    GroupAuthorizationError,
    TopicAuthorizationError,
    UnknownTopicOrPartitionError,
    for_code,
)
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, response_throttle
from strom.core.server.handlers.alter_share_group_offsets import (
    GroupError,
    empty_share_group,
    message_of,
    record_initialized,
)

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ShareGroupOffsetsDeps
    from strom.core.server.handlers._kio_types import (
        DeleteShareGroupOffsetsRequest,
        DeleteShareGroupOffsetsResponse,
    )

API_KEY = 92
VERSIONS = (0, 0)

NO_OFFSETS = "There is no offset information to delete."


async def handle(deps: ShareGroupOffsetsDeps, ctx: RequestContext,
                 request: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse:
    # Under the group's lock: a member cannot join between the emptiness check and the write.
    async with deps.group_coordinator.share_group_lock(request.group_id):
        return await _handle_locked(deps, ctx, request)


async def _handle_locked(deps: ShareGroupOffsetsDeps, ctx: RequestContext,
                 request: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse:
    m = response_messages(API_KEY, ctx.api_version)

    def whole(code: int, message: str | None) -> DeleteShareGroupOffsetsResponse:
        return m.make("DeleteShareGroupOffsetsResponse", throttle_time=response_throttle(deps, ctx),
                      error_code=code, error_message=message, responses=())

    def topic(name: str, topic_id: uuid.UUID | None, code: int = 0, message: str | None = None) -> object:
        return m.make("DeleteShareGroupOffsetsResponseTopic", topic_name=name, topic_id=topic_id,
                      error_code=code, error_message=message)

    group_id = request.group_id
    if not deps.authorize(ctx, "DELETE", "GROUP", [group_id])[0]:
        return whole(int(ErrorCode.group_authorization_failed), GroupAuthorizationError.description)
    denied = authorize_topics(deps, ctx, "READ", [t.topic_name for t in request.topics])
    refused = [topic(t.topic_name, None, int(ErrorCode.topic_authorization_failed), TopicAuthorizationError.description)
               for t in request.topics if t.topic_name in denied]
    group = empty_share_group(deps, group_id, create=False)
    if isinstance(group, GroupError):
        return whole(group.code, group.message)

    coordinator = deps.share_coordinator
    with_state: dict[uuid.UUID, list[int]] = {}
    for topic_id, partition in coordinator.group_partitions(group_id):
        with_state.setdefault(topic_id, []).append(partition)
    missing: list[object] = []
    chosen: list[tuple[str, uuid.UUID, list[int]]] = []
    for t in request.topics:
        if t.topic_name in denied:
            continue
        known = deps.image.topics.get(t.topic_name)
        if known is None:
            missing.append(topic(t.topic_name, None, int(ErrorCode.unknown_topic_or_partition),
                                 UnknownTopicOrPartitionError.description))
            continue
        partitions = with_state.pop(known.topic_id, None)
        if partitions is None:
            missing.append(topic(t.topic_name, None, int(ErrorCode.unknown_topic_or_partition), NO_OFFSETS))
            continue
        chosen.append((t.topic_name, known.topic_id, sorted(partitions)))
    if chosen:
        # The group forgets the partitions first (Kafka's "deleting" step): a crash before the
        # state is gone leaves state a retry deletes, never a group that thinks state exists.
        initialized = {tid: set(ps) for tid, ps in group.initialized.items()}
        for _, topic_id, _ in chosen:
            initialized.pop(topic_id, None)
        try:
            await record_initialized(deps, group, initialized, {})
        except Exception as e:
            return whole(*message_of(e))
    deleted: list[object] = []
    for name, topic_id, partitions in chosen:
        try:
            for p in partitions:
                await coordinator.delete_state(group_id, topic_id, p)
        except Exception as e:
            # Kafka names the error by its code only (Errors.forCode(..).message()).
            code, _ = message_of(e)
            deleted.append(topic(name, topic_id, code, for_code(code).description))
            continue
        deleted.append(topic(name, topic_id))
    return m.make("DeleteShareGroupOffsetsResponse", throttle_time=response_throttle(deps, ctx), error_code=0,
                  error_message=None, responses=tuple(refused + deleted + missing))
