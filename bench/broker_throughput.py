"""Broker throughput: produce then consume fixed-size records through strom, Kafka and Tansu.

Workloads (record counts can be scaled down with ``--records``):

- small: 1,000,000 records of 100 bytes
- large:   100,000 records of 10 KiB

For every broker (``--brokers strom,kafka,tansu``, each started fresh for the run) and workload,
a topic with ``--partitions`` (default 3) partitions, replication factor 1, is created with
AdminClient. confluent-kafka then produces the records (acks=1, linger.ms=5, batch.size=1048576,
compression none; records go round-robin to the partitions by explicit partition number so every
broker gets the same spread) and a consumer with assigned partitions (no group membership,
default fetch settings) reads from the beginning until it has every record.

Printed per phase: msgs/s, MB/s (10^6 bytes of record values), CPU seconds of the broker's
process tree (user+sys, from /proc) and of this client process, then the ratios of the base
broker (strom unless absent) to each other broker. ``--json out.json`` writes the same data.

Run: ``python bench/broker_throughput.py [--workload small|large|both] [--records N]
[--brokers strom,kafka,tansu] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka import libversion as rdkafka_version
from confluent_kafka import version as ck_version
from confluent_kafka.admin import AdminClient, NewTopic
from peers import (
    BROKER_NAMES,
    Broker,
    machine_busy_seconds,
    machine_steal_seconds,
    make_broker,
    peer_versions,
    tree_cpu_seconds,
)

WORKLOADS: dict[str, tuple[int, int]] = {  # name -> (records, value size in bytes)
    "small": (1_000_000, 100),
    "large": (100_000, 10 * 1024),
}
PRODUCER_CONFIG: dict[str, Any] = {
    "acks": 1,
    "linger.ms": 5,
    "batch.size": 1_048_576,
    "compression.type": "none",
}
# Wire-level fetch settings (fetch.min.bytes, fetch.max.bytes, max.partition.fetch.bytes,
# fetch.wait.max.ms) stay at librdkafka's defaults. Only the client's local backpressure timer is
# shortened: when the Python loop falls behind and librdkafka's queue holds queued.min.messages,
# it pauses fetching for fetch.queue.backoff.ms (default 1000 ms). Those 1 s stalls made the
# consume time a multiple of the client's timer rather than of the broker's speed, penalising
# the faster broker (it fills the queue sooner). --default-consumer-backoff restores the default.
CONSUMER_CONFIG: dict[str, Any] = {"fetch.queue.backoff.ms": 10}
PROGRESS_EVERY = 2.0  # seconds between status lines
STALL_TIMEOUT = 60.0  # a phase with no progress for this long fails


@dataclass
class PhaseResult:
    broker: str
    workload: str
    phase: str  # "produce" | "consume"
    records: int
    value_bytes: int
    partitions: int
    seconds: float = 0.0
    broker_cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    other_cpu_s: float = 0.0  # the rest of the machine: other processes disturbing the measurement
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def msgs_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.records * self.value_bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["msgs_per_s"] = round(self.msgs_per_s, 1)
        data["mb_per_s"] = round(self.mb_per_s, 3)
        return data


class Progress:
    """Prints '[broker workload phase] done/total, rec/s so far' at most every PROGRESS_EVERY s."""

    def __init__(self, label: str, total: int) -> None:
        self.label, self.total = label, total
        self.start = time.monotonic()
        self.next_at = self.start + PROGRESS_EVERY

    def maybe(self, done: int, now: float, what: str = "records") -> None:
        if now >= self.next_at:
            self.next_at = now + PROGRESS_EVERY
            rate = done / (now - self.start)
            print(f"  [{self.label}] {done:,}/{self.total:,} {what}, {rate:,.0f} rec/s so far",
                  file=sys.stderr, flush=True)


def _client_cpu() -> float:
    t = os.times()
    return t.user + t.system


class PhaseClock:
    """Wall time, broker-tree CPU and client CPU across one phase."""

    def __init__(self, broker_pid: int) -> None:
        self.pid = broker_pid

    def __enter__(self) -> PhaseClock:
        self.begin()
        return self

    def begin(self) -> None:
        """(Re)start the measurement: phases call it once their client is connected."""
        self.cpu0 = tree_cpu_seconds(self.pid)
        self.client0 = _client_cpu()
        self.busy0 = machine_busy_seconds()
        self.steal0 = machine_steal_seconds()
        self.t0 = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.monotonic() - self.t0
        self.client_cpu = _client_cpu() - self.client0
        self.broker_cpu = tree_cpu_seconds(self.pid) - self.cpu0
        busy = machine_busy_seconds() - self.busy0
        # Steal: time the host gave our CPUs to other guests. Kept apart from "other", which is
        # work inside this machine (other processes, other containers sharing it).
        self.steal = machine_steal_seconds() - self.steal0
        self.other_cpu = max(0.0, busy - self.steal - self.broker_cpu - self.client_cpu)


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Create ``topic`` and wait until metadata shows every partition with a leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=timeout)[topic].result(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions \
                and all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} did not get {partitions} partitions with leaders in {timeout}s")


def produce(bootstrap: str, topic: str, records: int, size: int, partitions: int, label: str,
            clock: PhaseClock | None = None) -> list[str]:
    """Produce ``records`` values of ``size`` bytes and wait until all are acknowledged.

    The client connects and loads the topic's metadata before ``clock.begin()``: connection
    set-up is not part of the measured phase.
    """
    failures: list[str] = []

    def on_error(err: Any, _msg: Any) -> None:  # only called for failures (delivery.report.only.error)
        failures.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG,
                         "delivery.report.only.error": True, "on_delivery": on_error})
    producer.list_topics(topic, timeout=10)
    payload = os.urandom(size)
    if clock is not None:
        clock.begin()
    progress = Progress(label, records)
    send, poll = producer.produce, producer.poll
    for i in range(records):
        try:
            send(topic, payload, partition=i % partitions)
        except BufferError:  # local queue full: let librdkafka drain it, then retry once more
            while True:
                poll(0.01)
                try:
                    send(topic, payload, partition=i % partitions)
                    break
                except BufferError:
                    continue
        if not i & 0x3FFF:
            poll(0)
            progress.maybe(i, time.monotonic(), "sent")
    last_left, last_change = -1, time.monotonic()
    while (left := producer.flush(PROGRESS_EVERY)) > 0:
        now = time.monotonic()
        progress.maybe(records - left, now, "acknowledged")
        if left != last_left:
            last_left, last_change = left, now
        elif now - last_change > STALL_TIMEOUT:
            raise TimeoutError(f"{left} records still unacknowledged after {STALL_TIMEOUT}s without progress")
    if failures:
        raise RuntimeError(f"{len(failures)} delivery failures, first: {failures[0]}")
    return []


def stored_records(bootstrap: str, topic: str, partitions: int) -> int:
    """Sum of the partitions' high watermarks: what the broker says it stored."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-wm-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))
    finally:
        c.close()


def consume(bootstrap: str, topic: str, records: int, size: int, partitions: int, label: str,
            clock: PhaseClock | None = None) -> list[str]:
    """Read every partition from offset 0 until ``records`` records arrived.

    Metadata is loaded before ``clock.begin()``: without it librdkafka's offset lookup for
    OFFSET_BEGINNING waits a fixed 500 ms for the partition leader, a client artefact.
    """
    notes: list[str] = []
    # group.id is required by the client, but with assign() and no commits there is no membership.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "enable.auto.offset.store": False, **CONSUMER_CONFIG})
    try:
        c.list_topics(topic, timeout=10)
        if clock is not None:
            clock.begin()
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        progress = Progress(label, records)
        got, last_change = 0, time.monotonic()
        wrong_size = 0
        while got < records:
            # consume() waits until it has num_messages or the timeout passed: never ask for more
            # than are still due, or the last call would idle for the whole timeout.
            batch = c.consume(min(10_000, records - got), 0.5)
            now = time.monotonic()
            if batch:
                last_change = now
                for m in batch:
                    if m.error() is not None:
                        raise RuntimeError(f"consume error: {m.error()}")
                got += len(batch)
                # One value per batch is enough to catch a broker that mangles record values.
                value = batch[-1].value()
                if value is None or len(value) != size:
                    wrong_size += 1
            elif now - last_change > STALL_TIMEOUT:
                raise TimeoutError(f"only {got}/{records} records after {STALL_TIMEOUT}s without progress")
            progress.maybe(got, now)
        if got != records:
            notes.append(f"received {got} records, expected {records}")
        # Each partition's position must be exactly its share of the round-robin spread: this
        # catches a broker that drops records in one partition and duplicates them in another.
        positions = {tp.partition: tp.offset for tp in
                     c.position([TopicPartition(topic, p) for p in range(partitions)])}
        expected = {p: records // partitions + (p < records % partitions) for p in range(partitions)}
        if positions != expected:
            notes.append(f"consumer positions {positions}, expected {expected}")
        if wrong_size:
            notes.append(f"{wrong_size} sampled values had the wrong size")
        return notes
    finally:
        c.close()


def run_workload(broker: Broker, workload: str, records: int, size: int, partitions: int) -> list[PhaseResult]:
    topic = f"bench-{workload}-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions)
    results = []
    for phase, fn in (("produce", produce), ("consume", consume)):
        res = PhaseResult(broker.name, workload, phase, records, size, partitions)
        results.append(res)
        label = f"{broker.name} {workload} {phase}"
        print(f"  [{label}] {records:,} x {size:,} B on {topic} ({partitions} partitions)",
              file=sys.stderr, flush=True)
        try:
            with PhaseClock(broker.pid) as clock:
                res.notes += fn(broker.bootstrap, topic, records, size, partitions, label, clock)
        except Exception as exc:
            res.error = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
            # A failed produce makes the consume phase meaningless.
            break
        res.seconds, res.broker_cpu_s, res.client_cpu_s = clock.seconds, clock.broker_cpu, clock.client_cpu
        res.other_cpu_s = clock.other_cpu
        if phase == "produce":
            stored = stored_records(broker.bootstrap, topic, partitions)
            if stored != records:
                res.notes.append(f"ListOffsets(latest) sums to {stored}, expected {records}")
    return results


def warm_up(broker: Broker, records: int, partitions: int) -> None:
    """Unmeasured produce+consume so JIT/caches/connections are warm for every broker alike."""
    if records <= 0:
        return
    topic = f"bench-warmup-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions)
    produce(broker.bootstrap, topic, records, 100, partitions, f"{broker.name} warm-up produce")
    consume(broker.bootstrap, topic, records, 100, partitions, f"{broker.name} warm-up consume")


def run_broker(name: str, plan: list[tuple[str, int, int]], partitions: int, warmup: int) -> list[PhaseResult]:
    print(f"== {name}: starting", file=sys.stderr, flush=True)
    broker: Broker | None = None
    try:
        broker = make_broker(name)
        broker.start()
    except Exception as exc:
        traceback.print_exc()
        if broker is not None:
            broker.stop()  # adapters stop a half-started broker themselves; this is a safety net
        err = f"broker did not start: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return [PhaseResult(name, w, ph, n, s, partitions, error=err)
                for w, n, s in plan for ph in ("produce", "consume")]
    try:
        print(f"== {name}: {broker.bootstrap} (pid {broker.pid})", file=sys.stderr, flush=True)
        warm_up(broker, warmup, partitions)
        results: list[PhaseResult] = []
        for workload, records, size in plan:
            results += run_workload(broker, workload, records, size, partitions)
        return results
    finally:
        broker.stop()


def machine_info() -> dict[str, Any]:
    model = ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), "")
    except FileNotFoundError:
        pass
    mem_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    return {
        "cpu_model": model or platform.processor(),
        "cores": os.cpu_count(),
        "ram_gib": round(mem_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "confluent_kafka": ck_version() if isinstance(ck_version(), str) else ck_version()[0],
        "librdkafka": rdkafka_version()[0],
        "peers": peer_versions(),
    }


def ratios(results: list[PhaseResult], base: str) -> list[dict[str, Any]]:
    """base/other for throughput (higher = base faster) and broker CPU (lower = base cheaper)."""
    ok = {(r.broker, r.workload, r.phase): r for r in results if r.error is None and r.seconds > 0}
    out = []
    for (b, workload, phase), other in ok.items():
        mine = ok.get((base, workload, phase))
        if b == base or mine is None:
            continue
        out.append({
            "pair": f"{base}/{b}", "workload": workload, "phase": phase,
            "throughput": round(mine.msgs_per_s / other.msgs_per_s, 3),
            "broker_cpu": round(mine.broker_cpu_s / other.broker_cpu_s, 3) if other.broker_cpu_s else None,
        })
    return out


def median_results(rounds: list[list[PhaseResult]]) -> list[PhaseResult]:
    """Per (broker, workload, phase), the round with the median throughput; a failure in any round wins."""
    groups: dict[tuple[str, str, str], list[PhaseResult]] = {}
    for rnd in rounds:
        for r in rnd:
            groups.setdefault((r.broker, r.workload, r.phase), []).append(r)
    out = []
    for rows in groups.values():
        failed = [r for r in rows if r.error is not None]
        if failed:
            out.append(failed[0])
            continue
        rows.sort(key=lambda r: r.msgs_per_s)
        out.append(rows[(len(rows) - 1) // 2])
    return out


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))
    body = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join([line, "  ".join("-" * w for w in widths), *body])


def render(results: list[PhaseResult], rat: list[dict[str, Any]], partitions: int) -> str:
    rows = []
    for r in results:
        if r.error:
            rows.append([r.broker, r.workload, r.phase, f"{r.records:,}", "-", "-", "-", "-", "-", "-", "FAILED"])
        else:
            rows.append([r.broker, r.workload, r.phase, f"{r.records:,}", f"{r.seconds:.2f}",
                         f"{r.msgs_per_s:,.0f}", f"{r.mb_per_s:,.1f}", f"{r.broker_cpu_s:.2f}",
                         f"{r.client_cpu_s:.2f}", f"{r.other_cpu_s:.2f}", "; ".join(r.notes) or "ok"])
    parts = [f"topic: {partitions} partitions, replication factor 1, created with AdminClient per workload",
             _table(["broker", "workload", "phase", "records", "secs", "msgs/s", "MB/s", "broker CPU s",
                     "client CPU s", "other CPU s", "status"], rows)]
    errors = [f"{r.broker} {r.workload} {r.phase}: {r.error}" for r in results if r.error]
    if errors:
        parts.append("errors:\n  " + "\n  ".join(dict.fromkeys(errors)))
    if rat:
        parts.append(_table(["ratio", "workload", "phase", "throughput", "broker CPU"],
                            [[x["pair"], x["workload"], x["phase"], f"{x['throughput']:.2f}",
                              "-" if x["broker_cpu"] is None else f"{x['broker_cpu']:.2f}"] for x in rat]))
        parts.append("throughput ratio > 1: first broker faster; broker CPU ratio < 1: first broker cheaper")
    return "\n\n".join(parts)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--workload", choices=["small", "large", "both"], default="both")
    ap.add_argument("--records", type=int, default=None,
                    help="records per workload (default: 1,000,000 small / 100,000 large)")
    ap.add_argument("--brokers", default=",".join(BROKER_NAMES),
                    help="comma-separated subset of strom,kafka,tansu (run in this order)")
    ap.add_argument("--partitions", type=int, default=3, help="partitions of each benchmark topic")
    ap.add_argument("--warmup", type=int, default=10_000, help="unmeasured 100-byte records first (0: none)")
    ap.add_argument("--default-consumer-backoff", action="store_true",
                    help="keep librdkafka's fetch.queue.backoff.ms=1000 (see CONSUMER_CONFIG)")
    ap.add_argument("--base", default="strom", help="broker the ratios are taken against (default strom)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds over all brokers; tables show the median round (default 1)")
    ap.add_argument("--json", dest="json_path", type=Path, default=None, help="also write results here")
    args = ap.parse_args(argv)
    args.brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    unknown = set(args.brokers) - set(BROKER_NAMES)
    if unknown or not args.brokers:
        ap.error(f"--brokers takes names from {','.join(BROKER_NAMES)}, got {','.join(sorted(unknown))}")
    if args.records is not None and args.records <= 0:
        ap.error("--records must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.default_consumer_backoff:
        CONSUMER_CONFIG.pop("fetch.queue.backoff.ms", None)
    names = ["small", "large"] if args.workload == "both" else [args.workload]
    plan = [(w, args.records or WORKLOADS[w][0], WORKLOADS[w][1]) for w in names]
    rounds: list[list[PhaseResult]] = []
    for round_no in range(args.repeat):
        if args.repeat > 1:
            print(f"== round {round_no + 1} of {args.repeat}", file=sys.stderr, flush=True)
        # Brokers take turns within each round, so slow drift of the machine hits all of them.
        rounds.append([r for name in args.brokers for r in run_broker(name, plan, args.partitions, args.warmup)])
    results = median_results(rounds)
    base = args.base if args.base in args.brokers else args.brokers[0]
    rat = ratios(results, base)
    if args.repeat > 1:
        print(f"median of {args.repeat} rounds per (broker, workload, phase), by msgs/s")
    print(render(results, rat, args.partitions))
    if args.json_path is not None:
        doc = {"machine": machine_info(), "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
               "partitions": args.partitions, "producer_config": PRODUCER_CONFIG,
               "consumer_config": CONSUMER_CONFIG, "warmup_records": args.warmup,
               "repeat": args.repeat, "results": [r.to_json() for r in results],
               "rounds": [[r.to_json() for r in rnd] for rnd in rounds], "ratios": rat, "ratio_base": base}
        args.json_path.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"\nwrote {args.json_path}")
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
