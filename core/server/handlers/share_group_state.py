"""The share coordinator's state APIs (KIP-932), one handler class each.

InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85),
DeleteShareGroupState (86) and ReadShareGroupStateSummary (87): what a share-partition leader
asks the share coordinator (:mod:`strom.core.coordinator.share.coordinator`). As Kafka's
``KafkaApis``: the principal needs CLUSTER_ACTION on the cluster, else every partition answers
CLUSTER_AUTHORIZATION_FAILED. Per partition, as Kafka 4.3.1 answers (checked against it): a read
or write of a share partition that was never initialized is INVALID_REQUEST ("Read/Write
operation on uninitialized share partition not allowed."; a summary of one is start offset -1,
no error); initializing a partition the
metadata does not know is UNKNOWN_TOPIC_OR_PARTITION; an older state epoch is
FENCED_STATE_EPOCH, an older leader epoch FENCED_LEADER_EPOCH.

One difference: Kafka creates ``__share_group_state`` when FindCoordinator is first asked for a
share key (and answers NOT_COORDINATOR until then); strom creates it on the first state write.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.coordinator.share.share_partition import PersisterStateBatch
from strom.core.errors import KafkaError
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ShareCoordinatorDeps
    from strom.core.server.handlers._kio_types import (
        DeleteShareGroupStateRequest,
        DeleteShareGroupStateResponse,
        InitializeShareGroupStateRequest,
        InitializeShareGroupStateResponse,
        ReadShareGroupStateRequest,
        ReadShareGroupStateResponse,
        ReadShareGroupStateSummaryRequest,
        ReadShareGroupStateSummaryResponse,
        WriteShareGroupStateRequest,
        WriteShareGroupStateResponse,
    )

_UNINITIALIZED_READ = "Read operation on uninitialized share partition not allowed."
_UNKNOWN_PARTITION = "This server does not host this topic-partition."


def _error(exc: KafkaError) -> tuple[ErrorCode, str | None]:
    # Kafka answers these with the error's own text when there is no other (Errors.X.message()).
    return exc.code, (exc.message or exc.description)


def _allowed(deps: ShareCoordinatorDeps, ctx: RequestContext) -> bool:
    return authorize_cluster(deps, ctx, "CLUSTER_ACTION")


_DENIED = (ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
_OK: tuple[ErrorCode, str | None] = (ErrorCode.none, None)


class InitializeShareGroupState:
    API_KEY = 83
    VERSIONS = (0, 0)

    @staticmethod
    async def handle(deps: ShareCoordinatorDeps, ctx: RequestContext,
                     request: InitializeShareGroupStateRequest) -> InitializeShareGroupStateResponse:
        m = response_messages(83, ctx.api_version)
        allowed = _allowed(deps, ctx)
        coordinator = deps.share_coordinator
        results = []
        for t in request.topics:
            topic_id = t.topic_id or uuid.UUID(int=0)
            parts = []
            for p in t.partitions:
                err: tuple[ErrorCode, str | None] = _OK
                if not allowed:
                    err = _DENIED
                elif not _partition_known(deps, topic_id, int(p.partition)):
                    err = (ErrorCode.unknown_topic_or_partition, _UNKNOWN_PARTITION)
                else:
                    try:
                        await coordinator.initialize_state(request.group_id, topic_id, int(p.partition),
                                                           state_epoch=int(p.state_epoch),
                                                           start_offset=int(p.start_offset))
                    except KafkaError as e:
                        err = _error(e)
                parts.append(m.make("PartitionResult", partition=p.partition, error_code=err[0], error_message=err[1]))
            results.append(m.make("InitializeStateResult", topic_id=t.topic_id, partitions=tuple(parts)))
        return m.make("InitializeShareGroupStateResponse", results=tuple(results))


class ReadShareGroupState:
    API_KEY = 84
    VERSIONS = (0, 0)

    @staticmethod
    async def handle(deps: ShareCoordinatorDeps, ctx: RequestContext,
                     request: ReadShareGroupStateRequest) -> ReadShareGroupStateResponse:
        m = response_messages(84, ctx.api_version)
        allowed = _allowed(deps, ctx)
        coordinator = deps.share_coordinator
        results = []
        for t in request.topics:
            topic_id = t.topic_id or uuid.UUID(int=0)
            parts = []
            for p in t.partitions:
                state = None
                err: tuple[ErrorCode, str | None] = _OK
                if not allowed:
                    err = _DENIED
                else:
                    try:
                        state = await coordinator.read_state_for_leader(request.group_id, topic_id, int(p.partition),
                                                                        int(p.leader_epoch))
                        if state is None:
                            err = (ErrorCode.invalid_request, _UNINITIALIZED_READ)
                    except KafkaError as e:
                        err = _error(e)
                if state is None or err[0] != ErrorCode.none:
                    parts.append(m.make("PartitionResult", partition=p.partition, error_code=err[0], error_message=err[1],
                                                   state_epoch=0, start_offset=0, state_batches=()))
                    continue
                batches = tuple(m.make("StateBatch", first_offset=b.first_offset, last_offset=b.last_offset,
                                             delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                                for b in state.state_batches)
                parts.append(m.make("PartitionResult", partition=p.partition, error_code=ErrorCode.none, error_message=None,
                                               state_epoch=state.state_epoch, start_offset=state.start_offset,
                                               state_batches=batches))
            results.append(m.make("ReadStateResult", topic_id=t.topic_id, partitions=tuple(parts)))
        return m.make("ReadShareGroupStateResponse", results=tuple(results))


class WriteShareGroupState:
    API_KEY = 85
    VERSIONS = (0, 1)

    @staticmethod
    async def handle(deps: ShareCoordinatorDeps, ctx: RequestContext, request: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
        m = response_messages(85, ctx.api_version)
        allowed = _allowed(deps, ctx)
        coordinator = deps.share_coordinator
        results = []
        for t in request.topics:
            topic_id = t.topic_id or uuid.UUID(int=0)
            parts = []
            for p in t.partitions:
                err: tuple[ErrorCode, str | None] = _OK
                if not allowed:
                    err = _DENIED
                else:
                    batches = [PersisterStateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state),
                                                   int(b.delivery_count)) for b in p.state_batches]
                    try:
                        await coordinator.write_state(
                            request.group_id, topic_id, int(p.partition), state_epoch=int(p.state_epoch),
                            leader_epoch=int(p.leader_epoch), start_offset=int(p.start_offset),
                            state_batches=batches,
                            delivery_complete_count=int(getattr(p, "delivery_complete_count", -1)))
                    except KafkaError as e:
                        err = _error(e)
                parts.append(m.make("PartitionResult", partition=p.partition, error_code=err[0], error_message=err[1]))
            results.append(m.make("WriteStateResult", topic_id=t.topic_id, partitions=tuple(parts)))
        return m.make("WriteShareGroupStateResponse", results=tuple(results))


class DeleteShareGroupState:
    API_KEY = 86
    VERSIONS = (0, 0)

    @staticmethod
    async def handle(deps: ShareCoordinatorDeps, ctx: RequestContext,
                     request: DeleteShareGroupStateRequest) -> DeleteShareGroupStateResponse:
        m = response_messages(86, ctx.api_version)
        allowed = _allowed(deps, ctx)
        coordinator = deps.share_coordinator
        results = []
        for t in request.topics:
            topic_id = t.topic_id or uuid.UUID(int=0)
            parts = []
            for p in t.partitions:
                err: tuple[ErrorCode, str | None] = _OK
                if not allowed:
                    err = _DENIED
                else:
                    try:
                        await coordinator.delete_state(request.group_id, topic_id, int(p.partition))
                    except KafkaError as e:
                        err = _error(e)
                parts.append(m.make("PartitionResult", partition=p.partition, error_code=err[0], error_message=err[1]))
            results.append(m.make("DeleteStateResult", topic_id=t.topic_id, partitions=tuple(parts)))
        return m.make("DeleteShareGroupStateResponse", results=tuple(results))


class ReadShareGroupStateSummary:
    API_KEY = 87
    VERSIONS = (0, 1)

    @staticmethod
    async def handle(deps: ShareCoordinatorDeps, ctx: RequestContext, request: ReadShareGroupStateSummaryRequest) -> ReadShareGroupStateSummaryResponse:
        m = response_messages(87, ctx.api_version)
        allowed = _allowed(deps, ctx)
        coordinator = deps.share_coordinator
        results = []
        for t in request.topics:
            topic_id = t.topic_id or uuid.UUID(int=0)
            parts = []
            for p in t.partitions:
                err: tuple[ErrorCode, str | None] = _OK
                summary = None
                if not allowed:
                    err = _DENIED
                else:
                    # Kafka 4.3.1: no error for a state never initialized, start offset -1.
                    summary = coordinator.read_summary(request.group_id, topic_id, int(p.partition))
                # make() leaves out DeliveryCompleteCount at v0.
                parts.append(m.make(
                    "PartitionResult", partition=p.partition, error_code=err[0], error_message=err[1],
                    state_epoch=summary.state_epoch if summary else 0,
                    leader_epoch=summary.leader_epoch if summary else 0,
                    start_offset=summary.start_offset if summary else (0 if err[0] else -1),
                    delivery_complete_count=summary.delivery_complete_count if summary else -1))
            results.append(m.make("ReadStateSummaryResult", topic_id=t.topic_id, partitions=tuple(parts)))
        return m.make("ReadShareGroupStateSummaryResponse", results=tuple(results))


def _partition_known(deps: ShareCoordinatorDeps, topic_id: uuid.UUID, partition: int) -> bool:
    topic = deps.share_coordinator.node.image.topic_by_id(topic_id)
    return topic is not None and partition in topic.partitions
