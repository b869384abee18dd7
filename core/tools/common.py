"""Helpers shared by the ``strom`` subcommands: errors, ``key=value`` flags, client config.

Two error kinds decide the exit code: :class:`UsageError` (the command line is wrong, exit 2,
like argparse's own errors) and :class:`ToolError` (the command ran and failed, exit 1).
Both carry a message that names the offending flag or config key and, where there is one, the
way out.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from strom.core.config import parse_properties
from strom.exceptions import StromError

if TYPE_CHECKING:
    from confluent_kafka import KafkaError

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
