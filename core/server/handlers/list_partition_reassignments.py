"""ListPartitionReassignments (key 46, KIP-455): the partitions being reassigned, from the image.

A partition is being reassigned while its registration has adding or removing replicas. strom
never starts a reassignment (AlterPartitionReassignments only accepts the current replica list),
so the answer is normally empty; it is still read from the image so that a reassignment that
came from a metadata log written elsewhere shows. As Kafka's controller: a null topic list means
every topic, unknown topics and partitions are skipped silently, and a principal without DESCRIBE
on the cluster gets a top-level CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ImageDeps
    from strom.core.server.handlers._kio_types import (
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    )

API_KEY = 46
VERSIONS = (0, 0)


async def handle(deps: ImageDeps, ctx: RequestContext, request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    m = response_messages(API_KEY, ctx.api_version)
    throttle = response_throttle(deps, ctx)
    if not authorize_cluster(deps, ctx, "DESCRIBE"):
        return m.make("ListPartitionReassignmentsResponse", throttle_time=throttle,
                      error_code=int(ErrorCode.cluster_authorization_failed),
                      error_message="Cluster authorization failed.", topics=())
    image = deps.image
    # topic -> the partitions asked about (None: all of them); a topic named twice merges.
    wanted: dict[str, list[int] | None]
    if request.topics is None:
        wanted = dict.fromkeys(image.topics)
    else:
        wanted = {}
        for t in request.topics:
            wanted.setdefault(str(t.name), []).extend(int(p) for p in t.partition_indexes)  # type: ignore[union-attr]
    topics = []
    for name, indexes in wanted.items():
        topic_image = image.topics.get(name)
        if topic_image is None:
            continue
        chosen = topic_image.partitions if indexes is None else dict.fromkeys(indexes)
        ongoing = []
        for index in chosen:
            part = topic_image.partitions.get(index)
            if part is None or not (part.adding_replicas or part.removing_replicas):
                continue
            ongoing.append(m.make("OngoingPartitionReassignment", partition_index=index, replicas=part.replicas,
                                  adding_replicas=part.adding_replicas, removing_replicas=part.removing_replicas))
        if ongoing:
            topics.append(m.make("OngoingTopicReassignment", name=name, partitions=tuple(ongoing)))
    return m.make("ListPartitionReassignmentsResponse", throttle_time=throttle, error_code=0,
                  error_message=None, topics=tuple(topics))
