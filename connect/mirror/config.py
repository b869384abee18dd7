"""MirrorMaker 2's configuration, read as Kafka reads it.

- :class:`MirrorSourceConfig`, :class:`MirrorCheckpointConfig`, :class:`MirrorHeartbeatConfig`
  (Kafka's ``Mirror*Config``): one connector's keys with Kafka's names and defaults, plus the
  client configurations each task derives from ``source.cluster.*`` / ``target.cluster.*`` and
  the ``producer.`` / ``consumer.`` / ``admin.`` overrides (Kafka's ``sourceConsumerConfig`` &c.).
- :class:`MirrorMakerConfig` (Kafka's): a whole ``mm2.properties`` — ``clusters``,
  ``<alias>.*`` cluster properties, ``<src>-><tgt>.*`` flow properties — turned into each
  flow's connector configurations (``connector_base_config``) and each target's worker
  configuration (``worker_config``), exactly as Kafka's ``MirrorMakerConfig`` does.

A key nobody reads is a warning naming it (logger ``strom.connect.mirror.config``); a value a
connector cannot parse is a :class:`~strom.connect.exceptions.ConfigException` naming the key.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strom.client_security import ClientSecurityError, to_librdkafka
from strom.config_hints import closest_key, suggestion_suffix
from strom.connect.api.config import ConfigDef, ConfigType, Importance, Range, ValidString
from strom.connect.exceptions import ConfigException
from strom.connect.mirror.policy import ReplicationPolicy, replication_policy

log = logging.getLogger(__name__)

# -- key names (Kafka's constants) ------------------------------------------------------------
ENABLED = "enabled"
SOURCE_CLUSTER_ALIAS = "source.cluster.alias"
SOURCE_CLUSTER_ALIAS_DEFAULT = "source"
TARGET_CLUSTER_ALIAS = "target.cluster.alias"
TARGET_CLUSTER_ALIAS_DEFAULT = "target"
REPLICATION_POLICY_CLASS = "replication.policy.class"
REPLICATION_POLICY_CLASS_DEFAULT = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
REPLICATION_POLICY_SEPARATOR = "replication.policy.separator"
INTERNAL_TOPIC_SEPARATOR_ENABLED = "replication.policy.internal.topic.separator.enabled"
ADMIN_TASK_TIMEOUT_MILLIS = "admin.timeout.ms"
FORWARDING_ADMIN_CLASS = "forwarding.admin.class"
TOPIC_FILTER_CLASS = "topic.filter.class"
GROUP_FILTER_CLASS = "group.filter.class"
CONFIG_PROPERTY_FILTER_CLASS = "config.property.filter.class"
OFFSET_SYNCS_TOPIC_LOCATION = "offset-syncs.topic.location"
EMIT_OFFSET_SYNCS_ENABLED = "emit.offset-syncs.enabled"
TASK_INDEX = "task.index"
TASK_TOPIC_PARTITIONS = "task.assigned.partitions"
TASK_CONSUMER_GROUPS = "task.assigned.groups"

TOPICS = "topics"
TOPICS_DEFAULT = ".*"
TOPICS_EXCLUDE = "topics.exclude"
TOPICS_EXCLUDE_ALIAS = "topics.blacklist"
TOPICS_EXCLUDE_DEFAULT = r".*[\-\.]internal, .*\.replica, __.*"
GROUPS = "groups"
GROUPS_DEFAULT = ".*"
GROUPS_EXCLUDE = "groups.exclude"
GROUPS_EXCLUDE_ALIAS = "groups.blacklist"
GROUPS_EXCLUDE_DEFAULT = "console-consumer-.*, connect-.*, __.*"
CONFIG_PROPERTIES_EXCLUDE = "config.properties.exclude"
CONFIG_PROPERTIES_EXCLUDE_ALIAS = "config.properties.blacklist"
CONFIG_PROPERTIES_EXCLUDE_DEFAULT = (r"follower\.replication\.throttled\.replicas, "
                                     r"leader\.replication\.throttled\.replicas, "
                                     r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, "
                                     r"unclean\.leader\.election\.enable, min\.insync\.replicas")

CONSUMER_POLL_TIMEOUT_MILLIS = "consumer.poll.timeout.ms"
REFRESH_TOPICS_ENABLED = "refresh.topics.enabled"
REFRESH_TOPICS_INTERVAL_SECONDS = "refresh.topics.interval.seconds"
REFRESH_GROUPS_ENABLED = "refresh.groups.enabled"
REFRESH_GROUPS_INTERVAL_SECONDS = "refresh.groups.interval.seconds"
SYNC_TOPIC_CONFIGS_ENABLED = "sync.topic.configs.enabled"
SYNC_TOPIC_CONFIGS_INTERVAL_SECONDS = "sync.topic.configs.interval.seconds"
SYNC_TOPIC_ACLS_ENABLED = "sync.topic.acls.enabled"
SYNC_TOPIC_ACLS_INTERVAL_SECONDS = "sync.topic.acls.interval.seconds"
EMIT_HEARTBEATS_ENABLED = "emit.heartbeats.enabled"
EMIT_HEARTBEATS_INTERVAL_SECONDS = "emit.heartbeats.interval.seconds"
EMIT_CHECKPOINTS_ENABLED = "emit.checkpoints.enabled"
EMIT_CHECKPOINTS_INTERVAL_SECONDS = "emit.checkpoints.interval.seconds"
SYNC_GROUP_OFFSETS_ENABLED = "sync.group.offsets.enabled"
SYNC_GROUP_OFFSETS_INTERVAL_SECONDS = "sync.group.offsets.interval.seconds"
OFFSET_LAG_MAX = "offset.lag.max"
REPLICATION_FACTOR = "replication.factor"
OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR = "offset-syncs.topic.replication.factor"
CHECKPOINTS_TOPIC_REPLICATION_FACTOR = "checkpoints.topic.replication.factor"
HEARTBEATS_TOPIC_REPLICATION_FACTOR = "heartbeats.topic.replication.factor"

SOURCE_CLUSTER_PREFIX = "source.cluster."
TARGET_CLUSTER_PREFIX = "target.cluster."
SOURCE_PREFIX = "source."
TARGET_PREFIX = "target."
CLIENT_PREFIXES = ("producer.", "consumer.", "admin.")

# Kafka's MirrorClientConfig.CLIENT_CONFIG_DEF names: what a cluster's bare properties pass on
# to every client of that cluster.
_CLIENT_KEYS = frozenset({"bootstrap.servers", "security.protocol", "client.dns.lookup"})
_CLIENT_KEY_PREFIXES = ("ssl.", "sasl.")


def is_client_key(key: str) -> bool:
    return key in _CLIENT_KEYS or key.startswith(_CLIENT_KEY_PREFIXES)


_BASE = (ConfigDef()
         .define(ENABLED, ConfigType.BOOLEAN, True, importance=Importance.LOW, doc="Whether to replicate source->target.")
         .define(SOURCE_CLUSTER_ALIAS, ConfigType.STRING, importance=Importance.HIGH, doc="Alias of source cluster")
         .define(TARGET_CLUSTER_ALIAS, ConfigType.STRING, TARGET_CLUSTER_ALIAS_DEFAULT, importance=Importance.HIGH,
                 doc="Alias of target cluster. Used in metrics reporting.")
         .define(ADMIN_TASK_TIMEOUT_MILLIS, ConfigType.LONG, 60000, Range.at_least(1), importance=Importance.LOW,
                 doc="Timeout for administrative tasks, e.g. detecting new topics.")
         .define(REPLICATION_POLICY_CLASS, ConfigType.CLASS, REPLICATION_POLICY_CLASS_DEFAULT,
                 importance=Importance.LOW, doc="Class which defines the remote topic naming convention.")
         .define(REPLICATION_POLICY_SEPARATOR, ConfigType.STRING, ".", importance=Importance.LOW,
                 doc="Separator used in remote topic naming convention.")
         .define(INTERNAL_TOPIC_SEPARATOR_ENABLED, ConfigType.BOOLEAN, True, importance=Importance.LOW,
                 doc="Whether internal topic names use replication.policy.separator.")
         .define(FORWARDING_ADMIN_CLASS, ConfigType.CLASS, "org.apache.kafka.clients.admin.ForwardingAdmin",
                 importance=Importance.LOW, doc="Accepted for compatibility; strom uses its own admin client.")
         .define("metric.reporters", ConfigType.LIST, "", importance=Importance.LOW, doc="Accepted for compatibility.")
         .define("security.protocol", ConfigType.STRING, "PLAINTEXT",
                 ValidString.in_("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), importance=Importance.MEDIUM,
                 doc="Protocol used to communicate with brokers."))

_OFFSET_SYNCS = (ConfigDef()
                 .define(OFFSET_SYNCS_TOPIC_LOCATION, ConfigType.STRING, SOURCE_CLUSTER_ALIAS_DEFAULT,
                         ValidString.in_(SOURCE_CLUSTER_ALIAS_DEFAULT, TARGET_CLUSTER_ALIAS_DEFAULT),
                         importance=Importance.LOW, doc="The location (source/target) of the offset-syncs topic.")
                 .define(EMIT_OFFSET_SYNCS_ENABLED, ConfigType.BOOLEAN, True, importance=Importance.LOW,
                         doc="Whether to store the new offset of the replicated records in offset-syncs topic."))

_TOPIC_FILTER = (ConfigDef()
                 .define(TOPICS, ConfigType.LIST, TOPICS_DEFAULT, importance=Importance.HIGH,
                         doc="Topics to replicate. Supports comma-separated topic names and regexes.")
                 .define(TOPICS_EXCLUDE, ConfigType.LIST, TOPICS_EXCLUDE_DEFAULT, importance=Importance.HIGH,
                         doc="Excluded topics. Supports comma-separated topic names and regexes.")
                 .define(TOPICS_EXCLUDE_ALIAS, ConfigType.LIST, None, importance=Importance.HIGH,
                         doc="Deprecated. Use topics.exclude instead.")
                 .define(TOPIC_FILTER_CLASS, ConfigType.CLASS, "org.apache.kafka.connect.mirror.DefaultTopicFilter",
                         importance=Importance.LOW, doc="TopicFilter to use. Selects topics to replicate."))


def _interval(name: str, default: int, doc: str) -> ConfigDef:
    return ConfigDef().define(name, ConfigType.LONG, default, Range.at_least(-1), importance=Importance.LOW, doc=doc)


def _flag(name: str, default: bool, doc: str) -> ConfigDef:
    return ConfigDef().define(name, ConfigType.BOOLEAN, default, importance=Importance.LOW, doc=doc)


def _rf(name: str, default: int, doc: str) -> ConfigDef:
    # -1: the broker's default.replication.factor (Kafka accepts it since 3.x).
    return ConfigDef().define(name, ConfigType.SHORT, default, Range.at_least(-1), importance=Importance.LOW, doc=doc)


def _def(*parts: ConfigDef) -> ConfigDef:
    out = ConfigDef()
    for p in parts:
        out.merge(p)
    return out


SOURCE_CONFIG_DEF = _def(
    _BASE, _OFFSET_SYNCS, _TOPIC_FILTER,
    ConfigDef()
    .define(CONFIG_PROPERTIES_EXCLUDE, ConfigType.LIST, CONFIG_PROPERTIES_EXCLUDE_DEFAULT, importance=Importance.HIGH,
            doc="Topic config properties that should not be replicated.")
    .define(CONFIG_PROPERTIES_EXCLUDE_ALIAS, ConfigType.LIST, None, importance=Importance.HIGH,
            doc="Deprecated. Use config.properties.exclude instead.")
    .define(CONFIG_PROPERTY_FILTER_CLASS, ConfigType.CLASS,
            "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter", importance=Importance.LOW,
            doc="ConfigPropertyFilter to use. Selects topic config properties to replicate.")
    .define(CONSUMER_POLL_TIMEOUT_MILLIS, ConfigType.LONG, 1000, Range.at_least(0), importance=Importance.LOW,
            doc="Timeout when polling source cluster.")
    .define(OFFSET_LAG_MAX, ConfigType.LONG, 100, Range.at_least(0), importance=Importance.LOW,
            doc="How out-of-sync a remote partition can be before it is resynced."),
    _flag(REFRESH_TOPICS_ENABLED, True, "Whether to periodically check for new topics and partitions."),
    _interval(REFRESH_TOPICS_INTERVAL_SECONDS, 600, "Frequency of topic refresh."),
    _flag(SYNC_TOPIC_CONFIGS_ENABLED, True, "Whether to periodically configure remote topics to match their "
          "corresponding upstream topics."),
    _interval(SYNC_TOPIC_CONFIGS_INTERVAL_SECONDS, 600, "Frequency of topic config sync."),
    _flag(SYNC_TOPIC_ACLS_ENABLED, True, "Whether to periodically configure remote topic ACLs to match their "
          "corresponding upstream topics."),
    _interval(SYNC_TOPIC_ACLS_INTERVAL_SECONDS, 600, "Frequency of topic ACL sync."),
    _rf(REPLICATION_FACTOR, 2, "Replication factor for newly created remote topics."),
    _rf(OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR, 3, "Replication factor for offset-syncs topic."),
)

CHECKPOINT_CONFIG_DEF = _def(
    _BASE, _OFFSET_SYNCS, _TOPIC_FILTER,
    ConfigDef()
    .define(CONSUMER_POLL_TIMEOUT_MILLIS, ConfigType.LONG, 1000, Range.at_least(0), importance=Importance.LOW,
            doc="Timeout when polling source cluster.")
    .define(GROUPS, ConfigType.LIST, GROUPS_DEFAULT, importance=Importance.HIGH,
            doc="Consumer groups to replicate. Supports comma-separated group IDs and regexes.")
    .define(GROUPS_EXCLUDE, ConfigType.LIST, GROUPS_EXCLUDE_DEFAULT, importance=Importance.HIGH,
            doc="Exclude groups. Supports comma-separated group IDs and regexes.")
    .define(GROUPS_EXCLUDE_ALIAS, ConfigType.LIST, None, importance=Importance.HIGH,
            doc="Deprecated. Use groups.exclude instead.")
    .define(GROUP_FILTER_CLASS, ConfigType.CLASS, "org.apache.kafka.connect.mirror.DefaultGroupFilter",
            importance=Importance.LOW, doc="GroupFilter to use. Selects consumer groups to replicate."),
    _flag(REFRESH_GROUPS_ENABLED, True, "Whether to periodically check for new consumer groups."),
    _interval(REFRESH_GROUPS_INTERVAL_SECONDS, 600, "Frequency of group refresh."),
    _flag(EMIT_CHECKPOINTS_ENABLED, True, "Whether to replicate consumer offsets to target cluster."),
    _interval(EMIT_CHECKPOINTS_INTERVAL_SECONDS, 60, "Frequency of checkpoints."),
    _flag(SYNC_GROUP_OFFSETS_ENABLED, False, "Whether to periodically write the translated offsets to "
          "__consumer_offsets topic in target cluster, as long as no active consumers in that group are connected"),
    _interval(SYNC_GROUP_OFFSETS_INTERVAL_SECONDS, 60, "Frequency of consumer group offset sync."),
    _rf(CHECKPOINTS_TOPIC_REPLICATION_FACTOR, 3, "Replication factor for checkpoints topic."),
)

HEARTBEAT_CONFIG_DEF = _def(
    _BASE,
    _flag(EMIT_HEARTBEATS_ENABLED, True, "Whether to emit heartbeats to target cluster."),
    _interval(EMIT_HEARTBEATS_INTERVAL_SECONDS, 1, "Frequency of heartbeats."),
    _rf(HEARTBEATS_TOPIC_REPLICATION_FACTOR, 3, "Replication factor for heartbeats topic."),
)

# Keys the Connect framework reads from any connector config (Kafka's ConnectorConfig and
# SourceConnectorConfig) and prefixes MM2 itself reads: never "unknown".
_FRAMEWORK_KEYS = frozenset({
    "name", "connector.class", "tasks.max", "tasks.max.enforce", "key.converter", "value.converter",
    "header.converter", "transforms", "predicates", "config.action.reload", "exactly.once.support",
    "transaction.boundary", "transaction.boundary.interval.ms", "offsets.storage.topic",
    TASK_INDEX, TASK_TOPIC_PARTITIONS, TASK_CONSUMER_GROUPS,
})
_FRAMEWORK_PREFIXES = ("key.converter.", "value.converter.", "header.converter.", "transforms.", "predicates.",
                       "errors.", "topic.creation.", "producer.override.", "consumer.override.",
                       "admin.override.", SOURCE_CLUSTER_PREFIX, TARGET_CLUSTER_PREFIX, *CLIENT_PREFIXES,
                       *(SOURCE_PREFIX + p for p in CLIENT_PREFIXES), *(TARGET_PREFIX + p for p in CLIENT_PREFIXES),
                       "config.providers", "replication.policy.")
_CONNECTOR_FRAMEWORK_KEYS = frozenset({"tasks.max", "tasks.max.enforce", "key.converter", "value.converter",
                                       "header.converter", "transforms", "predicates", "config.action.reload"})
ALL_CONNECTOR_KEYS = frozenset(SOURCE_CONFIG_DEF.names()) | frozenset(CHECKPOINT_CONFIG_DEF.names()) \
    | frozenset(HEARTBEAT_CONFIG_DEF.names())


def is_connector_key(key: str) -> bool:
    """Whether a key in a MirrorMaker connector's configuration is read by someone."""
    return key in ALL_CONNECTOR_KEYS or key in _FRAMEWORK_KEYS or key.startswith(_FRAMEWORK_PREFIXES) \
        or is_client_key(key)


def compile_pattern_list(patterns: Iterable[str]) -> re.Pattern[str] | None:
    """Kafka's ``MirrorUtils.compilePatternList``: the alternation of the list's regexes (each
    matched against the whole name), or None for an empty list."""
    items = [p for p in patterns if p]
    if not items:
        return None
    try:
        return re.compile("|".join(f"(?:{p})" for p in items))
    except re.error as exc:
        raise ConfigException(f"invalid regular expression in {items!r}: {exc}") from None


def _translate_alias(props: Mapping[str, str], key: str, alias: str) -> dict[str, str]:
    """Kafka's ``ConfigUtils.translateDeprecatedConfigs``: the old name feeds the new one."""
    out = dict(props)
    if alias in out:
        if key in out:
            log.warning("%s is deprecated and ignored because %s is set", alias, key)
        else:
            log.warning("%s is deprecated; use %s", alias, key)
            out[key] = out[alias]
        out.pop(alias, None)
    return out


def _with_prefix(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix) and len(k) > len(prefix)}


class MirrorConnectorConfig:
    """Common part of the three connectors' configs: parsed values, the replication policy and
    the client configs (Kafka's ``MirrorConnectorConfig``)."""

    CONFIG_DEF: ConfigDef = _BASE
    ALIASES: tuple[tuple[str, str], ...] = ()

    def __init__(self, props: Mapping[str, str]) -> None:
        raw = {str(k): str(v) for k, v in props.items()}
        for key, alias in self.ALIASES:
            raw = _translate_alias(raw, key, alias)
        self.originals: dict[str, str] = raw
        self.values: dict[str, Any] = self.CONFIG_DEF.parse(raw)
        policy_props = {k: v for k, v in raw.items() if k.startswith("replication.policy.")}
        policy_props[SOURCE_CLUSTER_ALIAS] = self.source_cluster_alias
        self.replication_policy: ReplicationPolicy = replication_policy(
            str(self.values[REPLICATION_POLICY_CLASS]), policy_props)

    @classmethod
    def unknown_keys(cls, props: Mapping[str, str]) -> list[str]:
        return sorted(k for k in props if not is_connector_key(k))

    def get(self, key: str) -> Any:
        return self.values[key]

    @property
    def connector_name(self) -> str:
        return self.originals.get("name", "")

    @property
    def enabled(self) -> bool:
        return bool(self.values[ENABLED])

    @property
    def source_cluster_alias(self) -> str:
        return str(self.values[SOURCE_CLUSTER_ALIAS])

    @property
    def target_cluster_alias(self) -> str:
        return str(self.values[TARGET_CLUSTER_ALIAS])

    @property
    def admin_timeout_s(self) -> float:
        return int(self.values[ADMIN_TASK_TIMEOUT_MILLIS]) / 1000.0

    def _interval_s(self, enabled_key: str, seconds_key: str) -> float:
        """Seconds between runs, or -1 when disabled (Kafka's negative Duration)."""
        if not self.values[enabled_key]:
            return -1.0
        return float(self.values[seconds_key])

    # -- client configs (Kafka's role-named helpers) --------------------------------------
    def _client(self, cluster_prefix: str, client_prefix: str, side_prefix: str, role: str) -> dict[str, str]:
        props = {k: v for k, v in _with_prefix(self.originals, cluster_prefix).items() if is_client_key(k)}
        # MM2's own keys that start like a client prefix (admin.timeout.ms,
        # consumer.poll.timeout.ms) are not client settings: librdkafka refuses unknown ones.
        own = {k: v for k, v in self.originals.items() if k not in ALL_CONNECTOR_KEYS}
        props.update(_with_prefix(own, client_prefix))
        props.update(_with_prefix(own, side_prefix + client_prefix))
        user = props.get("client.id")
        label = f"{self.source_cluster_alias}->{self.target_cluster_alias}|{self.connector_name}|{role}"
        props["client.id"] = f"{user}|{label}" if user else label
        # Kafka's security keys (A.sasl.jaas.config, A.ssl.truststore.location...) in librdkafka's names
        try:
            translated = to_librdkafka(props)
        except ClientSecurityError as exc:
            raise ConfigException(cluster_prefix + exc.key, "[hidden]", exc.reason) from None
        return {k: property_text(v) for k, v in translated.items()}

    def source_consumer_config(self, role: str) -> dict[str, str]:
        props = self._client(SOURCE_CLUSTER_PREFIX, "consumer.", SOURCE_PREFIX, role)
        props["enable.auto.commit"] = "false"
        props.setdefault("auto.offset.reset", "earliest")
        return props

    def target_consumer_config(self, role: str) -> dict[str, str]:
        props = self._client(TARGET_CLUSTER_PREFIX, "consumer.", TARGET_PREFIX, role)
        props["enable.auto.commit"] = "false"
        props.setdefault("auto.offset.reset", "earliest")
        return props

    def source_producer_config(self, role: str) -> dict[str, str]:
        return self._client(SOURCE_CLUSTER_PREFIX, "producer.", SOURCE_PREFIX, role)

    def target_producer_config(self, role: str) -> dict[str, str]:
        return self._client(TARGET_CLUSTER_PREFIX, "producer.", TARGET_PREFIX, role)

    def source_admin_config(self, role: str) -> dict[str, str]:
        return self._client(SOURCE_CLUSTER_PREFIX, "admin.", SOURCE_PREFIX, role)

    def target_admin_config(self, role: str) -> dict[str, str]:
        return self._client(TARGET_CLUSTER_PREFIX, "admin.", TARGET_PREFIX, role)

    def task_config(self, key: str, values: Iterable[str], task_index: int) -> dict[str, str]:
        props = dict(self.originals)
        props[key] = ",".join(values)
        props[TASK_INDEX] = str(task_index)
        return props


class _OffsetSyncsMixin(MirrorConnectorConfig):
    @property
    def offset_syncs_topic_location(self) -> str:
        return str(self.values[OFFSET_SYNCS_TOPIC_LOCATION])

    @property
    def offset_syncs_on_source(self) -> bool:
        return self.offset_syncs_topic_location == SOURCE_CLUSTER_ALIAS_DEFAULT

    @property
    def offset_syncs_topic(self) -> str:
        """``mm2-offset-syncs.<other cluster>.internal`` (Kafka: named after the cluster the
        topic is *not* on, so two flows into one cluster do not share it)."""
        other = self.target_cluster_alias if self.offset_syncs_on_source else self.source_cluster_alias
        return self.replication_policy.offset_syncs_topic(other)

    @property
    def checkpoints_topic(self) -> str:
        return self.replication_policy.checkpoints_topic(self.source_cluster_alias)

    def offset_syncs_admin_config(self) -> dict[str, str]:
        return self.source_admin_config("offset-syncs-source-admin") if self.offset_syncs_on_source \
            else self.target_admin_config("offset-syncs-target-admin")

    @property
    def topic_filter(self) -> TopicFilter:
        return TopicFilter(self.values[TOPICS], self.values[TOPICS_EXCLUDE])


class MirrorSourceConfig(_OffsetSyncsMixin):
    """Kafka's ``MirrorSourceConfig``."""

    CONFIG_DEF = SOURCE_CONFIG_DEF
    ALIASES = ((TOPICS_EXCLUDE, TOPICS_EXCLUDE_ALIAS), (CONFIG_PROPERTIES_EXCLUDE, CONFIG_PROPERTIES_EXCLUDE_ALIAS))

    @property
    def max_offset_lag(self) -> int:
        return int(self.values[OFFSET_LAG_MAX])

    @property
    def consumer_poll_timeout_s(self) -> float:
        return int(self.values[CONSUMER_POLL_TIMEOUT_MILLIS]) / 1000.0

    @property
    def refresh_topics_interval_s(self) -> float:
        return self._interval_s(REFRESH_TOPICS_ENABLED, REFRESH_TOPICS_INTERVAL_SECONDS)

    @property
    def sync_topic_configs_interval_s(self) -> float:
        return self._interval_s(SYNC_TOPIC_CONFIGS_ENABLED, SYNC_TOPIC_CONFIGS_INTERVAL_SECONDS)

    @property
    def replication_factor(self) -> int:
        return int(self.values[REPLICATION_FACTOR])

    @property
    def offset_syncs_replication_factor(self) -> int:
        return int(self.values[OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR])

    @property
    def emit_offset_syncs(self) -> bool:
        return bool(self.values[EMIT_OFFSET_SYNCS_ENABLED])

    @property
    def config_property_filter(self) -> ConfigPropertyFilter:
        return ConfigPropertyFilter(self.values[CONFIG_PROPERTIES_EXCLUDE])

    def offset_syncs_producer_config(self) -> dict[str, str]:
        return self.source_producer_config("offset-syncs-source-producer") if self.offset_syncs_on_source \
            else self.target_producer_config("offset-syncs-target-producer")


class MirrorCheckpointConfig(_OffsetSyncsMixin):
    """Kafka's ``MirrorCheckpointConfig``."""

    CONFIG_DEF = CHECKPOINT_CONFIG_DEF
    ALIASES = ((TOPICS_EXCLUDE, TOPICS_EXCLUDE_ALIAS), (GROUPS_EXCLUDE, GROUPS_EXCLUDE_ALIAS))

    def __init__(self, props: Mapping[str, str]) -> None:
        super().__init__(props)
        if not self.values[EMIT_CHECKPOINTS_ENABLED] and not self.values[SYNC_GROUP_OFFSETS_ENABLED]:
            raise ConfigException(EMIT_CHECKPOINTS_ENABLED, "false",
                                  f"MirrorCheckpointConnector can't run without both {SYNC_GROUP_OFFSETS_ENABLED}, "
                                  f"{EMIT_CHECKPOINTS_ENABLED} set to false")
        if not self.values[EMIT_OFFSET_SYNCS_ENABLED]:
            raise ConfigException(EMIT_OFFSET_SYNCS_ENABLED, "false",
                                  f"MirrorCheckpointConnector can't run with {EMIT_OFFSET_SYNCS_ENABLED} set to false")

    @property
    def consumer_poll_timeout_s(self) -> float:
        return int(self.values[CONSUMER_POLL_TIMEOUT_MILLIS]) / 1000.0

    @property
    def group_filter(self) -> GroupFilter:
        return GroupFilter(self.values[GROUPS], self.values[GROUPS_EXCLUDE])

    @property
    def refresh_groups_interval_s(self) -> float:
        return self._interval_s(REFRESH_GROUPS_ENABLED, REFRESH_GROUPS_INTERVAL_SECONDS)

    @property
    def emit_checkpoints_interval_s(self) -> float:
        return self._interval_s(EMIT_CHECKPOINTS_ENABLED, EMIT_CHECKPOINTS_INTERVAL_SECONDS)

    @property
    def sync_group_offsets_interval_s(self) -> float:
        return self._interval_s(SYNC_GROUP_OFFSETS_ENABLED, SYNC_GROUP_OFFSETS_INTERVAL_SECONDS)

    @property
    def checkpoints_replication_factor(self) -> int:
        return int(self.values[CHECKPOINTS_TOPIC_REPLICATION_FACTOR])

    def offset_syncs_consumer_config(self) -> dict[str, str]:
        return self.source_consumer_config("offset-syncs-source-consumer") if self.offset_syncs_on_source \
            else self.target_consumer_config("offset-syncs-target-consumer")


class MirrorHeartbeatConfig(MirrorConnectorConfig):
    """Kafka's ``MirrorHeartbeatConfig``."""

    CONFIG_DEF = HEARTBEAT_CONFIG_DEF

    @property
    def heartbeats_topic(self) -> str:
        return self.replication_policy.heartbeats_topic()

    @property
    def emit_heartbeats_interval_s(self) -> float:
        return self._interval_s(EMIT_HEARTBEATS_ENABLED, EMIT_HEARTBEATS_INTERVAL_SECONDS)

    @property
    def heartbeats_replication_factor(self) -> int:
        return int(self.values[HEARTBEATS_TOPIC_REPLICATION_FACTOR])


# -- filters (Kafka's Default*Filter) ----------------------------------------------------------
class TopicFilter:
    """Kafka's ``DefaultTopicFilter``: included and not excluded (whole-name regex matches)."""

    def __init__(self, include: Iterable[str], exclude: Iterable[str]) -> None:
        self.include = compile_pattern_list(include)
        self.exclude = compile_pattern_list(exclude)

    def should_replicate_topic(self, topic: str) -> bool:
        return bool(self.include is not None and self.include.fullmatch(topic)
                    and not (self.exclude is not None and self.exclude.fullmatch(topic)))


class GroupFilter:
    """Kafka's ``DefaultGroupFilter``."""

    def __init__(self, include: Iterable[str], exclude: Iterable[str]) -> None:
        self.include = compile_pattern_list(include)
        self.exclude = compile_pattern_list(exclude)

    def should_replicate_group(self, group: str) -> bool:
        return bool(self.include is not None and self.include.fullmatch(group)
                    and not (self.exclude is not None and self.exclude.fullmatch(group)))


class ConfigPropertyFilter:
    """Kafka's ``DefaultConfigPropertyFilter``: a topic config is synced unless excluded; only
    values set on the topic (not the broker's defaults) are synced."""

    def __init__(self, exclude: Iterable[str]) -> None:
        self.exclude = compile_pattern_list(exclude)

    def should_replicate_config_property(self, prop: str) -> bool:
        return not (self.exclude is not None and self.exclude.fullmatch(prop))


# -- mm2.properties ----------------------------------------------------------------------------
@dataclass(frozen=True, order=True)
class SourceAndTarget:
    """A replication flow ``source->target`` (Kafka's ``SourceAndTarget``)."""

    source: str
    target: str

    def __str__(self) -> str:
        return f"{self.source}->{self.target}"


MIRROR_SOURCE_CONNECTOR = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
MIRROR_CHECKPOINT_CONNECTOR = "org.apache.kafka.connect.mirror.MirrorCheckpointConnector"
MIRROR_HEARTBEAT_CONNECTOR = "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector"
CONNECTOR_CLASSES = (MIRROR_SOURCE_CONNECTOR, MIRROR_CHECKPOINT_CONNECTOR, MIRROR_HEARTBEAT_CONNECTOR)
_CONFIG_CLASS: dict[str, type[MirrorConnectorConfig]] = {
    MIRROR_SOURCE_CONNECTOR: MirrorSourceConfig,
    MIRROR_CHECKPOINT_CONNECTOR: MirrorCheckpointConfig,
    MIRROR_HEARTBEAT_CONNECTOR: MirrorHeartbeatConfig,
}
BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"
# Top-level keys MirrorMakerConfig.workerConfig passes to every driver's worker (by prefix).
_WORKER_PREFIXES = ("offset.storage", "config.storage", "status.storage", "key.converter", "value.converter",
                    "header.converter", "task", "worker", "replication.policy")
_TOP_LEVEL_KEYS = frozenset({"clusters", "dedicated.mode.enable.internal.rest", "listeners", "rest.advertised.host.name",
                             "rest.advertised.port", "rest.advertised.listener", "plugin.path", "group.id",
                             "exactly.once.source.support", "offset.flush.interval.ms", "offset.flush.timeout.ms",
                             "scheduled.rebalance.max.delay.ms", "heartbeat.interval.ms", "session.timeout.ms"})
# Top-level keys Kafka 4.3.1's MirrorMaker reads outside workerConfig: its internal REST server
# is built from the whole file (MirrorRestServer(config.originals())).
_REST_SERVER_KEYS = frozenset({"dedicated.mode.enable.internal.rest", "listeners", "admin.listeners",
                               "rest.advertised.host.name", "rest.advertised.port", "rest.advertised.listener",
                               "access.control.allow.methods", "access.control.allow.origin",
                               "response.http.headers.config", "rest.extension.classes"})


class MirrorMakerConfig:
    """A whole ``mm2.properties`` (Kafka's ``MirrorMakerConfig``)."""

    def __init__(self, props: Mapping[str, str]) -> None:
        self.raw: dict[str, str] = {str(k): str(v) for k, v in props.items()}
        if "clusters" not in self.raw:
            raise ConfigException('Missing required configuration "clusters" which has no default value.')
        self.clusters: list[str] = [c.strip() for c in self.raw["clusters"].split(",") if c.strip()]
        if not self.clusters:
            raise ConfigException("clusters", self.raw["clusters"], "at least one cluster alias")

    @classmethod
    def load(cls, path: str | Path) -> MirrorMakerConfig:
        from strom.core.config import parse_properties

        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ConfigException(f"cannot read {path}: {exc.strerror}") from None
        return cls(parse_properties(text))

    # -- Kafka's accessors --------------------------------------------------------------------
    def _stripped(self, prefix: str) -> dict[str, str]:
        return _with_prefix(self.raw, prefix)

    def _starting(self, prefix: str) -> dict[str, str]:
        return {k: v for k, v in self.raw.items() if k.startswith(prefix)}

    def cluster_pairs(self) -> list[SourceAndTarget]:
        """Every flow that needs a herder: enabled ones, and (by default) the reverse of each
        for heartbeats, unless ``emit.heartbeats.enabled=false`` (Kafka's ``clusterPairs``)."""
        pairs: list[SourceAndTarget] = []
        global_hb = self.raw.get(EMIT_HEARTBEATS_ENABLED, "true").strip().lower() == "true"
        for source in self.clusters:
            for target in self.clusters:
                if source == target:
                    continue
                prefix = f"{source}->{target}."
                enabled = self.raw.get(prefix + ENABLED, "false").strip().lower() == "true"
                hb = global_hb
                if prefix + EMIT_HEARTBEATS_ENABLED in self.raw:
                    hb = self.raw[prefix + EMIT_HEARTBEATS_ENABLED].strip().lower() == "true"
                if enabled or hb:
                    pairs.append(SourceAndTarget(source, target))
        return pairs

    def cluster_props(self, cluster: str) -> dict[str, str]:
        """A cluster's properties: ``<cluster>.*`` stripped, client keys copied to the
        ``producer.``/``consumer.``/``admin.`` prefixes, then top-level client keys as defaults."""
        props = self._stripped(cluster + ".")
        for k, v in list(props.items()):
            if is_client_key(k):
                for p in CLIENT_PREFIXES:
                    props.setdefault(p + k, v)
        for k, v in self.raw.items():
            if is_client_key(k):
                for p in CLIENT_PREFIXES:
                    props.setdefault(p + k, v)
                props.setdefault(k, v)
        return props

    def worker_config(self, flow: SourceAndTarget) -> dict[str, str]:
        """The Connect worker config of the driver for ``flow`` (Kafka's ``workerConfig``):
        the target cluster's properties, the top-level keys of Kafka's worker prefixes (other
        top-level worker keys are dropped: :meth:`ignored_worker_keys`), Kafka's defaults for the
        client id (``A->B``), the internal topics (on the target) and byte-array converters."""
        props = self.cluster_props(flow.target)
        for prefix in _WORKER_PREFIXES:
            props.update(self._starting(prefix))
        props.update(self._starting("config.providers"))
        props.setdefault("client.id", str(flow))
        props.setdefault("group.id", f"{flow.source}-mm2")
        props.setdefault("offset.storage.topic", f"mm2-offsets.{flow.source}.internal")
        props.setdefault("status.storage.topic", f"mm2-status.{flow.source}.internal")
        props.setdefault("config.storage.topic", f"mm2-configs.{flow.source}.internal")
        props.setdefault("key.converter", BYTE_ARRAY_CONVERTER)
        props.setdefault("value.converter", BYTE_ARRAY_CONVERTER)
        props.setdefault("header.converter", BYTE_ARRAY_CONVERTER)
        return props

    def connector_base_config(self, flow: SourceAndTarget, connector_class: str) -> dict[str, str]:
        """One connector's config for ``flow`` (Kafka's ``connectorBaseConfig``)."""
        config_class = _CONFIG_CLASS[connector_class]
        # Kafka's connector ConfigDefs include ConnectorConfig's (tasks.max, converters, errors.*)
        names = set(config_class.CONFIG_DEF.names()) | _CONNECTOR_FRAMEWORK_KEYS
        props = {k: v for k, v in self.raw.items() if k in names or k.startswith("errors.")}
        props.update(self._starting("config.providers"))
        props.update(self._starting("replication.policy"))
        for side, prefix, client_prefix in ((flow.source, SOURCE_CLUSTER_PREFIX, SOURCE_PREFIX),
                                            (flow.target, TARGET_CLUSTER_PREFIX, TARGET_PREFIX)):
            cluster = self.cluster_props(side)
            for k, v in cluster.items():
                if k.startswith(CLIENT_PREFIXES):
                    props[client_prefix + k] = v
                else:
                    props[prefix + k] = v
        simple = connector_class.rsplit(".", 1)[-1]
        props.setdefault("name", simple)
        props.setdefault("connector.class", connector_class)
        props.setdefault(SOURCE_CLUSTER_ALIAS, flow.source)
        props.setdefault(TARGET_CLUSTER_ALIAS, flow.target)
        props.update(self._stripped(f"{flow.source}->{flow.target}."))
        props.setdefault(ENABLED, "false")
        return props

    # -- checks --------------------------------------------------------------------------------
    def ignored_worker_keys(self) -> list[str]:
        """Top-level Connect worker keys Kafka's MirrorMaker does not give its herders.

        Kafka 4.3.1's ``workerConfig`` (read from the connect-mirror-4.3.1 jar) builds each
        herder's worker config from the target cluster's ``<alias>.*`` properties, the top-level
        *client* keys (``clusterProps``) and only the top-level keys starting with offset.storage,
        config.storage, status.storage, key/value/header.converter, task, worker or
        replication.policy (and config.providers). Any other worker key at the top level - e.g.
        ``offset.flush.interval.ms`` - is dropped; it takes effect only as ``<alias>.<key>``.
        """
        from strom.connect.runtime.config import KAFKA_WORKER_KEYS

        return sorted(k for k in self.raw
                      if k in KAFKA_WORKER_KEYS and not is_client_key(k) and not k.startswith(_WORKER_PREFIXES)
                      and not k.startswith("config.providers") and k not in _REST_SERVER_KEYS
                      and k != "clusters" and not is_connector_key(k))

    def _ignored_worker_key_message(self, key: str) -> str:
        targets = sorted({f.target for f in self.cluster_pairs()}) or self.clusters
        forms = " / ".join(f"'{t}.{key}'" for t in targets)
        return (f"mm2.properties: '{key}' at the top level is ignored, as in Kafka's MirrorMaker (its workers "
                f"take only the target cluster's settings and top-level offset.storage*, config.storage*, "
                f"status.storage*, *.converter*, task*, worker*, replication.policy* and client keys); "
                f"set it per target cluster: {forms}")

    def unknown_keys(self) -> list[str]:
        """Keys nobody reads: neither a connector, worker nor client key at top level, under a
        flow prefix, nor under the prefix of a cluster in ``clusters``."""
        unknown: list[str] = []
        aliases = set(self.clusters)
        for key in self.raw:
            if key in _TOP_LEVEL_KEYS or key.startswith(_WORKER_PREFIXES) or is_connector_key(key):
                continue
            if "->" in key:
                # Aliases may contain dots: find the flow prefix among the known clusters.
                matched = False
                for s in aliases:
                    for t in aliases:
                        p = f"{s}->{t}."
                        if key.startswith(p):
                            matched = True
                            if not is_connector_key(key[len(p):]):
                                unknown.append(key)
                if not matched:
                    unknown.append(key)
                continue
            if any(key.startswith(a + ".") for a in aliases):
                continue  # a cluster's client or worker property: Kafka accepts any
            unknown.append(key)
        return sorted(unknown)

    def _suggestion(self, key: str) -> str:
        """" (did you mean 'x'?)" for an unknown key: under a flow prefix (``a->b.``) the closest
        connector key keeps the prefix; at top level, a top-level or connector key."""
        known = sorted(_TOP_LEVEL_KEYS | ALL_CONNECTOR_KEYS | _FRAMEWORK_KEYS)
        if "->" in key:
            for s in self.clusters:
                for t in self.clusters:
                    prefix = f"{s}->{t}."
                    if key.startswith(prefix):
                        meant = closest_key(key[len(prefix):], ALL_CONNECTOR_KEYS | _FRAMEWORK_KEYS)
                        return f" (did you mean {prefix + meant!r}?)" if meant else ""
        return suggestion_suffix(key, known)

    def validate(self) -> None:
        """Warn about unknown keys (naming the closest known one); raise :class:`ConfigException` naming the first bad value
        or missing ``<alias>.bootstrap.servers`` of any flow's connectors."""
        ignored = self.ignored_worker_keys()
        for key in ignored:
            log.warning("%s", self._ignored_worker_key_message(key))
        for key in self.unknown_keys():
            if key not in ignored:
                log.warning("The configuration '%s' was supplied but isn't a known config.%s", key,
                            self._suggestion(key))
        for flow in self.cluster_pairs():
            for side in (flow.source, flow.target):
                if "bootstrap.servers" not in self.cluster_props(side):
                    raise ConfigException(f"{side}.bootstrap.servers", None,
                                          f"cluster {side} of flow {flow} needs bootstrap.servers")
            for connector_class, config_class in _CONFIG_CLASS.items():
                props = self.connector_base_config(flow, connector_class)
                if connector_class == MIRROR_CHECKPOINT_CONNECTOR and not _checkpoint_runs(props):
                    continue
                config_class(props)


def _checkpoint_runs(props: Mapping[str, str]) -> bool:
    emit = props.get(EMIT_CHECKPOINTS_ENABLED, "true").strip().lower() == "true"
    sync = props.get(SYNC_GROUP_OFFSETS_ENABLED, "false").strip().lower() == "true"
    return emit or sync


def property_text(value: Any) -> str:
    """A client setting as a properties string (booleans as ``true``/``false``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def encode_topic_partition(topic: str, partition: int) -> str:
    """Kafka's ``MirrorUtils.encodeTopicPartition``: ``topic-partition``."""
    return f"{topic}-{partition}"


def decode_topic_partition(text: str) -> tuple[str, int]:
    topic, _, partition = text.rpartition("-")
    return topic, int(partition)
