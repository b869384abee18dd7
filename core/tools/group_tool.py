"""What ``strom consumer-groups`` and ``strom share-groups`` have in common.

Both follow Kafka's group tools (ConsumerGroupCommand, ShareGroupCommand), which share their
flags, their checks of a command line and the tables of a reset plan and of a deletion, word for
word; here once, with the words that differ (the kind of group, a help text) passed in. Each
tool keeps its own flags and tables where Kafka's differ.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from strom.core.tools.common import UsageError, add_client_args

MISSING = "-"
DEFAULT_TIMEOUT_MS = 30_000  # Kafka's --timeout default

# A flag and the keyword arguments of its ``add_argument``.
Flag = tuple[str, dict[str, Any]]


# -- flags --------------------------------------------------------------------------------------


def add_actions(parser: argparse.ArgumentParser, actions: Sequence[tuple[str, str]]) -> None:
    """The tool's commands (``--list``, ``--describe``, ...): exactly one, each with its help."""
    group = parser.add_mutually_exclusive_group(required=True)
    for flag, text in actions:
        group.add_argument(flag, action="store_true", help=text)


def add_selection_args(parser: argparse.ArgumentParser, kind: str, *, offsets: str, state: str) -> None:
    """``--group``, ``--all-groups`` and the views of ``--describe``: what ``--offsets`` shows
    (``offsets``) and what ``--state`` shows (``state``) for a ``kind`` group."""
    parser.add_argument("--group", action="append", default=[], metavar="G",
                        help=f"the {kind} group; repeatable")
    parser.add_argument("--all-groups", action="store_true", help=f"apply to every {kind} group")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help=f"with --describe: {offsets} (the default)")
    view.add_argument("--members", action="store_true", help="with --describe: the group's members")
    view.add_argument("--state", nargs="?", const="", default=None, metavar="STATES",
                      help=f"with --describe: {state}; with --list: a STATE column, and "
                           "only groups in STATES if given (e.g. stable,empty)")


def add_reset_args(parser: argparse.ArgumentParser, *, topic: str, all_topics: str, execute: str, timeout_of: str,
                   more_scenarios: Sequence[Flag] = (), last_scenarios: Sequence[Flag] = ()) -> None:
    """The flags of ``--reset-offsets`` (scope, scenario, dry run or execute), ``--timeout`` and
    the connection flags. The scenarios every tool has are ``--to-earliest``, ``--to-latest``
    and ``--to-datetime``; ``more_scenarios`` come before ``--to-datetime``, ``last_scenarios``
    after it (Kafka's order)."""
    parser.add_argument("--topic", action="append", default=[], metavar="T[:P,P...]", help=topic)
    parser.add_argument("--all-topics", action="store_true", help=all_topics)
    scenario = parser.add_mutually_exclusive_group()
    scenario.add_argument("--to-earliest", action="store_true", help="reset to the log start offset")
    scenario.add_argument("--to-latest", action="store_true", help="reset to the log end offset")
    for flag, kwargs in more_scenarios:
        scenario.add_argument(flag, **kwargs)
    scenario.add_argument("--to-datetime", metavar="ISO",
                          help="reset to the first offset at or after a time: YYYY-MM-DDTHH:mm:SS.sss "
                               "(local time unless it ends in Z or +hh:mm)")
    for flag, kwargs in last_scenarios:
        scenario.add_argument(flag, **kwargs)
    run = parser.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="only print the new offsets (the default)")
    run.add_argument("--execute", action="store_true", help=execute)
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_MS, metavar="MS",
                        help=f"timeout of {timeout_of} in ms (default: {DEFAULT_TIMEOUT_MS})")
    add_client_args(parser)


def check_timeout_and_groups(args: argparse.Namespace) -> None:
    """A positive ``--timeout``; not both ``--group`` and ``--all-groups``."""
    if args.timeout <= 0:
        raise UsageError(f"--timeout expects a positive number of ms, got {args.timeout}")
    if args.group and args.all_groups:
        raise UsageError("--group and --all-groups cannot be used together")


def check_views(args: argparse.Namespace) -> None:
    """``--offsets`` and ``--members`` only with ``--describe``; ``--state`` with it or ``--list``."""
    if (args.members or args.offsets) and not args.describe:
        raise UsageError("--offsets and --members go with --describe")
    if args.state is not None and not (args.describe or args.list):
        raise UsageError("--state goes with --describe or --list")


def run_command(args: argparse.Namespace, commands: Mapping[str, Callable[[], int]]) -> int:
    """Run the command whose flag is set (``commands`` maps the flag's dest to it; argparse lets
    exactly one through); its exit code."""
    for dest, command in commands.items():
        if getattr(args, dest):
            return command()
    raise UsageError(f"one of {', '.join('--' + d.replace('_', '-') for d in commands)} is required")


def parse_datetime(text: str) -> int:
    """Epoch ms of ``--to-datetime`` (Kafka's yyyy-MM-dd'T'HH:mm:ss.SSS, optional zone)."""
    raw = text.strip()
    try:
        when = datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw)
    except ValueError:
        raise UsageError(f"--to-datetime expects YYYY-MM-DDTHH:mm:SS.sss[Z|+hh:mm], got {text!r}") from None
    if when.tzinfo is None:
        when = when.astimezone()  # Kafka reads a time without zone in the local zone
    return int(when.timestamp() * 1000)


# -- tables -------------------------------------------------------------------------------------


def width(values: Iterable[str], least: int = 15) -> int:
    """A column as wide as its longest value, at least ``least`` (Kafka's tables)."""
    return max([least, *(len(v) for v in values)])


def plan_lines(plans: Mapping[str, Mapping[tuple[str, int], int]], group_width: int) -> list[str]:
    """Kafka's printOffsetsToReset: GROUP TOPIC PARTITION NEW-OFFSET, the header only when there
    is a group, the rows of each group by topic and partition."""
    tw = width(t for plan in plans.values() for t, _ in plan)

    def line(g: str, t: str, p: str, o: str) -> str:
        return f"{g:<{group_width}} {t:<{tw}} {p:<10} {o}"

    out = [line("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")] if plans else []
    for group, plan in plans.items():
        out += [line(group, t, str(p), str(o)) for (t, p), o in sorted(plan.items())]
    return out


def warn_empty_partition(topic: str, partition: int) -> None:
    """Kafka's resetToDateTime, for a partition with no record at or after the time."""
    print(f"\nWarn: Partition {partition} from topic {topic} is empty. Falling back to latest known offset.")


def print_deletion(kind: str, names: str, done: Sequence[str], failed: Mapping[str, str]) -> int:
    """Kafka's report of ``--delete`` for ``kind`` groups (``names``: the deleted ones as the
    tool quotes them); 1 when a group could not be deleted."""
    if not failed:
        print(f"Deletion of requested {kind} groups ({names}) was successful.")
        return 0
    print(f"\nError: Deletion of some {kind} groups failed:")
    for group, reason in failed.items():
        print(f"* Group '{group}' could not be deleted due to: {reason}")
    if done:
        print(f"\nThese {kind} groups were deleted successfully: {names}")
    return 1
