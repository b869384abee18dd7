"""Word count throughput: strom.streams beside Quix Streams and Kafka Streams, same broker, same run.

The workload is the word count of strom.streams' documentation (split lines, re-key by word,
repartition, count in a state store, write the counts). A bundled strom broker is started once;
``--lines`` lines of ``--words`` words (from a ``--vocabulary``-word vocabulary) are produced to
one input topic of ``--partitions`` partitions; then each framework runs the word count as its
own process, in each processing guarantee, with a fresh application id:

- strom: ``bench/streams_apps/strom_wordcount.py`` (strom.streams on confluent-kafka);
- quix: ``bench/streams_apps/quix_wordcount.py`` in ``.cache/quix-venv`` (Quix Streams pins its
  own confluent-kafka, so it never shares the project's environment);
- kstreams: ``bench/kstreams/WordCount.java`` (Kafka Streams 4.3.1 from Maven Central, RocksDB).

The clock runs from the process start until the application's consumer group has committed
the end of the input topic and the last record of each repartition partition (read back with a
read_committed consumer, since transaction markers sit after it under exactly-once). Each run is
then checked: the last count per word in the output topic must equal the true count. Every
framework commits every second (``commit.interval.ms=1000``; Quix's ``commit_interval=1``), so
the commit interval does not decide who finishes first.

    python bench/streams_wordcount.py                     # all three, both guarantees
    python bench/streams_wordcount.py --lines 50000 --only strom,quix
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from peers import ROOT, StromBroker, stop_process_group

APPS = ROOT / "bench" / "streams_apps"
KSTREAMS_SRC = ROOT / "bench" / "kstreams"
KSTREAMS_CACHE = ROOT / ".cache" / "kstreams"
QUIX_VENV = ROOT / ".cache" / "quix-venv"
GUARANTEES = ("at_least_once", "exactly_once_v2")
FRAMEWORKS = ("strom", "quix", "kstreams")


def status(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


# -- the peers' set-up --------------------------------------------------------------------------

def ensure_quix() -> Path:
    python = QUIX_VENV / "bin" / "python"
    if not python.exists():
        status("creating .cache/quix-venv with quixstreams (first run only)")
        subprocess.run([sys.executable, "-m", "venv", str(QUIX_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "quixstreams"], check=True)
    return python


def ensure_kstreams() -> str:
    """Resolve Kafka Streams' jars and compile WordCount.java; returns the java classpath."""
    lib = KSTREAMS_CACHE / "lib"
    classes = KSTREAMS_CACHE / "classes"
    if not any(lib.glob("kafka-streams-*.jar")):
        status("resolving Kafka Streams from Maven Central (first run only)")
        subprocess.run(["mvn", "-q", "-B", "-f", str(KSTREAMS_SRC / "pom.xml"),
                        "dependency:copy-dependencies", "-DincludeScope=runtime",
                        f"-DoutputDirectory={lib}"], check=True)
    source = KSTREAMS_SRC / "WordCount.java"
    target = classes / "WordCount.class"
    if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
        classes.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-cp", f"{lib}/*", "-d", str(classes), str(source)], check=True)
    return f"{classes}:{lib}/*"


def command(framework: str, bootstrap: str, app_id: str, guarantee: str, input_topic: str,
            output_topic: str, state_dir: str, classpath: str | None) -> list[str]:
    args = [bootstrap, app_id, guarantee, input_topic, output_topic, state_dir]
    if framework == "strom":
        return [sys.executable, str(APPS / "strom_wordcount.py"), *args]
    if framework == "quix":
        return [str(ensure_quix()), str(APPS / "quix_wordcount.py"), *args]
    assert classpath is not None
    return ["java", "-Xmx1g", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath,
            "WordCount", *args]


# -- workload -----------------------------------------------------------------------------------

def produce_input(bootstrap: str, topic: str, partitions: int, lines: int, words: int,
                  vocabulary: int) -> Counter[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
    rng = random.Random(42)
    vocab = [f"w{i:05d}" for i in range(vocabulary)]
    expected: Counter[str] = Counter()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "compression.type": "lz4"})
    for i in range(lines):
        line = rng.choices(vocab, k=words)
        expected.update(line)
        while True:
            try:
                producer.produce(topic, " ".join(line).upper().encode(), key=str(i).encode())
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush()
    return expected


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


def wait_done(bootstrap: str, group: str, input_topic: str, partitions: int,
              proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Block until ``group`` has processed everything (see the module docstring)."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4()}"})
    input_tps = [TopicPartition(input_topic, p) for p in range(partitions)]
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
            done_input = sum(max(committed.get(k, 0), 0) for k in input_end)
            if time.monotonic() - last_report > 5:
                status(f"  {done_input}/{sum(input_end.values())} input records committed")
                last_report = time.monotonic()
            if all(committed.get(k, -1) >= v for k, v in input_end.items()):
                others = [TopicPartition(t, p) for (t, p) in committed if t != input_topic]
                highs = _high_watermarks(probe, others)
                if all(committed[k] >= h for k, h in highs.items()) or all(
                        committed[k] >= _last_data_offset_plus_one(bootstrap, k[0], k[1], h)
                        for k, h in highs.items()):
                    return
            time.sleep(0.2)
        raise TimeoutError(f"group {group} did not finish within {timeout:.0f}s")
    finally:
        probe.close()


def final_counts(bootstrap: str, topic: str) -> dict[str, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4()}",
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    meta = c.list_topics(topic, timeout=10).topics[topic]
    tps = [TopicPartition(topic, p, 0) for p in meta.partitions]
    ends = _high_watermarks(c, tps)
    c.assign(tps)
    counts: dict[str, int] = {}
    positions = {k: 0 for k in ends}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(positions[k] < ends[k] for k in ends):
        for m in c.consume(10000, timeout=0.5):
            m_topic, partition, offset, key, value = m.topic(), m.partition(), m.offset(), m.key(), m.value()
            # A record without an error has all five; the Nones are the client's types for errors.
            if m.error() is not None or m_topic is None or partition is None or offset is None \
                    or key is None or value is None:
                continue
            positions[(m_topic, partition)] = offset + 1
            counts[key.decode()] = int.from_bytes(value, "big", signed=True)
        for tp in c.position(tps):
            if tp.offset >= 0:
                positions[(tp.topic, tp.partition)] = max(positions[(tp.topic, tp.partition)], tp.offset)
    c.close()
    return counts


# -- one run ------------------------------------------------------------------------------------

def run_one(framework: str, guarantee: str, bootstrap: str, input_topic: str, partitions: int,
            expected: Counter[str], classpath: str | None, timeout: float) -> tuple[float, bool]:
    app_id = f"wc-{framework}-{guarantee.replace('_', '')}-{uuid.uuid4().hex[:6]}"
    output = f"{app_id}-out"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the future resolves
    admin.create_topics([NewTopic(output, partitions, 1)])[output].result()
    state_dir = tempfile.mkdtemp(prefix=f"{framework}-state-")
    log_path = Path(tempfile.gettempdir()) / f"{app_id}.log"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log_path, "wb") as log:
        start = time.perf_counter()
        proc = subprocess.Popen(command(framework, bootstrap, app_id, guarantee, input_topic, output,
                                        state_dir, classpath),
                                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            wait_done(bootstrap, app_id, input_topic, partitions, proc, timeout)
            elapsed = time.perf_counter() - start
        except Exception:
            status(f"  {framework} failed; its log: {log_path}")
            raise
        finally:
            stop_process_group(proc, 60)
    shutil.rmtree(state_dir, ignore_errors=True)
    got = final_counts(bootstrap, output)
    correct = got == dict(expected)
    if not correct:
        wrong = [w for w in expected if got.get(w) != expected[w]][:5]
        status(f"  {framework}/{guarantee}: counts differ, e.g. "
               + ", ".join(f"{w}: {got.get(w)} != {expected[w]}" for w in wrong))
    return elapsed, correct


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--words", type=int, default=8, help="words per line")
    parser.add_argument("--vocabulary", type=int, default=5000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--only", default=",".join(FRAMEWORKS))
    parser.add_argument("--guarantees", default=",".join(GUARANTEES))
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    frameworks = [f for f in args.only.split(",") if f]
    guarantees = [g for g in args.guarantees.split(",") if g]
    classpath = ensure_kstreams() if "kstreams" in frameworks else None
    if "quix" in frameworks:
        ensure_quix()

    broker = StromBroker().start()
    try:
        topic = "wc-input"
        status(f"producing {args.lines} lines x {args.words} words to {topic} ({args.partitions} partitions)")
        expected = produce_input(broker.bootstrap, topic, args.partitions, args.lines, args.words,
                                 args.vocabulary)
        results: dict[tuple[str, str], tuple[float, bool]] = {}
        for guarantee in guarantees:
            for framework in frameworks:
                status(f"{framework} / {guarantee}")
                results[(framework, guarantee)] = run_one(framework, guarantee, broker.bootstrap, topic,
                                                          args.partitions, expected, classpath, args.timeout)
                secs, ok = results[(framework, guarantee)]
                status(f"  {secs:.1f}s, {args.lines / secs:,.0f} lines/s, counts {'exact' if ok else 'WRONG'}")
    finally:
        broker.stop()

    words = args.lines * args.words
    print(f"\nword count: {args.lines:,} lines, {words:,} words, {args.partitions} partitions, "
          f"vocabulary {args.vocabulary}; strom broker; {os.cpu_count()} CPUs")
    print(f"{'guarantee':<16} {'framework':<9} {'seconds':>8} {'lines/s':>10} {'words/s':>10} "
          f"{'counts':>7} {'strom/x':>8}")
    for guarantee in guarantees:
        strom = results.get(("strom", guarantee))
        for framework in frameworks:
            secs, ok = results[(framework, guarantee)]
            ratio = f"{secs / strom[0]:.2f}x" if strom and framework != "strom" else ""
            print(f"{guarantee:<16} {framework:<9} {secs:>8.1f} {args.lines / secs:>10,.0f} "
                  f"{words / secs:>10,.0f} {'exact' if ok else 'WRONG':>7} {ratio:>8}")
    return 0 if all(ok for _, ok in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
