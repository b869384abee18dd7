"""One module (or handler class) per Kafka API: ``API_KEY``, ``VERSIONS`` and ``async handle(broker, ctx, request)``.

:func:`registry` finds every handler in this package: a module that defines ``API_KEY`` is a
handler, and so is a class defined in a module that has ``API_KEY``, ``VERSIONS`` and
``handle`` (for modules holding a family of APIs, e.g. ``topics.CreateTopics``). ApiVersions
advertises exactly this registry, so an API is advertised once its handler exists.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import cache
from typing import Any


def _is_handler(obj: Any) -> bool:
    return all(hasattr(obj, a) for a in ("API_KEY", "VERSIONS", "handle"))


@cache
def registry() -> dict[int, Any]:
    found: dict[int, Any] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        candidates: list[Any] = [module] if _is_handler(module) else []
        candidates += [obj for _, obj in inspect.getmembers(module, inspect.isclass)
                       if obj.__module__ == module.__name__ and _is_handler(obj)]
        for handler in candidates:
            key = handler.API_KEY
            if key in found:
                raise RuntimeError(f"two handlers for API key {key}: {found[key]} and {handler}")
            found[key] = handler
    return found
