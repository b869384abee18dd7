"""The plugin manager: built-ins, entry points, autoload switch, block list, selection errors."""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

import pluggy
import pytest

from strom.core.config import BrokerConfig
from strom.core.exceptions import ConfigError
from strom.plugins.builtin import BUILTIN_PLUGINS
from strom.plugins.builtin.allow_all import AllowAllAuthorizer
from strom.plugins.builtin.client_quotas import ClientQuotaManager
from strom.plugins.builtin.local_tier import LocalDiskTier
from strom.plugins.builtin.range_assignor import RangeAssignor
from strom.plugins.builtin.uniform_assignor import UniformAssignor
from strom.plugins.builtin.unlimited_quotas import UnlimitedQuotaManager
from strom.plugins.exceptions import (
    DuplicatePluginNameError,
    InvalidPluginObjectError,
    PluginLoadError,
    UnknownPluginError,
)
from strom.plugins.hookspecs.authorizers import (
    AclOperation,
    Action,
    AuthorizationResult,
    RequestContext,
    ResourcePattern,
    ResourceType,
)
from strom.plugins.hookspecs.quotas import QuotaType
from strom.plugins.manager import (
    get_plugin_manager,
    load_assignors,
    load_authorizer,
    load_local_tier,
    load_quota_manager,
    load_remote_storage_manager,
    plugin_manager_for,
    plugin_names,
)

NO_ENV: dict[str, str] = {}
DENY = "strom_test_plugin.DenyTopics"
THROTTLE = "strom_test_plugin.ThrottleClient"


def write_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> str:
    """A real plugin module on sys.path, with a unique name (modules are cached per process)."""
    name = f"strom_tmp_plugin_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        "from strom.plugins.markers import hookimpl\n" + textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def write_actions(*topics: str) -> list[Action]:
    return [Action(AclOperation.WRITE, ResourcePattern(ResourceType.TOPIC, t)) for t in topics]


# -- built-ins ----------------------------------------------------------------------------------


def test_builtins_registered_and_selected_by_default() -> None:
    pm = get_plugin_manager(autoload=False, env=NO_ENV)
    assert set(BUILTIN_PLUGINS) <= set(plugin_names(pm))
    authorizer = load_authorizer(pm, {})
    assert isinstance(authorizer, AllowAllAuthorizer)
    assert authorizer.authorize(RequestContext(), write_actions("a", "denied-b")) == [
        AuthorizationResult.ALLOWED, AuthorizationResult.ALLOWED]
    # Kafka's quotas are always on: the built-in ClientQuotaManager, which throttles nobody until
    # a quota is set; `unlimited` stays selectable.
    quota = load_quota_manager(pm, BrokerConfig())
    assert isinstance(quota, ClientQuotaManager)
    assert quota.record("User:ANONYMOUS", "throttle-me", QuotaType.PRODUCE, 1e9, 0) == 0
    unlimited = load_quota_manager(pm, {"client.quota.callback.class": "unlimited"})
    assert isinstance(unlimited, UnlimitedQuotaManager)
    assignors = load_assignors(pm)
    assert isinstance(assignors["uniform"], UniformAssignor)
    assert isinstance(assignors["range"], RangeAssignor)
    assert isinstance(load_local_tier(pm, {"log.dirs": "/tmp/a,/tmp/b"}), LocalDiskTier)
    assert load_remote_storage_manager(pm, {}) is None


def test_assignors_follow_group_consumer_assignors_order() -> None:
    pm = get_plugin_manager(autoload=False, env=NO_ENV)
    assert list(load_assignors(pm, {})) == ["uniform", "range"]
    assert list(load_assignors(pm, {"group.consumer.assignors": "range, uniform"})) == ["range", "uniform"]
    with pytest.raises(UnknownPluginError, match=r"sticky.*group\.consumer\.assignors"):
        load_assignors(pm, {"group.consumer.assignors": "range,sticky"})


# -- block list ---------------------------------------------------------------------------------


def test_blocklist_removes_builtin_and_selection_names_the_key() -> None:
    # Both built-in authorizers blocked: none is left to select.
    pm = get_plugin_manager(blocklist=["allow_all", "standard_authorizer"], autoload=False, env=NO_ENV)
    assert "allow_all" not in plugin_names(pm)
    assert pm.is_blocked("allow_all")
    with pytest.raises(UnknownPluginError) as err:
        load_authorizer(pm, {})
    assert err.value.key == "authorizer.class.name"
    assert "allow-all" in str(err.value) and "none is installed" in str(err.value)


def test_blocklist_from_broker_config() -> None:
    config = BrokerConfig.from_mapping({"strom.plugins.blocklist": "range_assignor, client_quotas"})
    pm = plugin_manager_for(config, autoload=False, env=NO_ENV)
    assert "range" not in load_assignors(pm)
    assert "uniform" in load_assignors(pm)
    with pytest.raises(UnknownPluginError, match=r"client\.quota\.callback\.class"):
        load_quota_manager(pm, config)


def test_blocklist_keeps_entry_point_plugin_out(test_plugin_installed: str) -> None:
    pm = get_plugin_manager(blocklist=[test_plugin_installed], autoload=True, env=NO_ENV)
    assert test_plugin_installed not in plugin_names(pm)
    with pytest.raises(UnknownPluginError):
        load_authorizer(pm, {"authorizer.class.name": DENY})


# -- entry points and the autoload switch -------------------------------------------------------


def test_entry_point_plugin_is_loaded_and_selectable(test_plugin_installed: str) -> None:
    pm = get_plugin_manager(env=NO_ENV)
    assert test_plugin_installed in plugin_names(pm)
    # Installed but not selected: the defaults stay in force.
    assert isinstance(load_authorizer(pm, {}), AllowAllAuthorizer)
    assert isinstance(load_quota_manager(pm, {}), ClientQuotaManager)

    config = BrokerConfig.from_mapping({"authorizer.class.name": DENY, "client.quota.callback.class": THROTTLE})
    authorizer = load_authorizer(pm, config)
    results = authorizer.authorize(RequestContext(client_id="c"), [
        *write_actions("denied-x", "orders"),
        Action(AclOperation.READ, ResourcePattern(ResourceType.TOPIC, "denied-x")),
        Action(AclOperation.WRITE, ResourcePattern(ResourceType.GROUP, "denied-group")),
    ])
    assert results == [AuthorizationResult.DENIED, AuthorizationResult.ALLOWED,
                       AuthorizationResult.ALLOWED, AuthorizationResult.ALLOWED]
    quota = load_quota_manager(pm, config)
    assert quota.record("User:ANONYMOUS", "throttle-me", QuotaType.PRODUCE, 100.0, 1) == 500
    assert quota.record("User:ANONYMOUS", "throttle-me", QuotaType.FETCH, 100.0, 1) == 0
    assert quota.record("User:ANONYMOUS", "someone-else", QuotaType.PRODUCE, 100.0, 1) == 0


def test_disable_autoload_env_skips_entry_points(test_plugin_installed: str) -> None:
    pm = get_plugin_manager(env={"STROM_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert test_plugin_installed not in plugin_names(pm)
    assert set(BUILTIN_PLUGINS) <= set(plugin_names(pm))
    with pytest.raises(UnknownPluginError) as err:
        load_authorizer(pm, {"authorizer.class.name": DENY})
    # The message names the key, the value and what is installed.
    msg = str(err.value)
    assert "authorizer.class.name" in msg and DENY in msg and "allow-all" in msg
    assert isinstance(err.value, ConfigError)


def test_strom_plugins_env_loads_named_modules_when_autoload_is_off(test_plugin_installed: str) -> None:
    pm = get_plugin_manager(env={"STROM_DISABLE_PLUGIN_AUTOLOAD": "1", "STROM_PLUGINS": test_plugin_installed})
    assert test_plugin_installed in plugin_names(pm)
    assert type(load_authorizer(pm, {"authorizer.class.name": DENY})).__name__ == "DenyTopicsAuthorizer"
    # Autoload on + STROM_PLUGINS naming the same module: registered once, no error.
    pm = get_plugin_manager(env={"STROM_PLUGINS": test_plugin_installed})
    assert plugin_names(pm).count(test_plugin_installed) == 1


def test_strom_plugins_env_with_missing_module() -> None:
    with pytest.raises(PluginLoadError, match="no_such_strom_plugin_module"):
        get_plugin_manager(autoload=False, env={"STROM_PLUGINS": "no_such_strom_plugin_module"})


def test_unknown_authorizer_lists_available(test_plugin_installed: str) -> None:
    pm = get_plugin_manager(env=NO_ENV)
    with pytest.raises(UnknownPluginError) as err:
        load_authorizer(pm, BrokerConfig.from_mapping({"authorizer.class.name": "acme.Nope"}))
    assert err.value.key == "authorizer.class.name"
    assert err.value.value == "acme.Nope"
    assert err.value.available == sorted(["allow-all", "standard", DENY])
    assert "acme.Nope" in str(err.value) and DENY in str(err.value)


# -- validation ---------------------------------------------------------------------------------


def test_check_pending_rejects_misspelled_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = write_plugin(tmp_path, monkeypatch, """
        @hookimpl
        def strom_authorizer():  # typo: the hook is strom_authorizers
            return {}
    """)
    with pytest.raises(pluggy.PluginValidationError, match="strom_authorizer"):
        get_plugin_manager(autoload=False, env={"STROM_PLUGINS": name})


def test_hookimpl_with_unknown_argument_is_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = write_plugin(tmp_path, monkeypatch, """
        @hookimpl
        def strom_authorizers(config):  # the hookspec takes no argument
            return {}
    """)
    with pytest.raises(pluggy.PluginValidationError):
        get_plugin_manager(autoload=False, env={"STROM_PLUGINS": name})


def test_duplicate_name_names_both_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = write_plugin(tmp_path, monkeypatch, """
        @hookimpl
        def strom_authorizers():
            return {"allow-all": lambda config: None}
    """)
    pm = get_plugin_manager(autoload=False, env={"STROM_PLUGINS": name})
    with pytest.raises(DuplicatePluginNameError) as err:
        load_authorizer(pm, {})
    assert "allow_all" in str(err.value) and name in str(err.value)
    # Blocking the built-in resolves the conflict in favour of the third-party plugin ...
    pm = get_plugin_manager(blocklist=["allow_all"], autoload=False, env={"STROM_PLUGINS": name})
    # ... whose factory here builds something that is no authorizer: a clear error too.
    with pytest.raises(InvalidPluginObjectError, match="does not implement Authorizer"):
        load_authorizer(pm, {})


def test_third_party_plugin_replaces_builtin_assignor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = write_plugin(tmp_path, monkeypatch, """
        from strom.plugins.builtin.range_assignor import RangeAssignor

        class Reversed(RangeAssignor):
            def name(self):
                return "range"

        @hookimpl
        def strom_assignors():
            return [Reversed()]
    """)
    pm = get_plugin_manager(blocklist=["range_assignor"], autoload=False, env={"STROM_PLUGINS": name})
    assert type(load_assignors(pm)["range"]).__name__ == "Reversed"


def test_every_hookspec_is_documented_and_typed() -> None:
    import inspect

    from strom.plugins.hookspecs import HOOKSPEC_MODULES

    pm = get_plugin_manager(autoload=False, env=NO_ENV)
    specs = {name: getattr(pm.hook, name) for name in dir(pm.hook) if name.startswith("strom_")}
    assert set(specs) == {"strom_authorizers", "strom_quota_managers", "strom_assignors",
                          "strom_remote_storage_managers", "strom_remote_log_metadata_managers",
                          "strom_local_tiers", "strom_connect_plugins"}
    for module in HOOKSPEC_MODULES:
        assert module.__doc__
    for name, caller in specs.items():
        function = caller.spec.function
        assert inspect.getdoc(function), name
        assert inspect.signature(function).return_annotation is not inspect.Signature.empty, name
