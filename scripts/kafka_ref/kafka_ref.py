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
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from strom.core.testing import MIN_JAVA, ManagedProcess, free_port, java_problem, java_version

__all__ = ["BASE_CONFIG", "JARS", "JVM_OPTS", "MIN_JAVA", "KafkaRef", "KafkaRefError", "RefJars", "classpath",
           "ensure_jars", "free_port", "jars_present", "java_problem", "java_version", "lib_dir", "new_cluster_id",
           "parse_overrides", "run_in_foreground"]

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
FETCH_SCRIPT = Path(__file__).resolve().with_name("fetch.sh")
DEFAULT_LIB_DIR = REPO_ROOT / ".cache" / "kafka-ref" / "lib"
READY_LINE = "Kafka Server started"

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


@dataclass(frozen=True)
class RefJars:
    """A reference JVM's jar directory, filled from Maven Central by its ``fetch.sh``, and the
    ``java`` command line that runs from it. The reference broker's here and the reference
    Connect worker's (scripts/kconnect_ref) differ only in these fields."""

    env_var: str                # names a jar directory in place of default_dir
    default_dir: Path
    fetch_script: Path
    markers: tuple[str, ...]    # globs that must each match a jar for the directory to count
    error: type[Exception]      # raised when the jars cannot be fetched or Java is unusable

    def lib_dir(self) -> Path:
        return Path(os.environ.get(self.env_var, str(self.default_dir)))

    def classpath(self, lib: Path | None = None) -> str:
        return str((lib or self.lib_dir()) / "*")

    def present(self, lib: Path | None = None) -> bool:
        lib = lib or self.lib_dir()
        return lib.is_dir() and all(any(lib.glob(marker)) for marker in self.markers)

    def ensure(self, lib: Path | None = None) -> Path:
        """Return the jar directory, running fetch.sh (Maven Central) first if it is empty."""
        lib = lib or self.lib_dir()
        if self.present(lib):
            return lib
        proc = subprocess.run(["bash", str(self.fetch_script), str(lib)], capture_output=True, text=True)
        if proc.returncode != 0 or not self.present(lib):
            raise self.error(f"fetch.sh failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return lib

    def java_command(self, heap: str, opts: Sequence[str]) -> list[str]:
        """``java -Xmx<heap> -Xms64m <opts> -cp <jars>/*``, a main class and its arguments to follow.
        Java is checked before the jars are fetched: without it there is nothing to fetch them for."""
        java = shutil.which("java")
        problem = java_problem()
        if java is None or problem is not None:
            raise self.error(problem or "no java")
        return [java, f"-Xmx{heap}", "-Xms64m", *opts, "-cp", self.classpath(self.ensure())]


JARS = RefJars("STROM_KAFKA_REF_LIB", DEFAULT_LIB_DIR, FETCH_SCRIPT, ("kafka_2.13-*.jar", "kafka-clients-*.jar"),
               KafkaRefError)
lib_dir = JARS.lib_dir
classpath = JARS.classpath
jars_present = JARS.present
ensure_jars = JARS.ensure


def new_cluster_id() -> str:
    """Kafka's cluster id: a random UUID in URL-safe base64 without padding. Like Kafka's
    Uuid.randomUuid, never one starting with '-': the format tool would take it for an option."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a JVM server socket binds
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


class KafkaRef(ManagedProcess):
    """One Apache Kafka node (broker + sole controller) as a subprocess on a data directory."""

    name = "kafka-ref"
    tier = "reference"
    start_error = KafkaRefError
    stop_timeout = 60.0

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, port: int = 0,
                 config: dict[str, str] | None = None, heap: str = "512m",
                 startup_timeout: float = 120.0, host: str = "127.0.0.1", echo: bool = False,
                 features: dict[str, int] | None = None) -> None:
        tmp = None if data_dir is not None else tempfile.TemporaryDirectory(prefix="kafka-ref-")
        super().__init__(echo=echo, keep_lines=5000, tmp=tmp)  # echo: copy Kafka's log to stderr
        self.data_dir = Path(data_dir) if data_dir is not None else Path(tmp.name)  # type: ignore[union-attr]
        self.host = host
        self.port = port
        self.controller_port = 0
        self.config = dict(config or {})
        self.features = dict(features or {})  # `kafka-storage format --feature NAME=LEVEL`, on first start
        self.heap = heap
        self.startup_timeout = startup_timeout
        self.bootstrap = ""

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
        return JARS.java_command(self.heap, JVM_OPTS)  # JVM_OPTS as it is now: bench/peers.py edits it

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

    def start(self) -> Self:
        # Restarts keep the ports chosen the first time, so clients can reconnect. A controller
        # port taken while Kafka was down (it is from the ephemeral range, so any connection's
        # local port can land on it: "Unable to start acceptor for CONTROLLER" in CI) is replaced:
        # no client needs it, and the static single-voter quorum keeps only voter ids on disk.
        if self.port == 0:
            self.port = free_port(self.host)
        if self.controller_port == 0 or not _bindable(self.host, self.controller_port):
            self.controller_port = free_port(self.host)
        self._write_properties()
        self.format()
        deadline = time.monotonic() + self.startup_timeout
        self.spawn([*self._java(), "kafka.Kafka", str(self.properties_file)], cwd=self.data_dir,
                   ready=lambda line: READY_LINE in line)
        if not self.wait_ready(self.startup_timeout) or not self.alive:
            raise self.fail_start(f"Kafka did not start within {self.startup_timeout}s")
        self.bootstrap = f"{self.host}:{self.port}"
        self._wait_until_serving(deadline)
        return self

    def _wait_until_serving(self, deadline: float) -> None:
        """The log line comes when the broker is unfenced; also see it through a real client."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        self.wait_serving(lambda: bool(admin.list_topics(timeout=5).brokers), deadline,
                          f"Kafka started but no client could reach {self.bootstrap}",
                          ignore=(KafkaException,))

    def restart(self) -> Self:
        self.stop()
        return self.start()


def parse_overrides(items: list[str]) -> dict[str, str]:
    """``--override KEY=VALUE`` arguments as a dict (exit with a usage message on a malformed one)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--override wants KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def run_in_foreground(ref: ManagedProcess, announce: Callable[[], str], logger: logging.Logger) -> int:
    """A CLI's ``run``: start ``ref``, print ``announce()`` (where clients reach it) and keep it
    until Ctrl-C, SIGTERM or its exit, then close it. 1 (logged) when it could not start."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        ref.start()
    except ref.start_error as exc:
        logger.error("%s", exc)
        return 1
    print(announce(), flush=True)
    try:
        while not stop.is_set() and ref.alive:
            stop.wait(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        ref.close()
    return 0


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
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    if args.cmd == "classpath":
        print(classpath(ensure_jars()))
        return 0

    ref = KafkaRef(args.data_dir, port=args.port, config=parse_overrides(args.override), heap=args.heap,
                   echo=args.verbose)
    return run_in_foreground(ref, lambda: f"bootstrap.servers={ref.bootstrap}", log)


if __name__ == "__main__":
    sys.exit(main())
