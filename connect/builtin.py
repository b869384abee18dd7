"""Built-in Connect plugins, registered like any other strom plugin (``connect_builtins`` in
``strom.plugins.builtin.BUILTIN_PLUGINS``).

The hook imports the plugin packages only when called, so the broker (which registers every
built-in) never imports Connect. Each package exports ``PLUGINS: list[type]``.
"""

from __future__ import annotations

import importlib
import logging

from strom.plugins.markers import hookimpl

log = logging.getLogger(__name__)

BUILTIN_PACKAGES: tuple[str, ...] = (
    "strom.connect.converters",
    "strom.connect.transforms",  # transformations and predicates
    "strom.connect.connectors",
    "strom.connect.mirror",  # MirrorMaker 2's three connectors
)


@hookimpl
def strom_connect_plugins() -> list[type]:
    classes: list[type] = []
    for name in BUILTIN_PACKAGES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            # Only a package that does not exist (yet) is skipped; a missing dependency inside
            # an existing package is a real error and propagates.
            if e.name != name:
                raise
            log.warning("built-in Connect plugin package %s is not available; skipped", name)
            continue
        classes.extend(module.PLUGINS)
    return classes
