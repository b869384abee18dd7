"""The broker throughput benchmark's harness: CPU accounting, ratios, and a tiny real run on Tansu.

Timing never decides a test here: the runs are scaled down to a few thousand records and only the
bookkeeping (record counts, positions, errors, the JSON document) is checked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import broker_throughput as bt
import peers
import pytest


def test_tree_cpu_counts_grandchildren() -> None:
    # bash -> python busy loop: the CPU is burnt by a live grandchild of the measured pid, which
    # only shows up if the descendants are summed (bash itself stays idle in `wait`).
    busy = f"{sys.executable} -c 'while True: pass'"
    proc = subprocess.Popen(["bash", "-c", f"{busy} & wait"], start_new_session=True)
    try:
        before = peers.tree_cpu_seconds(proc.pid)
        deadline = time.monotonic() + 30  # generous: the machine may be busy
        used = 0.0
        while time.monotonic() < deadline and used < 0.3:
            time.sleep(0.1)
            used = peers.tree_cpu_seconds(proc.pid) - before
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert used >= 0.3


def test_tree_cpu_of_missing_process_raises() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    with pytest.raises(ProcessLookupError):
        peers.tree_cpu_seconds(proc.pid)


def test_median_round_per_phase_and_failures_win() -> None:
    def res(broker: str, secs: float, error: str | None = None) -> bt.PhaseResult:
        return bt.PhaseResult(broker, "small", "produce", 1000, 100, 3, seconds=secs, error=error)

    rounds = [[res("strom", 1.0), res("kafka", 2.0)], [res("strom", 3.0), res("kafka", 2.0, error="x")],
              [res("strom", 2.0), res("kafka", 1.0)]]
    got = {r.broker: r for r in bt.median_results(rounds)}
    assert got["strom"].seconds == 2.0  # 1000/s, 333/s, 500/s -> median 500/s
    assert got["kafka"].error == "x"


def test_ratios_against_base_skip_failures() -> None:
    def res(broker: str, secs: float, cpu: float, error: str | None = None) -> bt.PhaseResult:
        return bt.PhaseResult(broker, "small", "produce", 1000, 100, 3, seconds=secs, broker_cpu_s=cpu,
                              error=error)

    results = [res("strom", 2.0, 4.0), res("kafka", 1.0, 1.0), res("tansu", 4.0, 8.0, error="boom")]
    rat = bt.ratios(results, "strom")
    assert rat == [{"pair": "strom/kafka", "workload": "small", "phase": "produce",
                    "throughput": 0.5, "broker_cpu": 4.0}]
    table = bt.render(results, rat, 3)
    assert "3 partitions" in table and "FAILED" in table and "tansu small produce: boom" in table


def test_parse_args_rejects_unknown_broker() -> None:
    with pytest.raises(SystemExit):
        bt.parse_args(["--brokers", "strom,redpanda"])


@pytest.fixture(scope="module")
def tansu() -> Iterator[peers.TansuBroker]:
    try:
        peers.tansu_binary()
    except (peers.PeerMissing, FileNotFoundError) as exc:
        pytest.skip(str(exc))
    broker = peers.TansuBroker().start()
    yield broker
    broker.stop()


def test_main_runs_both_workloads_on_tansu(tmp_path: Path) -> None:
    try:
        peers.tansu_binary()
    except (peers.PeerMissing, FileNotFoundError) as exc:
        pytest.skip(str(exc))
    out = tmp_path / "out.json"
    code = bt.main(["--brokers", "tansu", "--records", "3001", "--warmup", "0", "--json", str(out)])
    doc = json.loads(out.read_text())
    assert code == 0
    assert doc["partitions"] == 3 and doc["producer_config"]["acks"] == 1
    phases = {(r["workload"], r["phase"]): r for r in doc["results"]}
    assert set(phases) == {("small", "produce"), ("small", "consume"), ("large", "produce"), ("large", "consume")}
    for r in doc["results"]:
        assert r["error"] is None and r["records"] == 3001 and r["seconds"] > 0
        # Positions per partition are checked by the consumer; any mismatch would be a note.
        assert not [n for n in r["notes"] if "positions" in n or "received" in n]
    assert phases[("large", "produce")]["value_bytes"] == 10 * 1024
    # Producing 30 MB through the broker costs it measurable CPU.
    assert phases[("large", "produce")]["broker_cpu_s"] > 0


def test_consume_of_missing_records_times_out(tansu: peers.TansuBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bt, "STALL_TIMEOUT", 1.5)
    topic = f"short-{uuid.uuid4().hex[:8]}"
    bt.create_topic(tansu.bootstrap, topic, 3)
    bt.produce(tansu.bootstrap, topic, 300, 100, 3, "test produce")
    with pytest.raises(TimeoutError, match="300/400"):
        bt.consume(tansu.bootstrap, topic, 400, 100, 3, "test consume")


def test_unstartable_broker_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    # A broker that cannot start yields FAILED rows for every phase and a non-zero exit code.
    monkeypatch.setattr(peers, "KAFKA_REF_DIR", Path("/nonexistent/kafka_ref"))
    monkeypatch.delitem(sys.modules, "kafka_ref", raising=False)
    results = bt.run_broker("kafka", [("small", 10, 100)], 3, 0)
    assert [r.phase for r in results] == ["produce", "consume"]
    assert all(r.error and "did not start" in r.error for r in results)
