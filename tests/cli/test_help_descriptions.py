"""Every subcommand of ``strom`` (and of ``strom connect``) has a ``--help`` description.

Walks the argparse trees the commands build; no broker, no subprocess."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from strom.connect.cli import _parser as connect_parser
from strom.core.cli import build_parser


def leaves(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from leaves(child, f"{path} {name}")


def test_every_subcommand_has_a_description() -> None:
    parsers = [*leaves(build_parser(), "strom"), *leaves(connect_parser(), "strom connect")]
    # `strom connect` in strom's tree is only a pointer: its real parser is connect's, walked too.
    missing = [path for path, p in parsers if not (p.description or "").strip() and path != "strom connect"]
    assert missing == []
    assert len(parsers) > 15  # the walk found the tree


def test_every_option_has_help() -> None:
    parsers = [*leaves(build_parser(), "strom"), *leaves(connect_parser(), "strom connect")]
    missing = [f"{path} {a.option_strings[0]}" for path, p in parsers for a in p._actions
               if a.option_strings and a.help is None and not isinstance(a, argparse._SubParsersAction)]
    assert missing == []
