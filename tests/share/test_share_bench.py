"""bench/share_groups.py's harness on a tiny run against strom: every record consumed by the
share consumers is counted, the table and JSON are written. Timing decides nothing here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "share_groups.py"


@pytest.mark.broker
def test_share_bench_tiny_run_counts_every_record(tmp_path: Path) -> None:
    out = tmp_path / "share.json"
    # The bench's own --timeout is well inside this call's: a stalled run ends with the bench's
    # account of it (records per consumer, a dead consumer's exit code) rather than a bare kill.
    res = subprocess.run([sys.executable, str(BENCH), "--brokers", "strom", "--records", "5000", "--consumers", "2",
                          "--partitions", "2", "--timeout", "90", "--json", str(out)], capture_output=True,
                         text=True, timeout=240, check=False)
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    (result,) = json.loads(out.read_text())["results"]
    assert result["broker"] == "strom" and result["records"] == 5000
    # Every record came, none twice (a redelivery within a 30 s record lock would be a broker fault).
    assert (result["distinct"], result["redelivered"]) == (5000, 0), result
    assert sum(result["per_consumer"]) == 5000 and result["records_per_s"] > 0
    assert "strom" in res.stdout and "records/s" in res.stdout
