"""OffsetCommit (key 8): a group member (or a simple consumer) commits offsets with metadata.

Topic checks (authorization, existence) answer per partition here; the group coordinator
answers the rest, for a KIP-848 group all partitions alike when it refuses the member epoch.
From v10 (KIP-848) topics are named by topic id in request and response: an id the metadata
image does not know (the zero UUID included) answers UNKNOWN_TOPIC_ID for its partitions,
before any authorization or coordinator check, as Kafka does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group.api_support import coordinator_of, denied_groups
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import GroupDeps
    from strom.core.server.handlers._kio_types import OffsetCommitRequest, OffsetCommitResponse

API_KEY = 8
VERSIONS = (2, 10)
TOPIC_IDS_FROM = 10  # first version that names topics by id (shared with OffsetFetch)


async def handle(deps: GroupDeps, ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    m = response_messages(API_KEY, ctx.api_version)
    by_id = ctx.api_version >= TOPIC_IDS_FROM
    group_id = request.group_id
    image = deps.image
    # The name of each request topic; None for an id the image does not know.
    # v10 names topics by id, v2-9 by name; mypy cannot narrow the Union by ctx.api_version.
    request_topics: Any = request.topics
    names: list[str | None] = [image.topic_name(t.topic_id) if by_id else t.name for t in request_topics]
    coordinator = coordinator_of(deps)
    group_error = 0
    if denied_groups(deps, ctx, "READ", [group_id]):
        group_error = int(ErrorCode.group_authorization_failed)
    elif coordinator is None:
        group_error = int(ErrorCode.coordinator_not_available)
    denied = authorize_topics(deps, ctx, "READ", [n for n in names if n is not None]) if not group_error else set()
    topics = image.topics
    # A denied group fails every partition; a missing coordinator is found after the topic checks.
    unknown_id = group_error if group_error == ErrorCode.group_authorization_failed else int(ErrorCode.unknown_topic_id)
    # Kafka's order: partitions failed here first (by topic, in request order), then the
    # coordinator's answers; a topic is placed where its first answer falls.
    answers: dict[int, list[tuple[int, int]]] = {}
    pending: list[tuple[int, str, int]] = []
    wanted: list[tuple[str, int, int, int, str | None]] = []
    for i, (t, name) in enumerate(zip(request_topics, names, strict=True)):
        known = topics.get(name) if name is not None else None
        for p in t.partitions:
            index = p.partition_index
            if name is None:
                code = unknown_id  # never reaches the coordinator
            elif group_error:
                code = group_error
            elif name in denied:
                code = int(ErrorCode.topic_authorization_failed)
            elif known is None or index not in known.partitions:
                code = int(ErrorCode.unknown_topic_or_partition)
            else:
                wanted.append((name, index, p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                               p.committed_metadata))
                pending.append((i, name, index))
                continue
            answers.setdefault(i, []).append((index, code))
    codes: dict[tuple[str, int], int] = {}
    if wanted and coordinator is not None:
        codes = await coordinator.commit_offsets(
            group_id, request.generation_id_or_member_epoch, request.member_id,
            getattr(request, "group_instance_id", None), wanted, api_version=ctx.api_version)
    for i, name, index in pending:
        answers.setdefault(i, []).append((index, codes.get((name, index), 0)))
    out = []
    for i, parts in answers.items():
        t = request.topics[i]
        # v10 echoes the request's topic id, known or not; older versions the name.
        out.append(m.make("OffsetCommitResponseTopic", name=names[i], topic_id=getattr(t, "topic_id", None),
                          partitions=tuple(m.make("OffsetCommitResponsePartition", partition_index=index,
                                                  error_code=code) for index, code in parts)))
    return m.make("OffsetCommitResponse", throttle_time=response_throttle(deps, ctx), topics=tuple(out))
