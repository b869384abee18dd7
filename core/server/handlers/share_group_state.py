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
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from strom.core.coordinator.share.share_partition import PersisterStateBatch
from strom.core.errors import KafkaError
from strom.core.protocol.messages import Messages, response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster

if TYPE_CHECKING:
    import kio.schema.delete_share_group_state.v0.request
    import kio.schema.initialize_share_group_state.v0.request
    import kio.schema.read_share_group_state.v0.request
    import kio.schema.read_share_group_state_summary.v0.request
    import kio.schema.read_share_group_state_summary.v1.request
    import kio.schema.write_share_group_state.v0.request
    import kio.schema.write_share_group_state.v1.request

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

    InitializeStatePartition = kio.schema.initialize_share_group_state.v0.request.PartitionData
    ReadStatePartition = kio.schema.read_share_group_state.v0.request.PartitionData
    WriteStatePartition = (kio.schema.write_share_group_state.v0.request.PartitionData
                           | kio.schema.write_share_group_state.v1.request.PartitionData)
    DeleteStatePartition = kio.schema.delete_share_group_state.v0.request.PartitionData
    SummaryPartition = (kio.schema.read_share_group_state_summary.v0.request.PartitionData
                        | kio.schema.read_share_group_state_summary.v1.request.PartitionData)

_UNINITIALIZED_READ = "Read operation on uninitialized share partition not allowed."
_UNKNOWN_PARTITION = "This server does not host this topic-partition."


Err = tuple[ErrorCode, str | None]
Fields = dict[str, object]  # a PartitionResult's fields but ``partition``
_P = TypeVar("_P", bound="_Partition")
_P_co = TypeVar("_P_co", bound="_Partition", covariant=True)


def _error(exc: KafkaError) -> Err:
    # Kafka answers these with the error's own text when there is no other (Errors.X.message()).
    return exc.code, (exc.message or exc.description)


_DENIED: Err = (ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
_OK: Err = (ErrorCode.none, None)


def _failed(err: Err) -> Fields:
    """A PartitionResult that carries only its error (Initialize, Write, Delete)."""
    return {"error_code": err[0], "error_message": err[1]}


class _Partition(Protocol):
    @property
    def partition(self) -> int: ...


class _Topic(Protocol[_P_co]):
    """A topic of a state request: kio has one class per API version, alike in these two fields."""

    @property
    def topic_id(self) -> uuid.UUID | None: ...
    @property
    def partitions(self) -> Sequence[_P_co]: ...


async def _answer_partitions(
        deps: ShareCoordinatorDeps, ctx: RequestContext, topics: Sequence[_Topic[_P]], api_key: int,
        result: str, response: str, answer: Callable[[Messages, uuid.UUID, _P], Awaitable[Fields]],
        failed: Callable[[Err], Fields] = _failed) -> Any:
    """The walk all five state APIs share: every partition of every topic gets ``answer``'s
    PartitionResult fields, or ``failed``'s for CLUSTER_AUTHORIZATION_FAILED (the principal
    lacks CLUSTER_ACTION on the cluster, as KafkaApis checks) or a KafkaError ``answer`` raised;
    results grouped per topic as the request named them."""
    m = response_messages(api_key, ctx.api_version)
    allowed = authorize_cluster(deps, ctx, "CLUSTER_ACTION")
    results = []
    for t in topics:
        topic_id = t.topic_id or uuid.UUID(int=0)
        parts = []
        for p in t.partitions:
            if not allowed:
                fields = failed(_DENIED)
            else:
                try:
                    fields = await answer(m, topic_id, p)
                except KafkaError as e:
                    fields = failed(_error(e))
            parts.append(m.make("PartitionResult", partition=p.partition, **fields))
        results.append(m.make(result, topic_id=t.topic_id, partitions=tuple(parts)))
    return m.make(response, results=tuple(results))


class InitializeShareGroupState:
    API_KEY = 83
    VERSIONS = (0, 0)

    @staticmethod
    async def handle(deps: ShareCoordinatorDeps, ctx: RequestContext,
                     request: InitializeShareGroupStateRequest) -> InitializeShareGroupStateResponse:
        async def answer(m: Messages, topic_id: uuid.UUID, p: InitializeStatePartition) -> Fields:
            if not _partition_known(deps, topic_id, int(p.partition)):
                return _failed((ErrorCode.unknown_topic_or_partition, _UNKNOWN_PARTITION))
            await deps.share_coordinator.initialize_state(request.group_id, topic_id, int(p.partition),
                                                          state_epoch=int(p.state_epoch),
                                                          start_offset=int(p.start_offset))
            return _failed(_OK)

        response: InitializeShareGroupStateResponse = await _answer_partitions(
            deps, ctx, request.topics, 83, "InitializeStateResult", "InitializeShareGroupStateResponse", answer)
        return response


def _read_failed(err: Err) -> Fields:
    return {**_failed(err), "state_epoch": 0, "start_offset": 0, "state_batches": ()}


class ReadShareGroupState:
    API_KEY = 84
    VERSIONS = (0, 0)

    @staticmethod
    async def handle(deps: ShareCoordinatorDeps, ctx: RequestContext,
                     request: ReadShareGroupStateRequest) -> ReadShareGroupStateResponse:
        async def answer(m: Messages, topic_id: uuid.UUID, p: ReadStatePartition) -> Fields:
            state = await deps.share_coordinator.read_state_for_leader(request.group_id, topic_id,
                                                                       int(p.partition), int(p.leader_epoch))
            if state is None:
                return _read_failed((ErrorCode.invalid_request, _UNINITIALIZED_READ))
            batches = tuple(m.make("StateBatch", first_offset=b.first_offset, last_offset=b.last_offset,
                                   delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                            for b in state.state_batches)
            return {**_failed(_OK), "state_epoch": state.state_epoch, "start_offset": state.start_offset,
                    "state_batches": batches}

        response: ReadShareGroupStateResponse = await _answer_partitions(
            deps, ctx, request.topics, 84, "ReadStateResult", "ReadShareGroupStateResponse", answer, _read_failed)
        return response


class WriteShareGroupState:
    API_KEY = 85
    VERSIONS = (0, 1)

    @staticmethod
    async def handle(deps: ShareCoordinatorDeps, ctx: RequestContext,
                     request: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
        async def answer(m: Messages, topic_id: uuid.UUID, p: WriteStatePartition) -> Fields:
            batches = [PersisterStateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state),
                                           int(b.delivery_count)) for b in p.state_batches]
            await deps.share_coordinator.write_state(
                request.group_id, topic_id, int(p.partition), state_epoch=int(p.state_epoch),
                leader_epoch=int(p.leader_epoch), start_offset=int(p.start_offset), state_batches=batches,
                delivery_complete_count=int(getattr(p, "delivery_complete_count", -1)))
            return _failed(_OK)

        topics: Sequence[_Topic[WriteStatePartition]] = request.topics  # either version's
        response: WriteShareGroupStateResponse = await _answer_partitions(
            deps, ctx, topics, 85, "WriteStateResult", "WriteShareGroupStateResponse", answer)
        return response


class DeleteShareGroupState:
    API_KEY = 86
    VERSIONS = (0, 0)

    @staticmethod
    async def handle(deps: ShareCoordinatorDeps, ctx: RequestContext,
                     request: DeleteShareGroupStateRequest) -> DeleteShareGroupStateResponse:
        async def answer(m: Messages, topic_id: uuid.UUID, p: DeleteStatePartition) -> Fields:
            await deps.share_coordinator.delete_state(request.group_id, topic_id, int(p.partition))
            return _failed(_OK)

        response: DeleteShareGroupStateResponse = await _answer_partitions(
            deps, ctx, request.topics, 86, "DeleteStateResult", "DeleteShareGroupStateResponse", answer)
        return response


def _summary_failed(err: Err) -> Fields:
    # make() leaves out DeliveryCompleteCount at v0.
    return {**_failed(err), "state_epoch": 0, "leader_epoch": 0, "start_offset": 0 if err[0] else -1,
            "delivery_complete_count": -1}


class ReadShareGroupStateSummary:
    API_KEY = 87
    VERSIONS = (0, 1)

    @staticmethod
    async def handle(deps: ShareCoordinatorDeps, ctx: RequestContext,
                     request: ReadShareGroupStateSummaryRequest) -> ReadShareGroupStateSummaryResponse:
        async def answer(m: Messages, topic_id: uuid.UUID, p: SummaryPartition) -> Fields:
            summary = deps.share_coordinator.read_summary(request.group_id, topic_id, int(p.partition))
            if summary is None:
                # Kafka 4.3.1: no error for a state never initialized, start offset -1.
                return _summary_failed(_OK)
            return {**_failed(_OK), "state_epoch": summary.state_epoch, "leader_epoch": summary.leader_epoch,
                    "start_offset": summary.start_offset,
                    "delivery_complete_count": summary.delivery_complete_count}

        topics: Sequence[_Topic[SummaryPartition]] = request.topics  # either version's
        response: ReadShareGroupStateSummaryResponse = await _answer_partitions(
            deps, ctx, topics, 87, "ReadStateSummaryResult", "ReadShareGroupStateSummaryResponse", answer,
            _summary_failed)
        return response


def _partition_known(deps: ShareCoordinatorDeps, topic_id: uuid.UUID, partition: int) -> bool:
    topic = deps.share_coordinator.node.image.topic_by_id(topic_id)
    return topic is not None and partition in topic.partitions
