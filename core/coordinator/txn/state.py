"""Transaction metadata and its state machine, as pure functions (no I/O).

:class:`TransactionMetadata` is the coordinator's view of one transactional id. Each request
type has a transition function here that either raises the :mod:`strom.core.errors` class of the
Kafka error code the request is answered with, or returns the metadata to persist (``None`` when nothing
changes, e.g. a retried request). The coordinator persists the returned metadata to
``__transaction_state`` and only then installs it in memory, so a failed write leaves the old
state in place. The rules follow Kafka 4.3's TransactionCoordinator / TransactionMetadata for both
transaction versions:

* version 1 (EndTxn v0-v4, AddPartitionsToTxn v0-v3 from the producer): the producer adds its
  partitions explicitly and keeps one epoch across transactions;
* version 2 (KIP-890; EndTxn v5, implicit adds by partition leaders): EndTxn bumps the epoch, the
  markers carry the bumped epoch and the producer continues with it (or, when the epoch is
  exhausted, with a fresh producer id chosen at prepare time and installed at completion).

Which version applies is decided per request (the client's version), as in Kafka; transitions the
coordinator starts itself (timeouts, fencing by InitProducerId) use the cluster's finalized
``transaction.version``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from strom.core.coordinator.txn.records import TransactionLogValue, TxnPartitions, encode_metadata_value
from strom.core.errors import (
    ConcurrentTransactionsError,
    CorruptMessageError,
    InvalidPidMappingError,
    InvalidTxnStateError,
    ProducerFencedError,
)

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
    # TV2: the producer id installed when a transaction prepared at an exhausted epoch completes.
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0  # of the last transition a client asked for

    # -- persistence --------------------------------------------------------------------------

    def to_log_value(self) -> TransactionLogValue:
        by_topic = self.topics()
        return TransactionLogValue(
            producer_id=self.producer_id, previous_producer_id=self.last_producer_id,
            next_producer_id=self.next_producer_id,
            producer_epoch=self.producer_epoch, transaction_timeout_ms=self.timeout_ms,
            transaction_status=int(self.state),
            transaction_partitions=[TxnPartitions(t, ids) for t, ids in by_topic.items()],
            transaction_last_update_timestamp_ms=self.last_update_ms,
            transaction_start_timestamp_ms=self.txn_start_ms,
            client_transaction_version=self.client_transaction_version)

    def log_value_bytes(self) -> bytes:
        """``records.encode_value(self.to_log_value())``, packed without the intermediate objects."""
        return encode_metadata_value(
            self.producer_id, self.last_producer_id, self.next_producer_id, self.producer_epoch,
            self.timeout_ms, int(self.state), self.topics(), self.last_update_ms, self.txn_start_ms,
            self.client_transaction_version)

    @classmethod
    def from_log_value(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        try:
            state = TxnState(value.transaction_status)
        except ValueError:
            raise CorruptMessageError(f"unknown transaction status {value.transaction_status}") from None
        parts = frozenset((p.topic, i) for p in value.transaction_partitions or () for i in p.partition_ids)
        return cls(transactional_id, value.producer_id, value.producer_epoch,
                   last_producer_id=value.previous_producer_id, timeout_ms=value.transaction_timeout_ms,
                   state=state, partitions=parts, txn_start_ms=value.transaction_start_timestamp_ms,
                   last_update_ms=value.transaction_last_update_timestamp_ms,
                   next_producer_id=value.next_producer_id,
                   client_transaction_version=value.client_transaction_version)

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
                          now: int, transaction_version: int = 0) -> InitPlan:
    """InitProducerId for an existing (or just created) transactional id.

    ``transaction_version`` is the cluster's: it decides how an ongoing transaction is fenced.
    """
    if md.state in PREPARE_STATES or md.state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
        raise ConcurrentTransactionsError()
    if expected is not None and not _valid_expected(md, expected):
        raise ProducerFencedError("the producer id does not match this transactional id")
    if md.state == TxnState.ONGOING:
        # Abort the ongoing transaction under a bumped epoch (fencing its producer); the client is
        # told to retry, and the retry bumps again (or rotates the producer id when exhausted).
        return InitPlan(fence_for_abort(md, now, transaction_version), abort_ongoing=True)
    if expected is not None and md.producer_epoch != NO_PRODUCER_EPOCH and expected[1] != md.producer_epoch:
        if expected[1] == md.last_producer_epoch:
            return InitPlan(None)   # a retry of a bump whose answer was lost
        raise ProducerFencedError("the producer epoch is not the current one")
    last_epoch = NO_PRODUCER_EPOCH if expected is None else md.producer_epoch
    base = replace(md, timeout_ms=timeout_ms, state=TxnState.EMPTY, partitions=frozenset(),
                   txn_start_ms=-1, last_update_ms=now)
    if is_epoch_exhausted(md.producer_epoch):
        return InitPlan(replace(base, last_producer_id=md.producer_id, producer_epoch=0,
                                last_producer_epoch=last_epoch), needs_new_producer_id=True)
    return InitPlan(replace(base, producer_epoch=md.producer_epoch + 1, last_producer_epoch=last_epoch))


def fence_for_abort(md: TransactionMetadata, now: int, transaction_version: int = 0) -> TransactionMetadata:
    """PrepareAbort under a bumped epoch (Kafka's PrepareEpochFence, then abort, not from the client).

    Under transaction version 2 (Kafka 4.3) the bump is the abort's own, with the old epoch kept
    as the last one: the producer's EndTxn(abort) at that epoch then reads as a retry and gets the
    new epoch, so a TV2 producer survives its transaction timing out.
    """
    if transaction_version >= 2:
        epoch = md.producer_epoch if md.producer_epoch >= SHORT_MAX else md.producer_epoch + 1
        return replace(md, producer_epoch=epoch, last_producer_epoch=md.producer_epoch,
                       state=TxnState.PREPARE_ABORT, next_producer_id=NO_PRODUCER_ID,
                       client_transaction_version=transaction_version, last_update_ms=now)
    epoch = md.producer_epoch if is_epoch_exhausted(md.producer_epoch) else md.producer_epoch + 1
    return replace(md, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH,
                   state=TxnState.PREPARE_ABORT, last_update_ms=now)


def _check_producer(md: TransactionMetadata, producer_id: int, producer_epoch: int) -> None:
    if producer_id != md.producer_id:
        raise InvalidPidMappingError()
    if producer_epoch != md.producer_epoch:
        raise ProducerFencedError()


def add_partitions(md: TransactionMetadata, producer_id: int, producer_epoch: int,
                   partitions: set[TopicPartition], now: int, client_version: int = 0) -> TransactionMetadata | None:
    """AddPartitionsToTxn / AddOffsetsToTxn: the transaction becomes (or stays) Ongoing.

    ``client_version`` is recorded with the transaction: 2 for the adds partition leaders make
    for TV2 producers (AddPartitionsToTxn v4+), 0 for a producer's own AddPartitionsToTxn.
    A PrepareX state a request can see means its markers are still being written (Kafka's
    pending CompleteX), which Kafka 4.3 answers before looking at the producer.
    """
    if md.state in PREPARE_STATES or md.state == TxnState.PREPARE_EPOCH_FENCE:
        raise ConcurrentTransactionsError()
    _check_producer(md, producer_id, producer_epoch)
    if md.state == TxnState.DEAD:
        raise InvalidTxnStateError()
    if md.state == TxnState.ONGOING and partitions <= md.partitions:
        return None
    start = md.txn_start_ms if md.state == TxnState.ONGOING else now
    return replace(md, state=TxnState.ONGOING, partitions=md.partitions | partitions, txn_start_ms=start,
                   last_update_ms=now, client_transaction_version=client_version)


def verify_partitions(md: TransactionMetadata, producer_id: int, producer_epoch: int,
                      partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    """AddPartitionsToTxn verify_only: is each partition already part of the ongoing transaction?"""
    _check_producer(md, producer_id, producer_epoch)
    if md.state in PREPARE_STATES or md.state == TxnState.PREPARE_EPOCH_FENCE:
        raise ConcurrentTransactionsError()
    ongoing = md.state == TxnState.ONGOING
    # TRANSACTION_ABORTABLE: the producer can abort and go on (Kafka 3.8+; the leader maps it to
    # INVALID_TXN_STATE for producers too old to know the code).
    return {tp: ErrorCode.none if ongoing and tp in md.partitions else ErrorCode.transaction_abortable
            for tp in partitions}


@dataclass(frozen=True, slots=True)
class EndPlan:
    """What EndTxn does: persist ``metadata`` (PrepareCommit/PrepareAbort), or answer at once."""

    metadata: TransactionMetadata | None   # None: a retry of a finished end; nothing to write
    needs_new_producer_id: bool = False    # TV2 at an exhausted epoch: the caller fills next_producer_id


def end_transaction(md: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool,
                    now: int, client_version: int = 0) -> EndPlan:
    """EndTxn: Ongoing -> PrepareCommit/PrepareAbort, by the rules of the client's transaction version."""
    if client_version >= 2:
        return _end_transaction_v2(md, producer_id, producer_epoch, commit, now)
    _check_producer(md, producer_id, producer_epoch)
    state = md.state
    if state == TxnState.ONGOING:
        return EndPlan(replace(md, state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
                               last_update_ms=now, client_transaction_version=client_version))
    if state in COMPLETE_STATES:
        if (state == TxnState.COMPLETE_COMMIT) == commit:
            return EndPlan(None)
        raise InvalidTxnStateError(f"transaction is {state.display}")
    if state in PREPARE_STATES:
        if (state == TxnState.PREPARE_COMMIT) == commit:
            raise ConcurrentTransactionsError()
        raise InvalidTxnStateError(f"transaction is {state.display}")
    if state == TxnState.PREPARE_EPOCH_FENCE:
        raise ConcurrentTransactionsError()
    raise InvalidTxnStateError(f"transaction is {state.display}")


def _end_transaction_v2(md: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool,
                        now: int) -> EndPlan:
    """EndTxn v5 (KIP-890). A retry carries the epoch from before the bump (or, after a producer id
    rotation, the previous id at the last usable epoch); an abort is accepted with no transaction
    open, since a TV2 producer cannot know whether its partitions were ever added."""
    state = md.state
    if state in PREPARE_STATES or state == TxnState.PREPARE_EPOCH_FENCE:
        # Markers still being written (Kafka: a pending CompleteX), checked first since 4.0
        # (KAFKA-18464): the producer retries and then sees the completed transaction.
        raise ConcurrentTransactionsError()
    retry_on_overflow = (producer_id == md.last_producer_id and producer_epoch == SHORT_MAX - 1
                         and md.producer_epoch == 0)
    retry_on_bump = md.producer_epoch == producer_epoch + 1
    if producer_id != md.producer_id and not retry_on_overflow:
        raise InvalidPidMappingError()
    if state in (TxnState.ONGOING, TxnState.EMPTY):
        valid = producer_epoch == md.producer_epoch
    elif state in COMPLETE_STATES:
        valid = retry_on_bump or retry_on_overflow or producer_epoch == md.producer_epoch
    else:
        valid = False
    if not valid:
        raise ProducerFencedError()
    retry = retry_on_bump or retry_on_overflow
    if state in COMPLETE_STATES and retry:
        if (state == TxnState.COMPLETE_COMMIT) == commit:
            return EndPlan(None)
        raise InvalidTxnStateError(f"transaction is {state.display}")
    if state != TxnState.ONGOING and commit:
        raise InvalidTxnStateError(f"transaction is {state.display}")
    # Ongoing, or an abort with nothing open (Empty / CompleteX at the current epoch).
    exhausted = is_epoch_exhausted(md.producer_epoch)
    prepared = replace(
        md, state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
        # At the last epoch (only reachable through a fence) Kafka keeps it rather than overflow.
        producer_epoch=min(md.producer_epoch + 1, SHORT_MAX), last_producer_epoch=md.producer_epoch,
        txn_start_ms=md.txn_start_ms if state == TxnState.ONGOING else now,
        partitions=md.partitions if state == TxnState.ONGOING else frozenset(),
        next_producer_id=NO_PRODUCER_ID, client_transaction_version=2, last_update_ms=now)
    return EndPlan(prepared, needs_new_producer_id=exhausted)


def producer_after_end(md: TransactionMetadata) -> tuple[int, int]:
    """The (producer id, epoch) an EndTxn v5 answers: what the producer continues with once ``md``
    (PrepareX or CompleteX) completes."""
    if md.state in PREPARE_STATES and md.next_producer_id != NO_PRODUCER_ID:
        return md.next_producer_id, 0
    return md.producer_id, md.producer_epoch


def complete(md: TransactionMetadata, now: int) -> TransactionMetadata:
    """PrepareCommit/PrepareAbort -> CompleteCommit/CompleteAbort once every marker is written."""
    if md.state not in PREPARE_STATES:
        raise ValueError(f"cannot complete a transaction in state {md.state.display}")
    done = TxnState.COMPLETE_COMMIT if md.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
    if md.next_producer_id != NO_PRODUCER_ID:
        # TV2 producer id rotation: the markers went out under the old id at the last epoch.
        return replace(md, state=done, partitions=frozenset(), last_update_ms=now, producer_id=md.next_producer_id,
                       producer_epoch=0, last_producer_id=md.producer_id, next_producer_id=NO_PRODUCER_ID)
    return replace(md, state=done, partitions=frozenset(), last_update_ms=now)


def timed_out(md: TransactionMetadata, now: int) -> bool:
    return md.state == TxnState.ONGOING and md.txn_start_ms + md.timeout_ms < now


def expired(md: TransactionMetadata, now: int, expiration_ms: int) -> bool:
    """Kafka removes an idle transactional id (no transaction in flight) after transactional.id.expiration.ms."""
    idle = md.state in COMPLETE_STATES or md.state == TxnState.EMPTY
    return idle and md.last_update_ms + expiration_ms <= now
