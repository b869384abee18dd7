"""Start a Spark standalone cluster (one master, one worker) on localhost from the pyspark install.

``SparkStandalone`` runs ``spark-class org.apache.spark.deploy.master.Master`` and
``...deploy.worker.Worker`` from pyspark's own ``bin/`` and ``jars/`` (no separate Spark
download), on a free port, waits until the worker has registered, and stops both (their whole
process groups) on exit. Used by tests/spark and usable by hand::

    python scripts/spark_ref/spark_standalone.py     # prints the master URL, Ctrl-C stops
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from types import TracebackType


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Daemon:
    """One JVM daemon with its output kept in memory and its process group killable."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.output: deque[str] = deque(maxlen=2000)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=env, start_new_session=True)
        self._reader = threading.Thread(target=self._pump, daemon=True, name=f"spark-{name}-output")
        self._reader.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line.rstrip("\n"))

    def wait_for(self, needle: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(needle in line for line in list(self.output)):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"spark {self.name} did not log {needle!r} within {timeout}s:\n"
                           + "\n".join(self.output))

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._reader.join(5)


class SparkStandalone:
    """A one-master, one-worker standalone cluster on 127.0.0.1."""

    def __init__(self, *, worker_cores: int = 2, worker_memory: str = "1g", timeout: float = 120.0) -> None:
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.timeout = timeout
        self.port = _free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self._tmp = tempfile.TemporaryDirectory(prefix="strom-spark-")
        self.master: _Daemon | None = None
        self.worker: _Daemon | None = None

    def _env(self) -> dict[str, str]:
        home = spark_home()
        return {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_LOG_DIR": self._tmp.name, "SPARK_WORKER_DIR": str(Path(self._tmp.name) / "work"),
                "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"}

    def start(self) -> SparkStandalone:
        spark_class = str(spark_home() / "bin" / "spark-class")
        env = self._env()
        self.master = _Daemon("master", [spark_class, "org.apache.spark.deploy.master.Master",
                                         "--host", "127.0.0.1", "--port", str(self.port),
                                         "--webui-port", str(_free_port())], env)
        self.master.wait_for("ALIVE", self.timeout)
        self.worker = _Daemon("worker", [spark_class, "org.apache.spark.deploy.worker.Worker",
                                         "--host", "127.0.0.1", "--webui-port", str(_free_port()),
                                         "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                                         self.master_url], env)
        self.worker.wait_for("Successfully registered with master", self.timeout)
        return self

    def stop(self) -> None:
        for daemon in (self.worker, self.master):
            if daemon is not None:
                daemon.stop()
        self._tmp.cleanup()

    def __enter__(self) -> SparkStandalone:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


if __name__ == "__main__":
    with SparkStandalone() as cluster:
        print(cluster.master_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
