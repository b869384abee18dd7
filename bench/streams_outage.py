"""The full length of tests/faults/test_streams_outage.py: word count through broker outages.

Runs the fault tests (real broker process, kill -9 and restart at 3-5 s intervals, SIGSTOP past
``request.timeout.ms``) with ``--kills`` kills and ``--stalls`` stalls per run, ``--runs`` times
in a row, each run a fresh pytest process with a seed of its own, and prints how many runs of
each test passed. CI runs the same tests with 3 kills and 1 stall.

    python bench/streams_outage.py --kills 10 --runs 5 [--stalls 3] [-k exactly_once_v2]

Exit code 0 only if every run of every test passed.
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

log = logging.getLogger("streams_outage")
ROOT = Path(__file__).resolve().parents[1]
TEST = "tests/faults/test_streams_outage.py"
RESULT = re.compile(r"^(tests/\S+::\S+) (PASSED|FAILED|ERROR)", re.M)


def run_once(args: argparse.Namespace, seed: int) -> dict[str, str]:
    env = {**os.environ, "STROM_STREAMS_OUTAGE_KILLS": str(args.kills),
           "STROM_STREAMS_OUTAGE_STALLS": str(args.stalls), "STROM_STREAMS_OUTAGE_SEED": str(seed),
           "STROM_STREAMS_OUTAGE_SETTLE_S": str(args.settle)}
    cmd = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--timeout", str(args.timeout),
           "-o", "log_cli=false", TEST, *(["-k", args.k] if args.k else [])]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    results = dict(RESULT.findall(proc.stdout))
    if not results:
        log.error("no results from pytest (exit %d):\n%s", proc.returncode, proc.stdout[-3000:])
    for name, outcome in results.items():
        if outcome != "PASSED":
            # the assertion lines say what was left (undercount, state, last log lines)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("E ")][:6]
            log.warning("seed %d: %s %s\n%s", seed, name, outcome, "\n".join(ln[:600] for ln in lines))
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--stalls", type=int, default=3)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--settle", type=float, default=60.0, help="seconds the counts get after the last outage")
    ap.add_argument("--timeout", type=int, default=600, help="pytest-timeout per test (s)")
    ap.add_argument("-k", default="", help="pytest -k expression (e.g. exactly_once_v2)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    passes: collections.Counter[str] = collections.Counter()
    seen: set[str] = set()
    t0 = time.monotonic()
    for run in range(args.runs):
        seed = 1000 + run
        results = run_once(args, seed)
        for name, outcome in results.items():
            seen.add(name)
            passes[name] += outcome == "PASSED"
        log.info("run %d/%d (seed %d) done after %.0f s: %s", run + 1, args.runs, seed, time.monotonic() - t0,
                 {n.split("::")[-1]: o for n, o in results.items()})
    print(f"kills={args.kills} stalls={args.stalls} runs={args.runs} ({time.monotonic() - t0:.0f} s)")
    for name in sorted(seen):
        print(f"{passes[name]}/{args.runs} passed  {name.split('::')[-1]}")
    return 0 if seen and all(passes[n] == args.runs for n in seen) else 1


if __name__ == "__main__":
    sys.exit(main())
