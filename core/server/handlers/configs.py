"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).

DescribeConfigs returns every topic or broker config with its value, its source (topic
override, static broker config from server.properties, or Kafka's default) and, on request,
its synonyms and documentation. Alterations go to the controller, which validates them and
commits ConfigRecords to the metadata log; brokers apply them when they replay the records.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.config import TOPIC_CONFIG_DEFS, format_config_value
from strom.core.controller.quorum_controller import OP_SET, AlterConfigsResource, ItemResult
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

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
# Kafka's ConfigSource codes
TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
CONFIG_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7,
                "CLASS": 8, "PASSWORD": 9}
_SENSITIVE_MARKERS = ("password", "secret", "jaas")


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


def describe_broker(deps: ControllerDeps, resource_name: str, keys: set[str] | None, synonyms: bool, docs: bool,
                    m: Any) -> list[Any]:
    image = deps.image
    dynamic = dict(image.configs.get((BROKER, resource_name), {})) if resource_name else {}
    cluster_default = dict(image.configs.get((BROKER, ""), {}))
    fields = type(deps.config).model_fields
    out = []
    for name, value, is_default in deps.config.describe():
        if keys is not None and name not in keys:
            continue
        syn: list[tuple[str, str | None, int]] = []
        if name in dynamic:
            syn.append((name, dynamic[name], DYNAMIC_BROKER_CONFIG))
        if name in cluster_default:
            syn.append((name, cluster_default[name], DYNAMIC_DEFAULT_BROKER_CONFIG))
        syn.append((name, value, DEFAULT_CONFIG if is_default else STATIC_BROKER_CONFIG))
        sensitive = any(marker in name for marker in _SENSITIVE_MARKERS)
        doc = next((f.description for f in fields.values() if f.alias == name), None)
        out.append(m.make(
            "DescribeConfigsResourceResult", name=name, value=None if sensitive else syn[0][1], read_only=True,
            config_source=syn[0][2], is_sensitive=sensitive,
            synonyms=tuple(m.make("DescribeConfigsSynonym", name=n, value=v, source=s) for n, v, s in syn)
            if synonyms else (),
            config_type=0, documentation=doc if docs else None))
    return out


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
            elif r.resource_type == BROKER:
                if not authorize_cluster(deps, ctx, "DESCRIBE_CONFIGS"):
                    code = int(ErrorCode.cluster_authorization_failed)
                elif r.resource_name not in ("", str(deps.node_id)):
                    code, message = int(ErrorCode.invalid_request), f"Unexpected broker id {r.resource_name}"
                else:
                    configs = describe_broker(deps, r.resource_name, keys, synonyms, docs, m)
            elif r.resource_type == BROKER_LOGGER:
                configs = []
            else:
                code, message = int(ErrorCode.invalid_request), f"Unsupported resource type {r.resource_type}"
        except Exception as e:
            code, message = error_of(e)
        results.append(m.make("DescribeConfigsResult", error_code=code, error_message=message,
                              resource_type=r.resource_type, resource_name=r.resource_name,
                              configs=tuple(configs)))
    return m.make("DescribeConfigsResponse", throttle_time=response_throttle(deps, ctx), results=tuple(results))


class _AlterBase:
    """Shared answer building for both alter-config APIs."""

    API_KEY = 0

    @classmethod
    async def _alter(cls, deps: ControllerDeps, ctx: RequestContext, request: Any, op_of: Callable[[Any], int],
                     alter: Callable[..., Awaitable[list[ItemResult]]]) -> Any:
        """Hand the authorized resources to the controller's ``alter`` (``op_of`` gives each
        config's operation) and answer for every resource of the request."""
        denied = cls._denied(deps, ctx, request.resources)
        wanted = [AlterConfigsResource(r.resource_type, r.resource_name,
                                       [(c.name, op_of(c), c.value) for c in r.configs])
                  for r in request.resources if (r.resource_type, r.resource_name) not in denied]
        results = await alter(wanted, validate_only=bool(request.validate_only)) if wanted else []
        return await cls._answer(deps, ctx, request, results, denied)

    @classmethod
    async def _answer(cls, deps: ControllerDeps, ctx: RequestContext, request: Any, results: list[Any],
                      denied: dict[tuple[int, str], int]) -> Any:
        m = response_messages(cls.API_KEY, ctx.api_version)
        by_key = {(r.resource_type, r.name): r for r in results}
        out = []
        for r in request.resources:
            key = (r.resource_type, r.resource_name)
            if key in denied:
                code, message = denied[key], None
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
        if any(r.resource_type == BROKER for r in resources) and not authorize_cluster(deps, ctx, "ALTER_CONFIGS"):
            for r in resources:
                if r.resource_type == BROKER:
                    out[(BROKER, r.resource_name)] = int(ErrorCode.cluster_authorization_failed)
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
