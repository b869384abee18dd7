"""Errors of the plugin system, all under :class:`strom.exceptions.StromError`.

A configuration that names a plugin nobody installed is both a :class:`PluginError` and a
:class:`~strom.core.exceptions.ConfigError`, so the broker's start-up reports it like any
other bad config value (naming the key and what is accepted).
"""

from __future__ import annotations

from collections.abc import Iterable

from strom.core.exceptions import ConfigError
from strom.exceptions import StromError


class PluginError(StromError):
    """Base class of plugin-system errors."""


class PluginLoadError(PluginError):
    """A plugin module named in ``STROM_PLUGINS`` could not be imported or registered."""


class UnknownPluginError(PluginError, ConfigError):
    """A config key names an implementation no installed plugin provides."""

    def __init__(self, key: str, value: str, kind: str, available: Iterable[str]) -> None:
        names = sorted(available)
        self.kind = kind
        self.available = names
        accepted = (f"the name of an installed {kind} plugin: " + ", ".join(names) if names
                    else f"the name of an installed {kind} plugin (none is installed or all are blocked)")
        ConfigError.__init__(self, key, value, accepted)


class DuplicatePluginNameError(PluginError):
    """Two plugins offer an implementation under the same name."""

    def __init__(self, kind: str, name: str, first: str, second: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"{kind} {name!r} is provided by both plugin {first!r} and plugin {second!r}; "
                         "block one of them with strom.plugins.blocklist")


class InvalidPluginObjectError(PluginError):
    """A plugin factory returned an object that does not satisfy its extension point's protocol."""


class PartitionAssignorError(PluginError):
    """An assignor cannot compute an assignment (Kafka's ``PartitionAssignorException``)."""


class RemoteStorageError(PluginError):
    """A remote storage operation failed (Kafka's ``RemoteStorageException``); retriable."""


class RemoteResourceNotFoundError(RemoteStorageError):
    """The remote segment or index does not exist (Kafka's ``RemoteResourceNotFoundException``)."""


class RemoteStorageNotReadyError(RemoteStorageError):
    """The remote log metadata of a partition is still being read (Kafka's
    ``RemoteStorageNotReadyException``); retriable: ask again shortly."""
