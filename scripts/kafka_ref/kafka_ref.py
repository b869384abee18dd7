"""Run the reference Apache Kafka broker (KRaft combined mode) from its Maven Central jars.

strom's differential tests and benchmarks put Apache Kafka beside strom. ``KafkaRef`` is the
Kafka counterpart of ``strom.core.testing.BrokerProcess``: it formats a data directory with
``kafka.tools.StorageTool``, writes a ``server.properties`` for one node that is both broker
and the single controller voter, starts ``java -cp 'lib/*' kafka.Kafka`` on free loopback
ports (port 0 = pick one), waits until a real client sees the broker, and stops (SIGTERM) or
kills (SIGKILL) it. The jars come from ``scripts/kafka_ref/fetch.sh`` (Maven) and live in
``.cache/kafka-ref/lib`` (override with ``STROM_KAFKA_REF_LIB``).

CLI::

    python scripts/kafka_ref/kafka_ref.py run [--port N] [--data-dir D] [--override k=v ...]
    python scripts/kafka_ref/kafka_ref.py classpath
"""

from __future__ import annotations

import argparse
import base64
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
import uuid
from collections import deque
from pathlib import Path
from types import TracebackType

REPO_ROOT = Path(__file__).resolve().parents[2]
FETCH_SCRIPT = Path(__file__).resolve().with_name("fetch.sh")
DEFAULT_LIB_DIR = REPO_ROOT / ".cache" / "kafka-ref" / "lib"
READY_LINE = "Kafka Server started"
MIN_JAVA = 17  # Kafka 4.x brokers need Java 17.

# Settings for a one-node cluster: internal topics with one replica, no rebalance delay, and
# small thread pools because the test machine has two cores shared with everything else.
BASE_CONFIG: dict[str, str] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
}

JVM_OPTS: list[str] = [
    "-XX:+UseSerialGC",             # one GC thread: the machine is small and shared
    "-XX:TieredStopAtLevel=1",      # C1 only: faster start, less CPU; throughput is not the point
    "-Xss512k",
    "-Djava.awt.headless=true",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
]


class KafkaRefError(RuntimeError):
    """The reference broker could not be set up or started."""


def lib_dir() -> Path:
    return Path(os.environ.get("STROM_KAFKA_REF_LIB", str(DEFAULT_LIB_DIR)))


def classpath(lib: Path | None = None) -> str:
    return str((lib or lib_dir()) / "*")


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
    """Why the reference broker cannot run here (missing/old Java), or None when it can."""
    version = java_version()
    if version is None:
        return "no java on PATH (install a JDK 17+, e.g. scripts/setup-test-deps.sh)"
    if version < MIN_JAVA:
        return f"java {version} is too old: Kafka 4 needs {MIN_JAVA}+"
    return None


def jars_present(lib: Path | None = None) -> bool:
    lib = lib or lib_dir()
    return lib.is_dir() and any(lib.glob("kafka_2.13-*.jar")) and any(lib.glob("kafka-clients-*.jar"))


def ensure_jars(lib: Path | None = None) -> Path:
    """Return the jar directory, running fetch.sh (Maven Central) first if it is empty."""
    lib = lib or lib_dir()
    if jars_present(lib):
        return lib
    proc = subprocess.run(["bash", str(FETCH_SCRIPT), str(lib)], capture_output=True, text=True)
    if proc.returncode != 0 or not jars_present(lib):
        raise KafkaRefError(f"fetch.sh failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return lib


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS just handed out; another process could take it before Kafka binds it,
    which on loopback in a test run is unlikely enough that start() simply reports it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def new_cluster_id() -> str:
    """Kafka's cluster id: a random UUID in URL-safe base64 without padding. Like Kafka's
    Uuid.randomUuid, never one starting with '-': the format tool would take it for an option."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


class KafkaRef:
    """One Apache Kafka node (broker + sole controller) as a subprocess on a data directory."""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, port: int = 0,
                 config: dict[str, str] | None = None, heap: str = "512m",
                 startup_timeout: float = 120.0, host: str = "127.0.0.1", echo: bool = False,
                 features: dict[str, int] | None = None) -> None:
        self._tmp = None if data_dir is not None else tempfile.TemporaryDirectory(prefix="kafka-ref-")
        self.data_dir = Path(data_dir if data_dir is not None else self._tmp.name)  # type: ignore[union-attr]
        self.host = host
        self.port = port
        self.controller_port = 0
        self.config = dict(config or {})
        self.features = dict(features or {})  # `kafka-storage format --feature NAME=LEVEL`, on first start
        self.heap = heap
        self.startup_timeout = startup_timeout
        self.echo = echo  # copy Kafka's log to stderr as it comes
        self.proc: subprocess.Popen[str] | None = None
        self.bootstrap = ""
        self.output: deque[str] = deque(maxlen=5000)
        self._reader: threading.Thread | None = None

    # -- paths --------------------------------------------------------------------------------

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "kafka-logs"

    @property
    def properties_file(self) -> Path:
        return self.data_dir / "server.properties"

    def server_properties(self) -> dict[str, str]:
        props = dict(BASE_CONFIG)
        props.update({
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.log_dir),
        })
        props.update(self.config)
        return props

    # -- lifecycle ----------------------------------------------------------------------------

    def _java(self) -> list[str]:
        java = shutil.which("java")
        problem = java_problem()
        if java is None or problem is not None:
            raise KafkaRefError(problem or "no java")
        return [java, f"-Xmx{self.heap}", "-Xms64m", *JVM_OPTS, "-cp", classpath(ensure_jars())]

    def _write_properties(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        text = "".join(f"{k}={v}\n" for k, v in self.server_properties().items())
        self.properties_file.write_text(text)

    def format(self) -> None:
        """``kafka-storage format`` unless the log dir was formatted by an earlier start."""
        if (self.log_dir / "meta.properties").exists():
            return
        cmd = [*self._java(), "kafka.tools.StorageTool", "format", "-t", new_cluster_id(),
               "-c", str(self.properties_file)]
        for name, level in self.features.items():
            cmd += ["--feature", f"{name}={level}"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise KafkaRefError(f"storage format failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")

    def start(self) -> KafkaRef:
        # Restarts keep the ports chosen the first time, so clients can reconnect.
        if self.port == 0:
            self.port = free_port(self.host)
        if self.controller_port == 0:
            self.controller_port = free_port(self.host)
        self._write_properties()
        self.format()
        cmd = [*self._java(), "kafka.Kafka", str(self.properties_file)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True, cwd=self.data_dir)
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line.rstrip("\n"))
                if self.echo:
                    sys.stderr.write(line)
                if READY_LINE in line:
                    ready.set()
            ready.set()  # EOF: the process ended; start() sees that below

        self._reader = threading.Thread(target=pump, daemon=True, name="kafka-ref-output")
        self._reader.start()
        deadline = time.monotonic() + self.startup_timeout
        ready.wait(self.startup_timeout)
        if self.proc.poll() is not None or not ready.is_set():
            log = self.log_tail()
            self.kill()
            raise KafkaRefError(f"Kafka did not start within {self.startup_timeout}s:\n{log}")
        self.bootstrap = f"{self.host}:{self.port}"
        self._wait_until_serving(deadline)
        return self

    def _wait_until_serving(self, deadline: float) -> None:
        """The log line comes when the broker is unfenced; also see it through a real client."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                meta = admin.list_topics(timeout=5)
                if meta.brokers:
                    return
            except Exception as exc:  # KafkaException while the listener comes up
                last = exc
            time.sleep(0.2)
        log = self.log_tail()
        self.kill()
        raise KafkaRefError(f"Kafka started but no client could reach {self.bootstrap} ({last}):\n{log}")

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait: Kafka's controlled shutdown."""
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
        self._join()
        return code

    def kill(self) -> None:
        """SIGKILL the process group: no shutdown hooks, like a crash."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._join()

    def restart(self) -> KafkaRef:
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

    def log_tail(self, lines: int = 80) -> str:
        return "\n".join(list(self.output)[-lines:])

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> KafkaRef:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _parse_overrides(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--override wants KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="run Kafka in the foreground until Ctrl-C / SIGTERM")
    run.add_argument("--port", type=int, default=0)
    run.add_argument("--data-dir", default=None, help="kept between runs; default: a temp dir")
    run.add_argument("--heap", default="512m")
    run.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    run.add_argument("--verbose", action="store_true", help="echo Kafka's log")
    sub.add_parser("classpath", help="print the java classpath of the reference jars")
    args = parser.parse_args(argv)

    if args.cmd == "classpath":
        print(classpath(ensure_jars()))
        return 0

    ref = KafkaRef(args.data_dir, port=args.port, config=_parse_overrides(args.override), heap=args.heap,
                   echo=args.verbose)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        ref.start()
    except KafkaRefError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"bootstrap.servers={ref.bootstrap}", flush=True)
    try:
        while not stop.is_set() and ref.alive:
            stop.wait(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        ref.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
