"""``strom configs``: describe and alter topic and broker configs (Kafka's kafka-configs.sh).

``--describe`` prints what kafka-configs.sh prints: the dynamic configs (``--all``: every
config) of each entity, one ``name=value sensitive=... synonyms={SOURCE:name=value, ...}``
line each. ``--alter`` sends IncrementalAlterConfigs with ``--add-config`` (SET) and
``--delete-config`` (DELETE). Brokers are named by id. The cluster-wide broker default
(``--entity-default``) is the broker resource with an empty name, which confluent-kafka's
ConfigResource refuses to build: for it the tool sends DescribeConfigs v4 and
IncrementalAlterConfigs v1 itself (kio codecs, one socket to the first bootstrap server; PLAINTEXT
listeners only). Works against any Kafka cluster.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TypeVar

from strom.core.tools.common import ToolError, UsageError, add_client_args, admin_client, kafka_failure
from strom.core.tools.topics import config_changes

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient, ConfigEntry, ConfigResource
    from kio.static.protocol import Entity

_Response = TypeVar("_Response", bound="Entity")

REQUEST_TIMEOUT_S = 30.0
# ConfigEntry sources each entity's "Dynamic configs" listing keeps (Kafka's ConfigCommand).
DYNAMIC_SOURCES = {"topics": "DYNAMIC_TOPIC_CONFIG", "brokers": "DYNAMIC_BROKER_CONFIG",
                   "broker-default": "DYNAMIC_DEFAULT_BROKER_CONFIG"}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "configs", help="describe or alter topic and broker configs",
        description="Describe or alter the configs of topics and brokers, like Kafka's kafka-configs.sh. "
                    "--describe lists the dynamic configs (--all: every config with its source and "
                    "synonyms); --alter sets (--add-config k=v,k2=[a,b]) and removes (--delete-config k,k2) "
                    "them. Broker entities are node ids; --entity-default is the cluster-wide default.")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="list configs of the entity (or all of its type)")
    action.add_argument("--alter", action="store_true", help="set and remove configs of the entity")
    p.add_argument("--entity-type", required=True, choices=("topics", "brokers"), help="the kind of entity")
    p.add_argument("--entity-name", metavar="NAME", help="topic name or broker id (default: all, for --describe)")
    p.add_argument("--entity-default", action="store_true",
                   help="with --entity-type brokers: the cluster-wide default of every broker")
    p.add_argument("--all", action="store_true", help="with --describe: every config, not only dynamic ones")
    p.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=V...]",
                   help="with --alter: configs to set (a list value in brackets); repeatable")
    p.add_argument("--delete-config", action="append", default=[], metavar="K[,K...]",
                   help="with --alter: configs to remove; repeatable")
    add_client_args(p)
    p.set_defaults(func=cmd_configs)


def _resources(args: argparse.Namespace, admin: AdminClient) -> list[tuple[str, str]]:
    """``(kind, name)`` of the entities addressed: kind is topics, brokers or broker-default."""
    if args.entity_default:
        if args.entity_type != "brokers":
            raise UsageError("--entity-default goes with --entity-type brokers")
        if args.entity_name is not None:
            raise UsageError("--entity-name and --entity-default cannot be used together")
        return [("broker-default", "")]
    if args.entity_name is not None:
        if args.entity_type == "brokers" and not args.entity_name.isdigit():
            raise UsageError(f"--entity-name of a broker is its node id, got {args.entity_name!r}")
        return [(args.entity_type, args.entity_name)]
    if args.alter:
        raise UsageError("--alter needs --entity-name")
    try:
        md = admin.list_topics(timeout=10)
    except Exception as e:
        raise kafka_failure(args, "cannot fetch metadata", e) from None
    if args.entity_type == "topics":
        return [("topics", name) for name in sorted(md.topics)]
    return [("brokers", str(node)) for node in sorted(md.brokers)]


def _config_resource(kind: str, name: str, **kwargs: Any) -> ConfigResource:
    from confluent_kafka.admin import ConfigResource, ResourceType

    return ConfigResource(ResourceType.TOPIC if kind == "topics" else ResourceType.BROKER, name, **kwargs)


def _heading(kind: str, name: str, all_configs: bool) -> str:
    if kind == "broker-default":
        return "Default configs for brokers in the cluster are:"
    word = "topic" if kind == "topics" else "broker"
    return f"{'All' if all_configs else 'Dynamic'} configs for {word} {name} are:"


def source_name(source: object) -> str:
    """Kafka's name of a config source (confluent-kafka gives an int or its ConfigSource enum)."""
    from confluent_kafka.admin import ConfigSource

    return ConfigSource(source).name if isinstance(source, int) else getattr(source, "name", str(source))


def format_entry(entry: ConfigEntry) -> str:
    """One config line as kafka-configs.sh prints it (a sensitive value shows as null)."""
    value = "null" if entry.is_sensitive or entry.value is None else entry.value
    synonyms = ", ".join(f"{source_name(s.source)}:{s.name}={'null' if s.value is None else s.value}"
                         for s in entry.synonyms.values())
    return f"  {entry.name}={value} sensitive={'true' if entry.is_sensitive else 'false'} synonyms={{{synonyms}}}"


# -- the cluster-wide broker default, over the wire ---------------------------------------------

BROKER_RESOURCE = 4  # Kafka's ConfigResource.Type.BROKER
DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44


def _wire_call(args: argparse.Namespace, api_key: int, version: int, request: Entity,
               response_type: type[_Response]) -> _Response:
    """One flexible-version request to the first bootstrap server; its decoded response."""
    from strom import kafka_wire
    from strom.core.tools.common import client_config, unreachable_hint

    if not kafka_wire.plaintext(client_config(args)):
        raise ToolError("--entity-default works over PLAINTEXT listeners only (confluent-kafka cannot address "
                        "the cluster default); use kafka-configs.sh --entity-default on a secured listener")
    host, _, port = args.bootstrap_server.split(",")[0].strip().rpartition(":")
    try:
        response = kafka_wire.call(host, int(port), api_key, version, request, response_type,
                                   client_id="strom-configs", timeout=REQUEST_TIMEOUT_S)
    except OSError:
        raise ToolError(unreachable_hint(args.bootstrap_server)) from None
    return response


def _describe_default(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import ConfigSource
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
    from kio.schema.describe_configs.v4.response import DescribeConfigsResponse
    from kio.static.primitive import i8

    request = DescribeConfigsRequest(resources=(DescribeConfigsResource(
        resource_type=i8(BROKER_RESOURCE), resource_name="", configuration_keys=None),),
        include_synonyms=True, include_documentation=False)
    response = _wire_call(args, DESCRIBE_CONFIGS, 4, request, DescribeConfigsResponse)
    result = response.results[0]
    if result.error_code.value != 0:
        raise ToolError(f"cannot describe the broker default: {result.error_code.name}: {result.error_message}")
    print(_heading("broker-default", "", args.all))
    for c in sorted(result.configs, key=lambda c: c.name):
        if args.all or int(c.config_source) == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value:
            value = "null" if c.is_sensitive or c.value is None else c.value
            synonyms = ", ".join(f"{ConfigSource(int(x.source)).name}:{x.name}={'null' if x.value is None else x.value}"
                                 for x in c.synonyms)
            print(f"  {c.name}={value} sensitive={'true' if c.is_sensitive else 'false'} synonyms={{{synonyms}}}")
    return 0


def _alter_default(args: argparse.Namespace, to_set: dict[str, str], to_delete: list[str]) -> None:
    from kio.schema.incremental_alter_configs.v1.request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )
    from kio.schema.incremental_alter_configs.v1.response import IncrementalAlterConfigsResponse
    from kio.static.primitive import i8

    configs = tuple(AlterableConfig(name=k, config_operation=i8(0), value=v) for k, v in to_set.items())
    configs += tuple(AlterableConfig(name=k, config_operation=i8(1), value=None) for k in to_delete)
    request = IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=i8(BROKER_RESOURCE), resource_name="", configs=configs),), validate_only=False)
    response = _wire_call(args, INCREMENTAL_ALTER_CONFIGS, 1, request, IncrementalAlterConfigsResponse)
    result = response.responses[0]
    if result.error_code.value != 0:
        raise ToolError(f"cannot alter the configs of the broker default: {result.error_code.name}: "
                        f"{result.error_message}")


def cmd_configs(args: argparse.Namespace) -> int:
    if args.describe and (args.add_config or args.delete_config):
        raise UsageError("--add-config and --delete-config go with --alter")
    if args.alter and args.all:
        raise UsageError("--all goes with --describe")
    admin = admin_client(args)
    entities = _resources(args, admin)
    if args.alter:
        return _alter(args, admin, entities[0])
    if entities == [("broker-default", "")]:
        return _describe_default(args)
    return _describe(args, admin, entities)


def _describe(args: argparse.Namespace, admin: AdminClient, entities: list[tuple[str, str]]) -> int:
    from confluent_kafka import KafkaError, KafkaException

    if not entities:
        return 0
    resources = [_config_resource(kind, name) for kind, name in entities]
    futures = admin.describe_configs(resources, request_timeout=REQUEST_TIMEOUT_S)
    for (kind, name), resource in zip(entities, resources, strict=True):
        try:
            entries = futures[resource].result()
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise ToolError(f"topic {name!r} does not exist (list them with `strom topics list`)") from None
            raise kafka_failure(args, f"cannot describe the configs of {kind} {name!r}", e) from None
        print(_heading(kind, name, args.all))
        wanted = DYNAMIC_SOURCES[kind]
        for entry in sorted(entries.values(), key=lambda e: e.name):
            if args.all or source_name(entry.source) == wanted:
                print(format_entry(entry))
    return 0


def _alter(args: argparse.Namespace, admin: AdminClient, entity: tuple[str, str]) -> int:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    from strom.core.config import TOPIC_CONFIGS, check_topic_config, unknown_topic_config

    kind, name = entity
    to_set, to_delete = config_changes(args.add_config, args.delete_config, "--alter")
    if kind == "topics":
        # Checked here so a typo is named before any request (the broker would say less).
        for key, value in to_set.items():
            check_topic_config(key, value)
        for key in to_delete:
            if key not in TOPIC_CONFIGS:
                raise unknown_topic_config(key)
    if kind == "broker-default":
        _alter_default(args, to_set, to_delete)
        print("Completed updating default config for brokers in the cluster.")
        return 0
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in to_set.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in to_delete]
    resource = _config_resource(kind, name, incremental_configs=entries)
    futures = admin.incremental_alter_configs([resource], request_timeout=REQUEST_TIMEOUT_S)
    try:
        next(iter(futures.values())).result()
    except Exception as e:
        what = "the broker default" if kind == "broker-default" else f"{kind[:-1]} {name}"
        raise kafka_failure(args, f"cannot alter the configs of {what}", e) from None
    if kind == "broker-default":
        print("Completed updating default config for brokers in the cluster.")
    else:
        print(f"Completed updating config for {'topic' if kind == 'topics' else 'broker'} {name}.")
    return 0
