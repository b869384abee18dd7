"""Transactional vs idempotent produce with the official Java client, strom beside Apache Kafka.

Issue 3's workload ("transactional produce, 1,000 records of 100 bytes per transaction, as a
ratio to idempotent produce in the same run, target >= 0.8x") measured with kafka-clients (the
jar of the reference broker, ``.cache/kafka-ref/lib``) instead of librdkafka: the Java client 4.x
speaks KIP-890 "transaction version 2" when the broker finalizes ``transaction.version`` >= 2 (no
AddPartitionsToTxn round trip per transaction; EndTxn bumps the epoch), which librdkafka cannot.

For every broker of ``--brokers`` (started fresh, once) and ``--repeat`` rounds, each round runs
``idempotent`` then ``transactional``; ``--warmup-rounds`` (default 1) unmeasured but verified
rounds of the same size come first, so the broker's own JIT (Kafka) is warm too. A phase is one JVM (``bench/java_txn/TxnBench.java``):

1. an untimed warm-up of the same mode on a separate topic, in chunks of ``--warmup`` records
   repeated until the JIT is quiet (its compiler threads' CPU under 5% of a window of at least
   1 s of chunks; at most 90 s), so the send path is compiled and the compiler does not take the
   broker's CPU during the timed phase (a single 50,000-record warm-up left the C2 thread
   compiling the producer's I/O thread through the whole phase: 1-2.6 CPU s of a 2-3 s phase);
2. a fresh producer (``--settings``, below; the transactional one with a fresh ``transactional.id``)
   loads metadata and runs ``initTransactions()``, then says it is ready, with the batching
   settings it resolved (defaults included), which the report prints;
3. the driver starts its CPU clocks and releases it; ``--records`` x 100 B go round-robin over a
   new topic's ``--partitions`` partitions; idempotent: send all, ``flush()``; transactional:
   ``beginTransaction()``, ``--txn-size`` sends, ``commitTransaction()``, repeated. msgs/s is
   the client's own timing of that loop;
4. verification as groups_txn.py: high watermarks (records + one COMMIT marker per partition per
   transaction) and a ``read_committed`` count. Any failure makes the exit code 1.

Every row also splits the JVM's CPU by thread (``/proc/<pid>/task``): the thread running the
loop, the producers' I/O threads, GC and VM threads, and the JIT compilers.

The transaction version the client used (``TransactionManager.isTransactionV2Enabled()``, read
by reflection) and the producer epoch before/after the timed phase (TV2 bumps it once per
commit) are shown per broker.

``--settings`` picks the producer settings of both phases:

- ``client-defaults`` (the default): ``acks=all`` and ``enable.idempotence=true`` stated, everything
  else the Java client's own defaults (kafka-clients 4.x: ``linger.ms=5``, ``batch.size=16384``,
  no compression). This is the producer a Kafka user runs, and issue 3's figure.
- ``librdkafka``: groups_txn.py's ``PRODUCER_BASE`` (``linger.ms=5``, ``batch.size=1048576``, no
  compression), librdkafka's own batching, to compare with ``groups_txn.py --bench txn``. With
  1 MB batches nothing leaves the client until ``commitTransaction()`` flushes, so each
  transaction's send loop, flush and commit run one after the other: the client's share of a
  transaction alone holds the ratio near 0.75 for any broker (docs/benchmarks.md).

``--producer-prop KEY=VALUE`` overrides one property on top of either.

``--schedule interleaved`` runs both modes of a round in one JVM instead (two producers, both
warmed up), alternating in slices of ``--slice`` records (pairs of slices alternate their order),
with the driver's clocks read around every slice and summed per mode: a drift in the machine's
speed then meets both modes alike. A slice of 100,000 records never fills the producer's 32 MB
``buffer.memory``; run sequentially, the idempotent producer does fill it. With the 512 MB heap
used until session 11, each young collection then copied the records waiting in the buffer,
stop-the-world, and the sequential idempotent producer ran at half its rate; with the 2 GB young
generation of ``JVM_OPTS`` both schedules give the same figure (docs/benchmarks.md, "session 11").

``--transaction-version 1|2`` formats both brokers with that ``transaction.version`` instead of
their defaults.

Run: ``python bench/txn_java.py [--brokers strom,kafka] [--repeat 3] [--records 1000000]
[--txn-size 1000] [--partitions 3] [--warmup 50000] [--warmup-rounds 1]
[--settings client-defaults|librdkafka] [--producer-prop KEY=VALUE] [--transaction-version 1|2]
[--schedule sequential|interleaved] [--slice 100000] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from broker_throughput import PhaseClock, Progress, _table, create_topic, machine_info
from groups_txn import PRODUCER_BASE, TXN_SIZE, VALUE_BYTES, TxnResult, summarize_txn, verify_topic
from peers import (
    Broker,
    KafkaBroker,
    NullBroker,
    StromBroker,
    load_kafka_ref,
    make_broker,
    read_stat_cpu,
    tree_cpu_seconds,
)

_kafka_ref = load_kafka_ref()
REPO_ROOT: Path = _kafka_ref.REPO_ROOT
KafkaRefError: type[Exception] = _kafka_ref.KafkaRefError
ensure_jars = _kafka_ref.ensure_jars
java_problem = _kafka_ref.java_problem

BROKERS = ("strom", "kafka", "null")  # null: bench/null_broker.py, the raw limit (the client alone)
MODES = ("idempotent", "transactional")
SOURCE = Path(__file__).resolve().parent / "java_txn" / "TxnBench.java"
BUILD_DIR = REPO_ROOT / ".cache" / "bench-java-txn"
# Full JIT (no C1 cap, unlike the test client), serial GC: one GC thread on a 2-core machine.
# A 2 GB young generation: with the 512 MB heap of sessions 6-10 an idempotent producer whose
# 32 MB buffer filled (the sequential schedule) spent about a CPU second per million records in
# young collections that copied the waiting records, stop-the-world, and ran at half its rate; the
# collector, not the broker, set that baseline (docs/benchmarks.md, session 11).
JVM_OPTS = ["-Xms3g", "-Xmx3g", "-Xmn2g", "-XX:+UseSerialGC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            # INFO for the transaction manager: its "Transiting to fatal error state due to ..." line
            "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.producer.internals.TransactionManager=info"]
# Producer settings of both phases (--settings); the Java client's defaults fill in the rest.
SETTINGS: dict[str, dict[str, Any]] = {
    "client-defaults": {"acks": "all", "enable.idempotence": True},
    "librdkafka": dict(PRODUCER_BASE),
}
READY_TIMEOUT = 240.0  # JVM start + warm-up (at most 90 s) + initTransactions
STALL_TIMEOUT = 60.0  # no output line from the timed phase for this long: the phase fails


@dataclass
class JavaTxnResult(TxnResult):
    """A groups_txn ``TxnResult`` (so its ``summarize_txn`` applies) plus what the JVM reported."""

    transaction_version: int | None = None  # 1 or 2 for transactional phases, else None
    epoch_before: int | None = None
    epoch_after: int | None = None
    java_wall_s: float = 0.0  # the driver's view of the timed phase (includes the go/result pipe)
    client: str = ""  # kafka-clients version
    effective: dict[str, str] = field(default_factory=dict)  # batching settings the client resolved
    warmup: bool = False  # an unmeasured round (--warmup-rounds): verified, not summarized
    retried: str | None = None  # the client race that failed the first attempt (see client_race)
    # The producer's counters (TxnBench.clientMetrics): buffer_wait_s (send() blocked on buffer
    # memory), requests (all it sent), batch_size_avg (bytes)
    client_metrics: dict[str, float | None] = field(default_factory=dict)
    # The JVM's CPU seconds by thread kind (jvm_thread_cpu): main, sender, gc+vm, jit, other
    client_threads: dict[str, float] = field(default_factory=dict)
    # The JVM's warm-up before the timed work (TxnBench.warmUp): records, transactions, chunks,
    # seconds, jit_share (the JIT threads' CPU over the last window's wall time)
    jvm_warmup: dict[str, float] = field(default_factory=dict)


def new_broker(name: str, transaction_version: int | None) -> Broker:
    """A not-yet-started broker; with ``transaction_version``, formatted at that level."""
    features = None if transaction_version is None else {"transaction.version": transaction_version}
    if name == "null":
        return NullBroker(features=features)
    if features is None:
        return make_broker(name)
    if name == "strom":
        return StromBroker(features=features)
    if name == "kafka":
        return KafkaBroker(features=features)
    raise ValueError(f"unknown broker {name!r}")


# -- build -------------------------------------------------------------------------------------

def build() -> tuple[Path, Path]:
    """Compile TxnBench.java against the kafka-clients jar (cached by source + jar name);
    returns (class dir, jar lib dir)."""
    problem = java_problem()
    javac = shutil.which("javac")
    if problem is not None or javac is None:
        raise KafkaRefError(problem or "no javac on PATH (install a JDK, not only a JRE)")
    lib = ensure_jars()
    jars = sorted(lib.glob("kafka-clients-*.jar"))
    if not jars:
        raise KafkaRefError(f"no kafka-clients jar in {lib}")
    digest = hashlib.sha256(SOURCE.read_bytes() + jars[-1].name.encode()).hexdigest()
    stamp = BUILD_DIR / ".source.sha256"
    if stamp.exists() and stamp.read_text() == digest and (BUILD_DIR / "TxnBench.class").exists():
        return BUILD_DIR, lib
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    for old in BUILD_DIR.glob("*.class"):
        old.unlink()
    proc = subprocess.run([javac, "-Xlint:all", "-Xlint:-options", "-cp", str(jars[-1]), "-d", str(BUILD_DIR),
                           str(SOURCE)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise KafkaRefError(f"javac failed:\n{proc.stdout}\n{proc.stderr}")
    stamp.write_text(digest)
    return BUILD_DIR, lib


def producer_config(settings: str, overrides: list[str]) -> dict[str, Any]:
    """The ``SETTINGS[settings]`` properties, then ``KEY=VALUE`` overrides."""
    config: dict[str, Any] = dict(SETTINGS[settings])
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--producer-prop {item!r} is not KEY=VALUE")
        config[key.strip()] = value.strip()
    return config


def java_props(config: dict[str, Any]) -> list[str]:
    """``config`` as TxnBench ``--prop`` arguments."""
    out: list[str] = []
    for key, value in config.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        out += ["--prop", f"{key}={text}"]
    return out


# -- one phase = one JVM -----------------------------------------------------------------------

class JavaPhase:
    """A running TxnBench JVM: its stdout JSON lines arrive on a queue, stderr is kept (tail)."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.stderr: collections.deque[str] = collections.deque(maxlen=200)
        self.warmup: dict[str, Any] = {}  # the JVM's warm-up line, once it came
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._threads = [threading.Thread(target=self._read_out, args=(self.proc.stdout,), daemon=True),
                         threading.Thread(target=self._read_err, args=(self.proc.stderr,), daemon=True)]
        for t in self._threads:
            t.start()

    def _read_out(self, stream: IO[str]) -> None:
        for line in stream:
            line = line.strip()
            if line.startswith("{"):
                try:
                    self.lines.put(json.loads(line))
                except json.JSONDecodeError:
                    self.stderr.append(f"(unparsable stdout) {line}")
            elif line:
                self.stderr.append(f"(stdout) {line}")
        self.lines.put(None)  # end of output

    def _read_err(self, stream: IO[str]) -> None:
        for line in stream:
            self.stderr.append(line.rstrip("\n"))

    def next_line(self, timeout: float) -> dict[str, Any]:
        """The next JSON line; raises if the JVM ended or stayed silent for ``timeout`` s."""
        try:
            item = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"TxnBench silent for {timeout:.0f}s{self.tail()}") from None
        if item is None:
            rc = self.proc.wait(30)
            self._threads[1].join(5)  # the whole stderr (the exception's stack) before quoting it
            raise RuntimeError(f"TxnBench exited ({rc}) without a result{self.tail()}")
        if item.get("op") == "error":
            self.finish(30)
            raise RuntimeError(f"TxnBench failed in {item.get('stage')}: {item.get('exception')}{self.tail()}")
        return item

    def wait_ready(self, label: str) -> dict[str, Any]:
        """Wait for the ready line (JVM start, warm-up, metadata, initTransactions) and return it."""
        while (line := self.next_line(READY_TIMEOUT)).get("op") != "ready":
            if line.get("op") == "warmup":
                self.warmup = {k: v for k, v in line.items() if k != "op"}
                print(f"  [{label}] JVM warm-up: {line['records']:,} records in {line.get('chunks', 1)} chunk(s), "
                      f"{line['seconds']:.2f}s; JIT threads {line.get('jit_share', 0.0):.0%} of the last window",
                      file=sys.stderr, flush=True)
        return line

    def finish_after_result(self) -> None:
        """After the result line: the JVM closes its producers and must exit 0."""
        rc = self.finish()
        if rc != 0:
            raise RuntimeError(f"TxnBench exited {rc} after its result{self.tail()}")

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def tail(self) -> str:
        """The last lines of the JVM's stderr (an exception's stack trace ends up there)."""
        lines = list(self.stderr)
        if not lines:
            return ""
        return "\n  java stderr (tail):\n    " + "\n    ".join(lines[-40:])

    def finish(self, timeout: float = 60.0) -> int:
        """Wait for the JVM to exit (it closes its producer first); kill it after ``timeout``."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            rc = self.proc.wait()
        for t in self._threads:
            t.join(5)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


# The thread kinds the report shows, in its order; every other thread is "other" (kept in the JSON,
# left out of the table cell).
JVM_THREAD_KINDS = ("main", "sender", "gc+vm", "jit")

# A JVM thread's kind from its Linux name (15 characters at most; HotSpot names its native threads).
_THREAD_KINDS = (("kafka-producer-", "sender"), ("C1 CompilerThre", "jit"), ("C2 CompilerThre", "jit"),
                 ("GC Thread", "gc+vm"), ("VM Thread", "gc+vm"), ("G1 ", "gc+vm"), ("java", "main"))


def jvm_thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """The kind and CPU seconds of each live thread of a JVM (see jvm_thread_delta)."""
    out: dict[int, tuple[str, float]] = {}
    task_dir = Path(f"/proc/{pid}/task")
    for tid in os.listdir(task_dir):
        stat = read_stat_cpu(task_dir / tid / "stat", reaped_children=False)
        if stat is None:  # the thread ended since the listing
            continue
        kind = next((k for prefix, k in _THREAD_KINDS if stat.comm.startswith(prefix)), "other")
        out[int(tid)] = (kind, stat.cpu_s)
    return out


def jvm_thread_delta(after: dict[int, tuple[str, float]], before: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds between two ``jvm_thread_cpu`` readings, summed by thread kind: ``main`` (the
    thread running TxnBench; the launcher's first thread idles), ``sender`` (the producers' I/O
    threads), ``gc+vm``, ``jit`` and ``other``. Per thread, so a thread that ended in between (a
    warm-up producer's) takes nothing away; what it spent in between is lost with it."""
    out = dict.fromkeys((*JVM_THREAD_KINDS, "other"), 0.0)
    for tid, (kind, seconds) in after.items():
        out[kind] += seconds - before.get(tid, (kind, 0.0))[1]
    return out


def txnbench_argv(classes: Path, lib: Path, bootstrap: str, topic: str, records: int, txn_size: int, mode: str,
                  options: list[str], warmup_topic: str, warmup: int) -> list[str]:
    """The command line of one TxnBench JVM (it waits for the driver's go lines)."""
    java = shutil.which("java")
    assert java is not None
    argv = [java, *JVM_OPTS, "-cp", f"{classes}:{lib}/*", "TxnBench", bootstrap, topic, str(records), str(txn_size),
            str(VALUE_BYTES), mode, "--wait-go", *options]
    if warmup > 0:
        argv += ["--warmup-topic", warmup_topic, "--warmup-records", str(warmup)]
    return argv


def run_phase(broker: Broker, classes: Path, lib: Path, res: JavaTxnResult, partitions: int, txn_size: int,
              warmup_topic: str, warmup: int, label: str, props: list[str]) -> None:
    """Run one mode through a TxnBench JVM into ``res`` (raises on any failure)."""
    topic = f"bench-java-{res.mode}-{uuid.uuid4().hex[:8]}"
    print(f"  [{label}] {res.records:,} x {VALUE_BYTES} B on {topic} ({partitions} partitions"
          + (f", {txn_size:,} per transaction" if res.mode == "transactional" else "") + ")",
          file=sys.stderr, flush=True)
    create_topic(broker.bootstrap, topic, partitions)
    phase = JavaPhase(txnbench_argv(classes, lib, broker.bootstrap, topic, res.records, txn_size, res.mode, props,
                                    warmup_topic, warmup))
    try:
        line = phase.wait_ready(label)
        res.effective = {str(k): str(v) for k, v in line.get("effective", {}).items()}
        progress = Progress(label, res.records)
        clock = PhaseClock(broker.pid)
        clock.begin()
        java0, threads0 = tree_cpu_seconds(phase.proc.pid), jvm_thread_cpu(phase.proc.pid)
        phase.go()
        # The JVM stops after its timed loop, before closing the producer (whose I/O thread's CPU
        # would end with it), until the clocks are read.
        while (line := phase.next_line(STALL_TIMEOUT)).get("op") != "timed-done":
            if line.get("op") == "progress":
                progress.maybe(int(line["done"]), time.monotonic(), str(line["what"]))
            elif line.get("op") == "result":
                raise RuntimeError("TxnBench gave its result without a timed-done line")
        java_cpu = tree_cpu_seconds(phase.proc.pid) - java0
        threads = jvm_thread_delta(jvm_thread_cpu(phase.proc.pid), threads0)
        clock.__exit__()
        phase.go()
        if (line := phase.next_line(STALL_TIMEOUT)).get("op") != "result":
            raise RuntimeError(f"TxnBench: expected the result line, got {line}")
        phase.finish_after_result()
    except BaseException:
        phase.kill()
        raise
    take_result(res, line)
    res.client = str(line.get("client", ""))
    res.java_wall_s = round(clock.seconds, 4)
    res.broker_cpu_s = round(clock.broker_cpu, 3)
    res.client_cpu_s = round(java_cpu, 3)  # the JVM's CPU (the driver idles during the phase)
    res.client_threads = {k: round(v, 3) for k, v in threads.items()}
    res.jvm_warmup = phase.warmup
    res.other_cpu_s = round(max(0.0, clock.other_cpu - java_cpu), 3)
    res.steal_s = round(clock.steal, 3)
    verify_result(broker, res, topic, partitions, txn_size, label)


def take_result(res: JavaTxnResult, line: dict[str, Any]) -> None:
    """What TxnBench's result (for one mode) says into ``res``."""
    if int(line["records"]) != res.records:
        raise RuntimeError(f"TxnBench reports {line['records']} records, asked for {res.records}")
    res.seconds = float(line["seconds"])
    res.transactions = int(line["transactions"])
    res.transaction_version = line.get("transaction_version")
    res.epoch_before, res.epoch_after = line.get("epoch_before"), line.get("epoch_after")
    res.client_metrics = dict(line.get("client_metrics") or {})


def verify_result(broker: Broker, res: JavaTxnResult, topic: str, partitions: int, txn_size: int,
                  label: str) -> None:
    """Check the topic (high watermarks, read_committed count; not on the null broker, which keeps
    nothing) and the producer epoch; print the phase."""
    if getattr(broker, "stores_records", True):
        res.notes += verify_topic(broker.bootstrap, topic, res.records, partitions, res.mode == "transactional",
                                  txn_size)
    if res.mode == "transactional" and res.epoch_before is not None and res.epoch_after is not None:
        # TV2: every EndTxn bumps the epoch (a fresh transactional.id starts far from the overflow
        # that would switch producer id); TV1: the epoch never moves within a producer's life.
        want = res.epoch_before + res.transactions if res.transaction_version == 2 else res.epoch_before
        if res.epoch_after != want:
            res.notes.append(f"producer epoch {res.epoch_before} -> {res.epoch_after} after {res.transactions} "
                             f"transactions on TV{res.transaction_version}, expected {want}")
    tv = f", client used TV{res.transaction_version}" if res.transaction_version else ""
    epoch = (f", epoch {res.epoch_before} -> {res.epoch_after}" if res.mode == "transactional" else "")
    print(f"  [{label}] {res.msgs_per_s:,.0f} msgs/s in {res.seconds:.2f}s"
          + (f" ({res.transactions} transactions{tv}{epoch})" if res.transactions else "")
          + (f"; {'; '.join(res.notes)}" if res.notes else "; verified" if getattr(broker, "stores_records", True)
             else "; not verified (the null broker keeps nothing)"), file=sys.stderr, flush=True)


def run_interleaved(broker: Broker, classes: Path, lib: Path, idem: JavaTxnResult, txn: JavaTxnResult,
                    partitions: int, txn_size: int, slice_records: int, warmup_topic: str, warmup: int, label: str,
                    props: list[str]) -> None:
    """Run both modes of one round in one TxnBench JVM, alternating in slices (``--schedule
    interleaved``): the clocks are read around every slice and summed per mode."""
    by_mode = {"idempotent": idem, "transactional": txn}
    topics = {mode: f"bench-java-{mode}-{uuid.uuid4().hex[:8]}" for mode in MODES}
    print(f"  [{label}] {idem.records:,} x {VALUE_BYTES} B per mode on {topics['idempotent']} and "
          f"{topics['transactional']} ({partitions} partitions, {txn_size:,} per transaction), alternating in "
          f"slices of {slice_records:,}", file=sys.stderr, flush=True)
    for topic in topics.values():
        create_topic(broker.bootstrap, topic, partitions)
    phase = JavaPhase(txnbench_argv(classes, lib, broker.bootstrap, topics["idempotent"], idem.records, txn_size,
                                    "interleaved", ["--txn-topic", topics["transactional"], "--slice",
                                                    str(slice_records), *props], warmup_topic, warmup))
    cpu: dict[str, dict[str, float]] = {mode: collections.defaultdict(float) for mode in MODES}
    threads: dict[str, dict[str, float]] = {mode: collections.defaultdict(float) for mode in MODES}
    threads0: dict[int, tuple[str, float]] = {}
    try:
        line = phase.wait_ready(label)
        for res in by_mode.values():
            res.effective = {str(k): str(v) for k, v in line.get("effective", {}).items()}
        progress = Progress(label, 2 * idem.records)
        done = 0
        clock, java0 = PhaseClock(broker.pid), 0.0
        while (line := phase.next_line(STALL_TIMEOUT)).get("op") != "result":
            if line.get("op") == "slice-ready":
                clock.begin()
                java0, threads0 = tree_cpu_seconds(phase.proc.pid), jvm_thread_cpu(phase.proc.pid)
                phase.go()
            elif line.get("op") == "slice":
                java_cpu = tree_cpu_seconds(phase.proc.pid) - java0
                clock.__exit__()
                acc = cpu[str(line["mode"])]
                acc["wall"] += clock.seconds
                acc["broker"] += clock.broker_cpu
                acc["java"] += java_cpu
                acc["other"] += max(0.0, clock.other_cpu - java_cpu)
                acc["steal"] += clock.steal
                for kind, seconds in jvm_thread_delta(jvm_thread_cpu(phase.proc.pid), threads0).items():
                    threads[str(line["mode"])][kind] += seconds
                done += int(line["records"])
                progress.maybe(done, time.monotonic(), "records (both modes)")
        phase.finish_after_result()
    except BaseException:
        phase.kill()
        raise
    for mode, res in by_mode.items():
        take_result(res, line[mode])
        res.client = str(line.get("client", ""))
        res.java_wall_s = round(cpu[mode]["wall"], 4)
        res.broker_cpu_s = round(cpu[mode]["broker"], 3)
        res.client_cpu_s = round(cpu[mode]["java"], 3)
        res.other_cpu_s = round(cpu[mode]["other"], 3)
        res.steal_s = round(cpu[mode]["steal"], 3)
        res.client_threads = {k: round(v, 3) for k, v in threads[mode].items()}
        res.jvm_warmup = phase.warmup
        verify_result(broker, res, topics[mode], partitions, txn_size, f"{label} {mode}")


def client_race(exc: Exception) -> bool:
    """The kafka-clients 4.3.1 race (bench/README.md): the sender thread lets EndTxn overtake the
    transaction's batches, the broker answers INVALID_TXN_STATE as Kafka does, and the producer
    fails fatally in commitTransaction. A client bug, not the broker's; the phase is run again."""
    text = str(exc)
    return "commitTransaction" in text and "InvalidTxnStateException" in text


def run_broker(name: str, args: argparse.Namespace, classes: Path, lib: Path) -> list[JavaTxnResult]:
    print(f"== {name}: starting", file=sys.stderr, flush=True)
    # Warm-up rounds first (round numbers 1 - warmup_rounds .. 0), then the measured 1..repeat.
    results = [JavaTxnResult(name, mode, rnd, args.records, warmup=rnd < 1)
               for rnd in range(1 - args.warmup_rounds, args.repeat + 1) for mode in MODES]
    broker: Broker | None = None
    try:
        broker = new_broker(name, args.transaction_version).start()
    except Exception as exc:
        traceback.print_exc()
        first = str(exc).splitlines()[0] if str(exc) else ""
        for r in results:
            r.error = f"broker did not start: {type(exc).__name__}: {first}"
        return results
    try:
        print(f"== {name}: {broker.bootstrap} (pid {broker.pid})", file=sys.stderr, flush=True)
        warmup_topic = f"bench-java-warmup-{uuid.uuid4().hex[:8]}"
        if args.warmup > 0:
            create_topic(broker.bootstrap, warmup_topic, args.partitions)
        props = java_props(producer_config(args.settings, args.producer_prop))
        if args.schedule == "interleaved":
            units = [[r for r in results if r.round == rnd] for rnd in dict.fromkeys(r.round for r in results)]
        else:
            units = [[r] for r in results]
        for unit in units:
            lead = unit[0]
            label = f"{name} " + ("" if len(unit) > 1 else f"{lead.mode} ") \
                + ("warm-up round" if lead.warmup else f"{lead.round}/{args.repeat}")
            for attempt in (1, 2):
                try:
                    if len(unit) > 1:
                        idem, txn = unit
                        run_interleaved(broker, classes, lib, idem, txn, args.partitions, args.txn_size, args.slice,
                                        warmup_topic, args.warmup, label, props)
                    else:
                        run_phase(broker, classes, lib, lead, args.partitions, args.txn_size, warmup_topic,
                                  args.warmup, label, props)
                    break
                except Exception as exc:
                    if attempt == 1 and client_race(exc):
                        for res in unit:
                            res.retried = str(exc).splitlines()[0]
                            res.notes.clear()
                        print(f"  [{label}] the client's EndTxn-before-batches race ({lead.retried}); "
                              "running the phase again", file=sys.stderr, flush=True)
                        continue
                    for res in unit:
                        res.error = f"{type(exc).__name__}: {exc}{broker_log_problems(broker)}"
                    print(f"  [{label}] FAILED: {lead.error}", file=sys.stderr, flush=True)
                    break
        return results
    finally:
        broker.stop()


def broker_log_problems(broker: Broker, limit: int = 15) -> str:
    """The broker log's last WARN/ERROR lines (and exception lines), to quote with a failure."""
    lines: list[str] = []
    if isinstance(broker, StromBroker):
        lines = broker._proc.log_text().splitlines()
    elif isinstance(broker, KafkaBroker):
        lines = list(broker._ref.output)
    elif isinstance(broker, NullBroker):
        return "\n  null broker output:\n    " + "\n    ".join(list(broker.output)[-limit:]) if broker.output else ""
    keep = [ln for ln in lines if " WARN " in ln or " ERROR " in ln or "Exception" in ln or "Traceback" in ln]
    if not keep:
        return ""
    return f"\n  {broker.name} log (last WARN/ERROR lines):\n    " + "\n    ".join(keep[-limit:])


# -- report ------------------------------------------------------------------------------------

def tv_used(results: list[JavaTxnResult], broker: str) -> str:
    """The transaction version(s) the client used in the broker's successful transactional phases."""
    seen = sorted({r.transaction_version for r in results if r.broker == broker and r.mode == "transactional"
                   and r.error is None and r.transaction_version is not None})
    return "/".join(f"TV{v}" for v in seen) or "-"


def render(summary: list[dict[str, Any]], results: list[JavaTxnResult], args: argparse.Namespace) -> str:
    rows = []
    for s in summary:
        for mode in MODES:
            r = s[mode]
            if r is None:
                rows.append([s["broker"], mode, f"{args.records:,}", *["-"] * 12, "FAILED"])
                continue
            epochs = "-" if r["epoch_before"] is None or mode != "transactional" \
                else f"{r['epoch_before']}->{r['epoch_after']}"
            rows.append([s["broker"], mode, f"{r['records']:,}", str(r["transactions"] or "-"),
                         f"{r['seconds']:.2f}", f"{r['msgs_per_s']:,.0f}", f"{r['broker_cpu_s']:.2f}",
                         f"{r['client_cpu_s']:.2f}", f"{r['other_cpu_s']:.2f}", f"{r.get('steal_s', 0.0):.2f}",
                         *_client_columns(r), _threads_cell(r), epochs, "; ".join(r["notes"]) or "ok"])
    client = next((r.client for r in results if r.client), "?")
    effective = next((r.effective for r in results if r.effective), {})
    settings = f"--settings {args.settings}" + "".join(f" {p}" for p in args.producer_prop) \
        + " (" + ", ".join(f"{k}={v}" for k, v in effective.items()) + ")"
    head = (f"txn (Java client kafka-clients {client}): {VALUE_BYTES} B records, {args.partitions} partitions "
            f"round-robin, {settings}; transactions of {args.txn_size:,} records; "
            + (f"modes alternating in slices of {args.slice:,} records in one JVM per round; "
               if args.schedule == "interleaved" else "one JVM per mode and round, idempotent first; ")
            + f"median round by msgs/s of {args.repeat} (after {args.warmup_rounds} unmeasured); brokers formatted with "
            + ("their default transaction.version" if args.transaction_version is None
               else f"transaction.version={args.transaction_version}"))
    target = "target >= 0.8x" if args.txn_size == TXN_SIZE else f"target (for {TXN_SIZE:,}) >= 0.8x"
    ratio_rows = []
    for s in summary:
        idem, txn = s["idempotent"], s["transactional"]
        ratio_rows.append([s["broker"], "-" if idem is None else f"{idem['msgs_per_s']:,.0f}",
                           "-" if txn is None else f"{txn['msgs_per_s']:,.0f}",
                           "-" if s["ratio"] is None else f"{s['ratio']:.2f}",
                           ", ".join(f"{x:.2f}" for x in s["round_ratios"]) or "-",
                           tv_used(results, s["broker"]),
                           "-" if s["ratio"] is None else ("met" if s["ratio"] >= 0.8 else "MISSED")])
    return "\n".join([head, _table(["broker", "mode", "records", "txns", "secs", "msgs/s", "broker CPU s",
                                    "client CPU s", "other CPU s", "steal s", "buffer wait s", "requests", "batch B",
                                    f"JVM CPU s {'/'.join(JVM_THREAD_KINDS)}", "epoch", "status"], rows), "",
                      _table(["broker", "idempotent msgs/s", "transactional msgs/s", "txn/idempotent", "per round",
                              "client TV", target], ratio_rows)])


def _client_columns(r: dict[str, Any]) -> list[str]:
    """The producer's own counters as table cells: buffer wait s, requests, average batch bytes."""
    m = r.get("client_metrics") or {}
    wait, requests, batch = m.get("buffer_wait_s"), m.get("requests"), m.get("batch_size_avg")
    return ["-" if wait is None else f"{wait:.2f}", "-" if requests is None else f"{requests:,.0f}",
            "-" if batch is None else f"{batch:,.0f}"]


def _threads_cell(r: dict[str, Any]) -> str:
    """The JVM's CPU by thread kind (jvm_thread_cpu) as one table cell."""
    t = r.get("client_threads") or {}
    if not t:
        return "-"
    return "/".join(f"{t.get(k, 0.0):.2f}" for k in JVM_THREAD_KINDS)


# A phase where other work (other processes or containers on this machine, or the host's other
# guests through steal) took more than this share of the machine's CPU is reported as disturbed.
DISTURBED_SHARE = 0.10


def disturbed(results: list[JavaTxnResult], cores: int) -> list[str]:
    """The measured phases other work disturbed, each with what it took of the machine."""
    out = []
    for r in results:
        if r.warmup or r.error is not None or r.seconds <= 0:
            continue
        taken = r.other_cpu_s + r.steal_s
        capacity = cores * r.java_wall_s if r.java_wall_s > 0 else cores * r.seconds
        if taken > DISTURBED_SHARE * capacity:
            out.append(f"{r.broker} {r.mode} {_round(r)}: other work {r.other_cpu_s:.2f} CPU s, steal {r.steal_s:.2f} s "
                       f"of {capacity:.1f} CPU s")
    return out


def _round(r: JavaTxnResult) -> str:
    return "warm-up round" if r.warmup else f"round {r.round}"


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f}, {five:.2f}, {fifteen:.2f}"


# -- driver ------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--brokers", default=",".join(BROKERS),
                    help="subset of strom,kafka,null, run in this order (null: the raw limit, bench/null_broker.py)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (idempotent then transactional) per broker")
    ap.add_argument("--records", type=int, default=1_000_000, help="records per phase")
    ap.add_argument("--txn-size", type=int, default=TXN_SIZE,
                    help=f"records per transaction (issue 3's workload: {TXN_SIZE:,})")
    ap.add_argument("--partitions", type=int, default=3, help="partitions of every topic")
    ap.add_argument("--warmup", type=int, default=50_000,
                    help="untimed records per warm-up chunk of the same mode(s) at the start of every JVM; chunks "
                         "repeat until the JIT's threads use under 5%% of a window of at least 1 s (at most 90 s; "
                         "0: none)")
    ap.add_argument("--warmup-rounds", type=int, default=1,
                    help="unmeasured rounds per broker before the measured ones (the broker's JIT: Kafka's "
                         "CPU per transactional phase keeps falling over its first ~2,000 transactions)")
    ap.add_argument("--transaction-version", type=int, choices=(1, 2), default=None,
                    help="format both brokers with this transaction.version (default: each broker's "
                         "default for its metadata.version, 2 on Kafka 4.x)")
    ap.add_argument("--settings", choices=sorted(SETTINGS), default="client-defaults",
                    help="producer settings of both phases: the Java client's defaults (issue 3's figure) "
                         "or librdkafka's batching (linger.ms=5, batch.size=1048576) as in groups_txn.py")
    ap.add_argument("--producer-prop", action="append", default=[], metavar="KEY=VALUE",
                    help="override a producer property of both phases on top of --settings; repeatable")
    ap.add_argument("--schedule", choices=("sequential", "interleaved"), default="sequential",
                    help="sequential (default, issue 3's figure): one JVM per mode, the whole idempotent phase, "
                         "then the transactional one; interleaved: one JVM per round holds both producers and "
                         "alternates between them in slices of --slice records, so a drift in the machine's speed "
                         "meets both modes (but the idempotent producer then never fills its buffer: see "
                         "bench/README.md)")
    ap.add_argument("--slice", type=int, default=100_000,
                    help="records per slice with --schedule interleaved (a multiple of --txn-size; default 100,000)")
    ap.add_argument("--json", dest="json_path", type=Path, default=None, help="also write results here")
    args = ap.parse_args(argv)
    args.brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    if not args.brokers or set(args.brokers) - set(BROKERS):
        ap.error(f"--brokers takes names from {','.join(BROKERS)}")
    if args.repeat < 1 or args.records < 1 or args.partitions < 1 or args.txn_size < 1 or args.warmup < 0 \
            or args.warmup_rounds < 0:
        ap.error("--repeat, --records, --partitions and --txn-size must be positive, --warmup(-rounds) >= 0")
    if args.schedule == "interleaved" and (args.slice < 1 or args.slice % args.txn_size):
        ap.error(f"--slice {args.slice} must be a positive multiple of --txn-size {args.txn_size}")
    return args


def _exit_on_sigterm(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through run_broker's finally: the broker is stopped


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    classes, lib = build()
    load_before = _load()
    print(f"load average before: {load_before}", file=sys.stderr, flush=True)
    results: list[JavaTxnResult] = []
    for name in args.brokers:
        results += run_broker(name, args, classes, lib)
    load_after = _load()
    measured = [r for r in results if not r.warmup]
    base: list[TxnResult] = list(measured)  # summarize_txn reads only TxnResult's fields
    summary = summarize_txn(base)
    parts = [render(summary, measured, args), f"load average (1, 5, 15 min): before {load_before}, after {load_after}"]
    if retried := [f"{r.broker} {r.mode} {_round(r)}: {r.retried}" for r in results if r.retried]:
        parts.append("RETRIED PHASES (the kafka-clients race that lets EndTxn overtake a transaction's batches "
                     "failed the first attempt; see bench/README.md):\n  " + "\n  ".join(retried))
    if busy := disturbed(measured, os.cpu_count() or 1):
        parts.append(f"DISTURBED PHASES (other work took more than {DISTURBED_SHARE:.0%} of the machine; "
                     "their rounds measure the machine, not the broker):\n  " + "\n  ".join(busy))
    errors = [f"{r.broker} {r.mode} {_round(r)}: {r.error}" for r in results if r.error]
    notes = [f"{r.broker} {r.mode} {_round(r)}: {'; '.join(r.notes)}" for r in results if r.notes]
    if errors or notes:
        parts.append("VERIFICATION/RUN FAILURES:\n  " + "\n  ".join(errors + notes))
    print("\n\n".join(parts))
    if args.json_path is not None:
        doc = {"machine": machine_info(), "load_before": load_before, "load_after": load_after,
               "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
               "settings": {"brokers": args.brokers, "repeat": args.repeat,
                            "broker_transaction_version": args.transaction_version, "records": args.records,
                            "txn_size": args.txn_size, "partitions": args.partitions, "warmup": args.warmup,
                            "warmup_rounds": args.warmup_rounds, "schedule": args.schedule,
                            "slice": args.slice if args.schedule == "interleaved" else None,
                            "value_bytes": VALUE_BYTES, "settings_name": args.settings,
                            "producer_config": producer_config(args.settings, args.producer_prop), "jvm_opts": JVM_OPTS},
               "summary": summary, "rounds": [r.to_json() for r in results]}
        args.json_path.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"\nwrote {args.json_path}")
    if errors or notes:
        print(f"txn_java: {len(errors)} failed phase(s), {len(notes)} verification failure(s); see above",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
