"""Metadata (key 3): brokers, controller, topics and partition leadership.

Answers from the latest committed MetadataImage. Requested topics that do not exist are
created through the controller when the request allows it and ``auto.create.topics.enable``
is on; creation commits before the answer, so the client sees the new topic at once.

Topics asked for by an id the image does not know answer UNKNOWN_TOPIC_ID with that id, ahead
of the other topics (Kafka's order). v13 (KIP-1102) adds a top-level error code for
REBOOTSTRAP_REQUIRED; Kafka 4.3's broker never sets it in a Metadata answer (clients raise it
themselves when no bootstrap broker is reachable), so neither does strom: it is always 0.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import INTERNAL_TOPICS, authorize_topics, response_throttle
from strom.core.topic_names import validate_topic_name

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import MetadataDeps
    from strom.core.server.handlers._kio_types import MetadataRequest, MetadataResponse

API_KEY = 3
VERSIONS = (0, 13)
ZERO_UUID = uuid.UUID(int=0)


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
                      cluster_id=deps.cluster_id, controller_id=-1, cluster_authorized_operations=-2147483648,
                      error_code=0, topics=tuple(
                          m.make("MetadataResponseTopic", error_code=int(ErrorCode.invalid_request),
                                 name=t.name or "", topic_id=getattr(t, "topic_id", None) or ZERO_UUID,
                                 is_internal=False, partitions=()) for t in requested))

    errors: dict[str, int] = {}
    unknown_ids: list[uuid.UUID] = []
    if requested is None:
        names = sorted(image.topics)
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
            names.append(name)
        missing = [n for n in names if n not in image.topics]
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

    described = [n for n in names if n not in errors and n in image.topics]
    denied = authorize_topics(deps, ctx, "DESCRIBE", described)
    if requested is None:
        described = [n for n in described if n not in denied]  # unauthorized topics are omitted
    else:
        for n in denied:
            errors[n] = int(ErrorCode.topic_authorization_failed)

    topics = [m.make("MetadataResponseTopic", error_code=int(ErrorCode.unknown_topic_id), name=None, topic_id=tid,
                     is_internal=False, partitions=()) for tid in unknown_ids]
    for name in names:
        if name in errors or name not in image.topics:
            code = errors.get(name, int(ErrorCode.unknown_topic_or_partition))
            topics.append(m.make("MetadataResponseTopic", error_code=code, name=name, topic_id=ZERO_UUID,
                                 is_internal=name in INTERNAL_TOPICS, partitions=()))
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
                             is_internal=name in INTERNAL_TOPICS, partitions=tuple(parts)))

    brokers = tuple(m.make("MetadataResponseBroker", node_id=node, host=host, port=port, rack=rack)
                    for node, host, port, rack, _fenced in deps.broker_endpoints(ctx.listener_name))
    return m.make("MetadataResponse", throttle_time=response_throttle(deps, ctx), brokers=brokers,
                  cluster_id=deps.cluster_id, controller_id=deps.controller_id(), topics=tuple(topics),
                  cluster_authorized_operations=-2147483648, error_code=0)
