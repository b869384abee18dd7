"""Restart time over repeated kill -9 under load: recovery must stay bounded (issue 20, item 6).

Each cycle produces records into a topic with small segments (so every cycle rolls several
segments), kills the broker with SIGKILL and starts it again, timing the start until the broker
accepts connections. Before the fix, every segment that recovery had rebuilt kept a 10 MB
preallocated index full of zeros, which the next start called corrupt and rebuilt again:
restart time grew with every cycle (0.5 s to 34 s over 20 cycles). Now recovery trims what it
rebuilds and only segments past the recovery point are recovered, so every restart costs about
the same as the first.

    python bench/restart_cycles.py                  # 20 cycles, prints each restart time
    python bench/restart_cycles.py --cycles 5 --records 2000 --json out.json

The fault test ``tests/faults/test_restart_cycles.py`` runs a few cycles of :func:`run_cycles`
and checks, per restart, what can be checked without a clock (trimmed indexes, segments below
the recovery point untouched).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.log.checkpoint import RECOVERY_POINT_CHECKPOINT, read_offset_checkpoint
from strom.core.testing import BrokerProcess

TOPIC = "restart-cycles"
SEGMENT_BYTES = 256 * 1024
VALUE_BYTES = 1000
INDEX_EXTS = (".index", ".timeindex")


@dataclass
class SegmentFiles:
    """A partition's segment files as found on disk while the broker is down."""

    base: int
    stats: dict[str, tuple[int, int]]  # file name -> (size, mtime ns)


@dataclass
class Restart:
    """One restart after a kill -9: how long it took and the disk state before and after."""

    cycle: int
    seconds: float
    recovery_point: int  # of partition 0, from recovery-point-offset-checkpoint before the restart
    before: list[SegmentFiles] = field(default_factory=list)
    after: list[SegmentFiles] = field(default_factory=list)
    output: list[str] = field(default_factory=list)  # the broker's log lines of this start


def partition_dir(broker: BrokerProcess, topic: str = TOPIC, partition: int = 0) -> Path:
    return broker.data_dir / "logs" / f"{topic}-{partition}"


def segment_files(pdir: Path) -> list[SegmentFiles]:
    by_base: dict[int, SegmentFiles] = {}
    for path in pdir.iterdir():
        stem, _, ext = path.name.partition(".")
        if len(stem) == 20 and stem.isdigit() and "." + ext in (".log", *INDEX_EXTS):
            st = path.stat()
            by_base.setdefault(int(stem), SegmentFiles(int(stem), {})).stats[path.name] = (st.st_size, st.st_mtime_ns)
    return [by_base[b] for b in sorted(by_base)]


def recovery_point(broker: BrokerProcess, topic: str = TOPIC, partition: int = 0) -> int:
    points = read_offset_checkpoint(broker.data_dir / "logs" / RECOVERY_POINT_CHECKPOINT)
    return points.get((topic, partition), 0)


def produce(bootstrap: str, n: int, start: int, topic: str = TOPIC) -> int:
    """Produce ``n`` records (acks=1) and wait for all of them; returns how many were acknowledged."""
    acked = 0
    errors: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        else:
            errors.append(err)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "batch.size": 16384,
                         "enable.idempotence": False, "log_level": 0})
    pad = b"x" * VALUE_BYTES
    for i in range(start, start + n):
        while True:
            try:
                producer.produce(topic, value=b"%010d" % i + pad, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    left = producer.flush(60)
    if left or acked != n:
        raise RuntimeError(f"only {acked} of {n} records acknowledged ({left} still in flight, "
                           f"first error {errors[:1]})")
    return acked


def run_cycles(broker: BrokerProcess, cycles: int, records: int,
               on_restart: Callable[[Restart], None] | None = None) -> list[Restart]:
    """Start, create the topic, then ``cycles`` times: produce ``records``, kill -9, restart.

    ``on_restart`` sees each restart as soon as the broker is up again (the fault test checks
    there); the list of all restarts is returned.
    """
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={"segment.bytes": str(SEGMENT_BYTES)})])[TOPIC].result(30)
    restarts: list[Restart] = []
    produced = 0
    for cycle in range(1, cycles + 1):
        produced += produce(broker.bootstrap, records, produced)
        broker.kill()
        before = segment_files(partition_dir(broker))
        point = recovery_point(broker)
        broker.output.clear()
        started = time.monotonic()
        broker.start()
        took = time.monotonic() - started
        restart = Restart(cycle, took, point, before, segment_files(partition_dir(broker)), list(broker.output))
        restarts.append(restart)
        if on_restart is not None:
            on_restart(restart)
    return restarts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--cycles", type=int, default=20, help="kill -9 / restart cycles (default 20)")
    parser.add_argument("--records", type=int, default=3000,
                        help=f"records of {VALUE_BYTES} bytes produced per cycle (default 3000)")
    parser.add_argument("--json", metavar="FILE", help="also write the restart times as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="strom-restart-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data")
        print(f"{'cycle':>5} {'restart s':>9} {'segments':>8} {'recovery point':>14}")

        def show(r: Restart) -> None:
            print(f"{r.cycle:>5} {r.seconds:>9.2f} {len(r.after):>8} {r.recovery_point:>14}", flush=True)

        try:
            restarts = run_cycles(broker, args.cycles, args.records, show)
        finally:
            broker.stop()
    times = [r.seconds for r in restarts]
    print(f"first {times[0]:.2f} s, last {times[-1]:.2f} s, max {max(times):.2f} s "
          f"({max(times) / times[0]:.2f}x the first)")
    if args.json:
        Path(args.json).write_text(json.dumps({"cycles": args.cycles, "records_per_cycle": args.records,
                                               "restart_seconds": times}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
