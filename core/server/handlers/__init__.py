"""One module (or handler class) per Kafka API: ``API_KEY``, ``VERSIONS`` and ``async handle(deps, ctx, request)``.

``deps`` is the narrow Protocol of collaborators the handler declares (:mod:`._deps`; the broker
satisfies each), ``request`` the Union of kio's request classes of its versions (:mod:`._kio_types`).

:func:`registry` finds every handler in this package: a module that defines ``API_KEY`` is a
handler, and so is a class defined in a module that has ``API_KEY``, ``VERSIONS`` and
``handle`` (for modules holding a family of APIs, e.g. ``topics.CreateTopics``). ApiVersions
advertises exactly this registry, so an API is advertised once its handler exists.

A handler with ``LISTENER = "controller"`` serves the controller listener only (BrokerRegistration,
BrokerHeartbeat): :func:`registry` leaves it out and :func:`controller_registry` lists it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Awaitable, Callable
from functools import cache
from typing import Protocol, cast


class Handler(Protocol):
    """A handler module or class as dispatch sees it (each declares its own ``deps`` Protocol and
    request Union, so the callable's parameters are not one type across handlers)."""

    @property
    def API_KEY(self) -> int: ...
    @property
    def VERSIONS(self) -> tuple[int, int]: ...
    @property
    def handle(self) -> Callable[..., Awaitable[object]]: ...


def _is_handler(obj: object) -> bool:
    return all(hasattr(obj, a) for a in ("API_KEY", "VERSIONS", "handle"))


def _listener(handler: object) -> str:
    return str(getattr(handler, "LISTENER", "broker"))


@cache
def registry() -> dict[int, Handler]:
    """The handlers of the broker listeners."""
    return {key: h for key, h in _all_handlers().items() if _listener(h) == "broker"}


@cache
def controller_registry() -> dict[int, Handler]:
    """The handlers only the controller listener serves (it also answers ApiVersions)."""
    return {key: h for key, h in _all_handlers().items() if _listener(h) == "controller"}


@cache
def _all_handlers() -> dict[int, Handler]:
    found: dict[int, Handler] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        candidates: list[object] = [module] if _is_handler(module) else []
        candidates += [obj for _, obj in inspect.getmembers(module, inspect.isclass)
                       if obj.__module__ == module.__name__ and _is_handler(obj)]
        for candidate in candidates:
            handler = cast(Handler, candidate)  # _is_handler checked the three names
            key = handler.API_KEY
            if key in found:
                raise RuntimeError(f"two handlers for API key {key}: {found[key]} and {handler}")
            found[key] = handler
    return found
