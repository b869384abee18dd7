"""Run a strom broker as a real subprocess, for tests, benchmarks and examples.

``BrokerProcess`` starts ``python -m strom.core.cli dev`` (port 0 by default), reads the
``bootstrap.servers=HOST:PORT`` line the broker prints once it accepts connections, and can
stop it cleanly (SIGTERM), kill it (SIGKILL) and start it again on the same data directory.
``wait_for`` polls a condition until it holds, for everything that reaches a broker or a
runtime asynchronously.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

READY_PREFIX = "bootstrap.servers="


class BrokerProcess:
    """A broker subprocess on a data directory that outlives restarts."""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, port: int = 0,
                 config: dict[str, str] | None = None, env: dict[str, str] | None = None,
                 startup_timeout: float = 60.0, features: dict[str, int] | None = None,
                 launcher: Sequence[str] | None = None) -> None:
        """``launcher``: the command that runs strom's CLI, given the ``dev`` arguments after it
        (default ``python -m strom.core.cli``); a benchmark passes a wrapper that instruments
        the broker."""
        self._tmp = None if data_dir is not None else tempfile.TemporaryDirectory(prefix="strom-")
        self.data_dir = Path(data_dir if data_dir is not None else self._tmp.name)  # type: ignore[union-attr]
        self.port = port
        self.config = dict(config or {})
        self.features = dict(features or {})  # applied when the data dir is first formatted
        self.env = dict(env or {})
        self.launcher = list(launcher or [sys.executable, "-m", "strom.core.cli"])
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[str] | None = None
        self.bootstrap = ""
        self.output: deque[str] = deque(maxlen=2000)
        self._reader: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> BrokerProcess:
        cmd = [*self.launcher, "dev", "--data-dir", str(self.data_dir), "--port", str(self.port)]
        for key, value in self.config.items():
            cmd += ["--override", f"{key}={value}"]
        for name, level in self.features.items():
            cmd += ["--feature", f"{name}={level}"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=env, start_new_session=True)
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line.rstrip("\n"))
                if line.startswith(READY_PREFIX) and not ready.is_set():
                    self.bootstrap = line.strip()[len(READY_PREFIX):]
                    ready.set()
            ready.set()

        self._reader = threading.Thread(target=pump, daemon=True, name="broker-output")
        self._reader.start()
        if not ready.wait(self.startup_timeout) or not self.bootstrap:
            log = "\n".join(self.output)
            self.kill()
            raise RuntimeError(f"broker did not become ready within {self.startup_timeout}s:\n{log}")
        # Restarts reuse the same port so clients can reconnect.
        self.port = int(self.bootstrap.rsplit(":", 1)[1])
        return self

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait: a clean shutdown."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        self._join()
        return code

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks run, like a crash or power loss of the process."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._join()

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def _join(self) -> None:
        if self._reader is not None:
            self._reader.join(5)
        self.proc = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        return "\n".join(self.output)

    def wait_for_log(self, needle: str, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(needle in line for line in list(self.output)):
                return True
            time.sleep(0.05)
        return False

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()


def wait_for(check: Callable[[], Any], timeout: float = 60.0, what: str = "condition", *,
             interval: float = 0.2, ignore: tuple[type[BaseException], ...] = (),
             detail: Callable[[], str] | None = None) -> Any:
    """Call ``check`` until it returns a truthy value, and return that value.

    Exceptions of the ``ignore`` types count as "not yet" (a table the sink has not created, a
    REST server still starting). After ``timeout`` seconds an AssertionError names ``what``,
    the last value (or exception) and ``detail()`` if given.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = check()
        except ignore as e:
            last = e
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            extra = f"; {detail()}" if detail is not None else ""
            raise AssertionError(f"timed out waiting for {what}; last value {last!r}{extra}")
        time.sleep(interval)
