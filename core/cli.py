"""The ``strom`` command: storage, broker, dev and the console tools.

``main(argv)`` builds one argparse tree from the modules in ``strom.core.tools`` and runs the
chosen command. Exit codes: 0 success, 2 a usage error (bad flag or flag value — argparse's
own convention), 1 a failure (bad config, unreachable broker, refused request), 130 Ctrl-C.
Errors are one ``error: ...`` line naming the flag or config key and, where there is one, the
way out. ``python -m strom.core.cli`` is the same command.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from strom import __version__
from strom.core.exceptions import BrokerError, ConfigError, CorruptStateError
from strom.core.tools import (
    config_list,
    configs,
    consume,
    consumer_groups,
    perf,
    produce,
    run,
    share_groups,
    storage,
    topics,
)
from strom.core.tools.common import ToolError, UsageError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="strom",
        description="strom: a Kafka-compatible platform in Python. Start a development broker with "
                    "`strom dev`, then use `strom topics`, `strom produce` and `strom consume` "
                    "against it (or against any Kafka cluster, with --bootstrap-server).",
        epilog="Run `strom COMMAND --help` for the options of a command.")
    parser.add_argument("--version", action="version", version=f"strom {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    run.register(sub)
    storage.register(sub)
    topics.register(sub)
    produce.register(sub)
    consume.register(sub)
    consumer_groups.register(sub)
    share_groups.register(sub)
    configs.register(sub)
    config_list.register(sub)
    perf.register(sub)
    from strom.console import cli as console_cli

    console_cli.register(sub)  # `strom console`
    console_cli.add_dev_flags(sub)  # `strom dev --no-console / --console-port N`
    # `strom connect ...` is parsed by strom.connect.cli (imported only when used, so the broker's
    # commands never import Connect); this entry only lists it in `strom --help`.
    sub.add_parser("connect", help="run Kafka Connect workers: `strom connect standalone|distributed ...`",
                   add_help=False)
    _remember_parsers(parser)
    return parser


def _remember_parsers(parser: argparse.ArgumentParser) -> None:
    """Give every leaf command its own parser, so later usage errors print the right usage line."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.set_defaults(_parser=child)
                _remember_parsers(child)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["connect"]:
        from strom.connect.cli import main as connect_main

        return connect_main(args_list[1:])
    parser = build_parser()
    args, extra = parser.parse_known_args(args_list)
    command_parser: argparse.ArgumentParser = getattr(args, "_parser", parser)
    if extra:
        # Reported by the command's own parser, so the usage line shows the flags it does take.
        command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        code: int = args.func(args)
    except UsageError as e:
        command_parser.print_usage(sys.stderr)
        print(f"{command_parser.prog}: error: {e}", file=sys.stderr)
        return 2
    except (ToolError, ConfigError, CorruptStateError, BrokerError) as e:
        # BrokerError also covers a broker that cannot start (a busy port, a listener strom
        # cannot secure): one line naming the listener and the way out, no traceback.
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
