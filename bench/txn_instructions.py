"""Instructions per 1,000 records, idempotent vs transactional: issue 3's workload, counted.

``txn_broker_cpu.py`` measures CPU seconds, and on this kind of machine the host's speed moves by a
third between runs minutes apart: two versions of the broker can only be compared by the ratio
within one run. This script counts instead. It runs the same in-process workload (a real
:class:`~strom.core.server.broker.Broker`, request frames through ``Broker.dispatch``, the
transactional producer's markers included) under valgrind's callgrind, with instrumentation
switched on only around the two measured phases (``callgrind_control``), so setup, request
encoding and response checks are not counted. The count is the same from run to run, whatever
else the machine does, so a change of a few percent shows.

What it does not count: time in the kernel (each append's ``pwrite``, about a tenth of the broker's
CPU), and cache misses. A change that saves a system call (such as writing two records in one
batch) shows in ``txn_broker_cpu.py`` and ``txn_java.py``, not here.

``--client librdkafka`` counts the requests as librdkafka shapes them (AddPartitionsToTxn v0,
Produce v10 of one batch, EndTxn v1; see ``txn_broker_cpu.SHAPES``) instead of the Java client's.

    python bench/txn_instructions.py [--transactions 30] [--client java|librdkafka] [--json out.json]

Needs valgrind (Debian's ``valgrind``); the run takes about a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import txn_broker_cpu as workload

PHASES = ("idempotent", "transactional")


def _callgrind(command: str) -> None:
    """Switch instrumentation on/off or dump the counts so far (``callgrind_control`` on ourselves)."""
    flag = {"on": ["-i", "on"], "off": ["-i", "off"], "dump": ["-d"]}[command]
    subprocess.run(["callgrind_control", *flag, str(os.getpid())], check=True, capture_output=True)


async def measured_run(transactions: int, shape: workload.Shape) -> None:
    """Inside valgrind: both workloads on one fresh broker, each phase dumped on its own."""
    with tempfile.TemporaryDirectory(prefix="strom-txn-instr-") as tmp:
        broker = await workload.start_broker(Path(tmp))
        try:
            client = workload.InProcessClient(broker)
            idem_topic = await workload.create_topic(broker, workload.TOPIC + "-idem")
            txn_topic = await workload.create_topic(broker, workload.TOPIC + "-txn")
            idem = workload.Idempotent(client, idem_topic, transactions * workload.TXN_RECORDS,
                                       await workload.init_producer(client, None), shape)
            txn = workload.Transactional(broker, client, txn_topic, transactions,
                                         await workload.init_producer(client, workload.TXN_ID), shape=shape)
            # One unmeasured transaction and request each, so first-use costs are not counted.
            await idem.run(1)
            await txn.run(1)
            _callgrind("on")
            await idem.run(len(idem.frames) - 1)
            _callgrind("dump")
            await txn.run(transactions - 1)
            _callgrind("dump")
            _callgrind("off")
            workload.verify(broker, idem.round.records, txn.round.records, transactions)
            print(json.dumps({"idempotent_records": idem.round.records - idem.records_per_request,
                              "transactional_records": txn.round.records - shape.records_per_txn}))
        finally:
            await broker.stop()


def _dump_totals(out_dir: Path) -> list[int]:
    """Instruction totals of callgrind's numbered dumps (out.1, out.2, ...), in order."""
    totals = []
    for path in sorted(out_dir.glob("callgrind.out.*"), key=lambda p: int(p.name.rsplit(".", 1)[1])):
        match = re.search(r"^totals:\s*(\d+)", path.read_text(errors="replace"), re.MULTILINE)
        if match:
            totals.append(int(match.group(1)))
    return totals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transactions", type=int, default=30, help="transactions measured (default 30)")
    parser.add_argument("--client", choices=tuple(workload.SHAPES), default="java",
                        help="whose request shape (default java; see txn_broker_cpu.py)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)  # the run under valgrind
    args = parser.parse_args()
    if args.inside:
        asyncio.run(measured_run(args.transactions, workload.SHAPES[args.client]))
        return 0

    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("txn_instructions: needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    python = os.path.realpath(sys.executable)  # valgrind must start the interpreter, not a shim
    with tempfile.TemporaryDirectory(prefix="strom-callgrind-") as out:
        out_dir = Path(out)
        print(f"running {args.transactions} transactions and as many idempotent records under callgrind "
              "(about a minute)...", file=sys.stderr, flush=True)
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out_dir}/callgrind.out",
             python, __file__, "--inside", "--transactions", str(args.transactions), "--client", args.client],
            capture_output=True, text=True, check=False, cwd=Path(__file__).parent)
        if proc.returncode != 0:
            print(proc.stdout[-2000:], proc.stderr[-4000:], sep="\n", file=sys.stderr)
            return 1
        counts = json.loads(proc.stdout.strip().splitlines()[-1])
        totals = _dump_totals(out_dir)
    if len(totals) < 2:
        print(f"txn_instructions: expected two callgrind dumps, found {len(totals)}", file=sys.stderr)
        return 1
    per_1000 = {"idempotent": totals[0] / counts["idempotent_records"] * 1000,
                "transactional": totals[1] / counts["transactional_records"] * 1000}
    shape = workload.SHAPES[args.client]
    print(f"instructions per 1,000 records of 100 B, in process ({workload.PARTITIONS} partitions, {args.client}'s "
          f"requests: {shape.describe()}; {args.transactions - 1} transactions measured; callgrind, user space only)")
    for phase in PHASES:
        print(f"{phase:>14}  {per_1000[phase] / 1e6:8.3f} M")
    print(f"idempotent / transactional: {per_1000['idempotent'] / per_1000['transactional']:.3f}")
    if args.json:
        args.json.write_text(json.dumps({"transactions": args.transactions, "client": args.client, "records": counts,
                                         "instructions": dict(zip(PHASES, totals, strict=False)),
                                         "per_1000_records": per_1000}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
