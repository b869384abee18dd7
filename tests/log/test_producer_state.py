"""Idempotence and transactions in the log: sequence rules, duplicates, LSO, .txnindex, markers."""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from strom.core.config import LogConfig
from strom.core.errors import InvalidRecordError
from strom.core.log.log import Log, LogAppendInfo
from strom.core.log.producer_state import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
    ProducerStateManager,
    TransactionCoordinatorFencedError,
)
from strom.core.records.builder import SimpleRecord, build_batch, build_control_batch, decode_records
from strom.core.records.validate import validate_produce_batches

INT32_MAX = 2**31 - 1


def now() -> int:
    return int(time.time() * 1000)


def _last_seq(ps: ProducerStateManager, pid: int) -> int:
    entry = ps.last_entry(pid)
    assert entry is not None, f"no state for producer {pid}"
    return entry.last_seq


def produce(log: Log, pid: int, epoch: int, seq: int, n: int = 2, *, transactional: bool = False,
            origin: str = "client") -> LogAppendInfo:
    """One producer batch of ``n`` records through the real validation + append path."""
    ts = now()
    buf = bytearray(build_batch([SimpleRecord(b"k%d" % i, b"p%d-s%d" % (pid, seq + i), (), ts) for i in range(n)],
                                producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                transactional=transactional))
    batches = validate_produce_batches(buf, max_batch_bytes=10**8, now_ms=ts)
    info = log.append_as_leader(buf, batches, 0, origin=origin)
    log.update_high_watermark(log.log_end_offset)
    return info


def marker(log: Log, pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0) -> LogAppendInfo:
    info = log.append_control_marker(pid, epoch, commit, coordinator_epoch, 0)
    log.update_high_watermark(log.log_end_offset)
    return info


def txnindex_entries(path: Path) -> list[tuple[int, int, int, int, int]]:
    """Parse a .txnindex file independently of the implementation: Kafka's 34-byte entries."""
    data = path.read_bytes()
    assert len(data) % 34 == 0
    return list(struct.iter_unpack(">hqqqq", data))


@pytest.fixture
def log(log_dir: Path, cfg: Callable[..., LogConfig]) -> Any:
    lg = Log(log_dir, cfg())
    yield lg
    lg.close()


# -- idempotence ------------------------------------------------------------------------------

def test_duplicates_of_each_of_the_last_five_batches_return_the_original_offsets(log: Log) -> None:
    infos = [produce(log, 7, 0, seq) for seq in range(0, 14, 2)]  # 7 batches, 2 records each
    assert [i.first_offset for i in infos] == list(range(0, 14, 2))
    leo, size = log.log_end_offset, log.size_in_bytes
    for seq, original in zip(range(4, 14, 2), infos[2:], strict=True):
        dup = produce(log, 7, 0, seq)
        assert dup.duplicate
        assert (dup.first_offset, dup.last_offset) == (original.first_offset, original.last_offset)
    assert log.log_end_offset == leo and log.size_in_bytes == size
    # The second batch fell out of the 5-batch window: a retry of it is out of order, not a duplicate.
    with pytest.raises(OutOfOrderSequenceNumberError):
        produce(log, 7, 0, 2)
    assert log.log_end_offset == leo
    assert not produce(log, 7, 0, 14).duplicate


def test_out_of_order_sequence_is_rejected_before_anything_is_written(log: Log) -> None:
    produce(log, 1, 0, 0, n=3)
    leo = log.log_end_offset
    for bad in (4, 2, 1, 0 + 1000):
        with pytest.raises(OutOfOrderSequenceNumberError):
            produce(log, 1, 0, bad)
    assert log.log_end_offset == leo
    # A partially overlapping batch (same first sequence, other last sequence) is no duplicate.
    with pytest.raises(OutOfOrderSequenceNumberError):
        produce(log, 1, 0, 0, n=2)
    assert produce(log, 1, 0, 3).first_offset == leo
    assert _last_seq(log.producer_state, 1) == 4


def test_epoch_bump_must_restart_at_sequence_zero_and_stale_epochs_are_fenced(log: Log) -> None:
    produce(log, 5, 1, 0)
    produce(log, 5, 1, 2)
    with pytest.raises(OutOfOrderSequenceNumberError):
        produce(log, 5, 2, 4)  # new epoch must start at 0
    bumped = produce(log, 5, 2, 0)
    assert not bumped.duplicate
    with pytest.raises(InvalidProducerEpochError):
        produce(log, 5, 1, 4)
    # A retry of an old-epoch batch is not a duplicate either: the old epoch is fenced.
    with pytest.raises(InvalidProducerEpochError):
        produce(log, 5, 1, 2)
    entry = log.producer_state.last_entry(5)
    assert entry is not None and entry.producer_epoch == 2 and entry.last_seq == 1


def test_unknown_producer_with_non_zero_sequence_is_accepted_like_kafka_4(log: Log) -> None:
    # Kafka 2.5+ (KIP-360): the producer's state may have been removed by retention; any
    # sequence is accepted from a producer the partition does not know.
    info = produce(log, 9, 3, 17)
    assert info.first_offset == 0 and not info.duplicate
    with pytest.raises(OutOfOrderSequenceNumberError):
        produce(log, 9, 3, 17 + 5)


def test_sequence_wraps_at_int32_max(log: Log) -> None:
    produce(log, 4, 0, 0)
    ps = log.producer_state
    produce(log, 4, 1, 0)
    # Walk the sequence to the wrap point through real appends: a new producer may start anywhere.
    produce(log, 8, 0, INT32_MAX - 1, n=2)  # sequences INT32_MAX-1, INT32_MAX
    assert _last_seq(ps, 8) == INT32_MAX
    wrapped = produce(log, 8, 0, 0, n=2)
    assert not wrapped.duplicate
    with pytest.raises(OutOfOrderSequenceNumberError):
        produce(log, 8, 0, INT32_MAX)
    # A batch spanning the wrap: last sequence = (first + count - 1) mod 2**31.
    produce(log, 11, 0, INT32_MAX, n=3)
    assert _last_seq(ps, 11) == 1
    assert produce(log, 11, 0, INT32_MAX, n=3).duplicate


def test_non_producer_batches_are_untouched_by_producer_checks(log: Log, appender: Any) -> None:
    appender(log, [SimpleRecord(b"a", b"1")])
    appender(log, [SimpleRecord(b"a", b"1")])
    assert log.log_end_offset == 2 and not log.producer_state.producers


def test_follower_appends_update_producer_state(log_dir: Path, cfg: Callable[..., LogConfig], tmp_path: Path) -> None:
    leader = Log(log_dir, cfg())
    produce(leader, 3, 0, 0)
    produce(leader, 3, 0, 2, transactional=True)
    data = leader.read(0, 10**8).records
    follower = Log(tmp_path / "f" / "topic-0", cfg())
    follower.append_as_follower(data)
    entry = follower.producer_state.last_entry(3)
    assert entry is not None and entry.last_seq == 3 and entry.current_txn_first_offset == 2
    follower.update_high_watermark(follower.log_end_offset)
    assert follower.last_stable_offset == 2
    leader.close()
    follower.close()


# -- transactions -----------------------------------------------------------------------------

def test_lso_stays_at_the_first_open_transaction_until_its_marker(log: Log) -> None:
    produce(log, 1, 0, 0)                        # 0-1 idempotent, not transactional
    produce(log, 2, 0, 0, transactional=True)   # 2-3 txn of producer 2 starts at 2
    produce(log, 1, 0, 2)                        # 4-5
    assert log.high_watermark == 6
    assert log.first_unstable_offset == 2 and log.last_stable_offset == 2
    produce(log, 3, 0, 0, transactional=True)   # 6-7 txn of producer 3 starts at 6
    produce(log, 2, 0, 2, transactional=True)   # 8-9 still producer 2's first txn
    assert log.last_stable_offset == 2
    commit = marker(log, 2, 0, commit=True)     # 10
    assert commit.first_offset == 10 and not commit.duplicate
    assert log.last_stable_offset == 6          # producer 3's txn is still open
    abort = marker(log, 3, 0, commit=False)     # 11
    assert log.first_unstable_offset is None and log.last_stable_offset == log.high_watermark == 12
    assert abort.first_offset == 11
    # A new transaction of producer 2 after its commit starts a new first offset.
    produce(log, 2, 0, 4, transactional=True)   # 12-13
    assert log.last_stable_offset == 12
    # The LSO never exceeds the high watermark.
    log.truncate_to(log.log_end_offset)  # no-op
    assert log.last_stable_offset <= log.high_watermark


def test_abort_marker_writes_txnindex_entry_and_aborted_ranges(log: Log, log_dir: Path) -> None:
    produce(log, 1, 0, 0, transactional=True)   # 0-1 txn A
    produce(log, 2, 0, 0, transactional=True)   # 2-3 txn B
    marker(log, 1, 0, commit=False)             # 4: abort A; B still open -> entry LSO 2
    produce(log, 2, 0, 2, transactional=True)   # 5-6
    marker(log, 2, 0, commit=False)             # 7: abort B -> LSO 8
    produce(log, 1, 0, 2, transactional=True)   # 8-9 txn A again
    marker(log, 1, 0, commit=True)              # 10: commit: no entry
    entries = txnindex_entries(log_dir / "00000000000000000000.txnindex")
    assert entries == [(0, 1, 0, 4, 2), (0, 2, 2, 7, 8)]
    assert log.collect_aborted_transactions(0, 11) == [(1, 0), (2, 2)]
    assert log.collect_aborted_transactions(5, 11) == [(2, 2)]  # A ended at 4
    assert log.collect_aborted_transactions(0, 2) == [(1, 0)]   # B starts at 2
    assert log.collect_aborted_transactions(8, 11) == []
    # Through Kafka's read path: the aborted producers' records are exactly those in the ranges.
    recs = list(decode_records(log.read(0, 10**8).records))
    assert [r.offset for r in recs if r.header.is_control] == [4, 7, 10]


def test_aborted_transactions_are_found_in_later_segments(log: Log) -> None:
    produce(log, 1, 0, 0, transactional=True)   # 0-1 in segment 0
    log.roll()
    produce(log, 1, 0, 2, transactional=True)   # 2-3 in segment 2
    marker(log, 1, 0, commit=False)             # 4 -> entry in segment 2's .txnindex
    log.roll()
    produce(log, 2, 0, 0)                        # 5-6
    assert [s.base_offset for s in log.log_segments()] == [0, 2, 5]
    assert (log.dir / "00000000000000000002.txnindex").stat().st_size == 34
    assert log.collect_aborted_transactions(0, 2) == [(1, 0)]
    assert log.collect_aborted_transactions(5, 7) == []


def test_transaction_state_errors(log: Log) -> None:
    produce(log, 1, 0, 0, transactional=True)              # 0-1
    with pytest.raises(InvalidTxnStateError):
        produce(log, 1, 0, 2)  # a non-transactional write while the transaction is open
    marker(log, 1, 0, commit=True, coordinator_epoch=5)    # 2
    produce(log, 1, 0, 2, transactional=True)              # 3-4
    with pytest.raises(TransactionCoordinatorFencedError):
        marker(log, 1, 0, commit=True, coordinator_epoch=4)
    # The coordinator aborts with a bumped epoch (as on a timeout); the old epoch is fenced.
    marker(log, 1, 1, commit=False, coordinator_epoch=5)   # 5
    entry = log.producer_state.last_entry(1)
    assert entry is not None and entry.producer_epoch == 1 and entry.current_txn_first_offset is None
    with pytest.raises(InvalidProducerEpochError):
        log.append_control_marker(1, 0, True, 5, 0)
    with pytest.raises(InvalidProducerEpochError):
        produce(log, 1, 0, 4, transactional=True)
    assert log.log_end_offset == 6
    assert log.collect_aborted_transactions(0, 6) == [(1, 3)]
    # A control batch may not come from a client: validation rejects it.
    buf = bytearray(build_control_batch(True, 1, 1, 5))
    with pytest.raises(InvalidRecordError):
        validate_produce_batches(buf, max_batch_bytes=10**8, now_ms=now())


def test_marker_without_data_completes_nothing(log: Log, log_dir: Path) -> None:
    info = marker(log, 42, 0, commit=False)
    assert info.first_offset == 0 and log.last_stable_offset == 1
    assert txnindex_entries(log_dir / "00000000000000000000.txnindex") == []


def test_expired_producers_are_removed(log_dir: Path, cfg: Callable[..., LogConfig]) -> None:
    clock = [now()]
    lg = Log(log_dir, cfg(), clock=lambda: clock[0], producer_id_expiration_ms=1000)
    produce(lg, 1, 0, 0)
    produce(lg, 2, 0, 0, transactional=True)
    clock[0] += 5000
    assert lg.remove_expired_producers() == 1  # producer 2 has an open transaction
    assert set(lg.producer_state.producers) == {2}
    lg.close()
