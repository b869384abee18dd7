"""Run a reference Apache Kafka Connect worker (Java) from its Maven Central jars.

strom.connect's compatibility tests put Kafka Connect's own worker beside strom's on one broker.
``KConnectRef`` writes a ``worker.properties`` (the settings given plus a REST listener on a
free loopback port), starts ``java -cp 'lib/*' org.apache.kafka.connect.cli.ConnectDistributed``
(or ``ConnectStandalone`` with connector files), waits until its REST API answers ``GET
/connectors`` with 200 (the herder has joined its group and read the config topic), and stops it
(SIGTERM: a clean shutdown that commits offsets) or kills it (SIGKILL). The jars come from
``scripts/kconnect_ref/fetch.sh`` (Maven) and live in ``.cache/kconnect-ref/lib`` (override with
``STROM_KCONNECT_REF_LIB``). The jar directory, the JVM launch and the CLI's foreground run are
``scripts/kafka_ref/kafka_ref.py``'s (``RefJars``, ``run_in_foreground``); the process supervision
is ``strom.core.testing``'s.

CLI::

    python scripts/kconnect_ref/kconnect_ref.py distributed --bootstrap HOST:PORT [--override k=v ...]
    python scripts/kconnect_ref/kconnect_ref.py classpath
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Self

# The jar directory and JVM launch are kafka_ref's (scripts/kafka_ref): run as a script this folder
# alone is on sys.path; tests/conftest.py and bench/peers.py put or import kafka_ref themselves.
_KAFKA_REF_DIR = str(Path(__file__).resolve().parents[1] / "kafka_ref")
if _KAFKA_REF_DIR not in sys.path:
    sys.path.append(_KAFKA_REF_DIR)

from kafka_ref import JVM_OPTS as _KAFKA_JVM_OPTS  # noqa: E402
from kafka_ref import RefJars, parse_overrides, run_in_foreground  # noqa: E402

from strom.core.testing import ManagedProcess, free_port  # noqa: E402

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
FETCH_SCRIPT = Path(__file__).resolve().with_name("fetch.sh")
DEFAULT_LIB_DIR = REPO_ROOT / ".cache" / "kconnect-ref" / "lib"
DISTRIBUTED_MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
STANDALONE_MAIN = "org.apache.kafka.connect.cli.ConnectStandalone"

# Worker settings for tests on one small broker: one-replica internal topics and short timeouts,
# so a worker that joins or leaves settles in seconds rather than Kafka's minute-scale defaults.
BASE_DISTRIBUTED_CONFIG: dict[str, str] = {
    "config.storage.replication.factor": "1",
    "offset.storage.replication.factor": "1",
    "status.storage.replication.factor": "1",
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "offset.flush.interval.ms": "500",
    "scheduled.rebalance.max.delay.ms": "1000",
    "session.timeout.ms": "10000",
    "heartbeat.interval.ms": "1000",
}

# The reference broker's JVM options, with slf4j-simple's log on stdout (its default is stderr).
JVM_OPTS: list[str] = [*_KAFKA_JVM_OPTS, "-Dorg.slf4j.simpleLogger.logFile=System.out"]


class KConnectRefError(RuntimeError):
    """The reference Connect worker could not be set up or started."""


JARS = RefJars("STROM_KCONNECT_REF_LIB", DEFAULT_LIB_DIR, FETCH_SCRIPT, ("connect-runtime-*.jar", "connect-file-*.jar"),
               KConnectRefError)
classpath = JARS.classpath  # JARS.lib_dir and JARS.present as well
ensure_jars = JARS.ensure


def http(method: str, url: str, body: Any = None, timeout: float = 30.0) -> tuple[int, Any]:
    """(status, parsed JSON body or None) of one REST call; HTTP errors are returned, not raised."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as err:
        raw, status = err.read(), err.code
    return status, (json.loads(raw) if raw.strip() else None)


def rest_ready(url: str) -> bool | tuple[int, Any]:
    """True once a Connect worker's ``GET /connectors`` answers 200, else the (status, body) seen."""
    status, body = http("GET", f"{url}/connectors", timeout=5)
    return True if status == 200 else (status, body)


class KConnectRef(ManagedProcess):
    """One Kafka Connect worker (distributed, or standalone with connector files) as a subprocess."""

    name = "kconnect-ref"
    tier = "reference"
    start_error = KConnectRefError
    stop_timeout = 60.0  # SIGTERM: the worker stops its tasks, commits offsets and leaves the group

    def __init__(self, bootstrap: str, config: dict[str, str] | None = None, *,
                 work_dir: str | os.PathLike[str] | None = None, port: int = 0,
                 standalone_connectors: list[str | os.PathLike[str]] | None = None,
                 heap: str = "512m", startup_timeout: float = 120.0, host: str = "127.0.0.1",
                 echo: bool = False) -> None:
        tmp = None if work_dir is not None else tempfile.TemporaryDirectory(prefix="kconnect-ref-")
        super().__init__(echo=echo, keep_lines=5000, tmp=tmp)
        self.work_dir = Path(work_dir) if work_dir is not None else Path(tmp.name)  # type: ignore[union-attr]
        self.bootstrap = bootstrap
        self.config = dict(config or {})
        self.standalone = standalone_connectors is not None
        self.connector_files = [str(p) for p in standalone_connectors or []]
        self.host = host
        self.port = port
        self.heap = heap
        self.startup_timeout = startup_timeout

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def properties_file(self) -> Path:
        return self.work_dir / "worker.properties"

    def worker_properties(self) -> dict[str, str]:
        props: dict[str, str] = {}
        if not self.standalone:
            props.update(BASE_DISTRIBUTED_CONFIG)
        else:
            props.update({"key.converter": BASE_DISTRIBUTED_CONFIG["key.converter"],
                          "value.converter": BASE_DISTRIBUTED_CONFIG["value.converter"],
                          "offset.storage.file.filename": str(self.work_dir / "connect.offsets")})
        props.update({
            "bootstrap.servers": self.bootstrap,
            "listeners": f"http://{self.host}:{self.port}",
            "rest.advertised.host.name": self.host,
            "rest.advertised.port": str(self.port),
        })
        props.update(self.config)
        return props

    def _java(self) -> list[str]:
        return JARS.java_command(self.heap, JVM_OPTS)

    def start(self) -> Self:
        if self.port == 0:  # a restart keeps its port, so REST URLs stay valid
            self.port = free_port(self.host)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        props = self.worker_properties()
        if not self.standalone and "group.id" not in props:
            raise KConnectRefError("a distributed worker needs group.id")
        # Java's Properties format: escape backslashes; keys and values here are plain otherwise.
        self.properties_file.write_text("".join(f"{k}={v.replace(chr(92), chr(92) * 2)}\n"
                                                for k, v in props.items()))
        main = STANDALONE_MAIN if self.standalone else DISTRIBUTED_MAIN
        self.spawn([*self._java(), main, str(self.properties_file), *self.connector_files], cwd=self.work_dir)
        # GET /connectors answers 200 only once the herder has joined and read its configs
        # (before that Kafka Connect answers 503/409 or the socket is closed).
        self.wait_serving(lambda: rest_ready(self.url), time.monotonic() + self.startup_timeout,
                          f"Kafka Connect REST at {self.url} not ready", interval=0.3, ignore=(OSError,))
        return self

    def rest(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return http(method, f"{self.url}{path}", body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("distributed", help="run a distributed worker until Ctrl-C / SIGTERM")
    run.add_argument("--bootstrap", required=True)
    run.add_argument("--group-id", default="connect-ref")
    run.add_argument("--port", type=int, default=0)
    run.add_argument("--heap", default="512m")
    run.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    run.add_argument("--verbose", action="store_true", help="echo the worker's log")
    sub.add_parser("classpath", help="print the java classpath of the reference jars")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    if args.cmd == "classpath":
        print(classpath(ensure_jars()))
        return 0

    config = {"group.id": args.group_id, "config.storage.topic": f"{args.group_id}-configs",
              "offset.storage.topic": f"{args.group_id}-offsets",
              "status.storage.topic": f"{args.group_id}-status", **parse_overrides(args.override)}
    ref = KConnectRef(args.bootstrap, config, port=args.port, heap=args.heap, echo=args.verbose)
    return run_in_foreground(ref, lambda: f"rest={ref.url}", log)


if __name__ == "__main__":
    sys.exit(main())
