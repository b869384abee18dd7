"""``strom perf produce|consume``: Kafka's kafka-producer-perf-test and kafka-consumer-perf-test.

``produce`` sends ``--num-records`` records of ``--record-size`` random bytes, at most
``--throughput`` records/s, and prints what ProducerPerformance prints: a window line every
5 s (records sent, records/sec, MB/sec, average and maximum latency) and a final line with the
50th, 95th, 99th and 99.9th latency percentiles. The latency of a record is the time from
``produce()`` to its acknowledgement (librdkafka's message latency). ``consume`` reads
``--messages`` records and prints ConsumerPerformance's summary (MB, MB/sec, records,
records/sec, rebalance and fetch times). Both run against any Kafka cluster.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime

from strom.core.tools.common import (
    ClientConfig,
    ToolError,
    UsageError,
    add_client_args,
    check_bootstrap,
    client_config,
    open_client,
    parse_kv,
    unreachable_hint,
)

REPORT_INTERVAL_MS = 5000  # Kafka's perf tools report every 5 s
MB = 1024.0 * 1024.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    perf = subparsers.add_parser(
        "perf", help="producer and consumer performance tests",
        description="Measure produce and consume throughput and latency against any Kafka cluster, "
                    "printing what Kafka's kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh print.")
    sub = perf.add_subparsers(dest="perf_command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "produce", help="send records and report throughput and latency percentiles",
        description="Send --num-records records of --record-size random bytes to a topic (like "
                    "kafka-producer-perf-test.sh). Every 5 s: records sent, records/sec, MB/sec, avg and "
                    "max latency; at the end the same over the whole run plus the 50th, 95th, 99th and "
                    "99.9th latency percentiles.")
    p.add_argument("--topic", required=True, help="topic to send to")
    p.add_argument("--num-records", type=int, required=True, metavar="N", help="number of records to send")
    p.add_argument("--record-size", type=int, required=True, metavar="B", help="bytes per record value")
    p.add_argument("--throughput", type=float, default=-1, metavar="R",
                   help="at most R records/sec (default: -1, no limit)")
    p.add_argument("--producer-props", nargs="+", default=[], metavar="KEY=VALUE",
                   help="producer properties (librdkafka names, e.g. acks=1 linger.ms=5)")
    p.add_argument("--reporting-interval", type=int, default=REPORT_INTERVAL_MS, metavar="MS",
                   help=f"interval between window lines in ms (default: {REPORT_INTERVAL_MS})")
    add_client_args(p)
    p.set_defaults(func=cmd_perf_produce)

    c = sub.add_parser(
        "consume", help="read records and report throughput",
        description="Read --messages records of a topic from its beginning (like kafka-consumer-perf-test.sh) "
                    "and print start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                    "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec.")
    c.add_argument("--topic", required=True, help="topic to read")
    c.add_argument("--messages", type=int, required=True, metavar="N", help="number of records to read")
    c.add_argument("--group", default=None, metavar="G", help="consumer group (default: perf-consumer-<random>)")
    c.add_argument("--timeout", type=int, default=10_000, metavar="MS",
                   help="give up after MS ms without a record (default: 10000)")
    c.add_argument("--show-detailed-stats", action="store_true",
                   help="also print a line every --reporting-interval")
    c.add_argument("--reporting-interval", type=int, default=REPORT_INTERVAL_MS, metavar="MS",
                   help=f"interval of the detailed stats in ms (default: {REPORT_INTERVAL_MS})")
    c.add_argument("--consumer-property", dest="client_props_extra", action="append", default=[],
                   metavar="KEY=VALUE", help="one consumer property; repeatable")
    add_client_args(c)
    c.set_defaults(func=cmd_perf_consume)


# -- produce ----------------------------------------------------------------------------------


def percentiles(latencies: list[int], *quantiles: float) -> list[int]:
    """Kafka's ProducerPerformance.percentiles: the value at index ``q * count`` of the sorted list."""
    ordered = sorted(latencies)
    if not ordered:
        return [0 for _ in quantiles]
    return [ordered[min(int(q * len(ordered)), len(ordered) - 1)] for q in quantiles]


@dataclass
class Stats:
    """ProducerPerformance.Stats: totals, a reporting window and a latency sample."""

    num_records: int
    reporting_interval_ms: int
    start: float = field(default_factory=time.monotonic)
    count: int = 0
    bytes: int = 0
    max_latency: int = 0
    total_latency: int = 0
    errors: int = 0
    window_start: float = field(default_factory=time.monotonic)
    window_count: int = 0
    window_bytes: int = 0
    window_max: int = 0
    window_total: int = 0
    latencies: list[int] = field(default_factory=list)
    sampling: int = 1

    def __post_init__(self) -> None:
        # Kafka keeps at most 500,000 latencies: one in every `sampling` records.
        self.sampling = max(1, self.num_records // 500_000)

    def record(self, latency_ms: int, size: int) -> None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency_ms
        self.max_latency = max(self.max_latency, latency_ms)
        self.window_count += 1
        self.window_bytes += size
        self.window_total += latency_ms
        self.window_max = max(self.window_max, latency_ms)
        if self.count % self.sampling == 0:
            self.latencies.append(latency_ms)
        if (time.monotonic() - self.window_start) * 1000 >= self.reporting_interval_ms:
            self.print_window()
            self.new_window()

    def print_window(self) -> None:
        elapsed_ms = max((time.monotonic() - self.window_start) * 1000, 1e-3)
        rate = 1000.0 * self.window_count / elapsed_ms
        mb = 1000.0 * self.window_bytes / elapsed_ms / MB
        avg = self.window_total / self.window_count if self.window_count else 0.0
        print(f"{self.window_count} records sent, {rate:.1f} records/sec ({mb:.2f} MB/sec), "
              f"{avg:.1f} ms avg latency, {float(self.window_max):.1f} ms max latency.", flush=True)

    def new_window(self) -> None:
        self.window_start = time.monotonic()
        self.window_count = self.window_bytes = self.window_max = self.window_total = 0

    def print_total(self) -> None:
        elapsed_ms = max((time.monotonic() - self.start) * 1000, 1e-3)
        rate = 1000.0 * self.count / elapsed_ms
        mb = 1000.0 * self.bytes / elapsed_ms / MB
        avg = self.total_latency / self.count if self.count else 0.0
        p50, p95, p99, p999 = percentiles(self.latencies, 0.5, 0.95, 0.99, 0.999)
        print(f"{self.count} records sent, {rate:f} records/sec ({mb:.2f} MB/sec), {avg:.2f} ms avg latency, "
              f"{float(self.max_latency):.2f} ms max latency, {p50} ms 50th, {p95} ms 95th, {p99} ms 99th, "
              f"{p999} ms 99.9th.", flush=True)


def cmd_perf_produce(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaError, Message, Producer

    if args.num_records < 1:
        raise UsageError(f"--num-records expects a positive number, got {args.num_records}")
    if args.record_size < 0:
        raise UsageError(f"--record-size expects a size in bytes, got {args.record_size}")
    if args.reporting_interval <= 0:
        raise UsageError(f"--reporting-interval expects a positive number of ms, got {args.reporting_interval}")
    check_bootstrap(args.bootstrap_server)
    props: dict[str, str] = dict(parse_kv(item, "--producer-props") for item in args.producer_props)
    conf = client_config(args, base={"acks": "all"})
    conf.update(props)
    producer = open_client(Producer, conf, args.bootstrap_server)
    rng = random.Random()
    # Kafka's payload: random upper-case letters, one buffer reused for every record.
    payload = bytes(rng.randrange(65, 91) for _ in range(args.record_size))
    stats = Stats(args.num_records, args.reporting_interval)

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            stats.errors += 1
            if stats.errors == 1:
                print(f"error: delivery failed: {err.name()}: {err.str()}", file=sys.stderr)
            return
        stats.record(int((msg.latency() or 0.0) * 1000), len(payload))

    started = time.monotonic()
    for i in range(args.num_records):
        if args.throughput > 0:
            # ThroughputThrottler: sleep until this record is due at the target rate.
            due = started + i / args.throughput
            while (delay := due - time.monotonic()) > 0:
                producer.poll(min(delay, 0.1))
        while True:
            try:
                producer.produce(args.topic, payload, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)  # the local queue is full: serve deliveries until there is room
        producer.poll(0)
    while producer.flush(1.0) > 0:
        if stats.count == 0 and stats.errors == 0 and time.monotonic() - started > 30:
            raise ToolError(f"no record acknowledged within 30 s: {unreachable_hint(args.bootstrap_server)}")
    stats.print_total()
    if stats.errors:
        raise ToolError(f"{stats.errors} of {args.num_records} records failed")
    return 0


# -- consume ----------------------------------------------------------------------------------


def _when(t: float) -> str:
    """ConsumerPerformance's date format: yyyy-MM-dd HH:mm:ss:SSS."""
    d = datetime.fromtimestamp(t)
    return d.strftime("%Y-%m-%d %H:%M:%S:") + f"{d.microsecond // 1000:03d}"


HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
          "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def cmd_perf_consume(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer

    if args.messages < 1:
        raise UsageError(f"--messages expects a positive number, got {args.messages}")
    check_bootstrap(args.bootstrap_server)
    base: ClientConfig = {"group.id": args.group or f"perf-consumer-{random.randrange(100000)}",
                          "auto.offset.reset": "earliest", "enable.auto.commit": True}
    conf = client_config(args, base)
    conf.update(dict(parse_kv(item, "--consumer-property") for item in args.client_props_extra))
    assigned_at: list[float] = []
    consumer = open_client(Consumer, conf, args.bootstrap_server)
    start_wall, start = time.time(), time.monotonic()
    consumer.subscribe([args.topic], on_assign=lambda c, parts: assigned_at.append(time.monotonic()))
    count = size = 0
    last_record = time.monotonic()
    window_start, window_count, window_bytes = start, 0, 0
    if args.show_detailed_stats:
        print("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
              "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
    try:
        while count < args.messages:
            if (time.monotonic() - last_record) * 1000 > args.timeout:
                if count == 0 and not assigned_at:
                    raise ToolError(f"no partition assigned within {args.timeout} ms: "
                                    f"{unreachable_hint(args.bootstrap_server)}")
                print(f"WARNING: Exiting before consuming the expected number of messages: timeout "
                      f"({args.timeout} ms) exceeded. You can use the --timeout option to increase the timeout.",
                      file=sys.stderr)
                break
            for msg in consumer.consume(min(500, args.messages - count), 0.5):
                if msg.error() is not None:
                    continue
                count += 1
                n = len(msg.value() or b"") + len(msg.key() or b"")
                size += n
                window_count += 1
                window_bytes += n
                last_record = time.monotonic()
            now = time.monotonic()
            if args.show_detailed_stats and (now - window_start) * 1000 >= args.reporting_interval:
                span = max(now - window_start, 1e-3)
                print(f"{_when(time.time())}, 0, {size / MB:.4f}, {window_bytes / MB / span:.4f}, {count}, "
                      f"{window_count / span:.4f}, 0, {int(span * 1000)}, {window_bytes / MB / span:.4f}, "
                      f"{window_count / span:.4f}", flush=True)
                window_start, window_count, window_bytes = now, 0, 0
    finally:
        consumer.close()
    end = time.monotonic()
    elapsed = max(end - start, 1e-3)
    rebalance_ms = int((assigned_at[0] - start) * 1000) if assigned_at else 0
    fetch_s = max(elapsed - rebalance_ms / 1000, 1e-3)
    print(HEADER)
    print(f"{_when(start_wall)}, {_when(start_wall + elapsed)}, {size / MB:.4f}, {size / MB / elapsed:.4f}, "
          f"{count}, {count / elapsed:.4f}, {rebalance_ms}, {int(fetch_s * 1000)}, {size / MB / fetch_s:.4f}, "
          f"{count / fetch_s:.4f}", flush=True)
    return 0
