"""The Java-client transactions benchmark (bench/txn_java.py), scaled down, against strom.

Timing never decides a test. What is checked is what the figure rests on: the JVM reports the
settings the client actually resolved (so the report cannot claim defaults it did not run), the
client used transactions v2 against strom (the epoch moved once per commit), and every phase was
verified (high watermarks and a read_committed count).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import txn_java

from strom.core.testing import java_problem


def test_settings_and_overrides_compose() -> None:
    assert txn_java.producer_config("client-defaults", []) == {"acks": "all", "enable.idempotence": True}
    lib = txn_java.producer_config("librdkafka", ["linger.ms=0"])
    assert lib["batch.size"] == 1_048_576 and lib["linger.ms"] == "0"
    with pytest.raises(SystemExit, match="not KEY=VALUE"):
        txn_java.producer_config("client-defaults", ["batch.size"])
    with pytest.raises(SystemExit):
        txn_java.parse_args(["--settings", "nonsense"])


def run_on_strom(tmp_path: Path, *args: str) -> dict[str, Any]:
    """One scaled-down round on strom (skipped without a JDK); the JSON report, after checking the
    run exited 0."""
    problem = java_problem()
    if problem is not None:
        pytest.skip(problem)
    out = tmp_path / "out.json"
    code = txn_java.main(["--brokers", "strom", "--repeat", "1", "--warmup-rounds", "0", *args,
                          "--json", str(out)])
    doc: dict[str, Any] = json.loads(out.read_text())
    assert code == 0, doc["rounds"]
    return doc


@pytest.mark.broker  # strom or the null broker, as a process
@pytest.mark.reference  # the Java client
@pytest.mark.parametrize(("settings", "batch_size"), [("client-defaults", "16384"), ("librdkafka", "1048576")])
def test_small_run_on_strom_reports_resolved_settings_and_tv2(tmp_path: Path, settings: str,
                                                               batch_size: str) -> None:
    doc = run_on_strom(tmp_path, "--records", "3000", "--warmup", "0", "--settings", settings)
    rounds = {r["mode"]: r for r in doc["rounds"]}
    assert set(rounds) == {"idempotent", "transactional"}
    for r in rounds.values():
        assert r["error"] is None and r["notes"] == [], r
        # ProducerConfig resolves acks=all to -1.
        assert r["effective"]["batch.size"] == batch_size and r["effective"]["acks"] == "-1"
        assert r["effective"]["linger.ms"] == "5"  # both settings: librdkafka's and kafka-clients 4.x default
    txn = rounds["transactional"]
    assert txn["transactions"] == 3 and txn["transaction_version"] == 2
    assert txn["epoch_after"] == txn["epoch_before"] + 3
    # The producer's own counters: at least one Produce per transaction plus EndTxn each.
    assert txn["client_metrics"]["requests"] >= 2 * 3 and txn["client_metrics"]["buffer_wait_s"] >= 0
    assert rounds["idempotent"]["client_metrics"]["batch_size_avg"] > 0
    assert doc["settings"]["settings_name"] == settings
    assert doc["summary"][0]["ratio"] is not None


@pytest.mark.broker  # strom or the null broker, as a process
@pytest.mark.reference  # the Java client
@pytest.mark.parametrize("transaction_version", [1, 2])
def test_null_broker_is_the_raw_limit_at_the_asked_transaction_version(tmp_path: Path,
                                                                       transaction_version: int) -> None:
    """The Java client against bench/null_broker.py: it advertises strom's features at the asked
    transaction.version, so the client uses KIP-890 at 2 (an epoch bump per EndTxn) and not at 1;
    its topics are not verified (it keeps nothing), and the phases still report."""
    problem = java_problem()
    if problem is not None:
        pytest.skip(problem)
    out = tmp_path / "out.json"
    code = txn_java.main(["--brokers", "null", "--repeat", "1", "--warmup-rounds", "0", "--records", "3000",
                          "--warmup", "0", "--transaction-version", str(transaction_version), "--json", str(out)])
    doc: dict[str, Any] = json.loads(out.read_text())
    assert code == 0, doc["rounds"]
    rounds = {r["mode"]: r for r in doc["rounds"]}
    assert all(r["broker"] == "null" and r["error"] is None and r["notes"] == [] for r in rounds.values())
    txn = rounds["transactional"]
    assert txn["transactions"] == 3 and txn["transaction_version"] == transaction_version
    assert txn["epoch_after"] == txn["epoch_before"] + (3 if transaction_version == 2 else 0)
    assert doc["summary"][0]["broker"] == "null" and doc["summary"][0]["ratio"] is not None


@pytest.mark.broker  # strom or the null broker, as a process
@pytest.mark.reference  # the Java client
def test_interleaved_run_alternates_slices_and_verifies_both_modes(tmp_path: Path) -> None:
    """--schedule interleaved: one JVM per round, both modes in slices, each mode's topic verified
    and its clocks summed over its own slices."""
    doc = run_on_strom(tmp_path, "--records", "4000", "--warmup", "0", "--schedule", "interleaved", "--slice", "2000")
    assert doc["settings"]["schedule"] == "interleaved" and doc["settings"]["slice"] == 2000
    rounds = {r["mode"]: r for r in doc["rounds"]}
    for r in rounds.values():
        assert r["error"] is None and r["notes"] == [], r
        assert r["records"] == 4000 and r["seconds"] > 0 and r["java_wall_s"] > 0 and r["client_cpu_s"] > 0
    txn = rounds["transactional"]
    assert txn["transactions"] == 4 and txn["transaction_version"] == 2
    assert txn["epoch_after"] == txn["epoch_before"] + 4
    assert txn["client_metrics"]["requests"] >= 2 * 4
    for r in rounds.values():  # the JVM's CPU by thread kind, summed over the mode's own slices
        assert set(r["client_threads"]) == {"main", "sender", "gc+vm", "jit", "other"}
        assert all(v >= 0 for v in r["client_threads"].values()), r["client_threads"]
        assert r["jvm_warmup"] == {}  # --warmup 0


@pytest.mark.slow  # 32 s on the 2-CPU machine: the JVM warms up until its JIT is quiet
@pytest.mark.broker  # strom or the null broker, as a process
@pytest.mark.reference  # the Java client
def test_warmup_runs_until_the_jit_is_quiet(tmp_path: Path) -> None:
    """With --warmup N the JVM repeats chunks of N records (both modes, interleaved) until the
    JIT's threads used under 5% of a window of at least 1 s, and says how it ended."""
    doc = run_on_strom(tmp_path, "--records", "2000", "--warmup", "2000", "--schedule", "interleaved",
                       "--slice", "2000")
    for r in doc["rounds"]:
        w = r["jvm_warmup"]
        assert w["chunks"] >= 1 and w["records"] == 2 * 2000 * w["chunks"], w
        assert w["transactions"] == 2 * w["chunks"], w  # 2,000 transactional records a chunk
        # It stopped because the JIT went quiet over a window of 1 s or more, or at the 90 s cap.
        assert (w["jit_share"] < 0.05 and w["seconds"] >= 1) or w["seconds"] >= 90, w


def test_thread_cpu_is_taken_per_thread() -> None:
    """A thread that ended between two readings takes nothing away from the others' delta."""
    before = {1: ("main", 1.0), 2: ("sender", 2.0), 3: ("sender", 5.0), 4: ("jit", 0.5)}
    after = {1: ("main", 1.5), 2: ("sender", 2.25), 4: ("jit", 0.5), 9: ("other", 0.1)}
    delta = txn_java.jvm_thread_delta(after, before)
    assert delta == {"main": 0.5, "sender": 0.25, "gc+vm": 0.0, "jit": 0.0, "other": pytest.approx(0.1)}
    own = txn_java.jvm_thread_cpu(os.getpid())  # this (Python) process: every thread is "other"
    assert own and {kind for kind, _ in own.values()} == {"other"}


def test_interleaved_slice_must_hold_whole_transactions() -> None:
    with pytest.raises(SystemExit):
        txn_java.parse_args(["--schedule", "interleaved", "--slice", "1500"])
    assert txn_java.parse_args(["--schedule", "sequential", "--slice", "1500"]).slice == 1500


def test_disturbed_phases_are_named() -> None:
    """A phase where other work took over a tenth of the machine is reported; a quiet one is not."""
    quiet = txn_java.JavaTxnResult("strom", "idempotent", 1, 1000, seconds=2.0, java_wall_s=2.0,
                                   other_cpu_s=0.1, steal_s=0.0)
    busy = txn_java.JavaTxnResult("strom", "transactional", 1, 1000, seconds=5.0, java_wall_s=5.0,
                                  other_cpu_s=0.8, steal_s=0.3)
    warm = txn_java.JavaTxnResult("strom", "transactional", 0, 1000, seconds=5.0, java_wall_s=5.0,
                                  other_cpu_s=4.0, warmup=True)
    failed = txn_java.JavaTxnResult("strom", "transactional", 2, 1000, other_cpu_s=4.0, error="boom")
    lines = txn_java.disturbed([quiet, busy, warm, failed], cores=2)
    assert len(lines) == 1 and lines[0].startswith("strom transactional round 1: other work 0.80 CPU s, steal 0.30 s")
    assert txn_java.disturbed([busy], cores=8) == []  # 1.1 CPU s is under a tenth of 40


def test_only_the_client_race_is_retried() -> None:
    race = RuntimeError("TxnBench failed in commitTransaction (transaction 38): "
                        "org.apache.kafka.common.errors.InvalidTxnStateException: The producer attempted ...")
    assert txn_java.client_race(race)
    assert not txn_java.client_race(RuntimeError("TxnBench failed in send: org.apache.kafka.common.errors."
                                                 "InvalidTxnStateException"))
    assert not txn_java.client_race(RuntimeError("TxnBench failed in commitTransaction (transaction 3): "
                                                 "org.apache.kafka.common.errors.ProducerFencedException"))
