"""AlterShareGroupOffsets (key 91, v0): set a share group's start offset per share partition.

As Kafka 4.3.1's ``KafkaApis`` and ``GroupCoordinatorService.alterShareGroupOffsets`` answer
(checked against it): READ on the group, else GROUP_AUTHORIZATION_FAILED for the whole request;
per topic READ (TOPIC_AUTHORIZATION_FAILED) and a topic the metadata knows
(UNKNOWN_TOPIC_OR_PARTITION), answered per partition ahead of the rest; a partition beyond the
topic's count is UNKNOWN_TOPIC_OR_PARTITION. The group must be a share group (a group of another
type is GROUP_ID_NOT_FOUND, "Group X is not a share group.") with no members (NON_EMPTY_GROUP);
these group errors answer the whole request with no topics. A group id no group has is a new,
empty share group, as Kafka creates it.

Each partition is initialized through the share coordinator (Kafka's persister
``initializeState``): a fresh state at the given start offset (-1: unset, the group's
``share.auto.offset.reset`` applies on the next fetch) with no in-flight batches. The state epoch
moves past the stored one, so a share-partition leader still holding the old state is fenced
(FENCED_STATE_EPOCH) on its next write and reads the new state instead.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group import records as R
from strom.core.coordinator.group.share_group_service import state_partition_record
from strom.core.coordinator.share.share_group import ShareGroup
from strom.core.errors import (
    GroupAuthorizationError,
    GroupIdNotFoundError,
    GroupNotEmptyError,
    KafkaError,
    TopicAuthorizationError,
    UnknownTopicOrPartitionError,
)
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, error_of, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ShareGroupOffsetsDeps
    from strom.core.server.handlers._kio_types import (
        AlterShareGroupOffsetsRequest,
        AlterShareGroupOffsetsResponse,
    )

API_KEY = 91
VERSIONS = (0, 0)


@dataclass(frozen=True, slots=True)
class GroupError:
    """A group-level answer that replaces the whole response (code and Kafka's message)."""

    code: int
    message: str | None


def message_of(e: Exception) -> tuple[int, str | None]:
    """Code and message as Kafka's ``Errors.forException``: the exception's text, else the code's."""
    code, message = error_of(e)
    if message is None and isinstance(e, KafkaError):
        message = e.description
    return code, message


def empty_share_group(deps: ShareGroupOffsetsDeps, group_id: str, *, create: bool) -> ShareGroup | GroupError:
    """The share group ``group_id`` if its offsets may change (it has no members), else the
    group-level error: not found (``create`` False), another type of group, not empty. A group
    created here is in memory only until :func:`record_initialized` writes it."""
    coordinator = deps.group_coordinator
    try:
        coordinator.check_available(group_id)
    except KafkaError as e:
        return GroupError(*message_of(e))
    group = coordinator.share_group(group_id)
    if group is None:
        other = coordinator.groups.get(group_id)
        if other is not None and not isinstance(other, ShareGroup):
            return GroupError(int(GroupIdNotFoundError.code), f"Group {group_id} is not a share group.")
        if not create:
            return GroupError(int(GroupIdNotFoundError.code), f"Group {group_id} not found.")
        group = ShareGroup(group_id)
        # Kafka 4.3.1 creates the group at epoch 1 with an (empty) target assignment of epoch 1.
        group.group_epoch = group.assignment_epoch = 1
    if group.members:
        return GroupError(int(GroupNotEmptyError.code), GroupNotEmptyError.description)
    return group


async def record_initialized(deps: ShareGroupOffsetsDeps, group: ShareGroup,
                             initialized: dict[uuid.UUID, set[int]], names: dict[uuid.UUID, str]) -> None:
    """Make ``initialized`` the group's set of share partitions with state and write it
    (ShareGroupStatePartitionMetadata; a new group's ShareGroupMetadata first), as the group
    coordinator does when it initializes partitions itself: a heartbeat then neither skips a
    partition whose state was deleted nor re-initializes one that was altered."""
    coordinator = deps.group_coordinator
    created = coordinator.share_group(group.group_id) is not group
    saved = (group.initialized, group.topic_names)
    group.initialized = {t: set(ps) for t, ps in initialized.items() if ps}
    group.topic_names = {**group.topic_names, **names}
    records: list[tuple[R.CoordinatorMessage, R.CoordinatorMessage | None]] = []
    if created:
        # A new group's records in Kafka's order: what the group is, its target assignment, then
        # its share partitions.
        records.append((R.ShareGroupMetadataKey(group.group_id), R.ShareGroupMetadataValue(
            epoch=group.group_epoch, metadata_hash=group.metadata_hash)))
        records.append((R.ShareGroupTargetAssignmentMetadataKey(group.group_id), R.ShareGroupTargetAssignmentMetadataValue(
            assignment_epoch=group.assignment_epoch, assignment_timestamp=time.time_ns() // 1_000_000)))
    records.append(state_partition_record(group))
    try:
        await coordinator.append_records(group.group_id, records)
    except BaseException:
        group.initialized, group.topic_names = saved
        raise
    if created:
        coordinator.groups[group.group_id] = group


def next_state_epoch(deps: ShareGroupOffsetsDeps, group: ShareGroup, topic_id: uuid.UUID, partition: int) -> int:
    """A state epoch no share-partition leader holds for this partition yet."""
    current = deps.share_coordinator.read_state(group.group_id, topic_id, partition)
    return max(group.group_epoch, current.state_epoch + 1 if current is not None else 0)


async def handle(deps: ShareGroupOffsetsDeps, ctx: RequestContext,
                 request: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse:
    # Under the group's lock: a member cannot join between the emptiness check and the write.
    async with deps.group_coordinator.share_group_lock(request.group_id):
        return await _handle_locked(deps, ctx, request)


async def _handle_locked(deps: ShareGroupOffsetsDeps, ctx: RequestContext,
                 request: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse:
    m = response_messages(API_KEY, ctx.api_version)

    def whole(code: int, message: str | None) -> AlterShareGroupOffsetsResponse:
        return m.make("AlterShareGroupOffsetsResponse", throttle_time=response_throttle(deps, ctx),
                      error_code=code, error_message=message, responses=())

    def partition(index: int, code: int = 0, message: str | None = None) -> object:
        return m.make("AlterShareGroupOffsetsResponsePartition", partition_index=index, error_code=code,
                      error_message=message)

    group_id = request.group_id
    if not deps.authorize(ctx, "READ", "GROUP", [group_id])[0]:
        return whole(int(ErrorCode.group_authorization_failed), GroupAuthorizationError.description)
    image = deps.image
    denied = authorize_topics(deps, ctx, "READ", [t.topic_name for t in request.topics])
    refused: list[object] = []
    wanted = []
    for t in request.topics:
        known = image.topics.get(t.topic_name)
        if t.topic_name in denied or known is None:
            code, text = ((ErrorCode.topic_authorization_failed, TopicAuthorizationError.description)
                          if t.topic_name in denied else
                          (ErrorCode.unknown_topic_or_partition, UnknownTopicOrPartitionError.description))
            refused.append(m.make("AlterShareGroupOffsetsResponseTopic", topic_name=t.topic_name,
                                  topic_id=known.topic_id if known is not None else None,
                                  partitions=tuple(partition(p.partition_index, int(code), text)
                                                   for p in t.partitions)))
        else:
            wanted.append((t, known))

    group = empty_share_group(deps, group_id, create=True)
    if isinstance(group, GroupError):
        return whole(group.code, group.message)
    answered: list[object] = []
    initialized = {t: set(ps) for t, ps in group.initialized.items()}
    names: dict[uuid.UUID, str] = {}
    for t, known in wanted:
        parts = []
        for p in t.partitions:
            index = int(p.partition_index)
            if index not in known.partitions:
                parts.append(partition(index, int(ErrorCode.unknown_topic_or_partition),
                                       UnknownTopicOrPartitionError.description))
                continue
            try:
                await deps.share_coordinator.initialize_state(
                    group_id, known.topic_id, index,
                    state_epoch=next_state_epoch(deps, group, known.topic_id, index),
                    start_offset=int(p.start_offset))
            except Exception as e:
                parts.append(partition(index, *message_of(e)))
                continue
            parts.append(partition(index))
            initialized.setdefault(known.topic_id, set()).add(index)
            names[known.topic_id] = t.topic_name
        answered.append(m.make("AlterShareGroupOffsetsResponseTopic", topic_name=t.topic_name,
                               topic_id=known.topic_id, partitions=tuple(parts)))
    try:
        await record_initialized(deps, group, initialized, names)
    except Exception as e:
        return whole(*message_of(e))
    return m.make("AlterShareGroupOffsetsResponse", throttle_time=response_throttle(deps, ctx), error_code=0,
                  error_message=None, responses=tuple(refused + answered))
