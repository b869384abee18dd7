"""KIP-848 group configs: the GROUP config resource (type 32), as Kafka 4.3.1's GroupConfig.

A group's overrides are ConfigRecords of resource type 32 in the metadata log. The keys, types
and defaults are Kafka's (``GroupConfig.CONFIG_DEF``, generated into
:mod:`strom.core.kafka_config_defs`); each key defaults from its broker synonym
(``consumer.session.timeout.ms`` <- ``group.consumer.session.timeout.ms``).

* :func:`validate_group_configs` is ``GroupConfig.validate``: known names, values that parse,
  then the bounds of the broker's ``group.consumer.min/max.*`` (and share/streams) configs, with
  Kafka's messages (INVALID_CONFIG).
* :func:`effective_group_config` gives every key's value for one group (override, else the
  broker's value, else Kafka's default); the group coordinator reads
  ``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms`` from it for KIP-848
  consumer groups; share groups read ``share.session.timeout.ms`` and
  ``share.heartbeat.interval.ms`` (the group coordinator) and the other ``share.*`` keys (the
  share-partition leaders). The streams. keys are stored, validated and described; strom has no
  streams groups, so nothing reads them yet.
* :func:`describe_group` lists them as ``ConfigHelper.createGroupConfigEntry`` does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from strom.core.config import BrokerConfig, format_config_value
from strom.core.dynamic_config import (
    CONFIG_TYPE_IDS,
    DEFAULT_CONFIG,
    GROUP_CONFIG,
    KAFKA_BROKER_KEYS,
    STATIC_BROKER_CONFIG,
    ConfigEntry,
    ConfigValueError,
    kafka_string,
    parse_value,
    strom_static_values,
)
from strom.core.errors import InvalidConfigurationError
from strom.core.kafka_config_defs import GROUP_CONFIG_KEYS, KafkaConfigKey

GROUP_RESOURCE = 32
GROUP_KEYS: dict[str, KafkaConfigKey] = {k.name: k for k in GROUP_CONFIG_KEYS}

# (group key, broker min key, broker max key), in GroupConfig.validateValues' order; None: no
# lower bound. The assignment intervals are checked only when the group sets them.
_BOUNDS: tuple[tuple[str, str | None, str], ...] = (
    ("consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms",
     "group.consumer.max.heartbeat.interval.ms"),
    ("consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    ("consumer.assignment.interval.ms", "group.consumer.min.assignment.interval.ms",
     "group.consumer.max.assignment.interval.ms"),
    ("share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    ("share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms",
     "group.share.max.record.lock.duration.ms"),
    ("share.delivery.count.limit", "group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
    ("share.partition.max.record.locks", "group.share.min.partition.max.record.locks",
     "group.share.max.partition.max.record.locks"),
    ("share.assignment.interval.ms", "group.share.min.assignment.interval.ms",
     "group.share.max.assignment.interval.ms"),
    ("streams.heartbeat.interval.ms", "group.streams.min.heartbeat.interval.ms",
     "group.streams.max.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
    ("streams.num.standby.replicas", None, "group.streams.max.standby.replicas"),
    ("streams.assignment.interval.ms", "group.streams.min.assignment.interval.ms",
     "group.streams.max.assignment.interval.ms"),
)
_ONLY_IF_SET = frozenset({"consumer.assignment.interval.ms", "share.assignment.interval.ms",
                          "streams.assignment.interval.ms"})
_SESSION_OVER_HEARTBEAT = ("consumer", "share", "streams")
_DURATION = re.compile(r"^P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?$", re.IGNORECASE)


def broker_value(config: BrokerConfig, name: str) -> str | None:
    """A broker config's static value as a string: strom's field or an extra key, else Kafka's
    default."""
    static = strom_static_values(config)
    if name in static:
        return static[name]
    for field_name, field in type(config).model_fields.items():
        if field.alias == name:
            value = getattr(config, field_name)
            return None if value is None else format_config_value(value)
    key = KAFKA_BROKER_KEYS.get(name)
    return None if key is None else key.default


def _parse(key: KafkaConfigKey, raw: str) -> object:
    if key.name == "share.auto.offset.reset":
        text = raw.strip()
        ok = text.lower() in ("earliest", "latest") or (
            text.lower().startswith("by_duration:") and bool(_DURATION.match(text[len("by_duration:"):])))
        if not ok:
            raise ConfigValueError(
                f"Invalid value {raw} for configuration share.auto.offset.reset: Invalid value `{raw}` for "
                "configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the "
                "format 'by_duration:<PnDTnHnMn.nS>'.")
        return text
    return parse_value(key, raw)


def effective_group_config(config: BrokerConfig, overrides: Mapping[str, str]) -> dict[str, object]:
    """Every group key's parsed value for one group: its override, else the broker's synonym."""
    out: dict[str, object] = {}
    for key in GROUP_CONFIG_KEYS:
        raw = overrides.get(key.name)
        if raw is None:
            raw = broker_value(config, key.broker_synonym) if key.broker_synonym else key.default
        try:
            out[key.name] = None if raw is None else _parse(key, raw)
        except ConfigValueError:
            out[key.name] = None if key.default is None else _parse(key, key.default)
    return out


def validate_group_configs(config: BrokerConfig, props: Mapping[str, str]) -> None:
    """``GroupConfig.validate`` of a group's new overrides; raises InvalidConfigurationError."""
    for name in props:
        if name not in GROUP_KEYS:
            raise InvalidConfigurationError(f"Unknown group config name: {name}")
    parsed: dict[str, object] = {}
    for name, raw in props.items():
        try:
            parsed[name] = _parse(GROUP_KEYS[name], raw)
        except ConfigValueError as e:
            raise InvalidConfigurationError(str(e)) from None
    values = {**effective_group_config(config, {}), **parsed}
    for name, low_key, high_key in _BOUNDS:
        if name in _ONLY_IF_SET and name not in props:
            continue
        value = values.get(name)
        if not isinstance(value, int):
            continue
        low = broker_value(config, low_key) if low_key else None
        high = broker_value(config, high_key)
        if low is not None and value < int(low):
            raise InvalidConfigurationError(f"{name} must be greater than or equal to {low_key}")
        if high is not None and value > int(high):
            raise InvalidConfigurationError(f"{name} must be less than or equal to {high_key}")
    for kind in _SESSION_OVER_HEARTBEAT:
        session, heartbeat = values.get(f"{kind}.session.timeout.ms"), values.get(f"{kind}.heartbeat.interval.ms")
        if isinstance(session, int) and isinstance(heartbeat, int) and session <= heartbeat:
            raise InvalidConfigurationError(f"{kind}.session.timeout.ms must be greater than "
                                            f"{kind}.heartbeat.interval.ms")


def group_timeouts(config: BrokerConfig, overrides: Mapping[str, str]) -> tuple[int, int]:
    """(session timeout, heartbeat interval) of a KIP-848 consumer group: the group's
    ``consumer.session.timeout.ms`` / ``consumer.heartbeat.interval.ms`` when set, else the
    broker's ``group.consumer.*`` values."""
    session = config.group_consumer_session_timeout_ms
    heartbeat = config.group_consumer_heartbeat_interval_ms
    for name, raw in overrides.items():
        try:
            if name == "consumer.session.timeout.ms":
                session = int(raw)
            elif name == "consumer.heartbeat.interval.ms":
                heartbeat = int(raw)
        except ValueError:
            continue  # validated before it was committed; an old record stays harmless
    return session, heartbeat


def describe_group(config: BrokerConfig, overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """A group's configs as Kafka lists them: the override (GROUP_CONFIG) first, then the
    broker synonym with its own source (static or default)."""
    static = strom_static_values(config)
    values = effective_group_config(config, overrides)
    out = []
    for key in GROUP_CONFIG_KEYS:
        synonyms: list[tuple[str, str | None, int]] = []
        value = kafka_string(key, values[key.name])
        if key.name in overrides:
            synonyms.append((key.name, value, GROUP_CONFIG))
        base = key.broker_synonym or key.name
        if key.broker_synonym and base in static:
            synonyms.append((base, static[base], STATIC_BROKER_CONFIG))
        base_default = broker_value(config, base) if key.broker_synonym else key.default
        if key.broker_synonym and base in static:
            base_default = KAFKA_BROKER_KEYS[base].default if base in KAFKA_BROKER_KEYS else None
        if base_default is not None:
            synonyms.append((base, base_default, DEFAULT_CONFIG))
        source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
        out.append(ConfigEntry(key.name, value, source, False, False, CONFIG_TYPE_IDS.get(key.type, 0),
                               tuple(synonyms), key.doc))
    return out
