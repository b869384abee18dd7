"""Kafka's rules for dynamic broker configs, client-metrics subscriptions and config values.

The key tables are generated from Kafka's own ConfigDefs (:mod:`strom.core.kafka_config_defs`);
this module applies them as Kafka 4.3.1 does:

* :func:`parse_value` is ``ConfigDef.parseType`` plus the key's validator, raising
  :class:`ConfigValueError` with Kafka's words ("Invalid value abc for configuration X: Not a
  number of type INT").
* :func:`validate_dynamic_broker_configs` is ``DynamicBrokerConfig.validateConfigs`` and the
  value checks the broker makes before it forwards a broker-config change to the controller
  (``ConfigAdminManager``): static-only keys are refused ("Cannot update these configs
  dynamically: [log.dirs]"), security keys need a listener prefix, per-broker keys need a broker
  id, values must parse. Keys Kafka does not know are accepted (and never shown), as in Kafka.
* :func:`describe_broker` lists a broker's configs as ``ConfigHelper.createBrokerConfigEntry``
  does: every non-internal key of Kafka's broker ConfigDef plus strom's own keys and any other
  key set in the static configuration, with synonyms (dynamic per-broker, dynamic cluster
  default, static, default) and read-only flags from Kafka's dynamic-update lists.
* :func:`validate_client_metrics` is ``ClientMetricsConfigs.validate`` (KIP-714).

Honesty about what strom does: a key strom defines in :class:`~strom.core.config.BrokerConfig`
is read by the broker; the topic-config synonyms (``log.retention.ms`` ...) are applied
dynamically; every other Kafka key is accepted, stored and reported with Kafka's default, and
its documentation says that strom does not act on it (:data:`NOT_APPLIED_NOTE`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, get_args

from strom.core.config import TOPIC_CONFIG_DEFS, BrokerConfig, format_config_value
from strom.core.errors import InvalidConfigurationError, InvalidRequestError
from strom.core.kafka_config_defs import (
    ALL_DYNAMIC_CONFIGS,
    BROKER_CONFIG_KEYS,
    CLIENT_METRICS_CONFIG_KEYS,
    DYNAMIC_BROKER_NAMES,
    DYNAMIC_SECURITY_CONFIGS,
    KafkaConfigKey,
)

log = logging.getLogger(__name__)

# Kafka's ConfigSource codes (DescribeConfigs)
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, DYNAMIC_BROKER_LOGGER_CONFIG = 4, 5, 6
CLIENT_METRICS_CONFIG, GROUP_CONFIG = 7, 8
# DescribeConfigsResponse.ConfigType ids
CONFIG_TYPE_IDS = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7,
                   "CLASS": 8, "PASSWORD": 9}

KAFKA_BROKER_KEYS: dict[str, KafkaConfigKey] = {k.name: k for k in BROKER_CONFIG_KEYS}
CLIENT_METRICS_KEYS: dict[str, KafkaConfigKey] = {k.name: k for k in CLIENT_METRICS_CONFIG_KEYS}
# KafkaConfig's names that DynamicConfig.Broker does not know (DynamicConfig.Broker.nonDynamicProps)
NON_DYNAMIC_CONFIGS = frozenset(KAFKA_BROKER_KEYS) - DYNAMIC_BROKER_NAMES
PER_BROKER_CONFIGS = frozenset(k.name for k in BROKER_CONFIG_KEYS if k.mode == "per-broker")
_LISTENER_PREFIX = re.compile(r"^listener\.name\.[^.]+\.(.+)$")

# Dynamic broker keys strom applies: the broker defaults of topic configs (LogConfig.build).
APPLIED_DYNAMIC_KEYS = frozenset(d.synonym for d in TOPIC_CONFIG_DEFS if d.synonym)
NOT_APPLIED_NOTE = " (strom accepts and reports this key; it does not act on it.)"


class ConfigValueError(ValueError):
    """A value ConfigDef would refuse; the message is Kafka's."""


# -- values ----------------------------------------------------------------------------------


def java_double(value: float) -> str:
    """Java's ``Double.toString``: Kafka's string form of a DOUBLE config value."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if ("." in text or "e" in text) else text + ".0"
    mantissa, exponent = f"{value!r}".lower().split("e") if "e" in repr(value) else (repr(value), "0")
    digits = float(mantissa)
    exp = int(exponent)
    while abs(digits) >= 10:
        digits /= 10
        exp += 1
    while abs(digits) < 1:
        digits *= 10
        exp -= 1
    text = repr(digits)
    if "." not in text:
        text += ".0"
    return f"{text}E{exp}"


def _range_check(name: str, raw: str, number: float, validator: str) -> None:
    m = re.fullmatch(r"\[(-?[\d.]+),\.\.\.(?:,(-?[\d.]+))?\]", validator)
    if m is None:
        return
    low, high = float(m.group(1)), m.group(2)
    if number < low:
        raise ConfigValueError(f"Invalid value {raw} for configuration {name}: Value must be at least {m.group(1)}")
    if high is not None and number > float(high):
        raise ConfigValueError(f"Invalid value {raw} for configuration {name}: Value must be no more than {high}")


def parse_value(key: KafkaConfigKey, raw: str) -> Any:
    """``ConfigDef.parseType`` and the key's validator: the parsed value, or ConfigValueError."""
    name, text = key.name, raw.strip()
    value: Any
    if key.type == "BOOLEAN":
        if text.lower() not in ("true", "false"):
            raise ConfigValueError(f"Invalid value {raw} for configuration {name}: "
                                   "Expected value to be either true or false")
        value = text.lower() == "true"
    elif key.type in ("INT", "SHORT", "LONG"):
        bits = {"INT": 31, "SHORT": 15, "LONG": 63}[key.type]
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not -(2 ** bits) <= value < 2 ** bits:
            raise ConfigValueError(f"Invalid value {raw} for configuration {name}: Not a number of type {key.type}")
    elif key.type == "DOUBLE":
        try:
            value = float(text)
        except ValueError:
            raise ConfigValueError(f"Invalid value {raw} for configuration {name}: "
                                   "Not a number of type DOUBLE") from None
    elif key.type == "LIST":
        value = [p.strip() for p in text.split(",")] if text else []
    else:
        value = text if key.type != "PASSWORD" else raw
    validator = key.validator or ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        _range_check(name, raw, value, validator)
    elif validator.startswith("[") and not validator.startswith("[...") and ",..." not in validator:
        choices = [c.strip() for c in validator.strip("[]").split(",") if c.strip()]
        items = value if isinstance(value, list) else [value]
        for item in items:
            if item and choices and item not in choices:
                raise ConfigValueError(f"Invalid value {item} for configuration {name}: "
                                       f"String must be one of: {', '.join(choices)}")
    elif validator.startswith("(case insensitive) ["):
        choices = [c.strip() for c in validator.split("[", 1)[1].strip("]").split(",")]
        if str(value).upper() not in [c.upper() for c in choices]:
            raise ConfigValueError(f"Invalid value {raw} for configuration {name}: "
                                   f"String must be one of (case insensitive): {', '.join(choices)}")
    return value


def kafka_string(key: KafkaConfigKey | None, value: Any) -> str | None:
    """``ConfigDef.convertToString`` of a parsed value."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def normalized(key: KafkaConfigKey | None, raw: str) -> str | None:
    """A stored string as Kafka shows the parsed value (``1000000`` of a DOUBLE is ``1000000.0``)."""
    if key is None:
        return raw
    try:
        return kafka_string(key, parse_value(key, raw))
    except ConfigValueError:
        return raw


# -- Java's HashSet order, for Kafka's "[a, b]" messages --------------------------------------


def _java_hash(s: str) -> int:
    h = 0
    for ch in s.encode("utf-16-be").decode("utf-16-be"):
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h


def java_set_text(names: Iterable[str]) -> str:
    """``HashSet.toString()`` of ``names``: Kafka's error messages list keys in that order."""
    items = list(dict.fromkeys(names))
    capacity = 16
    while len(items) > capacity * 0.75:
        capacity *= 2

    def bucket(s: str) -> int:
        h = _java_hash(s)
        return (h ^ (h >> 16)) & (capacity - 1)

    return "[" + ", ".join(sorted(items, key=bucket)) + "]"


# -- dynamic broker configs -------------------------------------------------------------------


def _base_name(name: str) -> str:
    m = _LISTENER_PREFIX.match(name)
    return m.group(1) if m else name


def validate_dynamic_broker_configs(props: Mapping[str, str], per_broker: bool) -> None:
    """Kafka's checks of a broker resource's new dynamic configs (the whole resulting set);
    raises InvalidRequestError with Kafka's message."""
    non_dynamic = [k for k in props if k in NON_DYNAMIC_CONFIGS]
    if non_dynamic:
        raise InvalidRequestError(f"Cannot update these configs dynamically: {java_set_text(non_dynamic)}")
    insecure = [k for k in props if k in DYNAMIC_SECURITY_CONFIGS]
    if insecure:
        raise InvalidRequestError("These security configs can be dynamically updated only per-listener using "
                                  f"the listener prefix: {java_set_text(insecure)}")
    for name, raw in props.items():
        key = KAFKA_BROKER_KEYS.get(_base_name(name))
        if key is not None and raw is not None:
            try:
                parse_value(key, raw)
            except ConfigValueError as e:
                raise InvalidRequestError(str(e).replace(f"configuration {key.name}:", f"configuration {name}:")) \
                    from None
    if not per_broker:
        per = [k for k in props if k in PER_BROKER_CONFIGS or
               (_base_name(k) != k and _base_name(k) in DYNAMIC_SECURITY_CONFIGS)]
        if per:
            raise InvalidRequestError("Cannot update these configs at default cluster level, broker id must be "
                                      f"specified: {java_set_text(per)}")
    for name in props:
        if name in KAFKA_BROKER_KEYS and name not in APPLIED_DYNAMIC_KEYS:
            log.debug("dynamic broker config %s is stored and reported; strom does not act on it", name)


# -- DescribeConfigs of a broker --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One DescribeConfigs entry, before it becomes kio's message."""

    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    config_type: int
    synonyms: tuple[tuple[str, str | None, int], ...]
    doc: str | None


_PY_TYPES = {bool: "BOOLEAN", int: "INT", float: "DOUBLE", str: "STRING"}


def _strom_key_type(annotation: Any) -> str:
    for t in (annotation, *get_args(annotation)):
        if t in _PY_TYPES:
            return _PY_TYPES[t]
    return "STRING"


def strom_static_values(config: BrokerConfig) -> dict[str, str]:
    """Keys set explicitly in the broker's static configuration, as strings. ``broker.id``
    follows ``node.id`` as Kafka's ``populateSynonyms`` makes it."""
    out = {name: value for name, value, is_default in config.describe() if not is_default and value is not None}
    if "node.id" in out and "broker.id" not in out:
        out["broker.id"] = out["node.id"]
    return out


def strom_defaults(config: BrokerConfig) -> dict[str, tuple[str | None, str, str | None]]:
    """Every broker key with (default as Kafka writes it, type, documentation): Kafka's table,
    with strom's own default where strom reads the key with a different one, plus strom's keys."""
    out: dict[str, tuple[str | None, str, str | None]] = {}
    fields = {f.alias or n: f for n, f in type(config).model_fields.items()}
    for key in BROKER_CONFIG_KEYS:
        field = fields.get(key.name)
        doc = key.doc if field is not None else key.doc + NOT_APPLIED_NOTE
        default = key.default
        # strom's "" for a class or plugin name means "none", Kafka's null default.
        if field is not None and field.default not in (None, "") and not callable(field.default):
            default = format_config_value(field.default)
            if isinstance(field.default, float):
                default = java_double(field.default)
        out[key.name] = (default, key.type, doc)
    for alias, field in fields.items():
        if alias not in out:
            default = None if field.default is None else format_config_value(field.default)
            out[alias] = (default, _strom_key_type(field.annotation), field.description)
    return out


def describe_broker(config: BrokerConfig, per_broker: Mapping[str, str], cluster_default: Mapping[str, str],
                    *, per_broker_resource: bool) -> list[ConfigEntry]:
    """A broker resource's configs as Kafka's ConfigHelper lists them.

    ``per_broker_resource``: the resource is this broker's id (every config); otherwise it is the
    cluster default resource ("") and only the cluster-wide dynamic configs are listed."""
    static = strom_static_values(config)
    defaults = strom_defaults(config)
    # A DEFAULT_CONFIG synonym only where Kafka has a default (Kafka lists none for node.id,
    # log.dirs, process.roles ...); strom's own default still shows as the value there.
    static_defaults = {name: d for name, (d, _, _) in defaults.items()
                       if d is not None and (name not in KAFKA_BROKER_KEYS or KAFKA_BROKER_KEYS[name].default is not None)}
    if per_broker_resource:
        names = [k.name for k in BROKER_CONFIG_KEYS if not k.internal]
        names += [n for n in defaults if n not in KAFKA_BROKER_KEYS]
        names += [n for n in static if n not in names]
    else:
        names = [n for n in cluster_default if n in KAFKA_BROKER_KEYS and n in ALL_DYNAMIC_CONFIGS]
    out = []
    for name in names:
        key = KAFKA_BROKER_KEYS.get(name)
        type_name = key.type if key is not None else defaults[name][1] if name in defaults else None
        sensitive = type_name is None or type_name == "PASSWORD"
        chain = list(key.synonyms) if key is not None else [name]
        synonyms: list[tuple[str, str | None, int]] = []
        layers = ((per_broker, DYNAMIC_BROKER_CONFIG), (cluster_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
                  (static, STATIC_BROKER_CONFIG), (static_defaults, DEFAULT_CONFIG))
        for layer, source in layers if per_broker_resource else layers[1:2]:
            synonyms += [(syn, None if sensitive else layer[syn], source) for syn in chain if syn in layer]
        # Kafka drops the synonyms before the key's own name (listener overrides of a base key).
        while synonyms and synonyms[0][0] != name:
            synonyms.pop(0)
        if synonyms:
            source, own = synonyms[0][2], synonyms[0][1]
            # The broker's own resource shows the parsed value (1000000 of a DOUBLE is 1000000.0);
            # the cluster default resource shows the stored string, as Kafka does.
            value = normalized(key, own) if own is not None and per_broker_resource else own
        else:
            source = DEFAULT_CONFIG
            value = defaults.get(name, (None, "", None))[0]
        if sensitive:
            value = None
        doc = defaults[name][2] if name in defaults else None
        out.append(ConfigEntry(name, value, source, name not in ALL_DYNAMIC_CONFIGS, sensitive,
                               CONFIG_TYPE_IDS.get(type_name or "", 0), tuple(synonyms), doc))
    return out


# -- client metrics (KIP-714) -----------------------------------------------------------------

CLIENT_MATCH_SELECTORS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
                          "client_source_address", "client_source_port")
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000


def parse_match(patterns: Iterable[str]) -> dict[str, re.Pattern[str]]:
    """``ClientMetricsConfigs.parseMatchingPatterns``: ``selector=regex`` items."""
    out: dict[str, re.Pattern[str]] = {}
    for item in patterns:
        selector, sep, regex = item.partition("=")
        if not sep or selector.strip() not in CLIENT_MATCH_SELECTORS or not regex.strip():
            raise InvalidConfigurationError(f"Illegal client matching pattern: {item}")
        try:
            out[selector.strip()] = re.compile(regex.strip())
        except re.error:
            raise InvalidConfigurationError(f"Illegal client matching pattern: {item}") from None
    return out


def validate_client_metrics(name: str, props: Mapping[str, str]) -> None:
    """``ClientMetricsConfigs.validate``: known keys, interval 100 ms .. 1 h, well-formed match."""
    if not name:
        raise InvalidRequestError("Subscription name can't be empty")
    for key in props:
        if key not in CLIENT_METRICS_KEYS:
            raise InvalidRequestError(f"Unknown client metrics configuration: {key}")
    if "interval.ms" in props:
        raw = props["interval.ms"]
        try:
            interval = int(raw.strip())
        except ValueError:
            raise InvalidConfigurationError(f"Invalid value {raw} for configuration interval.ms: "
                                            "Not a number of type INT") from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise InvalidRequestError(f"Invalid value {raw} for interval.ms, interval must be between "
                                      f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)")
    if "match" in props:
        parse_match(p.strip() for p in props["match"].split(",") if p.strip())
