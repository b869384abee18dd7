"""The instruction-count benchmark (bench/txn_instructions.py), scaled down, under real valgrind.

No figure is asserted. What is checked: the script runs the workload under callgrind, finds one
dump per measured phase, counts the records it measured, and the broker's logs pass the same
final check as txn_broker_cpu.py (every record, one marker per transaction, nothing unstable).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


# 3,000 idempotent records are 6 requests of 3 x 148 (Java's shape) or 9 of 333 (librdkafka's); the
# first request and the first transaction run before the count starts.
@pytest.mark.slow  # under callgrind: 7 s each on a quiet machine, 14-16 s under load; 30 s for the pair
@pytest.mark.parametrize(("client", "idempotent_records"), [("java", 5 * 3 * 148), ("librdkafka", 8 * 333)])
def test_counts_both_phases_under_callgrind(tmp_path: Path, client: str, idempotent_records: int) -> None:
    out = tmp_path / "instructions.json"
    proc = subprocess.run([sys.executable, str(BENCH / "txn_instructions.py"), "--transactions", "3",
                           "--client", client, "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "idempotent / transactional" in proc.stdout and f"{client}'s requests" in proc.stdout
    data = json.loads(out.read_text())
    assert data["client"] == client
    assert data["records"] == {"idempotent_records": idempotent_records, "transactional_records": 2 * 999}
    assert data["instructions"]["idempotent"] > 0 and data["instructions"]["transactional"] > 0
    assert set(data["per_1000_records"]) == {"idempotent", "transactional"}
