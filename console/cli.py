"""``strom console`` and the console that ``strom dev`` starts beside its broker."""

from __future__ import annotations

import argparse
import errno
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

DEFAULT_PORT = 8080
DEFAULT_HOST = "127.0.0.1"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "console", help="a web console for any Kafka cluster (topics, messages, groups, Connect, Streams)",
        description="Serve strom's web console: cluster overview, topics, a message browser, consumer "
                    "groups with lag, Kafka Connect connectors and Kafka Streams applications. Works "
                    "against any Kafka cluster. Stop with Ctrl-C.")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                   help="the Kafka cluster to show (any Kafka, not only strom)")
    p.add_argument("--connect-url", metavar="URL", help="a Kafka Connect worker's REST URL (e.g. http://localhost:8083)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, metavar="N", help=f"HTTP port (default {DEFAULT_PORT})")
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    p.add_argument("--read-only", action="store_true", help="refuse every change (create, delete, reset...)")
    p.set_defaults(func=cmd_console)


def cmd_console(args: argparse.Namespace) -> int:
    from strom.console.server import Console, run_forever

    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    console = Console(args.bootstrap_server, args.connect_url, read_only=args.read_only)

    def bound(port: int) -> None:
        print(f"strom console: http://{args.host}:{port}/", file=sys.stderr, flush=True)
    try:
        run_forever(console, args.host, args.port, bound)
    except OSError as e:
        print(f"error: --port {args.port}: cannot listen on {args.host}:{args.port} ({e.strerror})",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def add_dev_flags(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Give ``strom dev`` --no-console and --console-port, and start the console before its broker."""
    dev = subparsers.choices.get("dev")
    if dev is None:
        return
    dev.add_argument("--no-console", action="store_true", help="do not start the web console")
    dev.add_argument("--console-port", type=int, default=DEFAULT_PORT, metavar="N",
                     help=f"port of the web console on 127.0.0.1 (default {DEFAULT_PORT})")
    run_dev: Callable[[argparse.Namespace], int] = dev.get_default("func")

    def dev_with_console(args: argparse.Namespace) -> int:
        # The console starts once the broker answers on its port: a broker that fails to start (a
        # port in use, a bad --override) reports its own one-line error, with no console line.
        if not args.no_console and args.port != 0 and _free(args.port):
            threading.Thread(target=_start_when_serving, args=(args.port, args.console_port),
                             name="strom-console-start", daemon=True).start()
        return run_dev(args)
    dev.set_defaults(func=dev_with_console)


def _start_when_serving(broker_port: int, console_port: int, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((DEFAULT_HOST, broker_port), timeout=1.0):
                break
        except OSError:
            time.sleep(0.1)  # polling the broker's port until it listens
    else:
        return
    start_dev_console(broker_port, console_port)


def _free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((DEFAULT_HOST, port))
        except OSError:
            return False
    return True


def start_dev_console(broker_port: int, console_port: int) -> bool:
    """Start the console in a daemon thread; a taken port is one line and the broker goes on."""
    if broker_port == 0:
        # The broker's port is known only once bound (test brokers run this way): no console.
        log.debug("web console not started: --port 0")
        return False
    # Checked here so a taken port is reported at once rather than from the thread.
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((DEFAULT_HOST, console_port))
        except OSError as e:
            why = "in use" if e.errno == errno.EADDRINUSE else e.strerror
            _line(f"strom dev: web console not started: port {console_port} is {why} (--console-port N moves it)")
            return False
    from strom.console.server import Console, run_forever

    console = Console(f"127.0.0.1:{broker_port}")

    def run() -> None:
        try:
            run_forever(console, DEFAULT_HOST, console_port,
                        lambda p: _line(f"strom dev: web console on http://{DEFAULT_HOST}:{p}/"))
        except OSError as e:
            _line(f"strom dev: web console not started: {e.strerror}")
        except Exception:
            log.exception("web console stopped")
    threading.Thread(target=run, name="strom-console", daemon=True).start()
    return True


def _line(text: str) -> None:
    """One line to stderr in one write: ``strom dev``'s broker prints its ready line to stdout
    meanwhile, and print()'s separate write of the newline let the two lines interleave in a
    pipe both go to (a test harness reading ``bootstrap.servers=`` then missed it)."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
