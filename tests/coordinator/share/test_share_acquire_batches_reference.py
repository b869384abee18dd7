"""How much one ShareFetch acquires in batch-optimized mode: strom against Apache Kafka 4.3.1.

Kafka acquires whole batches: what a fetch may acquire is the lesser of its max_records and the
room left under ``group.share.partition.max.record.locks`` (2000), rounded up to the end of the
batch holding the last of those records, so one fetch can take more than either limit. Once
the window is full nothing more is acquired until acknowledgements move the start offset.

Five batches (1500, 1500, 1500, 3000 and 3000 records) are produced to one partition, then one
member fetches with the same raw requests on both brokers: 500 records (the first batch, 1500),
500 more (the window's room is 500: the whole second batch), 500 more (the window is full:
nothing), an ACCEPT of 0-2999 with up to 5000 records (room 2000, rounded up to the fourth
batch's end: 3000-7499), an ACCEPT of 100 records with the window still full, and a
record-limit fetch. Every acquisition must be the same.

The window is the group's ``share.partition.max.record.locks`` (a GROUP config set through
IncrementalAlterConfigs): a second scenario sets it to 100 (Kafka's minimum) over batches of 40
records and checks the same rounding and the same stop at the smaller window.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from diff_wire import WireClient
from kafka_ref import KafkaRef
from ref_fixtures import kafka_ref  # noqa: F401 (the fixture)
from share_fetch_kit import ACCEPT, ShareMember, acquired, join_share_group, member_id, set_group_configs

from strom.core.testing import BrokerProcess

BATCHES = (1500, 1500, 1500, 3000, 3000)
RECORD_LIMIT = 1


def _member(bootstrap: str, batches: tuple[int, ...], configs: dict[str, str]) -> ShareMember:
    """A joined member of a new group on a new one-partition topic holding ``batches``."""
    topic, group = f"acq-{uuid.uuid4().hex[:6]}", f"acq-{uuid.uuid4().hex[:6]}"
    with WireClient(bootstrap) as w:
        w.create_topic(topic, 1)
        w.wait_for_leaders(topic, 1)
        topic_id = w.metadata([topic]).topics[0].topic_id
    # One batch per flush: linger and batch size far beyond what a flush holds.
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000, "batch.num.messages": 100000,
                  "batch.size": 10_000_000})
    for n in batches:
        for _ in range(n):
            p.produce(topic, b"v" * 10, partition=0)
        assert p.flush(30) == 0
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest", **configs})
    member = member_id()
    join_share_group(bootstrap, group, member, [topic])
    return ShareMember(bootstrap, group, topic_id, member_id=member)


def scenario(bootstrap: str) -> list[tuple[str, Any]]:
    m = _member(bootstrap, BATCHES, {})
    try:
        return [
            ("500: the first batch", acquired(m.fetch(max_records=500))),
            ("500 more: the second batch whole", acquired(m.fetch(max_records=500))),
            ("window full", acquired(m.fetch(max_records=500, max_wait_ms=100))),
            ("ack 0-2999, up to 5000", acquired(m.fetch({0: [(0, 2999, ACCEPT)]}, max_records=5000))),
            ("ack 100, window still full", acquired(m.fetch({0: [(3000, 3099, ACCEPT)]}, max_records=100,
                                                            max_wait_ms=100))),
            ("record limit, window full", acquired(m.fetch(max_records=100, max_wait_ms=100, mode=RECORD_LIMIT))),
        ]
    finally:
        m.close()


def small_window_scenario(bootstrap: str) -> list[tuple[str, Any]]:
    m = _member(bootstrap, (40,) * 10, {"share.partition.max.record.locks": "100"})
    try:
        return [
            ("500 at window 100: three batches", acquired(m.fetch(max_records=500))),
            ("window full", acquired(m.fetch(max_records=500, max_wait_ms=100))),
            ("ack 0-119: three more", acquired(m.fetch({0: [(0, 119, ACCEPT)]}, max_records=500))),
        ]
    finally:
        m.close()


def test_max_record_locks_group_config_as_kafka(kafka_ref: KafkaRef, tmp_path: Path) -> None:  # noqa: F811
    expected = small_window_scenario(kafka_ref.bootstrap)
    with BrokerProcess(tmp_path / "strom") as strom:
        got = small_window_scenario(strom.bootstrap)
    assert got == expected
    assert dict(expected)["500 at window 100: three batches"] == {0: [(0, 119, 1)]}


def test_batch_optimized_acquisition_as_kafka(kafka_ref: KafkaRef, tmp_path: Path) -> None:  # noqa: F811
    expected = scenario(kafka_ref.bootstrap)
    with BrokerProcess(tmp_path / "strom") as strom:
        got = scenario(strom.bootstrap)
    assert got == expected
    # What Kafka 4.3.1 answered (a change of the reference shows here, not as a strom bug).
    assert dict(expected)["500 more: the second batch whole"] == {0: [(1500, 2999, 1)]}
    assert dict(expected)["ack 0-2999, up to 5000"] == {0: [(3000, 7499, 1)]}
