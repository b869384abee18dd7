"""Both group tools reject a malformed --bootstrap-server as a usage error (exit 2), before any client starts."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("tool", ["consumer-groups", "share-groups"])
@pytest.mark.parametrize("bootstrap", ["nope", "host:", ":9092", "host:99999"])
def test_bad_bootstrap_server_is_a_usage_error(tool: str, bootstrap: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "strom.core.cli", tool, "--bootstrap-server", bootstrap, "--list"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert f"--bootstrap-server expects HOST:PORT, got {bootstrap!r}" in proc.stderr
    assert "Traceback" not in proc.stderr
