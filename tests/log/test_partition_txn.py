"""Partition (core/replica) over a real Log: duplicates, markers, LSO and read_committed reads."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from strom.core.config import LogConfig
from strom.core.errors import NotLeaderOrFollowerError
from strom.core.log.log import Log
from strom.core.log.producer_state import InvalidProducerEpochError
from strom.core.records.builder import SimpleRecord, build_batch, decode_records
from strom.core.replica.partition import Partition


def batch(pid: int, seq: int, n: int = 2, transactional: bool = False) -> bytes:
    ts = int(time.time() * 1000)
    return build_batch([SimpleRecord(b"k", b"v%d" % (seq + i), (), ts) for i in range(n)], producer_id=pid,
                       producer_epoch=0, base_sequence=seq, transactional=transactional)


@pytest.fixture
def partition(log_dir: Path, cfg: Callable[..., LogConfig]) -> Iterator[Partition]:
    p = Partition("topic", 0, uuid.uuid4(), Log(log_dir, cfg()), local_id=1)
    p.apply_registration((1,), (1,), leader=1, leader_epoch=3, partition_epoch=0)
    yield p
    p.log.close()


def test_duplicate_produce_answers_the_original_offsets(partition: Partition) -> None:
    first = partition.append_records_as_leader(batch(1, 0), -1)
    again = partition.append_records_as_leader(batch(1, 0), -1)
    assert (first.first_offset, first.duplicate) == (0, False)
    assert (again.first_offset, again.last_offset, again.duplicate) == (0, 1, True)
    assert partition.log.log_end_offset == 2 and partition.high_watermark == 2


def test_markers_lso_and_read_committed(partition: Partition) -> None:
    partition.append_records_as_leader(batch(1, 0, transactional=True), -1)   # 0-1
    partition.append_records_as_leader(batch(2, 0), -1)                       # 2-3
    assert partition.high_watermark == 4 and partition.last_stable_offset == 0
    committed = partition.read_records(0, 10**6, isolation_level=1)
    assert committed.records == b"" and committed.last_stable_offset == 0
    res = partition.append_marker(1, 0, False, coordinator_epoch=0)            # 4
    assert res.first_offset == 4 and partition.high_watermark == 5 and partition.last_stable_offset == 5
    read = partition.read_records(0, 10**6, isolation_level=1)
    assert read.aborted_transactions == [(1, 0)]
    assert [r.offset for r in decode_records(read.records)] == [0, 1, 2, 3, 4]
    assert partition.read_records(0, 10**6).aborted_transactions is None     # read_uncommitted
    assert partition.aborted_transactions(2, 5) == [(1, 0)]   # the transaction spans 0..4
    assert partition.aborted_transactions(5, 6) == []
    # The partition leader epoch of the marker is the partition's.
    assert list(decode_records(read.records))[-1].header.partition_leader_epoch == 3
    partition.append_marker(1, 1, False, coordinator_epoch=0)                  # epoch bumped to 1
    with pytest.raises(InvalidProducerEpochError):
        partition.append_marker(1, 0, True, coordinator_epoch=0)


def test_marker_needs_leadership(partition: Partition) -> None:
    partition.apply_registration((1, 2), (1, 2), leader=2, leader_epoch=4, partition_epoch=1)
    with pytest.raises(NotLeaderOrFollowerError):
        partition.append_marker(1, 0, True, 0)
