"""Streams throughput and memory: strom.streams beside Kafka Streams (and Quix Streams), same broker, same run.

Three workloads (``--workloads``), each run by every framework as its own process, in each
processing guarantee, with a fresh application id, against one bundled strom broker:

- ``wordcount``: the word count of strom.streams' documentation (split lines, re-key by word
  through a repartition topic, count in a state store, write the counts). ``--lines`` lines of
  ``--words`` words from a ``--vocabulary``-word vocabulary. Checked: the last count per word in
  the output topic equals the true count.
- ``windowed``: ``--records`` records over ``--keys`` keys, record timestamps spread over
  ``--span-minutes`` minutes (in order, up to 5 s of jitter), counted per key in 1-minute
  tumbling event-time windows (grace 1 minute, so no record is late); the windowed counts are
  written with Kafka's time-windowed key format. Checked: the last count per (key, window) in
  the output topic equals the true count, for every (key, window).
- ``join``: a compacted table topic of ``--customers`` customers (loaded first, with earlier
  timestamps) joined with a stream of ``--records`` orders keyed by customer id (inner
  stream-table join on the key); each order is written with its customer's value appended.
  Checked: every order appears exactly once in the output, with its customer's value.

The apps:

- strom: ``bench/streams_apps/strom_{wordcount,windowed,join}.py`` (strom.streams' DSL);
  ``--strom-src LABEL=DIR`` runs them as framework ``strom-LABEL`` against the strom source
  tree in DIR (e.g. a ``git archive`` of a commit), while the broker stays the installed one;
  repeated, it measures several versions of strom.streams in the same run, round by round;
- kstreams: ``bench/kstreams/{WordCount,WindowedCount,StreamTableJoin}.java`` (Kafka Streams
  4.3.1 from Maven Central, RocksDB, ``-Xmx1g``);
- quix: ``bench/streams_apps/quix_wordcount.py`` in ``.cache/quix-venv`` (Quix Streams pins its
  own confluent-kafka, so it never shares the project's environment); word count only.

The clock runs from the process start until the application's consumer group has committed
the end of every input topic and the last record of each repartition partition (read back with
a read_committed consumer, since transaction markers sit after it under exactly-once). Every
framework commits every second (``commit.interval.ms=1000``; Quix's ``commit_interval=1``), so
the commit interval does not decide who finishes first. Memory: the peak resident set
(``VmHWM`` in /proc, summed over the app's process and its children: for the JVM that is the
java process) read when the group has finished, before the app is stopped.

    python bench/streams_bench.py                                   # all three workloads
    python bench/streams_bench.py --quick --only strom,kstreams     # small sizes
    python bench/streams_bench.py --workloads join --records 1000000 --guarantees at_least_once
    python bench/streams_bench.py --strom-src before=/tmp/strom-a --strom-src after=/tmp/strom-b --repeat 3
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from peers import ROOT, StromBroker, stop_process_group

logger = logging.getLogger(__name__)

APPS = ROOT / "bench" / "streams_apps"
KSTREAMS_SRC = ROOT / "bench" / "kstreams"
KSTREAMS_CACHE = ROOT / ".cache" / "kstreams"
QUIX_VENV = ROOT / ".cache" / "quix-venv"
GUARANTEES = ("at_least_once", "exactly_once_v2")
FRAMEWORKS = ("strom", "quix", "kstreams")
WORKLOADS = ("wordcount", "windowed", "join")
JVM_XMX = "1g"
WINDOW_MS = 60_000
GRACE_MS = 60_000
JITTER_MS = 5_000  # below the grace: no record is late, so every count is checkable
# Java class and strom app per workload; Quix runs the word count only.
JAVA_CLASS = {"wordcount": "WordCount", "windowed": "WindowedCount", "join": "StreamTableJoin"}
STROM_APP = {"wordcount": "strom_wordcount.py", "windowed": "strom_windowed.py", "join": "strom_join.py"}
QUIX_APP = {"wordcount": "quix_wordcount.py"}
K = TypeVar("K", bound=Hashable)


def status(line: str) -> None:
    logger.info("[%s] %s", time.strftime("%H:%M:%S"), line)


# -- the peers' set-up --------------------------------------------------------------------------

def ensure_quix() -> Path:
    python = QUIX_VENV / "bin" / "python"
    if not python.exists():
        status("creating .cache/quix-venv with quixstreams (first run only)")
        subprocess.run([sys.executable, "-m", "venv", str(QUIX_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "quixstreams"], check=True)
    return python


def ensure_kstreams() -> str:
    """Resolve Kafka Streams' jars and compile the Java apps; returns the java classpath."""
    lib = KSTREAMS_CACHE / "lib"
    classes = KSTREAMS_CACHE / "classes"
    if not any(lib.glob("kafka-streams-*.jar")):
        status("resolving Kafka Streams from Maven Central (first run only)")
        subprocess.run(["mvn", "-q", "-B", "-f", str(KSTREAMS_SRC / "pom.xml"),
                        "dependency:copy-dependencies", "-DincludeScope=runtime",
                        f"-DoutputDirectory={lib}"], check=True)
    sources = sorted(KSTREAMS_SRC.glob("*.java"))
    newest = max(s.stat().st_mtime for s in sources)
    targets = [classes / f"{s.stem}.class" for s in sources]
    if any(not t.exists() or t.stat().st_mtime < newest for t in targets):
        classes.mkdir(parents=True, exist_ok=True)
        # One javac call: StreamTableJoin uses WindowedCount's run().
        subprocess.run(["javac", "-cp", f"{lib}/*", "-d", str(classes), *map(str, sources)], check=True)
    return f"{classes}:{lib}/*"


# -- reading topics -----------------------------------------------------------------------------

def _high_watermarks(consumer: Consumer, tps: list[TopicPartition]) -> dict[tuple[str, int], int]:
    return {(tp.topic, tp.partition): consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}


def _last_data_offset_plus_one(bootstrap: str, topic: str, partition: int, high: int) -> int:
    """The offset after the last committed data record (markers and aborted data skipped)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, partition, max(high - 256, 0))])
        last = max(high - 256, 0)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            msgs = c.consume(500, timeout=0.5)
            if not msgs:
                break
            for m in msgs:
                if m.error() is None and (offset := m.offset()) is not None:
                    last = offset + 1
        return last
    finally:
        c.close()


def read_topic(bootstrap: str, topic: str, timeout: float = 300) -> Iterator[tuple[bytes, bytes]]:
    """Every committed (key, value) of ``topic``, each partition in offset order."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4()}",
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        meta = c.list_topics(topic, timeout=10).topics[topic]
        tps = [TopicPartition(topic, p, 0) for p in meta.partitions]
        ends = _high_watermarks(c, tps)
        c.assign(tps)
        positions = {k: 0 for k in ends}
        deadline = time.monotonic() + timeout
        while any(positions[k] < ends[k] for k in ends):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} took more than {timeout:.0f}s")
            for m in c.consume(10000, timeout=0.5):
                m_topic, partition, offset, key, value = m.topic(), m.partition(), m.offset(), m.key(), m.value()
                # A record without an error has all five; the Nones are the client's types for errors.
                if m.error() is not None or m_topic is None or partition is None or offset is None \
                        or key is None or value is None:
                    continue
                positions[(m_topic, partition)] = offset + 1
                yield key, value
            # Under exactly-once the end is a transaction marker, which no record reaches.
            for tp in c.position(tps):
                if tp.offset >= 0:
                    positions[(tp.topic, tp.partition)] = max(positions[(tp.topic, tp.partition)], tp.offset)
    finally:
        c.close()


def _long(value: bytes) -> int:
    return int.from_bytes(value, "big", signed=True)


# -- workloads: input, truth and check ----------------------------------------------------------

@dataclass
class Check:
    """What a run's output showed against the truth."""

    exact: bool
    detail: str = ""


@dataclass
class Workload:
    """One workload's input, already produced, and how to check an app's output."""

    name: str
    inputs: list[str]  # every source topic whose committed offsets must reach its end
    records: int  # input records the clock is measured against (lines for the word count)
    extra_args: list[str]
    check: Callable[[str, str], Check]  # (bootstrap, output topic) -> Check
    summary: str
    note: str = ""
    # When set, the stream is produced into a fresh topic (the app's first input) once the app has
    # committed the end of ``inputs`` (the table), and the clock starts then.
    live_stream: Callable[[str], None] | None = None


def _producer(bootstrap: str, keyed: bool) -> Producer:
    conf: dict[str, str | int] = {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                                  "compression.type": "lz4"}
    if keyed:
        # Kafka's partitioner (murmur2), as the Java clients: co-partitioned inputs of a join must
        # put a key in the same partition, and Kafka Streams' repartitioning agrees with it.
        conf["partitioner"] = "murmur2_random"
    return Producer(conf)


def _send(producer: Producer, topic: str, value: bytes, key: bytes, timestamp: int = 0) -> None:
    while True:
        try:
            producer.produce(topic, value, key=key, timestamp=timestamp)
            return
        except BufferError:
            producer.poll(0.05)


def _create(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the future resolves
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result()


def wordcount_workload(bootstrap: str, partitions: int, lines: int, words: int, vocabulary: int) -> Workload:
    topic = f"wc-input-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, partitions)
    rng = random.Random(42)
    vocab = [f"w{i:05d}" for i in range(vocabulary)]
    expected: Counter[str] = Counter()
    producer = _producer(bootstrap, keyed=False)
    for i in range(lines):
        line = rng.choices(vocab, k=words)
        expected.update(line)
        _send(producer, topic, " ".join(line).upper().encode(), str(i).encode())
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush()

    def check(bootstrap: str, output: str) -> Check:
        got = {k.decode(): _long(v) for k, v in read_topic(bootstrap, output)}
        return compare_counts(got, dict(expected))

    return Workload("wordcount", [topic], lines, [], check,
                    f"{lines:,} lines x {words} words ({lines * words:,} words), vocabulary {vocabulary}",
                    f"words/s = {words} x records/s")


def windowed_workload(bootstrap: str, partitions: int, records: int, keys: int, span_minutes: int) -> Workload:
    topic = f"win-input-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, partitions)
    rng = random.Random(43)
    span = span_minutes * 60_000
    # Two hours back, on a minute: within any broker's timestamp bounds (Kafka 4 refuses
    # timestamps more than an hour ahead), windows aligned as Kafka aligns them (epoch-based).
    base = (int(time.time() * 1000) - 2 * 3600_000) // WINDOW_MS * WINDOW_MS
    names = [f"k{i:05d}" for i in range(keys)]
    expected: Counter[tuple[str, int]] = Counter()
    producer = _producer(bootstrap, keyed=True)
    for i in range(records):
        key = rng.choice(names)
        ts = base + i * span // records + rng.randrange(JITTER_MS)
        expected[(key, ts - ts % WINDOW_MS)] += 1
        _send(producer, topic, str(i).encode(), key.encode(), ts)
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush()

    def check(bootstrap: str, output: str) -> Check:
        got: dict[tuple[str, int], int] = {}
        for k, v in read_topic(bootstrap, output):
            got[(k[:-8].decode(), _long(k[-8:]))] = _long(v)
        return compare_counts(got, dict(expected))

    return Workload("windowed", [topic], records, [str(WINDOW_MS), str(GRACE_MS)], check,
                    f"{records:,} records, {keys:,} keys, {span_minutes} min of event time "
                    f"({len(expected):,} key-windows), 1-min tumbling windows")


def join_workload(bootstrap: str, partitions: int, records: int, customers: int) -> Workload:
    table_topic = f"join-customers-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, table_topic, partitions, {"cleanup.policy": "compact"})
    rng = random.Random(44)
    table = {f"c{i:06d}": f"customer-{i}|region-{i % 17}|tier-{i % 3}" for i in range(customers)}
    names = list(table)
    producer = _producer(bootstrap, keyed=True)
    table_ts = int(time.time() * 1000) - 600_000
    for key, value in table.items():
        _send(producer, table_topic, value.encode(), key.encode(), table_ts)
    producer.flush()
    # Bytes only: at a million orders, str tuples as well would double the bench's own memory.
    encoded = [(rng.choice(names).encode(), f"order-{i}:{rng.randrange(1, 100_000)}".encode())
               for i in range(records)]
    table_bytes = {k.encode(): v.encode() for k, v in table.items()}

    def produce_orders(topic: str) -> None:
        # Later timestamps than the table's, as a stream-table join's inputs would have them.
        producer = _producer(bootstrap, keyed=True)
        ts = int(time.time() * 1000)
        for i, (key, value) in enumerate(encoded):
            _send(producer, topic, value, key, ts)
            if i % 10000 == 0:
                producer.poll(0)
        producer.flush()

    def check(bootstrap: str, output: str) -> Check:
        seen = [0] * records
        wrong: list[str] = []
        for key, value in read_topic(bootstrap, output):
            order, _, customer = value.partition(b"|")
            i = int(order[6:order.index(b":")])
            seen[i] += 1
            if encoded[i] != (key, order) or table_bytes.get(key) != customer:
                wrong.append(f"{key!r}: {value!r}")
        missing = sum(1 for n in seen if n == 0)
        duplicated = sum(1 for n in seen if n > 1)
        detail = ", ".join(f"{n} {what}" for n, what in ((missing, "orders missing"),
                                                           (duplicated, "orders duplicated"),
                                                           (len(wrong), "wrong values")) if n)
        if wrong:
            detail += f" (e.g. {wrong[0]})"
        return Check(not (missing or duplicated or wrong), detail)

    return Workload("join", [table_topic], records, [table_topic], check,
                    f"{records:,} orders joined with a compacted table of {customers:,} customers; "
                    "clock from the first order produced (after the app loaded the table)",
                    live_stream=produce_orders)


def compare_counts(got: Mapping[K, int], expected: Mapping[K, int]) -> Check:
    """Exact when ``got`` has every key of ``expected`` with its count and nothing else."""
    if dict(got) == dict(expected):
        return Check(True)
    wrong = [k for k in expected if got.get(k) != expected[k]]
    extra = [k for k in got if k not in expected]
    detail = f"{len(wrong)} of {len(expected)} counts differ, {len(extra)} unexpected keys"
    if wrong:
        detail += ", e.g. " + ", ".join(f"{k}: {got.get(k)} != {expected[k]}" for k in wrong[:3])
    return Check(False, detail)


# -- one run ------------------------------------------------------------------------------------

def kind(framework: str) -> str:
    """``strom`` for every strom variant (``strom-before``, ``strom-after``), else the name."""
    return "strom" if framework.startswith("strom") else framework


def command(framework: str, workload: str, args: list[str], classpath: str | None) -> list[str]:
    if kind(framework) == "strom":
        return [sys.executable, str(APPS / STROM_APP[workload]), *args]
    if framework == "quix":
        return [str(ensure_quix()), str(APPS / QUIX_APP[workload]), *args]
    assert classpath is not None
    return ["java", f"-Xmx{JVM_XMX}", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath,
            JAVA_CLASS[workload], *args]


def supports(framework: str, workload: str) -> bool:
    return kind(framework) != "quix" or workload in QUIX_APP


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def peak_rss_bytes(pid: int) -> int | None:
    """The peak resident set (VmHWM) of ``pid`` and its descendants, or None without /proc."""
    total, found, todo = 0, False, [pid]
    while todo:
        p = todo.pop()
        try:
            status_text = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        for line in status_text.splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1]) * 1024
                found = True
        todo.extend(_children(p))
    return total if found else None


def wait_done(bootstrap: str, group: str, inputs: Sequence[str], proc: subprocess.Popen[bytes],
              timeout: float) -> None:
    """Block until ``group`` has processed everything (see the module docstring)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4()}"})
    input_tps = [TopicPartition(t, p) for t in inputs
                 for p in probe.list_topics(t, timeout=10).topics[t].partitions]
    input_end = _high_watermarks(probe, input_tps)
    deadline = time.monotonic() + timeout
    last_report = time.monotonic()
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"the application exited with code {proc.returncode}")
            result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
            committed = {(tp.topic, tp.partition): tp.offset
                         for tp in result[group].result().topic_partitions}
            if time.monotonic() - last_report > 10:
                done = sum(max(committed.get(k, 0), 0) for k in input_end)
                status(f"  {done:,}/{sum(input_end.values()):,} input records committed")
                last_report = time.monotonic()
            if all(committed.get(k, -1) >= v for k, v in input_end.items()):
                others = [TopicPartition(t, p) for (t, p) in committed if t not in inputs]
                # a repartition partition the group has not committed yet counts too (absent: 0):
                # under exactly_once_v2 a fast app commits all its input in one transaction
                # before any repartition record is visible, which passed this check vacuously
                others += [TopicPartition(t, p) for t, md in probe.list_topics(timeout=10).topics.items()
                           if t.startswith(f"{group}-") and t.endswith("-repartition")
                           for p in md.partitions if (t, p) not in committed]
                highs = _high_watermarks(probe, others)
                if all(committed.get(k, 0) >= h for k, h in highs.items()) or all(
                        committed.get(k, 0) >= _last_data_offset_plus_one(bootstrap, k[0], k[1], h)
                        for k, h in highs.items()):
                    return
            time.sleep(0.2)  # polling interval of the condition above, not a wait for it
        raise TimeoutError(f"group {group} did not finish within {timeout:.0f}s")
    finally:
        probe.close()


@dataclass
class Result:
    workload: str
    guarantee: str
    framework: str
    seconds: float
    records: int
    exact: bool
    detail: str = ""
    peak_rss_bytes: int | None = None
    error: str | None = None
    load_seconds: float | None = None  # start-up and table load, when the clock starts after them
    feed_seconds: float | None = None  # producing the live stream, inside ``seconds``
    round: int = 1

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0


def run_one(framework: str, guarantee: str, bootstrap: str, workload: Workload, partitions: int,
            classpath: str | None, timeout: float, strom_src: Path | None) -> Result:
    app_id = f"{workload.name}-{framework}-{guarantee.replace('_', '')}-{uuid.uuid4().hex[:6]}"
    output = f"{app_id}-out"
    _create(bootstrap, output, partitions)
    state_dir = tempfile.mkdtemp(prefix=f"{framework}-state-")
    log_path = Path(tempfile.gettempdir()) / f"{app_id}.log"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if strom_src is not None:
        env["PYTHONPATH"] = str(strom_src)  # ahead of the editable install's finder
    inputs = list(workload.inputs)
    if workload.live_stream is not None:
        inputs.insert(0, f"{app_id}-in")
        _create(bootstrap, inputs[0], partitions)
    args = [bootstrap, app_id, guarantee, inputs[0], output, state_dir, *workload.extra_args]
    result = Result(workload.name, guarantee, framework, 0.0, workload.records, False)
    with open(log_path, "wb") as log:
        start = time.perf_counter()
        proc = subprocess.Popen(command(framework, workload.name, args, classpath),
                                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            if workload.live_stream is not None:
                # Kafka Streams would order a task's records by timestamp (the table's are older);
                # strom.streams takes them in fetch order. Loading the table first gives both the
                # same, well-defined join.
                wait_done(bootstrap, app_id, workload.inputs, proc, timeout)
                result.load_seconds = time.perf_counter() - start
                start = time.perf_counter()
                workload.live_stream(inputs[0])
                result.feed_seconds = time.perf_counter() - start
            wait_done(bootstrap, app_id, inputs, proc, timeout)
            result.seconds = time.perf_counter() - start
            result.peak_rss_bytes = peak_rss_bytes(proc.pid)
        except Exception as exc:
            status(f"  {framework} failed ({exc}); its log: {log_path}")
            result.error = str(exc)
            return result
        finally:
            stop_process_group(proc, 60)
            shutil.rmtree(state_dir, ignore_errors=True)
    check = workload.check(bootstrap, output)
    result.exact, result.detail = check.exact, check.detail
    if not check.exact:
        status(f"  {framework}/{guarantee}: output differs from the truth: {check.detail}")
    return result


# -- the table ----------------------------------------------------------------------------------

def _mib(n: int | None) -> str:
    return "?" if n is None else f"{n / (1 << 20):,.0f}"


def median_runs(results: list[Result]) -> list[Result]:
    """One row per (workload, guarantee, framework): the median round's run (by seconds; the
    slower middle one of an even count), exact only if every round was, the highest peak RSS."""
    groups: dict[tuple[str, str, str], list[Result]] = {}
    for r in results:
        groups.setdefault((r.workload, r.guarantee, r.framework), []).append(r)
    rows = []
    for runs in groups.values():
        ok = [r for r in runs if r.error is None]
        if not ok:
            rows.append(runs[0])
            continue
        mid = sorted(ok, key=lambda r: r.seconds)[len(ok) // 2]
        peaks = [r.peak_rss_bytes for r in ok if r.peak_rss_bytes is not None]
        rows.append(Result(mid.workload, mid.guarantee, mid.framework, mid.seconds, mid.records,
                           all(r.exact for r in runs) and len(ok) == len(runs),
                           "; ".join(r.detail for r in runs if r.detail),
                           max(peaks) if peaks else None, None, mid.load_seconds, mid.feed_seconds, len(runs)))
    return rows


def table(results: list[Result], workloads: dict[str, Workload]) -> str:
    """The median of each run's rounds; "x kstreams" is the row's speed relative to Kafka Streams'
    (its seconds over the row's) in the same workload and guarantee."""
    rows = median_runs(results)
    lines = [f"{'workload':<10} {'guarantee':<16} {'framework':<14} {'seconds':>8} {'records/s':>10} "
             f"{'result':>7} {'peak RSS MiB':>12} {'x kstreams':>10}"]
    by_key = {(r.workload, r.guarantee, r.framework): r for r in rows}
    for r in rows:
        peer = by_key.get((r.workload, r.guarantee, "kstreams"))
        ratio = ""
        if r.framework != "kstreams" and peer is not None and peer.error is None and r.error is None:
            ratio = f"{peer.seconds / r.seconds:.2f}x"
        outcome = "FAILED" if r.error else "exact" if r.exact else "WRONG"
        lines.append(f"{r.workload:<10} {r.guarantee:<16} {r.framework:<14} {r.seconds:>8.1f} {r.rate:>10,.0f} "
                     f"{outcome:>7} {_mib(r.peak_rss_bytes):>12} {ratio:>10}")
    for w in workloads.values():
        lines.append(f"{w.name}: {w.summary}" + (f"; {w.note}" if w.note else ""))
    feeds = [r for r in results if r.feed_seconds is not None]
    if feeds:
        lines.append(f"join: producing the orders took {min(r.feed_seconds or 0 for r in feeds):.1f}-"
                     f"{max(r.feed_seconds or 0 for r in feeds):.1f}s of those seconds (a floor of the join's clock)")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None, default_workloads: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default=default_workloads, help=f"comma-separated: {','.join(WORKLOADS)}")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes (20,000 lines; 50,000 records; 1,000 customers) unless given")
    parser.add_argument("--lines", type=int, help="word count: input lines (default 100,000)")
    parser.add_argument("--words", type=int, default=8, help="word count: words per line")
    parser.add_argument("--vocabulary", type=int, default=5000, help="word count: distinct words")
    parser.add_argument("--records", type=int, help="windowed and join: input records (default 200,000)")
    parser.add_argument("--keys", type=int, default=1000, help="windowed: distinct keys")
    parser.add_argument("--span-minutes", type=int, default=30, help="windowed: minutes of event time")
    parser.add_argument("--customers", type=int, help="join: table keys (default 10,000)")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--only", default=",".join(FRAMEWORKS), help="frameworks, comma-separated")
    parser.add_argument("--guarantees", default=",".join(GUARANTEES))
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    parser.add_argument("--strom-src", action="append", default=[], metavar="[LABEL=]DIR",
                        help="run the strom apps against this strom source tree (PYTHONPATH) as framework "
                             "strom-LABEL; repeat to compare versions in the same run")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every run; the table shows the median")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    quick = args.quick
    args.lines = args.lines or (20_000 if quick else 100_000)
    args.records = args.records or (50_000 if quick else 200_000)
    args.customers = args.customers or (1_000 if quick else 10_000)
    for name, allowed in (("workloads", WORKLOADS), ("only", FRAMEWORKS), ("guarantees", GUARANTEES)):
        chosen = [x for x in getattr(args, name).split(",") if x]
        unknown = sorted(set(chosen) - set(allowed))
        if unknown:
            parser.error(f"--{name}: unknown {', '.join(unknown)} (choose from {', '.join(allowed)})")
        setattr(args, name, chosen)
    # framework name -> strom source tree (None: the installed strom)
    args.variants = {}
    for spec in args.strom_src:
        label, sep, directory = spec.rpartition("=")
        name = f"strom-{label}" if sep else "strom"
        if not (Path(directory) / "strom" / "streams").is_dir():
            parser.error(f"--strom-src {spec}: no strom/streams in {directory}")
        if name in args.variants:
            parser.error(f"--strom-src: {name} given twice (label each tree: LABEL=DIR)")
        args.variants[name] = Path(directory)
    if not args.variants:
        args.variants = {"strom": None}
    expanded: list[str] = []
    for f in args.only:
        expanded.extend(args.variants if f == "strom" else [f])
    args.only = expanded
    return args


def strom_version(variants: dict[str, Path | None]) -> str:
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=False).stdout.strip()
    return "; ".join(f"{name}: strom.streams from {src}" if src is not None else
                     f"{name}: strom.streams at HEAD {head or '?'}" for name, src in variants.items())


def report(r: Result) -> None:
    if r.error is None:
        status(f"  {r.seconds:.1f}s, {r.rate:,.0f} records/s, {'exact' if r.exact else 'WRONG'}, "
               f"peak RSS {_mib(r.peak_rss_bytes)} MiB"
               + (f" (start-up and table load before it: {r.load_seconds:.1f}s; producing the orders: "
                  f"{r.feed_seconds or 0:.1f}s)" if r.load_seconds is not None else ""))


def main(argv: Sequence[str] | None = None, default_workloads: str = ",".join(WORKLOADS)) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    args = parse_args(argv, default_workloads)
    classpath = ensure_kstreams() if "kstreams" in args.only else None
    load_start = os.getloadavg()
    if "quix" in args.only and "wordcount" in args.workloads:
        ensure_quix()

    results: list[Result] = []
    workloads: dict[str, Workload] = {}
    broker = StromBroker().start()
    try:
        for name in args.workloads:
            status(f"{name}: producing the input ({args.partitions} partitions)")
            if name == "wordcount":
                w = wordcount_workload(broker.bootstrap, args.partitions, args.lines, args.words, args.vocabulary)
            elif name == "windowed":
                w = windowed_workload(broker.bootstrap, args.partitions, args.records, args.keys,
                                      args.span_minutes)
            else:
                w = join_workload(broker.bootstrap, args.partitions, args.records, args.customers)
            workloads[name] = w
            # Rounds outermost, frameworks innermost: a change in the machine's load falls on
            # every framework of a round alike.
            for guarantee in args.guarantees:
                for round_ in range(1, args.repeat + 1):
                    for framework in args.only:
                        if not supports(framework, name):
                            if round_ == 1:
                                status(f"{framework} has no {name} app: skipped")
                            continue
                        status(f"{name} / {framework} / {guarantee} (round {round_}/{args.repeat})")
                        r = run_one(framework, guarantee, broker.bootstrap, w, args.partitions, classpath,
                                    args.timeout, args.variants.get(framework))
                        r.round = round_
                        results.append(r)
                        report(r)
    finally:
        broker.stop()

    load = f"load average {load_start[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    header = (f"strom broker; {os.cpu_count()} CPUs; {args.partitions} partitions; {strom_version(args.variants)}; "
              f"Kafka Streams 4.3.1 with -Xmx{JVM_XMX}; median of {args.repeat} round(s); {load}")
    print(f"\n{header}\n{table(results, workloads)}")
    if args.json is not None:
        args.json.write_text(json.dumps({"header": header, "results": [asdict(r) for r in results],
                                         "workloads": {n: w.summary for n, w in workloads.items()}}, indent=2))
    return 0 if results and all(r.exact and r.error is None for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
