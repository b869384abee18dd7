"""TransactionCoordinator inside a real in-process broker: two-phase commit, markers, restart
recovery, timeouts, fencing, expiration and corrupt ``__transaction_state`` records.

The broker is the real one (controller, logs, replica manager, coordinator runtime); requests go
straight to the coordinator's methods so each step can be checked against the partition logs.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from strom.core.controller.quorum_controller import CreatableTopic
from strom.core.coordinator.runtime import TRANSACTION_STATE_TOPIC
from strom.core.coordinator.txn import records, state
from strom.core.coordinator.txn.state import TxnState
from strom.core.errors import KafkaError
from strom.core.records.builder import SimpleRecord, build_batch
from strom.core.server.broker import Broker
from strom.core.tools.run import dev_config
from strom.core.tools.storage import format_dirs, new_cluster_id

TOPIC = "data"
OVERRIDES = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3",
             "num.partitions": "2"}


def _config(data_dir: Path) -> Any:
    return dev_config(data_dir, 0, OVERRIDES)


def run(data_dir: Path, body: Callable[[Broker], Awaitable[Any]], *, fresh: bool = True,
        transaction_version: int | None = None) -> Any:
    """Start a broker on ``data_dir``, run ``body(broker)``, stop the broker cleanly.

    ``transaction_version``: format the cluster at that ``transaction.version`` (default: 2).
    """
    async def main() -> Any:
        config = _config(data_dir)
        if fresh:
            features = [] if transaction_version is None else [f"transaction.version={transaction_version}"]
            format_dirs(config, new_cluster_id(), ignore_formatted=True, features=features)
        broker = Broker(config)
        await broker.start()
        try:
            return await body(broker)
        finally:
            await broker.stop()
    return asyncio.run(main())


async def create_topic(broker: Broker, name: str = TOPIC, partitions: int = 2) -> None:
    [result] = await broker.metadata.controller.create_topics([CreatableTopic(name=name, num_partitions=partitions)])
    assert result.error_code == 0, result
    for _ in range(500):
        if all((name, p) in broker.replica_manager.partitions for p in range(partitions)):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("topic partitions never appeared")


def produce_txn(broker: Broker, pid: int, epoch: int, seq: int, values: list[bytes], partition: int = 0) -> None:
    batch = build_batch([SimpleRecord(None, v) for v in values], producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, transactional=True)
    broker.replica_manager.append_records(TOPIC, partition, batch, -1)


def markers(broker: Broker, topic: str = TOPIC, partition: int = 0) -> list[tuple[int, bool]]:
    """(producer id, commit?) of every control batch of a partition, in log order."""
    out = []
    for rec in broker.coordinator_runtime.read(topic, partition):
        if rec.header.is_control:
            assert rec.key is not None
            out.append((rec.header.producer_id, rec.key[3] == 1))  # ControlRecordType key: version, type
    return out


async def settled(coord: Any, transactional_id: str) -> None:
    """Wait until the markers of the id's last EndTxn are written (they follow the answer)."""
    async with coord._lock(transactional_id):
        pass


async def reaches(coord: Any, transactional_id: str, wanted: TxnState) -> None:
    """Wait (up to 4 s) until the id is in ``wanted``, as after the completion a restart starts."""
    for _ in range(200):
        if coord.describe(transactional_id).state == wanted:
            return
        await asyncio.sleep(0.02)
    assert coord.describe(transactional_id).state == wanted


def stable(broker: Broker, partition: int = 0) -> bool:
    part = broker.replica_manager.get_partition(TOPIC, partition)
    return bool(part.last_stable_offset == part.high_watermark)


def test_commit_two_phase_and_state_survives_restart(tmp_path: Path) -> None:
    async def first(broker: Broker) -> tuple[int, int]:
        coord = broker.txn_coordinator
        await create_topic(broker)
        pid, epoch = await coord.init_producer_id("tx", 60000)
        assert epoch == 0
        await coord.add_partitions("tx", pid, epoch, [(TOPIC, 0), (TOPIC, 1)])
        assert coord.describe("tx").state == TxnState.ONGOING
        produce_txn(broker, pid, epoch, 0, [b"a", b"b"])
        produce_txn(broker, pid, epoch, 0, [b"c"], partition=1)
        assert not stable(broker, 0) and not stable(broker, 1)
        await coord.end_transaction("tx", pid, epoch, True)
        await settled(coord, "tx")
        md = coord.describe("tx")
        assert md.state == TxnState.COMPLETE_COMMIT and md.partitions == frozenset()
        assert markers(broker, TOPIC, 0) == [(pid, True)] and markers(broker, TOPIC, 1) == [(pid, True)]
        assert stable(broker, 0) and stable(broker, 1)
        # A retried EndTxn(commit) is answered OK without writing again.
        await coord.end_transaction("tx", pid, epoch, True)
        assert markers(broker, TOPIC, 0) == [(pid, True)]
        return pid, epoch

    pid, epoch = run(tmp_path, first)

    async def second(broker: Broker) -> None:
        coord = broker.txn_coordinator
        md = coord.describe("tx")
        assert (md.producer_id, md.producer_epoch, md.state) == (pid, epoch, TxnState.COMPLETE_COMMIT)
        assert await coord.init_producer_id("tx", 60000) == (pid, epoch + 1)

    run(tmp_path, second, fresh=False)


def test_end_txn_answers_at_the_decision_and_the_next_request_waits_for_the_markers(tmp_path: Path) -> None:
    """EndTxn returns once PrepareCommit is durable (Kafka's order); the markers follow. The
    producer's next AddPartitionsToTxn then waits for them and succeeds: it must not meet the
    half-finished transaction (CONCURRENT_TRANSACTIONS makes librdkafka back off)."""
    async def body(broker: Broker) -> None:
        coord = broker.txn_coordinator
        await create_topic(broker)
        pid, epoch = await coord.init_producer_id("tx", 60000)
        await coord.add_partitions("tx", pid, epoch, [(TOPIC, 0), (TOPIC, 1)])
        produce_txn(broker, pid, epoch, 0, [b"a"])
        produce_txn(broker, pid, epoch, 0, [b"b"], partition=1)
        await coord.end_transaction("tx", pid, epoch, True)
        assert coord.describe("tx").state == TxnState.PREPARE_COMMIT  # answered at the decision
        await coord.add_partitions("tx", pid, epoch, [(TOPIC, 0)])  # the next transaction
        assert markers(broker, TOPIC, 0) == [(pid, True)] and markers(broker, TOPIC, 1) == [(pid, True)]
        md = coord.describe("tx")
        assert md.state == TxnState.ONGOING and md.partitions == frozenset({(TOPIC, 0)})
        assert stable(broker, 1)

    run(tmp_path, body)


def test_marker_task_cancelled_before_it_ran_still_frees_the_id(tmp_path: Path) -> None:
    """The id's lock goes with the marker task; a task cancelled before its first step (a broker
    closing right after an EndTxn) must not keep it, or the id would be stuck for good."""
    async def body(broker: Broker) -> None:
        coord = broker.txn_coordinator
        await create_topic(broker)
        pid, epoch = await coord.init_producer_id("tx", 60000)
        await coord.add_partitions("tx", pid, epoch, [(TOPIC, 0)])
        await coord.end_transaction("tx", pid, epoch, False)
        tasks = list(coord._tasks)
        for task in tasks:
            task.cancel()  # the marker task has not run a step yet: nothing awaited since the spawn
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.sleep(0)  # done-callbacks run on the next turn
        assert not coord._lock("tx").locked()
        assert coord.describe("tx").state == TxnState.PREPARE_ABORT  # decided, not yet completed

    run(tmp_path, body)


def test_prepare_commit_found_at_load_is_completed(tmp_path: Path) -> None:
    """A broker that died between PrepareCommit and the markers finishes the commit on restart."""
    async def crash_after_prepare(broker: Broker) -> int:
        coord = broker.txn_coordinator
        await create_topic(broker)
        pid, epoch = await coord.init_producer_id("tx", 60000)
        await coord.add_partitions("tx", pid, epoch, [(TOPIC, 0)])
        produce_txn(broker, pid, epoch, 0, [b"x"])
        # Persist only the decision, as EndTxn does before writing any marker.
        prepared = state.end_transaction(coord.describe("tx"), pid, epoch, True, coord.clock()).metadata
        assert prepared is not None
        await coord._persist(prepared)
        assert markers(broker) == [] and not stable(broker)
        return pid

    pid = run(tmp_path, crash_after_prepare)

    async def restart(broker: Broker) -> None:
        coord = broker.txn_coordinator
        await reaches(coord, "tx", TxnState.COMPLETE_COMMIT)
        assert markers(broker) == [(pid, True)]
        assert stable(broker)

    run(tmp_path, restart, fresh=False)


@pytest.mark.parametrize("tv", [1, 2])
def test_init_producer_id_aborts_an_ongoing_transaction_and_fences(tmp_path: Path, tv: int) -> None:
    async def body(broker: Broker) -> None:
        coord = broker.txn_coordinator
        await create_topic(broker)
        pid, epoch = await coord.init_producer_id("tx", 60000)
        await coord.add_partitions("tx", pid, epoch, [(TOPIC, 0)])
        produce_txn(broker, pid, epoch, 0, [b"zombie"])
        with pytest.raises(KafkaError) as e:   # a new producer instance with the same id
            await coord.init_producer_id("tx", 60000)
        assert e.value.code == ErrorCode.concurrent_transactions
        assert markers(broker) == [(pid, False)] and stable(broker)
        assert coord.describe("tx").state == TxnState.COMPLETE_ABORT
        new_pid, new_epoch = await coord.init_producer_id("tx", 60000)   # its retry
        assert (new_pid, new_epoch) == (pid, epoch + 2)
        # The zombie is fenced everywhere.
        for op in (coord.end_transaction("tx", pid, epoch, True),
                   coord.add_partitions("tx", pid, epoch, [(TOPIC, 1)])):
            with pytest.raises(KafkaError) as e:
                await op
            assert e.value.code == ErrorCode.producer_fenced
        part = broker.replica_manager.get_partition(TOPIC, 0)
        aborted = part.log.collect_aborted_transactions(0, part.high_watermark)
        assert [a[0] for a in aborted] == [pid]

    run(tmp_path, body, transaction_version=tv)


@pytest.mark.parametrize("tv", [1, 2])
def test_timed_out_transaction_is_aborted_with_an_epoch_bump(tmp_path: Path, tv: int) -> None:
    async def body(broker: Broker) -> None:
        coord = broker.txn_coordinator
        await create_topic(broker)
        pid, epoch = await coord.init_producer_id("tx", 1000)
        await coord.add_partitions("tx", pid, epoch, [(TOPIC, 0)])
        produce_txn(broker, pid, epoch, 0, [b"late"])
        assert await coord.abort_timed_out_transactions() == []   # not yet
        real = coord.clock
        coord.clock = lambda: real() + 5000
        assert await coord.abort_timed_out_transactions() == ["tx"]
        md = coord.describe("tx")
        assert (md.state, md.producer_epoch) == (TxnState.COMPLETE_ABORT, epoch + 1)
        assert markers(broker) == [(pid, False)] and stable(broker)
        with pytest.raises(KafkaError) as e:   # transaction version 1: the producer is fenced
            await coord.end_transaction("tx", pid, epoch, False)
        assert e.value.code == ErrorCode.producer_fenced
        # Version 2 (EndTxn v5): the old epoch reads as a retry. Its commit is refused; its
        # abort succeeds and hands out the bumped epoch, so the producer goes on.
        with pytest.raises(KafkaError) as e:
            await coord.end_transaction("tx", pid, epoch, True, 2)
        assert e.value.code == ErrorCode.invalid_txn_state
        assert await coord.end_transaction("tx", pid, epoch, False, 2) == (pid, epoch + 1)

    run(tmp_path, body, transaction_version=tv)


def test_invalid_requests(tmp_path: Path) -> None:
    async def body(broker: Broker) -> None:
        coord = broker.txn_coordinator
        with pytest.raises(KafkaError) as e:
            await coord.init_producer_id("tx", 900001)
        assert e.value.code == ErrorCode.invalid_transaction_timeout
        with pytest.raises(KafkaError) as e:
            await coord.init_producer_id("", 1000)
        assert e.value.code == ErrorCode.invalid_request
        for op in (coord.end_transaction("nope", 1, 0, True), coord.add_partitions("nope", 1, 0, [(TOPIC, 0)])):
            with pytest.raises(KafkaError) as e:
                await op
            assert e.value.code == ErrorCode.invalid_producer_id_mapping
        # Ids are the client's to choose: one it never initialized leaves no lock behind (the
        # protocol fuzzer's AddPartitionsToTxn/EndTxn for random ids grew this map for good).
        assert "nope" not in coord._locks
        with pytest.raises(KafkaError) as e:
            coord.describe("nope")
        assert e.value.code == ErrorCode.transactional_id_not_found
        pid, epoch = await coord.init_producer_id("tx", 1000)
        with pytest.raises(KafkaError) as e:
            await coord.end_transaction("tx", pid, epoch, True)
        assert e.value.code == ErrorCode.invalid_txn_state

    run(tmp_path, body)


def test_expired_transactional_id_is_tombstoned(tmp_path: Path) -> None:
    async def first(broker: Broker) -> None:
        coord = broker.txn_coordinator
        await coord.init_producer_id("old", 1000)
        await coord.init_producer_id("young", 1000)
        real = coord.clock
        # "young" was used recently (as seen from the shifted clock below).
        coord.txns["young"] = replace(coord.txns["young"], last_update_ms=real() + coord.expiration_ms)
        coord.clock = lambda: real() + coord.expiration_ms + 1
        assert await coord.expire_transactional_ids() == ["old"]
        assert "old" not in coord.txns

    run(tmp_path, first)

    async def second(broker: Broker) -> None:
        coord = broker.txn_coordinator
        assert "old" not in coord.txns and "young" in coord.txns

    run(tmp_path, second, fresh=False)


def test_unreadable_records_are_skipped_at_load(tmp_path: Path) -> None:
    async def first(broker: Broker) -> None:
        coord = broker.txn_coordinator
        await coord.init_producer_id("good", 1000)
        p = coord.partition_of("good")
        await broker.coordinator_runtime.append(TRANSACTION_STATE_TOPIC, p, [
            (b"\x00\x09garbage", b"\x00\x01"),                   # unknown key version
            (records.encode_key("bad"), b"\x00\x01\x00"),        # truncated value
            (records.encode_key("worse"), b"\x00\x05" + bytes(20)),  # unknown value version
        ])

    run(tmp_path, first)

    async def second(broker: Broker) -> None:
        coord = broker.txn_coordinator
        assert coord.loaded
        assert set(coord.txns) == {"good"}
        _, epoch = await coord.init_producer_id("good", 1000)
        assert epoch == 1

    run(tmp_path, second, fresh=False)


def test_load_keeps_the_last_record_of_each_id(tmp_path: Path) -> None:
    async def first(broker: Broker) -> dict[str, tuple[int, int]]:
        coord = broker.txn_coordinator
        ids = {f"t-{uuid.uuid4().hex[:6]}": 0 for _ in range(20)}
        out = {}
        for tid in ids:
            for _ in range(3):
                out[tid] = await coord.init_producer_id(tid, 1000)
        return out

    expected = run(tmp_path, first)

    async def second(broker: Broker) -> None:
        coord = broker.txn_coordinator
        got = {tid: (md.producer_id, md.producer_epoch) for tid, md in coord.txns.items()}
        assert got == expected
        listed = coord.list_transactions({TxnState.EMPTY}, None)
        assert {md.transactional_id for md in listed} == set(expected)
        assert coord.list_transactions({TxnState.ONGOING}, None) == []

    run(tmp_path, second, fresh=False)


def test_records_in_the_log_are_kafka_transaction_log_records(tmp_path: Path) -> None:
    async def body(broker: Broker) -> None:
        coord = broker.txn_coordinator
        await create_topic(broker)
        pid, epoch = await coord.init_producer_id("tx", 1000)
        await coord.add_partitions("tx", pid, epoch, [(TOPIC, 1)])
        await coord.end_transaction("tx", pid, epoch, False)
        await settled(coord, "tx")
        await written(coord)
        assert state_log(broker, "tx") == [("Empty", []), ("Ongoing", [(TOPIC, [1])]),
                                           ("PrepareAbort", [(TOPIC, [1])]), ("CompleteAbort", [])]

    run(tmp_path, body)


def state_log(broker: Broker, transactional_id: str) -> list[tuple[str, list[tuple[str, list[int]]]]]:
    """(state, partitions) of every ``__transaction_state`` record of the id, in log order."""
    seen = []
    coord = broker.txn_coordinator
    for rec in broker.coordinator_runtime.read(TRANSACTION_STATE_TOPIC, coord.partition_of(transactional_id)):
        assert rec.key is not None and rec.value is not None
        if records.decode_key(rec.key) != transactional_id:
            continue
        v = records.decode_value(rec.value)
        seen.append((TxnState(v.transaction_status).display,
                     [(p.topic, p.partition_ids) for p in v.transaction_partitions or []]))
    return seen


async def written(coord: Any) -> None:
    """Wait until no CompleteX record lingers (the coordinator's timer writes them)."""
    for _ in range(500):
        if coord.lingering == 0:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("CompleteX records were never written")


def test_complete_lingers_into_the_next_transactions_batch(tmp_path: Path) -> None:
    """CompleteCommit is not written on its own when the id's next record follows within the
    linger: both go into one batch, in order. Alone, the timer writes it."""
    async def body(broker: Broker) -> None:
        coord = broker.txn_coordinator
        await create_topic(broker)
        pid, epoch = await coord.init_producer_id("tx", 60000)
        await coord.add_partitions("tx", pid, epoch, [(TOPIC, 0)], client_version=2)
        epoch = (await coord.end_transaction("tx", pid, epoch, True, client_version=2))[1]
        await settled(coord, "tx")
        assert coord.describe("tx").state == TxnState.COMPLETE_COMMIT and coord.lingering == 1
        assert state_log(broker, "tx")[-1] == ("PrepareCommit", [(TOPIC, [0])])
        log = broker.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, coord.partition_of("tx")).log
        batches_before = len(list(log.active_segment.iter_headers()))
        await coord.add_partitions("tx", pid, epoch, [(TOPIC, 1)], client_version=2)
        assert coord.lingering == 0
        assert state_log(broker, "tx")[-2:] == [("CompleteCommit", []), ("Ongoing", [(TOPIC, [1])])]
        assert len(list(log.active_segment.iter_headers())) == batches_before + 1  # one batch for both
        await coord.end_transaction("tx", pid, epoch, False, client_version=2)
        await settled(coord, "tx")
        await written(coord)
        assert state_log(broker, "tx")[-2:] == [("PrepareAbort", [(TOPIC, [1])]), ("CompleteAbort", [])]

    run(tmp_path, body)


def test_a_complete_lost_before_it_was_written_is_completed_again_at_load(tmp_path: Path) -> None:
    """A broker that stops before a lingering CompleteCommit reaches the log (kill -9) finds
    PrepareCommit at load: it writes the markers again and then CompleteCommit, and the
    producer goes on."""
    async def first(broker: Broker) -> tuple[int, int]:
        coord = broker.txn_coordinator
        await create_topic(broker)
        pid, epoch = await coord.init_producer_id("tx", 60000)
        await coord.add_partitions("tx", pid, epoch, [(TOPIC, 0)])
        produce_txn(broker, pid, epoch, 0, [b"a"])
        await coord.end_transaction("tx", pid, epoch, True)
        await settled(coord, "tx")
        assert coord.lingering == 1 and markers(broker) == [(pid, True)]
        coord._lingering.clear()  # what a kill -9 inside the linger loses
        return pid, epoch

    pid, epoch = run(tmp_path, first)

    async def second(broker: Broker) -> None:
        coord = broker.txn_coordinator
        await reaches(coord, "tx", TxnState.COMPLETE_COMMIT)
        await settled(coord, "tx")
        await written(coord)
        assert markers(broker) == [(pid, True), (pid, True)]  # the second one completes nothing
        assert stable(broker, 0)
        assert state_log(broker, "tx")[-2:] == [("PrepareCommit", [(TOPIC, [0])]), ("CompleteCommit", [])]
        await coord.add_partitions("tx", pid, epoch, [(TOPIC, 0)])
        assert coord.describe("tx").state == TxnState.ONGOING

    run(tmp_path, second, fresh=False)
