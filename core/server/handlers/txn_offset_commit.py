"""TxnOffsetCommit (key 28): offsets committed as part of a producer's transaction.

Authorization and topic checks happen here (as in Kafka's KafkaApis); the group coordinator
validates the group (generation, member) and the producer, and keeps the offsets pending until
the transaction's marker reaches the group's ``__consumer_offsets`` partition.

Before that, the group's ``__consumer_offsets`` partition must be in the transaction: from v5
(KIP-890 transaction version 2, whose producers send no AddOffsetsToTxn) the partition is added
to it; before v5 it is verified to be in it (``transaction.partition.verification.enable``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from strom.core.coordinator.txn.wire import may_write_txn_id
from strom.core.errors import KafkaError
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, error_of, response_throttle
from strom.core.server.handlers._deps import GroupDeps, PartitionTxnDeps
from strom.core.server.txn_verification import (
    TxnBatch,
    add_or_verify,
    needs_coordinator,
    still_in_transaction,
)

if TYPE_CHECKING:
    from strom.core.server.handlers._kio_types import TxnOffsetCommitRequest, TxnOffsetCommitResponse

API_KEY = 28
VERSIONS = (0, 5)
ADDS_PARTITION_SINCE = 5
ABORTABLE_SINCE = 4  # TRANSACTION_ABORTABLE; older producers get INVALID_TXN_STATE


class TxnOffsetCommitDeps(PartitionTxnDeps, GroupDeps, Protocol):
    """The offsets partition's transaction (KIP-890) and the group coordinator that stores the offsets."""


TopicPartition = tuple[str, int]


async def handle(deps: TxnOffsetCommitDeps, ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    m = response_messages(API_KEY, ctx.api_version)
    wanted: list[TopicPartition] = [(t.name, int(p.partition_index)) for t in request.topics for p in t.partitions]

    def answer(codes: dict[TopicPartition, int]) -> Any:
        by_topic: dict[str, list[Any]] = {}
        for (topic, index), code in codes.items():
            by_topic.setdefault(topic, []).append(
                m.make("TxnOffsetCommitResponsePartition", partition_index=index, error_code=code))
        return m.make("TxnOffsetCommitResponse", throttle_time=response_throttle(deps, ctx),
                      topics=tuple(m.make("TxnOffsetCommitResponseTopic", name=t, partitions=tuple(ps))
                                   for t, ps in by_topic.items()))

    if not may_write_txn_id(deps, ctx, request.transactional_id):
        return answer(dict.fromkeys(wanted, int(ErrorCode.transactional_id_authorization_failed)))
    if not deps.authorize(ctx, "READ", "GROUP", [request.group_id])[0]:
        return answer(dict.fromkeys(wanted, int(ErrorCode.group_authorization_failed)))
    denied = authorize_topics(deps, ctx, "READ", sorted({t for t, _ in wanted}))
    codes: dict[TopicPartition, int] = {}
    # (topic, partition, offset, leader epoch, metadata), the group coordinator's commit form.
    offsets: list[tuple[str, int, int, int, str | None]] = []
    for t in request.topics:
        topic = deps.image.topics.get(t.name)
        for p in t.partitions:
            tp = (t.name, int(p.partition_index))
            if t.name in denied:
                codes[tp] = int(ErrorCode.topic_authorization_failed)
            elif topic is None or tp[1] not in topic.partitions:
                codes[tp] = int(ErrorCode.unknown_topic_or_partition)
            else:
                offsets.append((tp[0], tp[1], int(p.committed_offset),
                                int(getattr(p, "committed_leader_epoch", -1)), p.committed_metadata))
    group_coordinator: Any = getattr(deps, "group_coordinator", None)
    asked = [(o[0], o[1]) for o in offsets]
    if offsets:
        enlisted = 0 if group_coordinator is None else await _enlist_offsets_partition(deps, request, ctx.api_version)
        if group_coordinator is None:
            codes.update(dict.fromkeys(asked, int(ErrorCode.coordinator_not_available)))
        elif enlisted:
            codes.update(dict.fromkeys(asked, enlisted))
        else:
            try:
                results = await group_coordinator.commit_transactional_offsets(
                    request.producer_id, request.producer_epoch, request.group_id,
                    getattr(request, "generation_id", -1), getattr(request, "member_id", ""),
                    getattr(request, "group_instance_id", None), offsets)
                codes.update({tp: int(results.get(tp, 0)) for tp in asked})
            except KafkaError as e:
                codes.update(dict.fromkeys(asked, int(e.code)))
            except Exception as e:
                codes.update(dict.fromkeys(asked, error_of(e)[0]))
    return answer({tp: codes[tp] for tp in wanted})


# Kafka's CoordinatorOperationExceptionHelper: errors of the write path as a group API answers them.
_GROUP_API_CODE = {
    ErrorCode.network_exception: ErrorCode.coordinator_load_in_progress,
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
}


async def _enlist_offsets_partition(deps: TxnOffsetCommitDeps, request: TxnOffsetCommitRequest, version: int) -> int:
    """Add (v5) or verify the group's ``__consumer_offsets`` partition in the producer's
    transaction; 0 to go ahead, else the error code for every partition of the request."""
    add = version >= ADDS_PARTITION_SINCE
    if not request.group_id or (not add and not deps.config.transaction_partition_verification_enable):
        return 0
    txn_coordinator: Any = getattr(deps, "txn_coordinator", None)
    if txn_coordinator is None:
        return int(ErrorCode.coordinator_not_available)
    tp = txn_coordinator.offsets_partition(request.group_id)
    batch = TxnBatch(request.producer_id, request.producer_epoch)
    try:
        need = needs_coordinator(deps, tp, batch)
    except Exception as e:
        code = ErrorCode(error_of(e)[0])
        return int(_GROUP_API_CODE.get(code, code))
    if need is None:
        return 0
    if need:
        return need
    # Unlike Produce, no retry of CONCURRENT_TRANSACTIONS here (as in Kafka): the client retries.
    code = (await add_or_verify(deps, request.transactional_id, batch, [tp], add=add,
                                legacy=version < ABORTABLE_SINCE))[tp]
    if code == ErrorCode.none and not still_in_transaction(deps, request.transactional_id, batch, tp):
        code = ErrorCode.invalid_txn_state
    return int(_GROUP_API_CODE.get(code, code))
