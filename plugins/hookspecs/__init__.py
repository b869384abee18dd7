"""Hook specifications: one module per extension point.

Each module holds the ``Protocol`` its implementations satisfy, the value objects that cross
the interface, and the documented hooks (decorated with :data:`strom.plugins.markers.hookspec`).
:data:`HOOKSPEC_MODULES` is what the plugin manager registers with ``add_hookspecs``.
"""

from __future__ import annotations

from types import ModuleType

from strom.plugins.hookspecs import assignors, authorizers, connect, quotas, storage

HOOKSPEC_MODULES: tuple[ModuleType, ...] = (authorizers, quotas, assignors, storage, connect)

__all__ = ["HOOKSPEC_MODULES", "assignors", "authorizers", "connect", "quotas", "storage"]
