"""examples/work_queue.py as a user runs it (it starts its own strom broker, a BrokerProcess):
the flaky job is released and done on its second delivery, the poison job rejected on its
third, every other job done once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "work_queue.py"


@pytest.mark.broker
def test_work_queue_example_retries_and_rejects(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(EXAMPLE)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, check=False)
    out = res.stdout
    assert res.returncode == 0, out + res.stderr[-3000:]
    assert "flaky:report: attempt 1 failed (flaky:report failed), retry: RELEASE" in out
    assert "flaky:report: done on attempt 2: ACCEPT" in out
    assert "poison:corrupt.pdf: attempt 3 failed (poison:corrupt.pdf failed), giving up: REJECT" in out
    assert "5 jobs done, 1 rejected after 3 attempts: poison:corrupt.pdf" in out
    # Each job is finished exactly once: no ACCEPT or REJECT repeated.
    finished = [line.split(":")[0] + ":" + line.split(":")[1] for line in out.splitlines()
                if line.endswith(("ACCEPT", "REJECT"))]
    assert len(finished) == len(set(finished)) == 6, out
