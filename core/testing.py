"""Run strom's broker and its peers as real subprocesses, for tests, benchmarks and examples.

``ManagedProcess`` is the one process supervisor behind every process the tests and benchmarks
start: strom's broker (``BrokerProcess`` here), the reference Apache Kafka broker
(``scripts/kafka_ref``), the reference Kafka Connect worker (``scripts/kconnect_ref``), a
strom.connect worker (``tests/connect/compat``) and the benchmarks' Tansu and null brokers
(``bench/peers.py``). It starts the command in a session of its own, keeps its merged
stdout/stderr in a ring buffer read by a daemon thread, waits for a ready line or for a
condition checked while the process lives, stops it (SIGTERM, then SIGKILL of the whole group),
kills it (SIGKILL of the group), and pauses/resumes it (SIGSTOP/SIGCONT, a network stall).

``BrokerProcess`` starts ``python -m strom.core.cli dev`` (port 0 by default), reads the
``bootstrap.servers=HOST:PORT`` line the broker prints once it accepts connections, and can be
started again on the same data directory and port. ``wait_for`` polls a condition until it
holds, for everything that reaches a broker or a runtime asynchronously.

Under a test of the ``unit`` tier (``STROM_TEST_TIER=unit``, set by tests/conftest.py) a
supervised process refuses to start, so a test that needs one must carry its tier marker.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any, ClassVar, Self

READY_PREFIX = "bootstrap.servers="
TIER_ENV = "STROM_TEST_TIER"
MIN_JAVA = 17  # Kafka 4.x brokers and Connect workers need Java 17.


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS just handed out; another process could take it before the child binds it,
    which on loopback in a test run is unlikely enough that a failed start simply reports it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def import_script(path: str | os.PathLike[str], name: str | None = None) -> ModuleType:
    """Import a script that lives outside the package (``scripts/kafka_ref/kafka_ref.py``,
    ``bench/peers.py``) by its path, as module ``name`` (default: the file's stem).

    Once imported it is ``sys.modules[name]``: a later ``import name`` anywhere in the process
    finds the same module, so classes and module-level settings are shared.
    """
    path = Path(path)
    name = name or path.stem
    if name in sys.modules:
        return sys.modules[name]
    if not path.is_file():
        raise ImportError(f"{path} does not exist", name=name, path=str(path))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}", name=name, path=str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def java_version() -> int | None:
    """The major version of ``java`` on PATH, or None when there is no usable Java."""
    java = shutil.which("java")
    if java is None:
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    # Java 8 and older report "1.8".
    return int(match.group(2) or 0) if major == 1 else major


def java_problem() -> str | None:
    """Why a reference JVM process (Kafka, Kafka Connect) cannot run here, or None when it can."""
    version = java_version()
    if version is None:
        return "no java on PATH (install a JDK 17+, e.g. scripts/setup-test-deps.sh)"
    if version < MIN_JAVA:
        return f"java {version} is too old: Kafka 4 needs {MIN_JAVA}+"
    return None


class ManagedProcess(ABC):
    """One supervised child process: its own session, its output kept, stopped as a group.

    A subclass implements ``start()`` with ``spawn()`` and then ``wait_ready()`` (a ready line)
    and/or ``wait_serving()`` (a condition, e.g. a client's Metadata or a REST answer).
    """

    name: str = "process"
    tier: ClassVar[str] = "broker"  # the test marker a test starting this process carries
    start_error: ClassVar[type[Exception]] = RuntimeError
    stop_timeout: ClassVar[float] = 30.0

    def __init__(self, *, echo: bool = False, keep_lines: int = 2000,
                 tmp: tempfile.TemporaryDirectory[str] | None = None) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.output: deque[str] = deque(maxlen=keep_lines)
        self.echo = echo  # copy the child's output to our stderr as it comes
        self.ready_line = ""
        self._tmp = tmp  # removed by close()
        self._reader: threading.Thread | None = None
        self._ready = threading.Event()

    @abstractmethod
    def start(self) -> Self:
        raise NotImplementedError

    # -- starting -------------------------------------------------------------------------------

    def spawn(self, cmd: Sequence[str], *, env: Mapping[str, str] | None = None,
              cwd: str | os.PathLike[str] | None = None,
              ready: Callable[[str], bool] | None = None) -> subprocess.Popen[str]:
        """Start ``cmd`` with stdout and stderr merged into ``output``; ``ready`` marks the line
        ``wait_ready()`` waits for."""
        if os.environ.get(TIER_ENV) == "unit":
            raise self.start_error(f"{self.name} started under a test of the unit tier (no processes): "
                                   f"mark the test `{self.tier}`")
        self.ready_line = ""
        self._ready.clear()
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=None if env is None else dict(env), cwd=cwd, start_new_session=True)
        self.proc = proc

        def pump() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.rstrip("\n")
                self.output.append(line)
                if self.echo:
                    sys.stderr.write(raw)
                if ready is not None and not self._ready.is_set() and ready(line):
                    self.ready_line = line
                    self._ready.set()
            self._ready.set()  # EOF: the process ended; wait_ready() reports no ready line

        self._reader = threading.Thread(target=pump, daemon=True, name=f"{self.name}-output")
        self._reader.start()
        return proc

    def wait_ready(self, timeout: float) -> bool:
        """Wait for the ready line given to ``spawn``: False if the output ended or the time ran out."""
        self._ready.wait(timeout)
        return bool(self.ready_line)

    def wait_serving(self, check: Callable[[], object], deadline: float, what: str, *,
                     interval: float = 0.2, ignore: tuple[type[BaseException], ...] = ()) -> None:
        """Poll ``check`` until it returns ``True``, while the process lives; any other value (an
        HTTP status, say) or an exception of the ``ignore`` types means "not yet" and is kept for
        the error. Past ``deadline`` (a ``time.monotonic()`` value) or once the process exits,
        kill it and raise ``start_error`` naming ``what``, the last answer and the log tail."""
        last: object = None
        while time.monotonic() < deadline and self.alive:
            try:
                last = check()
            except ignore as exc:
                last = exc
            else:
                if last is True:
                    return
            time.sleep(interval)
        code = None if self.proc is None else self.proc.poll()
        tail = self.log_tail()
        self.kill()
        raise self.start_error(f"{what} (exit {code}, last {last!r}):\n{tail}")

    def fail_start(self, message: str) -> Exception:
        """Kill what was started and return the error to raise, with the log tail."""
        tail = self.log_tail()
        self.kill()
        return self.start_error(f"{message}:\n{tail}")

    # -- stopping -------------------------------------------------------------------------------

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGTERM and wait (a clean shutdown); SIGKILL the group if it takes longer than
        ``timeout`` (default ``stop_timeout``). Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(self.stop_timeout if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.proc.wait()
        code = self.proc.returncode
        self._join()
        return code

    def kill(self) -> None:
        """SIGKILL the process group: no shutdown hooks run, like a crash or power loss."""
        if self.proc is not None and self.proc.poll() is None:
            self._signal_group(signal.SIGKILL)
            self.proc.wait()
        self._join()

    def pause(self) -> None:
        """SIGSTOP the process group: it keeps its sockets but answers nothing (a network stall)."""
        self._signal_group(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after ``pause()``."""
        self._signal_group(signal.SIGCONT)

    def close(self) -> None:
        """Stop, then remove the temporary directory the process ran in, if it was given one."""
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def _signal_group(self, sig: signal.Signals) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):  # the whole group is gone already
            os.killpg(self.proc.pid, sig)

    def _join(self) -> None:
        if self._reader is not None:
            self._reader.join(5)
        self.proc = None

    # -- state and output -----------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None, f"{self.name} not started"
        return self.proc.pid

    def log_text(self) -> str:
        return "\n".join(self.output)

    def log_tail(self, lines: int = 80) -> str:
        return "\n".join(list(self.output)[-lines:])

    def wait_for_log(self, needle: str, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(needle in line for line in list(self.output)):
                return True
            time.sleep(0.05)
        return False

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class BrokerProcess(ManagedProcess):
    """A strom broker subprocess on a data directory that outlives restarts."""

    name = "strom-broker"

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, port: int = 0,
                 config: dict[str, str] | None = None, env: dict[str, str] | None = None,
                 startup_timeout: float = 60.0, features: dict[str, int] | None = None,
                 launcher: Sequence[str] | None = None) -> None:
        """``launcher``: the command that runs strom's CLI, given the ``dev`` arguments after it
        (default ``python -m strom.core.cli``); a benchmark passes a wrapper that instruments
        the broker."""
        tmp = None if data_dir is not None else tempfile.TemporaryDirectory(prefix="strom-")
        super().__init__(tmp=tmp)
        self.data_dir = Path(data_dir) if data_dir is not None else Path(tmp.name)  # type: ignore[union-attr]
        self.port = port
        self.config = dict(config or {})
        self.features = dict(features or {})  # applied when the data dir is first formatted
        self.env = dict(env or {})
        self.launcher = list(launcher or [sys.executable, "-m", "strom.core.cli"])
        self.startup_timeout = startup_timeout
        self.bootstrap = ""

    def start(self) -> Self:
        cmd = [*self.launcher, "dev", "--data-dir", str(self.data_dir), "--port", str(self.port)]
        for key, value in self.config.items():
            cmd += ["--override", f"{key}={value}"]
        for name, level in self.features.items():
            cmd += ["--feature", f"{name}={level}"]
        # PYTHONSAFEPATH: `python -m` would put the working directory first on sys.path, and a
        # directory holding a folder named strom (the clone's parent) then shadows the package.
        # Not for a launcher script: it imports modules beside it (bench/txn_timeline.py).
        safe_path = {"PYTHONSAFEPATH": "1"} if self.launcher[1:3] == ["-m", "strom.core.cli"] else {}
        self.spawn(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1", **safe_path, **self.env},
                   ready=lambda line: line.startswith(READY_PREFIX))
        if not self.wait_ready(self.startup_timeout):
            log = self.log_text()
            self.kill()
            raise RuntimeError(f"broker did not become ready within {self.startup_timeout}s:\n{log}")
        self.bootstrap = self.ready_line.strip()[len(READY_PREFIX):]
        # Restarts reuse the same port so clients can reconnect.
        self.port = int(self.bootstrap.rsplit(":", 1)[1])
        return self

    def restart(self) -> Self:
        self.stop()
        return self.start()


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
