"""examples/secure_broker.py runs: throwaway CA, SASL_SSL broker, SCRAM user, ACLs, produce/consume, refusal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "secure_broker.py"


@pytest.mark.broker
def test_secure_broker_example_runs() -> None:
    result = subprocess.run([sys.executable, str(EXAMPLE), "--records", "20"], capture_output=True, text=True,
                            timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "alice was refused (TOPIC_AUTHORIZATION_FAILED) until granted" in result.stderr, result.stderr[-3000:]
    assert "20 records produced and consumed as alice over SASL_SSL" in result.stderr, result.stderr[-3000:]
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in result.stderr, result.stderr[-3000:]
