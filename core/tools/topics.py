"""``strom topics``: create, list, describe, alter the config of and delete topics.

Modelled on Kafka's kafka-topics.sh (and kafka-configs.sh for ``alter-config``), with its
output formats, so scripts written for Kafka read strom's output the same way. Talks to any
Kafka-compatible broker through confluent-kafka's AdminClient.

``describe`` adds to each partition line of a tiered topic (``remote.storage.enable=true``,
KIP-405) its log start offset (remote data included), its local log start offset (ListOffsets
-2 and -4, KIP-1005, asked of the leader in Kafka's wire format: librdkafka cannot send -4), and
the start offset and size of its data in remote storage, read from ``__remote_log_metadata``
(the COPY_SEGMENT_FINISHED segments, as Kafka's topic-based metadata manager records them).
"""

from __future__ import annotations

import argparse
import base64
from typing import TYPE_CHECKING, Any

from strom.core.config import check_topic_config
from strom.core.tools.common import (
    ToolError,
    UsageError,
    add_client_args,
    admin_client,
    client_config,
    kafka_failure,
    parse_kv,
    parse_kv_list,
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
                                   "(TopicId, PartitionCount, ReplicationFactor, the topic's own config overrides), "
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

    p = sub.add_parser("alter", help="add partitions to a topic",
                       description="Increase a topic's partition count, like kafka-topics.sh --alter "
                                   "--partitions N. Partitions can only be added, never removed; records "
                                   "keep their partitions, so keyed data is placed differently afterwards.")
    p.add_argument("--topic", required=True, help="name of the topic")
    p.add_argument("--partitions", required=True, type=_positive("--partitions"), metavar="N",
                   help="the new total number of partitions (more than it has now)")
    add_client_args(p)
    p.set_defaults(func=cmd_alter)

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


def config_changes(add_config: list[str], delete_config: list[str], command: str) -> tuple[dict[str, str], list[str]]:
    """The keys to set (``--add-config K=V,...``) and to delete (``--delete-config K,...``) of an
    alter command; a UsageError when there are none or a key is given to both."""
    to_set: dict[str, str] = {}
    for text in add_config:
        to_set.update(split_config_assignments(text, "--add-config"))
    to_delete = [k.strip() for text in delete_config for k in text.split(",") if k.strip()]
    if not to_set and not to_delete:
        raise UsageError(f"{command} needs --add-config K=V and/or --delete-config K")
    both = sorted(set(to_set) & set(to_delete))
    if both:
        raise UsageError(f"{', '.join(both)} given to both --add-config and --delete-config")
    return to_set, to_delete


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
        raise kafka_failure(args, "cannot fetch metadata", e) from None


# -- commands ---------------------------------------------------------------------------------


def cmd_create(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    configs = parse_kv_list(args.config, "--config")
    for key, value in configs.items():
        check_topic_config(key, value)  # a bad key/value is a ConfigError naming it, before any I/O
    admin = admin_client(args)
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
        raise kafka_failure(args, f"cannot create topic {args.topic!r}", e) from None
    print(f"Created topic {args.topic}.")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    md = _metadata(admin_client(args), args)
    for name in sorted(md.topics):
        if args.exclude_internal and name.startswith("__"):
            continue
        print(name)
    return 0


def _topic_configs(admin: AdminClient, args: argparse.Namespace, names: list[str]) -> dict[str, str]:
    """``k=v,...`` of each topic's own config overrides (source DYNAMIC_TOPIC_CONFIG)."""
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
            raise kafka_failure(args, f"cannot describe configs of topic {resource.name!r}", e) from None
        # Only the topic's own overrides: a cluster-wide dynamic default (Kafka 4's controller
        # writes min.insync.replicas for the cluster) or a broker's static config is not a
        # property of this topic, and listing it on every topic reads as if someone set it.
        shown = [f"{e.name}={e.value}" for e in sorted(entries.values(), key=lambda e: e.name)
                 if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and e.value is not None]
        out[resource.name] = ",".join(shown)
    return out


def cmd_describe(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaError, KafkaException, TopicCollection

    admin = admin_client(args)
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
            raise kafka_failure(args, f"cannot describe topic {name!r}", e) from None
    configs = _topic_configs(admin, args, names)
    tiered = [d for d in descriptions if "remote.storage.enable=true" in configs.get(d.name, "").split(",")]
    extra = _tiered_partition_details(admin, args, tiered) if tiered else {}
    for desc in descriptions:
        print(format_topic_description(desc, configs.get(desc.name, ""), extra))
    return 0


REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"
EARLIEST_TIMESTAMP = -2
EARLIEST_LOCAL_TIMESTAMP = -4  # KIP-1005: ListOffsets v8+


def _tiered_partition_details(admin: AdminClient, args: argparse.Namespace,
                              descriptions: list[Any]) -> dict[tuple[str, int], str]:
    """``(topic, partition) -> extra partition-line fields`` of tiered topics."""
    offsets = _leader_offsets(args, descriptions)
    remote = _remote_segments(admin, args, descriptions)
    out: dict[tuple[str, int], str] = {}
    for desc in descriptions:
        for p in desc.partitions:
            key = (desc.name, p.id)
            start, local_start = offsets.get(key, (None, None))
            remote_start, remote_size = remote.get(key, (None, 0))
            out[key] = (f"\tLogStartOffset: {_shown(start)}\tLocalLogStartOffset: {_shown(local_start)}"
                        f"\tRemoteLogStartOffset: {_shown(remote_start)}\tRemoteSize: {remote_size}")
    return out


def _shown(value: int | None) -> str:
    return "none" if value is None or value < 0 else str(value)


def _leader_offsets(args: argparse.Namespace, descriptions: list[Any]) -> dict[tuple[str, int], tuple[int, int]]:
    """ListOffsets -2 and -4 of each partition, asked of its leader (PLAINTEXT listeners only:
    the tool opens its own socket; with TLS or SASL configured the offsets are not shown)."""
    import socket

    from strom import kafka_wire

    if not kafka_wire.plaintext(client_config(args)):
        return {}
    by_leader: dict[tuple[str, int], list[tuple[str, int]]] = {}
    for desc in descriptions:
        for p in desc.partitions:
            if p.leader is not None and p.leader.id >= 0:
                by_leader.setdefault((p.leader.host, p.leader.port), []).append((desc.name, p.id))
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for (host, port), partitions in by_leader.items():
        try:
            with socket.create_connection((host, port), timeout=METADATA_TIMEOUT_S) as sock:
                sock.settimeout(REQUEST_TIMEOUT_S)
                earliest = _list_offsets(sock, partitions, EARLIEST_TIMESTAMP)
                local = _list_offsets(sock, partitions, EARLIEST_LOCAL_TIMESTAMP)
        except OSError as e:
            raise ToolError(f"cannot ask {host}:{port} for log start offsets: {e}") from None
        for key in partitions:
            if key in earliest and key in local:
                out[key] = (earliest[key], local[key])
    return out


def _list_offsets(sock: Any, partitions: list[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
    """One ListOffsets v9 request on ``sock``: the offset of each partition answered without error."""
    from kio.schema.list_offsets.v9.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
    from kio.schema.list_offsets.v9.response import ListOffsetsResponse
    from kio.schema.types import BrokerId, TopicName
    from kio.static.primitive import i8, i32, i64

    from strom import kafka_wire

    topics: dict[str, list[int]] = {}
    for topic, index in partitions:
        topics.setdefault(topic, []).append(index)
    request = ListOffsetsRequest(replica_id=BrokerId(-1), isolation_level=i8(0), topics=tuple(
        ListOffsetsTopic(name=TopicName(t), partitions=tuple(ListOffsetsPartition(
            partition_index=i32(i), current_leader_epoch=i32(-1), timestamp=i64(timestamp)) for i in idx))
        for t, idx in topics.items()))
    response = kafka_wire.send(sock, 2, 9, request, ListOffsetsResponse, "strom-topics")
    return {(t.name, p.partition_index): int(p.offset) for t in response.topics for p in t.partitions
            if p.error_code == 0}


def _remote_segments(admin: AdminClient, args: argparse.Namespace,
                     descriptions: list[Any]) -> dict[tuple[str, int], tuple[int, int]]:
    """``(topic, partition) -> (first remote offset, bytes in remote storage)`` from the
    COPY_SEGMENT_FINISHED segments recorded in ``__remote_log_metadata`` (nothing if the topic
    does not exist: no copy was ever made)."""
    import uuid

    metadata = _metadata(admin, args, REMOTE_LOG_METADATA_TOPIC)
    meta_topic = metadata.topics.get(REMOTE_LOG_METADATA_TOPIC)
    if meta_topic is None or meta_topic.error is not None or not meta_topic.partitions:
        return {}
    from strom.plugins.exceptions import RemoteStorageError
    from strom.plugins.hookspecs.storage import RemoteLogSegmentState, TopicIdPartition
    from strom.tiered.topic_based_rlmm import COMMON_CLIENT_PREFIX, TopicBasedRemoteLogMetadataManager

    tips = {TopicIdPartition(uuid.UUID(bytes=bytes.fromhex(_uuid_hex(d.topic_id))), d.name, p.id): (d.name, p.id)
            for d in descriptions for p in d.partitions}
    props: dict[str, object] = {f"{COMMON_CLIENT_PREFIX}{k}": v for k, v in client_config(args).items()}
    props["remote.log.metadata.topic.num.partitions"] = len(meta_topic.partitions)
    props["remote.log.metadata.topic.replication.factor"] = 1  # the topic exists: it is only checked
    props["remote.log.metadata.consume.wait.ms"] = int(REQUEST_TIMEOUT_S * 1000)
    try:
        rlmm = TopicBasedRemoteLogMetadataManager(props, config_prefix="")
    except RemoteStorageError as e:
        raise ToolError(f"cannot read {REMOTE_LOG_METADATA_TOPIC}: {e}") from None
    out: dict[tuple[str, int], tuple[int, int]] = {}
    try:
        rlmm.on_partition_leadership_changes(set(), set(tips))
        for tip, key in tips.items():
            finished = [m for m in rlmm.list_remote_log_segments(tip)
                        if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]
            if finished:
                out[key] = (finished[0].start_offset, sum(m.segment_size_in_bytes for m in finished))
    except RemoteStorageError as e:
        raise ToolError(f"cannot read {REMOTE_LOG_METADATA_TOPIC}: {e}") from None
    finally:
        rlmm.close()
    return out


def _uuid_hex(value: Any) -> str:
    mask = (1 << 64) - 1
    return f"{value.get_most_significant_bits() & mask:016x}{value.get_least_significant_bits() & mask:016x}"


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


def format_topic_description(desc: Any, configs: str, extra: dict[tuple[str, int], str] | None = None) -> str:
    """kafka-topics.sh --describe output of one ``TopicDescription`` (``extra``: fields appended
    to a partition's line, the tiered-storage offsets and sizes)."""
    partitions = sorted(desc.partitions, key=lambda p: p.id)
    rf = len(partitions[0].replicas) if partitions else 0
    lines = [f"Topic: {desc.name}\tTopicId: {kafka_uuid(desc.topic_id)}\tPartitionCount: {len(partitions)}\t"
             f"ReplicationFactor: {rf}\tConfigs: {configs}"]
    for p in partitions:
        leader = p.leader.id if p.leader is not None and p.leader.id >= 0 else "none"
        replicas = ",".join(str(n.id) for n in p.replicas)
        isr = ",".join(str(n.id) for n in p.isr)
        lines.append(f"\tTopic: {desc.name}\tPartition: {p.id}\tLeader: {leader}\tReplicas: {replicas}\tIsr: {isr}"
                     f"{(extra or {}).get((desc.name, p.id), '')}")
    return "\n".join(lines)


def cmd_delete(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaError, KafkaException

    admin = admin_client(args)
    future = admin.delete_topics([args.topic], request_timeout=REQUEST_TIMEOUT_S)[args.topic]
    try:
        future.result()
    except KafkaException as e:
        if _error_code(e) == KafkaError.UNKNOWN_TOPIC_OR_PART:
            if args.if_exists:
                return 0
            raise ToolError(f"topic {args.topic!r} does not exist (pass --if-exists to accept that)") from None
        raise kafka_failure(args, f"cannot delete topic {args.topic!r}", e) from None
    return 0


def cmd_alter(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewPartitions

    admin = admin_client(args)
    future = admin.create_partitions([NewPartitions(args.topic, args.partitions)],
                                     request_timeout=REQUEST_TIMEOUT_S)[args.topic]
    try:
        future.result()
    except KafkaException as e:
        if _error_code(e) == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise ToolError(f"topic {args.topic!r} does not exist (list them with `strom topics list`)") from None
        raise kafka_failure(args, f"cannot add partitions to topic {args.topic!r}", e) from None
    return 0


def cmd_alter_config(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    to_set, to_delete = config_changes(args.add_config, args.delete_config, "alter-config")
    for key, value in to_set.items():
        check_topic_config(key, value)
    for key in to_delete:
        _check_known(key)
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in to_set.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in to_delete]
    resource = ConfigResource(ResourceType.TOPIC, args.topic, incremental_configs=entries)
    admin = admin_client(args)
    futures = admin.incremental_alter_configs([resource], request_timeout=REQUEST_TIMEOUT_S)
    try:
        next(iter(futures.values())).result()
    except KafkaException as e:
        raise kafka_failure(args, f"cannot alter the config of topic {args.topic!r}", e) from None
    print(f"Completed updating config for topic {args.topic}.")
    return 0


def _check_known(key: str) -> None:
    from strom.core.config import TOPIC_CONFIGS, unknown_topic_config

    if key not in TOPIC_CONFIGS:
        raise unknown_topic_config(key)
