"""The examples as a user runs them: from any directory, and with no broker to talk to.

quickstart.py starts its own broker (a BrokerProcess) and is run here from a directory whose
folder ``strom`` is the clone (its parent, where `python -m strom...` once imported that
folder instead of the package); its 200,000 records overflow librdkafka's local queue, so the
back-pressure path (BufferError, poll, retry) runs too. The examples that expect `strom dev`
are pointed at a port nobody listens on and must say to start it, without a traceback.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_quickstart_runs_from_the_clones_parent(tmp_path: Path) -> None:
    (tmp_path / "strom").symlink_to(EXAMPLES.parent, target_is_directory=True)
    res = subprocess.run([sys.executable, "strom/examples/quickstart.py"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    assert "produced 200,000 records" in res.stdout and "consumed 200,000 records" in res.stdout


@pytest.mark.parametrize("example", ["wordcount.py", "pageviews_windowed.py", "enrichment_join.py"])
def test_example_without_a_broker_says_to_start_strom_dev(example: str, tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(EXAMPLES / example), "--bootstrap", f"127.0.0.1:{closed_port()}"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 1
    assert "start one with `strom dev`" in res.stderr
    assert "Traceback" not in res.stderr and "KafkaException" not in res.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written before the broker was found
