"""The full length of ``tests/faults/test_connect_outage.py``: Connect standalone and distributed
workers under 10 broker kill -9 cycles (and the SIGSTOP stall), run several times; prints how often
each test passed (issue 28 item 5).

    python bench/connect_outage.py                    # 10 kills per run, 5 runs
    python bench/connect_outage.py --kills 10 --runs 5 --json out.json

Each run is one pytest process over the test file with ``STROM_CONNECT_OUTAGE_KILLS`` set; the
kill schedule's seed is printed by the test's log and can be fixed with ``--seed``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/faults/test_connect_outage.py"


def run_once(kills: int, seed: int | None, junit: Path) -> dict[str, bool]:
    """One pytest run; test id -> passed."""
    env = {**os.environ, "STROM_CONNECT_OUTAGE_KILLS": str(kills)}
    if seed is not None:
        env["STROM_CONNECT_OUTAGE_SEED"] = str(seed)
    # A 10-kill run takes about two minutes per test: lift pytest's per-test timeout.
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=900",
                    f"--junitxml={junit}", TEST], cwd=ROOT, env=env, check=False)
    results: dict[str, bool] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failed = any(child.tag in ("failure", "error") for child in case)
        skipped = any(child.tag == "skipped" for child in case)
        if not skipped:
            results[case.get("name", "?")] = not failed
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    passes: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="connect-outage-") as tmp:
        for run in range(args.runs):
            results = run_once(args.kills, args.seed, Path(tmp) / f"run{run}.xml")
            for name, ok in results.items():
                seen[name] += 1
                passes[name] += ok
            log.info("run %d/%d: %s", run + 1, args.runs, {n: "pass" if ok else "FAIL" for n, ok in results.items()})
    elapsed = time.monotonic() - started
    log.info("\n%d kills per run, %d runs, %.0f s", args.kills, args.runs, elapsed)
    for name in sorted(seen):
        log.info("  %-85s %d/%d passed", name, passes[name], seen[name])
    if args.json is not None:
        args.json.write_text(json.dumps({"kills": args.kills, "runs": args.runs, "seconds": round(elapsed),
                                         "passed": {n: [passes[n], seen[n]] for n in sorted(seen)}}, indent=2))
    return 0 if passes == seen else 1


if __name__ == "__main__":
    sys.exit(main())
