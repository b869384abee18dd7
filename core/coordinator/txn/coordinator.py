"""TransactionCoordinator: transactional ids, their producer ids and two-phase commit.

State lives in the compacted ``__transaction_state`` topic (one TransactionLog record per
change, keyed by transactional id); the partition of an id is
``java_hash_partition(id, transaction.state.log.num.partitions)``. :meth:`start` creates the
topic if needed and replays it; transactions found in PrepareCommit/PrepareAbort are completed
(markers re-sent, then CompleteX written), so a broker killed in the middle of EndTxn ends with
the transaction committed or aborted, never half visible. Ongoing transactions whose producer is
gone are aborted by the timeout task.

EndTxn is Kafka's two-phase commit: persist PrepareX (the decision), write a COMMIT/ABORT marker
to every partition of the transaction through the coordinator runtime, persist CompleteX. All
operations on one transactional id are serialized by a per-id lock; the state rules are the pure
functions of :mod:`strom.core.coordinator.txn.state`. Event-loop only.

CompleteX is the one record nothing waits for: the answer went out with PrepareX, and a
coordinator that restarts before CompleteX is in the log finds PrepareX and writes the markers
again, as Kafka's does after a failover (a marker for a finished transaction completes nothing).
So it lingers up to :data:`COMPLETE_LINGER_S` in memory and goes into the same batch as the id's
next record (usually the next transaction's Ongoing, a few milliseconds later), which saves an
append per transaction; a timer writes whatever is still lingering, and :meth:`close` too. Every
write that takes a lingering record happens without a suspension point between taking it and
appending, so the log keeps each id's records in the order they were made.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from strom.core.coordinator.runtime import (
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    CoordinatorNode,
    java_hash_partition,
)
from strom.core.coordinator.txn import records, state
from strom.core.coordinator.txn.state import TopicPartition, TransactionMetadata, TxnState
from strom.core.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidPidMappingError,
    InvalidRequestError,
    InvalidTxnTimeoutError,
    KafkaError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    TransactionalIdNotFoundError,
)

if TYPE_CHECKING:
    from strom.core.coordinator.producer_ids import ProducerIdManager

log = logging.getLogger(__name__)

MARKER_RETRY_S = (0.1, 0.5, 1.0, 2.0, 5.0)
COMPLETE_LINGER_S = 0.005  # as Kafka's group.coordinator.append.linger.ms default (5 ms)
PARTITION_WAIT_S = 30.0


def now_ms() -> int:
    return int(time.time() * 1000)


async def _periodically(interval_ms: Callable[[], int], task: Callable[[], Awaitable[object]], what: str) -> None:
    """Run ``task`` every ``interval_ms()`` until cancelled; a failed run is logged, the next one
    still comes (the interval is read each time, as the coordinator's config may change it)."""
    while True:
        await asyncio.sleep(interval_ms() / 1000)
        try:
            await task()
        except Exception:
            log.exception("%s failed", what)


class TransactionCoordinatorHost(CoordinatorNode, Protocol):
    """What the transaction coordinator uses of the node it runs in (the broker satisfies it):
    :class:`CoordinatorNode` (the image gives ``transaction.version``, the replica manager the
    leadership of ``__transaction_state`` partitions) and the producer id manager."""

    @property
    def producer_ids(self) -> ProducerIdManager: ...


class TransactionCoordinator:
    """Owns every transactional id whose ``__transaction_state`` partition this broker leads."""

    def __init__(self, broker: TransactionCoordinatorHost, clock: Callable[[], int] = now_ms) -> None:
        self.broker = broker
        self.clock = clock
        self.runtime: Any = None
        self.num_partitions = broker.config.transaction_state_log_num_partitions
        self.loaded = False
        self.txns: dict[str, TransactionMetadata] = {}
        self._pending_markers: dict[str, set[TopicPartition]] = {}  # PrepareX ids: partitions still unmarked
        # CompleteX states not in the log yet: the id's record value, encoded when the markers are
        # done (off the producer's path; the id's next record carries it first).
        self._lingering: dict[str, bytes] = {}
        self._linger_timer: asyncio.TimerHandle | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False
        self.max_timeout_ms = broker.config.transaction_max_timeout_ms
        self.expiration_ms = broker.config.transactional_id_expiration_ms
        self.abort_interval_ms = (
            broker.config.transaction_abort_timed_out_transaction_cleanup_interval_ms)
        self.expire_interval_ms = (
            broker.config.transaction_remove_expired_transaction_cleanup_interval_ms)

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self, runtime: Any) -> None:
        """Create ``__transaction_state`` if needed, replay it, finish interrupted commits/aborts."""
        self.runtime = runtime
        config = self.broker.config
        await runtime.ensure_topic(TRANSACTION_STATE_TOPIC, self.num_partitions, {
            "cleanup.policy": "compact",
            "min.insync.replicas": str(config.transaction_state_log_min_isr),
            "segment.bytes": str(config.transaction_state_log_segment_bytes),
            "compression.type": "uncompressed",
            "unclean.leader.election.enable": "false",
        })
        topic = self.broker.image.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is not None:
            # An existing topic keeps its partition count (Kafka's TransactionStateManager reads it
            # from the metadata): ids hash by what is on disk, e.g. a data directory Kafka wrote
            # with another transaction.state.log.num.partitions.
            self.num_partitions = len(topic.partitions)
        await self._wait_for_partitions()
        self._load()
        self.loaded = True
        for tid, md in self.txns.items():
            if md.state in state.PREPARE_STATES:
                log.info("completing transaction %r found in %s at load", tid, md.state.display)
                self._spawn(self._complete_later(tid, 0.0))
        self._spawn(self._timeout_loop())
        self._spawn(self._expiration_loop())

    async def close(self) -> None:
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.write_lingering()

    async def _wait_for_partitions(self) -> None:
        # The topic is committed; the ReplicaManager creates the logs when the image is published.
        rm = self.broker.replica_manager
        deadline = time.monotonic() + PARTITION_WAIT_S
        while any((TRANSACTION_STATE_TOPIC, p) not in rm.partitions for p in range(self.num_partitions)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{TRANSACTION_STATE_TOPIC} partitions did not appear in {PARTITION_WAIT_S}s")
            await asyncio.sleep(0.02)

    def _load(self) -> None:
        """Replay every partition; the last record of an id wins, a tombstone removes it."""
        loaded: dict[str, TransactionMetadata] = {}
        for p in range(self.num_partitions):
            for record in self.runtime.read(TRANSACTION_STATE_TOPIC, p):
                if record.key is None or record.header.is_control:
                    continue   # markers and keyless records carry no coordinator state
                try:
                    tid = records.decode_key(record.key)
                    if record.value is None:
                        loaded.pop(tid, None)
                        continue
                    loaded[tid] = TransactionMetadata.from_log_value(tid, records.decode_value(record.value))
                except KafkaError as e:
                    # A record we cannot read must not stop the coordinator: skip it, loudly.
                    log.error("skipping unreadable %s-%d record at offset %d: %s",
                              TRANSACTION_STATE_TOPIC, p, record.offset, e)
        self.txns = {tid: md for tid, md in loaded.items() if md.state != TxnState.DEAD}
        self._pending_markers = {tid: set(md.partitions) for tid, md in self.txns.items()
                                 if md.state in state.PREPARE_STATES}
        log.info("loaded %d transactional id(s) from %s", len(self.txns), TRANSACTION_STATE_TOPIC)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- helpers ------------------------------------------------------------------------------

    def transaction_version(self) -> int:
        """The cluster's finalized ``transaction.version``: the rules of transitions no client asked for."""
        return int(self.broker.image.transaction_version)

    def partition_of(self, transactional_id: str) -> int:
        return java_hash_partition(transactional_id, self.num_partitions)

    def _check_coordinator(self, transactional_id: str) -> None:
        if not transactional_id:
            raise InvalidRequestError("empty transactional id")
        if not self.loaded:
            raise CoordinatorLoadInProgressError()
        part = self.broker.replica_manager.partitions.get((TRANSACTION_STATE_TOPIC, self.partition_of(transactional_id)))
        if part is None or not part.is_leader:
            raise NotCoordinatorError()

    def _lock(self, transactional_id: str) -> asyncio.Lock:
        lock = self._locks.get(transactional_id)
        if lock is None:
            lock = self._locks[transactional_id] = asyncio.Lock()
        return lock

    def _require_known(self, transactional_id: str) -> None:
        """INVALID_PRODUCER_ID_MAPPING for an id with no state, before any lock is made for it:
        ids are the client's to choose, and a lock per unknown id would never be dropped."""
        if transactional_id not in self.txns:
            raise InvalidPidMappingError()

    def _drop_lock_if_unused(self, transactional_id: str) -> None:
        """Forget the lock of an id that has no state (an InitProducerId that failed) once free."""
        lock = self._locks.get(transactional_id)
        # asyncio.Lock's waiters: one may be woken but not running yet while locked() is False.
        if (lock is not None and transactional_id not in self.txns and not lock.locked()
                and not getattr(lock, "_waiters", None)):
            del self._locks[transactional_id]

    def _coordinator_epoch(self, transactional_id: str) -> int:
        part = self.broker.replica_manager.partitions.get((TRANSACTION_STATE_TOPIC, self.partition_of(transactional_id)))
        return max(part.leader_epoch, 0) if part is not None else 0

    async def _persist(self, md: TransactionMetadata | None, transactional_id: str | None = None) -> None:
        """Write ``md`` (or a tombstone for ``transactional_id``) and install it in memory.

        A lingering CompleteX of the id goes first in the same batch."""
        tid = md.transactional_id if md is not None else transactional_id
        assert tid is not None
        key = records.encode_key(tid)
        batch = [(key, None if md is None else md.log_value_bytes())]
        lingering = self._lingering.pop(tid, None)
        if lingering is not None:
            batch.insert(0, (key, lingering))
        try:
            self.runtime.append_now(TRANSACTION_STATE_TOPIC, self.partition_of(tid), batch)
        except NotLeaderOrFollowerError:
            raise NotCoordinatorError() from None
        except Exception as e:
            log.warning("cannot write the transaction log for %r: %s", tid, e)
            raise CoordinatorNotAvailableError() from e
        if md is None:
            self.txns.pop(tid, None)
        else:
            self.txns[tid] = md

    def _linger(self, md: TransactionMetadata) -> None:
        """Install a CompleteX state now and write it with the id's next record (or the timer)."""
        self.txns[md.transactional_id] = md
        self._lingering[md.transactional_id] = md.log_value_bytes()
        if self._closed:
            self.write_lingering()  # close() may have written the others already
        elif self._linger_timer is None:
            self._linger_timer = asyncio.get_running_loop().call_later(COMPLETE_LINGER_S, self.write_lingering)

    def persist_lingering(self, transactional_ids: Iterable[str] | None = None) -> None:
        """Write the lingering CompleteX records now if a client is about to see one of these ids
        (any id when None): a state a client can see is a state in the log, as in Kafka, where a
        transition shows only once appended. Otherwise a crash right after the answer reloads
        PrepareX and writes the markers a second time (DescribeTransactions, ListTransactions)."""
        if self._lingering and (transactional_ids is None
                                or any(t in self._lingering for t in transactional_ids)):
            self.write_lingering()

    def write_lingering(self) -> None:
        """Write every lingering CompleteX record, one batch per ``__transaction_state`` partition."""
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None
        by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
        for tid, value in self._lingering.items():
            by_partition.setdefault(self.partition_of(tid), []).append((records.encode_key(tid), value))
        self._lingering.clear()
        for partition, batch in by_partition.items():
            try:
                self.runtime.append_now(TRANSACTION_STATE_TOPIC, partition, batch)
            except Exception as e:
                # Nothing is lost: the transactions are complete (their markers are written), the
                # id's next record carries its state, and a coordinator that loads PrepareX
                # instead writes the markers again and then CompleteX.
                log.warning("cannot write CompleteX of %d transaction(s) to %s-%d: %s", len(batch),
                            TRANSACTION_STATE_TOPIC, partition, e)

    @property
    def lingering(self) -> int:
        """How many CompleteX records wait to be written (see the module docstring)."""
        return len(self._lingering)

    # -- InitProducerId -----------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None = None) -> tuple[int, int]:
        """(producer id, epoch) for a transactional producer; raises the :class:`KafkaError` to answer."""
        if not transactional_id:
            raise InvalidRequestError("empty transactional id")
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            raise InvalidTxnTimeoutError(f"transaction.timeout.ms must be in 1..{self.max_timeout_ms}")
        self._check_coordinator(transactional_id)
        try:
            return await self._init_producer_id(transactional_id, timeout_ms, expected)
        finally:
            self._drop_lock_if_unused(transactional_id)

    async def _init_producer_id(self, transactional_id: str, timeout_ms: int,
                                expected: tuple[int, int] | None) -> tuple[int, int]:
        async with self._lock(transactional_id):
            now = self.clock()
            md = self.txns.get(transactional_id)
            if md is None:
                md = state.new_metadata(transactional_id, await self.broker.producer_ids.generate(), timeout_ms, now)
            plan = state.plan_init_producer_id(md, timeout_ms, expected, now, self.transaction_version())
            if plan.metadata is None:
                return md.producer_id, md.producer_epoch
            if plan.abort_ongoing:
                log.info("InitProducerId for %r fences epoch %d and aborts its ongoing transaction",
                         transactional_id, md.producer_epoch)
                await self._persist(plan.metadata)
                self._pending_markers[transactional_id] = set(plan.metadata.partitions)
                await self._try_complete(transactional_id)
                raise ConcurrentTransactionsError("aborting the ongoing transaction; retry")
            new = plan.metadata
            if plan.needs_new_producer_id:
                new = replace(new, producer_id=await self.broker.producer_ids.generate())
            await self._persist(new)
            return new.producer_id, new.producer_epoch

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[TopicPartition], client_version: int = 0) -> None:
        """Enlist partitions; ``client_version`` 2 for the implicit adds of TV2 producers."""
        self._check_coordinator(transactional_id)
        self._require_known(transactional_id)
        async with self._lock(transactional_id):
            md = self.txns.get(transactional_id)
            if md is None:
                raise InvalidPidMappingError()
            new = state.add_partitions(md, producer_id, producer_epoch, set(partitions), self.clock(),
                                       client_version)
            if new is not None:
                await self._persist(new)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Which of ``partitions`` are in the producer's ongoing transaction (KIP-890 verification).
        A read of the in-memory state: no suspension point, so a leader can verify and append
        without another task running in between."""
        self._check_coordinator(transactional_id)
        md = self.txns.get(transactional_id)
        if md is None:
            raise InvalidPidMappingError()
        return state.verify_partitions(md, producer_id, producer_epoch, partitions)

    def offsets_partition(self, group_id: str) -> TopicPartition:
        topic = self.broker.image.topics.get(OFFSETS_TOPIC)
        n = len(topic.partitions) if topic is not None else self.broker.config.offsets_topic_num_partitions
        return OFFSETS_TOPIC, java_hash_partition(group_id, n)

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> None:
        await self.add_partitions(transactional_id, producer_id, producer_epoch, [self.offsets_partition(group_id)])

    # -- EndTxn -------------------------------------------------------------------------------

    async def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              commit: bool, client_version: int = 0) -> tuple[int, int]:
        """Commit or abort; returns once the decision (PrepareCommit/PrepareAbort) is durable.

        Returns the (producer id, epoch) the producer continues with: under transaction version 2
        (``client_version`` 2, EndTxn v5) the bumped epoch, or a new producer id at epoch 0.

        As in Kafka, the markers and CompleteX are written after the answer. The id's lock goes
        with that work: the producer's next request for this id (its next AddPartitionsToTxn)
        waits for the markers instead of failing with CONCURRENT_TRANSACTIONS and backing off,
        and the marker writing overlaps the producer's next transaction.
        """
        self._check_coordinator(transactional_id)
        self._require_known(transactional_id)
        lock = self._lock(transactional_id)
        await lock.acquire()
        handed_off = False
        try:
            md = self.txns.get(transactional_id)
            if md is None:
                raise InvalidPidMappingError()
            plan = state.end_transaction(md, producer_id, producer_epoch, commit, self.clock(), client_version)
            if plan.metadata is None:
                return state.producer_after_end(md)
            new = plan.metadata
            if plan.needs_new_producer_id:
                new = replace(new, next_producer_id=await self.broker.producer_ids.generate())
            await self._persist(new)
            self._pending_markers[transactional_id] = set(new.partitions)
            if self._closed:  # no task may outlive close(): complete inline
                await self._try_complete(transactional_id)
                return state.producer_after_end(new)
            task = self._spawn(self._complete_after_answer(transactional_id))
            # Released by a done-callback: it runs even if the task is cancelled before its first step.
            task.add_done_callback(lambda _task: lock.release())
            handed_off = True
            return state.producer_after_end(new)
        finally:
            if not handed_off:
                lock.release()

    async def _complete_after_answer(self, transactional_id: str) -> None:
        try:
            await self._try_complete(transactional_id)
        except Exception:
            # The decision is durable (PrepareX): keep retrying the markers, as after a failed write.
            log.exception("completing transaction %r failed; will retry", transactional_id)
            if not self._closed:
                self._spawn(self._complete_later(transactional_id, MARKER_RETRY_S[0]))

    async def _write_markers_and_complete(self, transactional_id: str) -> bool:
        """Write the markers still missing, then complete (CompleteX lingers). Caller holds the id's lock."""
        md = self.txns[transactional_id]
        pending = self._pending_markers.setdefault(transactional_id, set(md.partitions))
        if pending:
            results = await self.runtime.write_txn_markers(
                md.producer_id, md.producer_epoch, self._coordinator_epoch(transactional_id),
                md.state == TxnState.PREPARE_COMMIT, sorted(pending), md.client_transaction_version)
            for tp, code in results.items():
                # A deleted topic needs no marker (Kafka drops it the same way).
                if code in (0, int(ErrorCode.unknown_topic_or_partition)):
                    pending.discard(tp)
                else:
                    log.warning("marker for %r on %s-%d failed with %s; will retry", transactional_id,
                                tp[0], tp[1], ErrorCode(code).name)
        if pending:
            return False
        self._linger(state.complete(md, self.clock()))
        self._pending_markers.pop(transactional_id, None)
        return True

    async def _try_complete(self, transactional_id: str) -> bool:
        """Complete a PrepareX transaction now, or schedule retries. Caller holds the id's lock.

        On failure the transaction stays in PrepareX (the decision is durable); requests meanwhile
        get CONCURRENT_TRANSACTIONS.
        """
        if await self._write_markers_and_complete(transactional_id):
            return True
        if not self._closed:
            self._spawn(self._complete_later(transactional_id, MARKER_RETRY_S[0]))
        return False

    async def _complete_later(self, transactional_id: str, delay: float) -> None:
        attempt = 0
        while not self._closed:
            await asyncio.sleep(delay)
            async with self._lock(transactional_id):
                md = self.txns.get(transactional_id)
                if md is None or md.state not in state.PREPARE_STATES:
                    return
                if await self._write_markers_and_complete(transactional_id):
                    return
            attempt += 1
            delay = MARKER_RETRY_S[min(attempt, len(MARKER_RETRY_S) - 1)]

    # -- timeouts and expiration --------------------------------------------------------------

    async def abort_timed_out_transactions(self) -> list[str]:
        """Abort (with an epoch bump that fences the producer) every Ongoing transaction past its timeout."""
        aborted = []
        for tid in [t for t, md in self.txns.items() if state.timed_out(md, self.clock())]:
            async with self._lock(tid):
                md = self.txns.get(tid)
                now = self.clock()
                if md is None or not state.timed_out(md, now):
                    continue
                log.info("aborting transaction %r of producer %d epoch %d: timed out after %d ms",
                         tid, md.producer_id, md.producer_epoch, md.timeout_ms)
                fenced = state.fence_for_abort(md, now, self.transaction_version())
                try:
                    await self._persist(fenced)
                except KafkaError as e:
                    log.warning("cannot abort timed-out transaction %r: %s", tid, e)
                    continue
                self._pending_markers[tid] = set(fenced.partitions)
                await self._try_complete(tid)
                aborted.append(tid)
        return aborted

    async def expire_transactional_ids(self) -> list[str]:
        """Tombstone idle transactional ids older than transactional.id.expiration.ms."""
        expired = []
        for tid in [t for t, md in self.txns.items() if state.expired(md, self.clock(), self.expiration_ms)]:
            async with self._lock(tid):
                md = self.txns.get(tid)
                if md is None or not state.expired(md, self.clock(), self.expiration_ms):
                    continue
                try:
                    await self._persist(None, tid)
                except KafkaError:
                    continue
                self._locks.pop(tid, None)
                expired.append(tid)
        return expired

    async def _timeout_loop(self) -> None:
        await _periodically(lambda: self.abort_interval_ms, self.abort_timed_out_transactions,
                            "aborting timed-out transactions")

    async def _expiration_loop(self) -> None:
        await _periodically(lambda: self.expire_interval_ms, self.expire_transactional_ids,
                            "expiring transactional ids")

    # -- Describe / List ----------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionMetadata:
        self._check_coordinator(transactional_id)
        md = self.txns.get(transactional_id)
        if md is None:
            raise TransactionalIdNotFoundError()
        return md

    def list_transactions(self, states: set[TxnState] | None, producer_ids: set[int] | None,
                          duration_ms: int = -1, pattern: str | None = None) -> list[TransactionMetadata]:
        if not self.loaded:
            raise CoordinatorLoadInProgressError()
        regex = re.compile(pattern) if pattern else None
        now = self.clock()
        out = []
        for md in self.txns.values():
            if states and md.state not in states:
                continue
            if producer_ids and md.producer_id not in producer_ids:
                continue
            # Duration filter (KIP-994), as Kafka: only transactions started more than that long ago.
            if duration_ms >= 0 and now - md.txn_start_ms <= duration_ms:
                continue
            if regex is not None and not regex.fullmatch(md.transactional_id):
                continue
            out.append(md)
        return out
