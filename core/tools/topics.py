"""``strom topics``: create, list, describe, alter the config of and delete topics.

Modelled on Kafka's kafka-topics.sh (and kafka-configs.sh for ``alter-config``), with its
output formats, so scripts written for Kafka read strom's output the same way. Talks to any
Kafka-compatible broker through confluent-kafka's AdminClient.
"""

from __future__ import annotations

import argparse
import base64
from typing import TYPE_CHECKING, Any

from strom.core.config import parse_topic_config
from strom.core.tools.common import (
    ToolError,
    UsageError,
    add_client_args,
    check_bootstrap,
    client_config,
    parse_kv,
    parse_kv_list,
    unreachable_hint,
)

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

REQUEST_TIMEOUT_S = 30.0
METADATA_TIMEOUT_S = 10.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topics = subparsers.add_parser(
        "topics", help="create, list, describe, reconfigure and delete topics",
        description="Manage topics (like Kafka's kafka-topics.sh) on any Kafka-compatible broker.")
    sub = topics.add_subparsers(dest="topics_command", metavar="COMMAND", required=True)

    p = sub.add_parser("create", help="create a topic",
                       description="Create a topic. Partitions and replication factor default to the "
                                   "broker's num.partitions and default.replication.factor.")
    p.add_argument("--topic", required=True, help="name of the topic")
    p.add_argument("--partitions", type=_positive("--partitions"), metavar="N",
                   help="number of partitions (default: the broker's num.partitions)")
    p.add_argument("--replication-factor", type=_positive("--replication-factor"), metavar="R",
                   help="replicas per partition (default: the broker's default.replication.factor)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a topic config (e.g. cleanup.policy=compact); repeatable")
    p.add_argument("--if-not-exists", action="store_true", help="succeed if the topic already exists")
    add_client_args(p)
    p.set_defaults(func=cmd_create)

    p = sub.add_parser("list", help="list topic names", description="Print the topic names, one a line.")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics (__*)")
    add_client_args(p)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("describe", help="show partitions, leaders, replicas and configs",
                       description="Describe topics in kafka-topics.sh's format: a line per topic "
                                   "(TopicId, PartitionCount, ReplicationFactor, non-default Configs), "
                                   "then a line per partition (Leader, Replicas, Isr).")
    p.add_argument("--topic", help="topic to describe (default: all topics)")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics (__*)")
    add_client_args(p)
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser("delete", help="delete a topic", description="Delete a topic and all its data.")
    p.add_argument("--topic", required=True, help="name of the topic")
    p.add_argument("--if-exists", action="store_true", help="succeed if the topic does not exist")
    add_client_args(p)
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser(
        "alter-config", help="set or remove topic configs (IncrementalAlterConfigs)",
        description="Set and remove a topic's config overrides, like kafka-configs.sh --alter. "
                    "Removed keys fall back to the broker default. A list value is written in "
                    "brackets: --add-config cleanup.policy=[compact,delete].")
    p.add_argument("--topic", required=True, help="name of the topic")
    p.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=V...]",
                   help="configs to set; repeatable")
    p.add_argument("--delete-config", action="append", default=[], metavar="K[,K...]",
                   help="config overrides to remove; repeatable")
    add_client_args(p)
    p.set_defaults(func=cmd_alter_config)


def _positive(flag: str) -> Any:
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
        if n < 1:
            raise argparse.ArgumentTypeError(f"expected a positive integer, got {n}")
        return n

    parse.__name__ = flag
    return parse


def split_config_assignments(text: str, flag: str) -> list[tuple[str, str]]:
    """``k=v,k2=[a,b]`` as pairs; brackets keep a list value's commas (kafka-configs.sh syntax)."""
    items: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise UsageError(f"{flag}: unbalanced ']' in {text!r}")
        if ch == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth:
        raise UsageError(f"{flag}: unbalanced '[' in {text!r}")
    items.append("".join(current))
    pairs = []
    for item in items:
        if not item.strip():
            continue
        key, value = parse_kv(item, flag)
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        pairs.append((key, value))
    return pairs


def _admin(args: argparse.Namespace) -> AdminClient:
    from confluent_kafka.admin import AdminClient

    check_bootstrap(args.bootstrap_server)
    return AdminClient(client_config(args))


def _fail(args: argparse.Namespace, what: str, exc: Exception) -> ToolError:
    """A ToolError for a client exception; unreachable brokers get the hint to start one."""
    from confluent_kafka import KafkaError

    err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    if err is not None and err.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
                                          KafkaError._ALL_BROKERS_DOWN):
        return ToolError(f"{what}: {unreachable_hint(args.bootstrap_server)}")
    detail = f"{err.name()}: {err.str()}" if err is not None else str(exc)
    return ToolError(f"{what}: {detail}")


def _error_code(exc: Exception) -> int | None:
    from confluent_kafka import KafkaError

    if exc.args and isinstance(exc.args[0], KafkaError):
        return int(exc.args[0].code())
    return None


def _metadata(admin: AdminClient, args: argparse.Namespace, topic: str | None = None) -> Any:
    from confluent_kafka import KafkaException

    try:
        return admin.list_topics(topic=topic, timeout=METADATA_TIMEOUT_S)
    except KafkaException as e:
        raise _fail(args, "cannot fetch metadata", e) from None


# -- commands ---------------------------------------------------------------------------------


def cmd_create(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    configs = parse_kv_list(args.config, "--config")
    for key, value in configs.items():
        parse_topic_config(key, value)  # a bad key/value is a ConfigError naming it, before any I/O
    admin = _admin(args)
    new = NewTopic(args.topic, num_partitions=args.partitions or -1,
                   replication_factor=args.replication_factor or -1, config=configs)
    future = admin.create_topics([new], request_timeout=REQUEST_TIMEOUT_S)[args.topic]
    try:
        future.result()
    except KafkaException as e:
        if args.if_not_exists and _error_code(e) == KafkaError.TOPIC_ALREADY_EXISTS:
            return 0
        if _error_code(e) == KafkaError.TOPIC_ALREADY_EXISTS:
            raise ToolError(f"topic {args.topic!r} already exists (pass --if-not-exists to accept that)") from None
        raise _fail(args, f"cannot create topic {args.topic!r}", e) from None
    print(f"Created topic {args.topic}.")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    md = _metadata(_admin(args), args)
    for name in sorted(md.topics):
        if args.exclude_internal and name.startswith("__"):
            continue
        print(name)
    return 0


def _topic_configs(admin: AdminClient, args: argparse.Namespace, names: list[str]) -> dict[str, str]:
    """``k=v,...`` of each topic's configs that are not Kafka defaults (what kafka-topics shows)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    if not names:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    futures = admin.describe_configs(resources, request_timeout=REQUEST_TIMEOUT_S)
    out: dict[str, str] = {}
    for resource, future in futures.items():
        try:
            entries = future.result()
        except KafkaException as e:
            raise _fail(args, f"cannot describe configs of topic {resource.name!r}", e) from None
        shown = [f"{e.name}={e.value}" for e in sorted(entries.values(), key=lambda e: e.name)
                 if not e.is_default and e.source != ConfigSource.DEFAULT_CONFIG and e.value is not None]
        out[resource.name] = ",".join(shown)
    return out


def cmd_describe(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaError, KafkaException, TopicCollection

    admin = _admin(args)
    if args.topic:
        names = [args.topic]
    else:
        names = sorted(n for n in _metadata(admin, args).topics
                       if not (args.exclude_internal and n.startswith("__")))
    if not names:
        return 0
    futures = admin.describe_topics(TopicCollection(names), request_timeout=REQUEST_TIMEOUT_S)
    descriptions = []
    for name in names:
        try:
            descriptions.append(futures[name].result())
        except KafkaException as e:
            if _error_code(e) == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise ToolError(f"topic {name!r} does not exist (list them with `strom topics list`)") from None
            raise _fail(args, f"cannot describe topic {name!r}", e) from None
    configs = _topic_configs(admin, args, names)
    for desc in descriptions:
        print(format_topic_description(desc, configs.get(desc.name, "")))
    return 0


def kafka_uuid(value: Any) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 without padding.

    librdkafka's own ``str()`` uses the standard alphabet (``+`` and ``/``), which Kafka's
    tools never print and ``Uuid.fromString`` rejects.
    """
    if value is None:
        return "none"
    mask = (1 << 64) - 1
    raw = ((value.get_most_significant_bits() & mask).to_bytes(8, "big")
           + (value.get_least_significant_bits() & mask).to_bytes(8, "big"))
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def format_topic_description(desc: Any, configs: str) -> str:
    """kafka-topics.sh --describe output of one ``TopicDescription``."""
    partitions = sorted(desc.partitions, key=lambda p: p.id)
    rf = len(partitions[0].replicas) if partitions else 0
    lines = [f"Topic: {desc.name}\tTopicId: {kafka_uuid(desc.topic_id)}\tPartitionCount: {len(partitions)}\t"
             f"ReplicationFactor: {rf}\tConfigs: {configs}"]
    for p in partitions:
        leader = p.leader.id if p.leader is not None and p.leader.id >= 0 else "none"
        replicas = ",".join(str(n.id) for n in p.replicas)
        isr = ",".join(str(n.id) for n in p.isr)
        lines.append(f"\tTopic: {desc.name}\tPartition: {p.id}\tLeader: {leader}\tReplicas: {replicas}\tIsr: {isr}")
    return "\n".join(lines)


def cmd_delete(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaError, KafkaException

    admin = _admin(args)
    future = admin.delete_topics([args.topic], request_timeout=REQUEST_TIMEOUT_S)[args.topic]
    try:
        future.result()
    except KafkaException as e:
        if _error_code(e) == KafkaError.UNKNOWN_TOPIC_OR_PART:
            if args.if_exists:
                return 0
            raise ToolError(f"topic {args.topic!r} does not exist (pass --if-exists to accept that)") from None
        raise _fail(args, f"cannot delete topic {args.topic!r}", e) from None
    return 0


def cmd_alter_config(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    to_set: dict[str, str] = {}
    for text in args.add_config:
        to_set.update(split_config_assignments(text, "--add-config"))
    to_delete = [k.strip() for text in args.delete_config for k in text.split(",") if k.strip()]
    if not to_set and not to_delete:
        raise UsageError("alter-config needs --add-config K=V and/or --delete-config K")
    both = sorted(set(to_set) & set(to_delete))
    if both:
        raise UsageError(f"{', '.join(both)} given to both --add-config and --delete-config")
    for key, value in to_set.items():
        parse_topic_config(key, value)
    for key in to_delete:
        _check_known(key)
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in to_set.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in to_delete]
    resource = ConfigResource(ResourceType.TOPIC, args.topic, incremental_configs=entries)
    admin = _admin(args)
    futures = admin.incremental_alter_configs([resource], request_timeout=REQUEST_TIMEOUT_S)
    try:
        next(iter(futures.values())).result()
    except KafkaException as e:
        raise _fail(args, f"cannot alter the config of topic {args.topic!r}", e) from None
    print(f"Completed updating config for topic {args.topic}.")
    return 0


def _check_known(key: str) -> None:
    from strom.core.config import TOPIC_CONFIGS
    from strom.core.exceptions import ConfigError

    if key not in TOPIC_CONFIGS:
        raise ConfigError(key, None, "a known topic config key", unknown=True)
