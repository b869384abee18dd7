"""The group-rebalance / transactions benchmark's harness: ownership tracking, stability, verification.

Timing never decides a test: the real runs (against the reference Apache Kafka, one broker for the
module) are scaled down and only the bookkeeping is checked — who owns which partition, record
and control-marker counts, errors surfacing as errors.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import groups_txn as gt
import peers
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from strom.core.testing import java_problem, wait_for

# -- pure helpers ----------------------------------------------------------------------------------


def test_eager_callbacks_replace_the_whole_assignment() -> None:
    w = gt.GroupWatch(3, 6)
    w.record(0, "assign", [0, 1, 2, 3, 4, 5], incremental=False, now=1.0)
    assert not w.complete()  # members 1 and 2 own nothing
    w.record(0, "revoke", [0, 1, 2, 3, 4, 5], incremental=False, now=2.0)
    w.record(0, "assign", [0, 1], incremental=False, now=3.0)
    w.record(1, "assign", [2, 3], incremental=False, now=3.1)
    w.record(2, "assign", [4, 5], incremental=False, now=3.2)
    assert w.complete() and w.last_event() == 3.2
    # An eager assign is the member's full set: it replaces, not adds.
    w.record(0, "assign", [0], incremental=False, now=4.0)
    assert w.owned[0] == {0} and not w.complete()  # partition 1 is now unowned


def test_incremental_callbacks_add_and_remove() -> None:
    w = gt.GroupWatch(3, 6)
    w.record(0, "assign", [0, 1, 2, 3, 4, 5], incremental=True, now=1.0)
    w.record(1, "assign", [2, 3], incremental=True, now=1.5)
    assert not w.complete()  # 2 and 3 owned twice, member 2 empty
    w.record(0, "revoke", [2, 3, 4, 5], incremental=True, now=2.0)
    w.record(2, "assign", [4, 5], incremental=True, now=2.5)
    assert w.owned == [{0, 1}, {2, 3}, {4, 5}] and w.complete()
    w.record(1, "lost", [2, 3], incremental=True, now=3.0)
    assert w.owned[1] == set() and not w.complete()


def test_stable_needs_a_complete_group_and_the_quiet_period() -> None:
    w = gt.GroupWatch(2, 2)
    assert gt.stable_since(w, 10.0, 1.0) is None  # no event yet
    w.record(0, "assign", [0], incremental=True, now=1.0)
    assert gt.stable_since(w, 5.0, 1.0) is None  # quiet, but member 1 owns nothing
    w.record(1, "assign", [1], incremental=True, now=2.0)
    assert gt.stable_since(w, 2.5, 1.0) is None  # complete, but not quiet long enough
    assert gt.stable_since(w, 3.0, 1.0) == 2.0  # the figure is the last callback, not "now"
    w.stop()
    w.record(1, "revoke", [1], incremental=True, now=4.0)  # close() after the measurement
    assert gt.stable_since(w, 9.0, 1.0) == 2.0 and len(w.events) == 2


def test_expected_high_watermark_counts_one_marker_per_partition_per_transaction() -> None:
    assert gt.expected_high_watermark(2500, 3, 1000, transactional=False) == 2500
    # Three transactions (1000, 1000, 500 records), each touching all 3 partitions.
    assert gt.expected_high_watermark(2500, 3, 1000, transactional=True) == 2509
    # A transaction of 2 records round-robin touches only 2 of 3 partitions.
    assert gt.expected_high_watermark(1002, 3, 1000, transactional=True) == 1002 + 3 + 2


def test_summaries_take_median_and_keep_failures() -> None:
    trials = [gt.TrialResult("kafka", 0, "p", n, stable_s=s, callbacks=3) for n, s in ((1, 0.3), (2, 0.1), (3, 0.2))]
    trials.append(gt.TrialResult("kafka", 0, "p", 4, error="TimeoutError: x"))
    (s,) = gt.summarize_rebalance(trials)
    assert (s["ok"], s["trials"], s["median_s"], s["min_s"], s["max_s"]) == (3, 4, 0.2, 0.1, 0.3)
    assert s["errors"] == ["TimeoutError: x"]
    txns = [gt.TxnResult("strom", "idempotent", 1, 1000, seconds=0.01),
            gt.TxnResult("strom", "transactional", 1, 1000, seconds=0.02),
            gt.TxnResult("strom", "idempotent", 2, 1000, seconds=0.01),
            gt.TxnResult("strom", "transactional", 2, 1000, error="RuntimeError: y")]
    (t,) = gt.summarize_txn(txns)
    assert t["ratio"] == 0.5 and t["round_ratios"] == [0.5]  # round 2 has no transactional figure
    assert t["transactional_errors"] == ["RuntimeError: y"]
    assert "MISSED" in gt.render_txn([t], 1000, 3)


def test_timeline_medians_and_their_column() -> None:
    timeline = gt.TxnSplit(marks=[(0.0, 0.001, 0.005), (1.0, 1.003, 1.0045), (2.0, 2.002, 2.004)])
    assert timeline.medians_ms() == (2.0, 2.0)
    txns = [gt.TxnResult("strom", "idempotent", 1, 1000, seconds=0.01),
            gt.TxnResult("strom", "transactional", 1, 1000, transactions=1, seconds=0.02,
                         loop_ms=1.73, commit_ms=1.87)]
    (t,) = gt.summarize_txn(txns)
    table = gt.render_txn([t], 1000, 3)
    assert "txn loop / commit ms" in table and "1.73 / 1.87" in table


def test_arguments_are_checked() -> None:
    for bad in (["--brokers", "tansu"], ["--bench", "nope"], ["--protocols", "x"], ["--rebalance-delay", "a"],
                ["--repeat", "0"]):
        with pytest.raises(SystemExit):
            gt.parse_args(bad)
    args = gt.parse_args(["--rebalance-delay", "0, 3000", "--bench", "txn"])
    assert args.delays == [0, 3000] and args.bench == ["txn"] and args.brokers == ["strom", "kafka", "null"]


def test_unstartable_broker_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers, "KAFKA_REF_DIR", Path("/nonexistent/kafka_ref"))
    monkeypatch.delitem(sys.modules, "kafka_ref", raising=False)
    args = gt.parse_args(["--brokers", "kafka", "--repeat", "2"])
    trials, txns = gt.run_broker("kafka", 0, args, with_txn=True, with_rebalance=True)
    assert len(trials) == 2 * len(gt.PROTOCOLS) and len(txns) == 4
    assert all(t.error and "did not start" in t.error for t in trials)
    assert all(x.error and "did not start" in x.error for x in txns)


# -- against the reference Apache Kafka ------------------------------------------------------------

@pytest.fixture(scope="module")
def kafka() -> Iterator[peers.Broker]:
    problem = java_problem()
    if problem is not None:
        pytest.skip(problem)
    broker = gt.make_configured_broker("kafka", {"group.initial.rebalance.delay.ms": "0"})
    broker.start()
    yield broker
    broker.stop()


def test_rebalance_trials_reach_an_exclusive_full_assignment(kafka: peers.Broker) -> None:
    # Eager and cooperative-sticky are quick to stabilise; a 1 s quiet period keeps the test short.
    protocols = ["classic-eager-range", "classic-cooperative-sticky"]
    trials = gt.run_rebalance(kafka, 0, 1, 1.0, True, protocols)
    assert [t.protocol for t in trials] == protocols
    for t in trials:
        assert t.error is None, t.error
        assert t.sizes == [2, 2, 2]  # range and cooperative-sticky both balance 6 over 3
        assert t.stable_s is not None and t.first_assign_s is not None and t.stable_s >= t.first_assign_s
        assert t.callbacks >= 3  # every member was assigned at least once
        # The timeline in the JSON ends at the reported figure and replays to the final sizes.
        assert len(t.events) == t.callbacks and t.events[-1][0] == pytest.approx(t.stable_s, abs=1e-3)
        assert {m for _, m, kind, _ in t.events if kind == "assign"} == {0, 1, 2}


def test_group_that_cannot_cover_every_member_times_out(kafka: peers.Broker) -> None:
    # Two partitions for three members: one member always stays empty, so never "stable".
    topic = f"two-{uuid.uuid4().hex[:8]}"
    gt.create_topic(kafka.bootstrap, topic, 2)
    with pytest.raises(TimeoutError, match="not stable"):
        gt.rebalance_trial(kafka.bootstrap, topic, "classic-cooperative-sticky", 0.5, timeout=6.0)


def test_txn_rounds_verify_records_and_markers(kafka: peers.Broker) -> None:
    results = gt.run_txn(kafka, 2500, 3, 1, 0)
    by_mode = {r.mode: r for r in results}
    assert set(by_mode) == {"idempotent", "transactional"}
    for r in results:
        assert r.error is None and r.notes == [] and r.seconds > 0
    assert by_mode["transactional"].transactions == 3 and by_mode["idempotent"].transactions == 0
    txn = by_mode["transactional"]
    # Each transaction's wall time splits into the produce() loop and the commit.
    assert txn.loop_ms is not None and txn.commit_ms is not None
    assert txn.loop_ms > 0 and txn.commit_ms > 0
    assert by_mode["idempotent"].loop_ms is None
    (summary,) = gt.summarize_txn(results)
    assert summary["ratio"] is not None and summary["ratio"] > 0


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"hw-{uuid.uuid4().hex[:8]}"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))
    finally:
        c.close()


def test_verification_catches_aborted_and_missing_records(kafka: peers.Broker,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gt, "VERIFY_STALL", 2.0)
    topic = f"verify-{uuid.uuid4().hex[:8]}"
    gt.create_topic(kafka.bootstrap, topic, 3)
    gt.produce_transactional(kafka.bootstrap, topic, 1000, 3, "test")
    # One aborted transaction of 300 records on top: its records and ABORT markers take offsets
    # but a read_committed consumer must not count them.
    p = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"abort-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(300):
        p.produce(topic, b"x" * 100, partition=i % 3)
    assert p.flush(30) == 0  # written to the log first: abort_transaction() purges unsent records
    p.abort_transaction(30)
    # Kafka writes the ABORT markers after answering EndTxn: wait until they are in.
    wait_for(lambda: high_watermarks(kafka.bootstrap, topic, 3) == 1306, timeout=30, what="the ABORT markers")
    # Counted as 1300 records in transactions: the watermarks (1000 + 300 + 3 COMMIT + 3 ABORT
    # markers) match, the read_committed count does not.
    notes = gt.verify_topic(kafka.bootstrap, topic, 1300, 3, transactional=True)
    assert notes == ["read_committed consumer got 1000 records, expected 1300"], notes
    # The same topic checked as a non-transactional one: the markers make the watermark too high.
    notes = gt.verify_topic(kafka.bootstrap, topic, 1000, 3, transactional=False)
    assert notes == ["high watermarks sum to 1306, expected 1000"], notes


def test_main_writes_json_and_fails_on_broken_broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers, "KAFKA_REF_DIR", Path("/nonexistent/kafka_ref"))
    monkeypatch.delitem(sys.modules, "kafka_ref", raising=False)
    out = tmp_path / "out.json"
    code = gt.main(["--brokers", "kafka", "--repeat", "1", "--rebalance-delay", "0,3000", "--json", str(out)])
    doc = json.loads(out.read_text())
    assert code == 1
    assert doc["settings"]["rebalance_delays_ms"] == [0, 3000] and doc["settings"]["txn_size"] == 1000
    # One broker start per delay for the groups; the producers only on the first start.
    assert {t["delay_ms"] for t in doc["rebalance"]["trials"]} == {0, 3000}
    assert len(doc["txn"]["rounds"]) == 2
