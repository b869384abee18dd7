"""Workers for the Kafka Connect compatibility tests: the reference Java worker
(``scripts/kconnect_ref``) and a strom.connect worker subprocess
(``python -m strom.connect.cli distributed``), both on the session's bundled broker.

Test modules import this with this folder on ``sys.path`` (pytest's importlib mode does not
put it there).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

from strom.core.testing import wait_for

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts" / "kconnect_ref"))
sys.path.insert(0, str(REPO / "scripts" / "kafka_ref"))

from kafka_ref import free_port, java_problem  # noqa: E402
from kconnect_ref import KConnectRef, KConnectRefError, ensure_jars, http  # noqa: E402

__all__ = ["KConnectRef", "KConnectRefError", "StromConnectProcess", "ensure_jars", "free_port", "http",
           "java_problem", "wait_for", "worker_base"]


def worker_base(bootstrap: str) -> dict[str, str]:
    """One Connect cluster's identity (group and internal topics, unique per test) and the
    settings both kinds of worker get, so either can take over the other's topics."""
    suffix = uuid.uuid4().hex[:8]
    return {
        "bootstrap.servers": bootstrap, "group.id": f"compat-{suffix}",
        "config.storage.topic": f"compat-cfg-{suffix}", "offset.storage.topic": f"compat-off-{suffix}",
        "status.storage.topic": f"compat-st-{suffix}",
        "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "offset.flush.interval.ms": "500", "scheduled.rebalance.max.delay.ms": "1000",
        "session.timeout.ms": "10000", "heartbeat.interval.ms": "1000",
    }


class StromConnectProcess:
    """``python -m strom.connect.cli distributed worker.properties`` as a subprocess."""

    READY = "strom connect worker started"

    def __init__(self, config: dict[str, str], work_dir: Path, port: int = 0) -> None:
        self.config = dict(config)
        self.work_dir = work_dir
        self.port = port
        self.proc: subprocess.Popen[str] | None = None
        self.output: deque[str] = deque(maxlen=3000)
        self._reader: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> StromConnectProcess:
        if self.port == 0:
            self.port = free_port()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        props = {**self.config, "listeners": self.url, "rest.advertised.host.name": "127.0.0.1",
                 "rest.advertised.port": str(self.port)}
        path = self.work_dir / "strom-worker.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.proc = subprocess.Popen([sys.executable, "-m", "strom.connect.cli", "distributed", str(path)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True, cwd=self.work_dir,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line.rstrip("\n"))

        self._reader = threading.Thread(target=pump, daemon=True, name="strom-connect-output")
        self._reader.start()
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                status, body = http("GET", f"{self.url}/connectors", timeout=5)
                if status == 200:
                    return self
                last = (status, body)
            except OSError as exc:
                last = exc
            time.sleep(0.3)
        code = self.proc.poll()
        self.kill()
        raise AssertionError(f"strom connect REST not ready (exit {code}, last {last!r}):\n{self.log_tail()}")

    def rest(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return http(method, f"{self.url}{path}", body)

    def stop(self, timeout: float = 60.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        code = self.proc.returncode
        if self._reader is not None:
            self._reader.join(5)
        self.proc = None
        return code

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(list(self.output)[-lines:])
