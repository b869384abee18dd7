"""The plugin manager: built-ins, then entry points, then validation; and the set-up helpers.

:func:`get_plugin_manager` builds a ``pluggy.PluginManager`` for project ``strom`` the way pytest
builds its own:

1. add the hookspecs (:data:`strom.plugins.hookspecs.HOOKSPEC_MODULES`);
2. block the names in ``blocklist`` (config ``strom.plugins.blocklist``) — blocked plugins are
   never registered, built-ins included;
3. register the built-ins (:data:`strom.plugins.builtin.BUILTIN_PLUGINS`);
4. load the entry points of group ``strom.plugins`` — unless ``STROM_DISABLE_PLUGIN_AUTOLOAD``
   is set (to anything non-empty), like ``PYTEST_DISABLE_PLUGIN_AUTOLOAD``;
5. import and register the modules named in ``STROM_PLUGINS`` (comma-separated), like
   ``PYTEST_PLUGINS`` — the way to load chosen plugins when autoload is off;
6. ``check_pending()``: a ``@hookimpl`` whose name matches no hookspec (a typo) is an error.

The ``load_*`` helpers run once at broker start-up: each collects what the plugins offer for one
extension point, picks the implementation the config names and builds it. The request path then
calls that object directly, never ``pm.hook``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Mapping
from typing import Any, cast

import pluggy

from strom.plugins.builtin import BUILTIN_PLUGINS
from strom.plugins.exceptions import (
    DuplicatePluginNameError,
    InvalidPluginObjectError,
    PluginLoadError,
    UnknownPluginError,
)
from strom.plugins.hookspecs import HOOKSPEC_MODULES, assignors, authorizers, quotas, storage
from strom.plugins.markers import PROJECT_NAME

ENTRY_POINT_GROUP = "strom.plugins"
ENV_DISABLE_AUTOLOAD = "STROM_DISABLE_PLUGIN_AUTOLOAD"
ENV_PLUGINS = "STROM_PLUGINS"
BLOCKLIST_KEY = "strom.plugins.blocklist"


def _split(value: str) -> list[str]:
    return [p.strip() for p in value.split(",") if p.strip()]


def config_properties(config: Any) -> dict[str, Any]:
    """The config as Kafka property names -> values (a ``BrokerConfig`` or a plain mapping)."""
    if config is None:
        return {}
    dump = getattr(config, "model_dump", None)
    if callable(dump):  # a pydantic model whose aliases are the property names (BrokerConfig)
        return dict(dump(by_alias=True))
    return dict(config)


def get_plugin_manager(*, blocklist: Iterable[str] = (), autoload: bool | None = None,
                       env: Mapping[str, str] | None = None) -> pluggy.PluginManager:
    """A plugin manager with the hookspecs, the built-ins and the installed plugins registered.

    ``autoload=None`` follows ``STROM_DISABLE_PLUGIN_AUTOLOAD``; ``env`` defaults to
    ``os.environ`` (tests pass their own).
    """
    environ = os.environ if env is None else env
    pm = pluggy.PluginManager(PROJECT_NAME)
    for module in HOOKSPEC_MODULES:
        pm.add_hookspecs(module)
    for name in blocklist:
        pm.set_blocked(name)
    for name, module_name in BUILTIN_PLUGINS.items():
        if not pm.is_blocked(name):
            pm.register(importlib.import_module(module_name), name=name)
    if autoload is None:
        autoload = not environ.get(ENV_DISABLE_AUTOLOAD)
    if autoload:
        pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    for module_name in _split(environ.get(ENV_PLUGINS, "")):
        _register_module(pm, module_name)
    pm.check_pending()
    return pm


def plugin_manager_for(config: Any, *, autoload: bool | None = None,
                       env: Mapping[str, str] | None = None) -> pluggy.PluginManager:
    """:func:`get_plugin_manager` with the block list of the config's ``strom.plugins.blocklist``."""
    blocked = _split(str(config_properties(config).get(BLOCKLIST_KEY) or ""))
    return get_plugin_manager(blocklist=blocked, autoload=autoload, env=env)


def _register_module(pm: pluggy.PluginManager, module_name: str) -> None:
    if pm.is_blocked(module_name) or pm.has_plugin(module_name):
        return
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise PluginLoadError(f"cannot import plugin module {module_name!r} named in "
                              f"{ENV_PLUGINS}: {e}") from e
    if not pm.is_registered(module):  # an entry point may have registered it under another name
        pm.register(module, name=module_name)


def _offers(pm: pluggy.PluginManager, hook_name: str, kind: str) -> dict[str, tuple[str, Any]]:
    """name -> (plugin name, offered object) over every plugin implementing a registry hook.

    Each implementation is called on its own so that a name offered twice can be reported with
    both plugins' names.
    """
    out: dict[str, tuple[str, Any]] = {}
    caller = getattr(pm.hook, hook_name)
    # get_hookimpls() is in registration order; the built-ins come first.
    for impl in caller.get_hookimpls():
        if impl.hookwrapper or impl.wrapper:
            continue
        result = impl.function()
        if result is None:
            continue
        # Registry hooks return name -> factory; assignors return instances naming themselves.
        items: Iterable[tuple[str, Any]] = (
            result.items() if isinstance(result, Mapping) else [(obj.name(), obj) for obj in result])
        for name, obj in items:
            if name in out:
                raise DuplicatePluginNameError(kind, name, out[name][0], impl.plugin_name)
            out[name] = (impl.plugin_name, obj)
    return out


def _build(pm: pluggy.PluginManager, config: Any, *, hook_name: str, key: str, default: str,
           kind: str, protocol: type) -> object:
    """The object the configured factory builds, checked against ``protocol`` (a runtime-checkable
    Protocol or ABC). Typed ``object``: mypy accepts no abstract class for a ``type[T]`` parameter,
    so each caller casts to the protocol it passed."""
    props = config_properties(config)
    name = str(props.get(key) or "").strip() or default
    offers = _offers(pm, hook_name, kind)
    if name not in offers:
        raise UnknownPluginError(key, name, kind, offers)
    plugin_name, factory = offers[name]
    obj = factory(props)
    if not isinstance(obj, protocol):
        raise InvalidPluginObjectError(f"{kind} {name!r} of plugin {plugin_name!r} built {obj!r}, which "
                                       f"does not implement {protocol.__name__}")
    return obj


def load_authorizer(pm: pluggy.PluginManager, config: Any) -> authorizers.Authorizer:
    """The authorizer named by ``authorizer.class.name`` (default ``allow-all``; Kafka's
    ``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` names the built-in ``standard``)."""
    props = config_properties(config)
    props[authorizers.CONFIG_KEY] = authorizers.plugin_name(str(props.get(authorizers.CONFIG_KEY) or ""))
    built = _build(pm, props, hook_name="strom_authorizers", key=authorizers.CONFIG_KEY,
                   default=authorizers.DEFAULT_AUTHORIZER, kind="authorizer",
                   protocol=authorizers.Authorizer)
    return cast(authorizers.Authorizer, built)


def load_quota_manager(pm: pluggy.PluginManager, config: Any) -> quotas.QuotaManager:
    """The quota manager named by ``client.quota.callback.class`` (default ``default``, Kafka's
    client quotas, which throttle nobody until a quota is set; ``unlimited`` never throttles)."""
    built = _build(pm, config, hook_name="strom_quota_managers", key=quotas.CONFIG_KEY,
                   default=quotas.DEFAULT_QUOTA_MANAGER, kind="quota manager",
                   protocol=quotas.QuotaManager)
    return cast(quotas.QuotaManager, built)


def load_local_tier(pm: pluggy.PluginManager, config: Any) -> storage.LocalTier:
    """The local tier named by ``strom.local.tier`` (default ``local``)."""
    built = _build(pm, config, hook_name="strom_local_tiers", key=storage.LOCAL_CONFIG_KEY,
                   default=storage.DEFAULT_LOCAL_TIER, kind="local tier",
                   protocol=storage.LocalTier)
    return cast(storage.LocalTier, built)


def load_remote_storage_manager(pm: pluggy.PluginManager, config: Any) -> storage.RemoteStorageManager | None:
    """The remote storage manager named by ``remote.log.storage.manager.class.name``; ``None``
    when the key is empty (no remote tier)."""
    props = config_properties(config)
    configured = str(props.get(storage.REMOTE_CONFIG_KEY) or "").strip()
    if not configured:
        return None
    # Kafka's/Aiven's Java class names select strom's plugin of that role.
    props[storage.REMOTE_CONFIG_KEY] = storage.plugin_name(configured, storage.REMOTE_STORAGE_MANAGER_ALIASES)
    built = _build(pm, props, hook_name="strom_remote_storage_managers", key=storage.REMOTE_CONFIG_KEY,
                   default="", kind="remote storage manager",
                   protocol=storage.RemoteStorageManager)
    return cast(storage.RemoteStorageManager, built)


def load_remote_log_metadata_manager(pm: pluggy.PluginManager, config: Any) -> storage.RemoteLogMetadataManager:
    """The remote log metadata manager named by ``remote.log.metadata.manager.class.name``
    (default ``topic-based``; Kafka's class name is an alias)."""
    props = config_properties(config)
    configured = str(props.get(storage.REMOTE_METADATA_CONFIG_KEY) or "").strip()
    props[storage.REMOTE_METADATA_CONFIG_KEY] = storage.plugin_name(
        configured or storage.DEFAULT_REMOTE_LOG_METADATA_MANAGER, storage.REMOTE_LOG_METADATA_MANAGER_ALIASES)
    built = _build(pm, props, hook_name="strom_remote_log_metadata_managers",
                   key=storage.REMOTE_METADATA_CONFIG_KEY, default=storage.DEFAULT_REMOTE_LOG_METADATA_MANAGER,
                   kind="remote log metadata manager", protocol=storage.RemoteLogMetadataManager)
    return cast(storage.RemoteLogMetadataManager, built)


def load_assignors(pm: pluggy.PluginManager, config: Any = None
                   ) -> dict[str, assignors.ConsumerGroupPartitionAssignor]:
    """Assignors by name. Without a config: every offered assignor. With one: those listed in
    ``group.consumer.assignors`` (default ``uniform,range``) in that order — the first is the
    group's default."""
    offers = _offers(pm, "strom_assignors", "assignor")
    for name, (plugin_name, obj) in offers.items():
        if not isinstance(obj, assignors.ConsumerGroupPartitionAssignor):
            raise InvalidPluginObjectError(f"assignor {name!r} of plugin {plugin_name!r} does not "
                                           "implement ConsumerGroupPartitionAssignor")
    if config is None:
        return {name: obj for name, (_, obj) in offers.items()}
    raw = config_properties(config).get(assignors.CONFIG_KEY)
    wanted = _split(raw if isinstance(raw, str) else ",".join(raw or ())) or _split(assignors.DEFAULT_ASSIGNORS)
    out: dict[str, assignors.ConsumerGroupPartitionAssignor] = {}
    for name in wanted:
        if name not in offers:
            raise UnknownPluginError(assignors.CONFIG_KEY, name, "assignor", offers)
        out[name] = offers[name][1]
    return out


def plugin_names(pm: pluggy.PluginManager) -> list[str]:
    """Names of the registered plugins (for logs and ``strom`` diagnostics)."""
    return sorted(name for name, plugin in pm.list_name_plugin() if plugin is not None)


__all__ = [
    "BLOCKLIST_KEY",
    "ENTRY_POINT_GROUP",
    "ENV_DISABLE_AUTOLOAD",
    "ENV_PLUGINS",
    "config_properties",
    "get_plugin_manager",
    "load_assignors",
    "load_authorizer",
    "load_local_tier",
    "load_quota_manager",
    "load_remote_log_metadata_manager",
    "load_remote_storage_manager",
    "plugin_manager_for",
    "plugin_names",
]
