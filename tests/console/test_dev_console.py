"""``strom dev`` starts the web console beside its broker; a taken console port is one line and the
broker still starts; ``--no-console`` starts none."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from strom.core.testing import READY_PREFIX


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Dev:
    """``strom dev`` on fixed ports (the console starts only when the broker's port is known)."""

    def __init__(self, data: Path, *args: str) -> None:
        self.port = _free_port()
        self.lines: list[str] = []
        self.proc = subprocess.Popen([sys.executable, "-m", "strom.core.cli", "dev", "--data-dir", str(data),
                                      "--port", str(self.port), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONSAFEPATH": "1"})
        self.ready = threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()
        assert self.ready.wait(60), "strom dev did not start:\n" + "\n".join(self.lines)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())
            if line.startswith(READY_PREFIX):
                self.ready.set()
        self.ready.set()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def dev_factory(tmp_path: Path) -> Iterator[list[Dev]]:
    devs: list[Dev] = []
    yield devs
    for d in devs:
        d.stop()


def test_strom_dev_serves_the_console_on_console_port(tmp_path: Path, dev_factory: list[Dev]) -> None:
    cport = _free_port()
    dev = Dev(tmp_path / "d", "--console-port", str(cport))
    dev_factory.append(dev)
    deadline = time.monotonic() + 30
    while True:
        try:
            r = requests.get(f"http://127.0.0.1:{cport}/api/overview", timeout=10)
            if r.status_code == 200:
                break
        except requests.ConnectionError:
            pass
        assert time.monotonic() < deadline, "\n".join(dev.lines)
        time.sleep(0.1)
    assert [b["port"] for b in r.json()["brokers"]] == [dev.port]
    assert "strom console" in requests.get(f"http://127.0.0.1:{cport}/", timeout=10).text
    assert any(f"web console on http://127.0.0.1:{cport}/" in line for line in dev.lines)


def test_a_taken_console_port_is_one_line_and_the_broker_runs(tmp_path: Path, dev_factory: list[Dev]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        cport = taken.getsockname()[1]
        dev = Dev(tmp_path / "d", "--console-port", str(cport))
        dev_factory.append(dev)
        assert dev.proc.poll() is None
        said = [line for line in dev.lines if "web console not started" in line]
        assert said == [f"strom dev: web console not started: port {cport} is in use (--console-port N moves it)"]


def test_no_console(tmp_path: Path, dev_factory: list[Dev]) -> None:
    cport = _free_port()
    dev = Dev(tmp_path / "d", "--no-console", "--console-port", str(cport))
    dev_factory.append(dev)
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{cport}/", timeout=5)
    assert not any("web console" in line for line in dev.lines)
