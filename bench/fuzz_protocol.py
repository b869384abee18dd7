"""The protocol fuzzer's full run: a million mutated requests against a real broker process.

Starts a broker (``BrokerProcess``, auto topic creation off so flipped names create nothing),
creates the topic the seeds produce to and fetch from, builds seeds for every API and version
the broker advertises in ApiVersions and sends ``--frames`` mutated frames over
``--concurrency`` connections (``strom.core.protocol.fuzz``; the CI slice is
tests/faults/test_fuzz_protocol.py). Reports frames/s, frames answered vs connections closed
vs frames left unanswered (an acks=0 Produce, a JoinGroup waiting for its rebalance), per
mutation kind, the broker's RSS before (after a warm-up that sends every seed once unmutated)
and after (once the broker has settled: the run's last connections closed, a real client's
produce and consume round trip done, parked requests given a minute to expire), and
any ERROR or traceback the broker logged. Exit code 1 when the broker died, logged an error or
traceback, or its RSS did not return within 20% of the start.

    python bench/fuzz_protocol.py --frames 1000000 [--seed 1] [--concurrency 16] [--json out.json] [--apis ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.protocol import fuzz, fuzz_harness
from strom.core.protocol.fuzz_harness import LogTap, rss_kib, seeds_for
from strom.core.testing import BrokerProcess

TOPIC = "fuzz"
BROKER_CONFIG = {
    **fuzz_harness.BROKER_CONFIG,  # no topic auto-creation, no initial rebalance delay
    # Kafka's new-member JoinGroup timeout is 5 minutes: fuzzed JoinGroups parked in a rebalance
    # a fuzzed 2^31 ms rebalance timeout holds open stay that long (as on Kafka), each with its
    # member, task and connection. Shortened so they are gone within the minute "after" waits.
    "strom.group.new.member.join.timeout.ms": "20000",
    # Kafka deletes Empty groups that have no offsets every 10 minutes; fuzzed group ids leave
    # many. The same policy, run often enough to be done within the minute "after" waits.
    "offsets.retention.check.interval.ms": "10000",
}


def rss_text(pid: int) -> str:
    return (f"RSS {rss_kib(pid) / 1024:.1f} MiB (anon {rss_kib(pid, 'RssAnon') / 1024:.1f}, "
            f"file {rss_kib(pid, 'RssFile') / 1024:.1f})")


def client_round_trip(bootstrap: str, tag: str) -> None:
    """A confluent-kafka admin client, producer and consumer still work (raises otherwise).

    On a topic of its own, created now: the fuzzed DeleteTopics and DeleteRecords requests may
    have removed or emptied the seeds' topic, as a real client sending them would have.
    """
    topic = f"fuzz-check-{tag}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    errors: list[Any] = []
    offsets: list[int] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            offsets.append(msg.offset())

    producer.produce(topic, value=tag.encode(), partition=0, on_delivery=delivered)
    if producer.flush(30) != 0 or errors or not offsets:
        raise RuntimeError(f"produce after the fuzz run failed: {errors}")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"fuzz-check-{tag}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, offsets[0])])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None and msg.value() == tag.encode():
                return
        raise RuntimeError("consumer did not read the record produced after the fuzz run")
    finally:
        consumer.close()


class CountingTap(LogTap):
    """The harness's LogTap (every ERROR and traceback line kept), also counting the lines: the
    report gives the log's length."""

    def __init__(self) -> None:
        super().__init__()
        self.lines = 0

    def append(self, line: str) -> None:
        self.lines += 1
        super().append(line)


def start_broker() -> tuple[BrokerProcess, CountingTap, list[fuzz.Seed], dict[int, tuple[int, int]]]:
    broker = BrokerProcess(config=BROKER_CONFIG).start()
    tap = CountingTap()
    for line in broker.output:
        tap.append(line)  # one by one, as fuzz_harness.tap_output: deque.extend would skip the checks
    broker.output = tap
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    versions, seeds = seeds_for(broker.bootstrap, TOPIC, b"fuzz-value-" * 8)
    return broker, tap, seeds, versions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1, help="run seed: frame i of a seed is always the same bytes")
    parser.add_argument("--concurrency", type=int, default=16, help="connections sending at once")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for an answer")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--apis", help="fuzz only these APIs: comma-separated keys or names (JoinGroup,0,...); "
                                       "the warm-up still sends every seed")
    args = parser.parse_args()

    broker, tap, seeds, versions = start_broker()
    try:
        assert broker.proc is not None
        pid = broker.proc.pid
        # Warm-up, so "before" holds what any client traffic loads once: a real client's round
        # trip, then every seed unmutated (kio classes, frame-check plans, coordinator partitions).
        client_round_trip(broker.bootstrap, "warmup")
        print(f"cold {rss_text(pid)}; warm-up: {fuzz.send_seeds(broker.bootstrap, seeds)} of {len(seeds)} seeds "
              "answered", flush=True)
        if args.apis:
            wanted = {a.strip().lower() for a in args.apis.split(",") if a.strip()}
            seeds = [s for s in seeds if str(s.api_key) in wanted or s.name.lower() in wanted]
            if not seeds:
                raise SystemExit(f"--apis {args.apis}: no seed of those APIs")
        rss_before = rss_kib(pid)
        print(f"broker pid {pid}, {len(seeds)} seeds over {len(versions)} APIs, warm {rss_text(pid)}; "
              f"sending {args.frames:,} frames over {args.concurrency} connections", flush=True)

        def progress(s: fuzz.FuzzStats) -> None:
            print(f"  {s.sent:>9,} frames {s.frames_per_second:>7,.0f}/s  answered {s.answered:,} closed "
                  f"{s.closed:,} unanswered {s.unanswered:,}  {rss_text(pid)}", flush=True)

        stats = fuzz.run(broker.bootstrap, args.frames, seeds=seeds, versions=versions, seed=args.seed,
                         concurrency=args.concurrency, timeout=args.timeout, progress=progress,
                         stop=lambda: not broker.alive)
        alive = broker.alive
        rss_end = rss_after = 0
        client_error = ""
        if alive:
            rss_end = rss_kib(pid)
            try:
                client_round_trip(broker.bootstrap, "after")
            except Exception as e:
                client_error = f"{type(e).__name__}: {e}"
            # Requests the run parked (JoinGroups waiting for a rebalance, delayed fetches) expire
            # within their timeouts: give the RSS a minute to come back before reading it.
            deadline = time.monotonic() + 60
            while rss_kib(pid) > rss_before * 1.2 and time.monotonic() < deadline:
                time.sleep(1)
            rss_after = rss_kib(pid)
            alive = broker.alive
    finally:
        broker.stop()

    growth = (rss_after - rss_before) / rss_before if rss_before else 0.0
    print()
    print(f"frames sent        {stats.sent:>12,}  ({stats.frames_per_second:,.0f} frames/s over {stats.seconds:.0f} s)")
    print(f"answered           {stats.answered:>12,}")
    print(f"connection closed  {stats.closed:>12,}")
    print(f"unanswered ({args.timeout:g} s) {stats.unanswered:>10,}  "
          f"{dict(sorted(stats.unanswered_apis.items(), key=lambda x: -x[1])[:6])}")
    print(f"wrong correlation  {stats.wrong_correlation:>12,}")
    print(f"connect failures   {stats.connect_failures:>12,}")
    print("by mutation        answered / closed / unanswered")
    for kind, (a, c, u) in sorted(stats.by_kind.items()):
        print(f"  {kind:<16} {a:>9,} {c:>9,} {u:>7,}")
    print(f"broker alive       {alive}")
    print(f"client afterwards  {client_error or 'a new topic created, produced to and consumed from'}")
    print(f"broker RSS         {rss_before / 1024:.1f} MiB before, {rss_end / 1024:.1f} MiB at the end of "
          f"the run, {rss_after / 1024:.1f} MiB after ({growth:+.1%})")
    print(f"broker log         {tap.lines:,} lines, {len(tap.bad)} ERROR/traceback lines")
    for line in tap.bad[:20]:
        print(f"  {line}")
    if args.json:
        args.json.write_text(json.dumps({
            "frames": stats.sent, "seconds": stats.seconds, "frames_per_second": stats.frames_per_second,
            "answered": stats.answered, "closed": stats.closed, "unanswered": stats.unanswered,
            "wrong_correlation": stats.wrong_correlation, "by_kind": stats.by_kind, "alive": alive,
            "rss_kib_before": rss_before, "rss_kib_end_of_run": rss_end, "rss_kib_after": rss_after,
            "log_lines": tap.lines, "error_lines": tap.bad[:100], "seed": args.seed,
            "client_error": client_error,
        }, indent=2))
    ok = alive and not client_error and not tap.bad and growth <= 0.2 and stats.wrong_correlation == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
