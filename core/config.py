"""Broker and topic configuration, with Kafka's property names.

Two pydantic models:

* :class:`BrokerConfig` — the broker's static configuration (``server.properties``). Field
  aliases are Kafka's property names (``node.id``, ``log.dirs``, ``log.segment.bytes``...).
* :class:`LogConfig` — the effective configuration of one topic's logs: the broker's defaults
  (each topic key has a broker *synonym*, e.g. ``segment.bytes`` <- ``log.segment.bytes``)
  overridden by the topic's own config records.

Both are frozen; a change of configuration builds a new object. A bad value raises
:class:`~strom.core.exceptions.ConfigError` naming the key, the value and what is accepted.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from strom.config_hints import unknown_key_hint, value_errors, warn_unknown_keys
from strom.core.errors import InvalidConfigurationError
from strom.core.exceptions import ConfigError

log = logging.getLogger(__name__)

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647

# ---------------------------------------------------------------------------------------------
# Topic (log) configuration
# ---------------------------------------------------------------------------------------------

ConfigType = Literal["BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST", "CLASS", "PASSWORD"]


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    """One topic-level config key: its type, Kafka default and the broker key it defaults from."""

    name: str
    type: ConfigType
    default: Any
    synonym: str | None
    doc: str
    valid: tuple[str, ...] | None = None  # accepted values for enumerations / list items
    minimum: float | None = None
    maximum: float | None = None


def _d(name: str, type_: ConfigType, default: Any, synonym: str | None, doc: str, **kw: Any) -> TopicConfigDef:
    return TopicConfigDef(name, type_, default, synonym, doc, **kw)


# Kafka 4.x topic configs (LogConfig + remote storage keys), in Kafka's order of documentation.
TOPIC_CONFIG_DEFS: tuple[TopicConfigDef, ...] = (
    _d("cleanup.policy", "LIST", "delete", "log.cleanup.policy",
       "The retention policy of log segments: delete, compact, or both.", valid=("delete", "compact")),
    _d("compression.gzip.level", "INT", -1, "compression.gzip.level", "Gzip compression level.",
       minimum=-1, maximum=9),
    _d("compression.lz4.level", "INT", 9, "compression.lz4.level", "LZ4 compression level.",
       minimum=1, maximum=17),
    _d("compression.type", "STRING", "producer", "compression.type",
       "Final compression type of the topic; 'producer' keeps the producer's codec.",
       valid=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    _d("compression.zstd.level", "INT", 3, "compression.zstd.level", "Zstd compression level.",
       minimum=-131072, maximum=22),
    _d("delete.retention.ms", "LONG", 86400000, "log.cleaner.delete.retention.ms",
       "How long tombstones are kept on compacted topics.", minimum=0),
    _d("file.delete.delay.ms", "LONG", 60000, "log.segment.delete.delay.ms",
       "Time to wait before deleting a file from the filesystem.", minimum=0),
    _d("flush.messages", "LONG", LONG_MAX, "log.flush.interval.messages",
       "Force an fsync after this many messages.", minimum=1),
    _d("flush.ms", "LONG", LONG_MAX, "log.flush.interval.ms",
       "Force an fsync after this much time.", minimum=0),
    _d("follower.replication.throttled.replicas", "LIST", "", "follower.replication.throttled.replicas",
       "Replicas whose log replication is throttled on the follower side."),
    _d("index.interval.bytes", "INT", 4096, "log.index.interval.bytes",
       "How often an offset index entry is added.", minimum=0),
    _d("leader.replication.throttled.replicas", "LIST", "", "leader.replication.throttled.replicas",
       "Replicas whose log replication is throttled on the leader side."),
    _d("local.retention.bytes", "LONG", -2, "log.local.retention.bytes",
       "Local retention size when tiered storage is enabled (-2: use retention.bytes).", minimum=-2),
    _d("local.retention.ms", "LONG", -2, "log.local.retention.ms",
       "Local retention time when tiered storage is enabled (-2: use retention.ms).", minimum=-2),
    _d("max.compaction.lag.ms", "LONG", LONG_MAX, "log.cleaner.max.compaction.lag.ms",
       "The maximum time a message will remain ineligible for compaction.", minimum=1),
    _d("max.message.bytes", "INT", 1048588, "message.max.bytes",
       "The largest record batch size allowed.", minimum=0),
    _d("message.timestamp.after.max.ms", "LONG", 3600000, "log.message.timestamp.after.max.ms",
       "Allowed amount a CreateTime timestamp may be ahead of the broker's time.", minimum=0),
    _d("message.timestamp.before.max.ms", "LONG", LONG_MAX, "log.message.timestamp.before.max.ms",
       "Allowed amount a CreateTime timestamp may be behind the broker's time.", minimum=0),
    _d("message.timestamp.type", "STRING", "CreateTime", "log.message.timestamp.type",
       "Whether the timestamp is the producer's CreateTime or the broker's LogAppendTime.",
       valid=("CreateTime", "LogAppendTime")),
    _d("min.cleanable.dirty.ratio", "DOUBLE", 0.5, "log.cleaner.min.cleanable.ratio",
       "Dirty ratio above which the log is eligible for cleaning.", minimum=0, maximum=1),
    _d("min.compaction.lag.ms", "LONG", 0, "log.cleaner.min.compaction.lag.ms",
       "The minimum time a message will remain uncompacted.", minimum=0),
    _d("min.insync.replicas", "INT", 1, "min.insync.replicas",
       "Minimum in-sync replicas for an acks=all produce to succeed.", minimum=1),
    _d("preallocate", "BOOLEAN", False, "log.preallocate", "Preallocate the file when creating a segment."),
    _d("remote.log.copy.disable", "BOOLEAN", False, None, "Stop copying segments to remote storage."),
    _d("remote.log.delete.on.disable", "BOOLEAN", False, None,
       "Delete remote data when tiered storage is disabled for the topic."),
    _d("remote.storage.enable", "BOOLEAN", False, None, "Enable tiered storage for the topic."),
    _d("retention.bytes", "LONG", -1, "log.retention.bytes",
       "Maximum size a partition can grow to before old segments are discarded (-1: no limit)."),
    _d("retention.ms", "LONG", 604800000, "log.retention.ms",
       "Maximum time a segment is kept before it is discarded (-1: no limit).", minimum=-1),
    _d("segment.bytes", "INT", 1073741824, "log.segment.bytes", "Segment file size.", minimum=14),
    _d("segment.index.bytes", "INT", 10485760, "log.index.size.max.bytes",
       "Size of the offset and time index files.", minimum=4),
    _d("segment.jitter.ms", "LONG", 0, "log.roll.jitter.ms", "Random jitter subtracted from segment.ms.",
       minimum=0),
    _d("segment.ms", "LONG", 604800000, "log.roll.ms", "Time after which a segment is rolled.", minimum=1),
    _d("unclean.leader.election.enable", "BOOLEAN", False, "unclean.leader.election.enable",
       "Allow out-of-sync replicas to become leader."),
)
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in TOPIC_CONFIG_DEFS}


def _parse_value(defn_name: str, type_: ConfigType, raw: Any, *, valid: tuple[str, ...] | None = None,
                 minimum: float | None = None, maximum: float | None = None) -> Any:
    """Parse a string (or already typed) config value; raise ConfigError naming the key."""
    try:
        if type_ == "BOOLEAN":
            if isinstance(raw, bool):
                value: Any = raw
            elif str(raw).strip().lower() in ("true", "false"):
                value = str(raw).strip().lower() == "true"
            else:
                raise ValueError
        elif type_ in ("INT", "SHORT", "LONG"):
            value = int(str(raw).strip())
        elif type_ == "DOUBLE":
            value = float(str(raw).strip())
        elif type_ == "LIST":
            value = raw if isinstance(raw, str) else ",".join(raw)
            value = ",".join(p.strip() for p in value.split(",") if p.strip())
        else:
            value = str(raw)
    except ValueError:
        raise ConfigError(defn_name, raw, f"a value of type {type_.lower()}") from None
    if type_ in ("INT", "SHORT", "LONG", "DOUBLE"):
        if minimum is not None and value < minimum:
            raise ConfigError(defn_name, raw, f"a value of at least {minimum:g}")
        if maximum is not None and value > maximum:
            raise ConfigError(defn_name, raw, f"a value of at most {maximum:g}")
        limit = INT_MAX if type_ == "INT" else LONG_MAX
        if type_ != "DOUBLE" and not -limit - 1 <= value <= limit:
            raise ConfigError(defn_name, raw, f"a {type_.lower()} value")
    if valid is not None:
        items = value.split(",") if type_ == "LIST" else [value]
        for item in items:
            if item and item not in valid:
                raise ConfigError(defn_name, raw, "one of " + ", ".join(valid))
    return value


def parse_topic_config(name: str, raw: Any) -> Any:
    """Validate one topic config value; unknown keys are an error naming the key."""
    defn = TOPIC_CONFIGS.get(name)
    if defn is None:
        raise ConfigError(name, raw, "a known topic config key", unknown=True)
    return _parse_value(name, defn.type, raw, valid=defn.valid, minimum=defn.minimum, maximum=defn.maximum)


def unknown_topic_config(key: str, value: Any = None) -> ConfigError:
    """The command line's error for a topic config key no one knows, naming the closest known key
    ("unknown config 'segment.byte' (did you mean 'segment.bytes'?)"). The wire keeps its own
    answer (:func:`parse_topic_config`'s, through the controller)."""
    error = ConfigError(key, value, "a known topic config key", unknown=True)
    error.args = (unknown_key_hint(key, TOPIC_CONFIGS) + " for a topic",)
    return error


def check_topic_config(key: str, raw: Any) -> Any:
    """:func:`parse_topic_config` for the command line: an unknown key names the closest known one."""
    if key not in TOPIC_CONFIGS:
        raise unknown_topic_config(key, raw)
    return parse_topic_config(key, raw)


def format_config_value(value: Any) -> str:
    """Kafka's string form of a config value (booleans lower-case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return repr(value)
    return str(value)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Effective configuration of one topic's partitions.

    ``values`` holds every topic key; ``overrides`` the keys the topic sets itself (source
    TOPIC_CONFIG in DescribeConfigs). Attribute access uses Python names
    (``segment_bytes``) for the keys the storage engine reads on its hot paths. The keys every
    append reads are parsed once, when the config is made (it is immutable): as properties they
    cost about as much as the rest of a small append's bookkeeping.
    """

    values: Mapping[str, Any]
    overrides: frozenset[str] = frozenset()
    segment_bytes: int = dc_field(init=False, repr=False, compare=False)
    segment_ms: int = dc_field(init=False, repr=False, compare=False)
    cleanup_policy: frozenset[str] = dc_field(init=False, repr=False, compare=False)
    compact: bool = dc_field(init=False, repr=False, compare=False)
    max_message_bytes: int = dc_field(init=False, repr=False, compare=False)
    log_append_time: bool = dc_field(init=False, repr=False, compare=False)
    message_timestamp_before_max_ms: int = dc_field(init=False, repr=False, compare=False)
    message_timestamp_after_max_ms: int = dc_field(init=False, repr=False, compare=False)
    min_insync_replicas: int = dc_field(init=False, repr=False, compare=False)
    flush_messages: int = dc_field(init=False, repr=False, compare=False)
    flush_ms: int = dc_field(init=False, repr=False, compare=False)
    flushes: bool = dc_field(init=False, repr=False, compare=False)  # flush.messages or flush.ms set

    def __post_init__(self) -> None:
        v = self.values
        policy = frozenset(p for p in str(v["cleanup.policy"]).split(",") if p)
        hot = {
            "segment_bytes": int(v["segment.bytes"]),
            "segment_ms": int(v["segment.ms"]),
            "cleanup_policy": policy,
            "compact": "compact" in policy,
            "max_message_bytes": int(v["max.message.bytes"]),
            "log_append_time": v["message.timestamp.type"] == "LogAppendTime",
            "message_timestamp_before_max_ms": int(v["message.timestamp.before.max.ms"]),
            "message_timestamp_after_max_ms": int(v["message.timestamp.after.max.ms"]),
            "min_insync_replicas": int(v["min.insync.replicas"]),
            "flush_messages": int(v["flush.messages"]),
            "flush_ms": int(v["flush.ms"]),
            "flushes": int(v["flush.messages"]) < LONG_MAX or int(v["flush.ms"]) < LONG_MAX,
        }
        for name, value in hot.items():
            object.__setattr__(self, name, value)

    def get(self, key: str) -> Any:
        return self.values[key]

    @property
    def segment_jitter_ms(self) -> int:
        return int(self.values["segment.jitter.ms"])

    @property
    def segment_index_bytes(self) -> int:
        return int(self.values["segment.index.bytes"])

    @property
    def index_interval_bytes(self) -> int:
        return int(self.values["index.interval.bytes"])

    @property
    def retention_ms(self) -> int:
        return int(self.values["retention.ms"])

    @property
    def retention_bytes(self) -> int:
        return int(self.values["retention.bytes"])

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def delete_retention_ms(self) -> int:
        return int(self.values["delete.retention.ms"])

    @property
    def min_compaction_lag_ms(self) -> int:
        return int(self.values["min.compaction.lag.ms"])

    @property
    def min_cleanable_dirty_ratio(self) -> float:
        return float(self.values["min.cleanable.dirty.ratio"])

    @property
    def file_delete_delay_ms(self) -> int:
        return int(self.values["file.delete.delay.ms"])

    @property
    def compression_type(self) -> str:
        return str(self.values["compression.type"])

    @property
    def preallocate(self) -> bool:
        return bool(self.values["preallocate"])

    @classmethod
    def defaults(cls) -> LogConfig:
        """Kafka's defaults, with no broker overrides (used by tests and tools)."""
        return cls({d.name: d.default for d in TOPIC_CONFIG_DEFS})

    @classmethod
    def build(cls, broker: BrokerConfig | None, overrides: Mapping[str, Any] | None = None,
              dynamic_broker: Mapping[str, str] | None = None) -> LogConfig:
        """Topic defaults from ``broker``'s synonyms, then dynamic broker configs (cluster default,
        then this broker's, already merged by the caller), then the topic's ``overrides``."""
        values = dict(broker.topic_defaults() if broker is not None else cls.defaults().values)
        if dynamic_broker:
            for d in TOPIC_CONFIG_DEFS:
                if d.synonym and d.synonym in dynamic_broker:
                    values[d.name] = parse_topic_config(d.name, dynamic_broker[d.synonym])
        parsed = {k: parse_topic_config(k, v) for k, v in (overrides or {}).items()}
        values.update(parsed)
        return cls(values, frozenset(parsed))

    def with_overrides(self, overrides: Mapping[str, Any]) -> LogConfig:
        parsed = {k: parse_topic_config(k, v) for k, v in overrides.items()}
        return LogConfig({**self.values, **parsed}, self.overrides | frozenset(parsed))


# ---------------------------------------------------------------------------------------------
# Broker configuration
# ---------------------------------------------------------------------------------------------


class BrokerConfig(BaseModel):
    """Static broker configuration, loaded from ``server.properties`` / YAML / JSON / env.

    Field aliases are Kafka's property names. Unknown ``log.*``-style keys that Kafka knows but
    strom ignores are kept in :attr:`extra` so DescribeConfigs can echo them.
    """

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="allow")

    node_id: int = Field(1, alias="node.id", ge=0, description="The node id of this server.")
    process_roles: str = Field("broker,controller", alias="process.roles",
                               description="Roles of this server: broker, controller or both.")
    listeners: str = Field("PLAINTEXT://127.0.0.1:9092", alias="listeners",
                           description="Comma-separated listener URIs (port 0 picks a free port).")
    advertised_listeners: str | None = Field(None, alias="advertised.listeners",
                                             description="Listeners published to clients.")
    controller_listener_names: str = Field("CONTROLLER", alias="controller.listener.names")
    controller_quorum_voters: str = Field("", alias="controller.quorum.voters")
    controller_quorum_bootstrap_servers: str = Field("", alias="controller.quorum.bootstrap.servers")
    inter_broker_listener_name: str = Field("PLAINTEXT", alias="inter.broker.listener.name")
    listener_security_protocol_map: str = Field(
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        alias="listener.security.protocol.map")
    log_dirs: str = Field("/tmp/strom-logs", alias="log.dirs", description="Directories holding the log data.")
    metadata_log_dir: str | None = Field(None, alias="metadata.log.dir",
                                         description="Directory of the metadata log (default: first log dir).")
    num_partitions: int = Field(1, alias="num.partitions", ge=1)
    default_replication_factor: int = Field(1, alias="default.replication.factor", ge=1)
    auto_create_topics_enable: bool = Field(True, alias="auto.create.topics.enable")
    delete_topic_enable: bool = Field(True, alias="delete.topic.enable")
    message_max_bytes: int = Field(1048588, alias="message.max.bytes", ge=0)
    # Kafka has no such bound; a compressed batch past it (a decompression bomb) is INVALID_RECORD.
    strom_decompression_max_bytes: int = Field(
        -1, alias="strom.decompression.max.bytes",
        description="Bytes one compressed produce batch may decompress to (-1: 64 x message.max.bytes).")
    socket_request_max_bytes: int = Field(104857600, alias="socket.request.max.bytes", ge=1)
    # Connection limits of the socket layer (strom.core.server.network), Kafka's keys/defaults.
    queued_max_request_bytes: int = Field(
        -1, alias="queued.max.request.bytes",
        description="Bytes of requests read but not yet handled, over all connections (-1: unbounded).")
    max_connections: int = Field(INT_MAX, alias="max.connections", ge=0,
                                 description="Connections the broker accepts at once; above it, it stops accepting.")
    max_connections_per_ip_overrides: str = Field(
        "", alias="max.connections.per.ip.overrides",
        description="Per-address limits overriding max.connections.per.ip: host:count,host:count.")
    max_connections_per_ip: int = Field(INT_MAX, alias="max.connections.per.ip", ge=0,
                                        description="Connections allowed from one address.")
    # Kafka's default is 50, for an acceptor thread of its own. strom accepts on its event loop,
    # between requests, so a storm of connects overflows a short queue into SYN retries (2,500
    # sequential connects: 42 s at 50, 0.1 s at 1024); the kernel caps it at net.core.somaxconn.
    socket_listen_backlog_size: int = Field(
        1024, alias="socket.listen.backlog.size", ge=1,
        description="Connections the kernel queues for a listener before the broker accepts them.")
    socket_send_buffer_bytes: int = Field(102400, alias="socket.send.buffer.bytes")
    socket_receive_buffer_bytes: int = Field(102400, alias="socket.receive.buffer.bytes")
    num_network_threads: int = Field(3, alias="num.network.threads", ge=1)
    num_io_threads: int = Field(8, alias="num.io.threads", ge=1)
    num_recovery_threads_per_data_dir: int = Field(2, alias="num.recovery.threads.per.data.dir", ge=1)
    queued_max_requests: int = Field(500, alias="queued.max.requests", ge=1)
    connections_max_idle_ms: int = Field(600000, alias="connections.max.idle.ms")
    broker_rack: str | None = Field(None, alias="broker.rack")

    log_segment_bytes: int = Field(1073741824, alias="log.segment.bytes", ge=14)
    log_roll_ms: int | None = Field(None, alias="log.roll.ms", ge=1)
    log_roll_hours: int = Field(168, alias="log.roll.hours", ge=1)
    log_roll_jitter_ms: int | None = Field(None, alias="log.roll.jitter.ms", ge=0)
    log_roll_jitter_hours: int = Field(0, alias="log.roll.jitter.hours", ge=0)
    log_retention_ms: int | None = Field(None, alias="log.retention.ms", ge=-1)
    log_retention_minutes: int | None = Field(None, alias="log.retention.minutes", ge=-1)
    log_retention_hours: int = Field(168, alias="log.retention.hours", ge=-1)
    log_retention_bytes: int = Field(-1, alias="log.retention.bytes")
    log_retention_check_interval_ms: int = Field(300000, alias="log.retention.check.interval.ms", ge=1)
    log_index_interval_bytes: int = Field(4096, alias="log.index.interval.bytes", ge=0)
    log_index_size_max_bytes: int = Field(10485760, alias="log.index.size.max.bytes", ge=4)
    log_flush_interval_messages: int = Field(LONG_MAX, alias="log.flush.interval.messages", ge=1)
    log_flush_interval_ms: int | None = Field(None, alias="log.flush.interval.ms", ge=0)
    log_flush_scheduler_interval_ms: int = Field(LONG_MAX, alias="log.flush.scheduler.interval.ms")
    log_flush_offset_checkpoint_interval_ms: int = Field(60000, alias="log.flush.offset.checkpoint.interval.ms")
    log_flush_start_offset_checkpoint_interval_ms: int = Field(
        60000, alias="log.flush.start.offset.checkpoint.interval.ms")
    log_cleanup_policy: str = Field("delete", alias="log.cleanup.policy")
    log_cleaner_enable: bool = Field(True, alias="log.cleaner.enable")
    log_cleaner_backoff_ms: int = Field(15000, alias="log.cleaner.backoff.ms", ge=0)
    log_cleaner_delete_retention_ms: int = Field(86400000, alias="log.cleaner.delete.retention.ms", ge=0)
    log_cleaner_min_compaction_lag_ms: int = Field(0, alias="log.cleaner.min.compaction.lag.ms", ge=0)
    log_cleaner_max_compaction_lag_ms: int = Field(LONG_MAX, alias="log.cleaner.max.compaction.lag.ms", ge=1)
    log_cleaner_min_cleanable_ratio: float = Field(0.5, alias="log.cleaner.min.cleanable.ratio", ge=0, le=1)
    log_segment_delete_delay_ms: int = Field(60000, alias="log.segment.delete.delay.ms", ge=0)
    log_message_timestamp_type: Literal["CreateTime", "LogAppendTime"] = Field(
        "CreateTime", alias="log.message.timestamp.type")
    log_message_timestamp_before_max_ms: int = Field(LONG_MAX, alias="log.message.timestamp.before.max.ms")
    log_message_timestamp_after_max_ms: int = Field(3600000, alias="log.message.timestamp.after.max.ms")
    log_preallocate: bool = Field(False, alias="log.preallocate")
    compression_type: str = Field("producer", alias="compression.type")
    min_insync_replicas: int = Field(1, alias="min.insync.replicas", ge=1)
    unclean_leader_election_enable: bool = Field(False, alias="unclean.leader.election.enable")

    group_initial_rebalance_delay_ms: int = Field(3000, alias="group.initial.rebalance.delay.ms", ge=0)
    group_min_session_timeout_ms: int = Field(6000, alias="group.min.session.timeout.ms", ge=1,
                                              description="Smallest session timeout a classic member may ask for.")
    group_max_session_timeout_ms: int = Field(1800000, alias="group.max.session.timeout.ms", ge=1,
                                              description="Largest session timeout a classic member may ask for.")
    # Kafka's CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS (a constant there, 5 minutes): how long a
    # member joining a classic group for the first time may wait in JoinGroup before it expires.
    strom_group_new_member_join_timeout_ms: int = Field(
        300000, alias="strom.group.new.member.join.timeout.ms", ge=1,
        description="How long a new classic group member may wait in JoinGroup (Kafka's fixed 5 minutes).")
    group_consumer_session_timeout_ms: int = Field(45000, alias="group.consumer.session.timeout.ms", ge=1)
    group_consumer_heartbeat_interval_ms: int = Field(5000, alias="group.consumer.heartbeat.interval.ms", ge=1)
    group_consumer_max_size: int = Field(2**31 - 1, alias="group.consumer.max.size", ge=1)
    group_consumer_assignors: str = Field("uniform,range", alias="group.consumer.assignors",
                                          description="Enabled server-side assignors; the first is the default.")
    client_quota_callback_class: str = Field("", alias="client.quota.callback.class",
                                             description="Name of the quota plugin to use ('' = the built-in Kafka client quotas; "
                                                         "'unlimited' = never throttle).")
    offsets_topic_replication_factor: int = Field(1, alias="offsets.topic.replication.factor", ge=1)
    offsets_topic_num_partitions: int = Field(50, alias="offsets.topic.num.partitions", ge=1)
    # How often Empty groups that have no committed offsets are deleted (Kafka's cleanupGroupMetadata;
    # strom keeps committed offsets until deleted, so offsets.retention.minutes has no effect yet).
    offsets_retention_check_interval_ms: int = Field(600000, alias="offsets.retention.check.interval.ms", ge=1)
    transaction_state_log_replication_factor: int = Field(
        1, alias="transaction.state.log.replication.factor", ge=1)
    transaction_state_log_min_isr: int = Field(1, alias="transaction.state.log.min.isr", ge=1)
    transaction_state_log_num_partitions: int = Field(50, alias="transaction.state.log.num.partitions", ge=1)
    transaction_state_log_segment_bytes: int = Field(104857600, alias="transaction.state.log.segment.bytes", ge=14)
    transaction_max_timeout_ms: int = Field(900000, alias="transaction.max.timeout.ms", ge=1)
    transactional_id_expiration_ms: int = Field(604800000, alias="transactional.id.expiration.ms", ge=1)
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = Field(
        10000, alias="transaction.abort.timed.out.transaction.cleanup.interval.ms", ge=1)
    transaction_remove_expired_transaction_cleanup_interval_ms: int = Field(
        3600000, alias="transaction.remove.expired.transaction.cleanup.interval.ms", ge=1)
    # KIP-890: a partition leader checks that a transactional batch's partition is in the
    # transaction before appending (Produce v11 and older; v12+ always adds it instead).
    transaction_partition_verification_enable: bool = Field(
        True, alias="transaction.partition.verification.enable")
    # How long the implicit add of Produce v12+ retries CONCURRENT_TRANSACTIONS (the producer's
    # previous transaction still writing its markers) before answering with it.
    add_partitions_to_txn_retry_backoff_ms: int = Field(20, alias="add.partitions.to.txn.retry.backoff.ms", ge=1)
    add_partitions_to_txn_retry_backoff_max_ms: int = Field(
        100, alias="add.partitions.to.txn.retry.backoff.max.ms", ge=1)

    # KIP-405 tiered storage (strom.tiered). Off by default: nothing of the tier is loaded then.
    # The managers' own keys stay under the rsm.config. / rlmm.config. prefixes (kept as extras).
    remote_log_storage_system_enable: bool = Field(
        False, alias="remote.log.storage.system.enable",
        description="Enable tiered storage on this broker (loads the remote storage and metadata managers).")
    remote_log_storage_manager_class_name: str = Field(
        "", alias="remote.log.storage.manager.class.name",
        description="The remote storage manager plugin (strom's name, or Kafka's/Aiven's class name).")
    remote_log_metadata_manager_class_name: str = Field(
        "topic-based", alias="remote.log.metadata.manager.class.name",
        description="The remote log metadata manager plugin (default: the topic-based one).")
    log_local_retention_ms: int = Field(
        -2, alias="log.local.retention.ms", ge=-2,
        description="Local retention time of tiered topics (-2: use retention.ms).")
    log_local_retention_bytes: int = Field(
        -2, alias="log.local.retention.bytes", ge=-2,
        description="Local retention size of tiered topics (-2: use retention.bytes).")
    remote_log_manager_task_interval_ms: int = Field(
        30000, alias="remote.log.manager.task.interval.ms", ge=1,
        description="How often the remote log manager runs its copy/expiration tasks.")
    remote_fetch_max_wait_ms: int = Field(
        500, alias="remote.fetch.max.wait.ms", ge=1,
        description="How long a Fetch served from remote storage may wait for the remote read.")

    replica_lag_time_max_ms: int = Field(30000, alias="replica.lag.time.max.ms", ge=1)
    fetch_max_bytes: int = Field(57671680, alias="fetch.max.bytes", ge=0)
    metadata_log_segment_bytes: int = Field(1073741824, alias="metadata.log.segment.bytes", ge=12)
    metadata_max_retention_bytes: int = Field(104857600, alias="metadata.max.retention.bytes")
    metadata_log_max_record_bytes_between_snapshots: int = Field(
        20971520, alias="metadata.log.max.record.bytes.between.snapshots", ge=1)
    strom_metrics_listener: str = Field(
        "", alias="strom.metrics.listener",
        description="http://HOST:PORT serving Prometheus /metrics with Kafka's metric names ('' = off; "
                    "`strom dev` sets http://127.0.0.1:9404). A port that cannot be bound is logged, not fatal.")
    strom_plugins_blocklist: str = Field("", alias="strom.plugins.blocklist",
                                         description="Comma-separated plugin names not to load.")
    authorizer_class_name: str = Field("", alias="authorizer.class.name",
                                       description="Name of the authorizer plugin to use ('' = allow all).")

    @field_validator("queued_max_request_bytes")
    @classmethod
    def _queued_bytes(cls, v: int, info: ValidationInfo) -> int:
        # Kafka's KafkaConfig check: the pool must hold at least one whole request.
        max_request = info.data.get("socket_request_max_bytes")
        if v > 0 and max_request is not None and v < max_request:
            raise ValueError(f"queued.max.request.bytes must be -1 (unbounded) or at least "
                             f"socket.request.max.bytes ({max_request})")
        return v

    @field_validator("strom_decompression_max_bytes")
    @classmethod
    def _decompression_max(cls, v: int) -> int:
        if v != -1 and not 1024 <= v <= 2**40:
            raise ValueError("strom.decompression.max.bytes must be -1 (64 x message.max.bytes) or "
                             "between 1024 and 1099511627776")
        return v

    @field_validator("max_connections_per_ip_overrides")
    @classmethod
    def _overrides(cls, v: str) -> str:
        _parse_connection_overrides(v)
        return v

    @field_validator("max_connections_per_ip")
    @classmethod
    def _per_ip(cls, v: int, info: ValidationInfo) -> int:
        if v == 0 and not info.data.get("max_connections_per_ip_overrides"):
            # Kafka's message for the same check.
            raise ValueError("max.connections.per.ip can be set to zero only if "
                             "max.connections.per.ip.overrides property is set")
        return v

    @field_validator("process_roles")
    @classmethod
    def _roles(cls, v: str) -> str:
        roles = {r.strip() for r in v.split(",") if r.strip()}
        if not roles or not roles <= {"broker", "controller"}:
            raise ValueError("process.roles must be a comma-separated subset of broker,controller")
        return ",".join(sorted(roles))

    # -- derived values -----------------------------------------------------------------------

    @property
    def log_dir_list(self) -> list[Path]:
        return [Path(p.strip()) for p in self.log_dirs.split(",") if p.strip()]

    @property
    def metadata_dir(self) -> Path:
        return Path(self.metadata_log_dir) if self.metadata_log_dir else self.log_dir_list[0]

    @property
    def effective_retention_ms(self) -> int:
        if self.log_retention_ms is not None:
            return self.log_retention_ms
        if self.log_retention_minutes is not None:
            return self.log_retention_minutes * 60_000
        return self.log_retention_hours * 3_600_000

    @property
    def effective_roll_ms(self) -> int:
        return self.log_roll_ms if self.log_roll_ms is not None else self.log_roll_hours * 3_600_000

    @property
    def decompression_max_bytes(self) -> int:
        """strom.decompression.max.bytes, its default resolved (64 x message.max.bytes)."""
        v = self.strom_decompression_max_bytes
        return v if v != -1 else 64 * max(self.message_max_bytes, 1024)

    @property
    def effective_flush_ms(self) -> int:
        return self.log_flush_interval_ms if self.log_flush_interval_ms is not None else LONG_MAX

    def listener_list(self) -> list[tuple[str, str, int]]:
        """``listeners`` as (name, host, port) triples."""
        out = []
        for item in self.listeners.split(","):
            item = item.strip()
            if not item:
                continue
            name, _, rest = item.partition("://")
            host, _, port = rest.rpartition(":")
            try:
                out.append((name, host or "0.0.0.0", int(port)))
            except ValueError:
                raise ConfigError("listeners", self.listeners, "NAME://host:port entries") from None
        return out

    def security_protocol_map(self) -> dict[str, str]:
        """``listener.security.protocol.map`` as {listener name: security protocol}."""
        out: dict[str, str] = {}
        for item in split_csv(self.listener_security_protocol_map):
            name, sep, protocol = item.partition(":")
            protocol = protocol.strip().upper()
            if not sep or not name.strip() or protocol not in SECURITY_PROTOCOL_NAMES:
                raise ConfigError("listener.security.protocol.map", self.listener_security_protocol_map,
                                  "NAME:PROTOCOL entries, PROTOCOL one of " + ", ".join(SECURITY_PROTOCOL_NAMES))
            out[name.strip()] = protocol
        return out

    def connection_overrides(self) -> dict[str, int]:
        """``max.connections.per.ip.overrides`` as {host or address: limit}."""
        return _parse_connection_overrides(self.max_connections_per_ip_overrides)

    def topic_defaults(self) -> dict[str, Any]:
        """Every topic config key with the value this broker gives it by default."""
        broker_values: dict[str, Any] = {
            "log.cleanup.policy": self.log_cleanup_policy,
            "compression.type": self.compression_type,
            "log.cleaner.delete.retention.ms": self.log_cleaner_delete_retention_ms,
            "log.segment.delete.delay.ms": self.log_segment_delete_delay_ms,
            "log.flush.interval.messages": self.log_flush_interval_messages,
            "log.flush.interval.ms": self.effective_flush_ms,
            "log.index.interval.bytes": self.log_index_interval_bytes,
            "log.cleaner.max.compaction.lag.ms": self.log_cleaner_max_compaction_lag_ms,
            "message.max.bytes": self.message_max_bytes,
            "log.message.timestamp.after.max.ms": self.log_message_timestamp_after_max_ms,
            "log.message.timestamp.before.max.ms": self.log_message_timestamp_before_max_ms,
            "log.message.timestamp.type": self.log_message_timestamp_type,
            "log.cleaner.min.cleanable.ratio": self.log_cleaner_min_cleanable_ratio,
            "log.cleaner.min.compaction.lag.ms": self.log_cleaner_min_compaction_lag_ms,
            "min.insync.replicas": self.min_insync_replicas,
            "log.preallocate": self.log_preallocate,
            "log.retention.bytes": self.log_retention_bytes,
            "log.retention.ms": self.effective_retention_ms,
            "log.local.retention.bytes": self.log_local_retention_bytes,
            "log.local.retention.ms": self.log_local_retention_ms,
            "log.segment.bytes": self.log_segment_bytes,
            "log.index.size.max.bytes": self.log_index_size_max_bytes,
            "log.roll.jitter.ms": (self.log_roll_jitter_ms if self.log_roll_jitter_ms is not None
                                   else self.log_roll_jitter_hours * 3_600_000),
            "log.roll.ms": self.effective_roll_ms,
            "unclean.leader.election.enable": self.unclean_leader_election_enable,
        }
        out: dict[str, Any] = {}
        for d in TOPIC_CONFIG_DEFS:
            out[d.name] = broker_values.get(d.synonym, d.default) if d.synonym else d.default
        return out

    def describe(self) -> list[tuple[str, str | None, bool]]:
        """(property name, string value, is_default) for every broker config, for DescribeConfigs."""
        rows = []
        explicit = self.model_fields_set
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            rows.append((field.alias or name, None if value is None else format_config_value(value),
                         name not in explicit))
        for key, value in (self.model_extra or {}).items():
            rows.append((key, format_config_value(value), False))
        return rows

    # -- loading ------------------------------------------------------------------------------

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], sources: Mapping[str, str] | None = None) -> BrokerConfig:
        """Validate ``values``; a bad value raises :class:`ConfigError` with one line per bad key
        ("invalid value 'abc' for num.partitions: expected an integer (in server.properties)"),
        ``sources`` naming where each key came from."""
        try:
            return cls.model_validate(dict(values))
        except ValidationError as e:
            problems = value_errors(e, cls, (sources or {}).get)
            key, value, expected, _ = problems[0]
            error = ConfigError(key, value, expected)
            error.args = ("\n".join(line for *_, line in problems),)
            raise error from None

    @classmethod
    def known_keys(cls) -> frozenset[str]:
        """Every broker key strom or Kafka 4.3.1 knows (strom's fields, Kafka's broker ConfigDef,
        the keys of the built-in plugins); :data:`OPEN_BROKER_PREFIXES` are open-ended."""
        from strom.core.kafka_config_defs import BROKER_CONFIG_KEYS

        fields = {f.alias or name for name, f in cls.model_fields.items()}
        return frozenset(fields | {k.name for k in BROKER_CONFIG_KEYS} | PLUGIN_BROKER_KEYS)

    @classmethod
    def warn_unknown(cls, keys: Iterable[str], source: str) -> list[str]:
        """Warn once about each key of ``keys`` no one reads, naming the closest known key."""
        return warn_unknown_keys(log, keys, cls.known_keys(), prefixes=OPEN_BROKER_PREFIXES,
                                 kind="broker", source=source)

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None,
             overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> BrokerConfig:
        """Load from a ``.properties``/YAML/JSON file, then ``STROM_*`` env vars, then ``overrides``.

        ``STROM_LOG_SEGMENT_BYTES=1000`` sets ``log.segment.bytes``.
        """
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        if path is not None:
            from_file = load_config_file(path)
            cls.warn_unknown(from_file, Path(path).name)
            values.update(from_file)
            sources.update(dict.fromkeys(from_file, Path(path).name))
        # STROM_* variables are not checked: other settings of the command (STROM_LOG_LEVEL...)
        # share the prefix, so an unknown one is not a mistake.
        for key, value in (os.environ if env is None else env).items():
            if key.startswith("STROM_") and key != "STROM_DISABLE_PLUGIN_AUTOLOAD":
                values[key[len("STROM_"):].lower().replace("_", ".")] = value
                sources[key[len("STROM_"):].lower().replace("_", ".")] = key
        cls.warn_unknown(overrides or {}, "--override")
        values.update(overrides or {})
        sources.update(dict.fromkeys(overrides or {}, "--override"))
        return cls.from_mapping(values, sources)


SECURITY_PROTOCOL_NAMES = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

# Broker keys with an open end, as Kafka passes them on: per-listener settings, the remote
# storage and metadata managers' own keys (and the topic-based manager's), config providers.
OPEN_BROKER_PREFIXES: tuple[str, ...] = ("listener.name.", "rsm.config.", "rlmm.config.", "remote.log.metadata.",
                                         "config.providers.")
# Keys the built-in plugins read from the broker's config that are in no Kafka ConfigDef
# (StandardAuthorizer's own, strom's local tier).
PLUGIN_BROKER_KEYS: frozenset[str] = frozenset({"super.users", "allow.everyone.if.no.acl.found", "strom.local.tier"})


def check_remote_storage_topic(broker: BrokerConfig, overrides: Mapping[str, Any],
                               existing: Mapping[str, str] | None = None) -> None:
    """Kafka 4.3's ``LogConfig.validateTopicLogConfigValues`` for a topic's overrides (``existing``:
    the overrides before an AlterConfigs), with Kafka's messages: remote storage needs
    ``remote.log.storage.system.enable`` and ``cleanup.policy`` delete (or empty); the local
    retention cannot exceed the total one; with ``remote.log.copy.disable`` both must match; and
    turning remote storage off needs ``remote.log.delete.on.disable`` (KIP-950)."""
    values = {**broker.topic_defaults(), **{k: parse_topic_config(k, v) for k, v in overrides.items()}}
    if not values["remote.storage.enable"]:
        was_enabled = str((existing or {}).get("remote.storage.enable", "false")).lower() == "true"
        if was_enabled and not values["remote.log.delete.on.disable"]:
            raise InvalidConfigurationError(
                "It is invalid to disable remote storage without deleting remote data. If you want to keep the "
                "remote data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable"
                "=true`. If you want to disable remote storage and delete all remote data, please set "
                "`remote.storage.enable=false,remote.log.delete.on.disable=true`.")
        return
    if not broker.remote_log_storage_system_enable:
        raise InvalidConfigurationError("Tiered Storage functionality is disabled in the broker. "
                                        "Topic cannot be configured with remote log storage.")
    if [p for p in str(values["cleanup.policy"]).split(",") if p] not in ([], ["delete"]):
        raise InvalidConfigurationError("Remote log storage only supports topics with cleanup.policy=delete or "
                                        "cleanup.policy being an empty list.")
    for local_key, total_key in (("local.retention.bytes", "retention.bytes"), ("local.retention.ms", "retention.ms")):
        local, total = int(values[local_key]), int(values[total_key])
        if local != -2 and total != -1 and (local == -1 or local > total):
            reason = (f"Value must not be -1 as {total_key} value is set as {total}." if local == -1 else
                      f"Value must not be more than {total_key} property value: {total}")
            raise InvalidConfigurationError(f"Invalid value {local} for configuration {local_key}: {reason}")
    if values["remote.log.copy.disable"]:
        for local_key, total_key in (("local.retention.bytes", "retention.bytes"),
                                     ("local.retention.ms", "retention.ms")):
            if int(values[local_key]) not in (-2, int(values[total_key])):
                raise InvalidConfigurationError(
                    f"When `remote.log.copy.disable` is set to true, the `{local_key}` and `{total_key}` must be "
                    "set to the identical value because there will be no more logs copied to the remote storage.")


def _parse_connection_overrides(value: str) -> dict[str, int]:
    """Kafka's ``host:count,host:count`` (split at the last colon, so IPv6 addresses work)."""
    out: dict[str, int] = {}
    for item in split_csv(value):
        host, sep, count = item.rpartition(":")
        try:
            limit = int(count.strip())
        except ValueError:
            limit = -1
        if not sep or not host.strip() or limit < 0:
            raise ValueError(f"max.connections.per.ip.overrides entries are host:count with count >= 0, "
                             f"got {item!r}")
        out[host.strip().strip("[]")] = limit
    return out


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (``key=value`` / ``key: value``, ``#``/``!`` comments, ``\\`` continuation)."""
    out: dict[str, str] = {}
    pending = ""
    for raw_line in text.splitlines():
        line = pending + raw_line.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            out[line] = ""
        else:
            out[line[:sep].strip()] = line[sep + 1:].strip()
    return out


def load_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a config file: ``.json``, ``.yaml``/``.yml`` or Java properties (anything else)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError("--config", str(path), f"a readable file ({e.strerror})") from None
    if p.suffix == ".json":
        import json

        data = json.loads(text)
    elif p.suffix in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text) or {}
    else:
        return parse_properties(text)
    if not isinstance(data, dict):
        raise ConfigError("--config", str(path), "a mapping of property names to values")
    return {str(k): v for k, v in data.items()}


def split_csv(value: str) -> Iterable[str]:
    return (p.strip() for p in value.split(",") if p.strip())
