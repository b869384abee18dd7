"""Helpers shared by the ``strom`` subcommands: errors, ``key=value`` flags, client config.

Two error kinds decide the exit code: :class:`UsageError` (the command line is wrong, exit 2,
like argparse's own errors) and :class:`ToolError` (the command ran and failed, exit 1).
Both carry a message that names the offending flag or config key and, where there is one, the
way out.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from strom.core.config import parse_properties
from strom.exceptions import StromError

if TYPE_CHECKING:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
_Client = TypeVar("_Client")


class UsageError(StromError):
    """The command line is invalid; ``strom`` prints usage and exits 2."""


class ToolError(StromError):
    """A command failed; ``strom`` prints ``error: <message>`` and exits 1."""


def parse_kv(item: str, flag: str) -> tuple[str, str]:
    """Split one ``key=value`` argument of ``flag``; a missing ``=`` or key is a usage error."""
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise UsageError(f"{flag} expects key=value, got {item!r}")
    return key, value


def parse_kv_list(items: Iterable[str] | None, flag: str) -> dict[str, str]:
    """Several ``key=value`` arguments of ``flag`` as a dict (later ones win)."""
    return dict(parse_kv(item, flag) for item in items or ())


def bool_property(props: Mapping[str, str], key: str, default: bool) -> bool:
    """A ``--property key=true|false`` of a console tool (``default`` when absent)."""
    raw = props.get(key)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise UsageError(f"--property {key}={raw}: expected true or false")
    return raw.strip().lower() == "true"


def add_client_args(parser: argparse.ArgumentParser) -> None:
    """The connection flags every console tool takes (named as in Kafka's tools)."""
    group = parser.add_argument_group("connection")
    group.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                       help=f"broker to connect to (default: {DEFAULT_BOOTSTRAP}; "
                            "a comma-separated list is accepted)")
    group.add_argument("--command-config", metavar="FILE",
                       help="properties file with extra client settings "
                            "(librdkafka names, e.g. security.protocol, sasl.mechanism)")
    group.add_argument("-X", dest="client_props", action="append", default=[], metavar="KEY=VALUE",
                       help="one extra librdkafka client property; repeatable; wins over --command-config")


# A librdkafka configuration of plain values, as confluent-kafka's clients declare it.
ClientConfig = dict[str, str | int | float | bool]


def client_config(args: argparse.Namespace, base: Mapping[str, str | int | float | bool] | None = None
                  ) -> ClientConfig:
    """librdkafka config from ``base``, then ``--command-config``, then ``-X``, then the bootstrap."""
    # librdkafka logs every failed connect attempt to stderr; the tools report problems through
    # error callbacks and exceptions instead (-X log_level=7 brings the logs back).
    conf: ClientConfig = {"log_level": 0, **(base or {})}
    if args.command_config:
        try:
            text = Path(args.command_config).read_text()
        except OSError as e:
            raise ToolError(f"--command-config {args.command_config}: cannot read it ({e.strerror})") from None
        conf.update(parse_properties(text))
    conf.update(parse_kv_list(args.client_props, "-X"))
    conf["bootstrap.servers"] = args.bootstrap_server
    return conf


def check_bootstrap(value: str) -> None:
    """Reject a ``--bootstrap-server`` that is not HOST:PORT[,HOST:PORT...] before librdkafka does."""
    for item in value.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"--bootstrap-server expects HOST:PORT, got {value!r}")


def unreachable_hint(bootstrap: str) -> str:
    return (f"could not reach a broker at {bootstrap}: is one running? "
            "(start one with `strom dev`, or pass --bootstrap-server HOST:PORT)")


class WarnOnce:
    """librdkafka's ``error_cb`` for a console tool: librdkafka retries connections itself, so
    each kind of problem is told once on stderr (an unreachable cluster with the way out)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.warned: set[int] = set()

    def __call__(self, err: KafkaError) -> None:
        from confluent_kafka import KafkaError

        if err.code() in self.warned:
            return
        self.warned.add(err.code())
        hint = unreachable_hint(self.bootstrap) if err.code() == KafkaError._ALL_BROKERS_DOWN else err.str()
        print(f"warning: {hint}", file=sys.stderr)


def open_client(factory: Callable[[dict[str, object]], _Client], conf: ClientConfig, bootstrap: str) -> _Client:
    """``factory(conf)`` (confluent-kafka's Producer or Consumer) with a :class:`WarnOnce` error
    callback; a configuration librdkafka refuses is a :class:`ToolError` naming its reason."""
    from confluent_kafka import KafkaException

    try:
        return factory({**conf, "error_cb": WarnOnce(bootstrap)})
    except (KafkaException, ValueError) as e:
        reason = e.args[0].str() if isinstance(e, KafkaException) and e.args else e
        raise ToolError(f"invalid client configuration: {reason}") from None


def admin_client(args: argparse.Namespace) -> AdminClient:
    """confluent-kafka's AdminClient for a tool's connection flags (checked first)."""
    from confluent_kafka.admin import AdminClient

    check_bootstrap(args.bootstrap_server)
    return AdminClient(client_config(args))


def kafka_failure(args: argparse.Namespace, what: str, exc: BaseException) -> ToolError:
    """A ToolError for a client exception; an unreachable cluster gets the hint to start one."""
    from confluent_kafka import KafkaError

    err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    if err is not None and err.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
                                          KafkaError._ALL_BROKERS_DOWN):
        return ToolError(f"{what}: {unreachable_hint(args.bootstrap_server)}")
    detail = f"{err.name()}: {err.str()}" if err is not None else str(exc)
    return ToolError(f"{what}: {detail}")


PROGRESS_INTERVAL_S = 5.0


class Progress:
    """A status line on stderr at most every ``interval`` seconds during a long operation
    (Kafka's perf tools report every 5 s; the same rhythm for resets over many partitions)."""

    def __init__(self, what: str, total: int, interval: float = PROGRESS_INTERVAL_S) -> None:
        self.what = what
        self.total = total
        self.interval = interval
        self.last = time.monotonic()

    def tick(self, done: int) -> None:
        now = time.monotonic()
        if self.interval > 0 and now - self.last >= self.interval:
            self.last = now
            print(f"{self.what}: {done} of {self.total}", file=sys.stderr, flush=True)


LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "WARNING", "ERROR", "OFF")
LOG_LEVEL_ENV = "STROM_LOG_LEVEL"


def add_log_level_arg(parser: argparse.ArgumentParser) -> None:
    """``--log-level`` of a long-running command (default: $STROM_LOG_LEVEL, else INFO)."""
    parser.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, metavar="LEVEL",
                        help=f"log level: TRACE, DEBUG, INFO, WARN, ERROR or OFF (default: ${LOG_LEVEL_ENV}, "
                             "else INFO)")


def log_level(value: str | None) -> int:
    """The ``logging`` level of ``--log-level`` (or ``$STROM_LOG_LEVEL``; Kafka's names accepted)."""
    import logging
    import os

    name = (value or os.environ.get(LOG_LEVEL_ENV) or "INFO").strip().upper()
    levels = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
              "WARNING": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
              "OFF": logging.CRITICAL + 10}
    if name not in levels:
        raise UsageError(f"{'--log-level' if value else LOG_LEVEL_ENV} expects one of "
                         f"{', '.join(LOG_LEVELS)}, got {name!r}")
    return levels[name]


def configure_logging(value: str | None, fmt: str = "%(asctime)s %(levelname)s %(name)s: %(message)s") -> None:
    """Root logging for a long-running command, at ``--log-level`` / ``$STROM_LOG_LEVEL``.

    Done before the command runs so the broker's and Connect's own ``basicConfig`` calls find a
    handler in place and leave the chosen level alone."""
    import logging

    logging.basicConfig(level=log_level(value), stream=sys.stderr, format=fmt, force=True)


def require_broker(bootstrap: str, timeout: float = 5.0) -> None:
    """Exit with the ``strom dev`` hint, not a KafkaException trace, when no broker answers at
    ``bootstrap`` within ``timeout`` seconds (for examples and scripts that expect one running)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException:
        print(f"error: {unreachable_hint(bootstrap)}", file=sys.stderr)
        raise SystemExit(1) from None
