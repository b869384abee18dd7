"""The partition leader's side of KIP-890: a transactional batch's partition is in the transaction.

Kafka's ReplicaManager does this before appending a Produce (or TxnOffsetCommit) that would
start a transaction on a partition:

* Produce v12+ / TxnOffsetCommit v5 (transaction version 2 producers, which send no
  AddPartitionsToTxn): the leader **adds** the partition to the transaction at the coordinator;
* older versions, with ``transaction.partition.verification.enable``: the leader only
  **verifies** that the producer added it, so a late or zombie batch cannot open a transaction
  the coordinator will never end (a "hanging transaction").

A partition where the producer's transaction is already open at this epoch needs neither. The
coordinator lives in this process (one node), so the "inter-broker" call is a method call; its
errors are mapped to what a producer gets from Kafka. Before appending, the caller re-checks with
:func:`still_in_transaction` without yielding to the event loop, which is what Kafka's
verification guard achieves: a marker written meanwhile (a timeout abort) is not followed by a
batch that reopens the transaction. Event-loop only.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, NamedTuple

from kio.schema.errors import ErrorCode

from strom.core.coordinator.txn.state import TxnState
from strom.core.coordinator.txn.wire import coordinator
from strom.core.errors import KafkaError

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import PartitionTxnDeps

TopicPartition = tuple[str, int]

# The coordinator could not be asked: the producer retries (Kafka answers NOT_ENOUGH_REPLICAS).
_UNREACHABLE = frozenset({ErrorCode.coordinator_not_available, ErrorCode.not_coordinator,
                          ErrorCode.coordinator_load_in_progress, ErrorCode.network_exception})


class TxnBatch(NamedTuple):
    """The producer of the transactional batches of one partition in a request (immutable; a
    NamedTuple, made per transactional partition of every Produce at a third of the cost of the
    frozen dataclass it was)."""

    producer_id: int
    producer_epoch: int
    base_sequence: int = -1  # of the first batch (-1: offsets, which carry no sequence)


def bad_first_sequence(deps: PartitionTxnDeps, tp: TopicPartition, batch: TxnBatch) -> bool:
    """A TV2 producer the partition does not know must start at sequence 0 (Kafka 4.x): with
    verification the leader knows this batch opens the producer's first transaction here."""
    part = deps.replica_manager.get_partition(*tp)
    return batch.base_sequence != 0 and part.producer_entry(batch.producer_id) is None


def needs_coordinator(deps: PartitionTxnDeps, tp: TopicPartition, batch: TxnBatch) -> int | None:
    """None when the producer's transaction is open here at this epoch; an error code when the
    epoch is stale; 0 when the coordinator must add or verify the partition."""
    part = deps.replica_manager.get_partition(*tp)
    entry = part.producer_entry(batch.producer_id)
    if entry is None:
        return 0
    if entry.producer_epoch > batch.producer_epoch:
        return int(ErrorCode.invalid_producer_epoch)
    if entry.current_txn_first_offset is not None and entry.producer_epoch == batch.producer_epoch:
        return None
    return 0


async def add_or_verify(deps: PartitionTxnDeps, transactional_id: str, batch: TxnBatch, partitions: list[TopicPartition],
                        *, add: bool, legacy: bool = False, retry_ms: int = 0) -> dict[TopicPartition, ErrorCode]:
    """Ask the transaction coordinator to add (TV2) or verify (TV1) ``partitions``; the error for
    each partition as Kafka's AddPartitionsToTxnManager reports it (``none``: go ahead).

    ``legacy``: the request predates TRANSACTION_ABORTABLE (Produce v10-, TxnOffsetCommit v3-).
    ``retry_ms``: how long an add retries CONCURRENT_TRANSACTIONS, which usually means the
    producer's previous transaction is still writing its markers.
    """
    if not add:
        return verify(deps, transactional_id, batch, partitions, legacy=legacy)
    backoff_s = deps.config.add_partitions_to_txn_retry_backoff_ms / 1000
    deadline = time.monotonic() + retry_ms / 1000
    while True:
        codes = await _add(deps, transactional_id, batch, partitions)
        if ErrorCode.concurrent_transactions not in codes.values() or time.monotonic() >= deadline:
            break
        await asyncio.sleep(backoff_s)
    return {tp: _manager_code(code, legacy) for tp, code in codes.items()}


def verify(deps: PartitionTxnDeps, transactional_id: str, batch: TxnBatch, partitions: list[TopicPartition],
           *, legacy: bool = False) -> dict[TopicPartition, ErrorCode]:
    """TV1: are ``partitions`` in the producer's transaction? :func:`add_or_verify`'s answers, from
    a read of the coordinator's state, without a suspension point (once per partition per
    transaction of a producer, on its Produce path)."""
    try:
        codes = coordinator(deps).verify_partitions(transactional_id, batch.producer_id, batch.producer_epoch,
                                                      partitions)
    except KafkaError as e:
        codes = dict.fromkeys(partitions, e.code)
    return {tp: _manager_code(code, legacy) for tp, code in codes.items()}


async def _add(deps: PartitionTxnDeps, transactional_id: str, batch: TxnBatch,
               partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    try:
        await coordinator(deps).add_partitions(transactional_id, batch.producer_id, batch.producer_epoch,
                                                 partitions, client_version=2)
        return dict.fromkeys(partitions, ErrorCode.none)
    except KafkaError as e:
        return dict.fromkeys(partitions, e.code)


def _manager_code(code: ErrorCode, legacy: bool) -> ErrorCode:
    if code == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if code == ErrorCode.transaction_abortable and legacy:
        return ErrorCode.invalid_txn_state  # clients that predate the code
    return code


def produce_code(code: ErrorCode, add: bool) -> int:
    """What a Produce partition answers for an add/verify error (Kafka's ReplicaManager): the
    producer retries NOT_ENOUGH_REPLICAS when the coordinator could not be asked."""
    if code in _UNREACHABLE or (code == ErrorCode.concurrent_transactions and not add):
        return int(ErrorCode.not_enough_replicas)
    return int(code)


def still_in_transaction(deps: PartitionTxnDeps, transactional_id: str, batch: TxnBatch, tp: TopicPartition) -> bool:
    """Is ``tp`` still part of the producer's ongoing transaction? Checked right before appending."""
    coord: Any = getattr(deps, "txn_coordinator", None)
    md = coord.txns.get(transactional_id) if coord is not None else None
    return (md is not None and md.state == TxnState.ONGOING and md.producer_id == batch.producer_id
            and md.producer_epoch == batch.producer_epoch and tp in md.partitions)
