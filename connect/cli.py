"""``strom connect``: run a Connect worker.

* ``strom connect standalone worker.properties connector1.properties [connector2.json ...]`` —
  one process, source offsets in ``offset.storage.file.filename``, the connectors given on the
  command line (``.properties``, or JSON either in Kafka's ``{"name": ..., "config": {...}}``
  shape or flat), plus the REST API on ``listeners``.
* ``strom connect distributed worker.properties`` — a member of the Connect cluster
  ``group.id`` (:class:`strom.connect.runtime.distributed.DistributedHerder`).

Both run until SIGTERM or SIGINT, then stop tasks cleanly (committing offsets) and exit 0.
``python -m strom.connect.cli ...`` works too.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from strom.connect.exceptions import ConnectError
from strom.core.config import parse_properties

log = logging.getLogger("strom.connect.cli")

READY_LINE = "strom connect worker started"


def load_connector_config(path: str | Path) -> tuple[str, dict[str, str]]:
    """(name, config) from a ``.properties`` or JSON connector file; a clear error if it is unusable."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConnectError(f"cannot read connector config {p}: {exc.strerror}") from None
    if p.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConnectError(f"connector config {p} is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ConnectError(f"connector config {p} must be a JSON object")
        if isinstance(data.get("config"), dict):  # Kafka's {"name": ..., "config": {...}}
            config = {str(k): _str(v) for k, v in data["config"].items()}
            name = str(data.get("name") or config.get("name") or "")
        else:
            config = {str(k): _str(v) for k, v in data.items()}
            name = config.get("name", "")
    else:
        config = parse_properties(text)
        name = config.get("name", "")
    if not name:
        raise ConnectError(f"connector config {p} has no 'name'")
    config.setdefault("name", name)
    return name, config


def _str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


# Kafka's level names for --log-level / $STROM_LOG_LEVEL (TRACE is Python's DEBUG).
LOG_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
              "ERROR": logging.ERROR, "OFF": logging.CRITICAL + 10}


def _log_level(flag: str | None) -> int:
    name = (flag or os.environ.get("STROM_LOG_LEVEL") or "INFO").strip().upper()
    return LOG_LEVELS.get(name, logging.INFO)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strom connect", description="Run a Kafka Connect worker.")
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("standalone", help="one worker; connectors from files; offsets in a file",
                       description="Run one Kafka Connect worker in standalone mode (connect-standalone.sh): "
                                   "the connectors come from the files given, source offsets are kept in "
                                   "offset.storage.file.filename, and the REST API listens on the worker's "
                                   "listeners. Stop with Ctrl-C.")
    s.add_argument("worker_config", help="worker .properties (or .json/.yaml)")
    s.add_argument("connector_configs", nargs="*", help="connector .properties or .json files")
    s.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="override a worker config key")
    d = sub.add_parser("distributed", help="a member of a Connect cluster (group.id)",
                       description="Run a Kafka Connect worker in distributed mode (connect-distributed.sh): "
                                   "it joins the Connect cluster named by group.id, keeps configs, offsets "
                                   "and statuses in the internal topics, and takes connectors through the "
                                   "REST API. Stop with Ctrl-C.")
    d.add_argument("worker_config", help="worker .properties (or .json/.yaml)")
    d.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="override a worker config key")
    m = sub.add_parser("mirror-maker", help="MirrorMaker 2 in dedicated mode (connect-mirror-maker.sh)",
                       description="Run MirrorMaker 2 in dedicated mode (connect-mirror-maker.sh): the "
                                   "clusters and replication flows of mm2.properties, each flow's connectors "
                                   "in this process. Stop with Ctrl-C.")
    m.add_argument("mm2_config", help="mm2.properties")
    m.add_argument("--clusters", nargs="+", default=None, metavar="ALIAS",
                   help="run only the flows whose target is one of these clusters")
    for p in (s, d, m):
        p.add_argument("--log-level", type=str.upper, choices=tuple(LOG_LEVELS), metavar="LEVEL",
                       help="log level: TRACE, DEBUG, INFO, WARN, ERROR or OFF "
                            "(default: $STROM_LOG_LEVEL, else INFO)")
    return parser


def _wait_for_signal() -> None:
    stop = threading.Event()

    def handler(signum: int, frame: Any) -> None:
        log.info("signal %d: shutting down", signum)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    while not stop.wait(0.5):
        pass


def freeze_startup_heap() -> None:
    """Move the objects alive once the worker has started (modules, configs) out of the garbage
    collector's reach, once per process (``gc.freeze``). Done here, in the worker process, not
    in the library: freezing is a process-wide choice an embedding application makes itself.

    Tasks allocate a record object or two per record that flows; every few thousand of them the
    collector runs, and its full collections walk the whole heap, startup objects included. With
    those frozen a full collection walks only what the tasks made: measured on the file pipeline,
    building a SourceRecord went from 2.5 to 1.5 µs.
    """
    if gc.get_freeze_count() == 0:
        gc.collect()  # what is already garbage is freed, not frozen
        gc.freeze()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=_log_level(args.log_level), format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    if args.mode == "mirror-maker":
        from strom.connect.mirror.maker import run

        return run(args.mm2_config, args.clusters)
    from strom.connect.plugins import PluginRegistry
    from strom.connect.rest.server import RestServer
    from strom.connect.runtime.config import WorkerConfig
    from strom.plugins.manager import get_plugin_manager

    overrides = dict(o.split("=", 1) for o in args.override if "=" in o)
    try:
        config = WorkerConfig.load(args.worker_config, overrides)
        registry = PluginRegistry(get_plugin_manager())
        connectors = [load_connector_config(p) for p in getattr(args, "connector_configs", [])]
    except (ConnectError, ValueError) as exc:
        print(f"strom connect: {exc}", file=sys.stderr)
        return 2

    herder: Any
    if args.mode == "standalone":
        from strom.connect.runtime.standalone import StandaloneHerder

        herder = StandaloneHerder(config, registry)
    else:
        try:
            from strom.connect.runtime.distributed import DistributedHerder
        except ImportError as exc:
            print(f"strom connect: distributed mode is not available: {exc}", file=sys.stderr)
            return 2
        herder = DistributedHerder(config, registry)
    try:
        rest = RestServer.from_worker_config(herder, config)  # https and basic-auth settings are read here
    except (ConnectError, ValueError) as exc:
        print(f"strom connect: {exc}", file=sys.stderr)
        return 2
    try:
        herder.start()
        rest.start()
        if args.mode == "standalone":
            herder.worker_id = rest.url.split("://", 1)[-1].rstrip("/")
            for name, conf in connectors:
                herder.put_connector_config(name, conf, False)
                log.info("created connector %s", name)
        freeze_startup_heap()
        print(f"{READY_LINE}: {rest.url}", flush=True)
        _wait_for_signal()
        return 0
    except ConnectError as exc:
        log.error("strom connect: %s", exc)
        print(f"strom connect: {exc}", file=sys.stderr)
        return 1
    finally:
        try:
            rest.stop()
        finally:
            herder.stop()


if __name__ == "__main__":
    sys.exit(main())
