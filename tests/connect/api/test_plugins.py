"""PluginRegistry: plugins from a strom plugin manager (a third-party plugin registered without
an entry point, and the built-ins), name resolution, aliases, ambiguity and /connector-plugins."""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pluggy
import pytest

from strom.connect import builtin
from strom.connect.api import (
    ConnectRecord,
    Converter,
    HeaderConverter,
    Predicate,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
    Transformation,
)
from strom.connect.data import Schema, SchemaAndValue
from strom.connect.exceptions import (
    AmbiguousPluginError,
    ConfigException,
    ConnectException,
    PluginNotFoundError,
)
from strom.connect.plugins import PluginDesc, PluginKind, PluginRegistry, PluginType
from strom.plugins.manager import get_plugin_manager
from strom.plugins.markers import hookimpl

# -- a third-party plugin's classes -----------------------------------------------------------


class AcmeSourceTask(SourceTask):
    def start(self, props: dict[str, str]) -> None:
        self.props = props

    def poll(self) -> list[SourceRecord] | None:
        return None

    def stop(self) -> None:
        pass


class AcmeFileSourceConnector(SourceConnector):
    KAFKA_CLASS_NAME = "com.acme.connect.AcmeFileSourceConnector"
    VERSION = "3.1.4"

    def start(self, props: dict[str, str]) -> None:
        self.props = props

    def task_class(self) -> type[Task]:
        return AcmeSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


class AcmeSinkConnector(SinkConnector):
    def __init__(self) -> None:
        raise RuntimeError("needs configuration")  # version() unreachable -> "undefined"

    def start(self, props: dict[str, str]) -> None:
        pass

    def task_class(self) -> type[Task]:
        return SinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return []

    def stop(self) -> None:
        pass


class AcmeStringConverter(Converter, HeaderConverter):  # both kinds, like Kafka's StringConverter
    def version(self) -> str:
        return "9.9"

    def configure(self, configs: Mapping[str, Any], is_key: bool = False) -> None:
        pass

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any, headers: Any = None) -> bytes | None:
        return None if value is None else str(value).encode()

    def to_connect_data(self, topic: str, value: bytes | None, headers: Any = None) -> SchemaAndValue:
        return SchemaAndValue(Schema.OPTIONAL_STRING_SCHEMA, None if value is None else value.decode())

    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)


class _Mask(Transformation[ConnectRecord]):
    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        return record


class Mask:
    class Key(_Mask):
        KAFKA_CLASS_NAME = "com.acme.transforms.Mask$Key"

    class Value(_Mask):
        KAFKA_CLASS_NAME = "com.acme.transforms.Mask$Value"


class Hoist:
    class Value(_Mask):
        pass


class IsBigPredicate(Predicate[SinkRecord]):
    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def test(self, record: SinkRecord) -> bool:
        return bool(record.value)


THIRD_PARTY: list[type] = [AcmeFileSourceConnector, AcmeSinkConnector, AcmeStringConverter,
                           Mask.Key, Mask.Value, Hoist.Value, IsBigPredicate]


class AcmePlugin:
    """A plugin object registered directly on the plugin manager (no entry point)."""

    @hookimpl
    def strom_connect_plugins(self) -> list[type]:
        return THIRD_PARTY


def _pm(*extra: object, builtins: bool = False) -> pluggy.PluginManager:
    pm = get_plugin_manager(autoload=False, env={},
                            blocklist=() if builtins else ("connect_builtins",))
    pm.register(AcmePlugin(), name="acme")
    for i, obj in enumerate(extra):
        pm.register(obj, name=f"extra{i}")
    return pm


def _fq(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# -- tests ------------------------------------------------------------------------------------


def test_third_party_plugin_resolves_by_every_name() -> None:
    reg = PluginRegistry(_pm())
    for name in (_fq(AcmeFileSourceConnector), "com.acme.connect.AcmeFileSourceConnector",
                 "AcmeFileSourceConnector", "AcmeFileSource", "  AcmeFileSource "):
        assert reg.connector_class(name) is AcmeFileSourceConnector, name
    assert reg.connector_class("AcmeSink") is AcmeSinkConnector
    assert reg.converter_class("AcmeString") is AcmeStringConverter
    assert reg.header_converter_class("AcmeStringConverter") is AcmeStringConverter
    assert reg.predicate_class("IsBig") is IsBigPredicate
    assert reg.predicate_class(_fq(IsBigPredicate)) is IsBigPredicate


def test_nested_transformations_use_kafka_dollar_names() -> None:
    reg = PluginRegistry(_pm())
    assert reg.transformation_class("com.acme.transforms.Mask$Value") is Mask.Value
    assert reg.transformation_class("Mask$Value") is Mask.Value
    assert reg.transformation_class("Mask.Value") is Mask.Value
    assert reg.transformation_class(_fq(Mask.Key)) is Mask.Key
    assert reg.transformation_class("Hoist$Value") is Hoist.Value  # no Kafka name: from qualname


def test_ambiguous_short_name_is_an_error_naming_both() -> None:
    reg = PluginRegistry(_pm())
    with pytest.raises(AmbiguousPluginError) as info:
        reg.transformation_class("Value")
    msg = str(info.value)
    assert _fq(Mask.Value) in msg and _fq(Hoist.Value) in msg and "fully qualified" in msg


def test_same_simple_name_from_two_plugins() -> None:
    other = type("AcmeFileSourceConnector", (AcmeFileSourceConnector,),
                 {"__module__": "other.vendor", "KAFKA_CLASS_NAME": "org.other.AcmeFileSourceConnector"})

    class OtherPlugin:
        @hookimpl
        def strom_connect_plugins(self) -> list[type]:
            return [other]

    reg = PluginRegistry(_pm(OtherPlugin()))
    with pytest.raises(AmbiguousPluginError) as info:
        reg.connector_class("AcmeFileSource")
    msg = str(info.value)
    assert _fq(AcmeFileSourceConnector) in msg and "other.vendor.AcmeFileSourceConnector" in msg
    assert "acme" in msg and "extra0" in msg  # the plugins offering them
    # Fully qualified names still pick one.
    assert reg.connector_class("other.vendor.AcmeFileSourceConnector") is other
    assert reg.connector_class("org.other.AcmeFileSourceConnector") is other
    assert reg.connector_class("com.acme.connect.AcmeFileSourceConnector") is AcmeFileSourceConnector


def test_unknown_names_and_kind_separation() -> None:
    reg = PluginRegistry(_pm())
    with pytest.raises(PluginNotFoundError) as info:
        reg.connector_class("NoSuchConnector")
    assert "NoSuchConnector" in str(info.value)
    assert "com.acme.connect.AcmeFileSourceConnector" in str(info.value)  # lists what exists
    assert isinstance(info.value, ConfigException) and info.value.status_code == 400
    with pytest.raises(PluginNotFoundError):
        reg.connector_class("AcmeString")  # a converter is not a connector
    with pytest.raises(PluginNotFoundError):
        reg.transformation_class("IsBig")


def test_register_rejects_non_plugins() -> None:
    reg = PluginRegistry(classes=[])
    with pytest.raises(ConnectException, match="not a Connect plugin"):
        reg.register(dict)

    class BadPlugin:
        @hookimpl
        def strom_connect_plugins(self) -> list[type]:
            return [str]

    with pytest.raises(ConnectException, match=r"builtins\.str"):
        PluginRegistry(_pm(BadPlugin()))


def test_plugin_descs_is_connector_plugins_json() -> None:
    reg = PluginRegistry(_pm())
    connectors = reg.plugin_descs("connector")
    assert [d.to_json() for d in connectors] == [
        {"class": "com.acme.connect.AcmeFileSourceConnector", "type": "source", "version": "3.1.4"},
        {"class": _fq(AcmeSinkConnector), "type": "sink", "version": "undefined"},
    ]
    everything = reg.plugin_descs()
    assert PluginDesc(_fq(AcmeStringConverter), PluginType.CONVERTER, "9.9") in everything
    assert PluginDesc(_fq(AcmeStringConverter), PluginType.HEADER_CONVERTER, "9.9") in everything
    assert {d.type for d in everything} == set(PluginType)
    assert [d.class_name for d in reg.plugin_descs(PluginType.PREDICATE)] == [_fq(IsBigPredicate)]
    assert len(reg.plugin_descs(PluginKind.TRANSFORMATION)) == 3
    assert everything == sorted(everything)


# -- the built-in plugin module -----------------------------------------------------------------


def _write_pkg(root: Path, name: str, body: str) -> None:
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(body))


def test_builtin_hook_loads_packages_and_skips_only_missing_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    _write_pkg(tmp_path, "acme_builtin_ok", """
        from strom.connect.api import Converter
        class OkConverter(Converter):
            def configure(self, configs, is_key): pass
            def from_connect_data(self, topic, schema, value, headers=None): return None
            def to_connect_data(self, topic, value, headers=None): return None
        PLUGINS = [OkConverter]
    """)
    _write_pkg(tmp_path, "acme_builtin_broken", "import acme_dependency_that_is_not_installed\nPLUGINS = []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(builtin, "BUILTIN_PACKAGES", ("acme_builtin_ok", "acme_builtin_missing"))
    with caplog.at_level(logging.WARNING, logger="strom.connect.builtin"):
        classes = builtin.strom_connect_plugins()
    assert [c.__name__ for c in classes] == ["OkConverter"]
    assert "acme_builtin_missing" in caplog.text
    # A package that exists but fails on a missing dependency is an error, not skipped.
    monkeypatch.setattr(builtin, "BUILTIN_PACKAGES", ("acme_builtin_broken",))
    with pytest.raises(ModuleNotFoundError, match="acme_dependency_that_is_not_installed"):
        builtin.strom_connect_plugins()


def test_builtins_registered_on_the_plugin_manager() -> None:
    pm = get_plugin_manager(autoload=False, env={})
    assert pm.get_plugin("connect_builtins") is builtin
    assert get_plugin_manager(autoload=False, env={}, blocklist=["connect_builtins"]).get_plugin(
        "connect_builtins") is None


def test_builtin_kafka_names_resolve() -> None:
    """Kafka Connect config files name the built-ins by Kafka's class names and aliases."""
    reg = PluginRegistry(_pm(builtins=True))
    assert reg.converter_class("org.apache.kafka.connect.storage.StringConverter").__name__ == "StringConverter"
    assert reg.header_converter_class("org.apache.kafka.connect.storage.StringConverter")
    assert reg.converter_class("org.apache.kafka.connect.json.JsonConverter")
    insert = reg.transformation_class("org.apache.kafka.connect.transforms.InsertField$Value")
    assert reg.transformation_class("InsertField$Value") is insert
    assert reg.predicate_class("org.apache.kafka.connect.transforms.predicates.TopicNameMatches")
    src = reg.connector_class("org.apache.kafka.connect.file.FileStreamSourceConnector")
    assert reg.connector_class("FileStreamSource") is src
    assert reg.connector_class("FileStreamSourceConnector") is src
    # Every built-in's Kafka name resolves to it, for each kind it implements.
    for kind in PluginKind:
        for cls in reg.classes(kind):
            kname = cls.__dict__.get("KAFKA_CLASS_NAME")
            if kname:
                assert reg.resolve(kname, kind) is cls, kname


def test_two_classes_claiming_one_kafka_name() -> None:
    """A third-party class reusing a Kafka class name cannot silently shadow another."""
    impostor = type("Shadow", (AcmeFileSourceConnector,),
                    {"__module__": "shadow.vendor", "KAFKA_CLASS_NAME": "com.acme.connect.AcmeFileSourceConnector"})

    class ShadowPlugin:
        @hookimpl
        def strom_connect_plugins(self) -> list[type]:
            return [impostor]

    reg = PluginRegistry(_pm(ShadowPlugin()))
    with pytest.raises(AmbiguousPluginError, match=r"shadow\.vendor\.Shadow"):
        reg.connector_class("com.acme.connect.AcmeFileSourceConnector")
    assert reg.connector_class("shadow.vendor.Shadow") is impostor
    assert reg.connector_class(_fq(AcmeFileSourceConnector)) is AcmeFileSourceConnector
