"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37): forwarded to the controller.

The controller validates each topic, commits the metadata records and replays them before
answering, so a topic created here is visible to the next Metadata request.
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.controller.quorum_controller import (
    CreatableTopic,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteTopicResult,
)
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import (
    THROTTLED_MESSAGE,
    MutationQuota,
    authorize_cluster,
    authorize_topics,
    response_throttle,
)
from strom.core.server.handlers.configs import describe_topic

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ControllerDeps
    from strom.core.server.handlers._kio_types import (
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        CreateTopicsRequest,
        CreateTopicsResponse,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
    )

ZERO_UUID = uuid.UUID(int=0)

# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: a request that would make more metadata
# records than this fails whole with POLICY_VIOLATION (EventHandlerExceptionInfo's message),
# validate-only or not. Without it one CreateTopics asking for 2^24 partitions kept the
# controller busy for a minute with every other request waiting behind it.
MAX_RECORDS_PER_USER_OP = 10000
EXCESSIVE = "Unable to perform excessively large batch operation."


def _create_topics_records(deps: ControllerDeps, topics: Any) -> int:
    """How many metadata records creating ``topics`` would take (a topic, its configs, its partitions)."""
    total = 0
    for t in topics:
        if t.assignments:
            partitions = len(t.assignments)
        else:
            partitions = deps.config.num_partitions if t.num_partitions == -1 else max(t.num_partitions, 0)
        total += 1 + len(t.configs) + partitions
    return total


def _create_partitions_records(deps: ControllerDeps, topics: Any) -> int:
    total = 0
    for t in topics:
        existing = deps.image.topics.get(t.name)
        if existing is not None:
            total += max(t.count - len(existing.partitions), 0)
    return total


class CreateTopics:
    API_KEY = 19
    VERSIONS = (2, 7)

    @staticmethod
    async def handle(deps: ControllerDeps, ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
        m = response_messages(19, ctx.api_version)
        names = [t.name for t in request.topics]
        may_create_all = authorize_cluster(deps, ctx, "CREATE")
        denied = set() if may_create_all else authorize_topics(deps, ctx, "CREATE", names)
        if _create_topics_records(deps, request.topics) > MAX_RECORDS_PER_USER_OP:
            return m.make("CreateTopicsResponse", throttle_time=response_throttle(deps, ctx), topics=tuple(
                m.make("CreatableTopicResult", name=t.name, topic_id=ZERO_UUID,
                       error_code=int(ErrorCode.policy_violation), error_message=EXCESSIVE,
                       topic_config_error_code=0, num_partitions=-1, replication_factor=-1, configs=())
                for t in request.topics))
        duplicates = {n for n in names if names.count(n) > 1}
        # KIP-599: each new topic's partitions are charged to controller_mutation_rate, in order.
        quota, throttled = MutationQuota(deps, ctx, strict_since_version=6), set()
        wanted = []
        for t in request.topics:
            if t.name in denied or t.name in duplicates:
                continue
            if t.name not in deps.image.topics and not quota.admit(
                    len(t.assignments) or (deps.config.num_partitions if t.num_partitions == -1 else t.num_partitions)):
                throttled.add(t.name)
                continue
            wanted.append(CreatableTopic(
                name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor,
                assignments={a.partition_index: list(a.broker_ids) for a in t.assignments},
                configs={c.name: c.value for c in t.configs}))
        results = {r.name: r for r in await deps.controller.create_topics(
            wanted, validate_only=bool(request.validate_only))} if wanted else {}
        out = []
        for t in request.topics:
            if t.name in denied:
                r: SimpleNamespace | CreateTopicResult = SimpleNamespace(
                    error_code=int(ErrorCode.topic_authorization_failed), error_message=None)
            elif t.name in duplicates:
                r = SimpleNamespace(error_code=int(ErrorCode.invalid_request),
                                    error_message=f"Create topics request from client `{ctx.client_id}` "
                                                  f"contains multiple entries for the following topics: {t.name}")
            elif t.name in throttled:
                r = SimpleNamespace(error_code=int(ErrorCode.throttling_quota_exceeded), error_message=THROTTLED_MESSAGE)
            else:
                r = results[t.name]
            configs: tuple[Any, ...] = ()
            topic_id, partitions, rf = ZERO_UUID, -1, -1
            if r.error_code == 0:
                topic_id = getattr(r, "topic_id", None) or ZERO_UUID
                partitions, rf = r.num_partitions, r.replication_factor
                if t.name in deps.image.topics and ctx.api_version >= 5:
                    configs = tuple(
                        m.make("CreatableTopicConfigs", name=c.name, value=c.value, read_only=c.read_only,
                               config_source=c.config_source, is_sensitive=c.is_sensitive)
                        for c in describe_topic(deps, t.name, None, False, False,
                                                response_messages(32, 4)))
            out.append(m.make("CreatableTopicResult", name=t.name, topic_id=topic_id, error_code=r.error_code,
                              error_message=r.error_message, topic_config_error_code=0,
                              num_partitions=partitions, replication_factor=rf, configs=configs))
        return m.make("CreateTopicsResponse", throttle_time=response_throttle(deps, ctx), topics=tuple(out))


class DeleteTopics:
    API_KEY = 20
    VERSIONS = (1, 6)

    @staticmethod
    async def handle(deps: ControllerDeps, ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
        m = response_messages(20, ctx.api_version)
        image = deps.image
        by_version: Any = request  # mypy cannot narrow the Union by ctx.api_version
        entries: list[tuple[str | None, uuid.UUID | None]]
        if ctx.api_version >= 6:
            entries = [(t.name, t.topic_id) for t in by_version.topics]
        else:
            entries = [(n, None) for n in by_version.topic_names]
        resolved: list[tuple[str | None, uuid.UUID | None, int, str | None]] = []
        for name, topic_id in entries:
            if name is None and topic_id is not None and topic_id != ZERO_UUID:
                found = image.topics_by_id.get(topic_id)
                if found is None:
                    resolved.append((None, topic_id, int(ErrorCode.unknown_topic_id), None))
                    continue
                name = found.name
            resolved.append((name, topic_id, 0, None))
        names = [n for n, _, code, _ in resolved if code == 0 and n]
        denied = authorize_topics(deps, ctx, "DELETE", names)
        results: dict[str | None, SimpleNamespace | DeleteTopicResult]
        if not deps.config.delete_topic_enable:
            results = {n: SimpleNamespace(error_code=int(ErrorCode.topic_deletion_disabled), error_message=None)
                       for n in names}
        else:
            quota = MutationQuota(deps, ctx, strict_since_version=5)
            todo = []
            results = {}
            for n in names:
                if n in denied:
                    continue
                existing = image.topics.get(n)
                if existing is not None and not quota.admit(len(existing.partitions)):
                    results[n] = SimpleNamespace(error_code=int(ErrorCode.throttling_quota_exceeded),
                                                 error_message=THROTTLED_MESSAGE)
                else:
                    todo.append(n)
            if todo:
                results.update({r.name: r for r in await deps.controller.delete_topics(todo)})
        out = []
        for name, topic_id, code, message in resolved:
            tid = topic_id or ZERO_UUID
            if code == 0 and name in denied:
                code = int(ErrorCode.topic_authorization_failed)
            elif code == 0 and name in results:
                code, message = results[name].error_code, results[name].error_message
                tid = getattr(results[name], "topic_id", None) or tid
            out.append(m.make("DeletableTopicResult", name=name, topic_id=tid, error_code=code,
                              error_message=message))
        return m.make("DeleteTopicsResponse", throttle_time=response_throttle(deps, ctx), responses=tuple(out))


class CreatePartitions:
    API_KEY = 37
    VERSIONS = (0, 3)

    @staticmethod
    async def handle(deps: ControllerDeps, ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
        m = response_messages(37, ctx.api_version)
        names = [t.name for t in request.topics]
        denied = authorize_topics(deps, ctx, "ALTER", names)
        if _create_partitions_records(deps, [t for t in request.topics if t.name not in denied])\
                > MAX_RECORDS_PER_USER_OP:
            return m.make("CreatePartitionsResponse", throttle_time=response_throttle(deps, ctx), results=tuple(
                m.make("CreatePartitionsTopicResult", name=t.name, error_code=int(ErrorCode.policy_violation),
                       error_message=EXCESSIVE) for t in request.topics))
        quota, throttled = MutationQuota(deps, ctx, strict_since_version=3), set()
        for t in request.topics:
            existing = deps.image.topics.get(t.name)
            if t.name not in denied and existing is not None and t.count > len(existing.partitions) \
                    and not quota.admit(t.count - len(existing.partitions)):
                throttled.add(t.name)
        wanted = [CreatePartitionsTopic(
            name=t.name, count=t.count,
            assignments=[list(a.broker_ids) for a in t.assignments] if t.assignments else None)
            for t in request.topics if t.name not in denied and t.name not in throttled]
        results = {r.name: r for r in await deps.controller.create_partitions(
            wanted, validate_only=bool(request.validate_only))} if wanted else {}
        out = []
        for t in request.topics:
            if t.name in denied:
                code, message = int(ErrorCode.topic_authorization_failed), None
            elif t.name in throttled:
                code, message = int(ErrorCode.throttling_quota_exceeded), THROTTLED_MESSAGE
            else:
                code, message = results[t.name].error_code, results[t.name].error_message
            out.append(m.make("CreatePartitionsTopicResult", name=t.name, error_code=code, error_message=message))
        return m.make("CreatePartitionsResponse", throttle_time=response_throttle(deps, ctx), results=tuple(out))
