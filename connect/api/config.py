"""Kafka's ``ConfigDef`` for Connect plugins: typed keys with defaults, validators, docs and
groups; :meth:`ConfigDef.parse` (raises :class:`ConfigException` naming the key and what is
accepted) and :meth:`ConfigDef.validate` (a :class:`ConfigValue` per key with its errors), and
:func:`config_infos`, which renders a validation as Kafka Connect's ``ConfigInfos`` JSON (the
``PUT /connector-plugins/{p}/config/validate`` answer).

Values accepted by ``parse``: strings as in ``.properties`` files (``"true"``, ``"42"``,
``"a,b"``) or already-typed Python values. Parsed types: BOOLEAN ``bool``, STRING ``str``
(trimmed), INT/SHORT/LONG ``int`` (range-checked as Java's int/short/long), DOUBLE ``float``,
LIST ``list[str]``, CLASS ``str`` (a class name; a class object is kept as given), PASSWORD
:class:`Password`.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from strom.connect.exceptions import ConfigException


class _NoDefault:
    """Marker for a required key (Kafka's ``ConfigDef.NO_DEFAULT_VALUE``)."""

    _instance: ClassVar[_NoDefault | None] = None

    def __new__(cls) -> _NoDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()


class ConfigType(enum.Enum):
    """Kafka's ``ConfigDef.Type``."""

    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


class Importance(enum.Enum):
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class Width(enum.Enum):
    NONE = "NONE"
    SHORT = "SHORT"
    MEDIUM = "MEDIUM"
    LONG = "LONG"


_INT_RANGES = {
    ConfigType.SHORT: (-(1 << 15), (1 << 15) - 1, "a 16-bit integer"),
    ConfigType.INT: (-(1 << 31), (1 << 31) - 1, "a 32-bit integer"),
    ConfigType.LONG: (-(1 << 63), (1 << 63) - 1, "a 64-bit integer"),
}


class Password:
    """A secret config value; prints as ``[hidden]`` (Kafka's ``Password``)."""

    HIDDEN = "[hidden]"
    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return self.HIDDEN

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


def parse_type(name: str, value: Any, type_: ConfigType) -> Any:
    """Parse ``value`` (string or typed) as ``type_``; :class:`ConfigException` names the key."""
    if value is None:
        return None
    try:
        if type_ is ConfigType.BOOLEAN:
            if isinstance(value, bool):
                return value
            if isinstance(value, str):
                v = value.strip().lower()
                if v in ("true", "false"):
                    return v == "true"
                raise ConfigException(name, value, "Expected value to be either true or false")
            raise ConfigException(name, value, "Expected value to be either true or false")
        if type_ is ConfigType.PASSWORD:
            if isinstance(value, Password):
                return value
            if isinstance(value, str):
                return Password(value)
            raise ConfigException(name, value, "Expected value to be a string, but it was a "
                                  + type(value).__name__)
        if type_ is ConfigType.STRING:
            if isinstance(value, str):
                return value.strip()
            raise ConfigException(name, value, "Expected value to be a string, but it was a "
                                  + type(value).__name__)
        if type_ in _INT_RANGES:
            lo, hi, what = _INT_RANGES[type_]
            if isinstance(value, bool):
                raise ConfigException(name, value, f"Expected value to be {what}")
            if isinstance(value, str):
                try:
                    value = int(value.strip())
                except ValueError:
                    raise ConfigException(name, value, f"Not a number of type {type_.value}") from None
            if not isinstance(value, int):
                raise ConfigException(name, value, f"Expected value to be {what}, but it was a "
                                      + type(value).__name__)
            if not lo <= value <= hi:
                raise ConfigException(name, value, f"Expected value to be {what} "
                                      f"(between {lo} and {hi})")
            return value
        if type_ is ConfigType.DOUBLE:
            if isinstance(value, bool):
                raise ConfigException(name, value, "Expected value to be a double")
            if isinstance(value, int | float):
                return float(value)
            if isinstance(value, str):
                try:
                    return float(value.strip())
                except ValueError:
                    raise ConfigException(name, value, "Not a number of type DOUBLE") from None
            raise ConfigException(name, value, "Expected value to be a double, but it was a "
                                  + type(value).__name__)
        if type_ is ConfigType.LIST:
            if isinstance(value, str):
                trimmed = value.strip()
                return [] if not trimmed else [p.strip() for p in trimmed.split(",")]
            if isinstance(value, list | tuple):
                return list(value)
            raise ConfigException(name, value, "Expected a comma separated list.")
        if type_ is ConfigType.CLASS:
            if isinstance(value, str):
                return value.strip()
            if isinstance(value, type):
                return value
            raise ConfigException(name, value, "Expected a Class instance or class name.")
    except ConfigException:
        raise
    raise ConfigException(name, value, f"Unknown type {type_}")


def convert_to_string(value: Any, type_: ConfigType | None) -> str | None:
    """Kafka's ``ConfigDef.convertToString``: the string form shown in REST answers."""
    if value is None:
        return None
    if type_ is ConfigType.LIST and isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if type_ is ConfigType.CLASS and isinstance(value, type):
        return getattr(value, "KAFKA_CLASS_NAME", None) or f"{value.__module__}.{value.__qualname__}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ---------------------------------------------------------------------------------------------
# Validators
# ---------------------------------------------------------------------------------------------

class Validator(ABC):
    """A check of one parsed value: ``ensure_valid(name, value)`` raises ConfigException.

    ``str(validator)`` describes what is accepted (shown in docs, like Kafka's ``toString``).
    Any callable ``(name, value) -> None`` may be used as a validator too.
    """

    @abstractmethod
    def ensure_valid(self, name: str, value: Any) -> None:
        raise NotImplementedError

    def __call__(self, name: str, value: Any) -> None:
        self.ensure_valid(name, value)


class Range(Validator):
    """Numeric range, inclusive; ``Range.at_least(n)``, ``Range.at_most(n)``, ``Range.between(a, b)``."""

    def __init__(self, min_: float | None, max_: float | None) -> None:
        self.min = min_
        self.max = max_

    @classmethod
    def at_least(cls, min_: float) -> Range:
        return cls(min_, None)

    @classmethod
    def at_most(cls, max_: float) -> Range:
        return cls(None, max_)

    @classmethod
    def between(cls, min_: float, max_: float) -> Range:
        return cls(min_, max_)

    def ensure_valid(self, name: str, value: Any) -> None:
        if value is None:
            raise ConfigException(name, None, "Value must be non-null")
        if self.min is not None and value < self.min:
            raise ConfigException(name, value, f"Value must be at least {self.min}")
        if self.max is not None and value > self.max:
            raise ConfigException(name, value, f"Value must be no more than {self.max}")

    def __str__(self) -> str:
        if self.min is None:
            return f"[...,{self.max}]"
        if self.max is None:
            return f"[{self.min},...]"
        return f"[{self.min},...,{self.max}]"


class ValidString(Validator):
    """One of the given strings (case-sensitive); ``ValidString.in_("a", "b")``."""

    def __init__(self, valid: Sequence[str]) -> None:
        self.valid = list(valid)

    @classmethod
    def in_(cls, *valid: str) -> ValidString:
        return cls(valid)

    def ensure_valid(self, name: str, value: Any) -> None:
        if value not in self.valid:
            raise ConfigException(name, value, "String must be one of: " + ", ".join(self.valid))

    def __str__(self) -> str:
        return "[" + ", ".join(self.valid) + "]"


class CaseInsensitiveValidString(Validator):
    """One of the given strings, ignoring case; ``CaseInsensitiveValidString.in_("none", "all")``."""

    def __init__(self, valid: Sequence[str]) -> None:
        self.valid = list(valid)
        self._lower = {v.lower() for v in valid}

    @classmethod
    def in_(cls, *valid: str) -> CaseInsensitiveValidString:
        return cls(valid)

    def ensure_valid(self, name: str, value: Any) -> None:
        if not isinstance(value, str) or value.lower() not in self._lower:
            raise ConfigException(name, value, "String must be one of (case insensitive): "
                                  + ", ".join(self.valid))

    def __str__(self) -> str:
        return "(case insensitive) [" + ", ".join(self.valid) + "]"


class ValidList(Validator):
    """A list whose items are each one of the given strings; ``ValidList.in_("a", "b")``."""

    def __init__(self, valid: Sequence[str], allow_empty: bool = True) -> None:
        self.valid = list(valid)
        self.allow_empty = allow_empty

    @classmethod
    def in_(cls, *valid: str) -> ValidList:
        return cls(valid)

    @classmethod
    def any_non_duplicate_values(cls, allow_empty: bool = True) -> ValidList:
        return _NonDuplicateList([], allow_empty)

    def ensure_valid(self, name: str, value: Any) -> None:
        items = list(value or [])
        if not items and not self.allow_empty:
            raise ConfigException(name, value, "Empty list is not allowed")
        bad = [v for v in items if v not in self.valid]
        if bad:
            raise ConfigException(name, bad[0], "String must be one of: " + ", ".join(self.valid))

    def __str__(self) -> str:
        return "[" + ", ".join(self.valid) + "]"


class _NonDuplicateList(ValidList):
    def ensure_valid(self, name: str, value: Any) -> None:
        items = list(value or [])
        if not items and not self.allow_empty:
            raise ConfigException(name, value, "Empty list is not allowed")
        seen: set[Any] = set()
        for v in items:
            if v in seen:
                raise ConfigException(name, value, f"Duplicate value {v!r} in list")
            seen.add(v)

    def __str__(self) -> str:
        return "non-empty list without duplicates" if not self.allow_empty else "list without duplicates"


class NonEmptyString(Validator):
    """A string that is not empty."""

    def ensure_valid(self, name: str, value: Any) -> None:
        if value is None or (isinstance(value, str) and not value):
            raise ConfigException(name, value, "String must be non-empty")

    def __str__(self) -> str:
        return "non-empty string"


class NonNullValidator(Validator):
    """Any value except null."""

    def ensure_valid(self, name: str, value: Any) -> None:
        if value is None:
            raise ConfigException(name, None, "Value must be non-null")

    def __str__(self) -> str:
        return "non-null value"


class CompositeValidator(Validator):
    """All of several validators; ``CompositeValidator.of(v1, v2)``."""

    def __init__(self, validators: Sequence[Validator | Callable[[str, Any], None]]) -> None:
        self.validators = list(validators)

    @classmethod
    def of(cls, *validators: Validator | Callable[[str, Any], None]) -> CompositeValidator:
        return cls(validators)

    def ensure_valid(self, name: str, value: Any) -> None:
        for v in self.validators:
            v(name, value)

    def __str__(self) -> str:
        return ", ".join(str(v) for v in self.validators)


class LambdaValidator(Validator):
    """A validator from a function and a description; ``LambdaValidator.with_(fn, "desc")``."""

    def __init__(self, fn: Callable[[str, Any], None], description: str) -> None:
        self.fn = fn
        self.description = description

    @classmethod
    def with_(cls, fn: Callable[[str, Any], None], description: str) -> LambdaValidator:
        return cls(fn, description)

    def ensure_valid(self, name: str, value: Any) -> None:
        self.fn(name, value)

    def __str__(self) -> str:
        return self.description


@runtime_checkable
class Recommender(Protocol):
    """Kafka's ``ConfigDef.Recommender``: valid values and visibility given the parsed config."""

    def valid_values(self, name: str, parsed_config: Mapping[str, Any]) -> list[Any]: ...

    def visible(self, name: str, parsed_config: Mapping[str, Any]) -> bool: ...


# ---------------------------------------------------------------------------------------------
# ConfigDef
# ---------------------------------------------------------------------------------------------

ValidatorLike = Validator | Callable[[str, Any], None]
# Module-level names for annotations inside ConfigDef, whose class attributes Importance/Width
# (Kafka's nested enums) would shadow them for type checkers.
_Importance = Importance
_Width = Width


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One defined key (Kafka's ``ConfigDef.ConfigKey``)."""

    name: str
    type: ConfigType
    default: Any
    validator: ValidatorLike | None
    importance: Importance
    doc: str
    group: str | None
    order: int
    width: Width
    display_name: str
    dependents: tuple[str, ...]
    recommender: Recommender | None
    internal: bool = False

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@dataclass(slots=True)
class ConfigValue:
    """The validation result of one key (Kafka's ``ConfigValue``); mutable like Kafka's."""

    name: str
    value: Any = None
    recommended_values: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    visible: bool = True

    def add_error_message(self, message: str) -> None:
        self.errors.append(message)


@dataclass(slots=True)
class Config:
    """What ``Connector.validate`` returns: a :class:`ConfigValue` per key (Kafka's ``Config``)."""

    config_values: list[ConfigValue]

    def error_count(self) -> int:
        return sum(len(v.errors) for v in self.config_values)


def _enum(value: Any, cls: type[enum.Enum]) -> Any:
    if isinstance(value, cls):
        return value
    return cls(str(value).upper())


class ConfigDef:
    """A set of config keys, defined fluently: ``ConfigDef().define("topic", ConfigType.STRING,
    importance=Importance.HIGH, doc="...")``.

    ``ConfigDef.Type``, ``ConfigDef.Importance``, ``ConfigDef.Width`` and
    ``ConfigDef.NO_DEFAULT_VALUE`` are available as in Kafka.
    """

    Type = ConfigType
    Importance = Importance
    Width = Width
    NO_DEFAULT_VALUE: Any = NO_DEFAULT

    def __init__(self, base: ConfigDef | None = None) -> None:
        self._keys: dict[str, ConfigKey] = dict(base._keys) if base is not None else {}
        self._groups: list[str] = list(base._groups) if base is not None else []

    def define(self, name: str, type: ConfigType | str, default: Any = NO_DEFAULT,
               validator: ValidatorLike | None = None, importance: _Importance | str = Importance.MEDIUM,
               doc: str = "", group: str | None = None, order: int = -1, width: _Width | str = Width.NONE,
               display_name: str | None = None, dependents: Iterable[str] = (),
               recommender: Recommender | None = None, *, internal: bool = False) -> ConfigDef:
        """Add a key; returns ``self``. A default is parsed and validated here, as Kafka does."""
        if name in self._keys:
            raise ConfigException(f"Configuration {name} is defined twice.")
        t = _enum(type, ConfigType)
        if default is not NO_DEFAULT:
            default = parse_type(name, default, t)
            if validator is not None and default is not None:
                validator(name, default)
        if group is not None and group not in self._groups:
            self._groups.append(group)
        self._keys[name] = ConfigKey(
            name=name, type=t, default=default, validator=validator,
            importance=_enum(importance, Importance), doc=doc, group=group, order=order,
            width=_enum(width, Width), display_name=display_name or name,
            dependents=tuple(dependents), recommender=recommender, internal=internal)
        return self

    def define_internal(self, name: str, type: ConfigType | str, default: Any = NO_DEFAULT,
                        importance: _Importance | str = Importance.LOW) -> ConfigDef:
        """A key that is parsed but not documented nor shown by validation."""
        return self.define(name, type, default, importance=importance, internal=True)

    # -- introspection ---------------------------------------------------------------------
    @property
    def config_keys(self) -> dict[str, ConfigKey]:
        """Name -> :class:`ConfigKey`, in definition order."""
        return dict(self._keys)

    def names(self) -> list[str]:
        return list(self._keys)

    def groups(self) -> list[str]:
        return list(self._groups)

    def default_values(self) -> dict[str, Any]:
        return {k.name: k.default for k in self._keys.values() if k.has_default}

    def __contains__(self, name: object) -> bool:
        return name in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def merge(self, other: ConfigDef) -> ConfigDef:
        """Add ``other``'s keys that this definition lacks (Kafka's ``withClientSslSupport``-like
        merge used for connector + plugin configs); returns ``self``."""
        for name, key in other._keys.items():
            if name not in self._keys:
                self._keys[name] = key
        for g in other._groups:
            if g not in self._groups:
                self._groups.append(g)
        return self

    def copy(self) -> ConfigDef:
        return ConfigDef(self)

    # -- parse / validate -------------------------------------------------------------------
    def _parse_value(self, key: ConfigKey, props: Mapping[str, Any]) -> Any:
        if key.name in props:
            value = parse_type(key.name, props[key.name], key.type)
        elif not key.has_default:
            raise ConfigException(f'Missing required configuration "{key.name}" which has no '
                                  "default value.")
        else:
            value = key.default
        if key.validator is not None:
            key.validator(key.name, value)
        return value

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Parsed values of every defined key (defaults filled in); keys not defined are ignored.

        Raises :class:`ConfigException` naming the first bad key and what it accepts.
        """
        return {key.name: self._parse_value(key, props) for key in self._keys.values()}

    def validate(self, props: Mapping[str, Any]) -> list[ConfigValue]:
        """A :class:`ConfigValue` per defined (non-internal) key, with every error found."""
        parsed: dict[str, Any] = {}
        results: dict[str, ConfigValue] = {}
        for key in self._keys.values():
            cv = ConfigValue(key.name)
            results[key.name] = cv
            try:
                if key.name in props:
                    cv.value = parse_type(key.name, props[key.name], key.type)
                elif key.has_default:
                    cv.value = key.default
                else:
                    cv.add_error_message(f'Missing required configuration "{key.name}" which has '
                                         "no default value.")
                    continue
                parsed[key.name] = cv.value
                if key.validator is not None:
                    key.validator(key.name, cv.value)
            except ConfigException as e:
                cv.add_error_message(str(e))
                if cv.value is None and key.name in props:
                    cv.value = props[key.name]
        for key in self._keys.values():
            if key.recommender is None:
                continue
            cv = results[key.name]
            try:
                cv.recommended_values = list(key.recommender.valid_values(key.name, parsed))
                cv.visible = bool(key.recommender.visible(key.name, parsed))
            except ConfigException as e:
                cv.add_error_message(str(e))
        return [results[k.name] for k in self._keys.values() if not k.internal]

    def to_rst(self) -> str:
        """Kafka-style reST documentation of the keys (for generated docs)."""
        lines: list[str] = []
        for k in self._keys.values():
            if k.internal:
                continue
            lines += [f"``{k.name}``", f"  {k.doc}", "",
                      f"  * Type: {k.type.value.lower()}",
                      f"  * Default: {convert_to_string(k.default, k.type) if k.has_default else ''}",
                      f"  * Valid Values: {k.validator if k.validator is not None else ''}",
                      f"  * Importance: {k.importance.value.lower()}", ""]
        return "\n".join(lines)


class AbstractConfig:
    """Parsed configuration with typed getters (Kafka's ``AbstractConfig``)."""

    def __init__(self, definition: ConfigDef, props: Mapping[str, Any]) -> None:
        self.definition = definition
        self._originals: dict[str, Any] = dict(props)
        self._values = definition.parse(props)

    def get(self, key: str) -> Any:
        if key not in self._values:
            raise ConfigException(f"Unknown configuration '{key}'")
        return self._values[key]

    def _typed(self, key: str, t: ConfigType) -> Any:
        defined = self.definition.config_keys.get(key)
        if defined is not None and defined.type is not t:
            raise ConfigException(f"Configuration '{key}' is of type {defined.type.value}, not {t.value}")
        return self.get(key)

    def get_boolean(self, key: str) -> bool | None:
        return self._typed(key, ConfigType.BOOLEAN)

    def get_int(self, key: str) -> int | None:
        return self._typed(key, ConfigType.INT)

    def get_short(self, key: str) -> int | None:
        return self._typed(key, ConfigType.SHORT)

    def get_long(self, key: str) -> int | None:
        return self._typed(key, ConfigType.LONG)

    def get_double(self, key: str) -> float | None:
        return self._typed(key, ConfigType.DOUBLE)

    def get_string(self, key: str) -> str | None:
        return self._typed(key, ConfigType.STRING)

    def get_list(self, key: str) -> list[Any] | None:
        return self._typed(key, ConfigType.LIST)

    def get_class(self, key: str) -> str | type | None:
        return self._typed(key, ConfigType.CLASS)

    def get_password(self, key: str) -> Password | None:
        return self._typed(key, ConfigType.PASSWORD)

    def values(self) -> dict[str, Any]:
        return dict(self._values)

    def originals(self) -> dict[str, Any]:
        return dict(self._originals)

    def originals_strings(self) -> dict[str, str]:
        return {k: str(v) for k, v in self._originals.items()}

    def originals_with_prefix(self, prefix: str, strip: bool = True) -> dict[str, Any]:
        return {(k[len(prefix):] if strip else k): v for k, v in self._originals.items()
                if k.startswith(prefix)}

    def unused(self) -> set[str]:
        return set(self._originals) - set(self._values)


# ---------------------------------------------------------------------------------------------
# Kafka Connect's ConfigInfos JSON
# ---------------------------------------------------------------------------------------------

def config_key_info(key: ConfigKey) -> dict[str, Any]:
    """Kafka Connect's ``ConfigKeyInfo`` JSON of one key."""
    return {
        "name": key.name,
        "type": key.type.value,
        "required": not key.has_default,
        "default_value": convert_to_string(key.default, key.type) if key.has_default else None,
        "importance": key.importance.value,
        "documentation": key.doc,
        "group": key.group,
        "width": key.width.value,
        "display_name": key.display_name,
        "dependents": list(key.dependents),
        "order": key.order,
    }


def config_value_info(value: ConfigValue, type_: ConfigType | None) -> dict[str, Any]:
    """Kafka Connect's ``ConfigValueInfo`` JSON of one validated value."""
    return {
        "name": value.name,
        "value": convert_to_string(value.value, type_),
        "recommended_values": [convert_to_string(v, type_) for v in value.recommended_values],
        "errors": list(value.errors),
        "visible": value.visible,
    }


def config_infos(connector_class_name: str, config_def: ConfigDef,
                 values: Iterable[ConfigValue]) -> dict[str, Any]:
    """Kafka Connect's ``ConfigInfos`` JSON: ``{"name", "error_count", "groups", "configs":
    [{"definition": {...}, "value": {...}}]}`` — definitions in ``config_def`` order, then
    values for keys the definition lacks (``"definition": null``)."""
    by_name: dict[str, ConfigValue] = {}
    for v in values:
        by_name[v.name] = v
    configs: list[dict[str, Any]] = []
    error_count = 0
    for key in config_def.config_keys.values():
        if key.internal:
            continue
        cv = by_name.pop(key.name, None)
        if cv is not None:
            error_count += len(cv.errors)
        configs.append({"definition": config_key_info(key),
                        "value": config_value_info(cv, key.type) if cv is not None else None})
    for cv in by_name.values():
        error_count += len(cv.errors)
        configs.append({"definition": None, "value": config_value_info(cv, None)})
    return {"name": connector_class_name, "error_count": error_count,
            "groups": config_def.groups(), "configs": configs}


__all__ = [
    "NO_DEFAULT",
    "AbstractConfig",
    "CaseInsensitiveValidString",
    "CompositeValidator",
    "Config",
    "ConfigDef",
    "ConfigException",
    "ConfigKey",
    "ConfigType",
    "ConfigValue",
    "Importance",
    "LambdaValidator",
    "NonEmptyString",
    "NonNullValidator",
    "Password",
    "Range",
    "Recommender",
    "ValidList",
    "ValidString",
    "Validator",
    "Width",
    "config_infos",
    "config_key_info",
    "config_value_info",
    "convert_to_string",
    "parse_type",
]
