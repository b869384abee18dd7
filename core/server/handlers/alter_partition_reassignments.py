"""AlterPartitionReassignments (key 45, KIP-455/KIP-860): validated against the image, never moved.

strom is one node, so the only valid target replica list of any partition is ``[this broker]``,
which is what every partition already has: such a request succeeds without a metadata change
(Kafka's ``PartitionChangeBuilder`` builds no record either). Everything else is refused with
Kafka's messages (read from ``ReplicationControlManager``, checked against Kafka 4.3.1):

* unknown topic: ``Unable to find a topic named T.``; unknown partition: ``Unable to find
  partition T:P.`` (UNKNOWN_TOPIC_OR_PARTITION);
* the target list is checked in ascending broker order as ``validateManualPartitionAssignment``
  does: empty, an unregistered broker, a broker named twice (INVALID_REPLICA_ASSIGNMENT);
* a cancellation (null replicas) with no reassignment in progress: NO_REASSIGNMENT_IN_PROGRESS,
  no message (``ApiError.fromThrowable`` drops a message equal to the error's default);
* a principal without ALTER on the cluster: CLUSTER_AUTHORIZATION_FAILED on the response and on
  every partition (``AlterPartitionReassignmentsRequest.getErrorResponse``).

A valid target that differs from the current replicas (or cancelling a reassignment some other
writer of the metadata log started) would need real replica movement, which strom does not do:
it answers INVALID_REPLICA_ASSIGNMENT saying so rather than pretending.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.metadata.image import MetadataImage
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, find_partition, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ImageDeps
    from strom.core.server.handlers._kio_types import (
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
    )

API_KEY = 45
VERSIONS = (0, 1)

Result = tuple[int, str | None]
_OK: Result = (0, None)
_UNSUPPORTED = "strom is a single-node cluster and does not move replicas"


def _invalid(message: str) -> Result:
    return int(ErrorCode.invalid_replica_assignment), message


def _validate_assignment(image: MetadataImage, replicas: list[int]) -> Result | None:
    """Kafka's ``validateManualPartitionAssignment`` (no replication factor to match)."""
    if not replicas:
        return _invalid("The manual partition assignment includes an empty replica list.")
    previous: int | None = None
    for broker_id in sorted(replicas):
        if broker_id not in image.brokers:
            return _invalid(f"The manual partition assignment includes broker {broker_id}, "
                            "but no such broker is registered.")
        if broker_id == previous:
            return _invalid(f"The manual partition assignment includes the broker {broker_id} more than once.")
        previous = broker_id
    return None


def reassign(image: MetadataImage, topic: str, index: int, replicas: list[int] | None,
             allow_rf_change: bool) -> Result:
    """The outcome of one partition's target (``None`` cancels)."""
    part = find_partition(image, topic, index, f"Unable to find a topic named {topic}.",
                          f"Unable to find partition {topic}:{index}.")
    if isinstance(part, tuple):
        return part
    in_progress = bool(part.adding_replicas or part.removing_replicas)
    if replicas is None:
        if not in_progress:
            return int(ErrorCode.no_reassignment_in_progress), None
        return _invalid(_UNSUPPORTED)
    invalid = _validate_assignment(image, replicas)
    if invalid is not None:
        return invalid
    if not allow_rf_change and len(replicas) != len(part.replicas):
        return int(ErrorCode.invalid_replication_factor),\
            f"The replication factor is changed from {len(part.replicas)} to {len(replicas)}"
    if tuple(replicas) == part.replicas and not in_progress:
        return _OK  # nothing to change, as Kafka's PartitionChangeBuilder finds
    return _invalid(_UNSUPPORTED)


async def handle(deps: ImageDeps, ctx: RequestContext, request: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
    m = response_messages(API_KEY, ctx.api_version)
    throttle = response_throttle(deps, ctx)
    allow_rf_change = bool(getattr(request, "allow_replication_factor_change", True))  # v1+
    # zip() joins the per-version tuple types to object: the topics as one list of the Union.
    request_topics = [*request.topics]
    if not authorize_cluster(deps, ctx, "ALTER"):
        top: Result = (int(ErrorCode.cluster_authorization_failed), "Cluster authorization failed.")
        results = [[top for _ in t.partitions] for t in request.topics]
    else:
        image = deps.image
        # One answer per request entry, in order: Kafka answers a partition named twice twice.
        results = [[reassign(image, str(t.name), int(p.partition_index),
                             None if p.replicas is None else [int(r) for r in p.replicas], allow_rf_change)
                    for p in t.partitions] for t in request.topics]
        # Kafka 4.3.1 answers an empty message (not null) when the request names no topic.
        top = (0, None if request.topics else "")
    responses = tuple(
        m.make("ReassignableTopicResponse", name=t.name, partitions=tuple(
            m.make("ReassignablePartitionResponse", partition_index=p.partition_index,
                   error_code=code, error_message=message)
            for p, (code, message) in zip(t.partitions, topic_results, strict=True)))
        for t, topic_results in zip(request_topics, results, strict=True))
    return m.make("AlterPartitionReassignmentsResponse", throttle_time=throttle,
                  allow_replication_factor_change=allow_rf_change, error_code=top[0], error_message=top[1],
                  responses=responses)
