"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).

DescribeConfigs returns every config of a topic, a broker (every key of Kafka 4.3.1's broker
ConfigDef plus strom's own, :func:`strom.core.dynamic_config.describe_broker`), a group
(KIP-848's group configs, :mod:`strom.core.group_config`) or a client-metrics subscription
(KIP-714), with its value, its source and, on request, its synonyms and documentation.

Alterations go to the controller, which validates them and commits ConfigRecords to the
metadata log; brokers apply them when they replay the records. As in Kafka, a broker resource is
checked here first (Kafka's ConfigAdminManager): duplicate keys, null values, the broker id,
static-only keys ("Cannot update these configs dynamically: [log.dirs]"), per-broker keys at
the cluster level and values that do not parse are refused before anything is forwarded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.config import TOPIC_CONFIG_DEFS, format_config_value
from strom.core.controller.quorum_controller import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    AlterConfigsResource,
    ItemResult,
)
from strom.core.dynamic_config import (
    CLIENT_METRICS_CONFIG,
    CLIENT_METRICS_KEYS,
    CONFIG_TYPE_IDS,
    KAFKA_BROKER_KEYS,
    ConfigEntry,
    describe_broker,
    validate_dynamic_broker_configs,
)
from strom.core.errors import InvalidConfigurationError, InvalidRequestError
from strom.core.group_config import describe_group
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import (
    authorize_cluster,
    authorize_topics,
    error_of,
    response_throttle,
)

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ControllerDeps
    from strom.core.server.handlers._kio_types import (
        AlterConfigsRequest,
        AlterConfigsResponse,
        DescribeConfigsRequest,
        DescribeConfigsResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )

API_KEY = 32
VERSIONS = (1, 4)

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
# Kafka's ConfigSource codes
TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
CONFIG_TYPES = CONFIG_TYPE_IDS


def _static_broker_values(deps: ControllerDeps) -> dict[str, str]:
    """Broker properties set explicitly in the broker's static configuration."""
    return {name: value for name, value, is_default in deps.config.describe() if not is_default and value is not None}


def describe_topic(deps: ControllerDeps, name: str, keys: set[str] | None, synonyms: bool, docs: bool,
                   m: Any) -> list[Any]:
    image = deps.image
    overrides = image.configs.get((TOPIC, name), {})
    per_broker = image.configs.get((BROKER, str(deps.node_id)), {})
    cluster_default = image.configs.get((BROKER, ""), {})
    static = _static_broker_values(deps)
    defaults = deps.config.topic_defaults()
    out = []
    for d in TOPIC_CONFIG_DEFS:
        if keys is not None and d.name not in keys:
            continue
        syn: list[tuple[str, str | None, int]] = []
        if d.name in overrides:
            syn.append((d.name, overrides[d.name], TOPIC_CONFIG))
        if d.synonym and d.synonym in per_broker:
            syn.append((d.synonym, per_broker[d.synonym], DYNAMIC_BROKER_CONFIG))
        if d.synonym and d.synonym in cluster_default:
            syn.append((d.synonym, cluster_default[d.synonym], DYNAMIC_DEFAULT_BROKER_CONFIG))
        if d.synonym and d.synonym in static:
            syn.append((d.synonym, static[d.synonym], STATIC_BROKER_CONFIG))
        default_value = format_config_value(defaults[d.name])
        syn.append((d.synonym or d.name, format_config_value(d.default), DEFAULT_CONFIG))
        value, source = syn[0][1], syn[0][2]
        if source == STATIC_BROKER_CONFIG:
            value = default_value  # parsed form (e.g. log.retention.hours -> retention.ms)
        out.append(m.make(
            "DescribeConfigsResourceResult", name=d.name, value=value, read_only=False, config_source=source,
            is_sensitive=False,
            synonyms=tuple(m.make("DescribeConfigsSynonym", name=n, value=v, source=s) for n, v, s in syn)
            if synonyms else (),
            config_type=CONFIG_TYPES[d.type], documentation=d.doc if docs else None))
    return out


def _entries(entries: Sequence[ConfigEntry], keys: set[str] | None, synonyms: bool, docs: bool,
             m: Any) -> list[Any]:
    return [m.make("DescribeConfigsResourceResult", name=e.name, value=e.value, read_only=e.read_only,
                   config_source=e.source, is_sensitive=e.sensitive,
                   synonyms=tuple(m.make("DescribeConfigsSynonym", name=n, value=v, source=s)
                                  for n, v, s in e.synonyms) if synonyms else (),
                   config_type=e.config_type, documentation=e.doc if docs else None)
            for e in entries if keys is None or e.name in keys]


def describe_broker_configs(deps: ControllerDeps, resource_name: str, keys: set[str] | None, synonyms: bool,
                            docs: bool, m: Any) -> list[Any]:
    image = deps.image
    entries = describe_broker(deps.config, image.configs.get((BROKER, str(deps.node_id)), {}),
                              image.configs.get((BROKER, ""), {}), per_broker_resource=bool(resource_name))
    return _entries(entries, keys, synonyms, docs, m)


def client_metrics_entries(values: Mapping[str, str]) -> list[ConfigEntry]:
    """A subscription's keys (Kafka lists all three; the unset ones with their defaults)."""
    out = []
    for key in sorted(CLIENT_METRICS_KEYS.values(), key=lambda k: k.name):
        if key.name in values:
            out.append(ConfigEntry(key.name, values[key.name], CLIENT_METRICS_CONFIG, False, False,
                                   CONFIG_TYPE_IDS[key.type], ((key.name, values[key.name], CLIENT_METRICS_CONFIG),),
                                   key.doc))
        else:
            out.append(ConfigEntry(key.name, key.default, DEFAULT_CONFIG, False, False, CONFIG_TYPE_IDS[key.type],
                                   (), key.doc))
    return out


def _broker_id(deps: ControllerDeps, name: str, *, describe: bool) -> None:
    """Kafka's checks of a broker resource name ("" is the cluster default)."""
    if not name:
        return
    try:
        node = int(name)
    except ValueError:
        what = "Broker id" if describe else "Node id"
        raise InvalidRequestError(f"{what} must be an integer, but it is: {name}") from None
    if node != deps.node_id:
        expected = f"{deps.node_id} or empty string" if describe else str(deps.node_id)
        raise InvalidRequestError(f"Unexpected broker id, expected {expected}, but received {name}")


async def handle(deps: ControllerDeps, ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    m = response_messages(API_KEY, ctx.api_version)
    synonyms = bool(getattr(request, "include_synonyms", False))
    docs = bool(getattr(request, "include_documentation", False))
    topic_names = [r.resource_name for r in request.resources if r.resource_type == TOPIC]
    denied = authorize_topics(deps, ctx, "DESCRIBE_CONFIGS", topic_names)
    results = []
    for r in request.resources:
        keys = set(r.configuration_keys) if r.configuration_keys else None
        code, message, configs = 0, None, []
        try:
            if r.resource_type == TOPIC:
                if r.resource_name in denied:
                    code = int(ErrorCode.topic_authorization_failed)
                elif r.resource_name not in deps.image.topics:
                    code = int(ErrorCode.unknown_topic_or_partition)
                    message = f"Topic {r.resource_name} does not exist"
                else:
                    configs = describe_topic(deps, r.resource_name, keys, synonyms, docs, m)
            elif r.resource_type in (BROKER, BROKER_LOGGER, CLIENT_METRICS) and \
                    not authorize_cluster(deps, ctx, "DESCRIBE_CONFIGS"):
                code = int(ErrorCode.cluster_authorization_failed)
            elif r.resource_type == BROKER:
                _broker_id(deps, r.resource_name, describe=True)
                configs = describe_broker_configs(deps, r.resource_name, keys, synonyms, docs, m)
            elif r.resource_type == BROKER_LOGGER:
                configs = []
            elif r.resource_type == GROUP:
                if not deps.authorize(ctx, "DESCRIBE_CONFIGS", "GROUP", [r.resource_name])[0]:
                    code = int(ErrorCode.group_authorization_failed)
                elif not r.resource_name:
                    raise InvalidRequestError("Group name must not be empty")
                else:
                    overrides = deps.image.configs.get((GROUP, r.resource_name), {})
                    configs = _entries(describe_group(deps.config, overrides), keys, synonyms, docs, m)
            elif r.resource_type == CLIENT_METRICS:
                if not r.resource_name:
                    raise InvalidRequestError("Client metrics subscription name must not be empty")
                values = deps.image.configs.get((CLIENT_METRICS, r.resource_name), {})
                configs = _entries(client_metrics_entries(values), keys, synonyms, docs, m)
            else:
                code, message = int(ErrorCode.invalid_request), f"Unsupported resource type: {r.resource_type}"
        except Exception as e:
            code, message = error_of(e)
        results.append(m.make("DescribeConfigsResult", error_code=code, error_message=message,
                              resource_type=r.resource_type, resource_name=r.resource_name,
                              configs=tuple(configs)))
    return m.make("DescribeConfigsResponse", throttle_time=response_throttle(deps, ctx), results=tuple(results))


def preprocess_broker(deps: ControllerDeps, name: str, ops: Sequence[tuple[str, int, str | None]], *,
                      legacy: bool) -> None:
    """Kafka's ConfigAdminManager.validateBrokerConfigChange: apply ``ops`` to the broker
    resource's stored dynamic configs (legacy: replace them) and check the result."""
    _broker_id(deps, name, describe=False)
    props: dict[str, str] = {} if legacy else dict(deps.image.configs.get((BROKER, name), {}))
    for key, op, value in ops:
        if op == OP_SET and value is not None:
            props[key] = value
        elif op == OP_DELETE:
            props.pop(key, None)
        elif op in (OP_APPEND, OP_SUBTRACT):
            known = KAFKA_BROKER_KEYS.get(key)
            if known is None or known.type != "LIST":
                verb = "append" if op == OP_APPEND else "subtract"
                raise InvalidConfigurationError(f"Config value {verb} is not allowed for config key: {key}")
        else:
            raise InvalidRequestError(f"Unknown operations type {op}")
    validate_dynamic_broker_configs(props, bool(name))


def preprocess(deps: ControllerDeps, resources: Sequence[Any], ops_of: Callable[[Any], int], *,
               legacy: bool) -> dict[tuple[int, str], tuple[int, str | None]]:
    """The broker-side checks of an alter request (Kafka's ConfigAdminManager.preprocess): the
    resources that fail them, with their error; the rest go to the controller."""
    out: dict[tuple[int, str], tuple[int, str | None]] = {}
    seen: dict[tuple[int, str], int] = {}
    for r in resources:
        seen[(r.resource_type, r.resource_name)] = seen.get((r.resource_type, r.resource_name), 0) + 1
    for r in resources:
        key = (r.resource_type, r.resource_name)
        if seen[key] > 1:
            out[key] = (int(ErrorCode.invalid_request), "Each resource must appear at most once.")
            continue
        try:
            names = [c.name for c in r.configs]
            if len(set(names)) != len(names):
                raise InvalidRequestError("Error due to duplicate config keys")
            nulls = [c.name for c in r.configs if c.value is None and (legacy or ops_of(c) != OP_DELETE)]
            if nulls:
                raise InvalidRequestError("Null value not supported for : " + ", ".join(nulls))
            if r.resource_type == BROKER:
                preprocess_broker(deps, r.resource_name, [(c.name, ops_of(c), c.value) for c in r.configs],
                                  legacy=legacy)
            elif r.resource_type not in (TOPIC, CLIENT_METRICS, GROUP):
                raise InvalidRequestError(f"Unknown resource type {r.resource_type}")
        except Exception as e:
            out[key] = error_of(e)
    return out


class _AlterBase:
    """Shared answer building for both alter-config APIs."""

    API_KEY = 0

    @classmethod
    async def _alter(cls, deps: ControllerDeps, ctx: RequestContext, request: Any, op_of: Callable[[Any], int],
                     alter: Callable[..., Awaitable[list[ItemResult]]]) -> Any:
        """Hand the authorized resources to the controller's ``alter`` (``op_of`` gives each
        config's operation) and answer for every resource of the request."""
        denied: dict[tuple[int, str], tuple[int, str | None]] = {
            k: (code, None) for k, code in cls._denied(deps, ctx, request.resources).items()}
        checked = [r for r in request.resources if (r.resource_type, r.resource_name) not in denied]
        denied.update(preprocess(deps, checked, op_of, legacy=cls.API_KEY == 33))
        wanted = [AlterConfigsResource(r.resource_type, r.resource_name,
                                       [(c.name, op_of(c), c.value) for c in r.configs])
                  for r in request.resources if (r.resource_type, r.resource_name) not in denied]
        results = await alter(wanted, validate_only=bool(request.validate_only)) if wanted else []
        return await cls._answer(deps, ctx, request, results, denied)

    @classmethod
    async def _answer(cls, deps: ControllerDeps, ctx: RequestContext, request: Any, results: list[Any],
                      denied: dict[tuple[int, str], tuple[int, str | None]]) -> Any:
        m = response_messages(cls.API_KEY, ctx.api_version)
        by_key = {(r.resource_type, r.name): r for r in results}
        out = []
        for r in request.resources:
            key = (r.resource_type, r.resource_name)
            if key in denied:
                code, message = denied[key]
            else:
                code, message = by_key[key].error_code, by_key[key].error_message
            out.append(m.make("AlterConfigsResourceResponse", error_code=code, error_message=message,
                              resource_type=r.resource_type, resource_name=r.resource_name))
        return m.make(f"{'Incremental' if cls.API_KEY == 44 else ''}AlterConfigsResponse",
                      throttle_time=response_throttle(deps, ctx), responses=tuple(out))

    @staticmethod
    def _denied(deps: ControllerDeps, ctx: RequestContext, resources: Any) -> dict[tuple[int, str], int]:
        topics = [r.resource_name for r in resources if r.resource_type == TOPIC]
        denied_topics = authorize_topics(deps, ctx, "ALTER_CONFIGS", topics)
        out = {(TOPIC, n): int(ErrorCode.topic_authorization_failed) for n in denied_topics}
        cluster_types = (BROKER, BROKER_LOGGER, CLIENT_METRICS)
        if any(r.resource_type in cluster_types for r in resources) and \
                not authorize_cluster(deps, ctx, "ALTER_CONFIGS"):
            for r in resources:
                if r.resource_type in cluster_types:
                    out[(r.resource_type, r.resource_name)] = int(ErrorCode.cluster_authorization_failed)
        groups = [r.resource_name for r in resources if r.resource_type == GROUP]
        if groups:
            for group, allowed in zip(groups, deps.authorize(ctx, "ALTER_CONFIGS", "GROUP", groups), strict=True):
                if not allowed:
                    out[(GROUP, group)] = int(ErrorCode.group_authorization_failed)
        return out


class AlterConfigs(_AlterBase):
    """AlterConfigs (33): replaces a resource's whole set of overrides."""

    API_KEY = 33
    VERSIONS = (0, 2)

    @classmethod
    async def handle(cls, deps: ControllerDeps, ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
        # Every listed key is SET; the controller drops the overrides not listed (legacy).
        return await cls._alter(deps, ctx, request, lambda c: OP_SET, deps.controller.legacy_alter_configs)


class IncrementalAlterConfigs(_AlterBase):
    """IncrementalAlterConfigs (44): SET (0), DELETE (1), APPEND (2), SUBTRACT (3) per key."""

    API_KEY = 44
    VERSIONS = (0, 1)

    @classmethod
    async def handle(cls, deps: ControllerDeps, ctx: RequestContext, request: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
        return await cls._alter(deps, ctx, request, lambda c: int(c.config_operation),
                                deps.controller.incremental_alter_configs)
