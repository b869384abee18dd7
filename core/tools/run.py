"""``strom broker start`` and ``strom dev``: run a broker in the foreground.

``broker start`` runs a node from a config file on storage formatted beforehand (as Kafka
does). ``dev`` is the one-command platform: a single combined broker+controller node on
127.0.0.1 whose data lives in one directory, formatted on its first run. Both block until
SIGINT/SIGTERM; the broker prints ``bootstrap.servers=HOST:PORT`` once it accepts connections.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from strom.core.config import BrokerConfig
from strom.core.tools.common import ToolError, UsageError, add_log_level_arg, configure_logging, parse_kv_list
from strom.core.tools.storage import existing_cluster_id, format_dirs, new_cluster_id

DEFAULT_DEV_DIR = "./.strom-data"
DEFAULT_DEV_PORT = 9092
DEV_METRICS_LISTENER = "http://127.0.0.1:9404"  # Prometheus /metrics of `strom dev` (strom.core.server.metrics)


def port_type(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535, got {value!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535, got {port}")
    return port


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    broker = subparsers.add_parser(
        "broker", help="run a broker node from a config file",
        description="Run a broker node (like Kafka's kafka-server-start.sh).")
    sub = broker.add_subparsers(dest="broker_command", metavar="COMMAND", required=True)
    p = sub.add_parser(
        "start", help="run the broker in the foreground until SIGINT/SIGTERM",
        description="Run the broker in the foreground until SIGINT/SIGTERM. Its storage must be "
                    "formatted first with `strom storage format --config FILE`.")
    p.add_argument("--config", "-c", required=True, metavar="FILE",
                   help="broker config (.properties, .yaml or .json) with Kafka's property names")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="override one broker config property; repeatable")
    add_log_level_arg(p)
    p.set_defaults(func=cmd_broker_start)

    p = subparsers.add_parser(
        "dev", help="a single-node development broker in one command",
        description="Run a single-node broker+controller on 127.0.0.1 for development. Its data "
                    f"(log.dirs = DIR/logs, metadata.log.dir = DIR/metadata) lives in --data-dir, "
                    f"default {DEFAULT_DEV_DIR} in the current directory, and is formatted with a "
                    "random cluster id on the first run; later runs reuse it. Prometheus metrics are served on "
                    f"{DEV_METRICS_LISTENER}/metrics unless the port is taken (--override "
                    "strom.metrics.listener= turns them off). Stop with Ctrl-C.")
    p.add_argument("--data-dir", default=DEFAULT_DEV_DIR, metavar="DIR",
                   help=f"directory for all data (default: {DEFAULT_DEV_DIR})")
    p.add_argument("--port", type=port_type, default=DEFAULT_DEV_PORT, metavar="N",
                   help=f"PLAINTEXT port on 127.0.0.1 (default: {DEFAULT_DEV_PORT}; 0 picks a free port, "
                        "printed as bootstrap.servers=HOST:PORT)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="set one broker config property (e.g. num.partitions=3); repeatable")
    p.add_argument("--feature", action="append", default=[], metavar="NAME=LEVEL",
                   help="when formatting a new data dir, finalize a feature at this level instead of "
                        "its default (e.g. transaction.version=1); repeatable")
    add_log_level_arg(p)
    p.set_defaults(func=cmd_dev)


def dev_config(data_dir: Path, port: int, overrides: dict[str, str]) -> BrokerConfig:
    """The config of ``strom dev``: one combined node; ``overrides`` win over its defaults."""
    values: dict[str, str] = {
        "node.id": "1",
        "process.roles": "broker,controller",
        # The broker runs a single-voter controller in-process, so no CONTROLLER listener.
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(data_dir / "logs"),
        "metadata.log.dir": str(data_dir / "metadata"),
        "controller.quorum.voters": "1@127.0.0.1:0",
        # A development broker: a group's first join does not wait 3 s for more members (Kafka's
        # quickstart config/server.properties sets the same); `strom broker start` keeps 3000.
        "group.initial.rebalance.delay.ms": "0",
        # Prometheus /metrics (strom.core.server.metrics); a taken port is one log line, not a failed start.
        "strom.metrics.listener": DEV_METRICS_LISTENER,
    }
    values.update(overrides)
    return BrokerConfig.load(None, values)


def _run(config: BrokerConfig, listeners: list[Any] | None = None) -> int:
    from strom.core.server.broker import run_broker

    try:
        run_broker(config, listeners)
    except KeyboardInterrupt:
        # run_broker normally handles SIGINT itself; a second Ctrl-C lands here.
        return 130
    return 0


def cmd_broker_start(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    config = BrokerConfig.load(args.config, parse_kv_list(args.override, "--override"))
    _, missing = existing_cluster_id(config)
    if missing:
        dirs = ", ".join(str(d) for d in missing)
        raise ToolError(f"storage is not formatted (no meta.properties in {dirs}): "
                        f"run `strom storage format --config {args.config}` first")
    return _run(config)


def cmd_dev(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    data_dir = Path(args.data_dir).expanduser().resolve()
    if data_dir.exists() and not data_dir.is_dir():
        raise UsageError(f"--data-dir {data_dir} exists and is not a directory")
    config = dev_config(data_dir, args.port, parse_kv_list(args.override, "--override"))
    from strom.core.server.broker import bind_listeners

    listeners = bind_listeners(config)  # a busy port is reported before the data dir is touched
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ToolError(f"--data-dir {data_dir}: cannot create it ({e.strerror})") from None
    cluster_id, missing = existing_cluster_id(config)
    if missing:
        cluster_id = cluster_id or new_cluster_id()
        format_dirs(config, cluster_id, ignore_formatted=True, features=args.feature)
        print(f"strom dev: formatted {data_dir} (cluster.id {cluster_id})", file=sys.stderr, flush=True)
    return _run(config, listeners)
