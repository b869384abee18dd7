"""MirrorMaker 2: strom's (``strom connect mirror-maker``) beside Kafka's (the Java
``org.apache.kafka.connect.mirror.MirrorMaker`` in dedicated mode), same two strom brokers,
same run.

Two bundled strom brokers are started (clusters ``src`` and ``dst``). Each MirrorMaker runs in
turn, as its own process, from an ``mm2.properties`` that differs only in the cluster aliases
(so the two runs share no topic): one flow ``src->dst`` over a ``--partitions`` topic,
``tasks.max`` = partitions, checkpoints and heartbeats at their defaults, internal topics with
one replica. Once the MirrorMaker copied a warm-up record (it is running), ``--records``
records of ``--size`` bytes are produced to the source; the clock runs from the first produce
until the remote topic holds them all. Printed per MirrorMaker: records/s end to end, MB/s,
and the lag of the last record (its arrival on ``dst`` minus the end of producing), then the
ratio strom / Kafka.

``ceiling`` (``--only ...,ceiling``) is the raw limit strom's MirrorMaker can at best reach: one
process with one confluent-kafka consumer reading the source topic and one producer writing the
remote topic, no Connect in between (same records, same partitions, same clock); its
records/s is printed beside the others and strom's share of it.

Kafka's jars (connect-mirror 4.3.1 and its runtime) come from Maven Central through ``mvn``
into ``.cache/kmirror/lib`` on the first run.

    python bench/mirror.py                                  # 1,000,000 x 100 B, both
    python bench/mirror.py --records 100000 --size 10240    # 100,000 x 10 KiB
    python bench/mirror.py --records 200000 --only strom
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.testing import BrokerProcess

log = logging.getLogger("bench.mirror")
ROOT = Path(__file__).resolve().parent.parent
KMIRROR_LIB = ROOT / ".cache" / "kmirror" / "lib"
KAFKA_VERSION = "4.3.1"
POM = f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>dev.strom.bench</groupId><artifactId>kmirror</artifactId><version>1</version><packaging>pom</packaging>
<dependencies>
<dependency><groupId>org.apache.kafka</groupId><artifactId>connect-mirror</artifactId><version>{KAFKA_VERSION}</version></dependency>
<dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>1.7.36</version></dependency>
</dependencies></project>
"""


def ensure_kmirror() -> str:
    """Kafka's MirrorMaker jars (resolved once); returns the classpath."""
    if not any(KMIRROR_LIB.glob(f"connect-mirror-{KAFKA_VERSION}.jar")):
        pom = KMIRROR_LIB.parent / "pom.xml"
        pom.parent.mkdir(parents=True, exist_ok=True)
        pom.write_text(POM)
        log.info("resolving Kafka %s MirrorMaker jars into %s", KAFKA_VERSION, KMIRROR_LIB)
        subprocess.run(["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime",
                        f"-DoutputDirectory={KMIRROR_LIB}"], check=True)
    return f"{KMIRROR_LIB}/*"


def mm2_properties(src: str, dst: str, a: str, b: str, topics: str, partitions: int, tag: str) -> str:
    props = {
        "clusters": f"{src}, {dst}",
        f"{src}.bootstrap.servers": a,
        f"{dst}.bootstrap.servers": b,
        f"{src}->{dst}.enabled": "true",
        f"{src}->{dst}.topics": topics,
        "tasks.max": str(partitions),
        "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1", "heartbeats.topic.replication.factor": "1",
        "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        f"{dst}.group.id": f"mm2-{tag}",
    }
    return "".join(f"{k} = {v}\n" for k, v in props.items())


def remote_count(consumer: Consumer, topic: str, partitions: int) -> int:
    total = 0
    for p in range(partitions):
        try:
            total += consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
        except Exception:  # the remote topic may not exist yet
            return 0
    return total


def produce(bootstrap: str, topic: str, n: int, size: int, partitions: int) -> float:
    """Produce ``n`` records of ``size`` bytes round robin; returns when the last was acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "compression.type": "none", "queue.buffering.max.kbytes": 1_048_576})
    value = os.urandom(size)
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(600)
    return time.monotonic()


def run_one(name: str, a: str, b: str, args: argparse.Namespace, work: Path, classpath: str | None) -> dict[str, float]:
    tag = uuid.uuid4().hex[:6]
    src, dst = f"s{tag}", f"d{tag}"
    topic, warm = f"bench-{tag}", f"bench-{tag}-warm"
    admin = AdminClient({"bootstrap.servers": a})
    for t in (topic, warm):
        admin.create_topics([NewTopic(t, args.partitions, 1)])[t].result(30)
    if name == "ceiling":  # MirrorMaker creates the remote topics; the bare copy loop does not
        admin_b = AdminClient({"bootstrap.servers": b})
        for t in (topic, warm):
            admin_b.create_topics([NewTopic(f"{src}.{t}", args.partitions, 1)])[f"{src}.{t}"].result(30)
        del admin_b
    del admin
    p = Producer({"bootstrap.servers": a})
    for part in range(args.partitions):
        p.produce(warm, value=b"warm", partition=part)
    p.flush(30)
    props = work / f"mm2-{name}.properties"
    props.write_text(mm2_properties(src, dst, a, b, f"bench-{tag}.*", args.partitions, tag))
    if name == "strom":
        cmd = [sys.executable, "-m", "strom.connect.cli", "mirror-maker", str(props), "--clusters", dst]
    elif name == "ceiling":
        cmd = [sys.executable, __file__, "--copy", a, b, f"bench-{tag}", src]
    else:
        assert classpath is not None
        cmd = ["java", "-Xmx1g", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath,
               "org.apache.kafka.connect.mirror.MirrorMaker", str(props), "--clusters", dst]
    logfile = (work / f"{name}.log").open("w")
    proc = subprocess.Popen(cmd, stdout=logfile, stderr=subprocess.STDOUT, start_new_session=True)
    consumer = Consumer({"bootstrap.servers": b, "group.id": f"bench-probe-{tag}"})
    try:
        started = time.monotonic()
        while remote_count(consumer, f"{src}.{warm}", args.partitions) < args.partitions:
            if proc.poll() is not None or time.monotonic() - started > args.timeout:
                raise RuntimeError(f"{name} MirrorMaker did not start mirroring (see {work / (name + '.log')})")
            time.sleep(0.2)  # polling the remote end offsets: the benchmark's own sampling rate
        ready = time.monotonic() - started
        t0 = time.monotonic()
        produced = produce(a, topic, args.records, args.size, args.partitions)
        while (count := remote_count(consumer, f"{src}.{topic}", args.partitions)) < args.records:
            if proc.poll() is not None or time.monotonic() - t0 > args.timeout:
                raise RuntimeError(f"{name}: {count} of {args.records} records mirrored within {args.timeout} s")
            time.sleep(0.05)
        done = time.monotonic()
    finally:
        consumer.close()
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        logfile.close()
    secs = done - t0
    return {"ready_s": ready, "seconds": secs, "records_per_s": args.records / secs,
            "mb_per_s": args.records * args.size / secs / 1e6, "last_record_lag_s": done - produced,
            "produce_s": produced - t0}


def copy_loop(a: str, b: str, prefix: str, alias: str) -> int:
    """The ceiling: consume ``prefix*`` topics from ``a``, produce each record to ``alias.topic`` on
    ``b`` (same partition, key, value, headers, timestamp), no Connect in between."""
    consumer = Consumer({"bootstrap.servers": a, "group.id": f"ceiling-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": b, "linger.ms": 20, "batch.size": 1_000_000,
                         "compression.type": "none", "queue.buffering.max.kbytes": 1_048_576})
    consumer.subscribe([f"^{prefix}.*"])
    while True:
        for m in consumer.consume(10_000, 0.5):
            part = m.partition()
            if m.error() or part is None:
                continue
            while True:
                try:
                    # positional (topic, value, key, partition, on_delivery, callback, timestamp,
                    # headers): keyword arguments cost confluent-kafka twice as much per call
                    producer.produce(f"{alias}.{m.topic()}", m.value(), m.key(), part, None, None,
                                     m.timestamp()[1], m.headers())
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)


def main() -> int:
    if len(sys.argv) == 6 and sys.argv[1] == "--copy":
        return copy_loop(*sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--only", default="strom,kafka", help="comma-separated: strom, kafka, ceiling")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    names = [n for n in args.only.split(",") if n]
    classpath = ensure_kmirror() if "kafka" in names else None
    work = Path(tempfile.mkdtemp(prefix="bench-mirror-"))
    results: dict[str, dict[str, float]] = {}
    with BrokerProcess(work / "a") as a, BrokerProcess(work / "b") as b:
        for name in names:
            log.info("%s: mirroring %d records of %d B over %d partitions ...", name, args.records, args.size,
                     args.partitions)
            results[name] = r = run_one(name, a.bootstrap, b.bootstrap, args, work, classpath)
            log.info("%-6s %9.0f records/s  %7.1f MB/s  last-record lag %6.2f s  (producing took %.1f s, "
                     "ready after %.1f s)", name, r["records_per_s"], r["mb_per_s"], r["last_record_lag_s"],
                     r["produce_s"], r["ready_s"])
    if "strom" in results and "kafka" in results:
        log.info("ratio strom/kafka: %.2fx records/s", results["strom"]["records_per_s"] / results["kafka"]["records_per_s"])
    if "strom" in results and "ceiling" in results:
        log.info("strom/ceiling: %.2f of the raw consumer->producer limit",
                 results["strom"]["records_per_s"] / results["ceiling"]["records_per_s"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
