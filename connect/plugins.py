"""The Connect plugin registry: every connector, converter, header converter, transformation
and predicate class offered through the ``strom_connect_plugins`` hook, and name resolution.

A name in a config resolves, per kind, in this order:

1. a fully qualified name: the Python qualified name (``module.Class``; nested classes as
   ``module.Outer.Inner``) or the class's ``KAFKA_CLASS_NAME``
   (``org.apache.kafka.connect.transforms.InsertField$Value``);
2. a short name: the simple class name (``FileStreamSourceConnector``; ``InsertField$Value`` /
   ``InsertField.Value`` for nested classes; the last part of ``KAFKA_CLASS_NAME``) and Kafka's
   alias (the simple name without its kind's suffix: ``FileStreamSource``, ``String`` for
   ``StringConverter``).

A short name matching several classes is an error naming all of them (Kafka drops such aliases
silently; an error says what to write instead). Kafka Connect's ``/connector-plugins`` JSON
comes from :meth:`PluginRegistry.plugin_descs`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import pluggy

from strom.connect.api.connector import Connector, SinkConnector, SourceConnector
from strom.connect.api.converter import Converter, HeaderConverter
from strom.connect.api.transforms import Predicate, Transformation
from strom.connect.exceptions import AmbiguousPluginError, ConnectException, PluginNotFoundError

T = TypeVar("T")
UNDEFINED_VERSION = "undefined"  # Kafka's PluginDesc version when a plugin has none


class PluginType(enum.StrEnum):
    """Kafka's ``PluginType``; the value is the REST spelling."""

    SOURCE = "source"
    SINK = "sink"
    CONVERTER = "converter"
    HEADER_CONVERTER = "header_converter"
    TRANSFORMATION = "transformation"
    PREDICATE = "predicate"


class PluginKind(enum.StrEnum):
    """What a name is resolved as (connectors: source and sink together)."""

    CONNECTOR = "connector"
    CONVERTER = "converter"
    HEADER_CONVERTER = "header_converter"
    TRANSFORMATION = "transformation"
    PREDICATE = "predicate"


_SUFFIXES: dict[PluginKind, tuple[str, ...]] = {
    PluginKind.CONNECTOR: ("Connector",),
    PluginKind.CONVERTER: ("Converter",),
    PluginKind.HEADER_CONVERTER: ("HeaderConverter", "Converter"),
    PluginKind.TRANSFORMATION: ("Transformation", "Transform"),
    PluginKind.PREDICATE: ("Predicate",),
}

_KIND_OF_TYPE: dict[PluginType, PluginKind] = {
    PluginType.SOURCE: PluginKind.CONNECTOR,
    PluginType.SINK: PluginKind.CONNECTOR,
    PluginType.CONVERTER: PluginKind.CONVERTER,
    PluginType.HEADER_CONVERTER: PluginKind.HEADER_CONVERTER,
    PluginType.TRANSFORMATION: PluginKind.TRANSFORMATION,
    PluginType.PREDICATE: PluginKind.PREDICATE,
}


@dataclass(frozen=True, slots=True, order=True)
class PluginDesc:
    """One plugin as ``GET /connector-plugins`` lists it (Kafka's ``PluginInfo``)."""

    class_name: str
    type: PluginType
    version: str

    def to_json(self) -> dict[str, Any]:
        return {"class": self.class_name, "type": PluginType(self.type).value, "version": self.version}


def plugin_types(cls: type) -> list[PluginType]:
    """The plugin types of a class, by its base classes (a class may be several, e.g. a
    converter that is also a header converter)."""
    out: list[PluginType] = []
    if issubclass(cls, SourceConnector):
        out.append(PluginType.SOURCE)
    elif issubclass(cls, SinkConnector):
        out.append(PluginType.SINK)
    if issubclass(cls, Converter):
        out.append(PluginType.CONVERTER)
    if issubclass(cls, HeaderConverter):
        out.append(PluginType.HEADER_CONVERTER)
    if issubclass(cls, Transformation):
        out.append(PluginType.TRANSFORMATION)
    if issubclass(cls, Predicate):
        out.append(PluginType.PREDICATE)
    return out


def python_name(cls: type) -> str:
    """``module.QualName`` of a class."""
    return f"{cls.__module__}.{cls.__qualname__}"


def kafka_name(cls: type) -> str | None:
    name = cls.__dict__.get("KAFKA_CLASS_NAME")  # own attribute only: subclasses are other plugins
    return name if isinstance(name, str) and name else None


def class_name(cls: type) -> str:
    """The name shown for a class: its Kafka name if it has one, else its Python name."""
    return kafka_name(cls) or python_name(cls)


def short_names(cls: type, kind: PluginKind) -> set[str]:
    """Simple names and aliases of a class for one kind (see the module doc)."""
    simple: set[str] = {cls.__name__}
    if "." in cls.__qualname__:  # nested class: Kafka spells it Outer$Inner
        simple.add(cls.__qualname__)
        simple.add(cls.__qualname__.replace(".", "$"))
    kname = kafka_name(cls)
    if kname:
        simple.add(kname.rsplit(".", 1)[-1])
    names = set(simple)
    for s in simple:
        head, dollar, tail = s.partition("$")
        for suffix in _SUFFIXES[kind]:
            # The suffix is pruned from the outer class name (InsertFieldTransformation$Value).
            if head.endswith(suffix) and len(head) > len(suffix):
                names.add(head[: -len(suffix)] + dollar + tail)
    return names


class PluginRegistry:
    """Connect plugin classes by kind, with Kafka's name resolution.

    Build from a strom plugin manager (default: :func:`strom.plugins.manager.get_plugin_manager`
    with the built-ins and installed entry points), or from classes with ``classes=``.
    """

    def __init__(self, pm: pluggy.PluginManager | None = None, *, classes: Iterable[type] | None = None) -> None:
        self._by_kind: dict[PluginKind, list[type]] = {k: [] for k in PluginKind}
        self._types: dict[type, list[PluginType]] = {}
        self._plugin_of: dict[type, str] = {}
        if classes is not None:
            for cls in classes:
                self.register(cls)
        if pm is None and classes is None:
            from strom.plugins.manager import get_plugin_manager

            pm = get_plugin_manager()
        if pm is not None:
            self.load(pm)

    # -- building --------------------------------------------------------------------------
    def load(self, pm: pluggy.PluginManager) -> None:
        """Add every class the plugins of ``pm`` offer (each implementation called on its own,
        so errors can name the plugin)."""
        for impl in pm.hook.strom_connect_plugins.get_hookimpls():
            if impl.hookwrapper or impl.wrapper:
                continue
            offered = cast("Iterable[type] | None", impl.function())
            if offered is None:
                continue
            for cls in offered:
                self.register(cls, plugin_name=impl.plugin_name)

    def register(self, cls: type, *, plugin_name: str | None = None) -> None:
        """Add one class; it must subclass one of the SPI base classes."""
        if not isinstance(cls, type):
            raise ConnectException(f"Connect plugin {plugin_name or ''} offered {cls!r}, which is not a class")
        types = plugin_types(cls)
        if not types:
            raise ConnectException(
                f"{python_name(cls)} (offered by plugin {plugin_name!r}) is not a Connect plugin: it "
                "subclasses none of Connector, Converter, HeaderConverter, Transformation, Predicate")
        if cls in self._types:
            return  # offered twice (e.g. re-exported by two packages): one class, one entry
        self._types[cls] = types
        if plugin_name:
            self._plugin_of[cls] = plugin_name
        for t in types:
            kind = _KIND_OF_TYPE[t]
            if cls not in self._by_kind[kind]:
                self._by_kind[kind].append(cls)

    # -- lookup ----------------------------------------------------------------------------
    def classes(self, kind: PluginKind | str | None = None) -> list[type]:
        if kind is None:
            return list(self._types)
        return list(self._by_kind[PluginKind(kind)])

    def resolve(self, name: str, kind: PluginKind | str) -> type:
        """The class ``name`` denotes for ``kind``; PluginNotFoundError / AmbiguousPluginError."""
        kind = PluginKind(kind)
        name = name.strip()
        candidates = self._by_kind[kind]
        exact = [c for c in candidates if name in (python_name(c), kafka_name(c))]
        if len(exact) == 1:
            return exact[0]
        if len(exact) > 1:
            raise self._ambiguous(name, kind, exact)
        short = [c for c in candidates if name in short_names(c, kind)]
        if len(short) == 1:
            return short[0]
        if len(short) > 1:
            raise self._ambiguous(name, kind, short)
        raise PluginNotFoundError(
            f"Failed to find any class that implements {_KIND_TITLE[kind]} and which name matches "
            f"{name}, available {kind.value}s are: "
            + ", ".join(sorted(class_name(c) for c in candidates)))

    def _ambiguous(self, name: str, kind: PluginKind, classes: list[type]) -> AmbiguousPluginError:
        described = ", ".join(
            sorted(f"{python_name(c)}" + (f" ({kafka_name(c)})" if kafka_name(c) else "")
                   + (f" from plugin {self._plugin_of[c]}" if c in self._plugin_of else "")
                   for c in classes))
        return AmbiguousPluginError(
            f"{_KIND_TITLE[kind]} name {name!r} is ambiguous: it matches {described}; use a fully "
            "qualified class name")

    def connector_class(self, name: str) -> type[Connector]:
        return self.resolve(name, PluginKind.CONNECTOR)

    def converter_class(self, name: str) -> type[Converter]:
        return self.resolve(name, PluginKind.CONVERTER)

    def header_converter_class(self, name: str) -> type[HeaderConverter]:
        return self.resolve(name, PluginKind.HEADER_CONVERTER)

    def transformation_class(self, name: str) -> type[Transformation[Any]]:
        return self.resolve(name, PluginKind.TRANSFORMATION)

    def predicate_class(self, name: str) -> type[Predicate[Any]]:
        return self.resolve(name, PluginKind.PREDICATE)

    def connector_type(self, cls: type) -> PluginType | None:
        """SOURCE or SINK for a connector class, else None."""
        if issubclass(cls, SourceConnector):
            return PluginType.SOURCE
        if issubclass(cls, SinkConnector):
            return PluginType.SINK
        return None

    # -- REST ------------------------------------------------------------------------------
    def plugin_descs(self, kind: PluginType | PluginKind | str | None = None) -> list[PluginDesc]:
        """Plugins as ``/connector-plugins`` lists them, sorted by class name then type.

        ``kind``: a :class:`PluginType` (``"source"``, ``"converter"``...), a
        :class:`PluginKind` (``"connector"`` = source + sink) or ``None`` for all.
        """
        wanted: set[PluginType]
        if kind is None:
            wanted = set(PluginType)
        elif kind in {k.value for k in PluginKind} and kind not in {t.value for t in PluginType}:
            wanted = {t for t, k in _KIND_OF_TYPE.items() if k == PluginKind(kind)}
        else:
            wanted = {PluginType(kind)}
        out: list[PluginDesc] = []
        for cls, types in self._types.items():
            for t in types:
                if t in wanted:
                    out.append(PluginDesc(class_name(cls), t, plugin_version(cls)))
        return sorted(out)


_KIND_TITLE: dict[PluginKind, str] = {
    PluginKind.CONNECTOR: "Connector",
    PluginKind.CONVERTER: "Converter",
    PluginKind.HEADER_CONVERTER: "HeaderConverter",
    PluginKind.TRANSFORMATION: "Transformation",
    PluginKind.PREDICATE: "Predicate",
}


def plugin_version(cls: type) -> str:
    """The version a plugin reports: a ``VERSION`` class attribute, else ``version()`` of an
    instance (Kafka instantiates plugins for this too), else ``"undefined"``."""
    declared = getattr(cls, "VERSION", None)
    if isinstance(declared, str):
        return declared
    try:
        version = cls().version()
    except Exception:  # a plugin that cannot be built without config still gets listed
        return UNDEFINED_VERSION
    return str(version) if version else UNDEFINED_VERSION


__all__ = [
    "UNDEFINED_VERSION",
    "PluginDesc",
    "PluginKind",
    "PluginRegistry",
    "PluginType",
    "class_name",
    "kafka_name",
    "plugin_types",
    "plugin_version",
    "python_name",
    "short_names",
]
