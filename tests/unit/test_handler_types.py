"""Handlers depend on narrow typed collaborators and kio's request types, not on Broker and Any.

Static checks over the handler registry (no broker process): each ``handle`` takes ``deps``
typed with a Protocol of :mod:`strom.core.server.handlers._deps` (or one composed in its
module), ``ctx: RequestContext`` and ``request`` typed with the Union of kio's classes of exactly
the versions it serves; no handler module imports the Broker; the Broker is checked by mypy to
satisfy every Protocol a handler declares (``_serves_every_handler`` in broker.py, which this test
keeps complete).
"""

from __future__ import annotations

import ast
import inspect
import pathlib
import typing

import pytest

import strom.core.server.broker as broker_module
import strom.core.server.handlers as handlers_package
from strom.core.protocol.codec import request_class, response_class
from strom.core.server.handlers import Handler, _kio_types, registry

HANDLERS = sorted(registry().items())
IDS = [f"{key}-{getattr(h, '__name__', '').rpartition('.')[2]}" for key, h in HANDLERS]
# Handlers whose signature waits on someone else's change, with what it waits for. A listed
# handler that is typed fails the test too, so the list only shrinks.
NOT_YET_TYPED: dict[int, str] = {}


def _parameters(handler: Handler) -> list[inspect.Parameter]:
    return list(inspect.signature(handler.handle).parameters.values())


def _broker_checked_protocols() -> set[str]:
    tree = ast.parse(pathlib.Path(broker_module.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "_serves_every_handler":
            return {ast.unparse(n.annotation) for n in ast.walk(node) if isinstance(n, ast.AnnAssign)}
    raise AssertionError("broker.py has no _serves_every_handler: nothing checks the Broker against the Protocols")


def test_the_registry_finds_the_handlers() -> None:
    assert len(HANDLERS) >= 40


@pytest.mark.parametrize(("key", "handler"), HANDLERS, ids=IDS)
def test_handle_takes_a_protocol_a_context_and_kio_request_types(key: int, handler: Handler) -> None:
    deps, ctx, request = _parameters(handler)
    if key in NOT_YET_TYPED:
        assert deps.name == "broker", f"typed now: take API key {key} out of NOT_YET_TYPED"
        return
    assert deps.name == "deps", "the first parameter is the handler's narrow dependencies, not the broker"
    assert isinstance(deps.annotation, str) and deps.annotation.endswith("Deps"), deps.annotation
    assert ctx.annotation == "RequestContext"
    expected = request_class(key, handler.VERSIONS[1]).__name__
    assert request.annotation == expected, f"request is {request.annotation!r}, not kio's {expected}"


@pytest.mark.parametrize(("key", "handler"), HANDLERS, ids=IDS)
def test_the_request_union_holds_exactly_the_served_versions(key: int, handler: Handler) -> None:
    lo, hi = handler.VERSIONS
    for load in (request_class, response_class):
        alias = getattr(_kio_types, load(key, hi).__name__)
        members = typing.get_args(alias) or (alias,)  # one version: the class itself
        assert members == tuple(load(key, v) for v in range(lo, hi + 1)), (
            "core/server/handlers/_kio_types.py is stale: run python scripts/gen_handler_types.py")


def test_every_declared_protocol_is_checked_against_the_broker() -> None:
    checked = _broker_checked_protocols()
    declared = {_parameters(h)[0].annotation for key, h in HANDLERS if key not in NOT_YET_TYPED}
    assert declared <= checked, f"add to broker._serves_every_handler: {sorted(declared - checked)}"


def test_no_handler_module_imports_the_broker() -> None:
    offenders = []
    for path in pathlib.Path(handlers_package.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "strom.core.server.broker":
                offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders
