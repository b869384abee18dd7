"""Transaction metadata and its state machine, as pure functions (no I/O).

:class:`TransactionMetadata` is the coordinator's view of one transactional id. Each request
type has a transition function here that either raises :class:`TxnError` with the Kafka error
code the request is answered with, or returns the metadata to persist (``None`` when nothing
changes, e.g. a retried request). The coordinator persists the returned metadata to
``__transaction_state`` and only then installs it in memory, so a failed write leaves the old
state in place. The rules follow Kafka 4.x's TransactionCoordinator / TransactionMetadata for
transaction version 1 (producers add partitions explicitly; EndTxn does not bump the epoch).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from strom.core.coordinator.txn.records import TransactionLogValue, TxnPartitions

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767

TopicPartition = tuple[str, int]


class TxnState(enum.IntEnum):
    """Kafka's ``TransactionState`` with the ids written in ``TransactionStatus``."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        """The name DescribeTransactions / ListTransactions use ("PrepareCommit", ...)."""
        return "".join(part.capitalize() for part in self.name.split("_"))


STATE_BY_NAME = {s.display: s for s in TxnState}
PREPARE_STATES = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})
COMPLETE_STATES = frozenset({TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})


class TxnError(Exception):
    """A request is answered with ``code`` and does not change the transaction."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


def is_epoch_exhausted(epoch: int) -> bool:
    # Kafka keeps Short.MAX_VALUE free so a fencing bump of the last usable epoch is possible.
    return epoch >= SHORT_MAX - 1


@dataclass(frozen=True, slots=True)
class TransactionMetadata:
    """The state of one transactional id (Kafka's TransactionMetadata)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_id: int = NO_PRODUCER_ID       # persisted as PreviousProducerId
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # memory only, as in Kafka (KIP-360 retries)
    timeout_ms: int = 60000
    state: TxnState = TxnState.EMPTY
    partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    txn_start_ms: int = -1
    last_update_ms: int = -1

    # -- persistence --------------------------------------------------------------------------

    def to_log_value(self) -> TransactionLogValue:
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(index)
        return TransactionLogValue(
            producer_id=self.producer_id, previous_producer_id=self.last_producer_id,
            producer_epoch=self.producer_epoch, transaction_timeout_ms=self.timeout_ms,
            transaction_status=int(self.state),
            transaction_partitions=[TxnPartitions(t, ids) for t, ids in by_topic.items()],
            transaction_last_update_timestamp_ms=self.last_update_ms,
            transaction_start_timestamp_ms=self.txn_start_ms)

    @classmethod
    def from_log_value(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        try:
            state = TxnState(value.transaction_status)
        except ValueError:
            from strom.core.exceptions import CorruptMessageError
            raise CorruptMessageError(f"unknown transaction status {value.transaction_status}") from None
        parts = frozenset((p.topic, i) for p in value.transaction_partitions or () for i in p.partition_ids)
        return cls(transactional_id, value.producer_id, value.producer_epoch, value.previous_producer_id,
                   NO_PRODUCER_EPOCH, value.transaction_timeout_ms, state, parts,
                   value.transaction_start_timestamp_ms, value.transaction_last_update_timestamp_ms)

    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic, index in sorted(self.partitions):
            out.setdefault(topic, []).append(index)
        return out


# ---------------------------------------------------------------------------------------------
# Transitions
# ---------------------------------------------------------------------------------------------


def new_metadata(transactional_id: str, producer_id: int, timeout_ms: int, now: int) -> TransactionMetadata:
    """A transactional id seen for the first time (epoch -1: the first InitProducerId bumps it to 0)."""
    return TransactionMetadata(transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms=timeout_ms,
                               last_update_ms=now)


@dataclass(frozen=True, slots=True)
class InitPlan:
    """What InitProducerId does: persist ``metadata`` (or nothing), then answer or abort first."""

    metadata: TransactionMetadata | None   # None: answer with the current id/epoch (a retry)
    abort_ongoing: bool = False            # metadata is a fencing PrepareAbort; answer CONCURRENT_TRANSACTIONS
    needs_new_producer_id: bool = False    # epoch exhausted: the caller fills in a fresh producer id


def _valid_expected(md: TransactionMetadata, expected: tuple[int, int]) -> bool:
    pid, epoch = expected
    return (md.producer_epoch == NO_PRODUCER_EPOCH or pid == md.producer_id
            or (pid == md.last_producer_id and is_epoch_exhausted(epoch)))


def plan_init_producer_id(md: TransactionMetadata, timeout_ms: int, expected: tuple[int, int] | None,
                          now: int) -> InitPlan:
    """InitProducerId for an existing (or just created) transactional id."""
    if md.state in PREPARE_STATES or md.state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
        raise TxnError(ErrorCode.concurrent_transactions)
    if expected is not None and not _valid_expected(md, expected):
        raise TxnError(ErrorCode.producer_fenced, "the producer id does not match this transactional id")
    if md.state == TxnState.ONGOING:
        # Abort the ongoing transaction under a bumped epoch (fencing its producer); the client is
        # told to retry, and the retry bumps again (or rotates the producer id when exhausted).
        return InitPlan(fence_for_abort(md, now), abort_ongoing=True)
    if expected is not None and md.producer_epoch != NO_PRODUCER_EPOCH and expected[1] != md.producer_epoch:
        if expected[1] == md.last_producer_epoch:
            return InitPlan(None)   # a retry of a bump whose answer was lost
        raise TxnError(ErrorCode.producer_fenced, "the producer epoch is not the current one")
    last_epoch = NO_PRODUCER_EPOCH if expected is None else md.producer_epoch
    base = replace(md, timeout_ms=timeout_ms, state=TxnState.EMPTY, partitions=frozenset(),
                   txn_start_ms=-1, last_update_ms=now)
    if is_epoch_exhausted(md.producer_epoch):
        return InitPlan(replace(base, last_producer_id=md.producer_id, producer_epoch=0,
                                last_producer_epoch=last_epoch), needs_new_producer_id=True)
    return InitPlan(replace(base, producer_epoch=md.producer_epoch + 1, last_producer_epoch=last_epoch))


def fence_for_abort(md: TransactionMetadata, now: int) -> TransactionMetadata:
    """PrepareAbort under a bumped epoch (Kafka's PrepareEpochFence, then abort, not from the client)."""
    epoch = md.producer_epoch if is_epoch_exhausted(md.producer_epoch) else md.producer_epoch + 1
    return replace(md, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH,
                   state=TxnState.PREPARE_ABORT, last_update_ms=now)


def _check_producer(md: TransactionMetadata, producer_id: int, producer_epoch: int) -> None:
    if producer_id != md.producer_id:
        raise TxnError(ErrorCode.invalid_producer_id_mapping)
    if producer_epoch != md.producer_epoch:
        raise TxnError(ErrorCode.producer_fenced)


def add_partitions(md: TransactionMetadata, producer_id: int, producer_epoch: int,
                   partitions: set[TopicPartition], now: int) -> TransactionMetadata | None:
    """AddPartitionsToTxn / AddOffsetsToTxn: the transaction becomes (or stays) Ongoing."""
    _check_producer(md, producer_id, producer_epoch)
    if md.state in PREPARE_STATES or md.state == TxnState.PREPARE_EPOCH_FENCE:
        raise TxnError(ErrorCode.concurrent_transactions)
    if md.state == TxnState.DEAD:
        raise TxnError(ErrorCode.invalid_txn_state)
    if md.state == TxnState.ONGOING and partitions <= md.partitions:
        return None
    start = md.txn_start_ms if md.state == TxnState.ONGOING else now
    return replace(md, state=TxnState.ONGOING, partitions=md.partitions | partitions, txn_start_ms=start,
                   last_update_ms=now)


def verify_partitions(md: TransactionMetadata, producer_id: int, producer_epoch: int,
                      partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    """AddPartitionsToTxn verify_only: is each partition already part of the ongoing transaction?"""
    _check_producer(md, producer_id, producer_epoch)
    if md.state in PREPARE_STATES or md.state == TxnState.PREPARE_EPOCH_FENCE:
        raise TxnError(ErrorCode.concurrent_transactions)
    ongoing = md.state == TxnState.ONGOING
    return {tp: ErrorCode.none if ongoing and tp in md.partitions else ErrorCode.invalid_txn_state
            for tp in partitions}


def end_transaction(md: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool,
                    now: int) -> TransactionMetadata | None:
    """EndTxn: Ongoing -> PrepareCommit/PrepareAbort; ``None`` for a retry of a finished end."""
    _check_producer(md, producer_id, producer_epoch)
    state = md.state
    if state == TxnState.ONGOING:
        return replace(md, state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, last_update_ms=now)
    if state in COMPLETE_STATES:
        if (state == TxnState.COMPLETE_COMMIT) == commit:
            return None
        raise TxnError(ErrorCode.invalid_txn_state, f"transaction is {state.display}")
    if state in PREPARE_STATES:
        if (state == TxnState.PREPARE_COMMIT) == commit:
            raise TxnError(ErrorCode.concurrent_transactions)
        raise TxnError(ErrorCode.invalid_txn_state, f"transaction is {state.display}")
    if state == TxnState.PREPARE_EPOCH_FENCE:
        raise TxnError(ErrorCode.concurrent_transactions)
    raise TxnError(ErrorCode.invalid_txn_state, f"transaction is {state.display}")


def complete(md: TransactionMetadata, now: int) -> TransactionMetadata:
    """PrepareCommit/PrepareAbort -> CompleteCommit/CompleteAbort once every marker is written."""
    if md.state not in PREPARE_STATES:
        raise ValueError(f"cannot complete a transaction in state {md.state.display}")
    done = TxnState.COMPLETE_COMMIT if md.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
    return replace(md, state=done, partitions=frozenset(), last_update_ms=now)


def timed_out(md: TransactionMetadata, now: int) -> bool:
    return md.state == TxnState.ONGOING and md.txn_start_ms + md.timeout_ms < now


def expired(md: TransactionMetadata, now: int, expiration_ms: int) -> bool:
    """Kafka removes an idle transactional id (no transaction in flight) after transactional.id.expiration.ms."""
    idle = md.state in COMPLETE_STATES or md.state == TxnState.EMPTY
    return idle and md.last_update_ms + expiration_ms <= now
