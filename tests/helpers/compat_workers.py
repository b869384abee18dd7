"""Workers for the Kafka Connect compatibility tests: the reference Java worker
(``scripts/kconnect_ref``) and a strom.connect worker subprocess
(``python -m strom.connect.cli distributed``), both on the session's bundled broker, both
supervised by ``strom.core.testing.ManagedProcess``.

tests/conftest.py puts tests/helpers and ``scripts/kconnect_ref`` on the import path, so test
modules import this module and it imports ``kconnect_ref`` by plain name.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Self

from kconnect_ref import KConnectRef, KConnectRefError, ensure_jars, http, rest_ready

from strom.core.testing import ManagedProcess, free_port, java_problem, wait_for

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


class StromConnectProcess(ManagedProcess):
    """``python -m strom.connect.cli distributed worker.properties`` as a subprocess."""

    name = "strom-connect"
    start_error = AssertionError
    stop_timeout = 60.0
    READY = "strom connect worker started"

    def __init__(self, config: dict[str, str], work_dir: Path, port: int = 0) -> None:
        super().__init__(keep_lines=3000)
        self.config = dict(config)
        self.work_dir = work_dir
        self.port = port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> Self:
        if self.port == 0:
            self.port = free_port()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        props = {**self.config, "listeners": self.url, "rest.advertised.host.name": "127.0.0.1",
                 "rest.advertised.port": str(self.port)}
        path = self.work_dir / "strom-worker.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.spawn([sys.executable, "-m", "strom.connect.cli", "distributed", str(path)], cwd=self.work_dir,
                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.wait_serving(lambda: rest_ready(self.url), time.monotonic() + timeout,
                          "strom connect REST not ready", interval=0.3, ignore=(OSError,))
        return self

    def rest(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return http(method, f"{self.url}{path}", body)

    def log_tail(self, lines: int = 60) -> str:
        return super().log_tail(lines)
