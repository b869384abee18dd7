"""File → topic → file: strom.connect beside Kafka Connect and plain confluent-kafka, same broker, same run.

One bundled strom broker is started; an input file of ``--records`` lines of about 100 bytes is
written once. Each pipeline then copies it into a fresh 1-partition topic and from there into
its own output file, as its own process:

- strom: ``python -m strom.connect.cli standalone`` with FileStreamSource + FileStreamSink and
  StringConverter (offsets file in a temp dir);
- kconnect: Kafka Connect 4.3.1's own standalone worker
  (``org.apache.kafka.connect.cli.ConnectStandalone``, jars from Maven Central via
  ``bench/kconnect/pom.xml`` into ``.cache/kconnect/lib``) with its FileStream connectors and
  StringConverter;
- plain: one Python process with a confluent-kafka producer thread reading the file and a
  consumer thread writing the output file (the same shape as a Connect worker: one process, a
  source side and a sink side).

Before anything is timed the script compiles strom's bytecode (``peers.warm_bytecode``: what pip
does for an installed wheel) and lets one consumer group form (the broker creates
``__consumer_offsets`` then, not inside the first pipeline's clock). The clock runs from the
process start (start-up included: JVM, interpreter) until the output file holds every line; the output must then equal the input byte for byte (one partition keeps
the order). Both workers run with their defaults (``offset.flush.interval.ms`` 60 s, so no
offset commit falls inside a run of this size); sink files are written as records arrive
(Kafka's FileStreamSink writes through on every ``println``, strom's flushes after every put). Pipelines run in turn, never at
the same time; ``--repeat`` runs the whole set again and the median is reported.

    python bench/connect_pipeline.py                         # 1,000,000 records, all three
    python bench/connect_pipeline.py --records 200000 --repeat 3 --only strom,plain
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
from peers import ROOT, StromBroker, free_port, stop_process_group, tree_cpu_seconds, warm_bytecode

KCONNECT_SRC = ROOT / "bench" / "kconnect"
KCONNECT_LIB = ROOT / ".cache" / "kconnect" / "lib"
PIPELINES = ("strom", "kconnect", "plain")
LINE_BYTES = 100  # including the newline

# The plain clients' process: producer thread reads the file, consumer thread writes the output.
PLAIN_APP = r'''
import sys, threading
from confluent_kafka import Consumer, Producer

bootstrap, topic, src, dst, group = sys.argv[1:6]

def produce():
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "enable.idempotence": True})
    send = p.produce
    tail = b""
    with open(src, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()
            for line in lines:
                while True:
                    try:
                        send(topic, line)
                        break
                    except BufferError:
                        p.poll(0.05)
            p.poll(0)
    if tail:
        send(topic, tail)
    p.flush(60)

def consume():
    # fetch.queue.backoff.ms as strom's sink worker sets it (librdkafka's 1 s default stalls a
    # consumer that does per-record work); the plain consumer gets the same advantage.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "fetch.queue.backoff.ms": 1})
    c.subscribe([topic])
    with open(dst, "ab") as out:
        while True:
            msgs = c.consume(1000, 0.5)
            if msgs:
                out.write(b"".join([m.value() + b"\n" for m in msgs if m.error() is None]))
                out.flush()

threading.Thread(target=consume, daemon=True).start()
produce()
threading.Event().wait()  # the bench kills the process once the output is complete
'''


def status(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def ensure_kconnect() -> str:
    """Resolve Kafka Connect's jars from Maven Central (first run only); returns the classpath."""
    if not any(KCONNECT_LIB.glob("connect-file-*.jar")):
        status("resolving Kafka Connect from Maven Central (first run only)")
        subprocess.run(["mvn", "-q", "-B", "-f", str(KCONNECT_SRC / "pom.xml"), "dependency:copy-dependencies",
                        "-DincludeScope=runtime", f"-DoutputDirectory={KCONNECT_LIB}"], check=True)
    return f"{KCONNECT_LIB}/*"


def warm_up_groups(bootstrap: str, admin: AdminClient) -> None:
    """Have one consumer group join before anything is timed: the broker creates
    ``__consumer_offsets`` (50 partitions) at the first group's FindCoordinator, which would
    otherwise land in whichever pipeline runs first."""
    topic = f"connect-bench-warmup-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"warmup-{topic}",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not consumer.assignment():
            if time.monotonic() > deadline:
                raise TimeoutError("the warm-up consumer group never formed")
            consumer.poll(0.2)
    finally:
        consumer.close()
    admin.delete_topics([topic])


def write_input(path: Path, records: int) -> None:
    """``records`` lines of LINE_BYTES bytes (newline included), each unique and numbered."""
    filler = "abcdefghijklmnopqrstuvwxyz0123456789" * 3
    with open(path, "w", encoding="ascii") as f:
        block: list[str] = []
        for i in range(records):
            head = f"record-{i:09d} "
            block.append(head + filler[: LINE_BYTES - 1 - len(head)] + "\n")
            if len(block) == 10000:
                f.write("".join(block))
                block.clear()
        f.write("".join(block))


def write_props(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


def pipeline_command(name: str, bootstrap: str, topic: str, src: Path, dst: Path, work: Path,
                     classpath: str | None) -> list[str]:
    if name == "plain":
        return [sys.executable, "-c", PLAIN_APP, bootstrap, topic, str(src), str(dst), f"plain-{topic}"]
    worker = {
        "bootstrap.servers": bootstrap,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "offset.storage.file.filename": str(work / "offsets"),
        "listeners": f"http://127.0.0.1:{free_port()}",
    }
    # Kafka's class names: the same files configure both workers.
    source = {"name": f"src-{topic}", "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
              "tasks.max": "1", "file": str(src), "topic": topic}
    sink = {"name": f"sink-{topic}", "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1", "file": str(dst), "topics": topic}
    files = [str(write_props(work / "worker.properties", worker)), str(write_props(work / "source.properties", source)),
             str(write_props(work / "sink.properties", sink))]
    if name == "strom":
        return [sys.executable, "-m", "strom.connect.cli", "standalone", *files]
    assert classpath is not None
    return ["java", "-Xmx1g", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath,
            "org.apache.kafka.connect.cli.ConnectStandalone", *files]


def run_one(name: str, bootstrap: str, admin: AdminClient, src: Path, expected_size: int, records: int,
            classpath: str | None, timeout: float) -> tuple[float, float]:
    """One pipeline run; returns (seconds until the output is complete, CPU seconds of its process)."""
    topic = f"connect-bench-{name}-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    work = Path(tempfile.mkdtemp(prefix=f"connect-bench-{name}-"))
    dst = work / "out.txt"
    log = open(work / "process.log", "wb")  # noqa: SIM115 - closed in finally
    cmd = pipeline_command(name, bootstrap, topic, src, dst, work, classpath)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=work, start_new_session=True)
    cpu = 0.0
    try:
        while True:
            size = dst.stat().st_size if dst.exists() else 0
            if size >= expected_size:
                break
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; log: {work / 'process.log'}")
            if time.perf_counter() - start > timeout:
                raise TimeoutError(f"{name}: {size} of {expected_size} bytes after {timeout}s; "
                                   f"log: {work / 'process.log'}")
            time.sleep(0.01)
        elapsed = time.perf_counter() - start
        cpu = tree_cpu_seconds(proc.pid)
    finally:
        stop_process_group(proc, 30)
        log.close()
    verify(src, dst, records, name)
    shutil.rmtree(work, ignore_errors=True)
    admin.delete_topics([topic])
    return elapsed, cpu


def verify(src: Path, dst: Path, records: int, name: str) -> None:
    """The output must be the input, line for line in order (one partition)."""
    with open(src, "rb") as a, open(dst, "rb") as b:
        while True:
            x, y = a.read(1 << 20), b.read(1 << 20)
            if x != y:
                raise AssertionError(f"{name}: output differs from the input ({dst})")
            if not x:
                break
    with open(dst, "rb") as b:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: b.read(1 << 20), b""))
    if lines != records:
        raise AssertionError(f"{name}: {lines} lines written, {records} expected")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1, help="run every pipeline this many times; report the median")
    ap.add_argument("--only", default=",".join(PIPELINES), help="comma-separated subset of " + ",".join(PIPELINES))
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one pipeline run may take")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n]
    unknown = set(names) - set(PIPELINES)
    if unknown:
        ap.error(f"unknown pipelines: {', '.join(sorted(unknown))}")
    classpath = ensure_kconnect() if "kconnect" in names else None
    warm_bytecode()

    data = Path(tempfile.mkdtemp(prefix="connect-bench-data-"))
    src = data / "input.txt"
    write_input(src, args.records)
    expected_size = src.stat().st_size
    status(f"input: {args.records:,} lines, {expected_size:,} bytes")
    broker = StromBroker().start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    warm_up_groups(broker.bootstrap, admin)
    results: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    try:
        for rep in range(args.repeat):
            for name in names:
                elapsed, cpu = run_one(name, broker.bootstrap, admin, src, expected_size, args.records,
                                       classpath, args.timeout)
                results[name].append((elapsed, cpu))
                status(f"run {rep + 1}/{args.repeat} {name:9s} {elapsed:7.2f}s  "
                       f"{args.records / elapsed:>10,.0f} records/s  cpu {cpu:6.1f}s")
    finally:
        del admin  # closes its connections before the broker goes away (no reconnect noise)
        broker.stop()
        shutil.rmtree(data, ignore_errors=True)

    rate = {n: args.records / statistics.median(e for e, _ in results[n]) for n in names}
    print(f"\nfile -> topic -> file, {args.records:,} records of {LINE_BYTES} bytes, 1 partition, "
          f"strom broker; median of {args.repeat}")
    print(f"{'pipeline':10s} {'seconds':>9s} {'records/s':>12s} {'cpu s':>7s}   runs (s)")
    for n in names:
        times = [e for e, _ in results[n]]
        cpu = statistics.median(c for _, c in results[n])
        print(f"{n:10s} {statistics.median(times):9.2f} {rate[n]:12,.0f} {cpu:7.1f}   "
              + " ".join(f"{t:.2f}" for t in times))
    if "strom" in rate:
        for other, label, floor in (("kconnect", "Kafka Connect", 1.0), ("plain", "plain clients", 0.8)):
            if other in rate:
                ratio = rate["strom"] / rate[other]
                verdict = "meets" if ratio >= floor else "BELOW"
                print(f"strom/{label}: {ratio:.2f}x ({verdict} the {floor:.1f}x floor)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
