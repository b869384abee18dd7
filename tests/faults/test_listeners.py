"""Listeners at start-up: what strom cannot serve is refused, a busy port is found first.

- A listener whose security protocol is SSL, SASL_PLAINTEXT or SASL_SSL (by its name or via
  ``listener.security.protocol.map``) without its TLS/SASL settings ends the start with one line
  naming the listener and the missing key; it is never served as plaintext.
- A busy port ends the start with one line (no traceback) before the data directory is
  touched: ``strom dev`` on a fresh directory creates nothing, and ``strom broker start`` on
  formatted storage changes no file.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "strom.core.cli"]


def _run(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the CLI; a broker that starts instead of refusing is killed and fails the test."""
    proc = subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the broker started instead of refusing:\n{out}\n{err}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize(("listeners", "extra", "protocol", "name"), [
    ("SSL://127.0.0.1:0", {}, "SSL", "SSL"),
    ("SASL_PLAINTEXT://127.0.0.1:0", {}, "SASL_PLAINTEXT", "SASL_PLAINTEXT"),
    ("SASL_SSL://127.0.0.1:0", {}, "SASL_SSL", "SASL_SSL"),
    ("INTERNAL://127.0.0.1:0", {"listener.security.protocol.map": "INTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT"},
     "SASL_SSL", "INTERNAL"),
], ids=["SSL", "SASL_PLAINTEXT", "SASL_SSL", "mapped-name"])
def test_secure_listener_is_refused(tmp_path: Path, listeners: str, extra: dict[str, str], protocol: str,
                                    name: str) -> None:
    data = tmp_path / "data"
    args = ["dev", "--data-dir", str(data), "--port", "0", "--override", f"listeners={listeners}"]
    for key, value in extra.items():
        args += ["--override", f"{key}={value}"]
    result = _run(args)
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"listener {name}://127.0.0.1:0" in lines[0] and protocol in lines[0], lines[0]
    missing = "sasl.enabled.mechanisms" if protocol == "SASL_PLAINTEXT" else "ssl.keystore.location"
    assert f"listener.name.{name.lower()}.{missing}" in lines[0], lines[0]
    assert not data.exists(), "the data dir was created for a broker that refused to start"


def test_busy_port_on_fresh_dir_is_one_line_and_creates_nothing(tmp_path: Path, busy_port: int) -> None:
    data = tmp_path / "fresh"
    result = _run(["dev", "--data-dir", str(data), "--port", str(busy_port)])
    assert result.returncode == 1, result
    assert result.stderr.strip() == (
        f"error: listener PLAINTEXT://127.0.0.1:{busy_port}: address already in use; stop the other process "
        "or choose another port in 'listeners'"), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not data.exists(), f"created {sorted(os.listdir(data))}"


def test_busy_port_leaves_formatted_storage_untouched(tmp_path: Path, busy_port: int) -> None:
    data = tmp_path / "node"
    config = tmp_path / "server.properties"
    config.write_text("\n".join([
        "node.id=1", "process.roles=broker,controller", f"listeners=PLAINTEXT://127.0.0.1:{busy_port}",
        f"log.dirs={data / 'logs'}", f"metadata.log.dir={data / 'metadata'}",
        "controller.quorum.voters=1@127.0.0.1:0", ""]))
    formatted = _run(["storage", "format", "--config", str(config), "--cluster-id", "q1Sh-9_ISia_zwGINzRvyQ"])
    assert formatted.returncode == 0, formatted
    before = _tree(data)
    result = _run(["broker", "start", "--config", str(config)])
    assert result.returncode == 1, result
    assert len(result.stderr.strip().splitlines()) == 1 and "address already in use" in result.stderr, result.stderr
    assert _tree(data) == before, "the broker touched its storage before finding the port busy"
