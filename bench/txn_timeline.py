"""Where a librdkafka transaction's time goes: the broker's requests on the client's timeline.

``groups_txn.py`` shows that, with librdkafka at its defaults, a transaction of 1,000 records
spends about as long in ``commit_transaction()`` as in its ``produce()`` loop. This script says
what the commit waits for. It starts strom's broker as a subprocess through its own ``--serve``
mode, which wraps ``Broker.dispatch`` to record every request: its API key, when the broker
began handling it (the frame read) and when the answer was ready. The client is
``groups_txn.py``'s transactional phase itself (confluent-kafka, ``linger.ms=5``,
``batch.size=1048576``, ``acks=all``, 1,000 records of 100 bytes per transaction over 3
partitions), which records when each transaction began, when its last ``produce()`` returned and
when its commit returned. Both processes read ``time.perf_counter()``, which on Linux is
``CLOCK_MONOTONIC``, one clock for the whole machine, so the two timelines line up.

Output, over the transactions after ``--skip``:

* per request kind and phase (the ``produce()`` loop or the commit): requests per transaction,
  the median start (microseconds from the phase's start) and the median wall time in
  ``dispatch`` (decoding, the handler, encoding);
* the commit's median time, with the time the broker was in ``dispatch`` for one of its requests
  and the time outside (librdkafka's threads passing the work on, the network, and the broker's
  own socket layer: reading frames, writing answers, waking its event loop);
* the first ``--show`` transactions' timelines.

    python bench/txn_timeline.py [--transactions 300] [--skip 50] [--show 5] [--json out.json]

strom only: the timestamps come from inside the broker.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from broker_throughput import _table, create_topic, machine_info
from groups_txn import PRODUCER_BASE, TXN_SIZE, VALUE_BYTES, TxnSplit, produce_transactional

from strom.core.testing import BrokerProcess

API_NAMES = {0: "Produce", 3: "Metadata", 10: "FindCoordinator", 18: "ApiVersions", 22: "InitProducerId",
             24: "AddPartitionsToTxn", 26: "EndTxn"}
PARTITIONS = 3
TRACE_ENV = "STROM_TIMELINE_TRACE"  # where the --serve side writes its trace

# A request: (API key, start, end) in perf_counter seconds.
Request = tuple[int, float, float]


class Txn(NamedTuple):
    """One transaction on the client's clock: begin, last produce() returned, commit returned."""

    begin: float
    loop_end: float
    commit_end: float


# -- the broker side --------------------------------------------------------------------------

def serve(cli_args: list[str]) -> int:
    """strom's CLI with every request's handling recorded; the trace is written when it stops."""
    from strom.core.cli import main as strom_main
    from strom.core.server.broker import Broker

    trace: list[Request] = []
    dispatch = Broker.dispatch

    async def timed(self: Broker, ctx: Any, header: Any, frame: bytes, body_pos: int) -> Any:
        start = time.perf_counter()
        answer = await dispatch(self, ctx, header, frame, body_pos)
        trace.append((header.api_key, start, time.perf_counter()))
        return answer

    Broker.dispatch = timed  # type: ignore[method-assign]  # instruments the broker on purpose
    try:
        return strom_main(cli_args)
    finally:
        Path(os.environ[TRACE_ENV]).write_text(json.dumps(trace))


class TracedBroker:
    """strom's broker run through this script's ``--serve`` mode; stopping it returns the trace."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="strom-timeline-")
        self.trace_path = Path(self._tmp.name) / "trace.json"
        try:
            self.proc = BrokerProcess(Path(self._tmp.name) / "data", env={TRACE_ENV: str(self.trace_path)},
                                      launcher=[sys.executable, __file__, "--serve"]).start()
        except BaseException:
            self._tmp.cleanup()
            raise
        self.bootstrap = self.proc.bootstrap

    def stop(self) -> list[Request]:
        """Stop the broker (SIGTERM: a clean shutdown writes the trace) and return the trace."""
        try:
            self.proc.stop(60)
            if not self.trace_path.exists():
                raise RuntimeError("the traced broker wrote no trace:\n" + self.proc.log_text())
            trace: list[Request] = [tuple(r) for r in json.loads(self.trace_path.read_text())]
            return trace
        finally:
            self._tmp.cleanup()


# -- the client side --------------------------------------------------------------------------

def run_transactions(bootstrap: str, transactions: int) -> list[Txn]:
    """``groups_txn.py``'s transactional phase on a fresh topic, with each transaction's marks."""
    topic = f"timeline-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, PARTITIONS)
    split = TxnSplit()
    produce_transactional(bootstrap, topic, transactions * TXN_SIZE, PARTITIONS, "timeline", timeline=split)
    return [Txn(*m) for m in split.marks]


# -- analysis ---------------------------------------------------------------------------------

@dataclass
class Step:
    """One request of a transaction, in microseconds from the start of its phase.

    ``handling_us``: wall time in ``Broker.dispatch`` (decoding, the handler, encoding), not CPU."""

    api: str
    phase: str  # "loop" | "commit"
    start_us: float
    handling_us: float


@dataclass
class TxnTimeline:
    loop_us: float
    commit_us: float
    steps: list[Step] = field(default_factory=list)

    @property
    def commit_busy_us(self) -> float:
        """The part of the commit in which the broker was in ``dispatch`` for at least one request.

        The union of the requests' intervals, clipped to the commit: librdkafka talks to the
        coordinator and the partition leader over two connections, so two requests can be in
        ``dispatch`` at once (one of them waiting)."""
        busy, reached = 0.0, 0.0
        for s in sorted((s for s in self.steps if s.phase == "commit"), key=lambda s: s.start_us):
            start, end = max(s.start_us, reached), min(s.start_us + s.handling_us, self.commit_us)
            if end > start:
                busy += end - start
                reached = end
        return busy


def timelines(txns: list[Txn], trace: list[Request]) -> list[TxnTimeline]:
    """Each transaction with the requests the broker began between its begin and its commit's return.

    A request that began in the loop counts for the loop, even if it ended in the commit."""
    trace = sorted(trace, key=lambda r: r[1])
    starts = [r[1] for r in trace]
    out = []
    for t in txns:
        tl = TxnTimeline(1e6 * (t.loop_end - t.begin), 1e6 * (t.commit_end - t.loop_end))
        for api, start, end in trace[bisect.bisect_left(starts, t.begin):]:
            if start > t.commit_end:
                break
            phase, origin = ("loop", t.begin) if start < t.loop_end else ("commit", t.loop_end)
            tl.steps.append(Step(API_NAMES.get(api, str(api)), phase, 1e6 * (start - origin), 1e6 * (end - start)))
        out.append(tl)
    return out


def summarize(tls: list[TxnTimeline]) -> dict[str, Any]:
    kinds = sorted({(s.api, s.phase) for tl in tls for s in tl.steps}, key=lambda k: (k[1] != "loop", k[0]))
    rows = []
    for api, phase in kinds:
        steps = [s for tl in tls for s in tl.steps if (s.api, s.phase) == (api, phase)]
        rows.append({"api": api, "phase": phase, "per_txn": round(len(steps) / len(tls), 2),
                     "start_us": round(statistics.median(s.start_us for s in steps)),
                     "handling_us": round(statistics.median(s.handling_us for s in steps))})
    commit = statistics.median(tl.commit_us for tl in tls)
    busy = statistics.median(tl.commit_busy_us for tl in tls)
    return {"transactions": len(tls), "loop_us": round(statistics.median(tl.loop_us for tl in tls)),
            "commit_us": round(commit), "commit_busy_us": round(busy),
            "commit_waiting_us": round(statistics.median(tl.commit_us - tl.commit_busy_us for tl in tls)),
            "requests": rows}


def render(summary: dict[str, Any], tls: list[TxnTimeline], show: int) -> str:
    rows = [[r["api"], r["phase"], f"{r['per_txn']:.2f}", f"{r['start_us']:,}", f"{r['handling_us']:,}"]
            for r in summary["requests"]]
    lines = [f"librdkafka transactions of {TXN_SIZE:,} x {VALUE_BYTES} B over {PARTITIONS} partitions on strom "
             f"({', '.join(f'{k}={v}' for k, v in PRODUCER_BASE.items())}); medians of {summary['transactions']} "
             "transactions",
             _table(["request", "phase", "per txn", "starts at us (from the phase's start)", "in dispatch us"], rows),
             "",
             f"loop {summary['loop_us']:,} us; commit {summary['commit_us']:,} us, of which the broker was in "
             f"dispatch {summary['commit_busy_us']:,} us and outside it {summary['commit_waiting_us']:,} us "
             "(librdkafka, the network, the broker's socket layer; medians each)"]
    for i, tl in enumerate(tls[:show]):
        steps = ", ".join(f"{s.api}@{s.phase}+{s.start_us:,.0f}..+{s.start_us + s.handling_us:,.0f}"
                          for s in tl.steps)
        lines.append(f"  txn {i + 1}: loop {tl.loop_us:,.0f} us, commit {tl.commit_us:,.0f} us: {steps}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transactions", type=int, default=300, help="transactions to run (default 300)")
    parser.add_argument("--skip", type=int, default=50, help="first transactions left out (default 50)")
    parser.add_argument("--show", type=int, default=5, help="timelines printed in full (default 5)")
    parser.add_argument("--json", type=Path, help="also write the summary and every timeline here")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve"]:  # the broker side: the rest are strom CLI arguments
        return serve(argv[1:])
    args = parser.parse_args(argv)
    if args.skip >= args.transactions:
        parser.error(f"--skip {args.skip} leaves none of --transactions {args.transactions}")

    broker = TracedBroker()
    try:
        txns = run_transactions(broker.bootstrap, args.transactions)
    finally:
        trace = broker.stop()
    tls = timelines(txns[args.skip:], trace)
    summary = summarize(tls)
    print(render(summary, tls, args.show))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine_info(), "summary": summary,
                                         "timelines": [asdict(tl) for tl in tls]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
