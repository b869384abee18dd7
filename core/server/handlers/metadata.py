"""Metadata (key 3): brokers, controller, topics and partition leadership.

Answers from the latest committed MetadataImage. Requested topics that do not exist are
created through the controller when the request allows it and ``auto.create.topics.enable``
is on; creation commits before the answer, so the client sees the new topic at once.

Topics asked for by an id the image does not know answer UNKNOWN_TOPIC_ID with that id, ahead
of the other topics (Kafka's order). v13 (KIP-1102) adds a top-level error code for
REBOOTSTRAP_REQUIRED; Kafka 4.3's broker never sets it in a Metadata answer (clients raise it
themselves when no bootstrap broker is reachable), so neither does strom: it is always 0.

KIP-430: from v8 a client may ask for the operations it is allowed on each topic
(``include_topic_authorized_operations``) and, up to v10, on the cluster; both are answered
from the authorizer plugin as Kafka's AuthHelper.authorizedOperations answers them (every
supported operation with the allow-all built-in, as Kafka without an authorizer).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import (
    AUTHORIZED_OPERATIONS_OMITTED,
    INTERNAL_TOPICS,
    authorize_topics,
    authorized_operations,
    cluster_authorized_operations,
    response_throttle,
)
from strom.core.topic_names import validate_topic_name

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import MetadataDeps
    from strom.core.server.handlers._kio_types import MetadataRequest, MetadataResponse

API_KEY = 3
VERSIONS = (0, 13)
ZERO_UUID = uuid.UUID(int=0)
AUTHORIZED_OPERATIONS_SINCE = 8  # include_topic_authorized_operations (KIP-430)
CLUSTER_OPERATIONS_UNTIL = 10  # include_cluster_authorized_operations moved to DescribeCluster (KIP-700)


async def handle(deps: MetadataDeps, ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    version = ctx.api_version
    m = response_messages(API_KEY, version)
    image = deps.image

    requested = request.topics
    if requested is not None and version == 0 and len(requested) == 0:
        requested = None  # v0: an empty list means all topics

    if requested is not None and version < 12 and any(
            t.name is None or (getattr(t, "topic_id", None) or ZERO_UUID) != ZERO_UUID for t in requested):
        # Kafka's KafkaApis: "Topic name can not be null for version N" / "Topic IDs are not
        # supported in requests for version N", answered as MetadataRequest.getErrorResponse
        # does: INVALID_REQUEST for every topic, a null name sent back as "" (v10-11 responses
        # cannot carry a null name).
        return m.make("MetadataResponse", throttle_time=response_throttle(deps, ctx), brokers=(),
                      cluster_id=deps.cluster_id, controller_id=-1,
                      cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
                      error_code=0, topics=tuple(
                          m.make("MetadataResponseTopic", error_code=int(ErrorCode.invalid_request),
                                 name=t.name or "", topic_id=getattr(t, "topic_id", None) or ZERO_UUID,
                                 is_internal=False, partitions=()) for t in requested))

    errors: dict[str, int] = {}
    unknown_ids: list[uuid.UUID] = []
    named_by_id: set[str] = set()
    if requested is None:
        # Listing every topic: those the caller may not DESCRIBE are left out.
        every = sorted(image.topics)
        # A filter, not a request for those topics: no audit line per hidden one (Kafka's logIfDenied=false).
        visible = deps.authorize(ctx, "DESCRIBE", "TOPIC", every, audit=False) if every else []
        names = [n for n, ok in zip(every, visible, strict=True) if ok]
    else:
        names = []
        for t in requested:
            name: str | None = t.name
            if name is None:
                topic_id = getattr(t, "topic_id", None)
                found = image.topics_by_id.get(topic_id) if topic_id else None
                if found is None:
                    unknown_ids.append(topic_id or ZERO_UUID)
                    continue
                name = found.name
                named_by_id.add(name)
            names.append(name)
        # Kafka authorizes DESCRIBE before it looks a topic up (or creates it): a topic the
        # caller may not describe answers TOPIC_AUTHORIZATION_FAILED whether it exists or not.
        for n in authorize_topics(deps, ctx, "DESCRIBE", list(dict.fromkeys(names))):
            errors[n] = int(ErrorCode.topic_authorization_failed)
        missing = [n for n in names if n not in errors and n not in image.topics]
        if missing:
            allow = getattr(request, "allow_auto_topic_creation", True) and deps.config.auto_create_topics_enable
            creatable = []
            for n in missing:
                try:
                    validate_topic_name(n)
                except Exception:
                    errors[n] = int(ErrorCode.invalid_topic_exception)
                    continue
                if allow and n not in INTERNAL_TOPICS:
                    creatable.append(n)
                else:
                    errors[n] = int(ErrorCode.unknown_topic_or_partition)
            if creatable:
                denied = authorize_topics(deps, ctx, "CREATE", creatable)
                if denied and not deps.authorize(ctx, "CREATE", "CLUSTER", ["kafka-cluster"])[0]:
                    for n in denied:
                        errors[n] = int(ErrorCode.topic_authorization_failed)
                    creatable = [n for n in creatable if n not in denied]
                results = await deps.auto_create_topics(creatable)
                for n, code in results.items():
                    if code not in (0, int(ErrorCode.topic_already_exists)):
                        errors[n] = code
            image = deps.image

    # KIP-430: the operations the caller may perform on each topic it was told about, as Kafka
    # computes them (for every topic but those refused for DESCRIBE or CREATE, and unknown ids).
    ops: dict[str, int] = {}
    if version >= AUTHORIZED_OPERATIONS_SINCE and getattr(request, "include_topic_authorized_operations", False):
        shown = list(dict.fromkeys(n for n in names if errors.get(n) != ErrorCode.topic_authorization_failed))
        ops = dict(zip(shown, authorized_operations(deps, ctx, "TOPIC", shown), strict=True))
    cluster_ops = AUTHORIZED_OPERATIONS_OMITTED
    if AUTHORIZED_OPERATIONS_SINCE <= version <= CLUSTER_OPERATIONS_UNTIL and getattr(
            request, "include_cluster_authorized_operations", False):
        cluster_ops = cluster_authorized_operations(deps, ctx)

    topics = [m.make("MetadataResponseTopic", error_code=int(ErrorCode.unknown_topic_id), name=None, topic_id=tid,
                     is_internal=False, partitions=()) for tid in unknown_ids]
    for name in names:
        topic_ops = ops.get(name, AUTHORIZED_OPERATIONS_OMITTED)
        if name in errors or name not in image.topics:
            code = errors.get(name, int(ErrorCode.unknown_topic_or_partition))
            if name in named_by_id and code == ErrorCode.topic_authorization_failed:
                # Asked for by id, Kafka answers with the id (not secret) and without the name.
                known = image.topics.get(name)
                topics.append(m.make("MetadataResponseTopic", error_code=code, name=None,
                                     topic_id=known.topic_id if known is not None else ZERO_UUID,
                                     is_internal=False, partitions=(), topic_authorized_operations=topic_ops))
                continue
            topics.append(m.make("MetadataResponseTopic", error_code=code, name=name, topic_id=ZERO_UUID,
                                 is_internal=name in INTERNAL_TOPICS, partitions=(),
                                 topic_authorized_operations=topic_ops))
            continue
        topic = image.topics[name]
        parts = []
        for index in sorted(topic.partitions):
            reg = topic.partitions[index]
            leader_ok = reg.leader >= 0
            parts.append(m.make(
                "MetadataResponsePartition",
                error_code=0 if leader_ok else int(ErrorCode.leader_not_available),
                partition_index=index, leader_id=reg.leader, leader_epoch=reg.leader_epoch,
                replica_nodes=tuple(reg.replicas), isr_nodes=tuple(reg.isr), offline_replicas=()))
        topics.append(m.make("MetadataResponseTopic", error_code=0, name=name, topic_id=topic.topic_id,
                             is_internal=name in INTERNAL_TOPICS, partitions=tuple(parts),
                             topic_authorized_operations=topic_ops))

    brokers = tuple(m.make("MetadataResponseBroker", node_id=node, host=host, port=port, rack=rack)
                    for node, host, port, rack, _fenced in deps.broker_endpoints(ctx.listener_name))
    return m.make("MetadataResponse", throttle_time=response_throttle(deps, ctx), brokers=brokers,
                  cluster_id=deps.cluster_id, controller_id=deps.controller_id(), topics=tuple(topics),
                  cluster_authorized_operations=cluster_ops, error_code=0)
