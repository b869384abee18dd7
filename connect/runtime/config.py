"""Worker and connector configuration, with Kafka Connect's property names.

* :class:`WorkerConfig` — ``worker.properties`` of a standalone or distributed worker
  (pydantic; aliases are Kafka's keys). Unknown keys are kept: ``producer.*``, ``consumer.*``,
  ``admin.*`` override the clients' settings and ``key.converter.*`` / ``value.converter.*`` /
  ``header.converter.*`` configure the worker's default converters. Top-level
  ``security.protocol`` / ``sasl.*`` / ``ssl.*`` reach every client; every client config is
  returned in librdkafka's names (:func:`strom.client_security.to_librdkafka`).
* :class:`ConnectorConfig` — one connector's configuration: Kafka's common keys, the sink keys
  (``topics``, ``topics.regex``, DLQ), the source keys (``exactly.once.support``,
  ``transaction.boundary``) and strom's opt-in automatic restart of failed tasks:

  ``errors.restart.enable`` (false), ``errors.restart.max.retries`` (5; -1 = forever),
  ``errors.restart.backoff.ms`` (1000, doubled per attempt), ``errors.restart.backoff.max.ms``
  (60000).

  Transformations and predicates use Kafka's enriched keys: ``transforms=a,b``,
  ``transforms.a.type=...``, ``transforms.a.predicate=p``, ``transforms.a.negate=true``,
  ``predicates=p``, ``predicates.p.type=...``; their own keys follow the same prefix.

Parsing of connector keys is table-driven here (so the runtime does not depend on how a
``ConfigDef`` is built); :func:`connector_config_def` turns the table into the SPI's
``ConfigDef`` for REST validation.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from strom.client_security import ClientSecurityError, is_security_key, security_settings, to_librdkafka
from strom.config_hints import closest_key, value_errors, warn_unknown_keys
from strom.connect.exceptions import ConfigException
from strom.core.config import load_config_file

# -------------------------------------------------------------------------------------------
# Worker
# -------------------------------------------------------------------------------------------

log = logging.getLogger(__name__)

# Apache Kafka 4.3.1's worker keys (DistributedConfig and StandaloneConfig ConfigDefs, read from
# the reference jars): a key Kafka's worker knows is not a typo, even where strom ignores it.
KAFKA_WORKER_KEYS: frozenset[str] = frozenset({
    'access.control.allow.methods', 'access.control.allow.origin', 'admin.listeners', 'bootstrap.servers',
    'client.dns.lookup', 'client.id', 'config.providers', 'config.storage.replication.factor',
    'config.storage.topic', 'connect.protocol', 'connections.max.idle.ms',
    'connector.client.config.override.policy', 'exactly.once.source.support', 'group.id', 'header.converter',
    'header.converter.plugin.version', 'heartbeat.interval.ms', 'inter.worker.key.generation.algorithm',
    'inter.worker.key.size', 'inter.worker.key.ttl.ms', 'inter.worker.signature.algorithm',
    'inter.worker.verification.algorithms', 'key.converter', 'key.converter.plugin.version', 'listeners',
    'metadata.max.age.ms', 'metadata.recovery.rebootstrap.trigger.ms', 'metadata.recovery.strategy',
    'metric.reporters', 'metrics.num.samples', 'metrics.recording.level', 'metrics.sample.window.ms',
    'offset.flush.interval.ms', 'offset.flush.timeout.ms', 'offset.storage.file.filename',
    'offset.storage.partitions', 'offset.storage.replication.factor', 'offset.storage.topic',
    'plugin.discovery', 'plugin.path', 'rebalance.timeout.ms', 'receive.buffer.bytes',
    'reconnect.backoff.max.ms', 'reconnect.backoff.ms', 'request.timeout.ms', 'response.http.headers.config',
    'rest.advertised.host.name', 'rest.advertised.listener', 'rest.advertised.port', 'rest.extension.classes',
    'retry.backoff.max.ms', 'retry.backoff.ms', 'sasl.client.callback.handler.class', 'sasl.jaas.config',
    'sasl.kerberos.kinit.cmd', 'sasl.kerberos.min.time.before.relogin', 'sasl.kerberos.service.name',
    'sasl.kerberos.ticket.renew.jitter', 'sasl.kerberos.ticket.renew.window.factor',
    'sasl.login.callback.handler.class', 'sasl.login.class', 'sasl.login.connect.timeout.ms',
    'sasl.login.read.timeout.ms', 'sasl.login.refresh.buffer.seconds',
    'sasl.login.refresh.min.period.seconds', 'sasl.login.refresh.window.factor',
    'sasl.login.refresh.window.jitter', 'sasl.login.retry.backoff.max.ms', 'sasl.login.retry.backoff.ms',
    'sasl.mechanism', 'sasl.oauthbearer.assertion.algorithm', 'sasl.oauthbearer.assertion.claim.aud',
    'sasl.oauthbearer.assertion.claim.exp.seconds', 'sasl.oauthbearer.assertion.claim.iss',
    'sasl.oauthbearer.assertion.claim.jti.include', 'sasl.oauthbearer.assertion.claim.nbf.seconds',
    'sasl.oauthbearer.assertion.claim.sub', 'sasl.oauthbearer.assertion.file',
    'sasl.oauthbearer.assertion.private.key.file', 'sasl.oauthbearer.assertion.private.key.passphrase',
    'sasl.oauthbearer.assertion.template.file', 'sasl.oauthbearer.client.credentials.client.id',
    'sasl.oauthbearer.client.credentials.client.secret', 'sasl.oauthbearer.clock.skew.seconds',
    'sasl.oauthbearer.expected.audience', 'sasl.oauthbearer.expected.issuer',
    'sasl.oauthbearer.header.urlencode', 'sasl.oauthbearer.jwks.endpoint.refresh.ms',
    'sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms', 'sasl.oauthbearer.jwks.endpoint.retry.backoff.ms',
    'sasl.oauthbearer.jwks.endpoint.url', 'sasl.oauthbearer.jwt.retriever.class',
    'sasl.oauthbearer.jwt.validator.class', 'sasl.oauthbearer.scope', 'sasl.oauthbearer.scope.claim.name',
    'sasl.oauthbearer.sub.claim.name', 'sasl.oauthbearer.token.endpoint.url',
    'scheduled.rebalance.max.delay.ms', 'security.protocol', 'send.buffer.bytes', 'session.timeout.ms',
    'socket.connection.setup.timeout.max.ms', 'socket.connection.setup.timeout.ms', 'ssl.cipher.suites',
    'ssl.client.auth', 'ssl.enabled.protocols', 'ssl.endpoint.identification.algorithm',
    'ssl.engine.factory.class', 'ssl.key.password', 'ssl.keymanager.algorithm',
    'ssl.keystore.certificate.chain', 'ssl.keystore.key', 'ssl.keystore.location', 'ssl.keystore.password',
    'ssl.keystore.type', 'ssl.protocol', 'ssl.provider', 'ssl.secure.random.implementation',
    'ssl.trustmanager.algorithm', 'ssl.truststore.certificates', 'ssl.truststore.location',
    'ssl.truststore.password', 'ssl.truststore.type', 'status.storage.partitions',
    'status.storage.replication.factor', 'status.storage.topic', 'task.shutdown.graceful.timeout.ms',
    'topic.creation.enable', 'topic.tracking.allow.reset', 'topic.tracking.enable', 'value.converter',
    'value.converter.plugin.version', 'worker.sync.timeout.ms', 'worker.unsync.backoff.ms'
})
# Kafka's documentation of the worker keys strom has (first sentence), for `strom config list`.
KAFKA_WORKER_DOCS: dict[str, str] = {
    'bootstrap.servers': 'A list of host/port pairs used to establish the initial connection to the Kafka cluster.',
    'client.id': 'An id string to pass to the server when making requests.',
    'key.converter': 'Converter class used to convert between Kafka Connect format and the serialized form that is written to Kafka.',
    'value.converter': 'Converter class used to convert between Kafka Connect format and the serialized form that is written to Kafka.',
    'header.converter': 'HeaderConverter class used to convert between Kafka Connect format and the serialized form that is written to Kafka.',
    'offset.storage.file.filename': 'File to store source connector offsets',
    'offset.flush.interval.ms': 'Interval at which to try committing offsets for tasks.',
    'offset.flush.timeout.ms': 'Maximum number of milliseconds to wait for records to flush and partition offset data to be committed to offset storage before cancelling the process and restoring the offset data to be committed in a future attempt.',
    'task.shutdown.graceful.timeout.ms': 'Amount of time to wait for tasks to shutdown gracefully.',
    'group.id': 'A unique string that identifies the Connect cluster group this worker belongs to.',
    'config.storage.topic': 'The name of the Kafka topic where connector configurations are stored',
    'offset.storage.topic': 'The name of the Kafka topic where source connector offsets are stored',
    'status.storage.topic': 'The name of the Kafka topic where connector and task status are stored',
    'config.storage.replication.factor': 'Replication factor used when creating the configuration storage topic',
    'offset.storage.replication.factor': 'Replication factor used when creating the offset storage topic',
    'status.storage.replication.factor': 'Replication factor used when creating the status storage topic',
    'offset.storage.partitions': 'The number of partitions used when creating the offset storage topic',
    'status.storage.partitions': 'The number of partitions used when creating the status storage topic',
    'session.timeout.ms': 'The timeout used to detect worker failures.',
    'heartbeat.interval.ms': "The expected time between heartbeats to the group coordinator when using Kafka's group management facilities.",
    'rebalance.timeout.ms': 'The maximum allowed time for each worker to join the group once a rebalance has begun.',
    'scheduled.rebalance.max.delay.ms': 'The maximum delay that is scheduled in order to wait for the return of one or more departed workers before rebalancing and reassigning their connectors and tasks to the group.',
    'worker.sync.timeout.ms': 'When the worker is out of sync with other workers and needs to resynchronize configurations, wait up to this amount of time before giving up, leaving the group, and waiting a backoff period before rejoining.',
    'connect.protocol': 'Compatibility mode for Kafka Connect Protocol',
    'listeners': 'List of comma-separated URIs the REST API will listen on.',
    'rest.advertised.host.name': 'If this is set, this is the hostname that will be given out to other workers to connect to.',
    'rest.advertised.port': 'If this is set, this is the port that will be given out to other workers to connect to.',
    'rest.advertised.listener': 'Sets the advertised listener (HTTP or HTTPS) which will be given to other workers to use.',
    'exactly.once.source.support': 'Whether to enable exactly-once support for source connectors in the cluster by using transactions to write source records and their source offsets, and by proactively fencing out old task generations before bringing up new ones.',
    'plugin.path': 'List of paths separated by commas (,) that contain plugins (connectors, converters, transformations).',
    'connector.client.config.override.policy': 'Class name or alias of implementation of ConnectorClientConfigOverridePolicy.',
}
# Open-ended worker keys: the clients' and converters' own settings, the REST server's
# listeners.https.*, config providers' settings.
WORKER_KEY_PREFIXES: tuple[str, ...] = ("producer.", "consumer.", "admin.", "key.converter.", "value.converter.",
                                        "header.converter.", "listeners.https.", "admin.listeners.https.",
                                        "config.providers.", "metric.reporters.")

DEFAULT_KEY_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
DEFAULT_HEADER_CONVERTER = "org.apache.kafka.connect.storage.SimpleHeaderConverter"


class WorkerConfig(BaseModel):
    """A Connect worker's configuration (standalone and distributed keys)."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="allow")

    bootstrap_servers: str = Field("localhost:9092", alias="bootstrap.servers")
    client_id: str | None = Field(None, alias="client.id")
    key_converter: str = Field(DEFAULT_KEY_CONVERTER, alias="key.converter")
    value_converter: str = Field(DEFAULT_KEY_CONVERTER, alias="value.converter")
    header_converter: str = Field(DEFAULT_HEADER_CONVERTER, alias="header.converter")
    offset_storage_file_filename: str | None = Field(None, alias="offset.storage.file.filename")
    offset_flush_interval_ms: int = Field(60000, alias="offset.flush.interval.ms", ge=1)
    offset_flush_timeout_ms: int = Field(5000, alias="offset.flush.timeout.ms", ge=1)
    task_shutdown_graceful_timeout_ms: int = Field(5000, alias="task.shutdown.graceful.timeout.ms", ge=0)
    group_id: str | None = Field(None, alias="group.id")
    config_storage_topic: str | None = Field(None, alias="config.storage.topic")
    offset_storage_topic: str | None = Field(None, alias="offset.storage.topic")
    status_storage_topic: str | None = Field(None, alias="status.storage.topic")
    config_storage_replication_factor: int = Field(3, alias="config.storage.replication.factor")
    offset_storage_replication_factor: int = Field(3, alias="offset.storage.replication.factor")
    status_storage_replication_factor: int = Field(3, alias="status.storage.replication.factor")
    offset_storage_partitions: int = Field(25, alias="offset.storage.partitions")
    status_storage_partitions: int = Field(5, alias="status.storage.partitions")
    session_timeout_ms: int = Field(10000, alias="session.timeout.ms", ge=1)
    heartbeat_interval_ms: int = Field(3000, alias="heartbeat.interval.ms", ge=1)
    rebalance_timeout_ms: int = Field(60000, alias="rebalance.timeout.ms", ge=1)
    scheduled_rebalance_max_delay_ms: int = Field(300000, alias="scheduled.rebalance.max.delay.ms", ge=0)
    # How long a worker reads the config topic to catch up with an assignment before giving up
    # the round (Kafka's worker.sync.timeout.ms).
    worker_sync_timeout_ms: int = Field(3000, alias="worker.sync.timeout.ms", ge=1)
    connect_protocol: str = Field("sessioned", alias="connect.protocol")
    listeners: str = Field("http://127.0.0.1:8083", alias="listeners")
    rest_advertised_host_name: str | None = Field(None, alias="rest.advertised.host.name")
    rest_advertised_port: int | None = Field(None, alias="rest.advertised.port")
    rest_advertised_listener: str | None = Field(None, alias="rest.advertised.listener")
    exactly_once_source_support: Literal["disabled", "preparing", "enabled"] = Field(
        "disabled", alias="exactly.once.source.support")
    plugin_path: str | None = Field(None, alias="plugin.path")  # accepted for compatibility; plugins are entry points
    connector_client_config_override_policy: str = Field(
        "All", alias="connector.client.config.override.policy")

    # -- loading --------------------------------------------------------------------------

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], source: str | None = None) -> WorkerConfig:
        """Validate ``values``; a bad value raises :class:`ConfigException` whose text has one line
        per bad key ("invalid value 'abc' for offset.flush.interval.ms: expected an integer")."""
        try:
            return cls.model_validate({str(k): v for k, v in values.items()})
        except ValidationError as e:
            problems = value_errors(e, cls, lambda _key: source)
            key, value, expected, _ = problems[0]
            error = ConfigException(key, value, f"expected {expected}")
            error.args = ("\n".join(line for *_, line in problems),)
            raise error from None

    @classmethod
    def known_keys(cls) -> frozenset[str]:
        """strom's worker keys and Kafka's (:data:`WORKER_KEY_PREFIXES` are open-ended)."""
        return frozenset({f.alias or name for name, f in cls.model_fields.items()} | KAFKA_WORKER_KEYS)

    @classmethod
    def warn_unknown(cls, keys: Iterable[str], source: str | None = None) -> list[str]:
        """Kafka's "The configuration 'x' was supplied but isn't a known config." once per key no
        worker reads, with the closest known key: ``bootstrap.server`` would otherwise silently
        leave the worker on localhost:9092."""
        return warn_unknown_keys(log, [k for k in keys if not is_security_key(k)], cls.known_keys(),
                                 prefixes=WORKER_KEY_PREFIXES, kind="connect-worker", source=source,
                                 kafka_line=True)

    @classmethod
    def load(cls, path: str | os.PathLike[str], overrides: Mapping[str, Any] | None = None) -> WorkerConfig:
        values = load_config_file(path)
        values.update(overrides or {})
        source = Path(path).name
        cls.warn_unknown(values, source)
        return cls.from_mapping(values, source)

    # -- derived --------------------------------------------------------------------------

    def originals(self) -> dict[str, Any]:
        """Every key as given (aliases), defaults included, extras included."""
        out = {k: v for k, v in self.model_dump(by_alias=True).items() if v is not None}
        out.update(self.model_extra or {})
        return out

    def with_prefix(self, prefix: str) -> dict[str, Any]:
        """The keys under ``prefix`` with the prefix stripped (Kafka's ``originalsWithPrefix``)."""
        return {k[len(prefix):]: v for k, v in self.originals().items() if k.startswith(prefix)}

    @property
    def rest_advertised_scheme(self) -> str:
        """The scheme of the REST URL other workers use to reach this one."""
        return advertised_scheme(self.listeners, self.rest_advertised_listener)

    @property
    def exactly_once_enabled(self) -> bool:
        return self.exactly_once_source_support == "enabled"

    def _client_base(self) -> dict[str, Any]:
        base: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        if self.client_id:
            base["client.id"] = self.client_id
        # The worker's top-level security.protocol / sasl.* / ssl.* reach every client of the
        # worker, as in Kafka Connect (where the clients are built from the worker's originals).
        # listeners.https.* (the REST server's) are not top-level keys, so they stay out.
        base.update(security_settings(self.model_extra or {}))
        return base

    def _client(self, conf: dict[str, Any], prefix: str, overrides: Mapping[str, Any] | None) -> dict[str, Any]:
        conf.update(self.with_prefix(prefix))
        conf.update(overrides or {})
        try:
            return to_librdkafka(conf)
        except ClientSecurityError as exc:
            # the value may hold a password: Kafka shows such values as [hidden]
            raise ConfigException(exc.key, "[hidden]", exc.reason) from None

    def producer_config(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Source-task producer settings: Kafka Connect's safe defaults, then ``producer.*``, then
        ``overrides`` (a connector's ``producer.override.*``); security keys in librdkafka's names."""
        conf = self._client_base()
        conf.update({"acks": "all", "enable.idempotence": True, "linger.ms": 5,
                     "max.in.flight.requests.per.connection": 5})
        return self._client(conf, "producer.", overrides)

    def consumer_config(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        conf = self._client_base()
        conf.update({"enable.auto.commit": False, "auto.offset.reset": "earliest"})
        return self._client(conf, "consumer.", overrides)

    def admin_config(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self._client(self._client_base(), "admin.", overrides)


def advertised_scheme(listeners: str | None, advertised_listener: str | None = None) -> str:
    """``http`` or ``https``: ``rest.advertised.listener``, else http if any listener is http,
    else https (Kafka's RestServer.determineAdvertisedProtocol)."""
    if advertised_listener:
        scheme = advertised_listener.strip().lower()
        if scheme not in ("http", "https"):
            raise ConfigException("rest.advertised.listener", advertised_listener, "String must be one of: http, https")
        return scheme
    text = (listeners or "").lower()
    if "http://" in text or not text:
        return "http"
    return "https" if "https://" in text else "http"


# -------------------------------------------------------------------------------------------
# Connector
# -------------------------------------------------------------------------------------------

ConfigKind = Literal["BOOLEAN", "STRING", "INT", "LONG", "LIST", "CLASS"]
NO_DEFAULT: Any = object()


@dataclass(frozen=True, slots=True)
class ConnectorKey:
    """One connector config key (Kafka's ``ConnectorConfig``/``SinkConnectorConfig``/...)."""

    name: str
    type: ConfigKind
    default: Any
    doc: str
    group: str
    importance: str = "MEDIUM"
    valid: tuple[str, ...] | None = None
    minimum: int | None = None


def _k(name: str, type_: ConfigKind, default: Any, doc: str, group: str, **kw: Any) -> ConnectorKey:
    return ConnectorKey(name, type_, default, doc, group, **kw)


COMMON_KEYS: tuple[ConnectorKey, ...] = (
    _k("name", "STRING", NO_DEFAULT, "Globally unique name to use for this connector.", "Common",
       importance="HIGH"),
    _k("connector.class", "STRING", NO_DEFAULT,
       "Name or alias of the class for this connector (Kafka's class names work).", "Common",
       importance="HIGH"),
    _k("tasks.max", "INT", 1, "Maximum number of tasks to use for this connector.", "Common",
       importance="HIGH", minimum=1),
    _k("tasks.max.enforce", "BOOLEAN", True, "Fail tasks beyond tasks.max.", "Common", importance="LOW"),
    _k("key.converter", "CLASS", None, "Converter for record keys (default: the worker's).", "Common",
       importance="LOW"),
    _k("value.converter", "CLASS", None, "Converter for record values (default: the worker's).", "Common",
       importance="LOW"),
    _k("header.converter", "CLASS", None, "HeaderConverter for record headers (default: the worker's).",
       "Common", importance="LOW"),
    _k("config.action.reload", "STRING", "restart", "What to do when external config providers change.",
       "Common", importance="LOW", valid=("none", "restart")),
    _k("transforms", "LIST", "", "Aliases for the transformations to be applied to records.",
       "Transforms", importance="LOW"),
    _k("predicates", "LIST", "", "Aliases for the predicates used by transformations.", "Predicates",
       importance="LOW"),
    _k("errors.retry.timeout", "LONG", 0,
       "Maximum ms a failed operation is retried (0: no retries, -1: forever).", "Error Handling", minimum=-1),
    _k("errors.retry.delay.max.ms", "LONG", 60000, "Maximum ms between consecutive retries.",
       "Error Handling", minimum=1),
    _k("errors.tolerance", "STRING", "none",
       "none: any error fails the task; all: records that fail are skipped.", "Error Handling",
       valid=("none", "all")),
    _k("errors.log.enable", "BOOLEAN", False, "Log each error and its failed operation.", "Error Handling"),
    _k("errors.log.include.messages", "BOOLEAN", False, "Include the failed record in the log.",
       "Error Handling"),
    _k("errors.deadletterqueue.topic.name", "STRING", "",
       "Topic for records that failed (sinks as in Kafka; in strom also source records failing "
       "conversion or transformation).", "Error Handling"),
    _k("errors.deadletterqueue.topic.replication.factor", "INT", 3,
       "Replication factor of the DLQ topic when it is created (capped to the broker count).",
       "Error Handling", minimum=1),
    _k("errors.deadletterqueue.context.headers.enable", "BOOLEAN", False,
       "Add __connect.errors.* headers with the failure's context to DLQ records.", "Error Handling"),
    _k("errors.restart.enable", "BOOLEAN", False,
       "strom: restart a failed task automatically, with exponential backoff.", "Error Handling"),
    _k("errors.restart.max.retries", "INT", 5,
       "strom: automatic restarts of one task before it stays failed (-1: no limit).", "Error Handling",
       minimum=-1),
    _k("errors.restart.backoff.ms", "LONG", 1000, "strom: delay before the first automatic restart.",
       "Error Handling", minimum=0),
    _k("errors.restart.backoff.max.ms", "LONG", 60000, "strom: longest delay between automatic restarts.",
       "Error Handling", minimum=0),
)

SINK_KEYS: tuple[ConnectorKey, ...] = (
    _k("topics", "LIST", "", "List of topics to consume.", "Common", importance="HIGH"),
    _k("topics.regex", "STRING", "", "Regular expression of the topics to consume.", "Common",
       importance="HIGH"),
)

SOURCE_KEYS: tuple[ConnectorKey, ...] = (
    _k("exactly.once.support", "STRING", "requested",
       "Whether the connector must support exactly-once delivery.", "Exactly Once Support",
       valid=("requested", "required")),
    _k("transaction.boundary", "STRING", "poll",
       "Transaction boundaries under exactly-once: poll, interval or connector.", "Exactly Once Support",
       valid=("poll", "interval", "connector")),
    _k("transaction.boundary.interval.ms", "LONG", None,
       "Transaction length for transaction.boundary=interval (default offset.flush.interval.ms).",
       "Exactly Once Support", minimum=0),
    _k("offsets.storage.topic", "STRING", None, "A separate offsets topic for this connector.",
       "Exactly Once Support"),
    _k("topic.creation.groups", "LIST", "", "Groups of topic-creation settings.", "Topic Creation"),
)


def _parse(key: ConnectorKey, raw: Any) -> Any:
    if raw is None:
        return None
    try:
        if key.type == "BOOLEAN":
            if isinstance(raw, bool):
                value: Any = raw
            elif str(raw).strip().lower() in ("true", "false"):
                value = str(raw).strip().lower() == "true"
            else:
                raise ValueError
        elif key.type in ("INT", "LONG"):
            if isinstance(raw, bool):
                raise ValueError
            value = int(str(raw).strip())
        elif key.type == "LIST":
            items = raw if isinstance(raw, list) else str(raw).split(",")
            value = [str(p).strip() for p in items if str(p).strip()]
        else:
            value = str(raw).strip()
    except ValueError:
        raise ConfigException(key.name, raw, f"Expected a value of type {key.type}") from None
    if key.minimum is not None and value < key.minimum:
        raise ConfigException(key.name, raw, f"Value must be at least {key.minimum}")
    if key.valid is not None and value not in key.valid:
        raise ConfigException(key.name, raw, "String must be one of: " + ", ".join(key.valid))
    return value


class ConnectorConfig:
    """A connector's parsed configuration; ``kind`` is "source", "sink" or None (common keys only)."""

    def __init__(self, props: Mapping[str, Any], kind: Literal["source", "sink"] | None = None) -> None:
        errors = self._load(props, kind)
        if errors:
            raise errors[0]

    @classmethod
    def errors(cls, props: Mapping[str, Any], kind: Literal["source", "sink"] | None = None) -> list[ConfigException]:
        """Every problem of ``props`` (not only the first), for REST validation."""
        obj = cls.__new__(cls)
        return obj._load(props, kind)

    def _load(self, props: Mapping[str, Any], kind: Literal["source", "sink"] | None) -> list[ConfigException]:
        self.originals: dict[str, str] = {str(k): _to_str(v) for k, v in props.items()}
        self.kind = kind
        keys = COMMON_KEYS + (SINK_KEYS if kind == "sink" else SOURCE_KEYS if kind == "source" else ())
        self.values: dict[str, Any] = {}
        errors: list[ConfigException] = []
        for key in keys:
            raw = self.originals.get(key.name)
            fallback = None if key.default is NO_DEFAULT else key.default
            if raw is None:
                if key.default is NO_DEFAULT:
                    errors.append(ConfigException(key.name, None,
                                                  "Missing required configuration with no default value"))
                self.values[key.name] = fallback
                continue
            try:
                self.values[key.name] = _parse(key, raw)
            except ConfigException as exc:
                errors.append(exc)
                self.values[key.name] = fallback
        checks = [self._validate_name, lambda: self._validate_aliases("transforms"),
                  lambda: self._validate_aliases("predicates")]
        if kind == "sink":
            checks.insert(1, self._validate_sink)
        for check in checks:
            try:
                check()
            except ConfigException as exc:
                errors.append(exc)
        return errors

    def _validate_name(self) -> None:
        if self.values.get("name") is not None and not self.values["name"]:
            raise ConfigException("name", "", "Connector name must not be empty")

    def _validate_sink(self) -> None:
        topics, regex = self.values["topics"], self.values["topics.regex"]
        if topics and regex:
            raise ConfigException("topics", ",".join(topics),
                                  "Must configure one of topics or topics.regex, not both")
        if not topics and not regex:
            raise ConfigException("topics", "", "Must configure one of topics or topics.regex")
        if regex:
            try:
                re.compile(regex)
            except re.error as exc:
                raise ConfigException("topics.regex", regex, f"not a valid regular expression: {exc}") from None
        dlq = self.values["errors.deadletterqueue.topic.name"]
        if dlq and (dlq in topics or (regex and re.fullmatch(regex, dlq))):
            raise ConfigException("errors.deadletterqueue.topic.name", dlq,
                                  "The DLQ topic cannot be one of the topics the connector consumes")

    def _validate_aliases(self, kind: str) -> None:
        aliases = self.values[kind]
        if len(set(aliases)) != len(aliases):
            raise ConfigException(kind, ",".join(aliases), "Duplicate alias provided")
        for alias in aliases:
            if not self.originals.get(f"{kind}.{alias}.type"):
                raise ConfigException(f"{kind}.{alias}.type", None,
                                      f"Missing class for {kind[:-1]} alias {alias!r}")
        if kind == "transforms":
            preds = set(self.values["predicates"])
            for alias in aliases:
                pred = self.originals.get(f"transforms.{alias}.predicate")
                if pred and pred not in preds:
                    raise ConfigException(f"transforms.{alias}.predicate", pred,
                                          "Not one of the aliases listed in predicates")
                negate = self.originals.get(f"transforms.{alias}.negate")
                if negate is not None and negate.strip().lower() not in ("true", "false"):
                    raise ConfigException(f"transforms.{alias}.negate", negate, "Expected a value of type BOOLEAN")

    # -- accessors ------------------------------------------------------------------------

    def get(self, key: str) -> Any:
        return self.values[key]

    @property
    def name(self) -> str:
        return str(self.values["name"])

    @property
    def connector_class(self) -> str:
        return str(self.values["connector.class"])

    @property
    def tasks_max(self) -> int:
        return int(self.values["tasks.max"])

    def with_prefix(self, prefix: str) -> dict[str, str]:
        return {k[len(prefix):]: v for k, v in self.originals.items() if k.startswith(prefix)}

    @property
    def tolerance_all(self) -> bool:
        return self.values["errors.tolerance"] == "all"

    @property
    def dlq_topic(self) -> str:
        return str(self.values["errors.deadletterqueue.topic.name"] or "")


# Open-ended connector keys the framework reads (Kafka's ConnectorConfig and its enrichment).
CONNECTOR_KEY_PREFIXES: tuple[str, ...] = ("transforms.", "predicates.", "key.converter.", "value.converter.",
                                           "header.converter.", "producer.override.", "consumer.override.",
                                           "admin.override.", "errors.", "topic.creation.")


def warn_connector_typos(name: str, props: Mapping[str, Any], kind: Literal["source", "sink"] | None,
                         own_keys: Callable[[], Iterable[str]]) -> list[str]:
    """Warn once about each key of connector ``name`` that looks like a misspelt framework key
    (``task.max``, ``connector.clas``, ``errors.tolerence``...) and is not the connector's own.

    Other unknown keys stay silent: a connector may read keys its ConfigDef does not declare,
    so only a near miss of a framework key is reported as a likely mistake.
    """
    framework = [k.name for k in COMMON_KEYS + (SINK_KEYS if kind == "sink" else SOURCE_KEYS if kind == "source"
                                                   else ())]
    try:
        own = set(own_keys())  # the connector's ConfigDef; a connector failing to give one is not our error here
    except Exception:
        log.debug("connector %s: no ConfigDef to check its keys against", name, exc_info=True)
        own = set()
    suspects = [k for k in props if k not in own and k not in framework and not k.startswith(CONNECTOR_KEY_PREFIXES)
                and closest_key(k, framework) is not None]
    return warn_unknown_keys(log, suspects, framework, kind=f"connector {name}", source=f"connector {name}",
                             kafka_line=True)


def _to_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def connector_config_def(kind: Literal["source", "sink"] | None = None) -> Any:
    """The connector keys as the SPI's ``ConfigDef`` (for validation through REST)."""
    from strom.connect.api.config import NO_DEFAULT as API_NO_DEFAULT
    from strom.connect.api.config import ConfigDef, Range, ValidString

    cdef = ConfigDef()
    keys = COMMON_KEYS + (SINK_KEYS if kind == "sink" else SOURCE_KEYS if kind == "source" else ())
    for order, key in enumerate(keys):
        validator: Any = None
        if key.valid:
            validator = ValidString.in_(*key.valid)
        elif key.minimum is not None and key.default is not None:  # a null default stays valid
            validator = Range.at_least(key.minimum)
        default = API_NO_DEFAULT if key.default is NO_DEFAULT else key.default
        cdef.define(key.name, key.type, default, validator, key.importance, doc=key.doc, group=key.group,
                    order=order)
    return cdef
